#!/usr/bin/env bash
# Runs the README's C example (built by the ctest test readme_c_example into BUILD_DIR) against
# the loopback test server: a 200 prints its status and body; a 404 prints its status and body
# too, then its error; a refused connection prints the error once, not "text: text: ...".
#   bash cmake/readme_c_example_run.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: readme_c_example_run.sh BUILD_DIR}" && pwd)
example="$build/readme_example"
[ -x "$example" ] || { echo "readme run: $example is not built (test readme_c_example)" >&2; exit 1; }

tmp=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then
    exec {hold}>&- 2>/dev/null || true   # the server's stdin reaches EOF: it exits
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
# The example opens an engine with the default (durable) store: keep it out of the home directory.
export XDG_DATA_HOME="$tmp/data"

mkfifo "$tmp/server-in"
exec {hold}<>"$tmp/server-in"
"$build/courier-test-server" --stdin-eof <"$tmp/server-in" >"$tmp/port" &
server_pid=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
read -r port <"$tmp/port"
base="http://127.0.0.1:$port"

fail() { echo "readme run: $*" >&2; exit 1; }
run() { # run ARGS...: sets rc, out, err
  set +e
  "$example" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  set -e
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
}

run "$base"
[ "$rc" -eq 0 ] || fail "GET /json exited $rc: $err"
case "$out" in "200 {"*) ;; *) fail "GET /json printed: $out" ;; esac

run "$base" /status/404
[ "$rc" -eq 1 ] || fail "GET /status/404 exited $rc"
case "$out" in "404 "*) ;; *) fail "a 404 did not print its status: '$out'" ;; esac
[ "$(grep -c '^error: ' <<<"$err")" -eq 1 ] || fail "a 404 did not print one error line: '$err'"

# A port nobody listens on: take a free one from the server's own range, then stop listening.
closed=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
run "http://127.0.0.1:$closed"
[ "$rc" -eq 1 ] || fail "a refused connection exited $rc"
[ -z "$out" ] || fail "a refused connection printed a status: '$out'"
n=$(grep -o 'cannot connect to host' <<<"$err" | wc -l)
[ "$n" -eq 1 ] || fail "the error names its code $n times: '$err'"
echo "readme run: ok"
