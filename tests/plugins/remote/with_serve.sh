#!/bin/sh
# with_serve.sh: runs a command against fresh bp-serve processes.
#
#   with_serve.sh [-n COUNT] BP_SERVE [SERVE_ARGS...] -- COMMAND [ARGS...]
#
# Starts COUNT (default 1) bp-serve processes listening on free loopback
# ports (--listen 127.0.0.1:0; each prints "bp-serve: listening on
# HOST:PORT"), sets BP_REMOTE to their addresses, runs COMMAND, stops the
# servers and exits with COMMAND's status. A server that cannot start
# because its device is missing here (it says UNAVAILABLE) makes the test a
# skip: exit 77.
set -u
count=1
if [ "$1" = "-n" ]; then count=$2; shift 2; fi
serve=$1; shift
serve_args=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do serve_args="$serve_args $1"; shift; done
[ $# -gt 0 ] && shift
dir=$(mktemp -d "${TMPDIR:-/tmp}/bp-with-serve.XXXXXX") || exit 1
pids=""
stop() {
  for p in $pids; do kill "$p" 2>/dev/null; done
  for p in $pids; do wait "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap stop EXIT
addresses=""
i=0
while [ "$i" -lt "$count" ]; do
  log="$dir/serve$i.log"
  # shellcheck disable=SC2086
  "$serve" --listen 127.0.0.1:0 $serve_args >"$log" 2>&1 &
  pid=$!
  pids="$pids $pid"
  address=""
  tries=0
  while [ -z "$address" ] && [ "$tries" -lt 300 ]; do
    address=$(sed -n 's/^bp-serve: listening on \([^ ]*\).*/\1/p' "$log" | head -n 1)
    if [ -z "$address" ] && ! kill -0 "$pid" 2>/dev/null; then
      cat "$log" >&2
      if grep -q UNAVAILABLE "$log"; then echo "with_serve: the served device is not here: skipped" >&2; exit 77; fi
      echo "with_serve: bp-serve exited before listening" >&2
      exit 1
    fi
    [ -z "$address" ] && sleep 0.1
    tries=$((tries + 1))
  done
  if [ -z "$address" ]; then cat "$log" >&2; echo "with_serve: bp-serve did not listen within 30 s" >&2; exit 1; fi
  addresses="${addresses:+$addresses,}$address"
  i=$((i + 1))
done
BP_REMOTE=$addresses
export BP_REMOTE
echo "with_serve: BP_REMOTE=$BP_REMOTE" >&2
# Under AddressSanitizer the client runs without the exit-time leak check:
# LeakSanitizer's tracer crashed (signal 11) stopping the gRPC threads of a
# client process, failing a run that found no leak. The servers keep it, and
# so do the in-process remote tests.
case "${ASAN_OPTIONS-}" in
  *detect_leaks=1*) ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" "$@" ;;
  *) "$@" ;;
esac
rc=$?
exit $rc
