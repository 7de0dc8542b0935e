# Sourced by run-tests.sh and run-bench.sh (bash, from the repository root, with `set -euo
# pipefail`). What a user gets from `pip install ./bindings/python`, made the same way:
#   1. regenerates the ctypes prototypes (courier/_decls.py) from include/courier.h and its parts;
#   2. keeps a wheelhouse build/py-wheelhouse (from PyPI the first time: the build backend
#      scikit-build-core, ninja, which pip's isolated builds ask for, and the test packages), and a
#      tools environment build/py-tools with scikit-build-core, so later runs need no network;
#   3. builds the wheel (`pip wheel ./bindings/python`: the project's CMake builds libcourier into
#      the package; CMake's build directory build/py-wheel is kept, so rebuilds are incremental);
#   4. makes a fresh virtual environment build/py-venv and installs that wheel (and the extra
#      packages) into it: no PYTHONPATH, no COURIER_LIBRARY;
#   5. builds courier-test-server (the loopback server of the tests) with CMake into build/py.
# Extra packages for the environment: courier_extra_packages=(pytest requests ...).
# Sets: vpy (the fresh environment's python), wheel (the built wheel), server.
build="$root/build/py"
jobs=$(nproc 2>/dev/null || echo 2)
py=${PYTHON:-python3}
pipq=(--disable-pip-version-check -q)

# The ctypes prototypes follow the header being built (it grows while the binding is developed);
# test_abi.py checks the table against the header and the library.
mkdir -p "$build"
"$py" bindings/python/tools/gen_decls.py include/courier.h > "$build/_decls.py.new"
if ! cmp -s "$build/_decls.py.new" bindings/python/courier/_decls.py; then
  echo "courier-py: include/courier.h changed: regenerating bindings/python/courier/_decls.py"
  mv "$build/_decls.py.new" bindings/python/courier/_decls.py
else
  rm -f "$build/_decls.py.new"
fi

echo "== python build tools (build/py-tools, build/py-wheelhouse) =="
tools="$root/build/py-tools"
wheelhouse="$root/build/py-wheelhouse"
for pkg in "scikit-build-core>=1.0" ninja ${courier_extra_packages[@]+"${courier_extra_packages[@]}"}; do
  name=${pkg%%[<>=]*}
  ls "$wheelhouse" 2>/dev/null | grep -qi "^${name//-/_}-" && continue
  if [ "$name" = pycurl ]; then
    # built here against the system's libcurl (libcurl4-openssl-dev), the one libcourier links,
    # not PyPI's manylinux wheel with a libcurl of its own: the benchmark compares clients, not
    # libcurl builds
    "$py" -m pip "${pipq[@]}" wheel --no-binary pycurl --no-deps -w "$wheelhouse" "$pkg"
  else
    "$py" -m pip "${pipq[@]}" download -d "$wheelhouse" "$pkg"
  fi
done
if ! "$tools/bin/python" -c "import scikit_build_core" >/dev/null 2>&1; then
  rm -rf "$tools"
  "$py" -m venv "$tools"
  "$tools/bin/python" -m pip "${pipq[@]}" install --no-index --find-links "$wheelhouse" "scikit-build-core>=1.0"
fi

echo "== building the wheel (pip wheel ./bindings/python) =="
rm -rf "$root/build/py-dist"
nice "$tools/bin/python" -m pip "${pipq[@]}" wheel --no-build-isolation --no-deps -w "$root/build/py-dist" \
  -C build-dir="$root/build/py-wheel" ./bindings/python
wheel=$(ls "$root"/build/py-dist/courier-*.whl)

echo "== fresh virtual environment (build/py-venv) =="
venv="$root/build/py-venv"
"$py" -m venv --clear "$venv"
vpy="$venv/bin/python"
extra=()
for pkg in ${courier_extra_packages[@]+"${courier_extra_packages[@]}"}; do extra+=("$pkg"); done
"$vpy" -m pip "${pipq[@]}" install --no-index --find-links "$wheelhouse" "$wheel" ${extra[@]+"${extra[@]}"}

echo "== building courier-test-server (build/py) =="
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOURIER_BUILD_TESTS=OFF >/dev/null
fi
nice cmake --build "$build" -j"$jobs" --target courier-test-server >/dev/null
server="$build/courier-test-server"
[ -x "$server" ] || { echo "courier-py: the build did not produce $server" >&2; exit 1; }
