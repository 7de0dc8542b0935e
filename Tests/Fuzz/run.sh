#!/usr/bin/env bash
# Builds the JSON fuzz target with the Swift toolchain's clang (libFuzzer + ASan + UBSan) and runs
# it for a bounded time:  Tests/Fuzz/run.sh [SECONDS]   (default 60)
# Environment: CLANG (default /opt/swift/usr/bin/clang), FUZZ_BUILD_DIR (default build-fuzz),
# FUZZ_JOBS (parallel fuzzing processes, default 1).
# The seed corpus in Tests/Fuzz/corpus is copied to a scratch corpus, so the tree is never written.
# Exit status: 0 when no input crashed, leaked or hung; 1 otherwise (the reproducer is kept in
# $FUZZ_BUILD_DIR/artifacts and named in the output).
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
clang="${CLANG:-/opt/swift/usr/bin/clang}"
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${FUZZ_JOBS:-1}"

if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: $0 [SECONDS]" >&2
  exit 2
fi
if [ ! -x "$clang" ]; then
  echo "fuzz: no clang at $clang (set CLANG)" >&2
  exit 2
fi

mkdir -p "$build/obj" "$build/corpus" "$build/artifacts"
cflags=(-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -I"$root/include" -I"$root/CCore"
        $(pkg-config --cflags jansson libcurl lmdb libcrypto zlib))
san=(-fsanitize=address,undefined -fno-sanitize-recover=undefined)

# The whole core, instrumented for coverage (fuzzer-no-link), then the target.
objs=()
newest_h=$(ls -t "$root"/CCore/*.h "$root"/CCore/*/*.h "$root/include/courier.h" "$root"/include/courier/*.h | head -1)
for src in "$root"/CCore/*/*.c; do
  rel="${src#"$root"/CCore/}"
  obj="$build/obj/${rel//\//_}"   # folder_file.c: two folders may hold files of one name (store.c)
  obj="${obj%.c}.o"
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ "$newest_h" -nt "$obj" ]; then
    "$clang" "${cflags[@]}" "${san[@]}" -fsanitize=fuzzer-no-link -fvisibility=hidden -c "$src" -o "$obj"
  fi
  objs+=("$obj")
done
ld=()
if [ -x "$(dirname "$clang")/ld.lld" ]; then ld=(-fuse-ld=lld); fi
"$clang" "${cflags[@]}" "${san[@]}" "${ld[@]}" -fsanitize=fuzzer "$root/Tests/Fuzz/fuzz_json.c" "${objs[@]}" \
  $(pkg-config --libs jansson libcurl lmdb libcrypto zlib) -lwslay -lpthread -lm -o "$build/fuzz_json" \
  > "$build/link.log" 2>&1 \
  || { cat "$build/link.log" >&2; exit 2; }

cp -n "$root"/Tests/Fuzz/corpus/* "$build/corpus/" 2>/dev/null || true
echo "fuzz: running fuzz_json for ${seconds}s (${jobs} job(s))"
parallel=()
if [ "$jobs" -gt 1 ]; then parallel=(-jobs="$jobs" -workers="$jobs"); fi
cd "$build" # libFuzzer writes its logs (fuzz-N.log with -jobs) in the current directory
set +e
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:symbolize=1" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  "$build/fuzz_json" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    "${parallel[@]}" -dict="$root/Tests/Fuzz/json.dict" \
    -artifact_prefix="$build/artifacts/" -print_final_stats=1 "$build/corpus" 2>&1 | tee "$build/fuzz.log" | grep -E "^#[0-9]+[[:space:]]+(DONE|INITED)|ERROR|SUMMARY|artifact|stat::number_of_executed_units" 
status=${PIPESTATUS[0]}
set -e
if [ "$status" -eq 0 ]; then
  echo "fuzz_json: 1 passed, 0 failed"
else
  echo "fuzz: a failing input was found; see $build/fuzz.log and $build/artifacts" >&2
  echo "fuzz_json: 0 passed, 1 failed"
  exit 1
fi
