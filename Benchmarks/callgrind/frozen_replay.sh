#!/usr/bin/env bash
# The replay of frozen requests against the engine's transport (docs/design/journal.md, "Where replay's
# time goes"; issue 15 asks replay_ratio >= 0.8):
#   Benchmarks/callgrind/frozen_replay.sh BUILD_DIR [ir [N1 N2] | ratio [N RUNS] | threads [N] | freeze [N1 N2] |
#                                                    walls [ROUNDS N] | against OTHER_BUILD_DIR [ROUNDS N]]
# BUILD_DIR: a Release CMake build of this checkout (targets courier and courier-test-server).
# FROZEN_JOURNAL=URL in the environment puts the journals on that Redis (redis://... or
# redis+cluster://..., e.g. from scripts/redis-fixture start|cluster DIR) instead of LMDB, as
# `courier bench frozen --backend redis|redis-cluster` does (ratio: replay on Redis against the
# transport; docs/design/redis-cluster.md, "Replay on a cluster").
# FROZEN_ORDERED=1 freezes the requests in their host's order (one host: a backlog replayed one at
# a time; docs/design/redis.md, "Ordered replay: a backlog") instead of unordered.
# The server is courier-test-server in its own process, so only the client is counted.
#   ir    (the default): instructions per request under callgrind, every thread of the client
#         counted, (Ir(N2) - Ir(N1)) / (N2 - N1): a replay of N frozen POSTs (8 in flight, a
#         listener on the events; the store frozen beforehand, outside callgrind) and the same POSTs
#         sent normally (8 in flight).
#   ratio: RUNS times (default 5) N (default 20000) POSTs: transport, freeze, replay, transport;
#         requests/s and CPU us per request, medians, replay_ratio by wall and by CPU.
#   threads: where the wall time goes, per thread: freezes N (default 20000) POSTs (not
#         measured), then runs their replay (8 in flight, a listener on the events) and N plain
#         sends (8 in flight) under threads.py, which prints each client thread's and each server
#         thread's name, CPU time, time waiting for a CPU, and context switches (the engine's
#         threads are named courier-worker and courier-journal). Linux only
#         (/proc/PID/task/TID/schedstat).
#   freeze: one freeze at a time (`courier bench frozen`'s freeze_ops; the engine set offline, each
#         send answered "frozen" after its synced commit), per freeze from two runs of N1 (default
#         100) and N2 (default 600) freezes into fresh stores under the system's temporary
#         directory: instructions (callgrind, every thread), and from `strace -f` the synced commits
#         (fdatasync/fsync/msync), the write calls (pwrite64/writev/pwritev, the meta page's
#         included) and the 4 KiB pages they wrote (the meta page's 120-byte write not one).
#   walls: ROUNDS (default 6) rounds of N (default 1000) raw LMDB synced commits of a frozen
#         record's size and N freezes one at a time, each into a fresh directory under the system's
#         temporary directory (`sync` between): freezes/s over raw commits/s from the sums, and the
#         median of the rounds' ratios. Two builds compared: run it for each, one after the other,
#         several times (the disk's speed drifts from minute to minute).
#   against: two builds and the raw commit in the same rounds: ROUNDS (default 30) rounds of N
#         (default 300) raw commits, N freezes with OTHER_BUILD_DIR's library and N with
#         BUILD_DIR's, their order rotating every round, each into a fresh directory (`sync`
#         between): each side over raw from the sums, the medians of the rounds' ratios, and
#         BUILD_DIR over OTHER_BUILD_DIR. Short rounds side by side see the same disk, which long
#         phases one after the other do not.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(cd "$1" && pwd)
mode=${2:-ir}
tmp=$(mktemp -d)
cleanup() { exec 4>&- 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
${CC:-cc} -O2 -Iinclude -IBenchmarks/CBench/include Benchmarks/callgrind/frozen_replay.c \
  Benchmarks/CBench/frozen_bench.c Benchmarks/CBench/transport_bench.c -o "$tmp/driver" \
  "$build/libcourier.so" -llmdb -lcurl -lpthread -Wl,-rpath,"$build"
mkfifo "$tmp/in"
"$build/courier-test-server" --stdin-eof < "$tmp/in" > "$tmp/port" &
server=$!
exec 4> "$tmp/in"
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
url="http://127.0.0.1:$(head -1 "$tmp/port")/status/200"
ir() {
  valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$tmp/driver" "$@" > /dev/null 2>&1
  awk '/^(summary|totals):/ {print $2; exit}' "$tmp/out"
}
if [ "$mode" = threads ]; then
  n=${3:-20000}
  "$tmp/driver" freeze "$tmp/s" "$url" "$n"
  echo "== replay of $n (load $(cut -d' ' -f1-3 /proc/loadavg))"
  SERVER_PID=$server python3 Benchmarks/callgrind/threads.py "$tmp/driver" replay "$tmp/s"
  echo "== transport, $n (load $(cut -d' ' -f1-3 /proc/loadavg))"
  SERVER_PID=$server python3 Benchmarks/callgrind/threads.py "$tmp/driver" transport "$url" "$n"
  exit 0
fi
if [ "$mode" = ratio ]; then
  "$tmp/driver" ratio "$url" "${3:-20000}" "${4:-5}" "$tmp"
  exit 0
fi
if [ "$mode" = walls ]; then
  rounds=${3:-6}
  n=${4:-1000}
  bytes=$("$tmp/driver" size "$tmp/size" "$url") # a frozen POST as the journal stores it (record_bytes)
  for r in $(seq "$rounds"); do
    sync
    a=$("$tmp/driver" raw "$tmp/raw$r" "$n" "$bytes")
    sync
    b=$("$tmp/driver" single "$tmp/single$r" "$url" "$n")
    rm -rf "$tmp/raw$r" "$tmp/single$r"
    echo "$a $b"
  done | python3 -c "
import statistics, sys
rows = [tuple(map(float, l.split())) for l in sys.stdin]
n = $n
ra = sum(r[0] for r in rows); fr = sum(r[1] for r in rows)
print('raw %.0f/s, freezes %.0f/s: %.2fx (sums); median of %d rounds %.2fx' % (n * len(rows) / ra, n * len(rows) / fr, ra / fr, len(rows), statistics.median(r[0] / r[1] for r in rows)))
"
  exit 0
fi
if [ "$mode" = against ]; then
  other=$(cd "$3" && pwd)
  ${CC:-cc} -O2 -Iinclude -IBenchmarks/CBench/include Benchmarks/callgrind/frozen_replay.c \
    Benchmarks/CBench/frozen_bench.c Benchmarks/CBench/transport_bench.c -o "$tmp/driver_other" \
    "$other/libcourier.so" -llmdb -lcurl -lpthread -Wl,-rpath,"$other"
  rounds=${4:-30}
  n=${5:-300}
  bytes=$("$tmp/driver" size "$tmp/size" "$url")
  for r in $(seq 0 $((rounds - 1))); do
    kinds=(raw other this)
    for i in 0 1 2; do
      k=${kinds[$(((i + r) % 3))]}
      sync
      case $k in
        raw) t=$("$tmp/driver" raw "$tmp/d" "$n" "$bytes") ;;
        other) t=$("$tmp/driver_other" single "$tmp/d" "$url" "$n") ;;
        this) t=$("$tmp/driver" single "$tmp/d" "$url" "$n") ;;
      esac
      rm -rf "$tmp/d"
      echo "$r $k $t"
    done
  done | python3 -c "
