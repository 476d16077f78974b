#!/usr/bin/env bash
# Install, packaging and examples, checked as a new user would:
#  1. `cmake --install` of an existing build (${BUILD_DIR:-build}) into a
#     scratch prefix, which is then moved elsewhere (relocatable);
#  2. no installed file names the source or build tree (strings), every tool
#     answers --version, bp-devices starts with no warning and no rejection;
#  3. the examples build out of tree against the moved install: the C plugin
#     and the C++ app with find_package(Backplane), the C app with plain
#     `cc $(pkg-config --cflags --libs backplane)`;
#  4. the C plugin, dropped into a folder on BP_PLUGIN_PATH, is listed by
#     bp-devices, passes bp-test-ops --plugin and runs in bp-run;
#  5. the Python module, when it was built, imports from the moved install
#     (PYTHONPATH at its site folder), finds the install's own plugins and
#     runs an op;
#  6. `cpack -G DEB` packages: contents, dependencies, and the tools (and the
#     Python module) run from the packages unpacked into a scratch root.
# Needs an existing build; takes about a minute beyond it.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd -P)
build=$(cd "${BUILD_DIR:-build}" && pwd -P)
jobs=$(nproc)
tmp=$(mktemp -d /tmp/bp-install-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test-install: FAIL: $*" >&2; exit 1; }
step() { echo "== install test: $*"; }

step "cmake --install into a scratch prefix, then moved"
cmake --install "$build" --prefix "$tmp/first" >/dev/null
mv "$tmp/first" "$tmp/prefix"
P=$tmp/prefix
for f in lib/libbackplane.so lib/cmake/Backplane/BackplaneConfig.cmake lib/pkgconfig/backplane.pc \
         lib/pkgconfig/backplane-plugin.pc include/backplane/version.h include/backplane/backplane.h \
         include/backplane/tensor.h include/backplane/plugin.h include/backplane/deprecated.h \
         include/backplane/plugin_guard.hpp lib/backplane/plugins/libbp-cpu.so \
         bin/bp-devices share/backplane/plugin_exports.map; do
  [ -e "$P/$f" ] || fail "$f is not installed"
done
soname=$(readelf -d "$P/lib/libbackplane.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[[ "$soname" == libbackplane.so.[0-9]* ]] || fail "libbackplane.so has no versioned SONAME ($soname)"

step "no build-tree or source-tree path in any installed file"
if grep -rlaF -e "$build" -e "$src/" "$P"; then fail "the files above name $build or $src"; fi

step "installed tools: --version, and a start with no warning"
for t in "$P"/bin/bp-*; do
  "$t" --version | grep -qE "^$(basename "$t") [0-9]+\.[0-9]+\.[0-9]+ \(libbackplane " || fail "$t --version"
done
# With the build tree still present: an installed program must not look there.
env -u BP_PLUGIN_PATH "$P/bin/bp-devices" >"$tmp/devices.txt" 2>"$tmp/devices.err"
[ ! -s "$tmp/devices.err" ] || { cat "$tmp/devices.err"; fail "bp-devices printed warnings"; }
grep -q "libbp-cpu.so" "$tmp/devices.txt" || fail "the moved install does not find its own cpu plugin"
! grep -qE "^(Rejected: [1-9]|Problems)" "$tmp/devices.txt" || { cat "$tmp/devices.txt"; fail "bp-devices lists problems"; }
! grep -qF "$build" "$tmp/devices.txt" || fail "bp-devices loaded something from the build tree"

step "examples built out of tree against the install"
export PKG_CONFIG_PATH=$P/lib/pkgconfig
cmake_ex() {  # folder: configure + build one example with CMake and find_package
  cmake -S "$src/examples/$1" -B "$tmp/ex-$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$P" \
        -DCMAKE_COMPILE_WARNING_AS_ERROR=ON >/dev/null
  cmake --build "$tmp/ex-$1" -j "$jobs" >/dev/null
}
cmake_ex plugin-c
cmake_ex app-cpp
# Plain cc and pkg-config; the rpath only because this prefix is not on the
# loader's path (an install to /usr needs none).
cc -std=c99 -Wall -Wextra -Werror -O2 "$src/examples/app-c/main.c" -o "$tmp/app-c" \
   $(pkg-config --cflags --libs backplane) -Wl,-rpath,"$(pkg-config --variable=libdir backplane)" -lm
# The plugin by hand too, with backplane-plugin.pc: the same two exports.
cc -std=c99 -Wall -Wextra -Werror -O2 -shared -fPIC "$src/examples/plugin-c/plugin.c" -o "$tmp/libbp-cc.so" \
   $(pkg-config --cflags --libs backplane-plugin)
mkdir "$tmp/plugins"
cp "$tmp/ex-plugin-c/libbp-cexample.so" "$tmp/plugins/"
for so in "$tmp/plugins/libbp-cexample.so" "$tmp/libbp-cc.so"; do
  exports=$(nm -D --defined-only "$so" | awk '{print $3}' | sort | tr '\n' ' ')
  [ "$exports" = "bp_plugin_descriptor bp_plugin_entry " ] || fail "$so exports: $exports"
done

step "the C plugin through the installed tools (BP_PLUGIN_PATH)"
export BP_PLUGIN_PATH=$tmp/plugins
"$P/bin/bp-devices" >"$tmp/devices.txt" 2>&1
grep -q 'cexample:0' "$tmp/devices.txt" || { cat "$tmp/devices.txt"; fail "bp-devices does not list cexample"; }
"$P/bin/bp-test-ops" --plugin "$tmp/plugins/libbp-cexample.so" -o ADD -o MUL -o SCALE >"$tmp/test-ops.txt" ||
  { cat "$tmp/test-ops.txt"; fail "bp-test-ops --plugin"; }
tail -n 3 "$tmp/test-ops.txt"
"$P/bin/bp-run" --device "cexample;cpu" --runs 2 >"$tmp/run.txt" || { cat "$tmp/run.txt"; fail "bp-run"; }
grep -qE "^  cexample:0 +[1-9]" "$tmp/run.txt" || { cat "$tmp/run.txt"; fail "bp-run ran no node on cexample"; }
"$tmp/app-c" "cexample;cpu"
"$tmp/app-c" cpu >/dev/null
"$tmp/ex-app-cpp/app-cpp" cpu
unset BP_PLUGIN_PATH PKG_CONFIG_PATH

# The Python module: built when pybind11 was found (python/CMakeLists.txt).
py=${BP_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3
have_py=0
compgen -G "$build/python/backplane/_backplane*.so" >/dev/null && have_py=1
py_check() {  # prefix root: import the module installed there, list its plugins, run one op
  local mod site
  mod=$(find "$1" -name '_backplane*.so' -path '*/backplane/*' | head -n 1)
  [ -n "$mod" ] || fail "the Python module is not installed under $1"
  site=$(dirname "$(dirname "$mod")")
  env -u BP_PLUGIN_PATH PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 "$py" - "$1" <<'PY' || fail "the Python module under $1"
import sys
import numpy as np
import backplane as bp
root = sys.argv[1]
cpu = [p for p in bp.plugins() if p.name == "cpu"]
assert cpu and cpu[0].path.startswith(root), [p.path for p in bp.plugins()]
assert bp.__file__.startswith(root), bp.__file__
out = bp.compute(bp.tensor(np.ones((2, 3), np.float32)) @ bp.tensor(np.ones((3, 4), np.float32)))
assert (out == 3).all(), out
print("python: backplane", bp.__version__, "from", bp.__file__.rsplit("/", 2)[0], "runs on", cpu[0].path)
PY
}
if [ "$have_py" = 1 ]; then
  step "the Python module from the moved install"
  py_check "$P"
fi

step "Debian packages (cpack -G DEB)"
# (cpack warns that the plugins have no SONAME: right for dlopen'ed modules.)
(cd "$build" && cpack -G DEB -B "$tmp/deb" >"$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; fail "cpack -G DEB"; }
shopt -s nullglob
debs=("$tmp"/deb/*.deb)
[ ${#debs[@]} -eq $((3 + have_py)) ] || fail "expected $((3 + have_py)) .deb files, got: ${debs[*]##*/}"
for d in "${debs[@]}"; do
  echo "-- ${d##*/}: $(dpkg-deb -f "$d" Package) depends on: $(dpkg-deb -f "$d" Depends)"
  dpkg-deb -c "$d" >"$tmp/contents.txt"
  case "$(dpkg-deb -f "$d" Package)" in
    libbackplane[0-9]*) grep -q '/libbackplane\.so\.[0-9]*$\|libbackplane\.so\.[0-9]* ->' "$tmp/contents.txt" &&
                        grep -q 'backplane/plugins/libbp-cpu\.so' "$tmp/contents.txt" || fail "runtime package contents"
                        ! grep -q 'include/\|bin/' "$tmp/contents.txt" || fail "runtime package holds dev files" ;;
    libbackplane-dev)   for h in backplane.h tensor.h plugin.h deprecated.h; do
                          grep -q "include/backplane/$h\$" "$tmp/contents.txt" || fail "dev package lacks $h"
                        done
                        grep -q 'cmake/Backplane/BackplaneConfig\.cmake' "$tmp/contents.txt" &&
                        grep -q 'pkgconfig/backplane\.pc' "$tmp/contents.txt" || fail "dev package contents"
                        dpkg-deb -f "$d" Depends | grep -q 'libbackplane[0-9]* (= ' || fail "dev package Depends" ;;
    backplane-tools)    grep -q 'bin/bp-devices' "$tmp/contents.txt" || fail "tools package contents"
                        dpkg-deb -f "$d" Depends | grep -q 'libbackplane[0-9]* (= ' || fail "tools package Depends" ;;
    python3-backplane)  grep -q '/backplane/_backplane.*\.so$' "$tmp/contents.txt" &&
                        grep -q '/backplane/__init__\.pyi$' "$tmp/contents.txt" || fail "python package contents"
                        dpkg-deb -f "$d" Depends | grep -q 'libbackplane[0-9]* (= ' &&
                        dpkg-deb -f "$d" Depends | grep -q 'python3-numpy' || fail "python package Depends" ;;
    *) fail "unexpected package ${d##*/}" ;;
  esac
  dpkg-deb -x "$d" "$tmp/root"
done
# Unpacked anywhere, the packaged tools find the packaged library and plugins.
env -u BP_PLUGIN_PATH "$tmp/root/usr/bin/bp-devices" >"$tmp/devices.txt" 2>&1
grep -q "$tmp/root/usr/lib.*/backplane/plugins/libbp-cpu.so" "$tmp/devices.txt" ||
  { cat "$tmp/devices.txt"; fail "the packaged bp-devices does not find the packaged cpu plugin"; }
if grep -rlaF -e "$build" -e "$src/" "$tmp/root"; then fail "packaged files name the build or source tree"; fi
[ "$have_py" = 0 ] || py_check "$tmp/root"
echo "== install test: ok"
