#!/bin/sh
# Install the official OpenAI client for Node into DIR, for
# openai_client_test.js:
#   sh openai_setup.sh DIR
# openai 6.49.0, pinned (npm i -E): the last line that runs on Node 20 (7.x
# needs Node 22). Nothing to do when DIR already holds it. Exit 77 (skip)
# when node or npm is missing or the registry cannot be reached.
set -u
VERSION=6.49.0
DIR=${1:?usage: openai_setup.sh DIR}
TIMEOUT=${BP_NPM_TIMEOUT:-300}

command -v node >/dev/null 2>&1 || { echo "SKIPPED: node is not installed"; exit 77; }
command -v npm >/dev/null 2>&1 || { echo "SKIPPED: npm is not installed"; exit 77; }

installed() {
    node -e 'const [d, v] = process.argv.slice(1);
        const p = JSON.parse(require("fs").readFileSync(d + "/node_modules/openai/package.json"));
        if (p.version !== v) process.exit(1);' "$DIR" "$VERSION" 2>/dev/null
}

mkdir -p "$DIR" || exit 1
if installed; then
    echo "openai $VERSION is installed in $DIR"
    exit 0
fi
[ -f "$DIR/package.json" ] || echo '{"private": true}' > "$DIR/package.json"

# the registry first, briefly, so an offline machine skips at once
if ! timeout 60 npm view --silent "openai@$VERSION" version >/dev/null 2>&1; then
    echo "SKIPPED: the npm registry cannot be reached"
    exit 77
fi
echo "installing openai $VERSION into $DIR"
if ! (cd "$DIR" && timeout "$TIMEOUT" npm i -E --no-audit --no-fund --loglevel=error "openai@$VERSION"); then
    if ! timeout 60 npm view --silent "openai@$VERSION" version >/dev/null 2>&1; then
        echo "SKIPPED: the npm registry cannot be reached"
        exit 77
    fi
    echo "npm install failed"
    exit 1
fi
installed || { echo "openai $VERSION did not install"; exit 1; }
echo "openai $VERSION is installed in $DIR"
