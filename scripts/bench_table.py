#!/usr/bin/env python3
"""Markdown tables for BENCHMARKS.md from a `macko bench` results.csv.

Usage: scripts/bench_table.py results.csv [BACKEND]

Per backend: one row per shape, one column per density, each cell
"MACKO µs · % of the streaming-read ceiling · speedup over the backend's dense baseline",
then the baselines (our dense, cuBLAS, cuSPARSE or CSR) of the same run.
"""
import csv
import sys
from collections import defaultdict


def main() -> None:
    path = sys.argv[1]
    only = sys.argv[2] if len(sys.argv) > 2 else None
    rows = list(csv.DictReader(open(path)))
    by = defaultdict(dict)
    for r in rows:
        key = (r["backend"], int(r["rows"]), int(r["cols"]))
        by[key][(r["kernel"], float(r["density"]))] = r
    backends = sorted({k[0] for k in by if only is None or k[0] == only})
    for b in backends:
        shapes = sorted({(k[1], k[2]) for k in by if k[0] == b}, key=lambda s: s[0] * s[1])
        dens = sorted({float(r["density"]) for r in rows if r["backend"] == b}, reverse=True)
        device = next(r["device"] for r in rows if r["backend"] == b)
        print(f"\n**{b}** ({device}); cell: MACKO µs · % of ceiling · × {'cuBLAS' if b == 'cuda' else 'dense (ours)'}\n")
        print("| shape | " + " | ".join(f"d={d:g}" for d in dens) + " | dense (ours) µs | " +
              ("cuBLAS µs |" if b == "cuda" else "") + " ceiling GB/s |")
        print("|---" * (len(dens) + 3 + (b == "cuda")) + "|")
        for s in shapes:
            cells = by[(b, *s)]
            line = f"| {s[0]}×{s[1]} |"
            for d in dens:
                m = cells.get(("macko", d))
                if m is None:
                    line += " – |"
                    continue
                frac = m["fraction_of_ceiling"]
                sp = m["speedup_over_dense"]
                line += f" {float(m['median_us']):.1f} · {float(frac) * 100:.0f}% · {float(sp):.2f}× |" if frac and sp else f" {float(m['median_us']):.1f} |"
            dense = [cells[k] for k in cells if k[0] == "dense"]
            line += f" {min(float(r['median_us']) for r in dense):.1f} |" if dense else " – |"
            if b == "cuda":
                cb = [cells[k] for k in cells if k[0] == "cublas"]
                line += f" {min(float(r['median_us']) for r in cb):.1f} |" if cb else " – |"
            st = [cells[k] for k in cells if k[0] == "stream"]
            line += f" {max(float(r['gbps']) for r in st):.0f} |" if st else " – |"
            print(line)


if __name__ == "__main__":
    main()
