"""Charts of Courier's stress and benchmark results, drawn with matplotlib (an optional extra:
``pip install "./bindings/python[plot]"``).

    python -m courier.plot RESULT.json -o chart.svg     # or chart.png

- A stress result (``courier stress cache --json``) becomes a time series: throughput per second,
  and get/put latency percentiles per second (p50, p99, p99.9, max) on a log scale, with the totals
  and the verify's verdict in the title.
- A benchmark result (``courier bench cache --json``, ``bench transport``, ...; a flat object of
  figures named ``<peer>_<metric>``) becomes side-by-side bars: for each metric, the peers that
  report it, each labelled with its ratio to the first (the baseline: raw LMDB, plain libcurl).

Only reads the JSON: nothing here measures or decides anything.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

# Peers as benchmarks name them, longest first (a key's peer is the longest that prefixes it), in
# the order bars are drawn; the first present in a group is its baseline.
PEERS = ["raw_nocopy", "raw_scattered", "raw", "curl_headers", "curl", "courier_c", "courier", "swift",
         "urlcache", "urlsession"]


def _pyplot():
    try:
        import matplotlib
    except ImportError as e:  # pragma: no cover - the message is the point
        raise SystemExit('courier.plot needs matplotlib: pip install "courier[plot]"') from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def is_stress(result: dict[str, Any]) -> bool:
    return isinstance(result.get("series"), list)


def _settings_line(result: dict[str, Any]) -> str:
    s = result.get("settings") or {}
    parts = [f"{s.get('threads', '?')} thr x {s.get('processes', '?')} proc", f"{s.get('entries', '?')} keys",
             f"values {s.get('value_size', '?')}", f"mix {s.get('mix', '?')}", str(s.get("skew", "")),
             str(s.get("durability", ""))]
    if s.get("size_limit"):
        parts.append(f"limit {s['size_limit'] / 2**20:.0f} MiB")
    if s.get("http"):
        parts.append("request path")
    return ", ".join(p for p in parts if p)


def plot_stress(result: dict[str, Any], out: str) -> None:
    plt = _pyplot()
    series = result["series"]
    secs = [row.get("second", i) for i, row in enumerate(series)]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    ax1.plot(secs, [row.get("ops", 0) for row in series], marker="o", label="ops/s")
    ax1.plot(secs, [row.get("gets", 0) for row in series], linestyle="--", label="gets/s")
    ax1.plot(secs, [row.get("puts", 0) for row in series], linestyle=":", label="puts/s")
    ax1.set_ylabel("operations per second")
    ax1.set_ylim(bottom=0)
    ax1.legend(loc="lower right", fontsize="small")
    ax1.grid(True, alpha=0.3)
    for name, style in (("get_p50", "-"), ("get_p99", "-"), ("get_p999", "-"), ("get_max", ":"),
                        ("put_p50", "--"), ("put_p99", "--")):
        ys = [row.get(name + "_ns", 0) / 1000.0 for row in series]
        if any(y > 0 for y in ys):
            ax2.plot(secs, [y if y > 0 else math.nan for y in ys], linestyle=style, marker=".",
                     label=name.replace("_p999", " p99.9").replace("_", " "))
    ax2.set_yscale("log")
    ax2.set_ylabel("latency (µs)")
    ax2.set_xlabel("second of the run")
    ax2.legend(loc="upper right", fontsize="small", ncol=3)
    ax2.grid(True, which="both", alpha=0.3)
    verify = result.get("verify") or {}
    verdict = "verify clean" if verify.get("consistent") else "VERIFY FAILED"
    rate = result.get("ops", 0) / result["seconds"] if result.get("seconds") else 0
    fig.suptitle(f"courier stress cache: {result.get('ops', 0):,} ops, {rate:,.0f} ops/s, "
                 f"{result.get('errors', 0)} errors, {verdict}\n{_settings_line(result)}", fontsize="medium")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def peer_groups(result: dict[str, Any]) -> dict[str, list[tuple[str, float]]]:
    """{metric: [(peer, value), ...]} for every metric that two or more peers report."""
    groups: dict[str, list[tuple[str, float]]] = {}
    for key, value in result.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        peer = next((p for p in PEERS if key.startswith(p + "_")), None)
        if peer is None:
            continue
        groups.setdefault(key[len(peer) + 1:], []).append((peer, float(value)))
    out = {}
    for metric, items in groups.items():
        if len(items) >= 2:
            items.sort(key=lambda pv: PEERS.index(pv[0]))
            out[metric] = items
    return out


def plot_bench(result: dict[str, Any], out: str, title: str | None = None) -> None:
    groups = peer_groups(result)
    if not groups:
        raise SystemExit("courier.plot: no figures named <peer>_<metric> with two or more peers in this JSON")
    plt = _pyplot()
    metrics = sorted(groups)
    cols = min(3, len(metrics))
    rows = math.ceil(len(metrics) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, metric in zip([a for row in axes for a in row], metrics):
        items = groups[metric]
        base = items[0][1]
        xs = range(len(items))
        bars = ax.bar(xs, [v for _, v in items], color=[f"C{PEERS.index(p) % 10}" for p, _ in items])
        ax.set_xticks(list(xs))
        ax.set_xticklabels([p for p, _ in items], rotation=30, ha="right", fontsize="small")
        ax.set_title(metric, fontsize="small")
        for bar, (_, v) in zip(bars, items):
            ax.annotate(f"{v / base:.2f}x" if base else "-", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize="x-small")
        ax.grid(True, axis="y", alpha=0.3)
    for ax in [a for row in axes for a in row][len(metrics):]:
        ax.axis("off")
    fig.suptitle(title or "courier bench: peers side by side (ratio to the first)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def plot(path: str, out: str) -> str:
    """Draws the chart of the result in `path` into `out` (.svg or .png); returns `out`."""
    ext = os.path.splitext(out)[1].lower()
    if ext not in (".svg", ".png"):
        raise SystemExit(f"courier.plot: the output must end in .svg or .png, not {out!r}")
    with open(path, encoding="utf-8") as f:
        result = json.load(f)
    if not isinstance(result, dict):
        raise SystemExit("courier.plot: the JSON is not an object")
    if is_stress(result):
        plot_stress(result, out)
    else:
        plot_bench(result, out, title=f"{os.path.basename(path)}: peers side by side (ratio to the first)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m courier.plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("result", help="a JSON result of `courier stress ... --json` or `courier bench ... --json`")
    parser.add_argument("-o", "--output", required=True, help="the chart to write (.svg or .png)")
    args = parser.parse_args(argv)
    print(plot(args.result, args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
