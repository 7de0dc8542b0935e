# Sourced by run-tests.sh and run-bench.sh (bash, from the repository root, with `set -euo
# pipefail`): builds libcourier.so and courier-test-server with CMake into build/py (incremental),
# regenerates the ctypes prototypes from include/courier.h, and makes or reuses a virtual
# environment in build/py-venv with this package installed (python3 -m venv; without venv, the
# package goes into build/py-site and PYTHONPATH). Sets: lib, server, vpy, pythonpath, pip_install.
# Extra packages to install into the environment: courier_extra_packages=(pytest requests ...).
build="$root/build/py"
jobs=$(nproc 2>/dev/null || echo 2)
py=${PYTHON:-python3}

echo "== building libcourier (build/py) =="
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOURIER_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" -j"$jobs" --target courier courier-test-server >/dev/null
lib="$build/libcourier.so"
server="$build/courier-test-server"
[ -f "$lib" ] && [ -x "$server" ] || { echo "courier-py: build did not produce $lib and $server" >&2; exit 1; }

# The ctypes prototypes follow the header being built (it grows while the binding is developed);
# test_abi.py checks the table against the header and the library.
"$py" bindings/python/tools/gen_decls.py include/courier.h > "$build/_decls.py.new"
if ! cmp -s "$build/_decls.py.new" bindings/python/courier/_decls.py; then
  echo "courier-py: include/courier.h changed: regenerating bindings/python/courier/_decls.py"
  mv "$build/_decls.py.new" bindings/python/courier/_decls.py
else
  rm -f "$build/_decls.py.new"
fi

echo "== python environment =="
venv="$root/build/py-venv"
pythonpath=""
venv_ok() { [ -x "$venv/bin/python" ] && "$venv/bin/python" -m pip --version >/dev/null 2>&1; }
if ! venv_ok; then
  # (re)create; a python3 without ensurepip leaves a venv without pip: remove it and fall back
  rm -rf "$venv"
  "$py" -m venv "$venv" >/dev/null 2>&1 || true
  venv_ok || rm -rf "$venv"
fi
if venv_ok; then
  vpy="$venv/bin/python"
  pip=("$vpy" -m pip --disable-pip-version-check -q)
  for pkg in ${courier_extra_packages[@]+"${courier_extra_packages[@]}"}; do
    mod=${pkg%%[<>=]*}
    "$vpy" -c "import $mod" >/dev/null 2>&1 || "${pip[@]}" install "$pkg"
  done
  # A setuptools + wheel already in the venv build the package without network (no isolation);
  # otherwise pip fetches the build backend from PyPI.
  if "$vpy" -c "import setuptools, wheel" >/dev/null 2>&1; then
    "${pip[@]}" install --no-build-isolation --no-deps --force-reinstall ./bindings/python
  else
    "${pip[@]}" install --no-deps --force-reinstall ./bindings/python
  fi
else
  echo "courier-py: python3 -m venv is unavailable; installing into build/py-site" >&2
  site="$root/build/py-site"
  vpy="$py"
  rm -rf "$site/courier" "$site"/courier-*.dist-info
  if "$py" -m pip --version >/dev/null 2>&1; then
    pkgs=(./bindings/python)
    for pkg in ${courier_extra_packages[@]+"${courier_extra_packages[@]}"}; do
      mod=${pkg%%[<>=]*}
      "$py" -c "import $mod" >/dev/null 2>&1 || pkgs+=("$pkg")
    done
    "$py" -m pip --disable-pip-version-check -q install --target "$site" --upgrade "${pkgs[@]}" ||
      "$py" -m pip --disable-pip-version-check -q install --break-system-packages --target "$site" --upgrade "${pkgs[@]}"
  else
    echo "courier-py: no pip either; testing the source tree" >&2
    mkdir -p "$site" && cp -r bindings/python/courier "$site/"
  fi
  pythonpath="$site"
fi

