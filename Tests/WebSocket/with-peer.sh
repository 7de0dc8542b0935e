#!/bin/sh
# Runs a WebSocket test (ws_test) with Python's `websockets` as its peer (Tests/WebSocket/peer.py):
# a virtual environment build/ws-venv (COURIER_WS_VENV to choose another) with websockets from the
# wheelhouse build/py-wheelhouse, which is filled from PyPI the first time (as
# bindings/python/setup-env.sh fills it). When websockets cannot be installed (no network and no
# wheel), the test is skipped with a message and exit 0.
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${COURIER_WS_VENV:-$root/build/ws-venv}
wheelhouse=$root/build/py-wheelhouse
mkdir -p "$root/build"
(
  # One at a time (ctest -j, the ASan and TSan runs together).
  flock 9
  if ! "$venv/bin/python" -c 'import websockets' >/dev/null 2>&1; then
    mkdir -p "$wheelhouse"
    ls "$wheelhouse" | grep -qi '^websockets-' ||
      python3 -m pip download -q --disable-pip-version-check -d "$wheelhouse" websockets >/dev/null 2>&1
    rm -rf "$venv"
    python3 -m venv "$venv" >/dev/null 2>&1 &&
      "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-index --find-links "$wheelhouse" \
        websockets >/dev/null 2>&1
  fi
) 9>"$root/build/ws-venv.lock"
if ! "$venv/bin/python" -c 'import websockets' >/dev/null 2>&1; then
  echo "$(basename "$1"): skipped: Python's websockets package could not be installed (no network and no wheel in build/py-wheelhouse)"
  exit 0
fi
COURIER_WS_PYTHON="$venv/bin/python" COURIER_WS_PEER="$root/Tests/WebSocket/peer.py" exec "$@"
