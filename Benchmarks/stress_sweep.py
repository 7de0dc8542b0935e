#!/usr/bin/env python3
"""The sweep of Benchmarks/README.md ("Stress"): `courier stress cache` over threads 1 and 2,
processes 1 and 2, key spaces and value sizes, each setting run --runs times on one prefilled
store, medians printed as a Markdown table (and every result kept as JSON with --keep DIR).

    swift build -c release --product courier
    python3 Benchmarks/stress_sweep.py --tool .build/release/courier --runs 3 --seconds 3
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

# (label, entries, value size, mix, threads, processes)
GRID = [
    ("gets", 10_000, "1k", "100:0:0", 1, 1), ("gets", 10_000, "1k", "100:0:0", 2, 1),
    ("gets", 100_000, "1k", "100:0:0", 1, 1), ("gets", 100_000, "1k", "100:0:0", 2, 1),
    ("gets", 100_000, "1k", "100:0:0", 1, 2),
    # 1M x 1 KiB is over the default 256 MiB limit: these rows raise it (LIMITS) so every key is stored.
    ("gets", 1_000_000, "1k", "100:0:0", 1, 1), ("gets", 1_000_000, "1k", "100:0:0", 2, 1),
    ("gets", 1_000_000, "1k", "100:0:0", 1, 2),
    # 10M entries of 100 B: a store of about 5.4 GB (2.4x the bytes counted: see "Disk bound").
    ("gets", 10_000_000, "100", "100:0:0", 1, 1), ("gets", 10_000_000, "100", "100:0:0", 2, 1),
    ("gets", 10_000_000, "100", "100:0:0", 1, 2),
    ("mixed", 10_000_000, "100", "90:9:1", 2, 1), ("mixed", 10_000_000, "100", "90:9:1", 1, 2),
    ("mixed", 100_000, "100", "90:9:1", 2, 1), ("mixed", 100_000, "1k", "90:9:1", 2, 1),
    ("mixed", 100_000, "1k", "90:9:1", 1, 2),
    ("mixed", 5_000, "16k", "90:9:1", 2, 1), ("mixed", 200, "1m", "90:9:1", 2, 1),
]


# Size limits for key spaces that would not fit the default (every key must be stored for the gets).
LIMITS = {1_000_000: "2g", 10_000_000: "3g"}


def run(tool: str, args: list[str]) -> dict:
    out = subprocess.run([tool, "stress", "cache", "--json", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"failed ({out.returncode}): {' '.join(args)}\n{out.stderr}")
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", default=".build/release/courier")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", default="3")
    ap.add_argument("--durability", default="durable")
    ap.add_argument("--keep", help="a directory for every run's JSON")
    ap.add_argument("--entries", type=int, help="only the rows of this key space")
    a = ap.parse_args()
    print(f"| workload | entries | value | mix | thr x proc | ops/s | get p50 µs | get p99 µs | get p99.9 µs | "
          f"put p50 µs | put p99 µs | errors | verify | gets that hit |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    stores: dict[tuple, str] = {}
    root = tempfile.mkdtemp(prefix="courier-sweep-")
    try:
        for label, entries, value, mix, thr, proc in GRID:
            if a.entries and entries != a.entries:
                continue
            limit = ["--size-limit", LIMITS[entries]] if entries in LIMITS else []
            key = (entries, value)
            if key not in stores:
                stores[key] = os.path.join(root, f"{entries}-{value}")
                run(a.tool, ["--store", stores[key], "--entries", str(entries), "--value-size", value, "--prefill",
                             "--ops", "1", "--duration", "0", "--threads", "2", *limit])
            results = []
            for i in range(a.runs):
                r = run(a.tool, ["--store", stores[key], "--entries", str(entries), "--value-size", value, "--mix", mix,
                                 "--threads", str(thr), "--processes", str(proc), "--duration", a.seconds,
                                 "--durability", a.durability, "--seed", str(i + 1), *limit])
                results.append(r)
                if a.keep:
                    os.makedirs(a.keep, exist_ok=True)
                    with open(os.path.join(a.keep, f"{label}-{entries}-{value}-{thr}x{proc}-{i}.json"), "w") as f:
                        json.dump(r, f)
            med = lambda k: statistics.median(x[k] for x in results)  # noqa: E731
            rate = statistics.median(x["ops"] / x["seconds"] for x in results)
            errors = sum(x["errors"] for x in results)
            clean = all(x["verify"]["consistent"] for x in results)
            hits = sum(x["hits"] for x in results) / max(1, sum(x["gets"] for x in results))
            puts = "-" if mix.split(":")[1] == "0" else f"{med('put_p50_ns') / 1000:.1f} | {med('put_p99_ns') / 1000:.1f}"
            if puts == "-":
                puts = "- | -"
            print(f"| {label} | {entries:,} | {value} | {mix} | {thr} x {proc} | {rate:,.0f} | "
                  f"{med('get_p50_ns') / 1000:.2f} | {med('get_p99_ns') / 1000:.2f} | {med('get_p999_ns') / 1000:.1f} | "
                  f"{puts} | {errors} | {'clean' if clean else 'FAILED'} | {hits:.0%} |", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
