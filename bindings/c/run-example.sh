#!/usr/bin/env bash
# Installs libcourier from a CMake build into a temporary prefix and builds bindings/c/example.c
# against the installed copy, every way a C or C++ project takes it:
#   1. pkg-config, shared:  cc example.c $(pkg-config --cflags --libs courier)
#   2. pkg-config, static:  libcourier.a with the private libraries `pkg-config --static` lists
#   3. CMake, shared:       find_package(Courier 0.2 REQUIRED) + Courier::courier
#   4. CMake, static:       Courier::courier_static
# and runs each against the loopback test server. It also checks that the one version of
# include/courier.h is what the install says: courier.pc's version, the CMake package's version,
# the library's file name and SONAME, and courier_version() at run time.
# Run by ctest (test c_example_installed) or by hand:
#   bash bindings/c/run-example.sh BUILD_DIR [extra compiler flags...]
# Exit status 0 when every way builds, runs and prints what it should.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: run-example.sh BUILD_DIR [CFLAGS...]}" && pwd)
shift
extra=("$@")
cc=${CC:-cc}

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
die() { echo "run-example: $*" >&2; exit 1; }

# the one version, from the header
hv() { sed -n "s/^#define COURIER_VERSION_$1 \"\{0,1\}\([0-9.]*\)\"\{0,1\}\$/\1/p" "$root/include/courier.h"; }
version=$(hv STRING)
major=$(hv MAJOR)
[ -n "$version" ] && [ "$version" = "$(hv MAJOR).$(hv MINOR).$(hv PATCH)" ] ||
  die "include/courier.h: COURIER_VERSION_STRING '$version' is not MAJOR.MINOR.PATCH"

# 1. install (the library targets must be built; a no-op when they are)
cmake --build "$build" --target courier courier_static courier-test-server >/dev/null
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pcdir=$(dirname "$(find "$tmp/prefix" -name courier.pc | head -n1)")
[ -f "$pcdir/courier.pc" ] || die "courier.pc was not installed"
cmakedir=$(dirname "$(find "$tmp/prefix" -name CourierConfig.cmake | head -n1)")
[ -f "$cmakedir/CourierConfigVersion.cmake" ] || die "the CMake package was not installed"

# the installed version, everywhere it is written
export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
pc() { pkg-config --define-variable=prefix="$tmp/prefix" "$@" courier; }
[ "$(pc --modversion)" = "$version" ] || die "courier.pc says $(pc --modversion), the header $version"
libdir=$(pc --variable=libdir)
[ -f "$libdir/libcourier.so.$version" ] || die "no $libdir/libcourier.so.$version"
soname=$(readelf -d "$libdir/libcourier.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libcourier.so.$major" ] || die "SONAME is '$soname', not libcourier.so.$major"

# 2. pkg-config, shared and static. courier.pc names the configured prefix; point it at the
#    temporary one.
flags=$(pc --cflags --libs)
case "$flags" in *"$tmp/prefix"*) ;; *) die "pkg-config flags do not name the install: $flags" ;; esac
# `pkg-config --static` lists the private libraries: courier's own and, through Requires.private,
# those of libcurl, LMDB and jansson (for a fully static link, which also needs the -dev packages
# of curl's own dependencies: Debian's libcurl.pc names nghttp2, ssh2, ldap...).
listed=" $(pc --static --libs) "
for l in -lcourier -lcurl -llmdb -ljansson -lcrypto -lz -lwslay -lpthread -lm; do
  case "$listed" in *" $l "*) ;; *) die "pkg-config --static --libs courier does not list $l: $listed" ;; esac
done
# libcourier.a with the system's shared libcurl, LMDB and jansson (README's line; -l: names the
# archive, so the shared library cannot be picked)
static_flags="$(pc --cflags --libs-only-L) -l:libcourier.a $(pkg-config --libs $(pc --print-requires-private)) -lwslay -lpthread -lm"
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror ${extra[@]+"${extra[@]}"} "$here/example.c" $flags -Wl,-rpath,"$libdir" \
  -o "$tmp/example-pkgconfig"
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror ${extra[@]+"${extra[@]}"} "$here/example.c" $static_flags \
  -o "$tmp/example-pkgconfig-static"

# 3. CMake: find_package from the installed prefix (the lines README's C section shows)
mkdir -p "$tmp/cmake-user"
cat >"$tmp/cmake-user/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(courier_user C)
find_package(Courier 0.2 REQUIRED)
add_executable(example-cmake $here/example.c)
target_link_libraries(example-cmake PRIVATE Courier::courier)
add_executable(example-cmake-static $here/example.c)
target_link_libraries(example-cmake-static PRIVATE Courier::courier_static)
if(NOT Courier_VERSION STREQUAL "$version")
  message(FATAL_ERROR "the CMake package says \${Courier_VERSION}, the header $version")
endif()
CMAKE
cmake -S "$tmp/cmake-user" -B "$tmp/cmake-user/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="${extra[*]+${extra[*]}}" \
  -DCMAKE_EXE_LINKER_FLAGS="${extra[*]+${extra[*]}}" >"$tmp/cmake.log" 2>&1 ||
  { cat "$tmp/cmake.log" >&2; die "find_package(Courier 0.2) failed"; }
cmake --build "$tmp/cmake-user/build" >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log" >&2; die "the CMake user does not build"; }
cp "$tmp/cmake-user/build/example-cmake" "$tmp/cmake-user/build/example-cmake-static" "$tmp/"

# each must run against the installed library (shared) or carry it (static), not the build tree
if command -v ldd >/dev/null 2>&1; then
  for exe in example-pkgconfig example-cmake example-pkgconfig-static example-cmake-static; do
    # (read all of ldd's output first: `grep -q` closing the pipe early fails the pipeline under pipefail)
    linked=$(ldd "$tmp/$exe")
    case "$exe:$linked" in
    *-static:*libcourier.so*) echo "$linked" >&2; die "$exe links libcourier.so" ;;
    *-static:*) ;;
    *:*"$libdir/libcourier.so"*) ;;
    *) echo "$linked" >&2; die "$exe is not linked to the install" ;;
    esac
  done
fi

# 4. run each against the test server. Its stdin is a FIFO only this script holds open, so it
#    exits when the script does, however the script ends.
mkfifo "$tmp/server-in"
exec {hold}<>"$tmp/server-in"
"$build/courier-test-server" --stdin-eof <"$tmp/server-in" >"$tmp/port" &
server_pid=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
read -r port <"$tmp/port"
for exe in example-pkgconfig example-pkgconfig-static example-cmake example-cmake-static; do
  out=$("$tmp/$exe" "http://127.0.0.1:$port" "$tmp/store-$exe")
  echo "== $exe"
  echo "$out"
  expect() {
    grep -qx "$1" <<<"$out" || die "$exe: expected the line '$1'"
  }
  expect "version=$version"
  expect "first.status=200"
  expect "first.from_cache=0"
  expect "second.from_cache=1"
  expect "second.body=shared"
  expect "json.data.name=courier"
  expect "frozen.count=0"
  expect "cache.count=1"
done
echo "run-example: ok (pkg-config and find_package, shared and static; version $version everywhere)"
