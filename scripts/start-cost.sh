#!/usr/bin/env bash
# Start-up cost of a cpu-only application (docs/architecture.md, Registry):
# a program that creates one "cpu" backend, frees it and exits, run against
# one libbackplane.so twice: with every plugin of the build installed beside
# it ("all") and with only libbp-cpu.so ("cpu"). RUNS (default 30)
# alternating runs of each after 3 warm-up runs; prints how many shared
# objects each maps, the median wall and CPU (user + system) time, and the
# ratios all/cpu. LIB_DIR is the folder holding libbackplane.so and
# backplane/plugins (default ${BUILD_DIR:-build}/lib). Needs cc and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${BUILD_DIR:-build}")
lib=$(realpath "${LIB_DIR:-$build/lib}")
runs=${RUNS:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for v in all cpu; do
  mkdir -p "$work/$v/backplane/plugins"
  cp -a "$lib"/libbackplane.so* "$work/$v/"
done
cp "$lib"/backplane/plugins/libbp-*.so "$work/all/backplane/plugins/"
cp "$lib"/backplane/plugins/libbp-cpu.so "$work/cpu/backplane/plugins/"

cat >"$work/cpu_start.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include "backplane/backplane.h"
int main(int argc, char **argv) {
  bp_backend *be = NULL;
  if (bp_backend_new("cpu", &be) != BP_OK) {
    fprintf(stderr, "cpu: %s\n", bp_last_error());
    return 1;
  }
  bp_backend_free(be);
  if (argc > 1 && strcmp(argv[1], "--maps") == 0) {  /* distinct files mapped now */
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096], last[4096] = "";
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
      const char *p = strchr(line, '/');
      if (!p || !strstr(p, ".so") || strcmp(p, last) == 0) continue;
      snprintf(last, sizeof last, "%s", p);
      ++n;
    }
    printf("%d\n", n);
  }
  return 0;
}
EOF
"${CC:-cc}" -O2 -Iinclude -I"$build/include" "$work/cpu_start.c" -L"$work/all" -lbackplane -o "$work/cpu_start"

unset BP_PLUGIN_PATH
for v in all cpu; do
  echo "$v: $(LD_LIBRARY_PATH="$work/$v" "$work/cpu_start" --maps) shared objects mapped"
done

python3 - "$runs" "$work" <<'EOF'
import os, statistics, sys, time
runs, work = int(sys.argv[1]), sys.argv[2]
exe = work + "/cpu_start"

def once(v):
    env = dict(os.environ, LD_LIBRARY_PATH=work + "/" + v)
    t0 = time.perf_counter()
    pid = os.posix_spawn(exe, [exe], env)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        sys.exit("cpu_start failed with " + v)
    return wall, ru.ru_utime + ru.ru_stime

for _ in range(3):
    once("all"), once("cpu")
times = {"all": [], "cpu": []}
for _ in range(runs):
    for v in ("all", "cpu"):
        times[v].append(once(v))
med = {v: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for v, t in times.items()}
for v in ("all", "cpu"):
    print(f"{v}: median wall {med[v][0] * 1e3:.1f} ms, CPU {med[v][1] * 1e3:.1f} ms ({runs} runs)")
print(f"all/cpu: wall {med['all'][0] / med['cpu'][0]:.2f}x, CPU {med['all'][1] / med['cpu'][1]:.2f}x")
EOF
