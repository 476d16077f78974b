#!/bin/sh
# Install llama.cpp's Node binding, the reference of crosscheck.py, into DIR:
#   sh setup.sh DIR
# node-llama-cpp 3.21.1 with its prebuilt linux-x64 (CPU) binaries, pinned
# (npm i -E). Nothing to do when DIR already holds them. Exit 77 (skip) when
# node or npm is missing or the registry cannot be reached.
set -u
VERSION=3.21.1
DIR=${1:?usage: setup.sh DIR}
TIMEOUT=${BP_NPM_TIMEOUT:-540}

command -v node >/dev/null 2>&1 || { echo "SKIPPED: node is not installed"; exit 77; }
command -v npm >/dev/null 2>&1 || { echo "SKIPPED: npm is not installed"; exit 77; }

installed() {
    node -e 'const [d, v] = process.argv.slice(1);
        for (const p of ["node-llama-cpp", "@node-llama-cpp/linux-x64"])
            if (require(d + "/node_modules/" + p + "/package.json").version !== v) process.exit(1);' \
        "$DIR" "$VERSION" 2>/dev/null
}

mkdir -p "$DIR" || exit 1
if installed; then
    echo "node-llama-cpp $VERSION is installed in $DIR"
    exit 0
fi
[ -f "$DIR/package.json" ] || echo '{"private": true}' > "$DIR/package.json"

# the registry first, briefly, so an offline machine skips at once
if ! timeout 60 npm view --silent "node-llama-cpp@$VERSION" version >/dev/null 2>&1; then
    echo "SKIPPED: the npm registry cannot be reached"
    exit 77
fi
echo "installing node-llama-cpp $VERSION into $DIR"
# NODE_LLAMA_CPP_SKIP_DOWNLOAD: use the prebuilt binaries, never fetch and
# build llama.cpp from source in the postinstall step
if ! (cd "$DIR" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true timeout "$TIMEOUT" \
        npm i -E --no-audit --no-fund --loglevel=error \
        "node-llama-cpp@$VERSION" "@node-llama-cpp/linux-x64@$VERSION"); then
    if ! timeout 60 npm view --silent "node-llama-cpp@$VERSION" version >/dev/null 2>&1; then
        echo "SKIPPED: the npm registry cannot be reached"
        exit 77
    fi
    echo "npm install failed"
    exit 1
fi
installed || { echo "node-llama-cpp $VERSION did not install"; exit 1; }
echo "node-llama-cpp $VERSION is installed in $DIR"