import collections, statistics, sys
t = collections.defaultdict(dict)
for l in sys.stdin:
    r, k, s = l.split()
    t[k][int(r)] = float(s)
n, rs = $n, sorted(t['raw'])
tot = {k: sum(t[k].values()) for k in t}
med = lambda k: statistics.median(t['raw'][r] / t[k][r] for r in rs)
print('raw %.0f/s, other %.0f/s, this %.0f/s; over raw (sums) other %.3fx, this %.3fx; medians of %d rounds %.3fx, %.3fx; this/other %.3fx'
      % tuple([n * len(rs) / tot[k] for k in ('raw', 'other', 'this')] + [tot['raw'] / tot['other'], tot['raw'] / tot['this'], len(rs), med('other'), med('this'), tot['other'] / tot['this']]))
"
  exit 0
fi
if [ "$mode" = freeze ]; then
  n1=${3:-100}
  n2=${4:-600}
  for n in "$n1" "$n2"; do
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg$n" "$tmp/driver" single "$tmp/f$n" "$url" "$n" > /dev/null 2>&1
    rm -rf "$tmp/f$n"
    strace -f -o "$tmp/st$n" -e trace=fdatasync,fsync,msync,pwrite64,writev,pwritev "$tmp/driver" single "$tmp/f$n" "$url" "$n"
    rm -rf "$tmp/f$n"
  done
  python3 - "$tmp" "$n1" "$n2" <<'PY'
import re, sys
tmp, n1, n2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def ir(n):
    for line in open(f"{tmp}/cg{n}"):
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
def calls(n):
    c = {"syncs": 0, "writes": 0, "pages": 0}
    for line in open(f"{tmp}/st{n}"):
        m = re.search(r"\b(fdatasync|fsync|msync|pwrite64|writev|pwritev)\(.*= (\d+)\s*$", line)
        if not m:
            continue
        if m.group(1) in ("fdatasync", "fsync", "msync"):
            c["syncs"] += 1
        else:
            c["writes"] += 1
            c["pages"] += int(m.group(2)) // 4096
    return c
a, b = calls(n1), calls(n2)
d = n2 - n1
print("per freeze: %d instructions, %.2f synced commits, %.2f write calls, %.2f pages written"
      % ((ir(n2) - ir(n1)) // d, (b["syncs"] - a["syncs"]) / d, (b["writes"] - a["writes"]) / d, (b["pages"] - a["pages"]) / d))
PY
  exit 0
fi
n1=${3:-200}
n2=${4:-1200}
for n in "$n1" "$n2"; do
  rm -rf "$tmp/s$n"
  "$tmp/driver" freeze "$tmp/s$n" "$url" "$n"
done
a=$(ir replay "$tmp/s$n1")
b=$(ir replay "$tmp/s$n2")
echo "replay $(( (b - a) / (n2 - n1) ))"
a=$(ir transport "$url" "$n1")
b=$(ir transport "$url" "$n2")
echo "transport $(( (b - a) / (n2 - n1) ))"
