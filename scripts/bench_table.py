#!/usr/bin/env python3
"""Markdown tables for BENCHMARKS.md from a `macko bench` results.csv.

Usage: scripts/bench_table.py results.csv [BACKEND]
       scripts/bench_table.py results.csv --summary
       BATCH=4 scripts/bench_table.py results.csv ...   (one batch size of `--batch`; default 1)

Per backend: one row per shape, one column per density, each cell
"MACKO µs · % of the streaming-read ceiling · speedup over the backend's dense baseline",
then the baselines (our dense, cuBLAS, cuSPARSE or CSR) of the same run.
"""
import csv
import os
import sys
from collections import defaultdict


def read_rows(path: str) -> list:
    """The rows of one batch size: BATCH from the environment, default 1 (files written before
    `macko bench --batch` have no batch column and are all B = 1)."""
    want = int(os.environ.get("BATCH", "1"))
    return [r for r in csv.DictReader(open(path)) if int(r.get("batch") or 1) == want]


def usage_or_path() -> str:
    """The results.csv argument, or the usage text (and exit) when it is missing or asked for."""
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    return sys.argv[1]


def main() -> None:
    path = usage_or_path()
    only = sys.argv[2] if len(sys.argv) > 2 else None
    rows = read_rows(path)
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


if __name__ == "__main__" and not (len(sys.argv) > 2 and sys.argv[2] == "--summary"):
    main()


def summary(path: str) -> None:
    """Issue-5 summary: medians per density, break-even, WGSL/CUDA ratio, losses to the baseline.
    A backend or kernel the file does not hold (no CUDA on a laptop) prints "–" where its
    figures would be."""
    import statistics as st
    rows = read_rows(path)

    def fmt(xs: list, spread: bool = False, digits: int = 2) -> str:
        if not xs:
            return "–"
        text = f"{st.median(xs):.{digits}f}"
        return text + (f" ({min(xs):.{digits}f}–{max(xs):.{digits}f})" if spread else "")

    get = defaultdict(dict)
    for r in rows:
        get[(r["backend"], r["kernel"], float(r["density"]))][(int(r["rows"]), int(r["cols"]))] = r
    dens = sorted({float(r["density"]) for r in rows}, reverse=True)
    print("| d | cuda MACKO × cuBLAS (median, min–max) | cuda MACKO % ceil | wgpu MACKO × WGSL dense | wgpu MACKO % ceil | WGSL/CUDA MACKO throughput (median, min–max) | cuda shapes slower than cuBLAS |")
    print("|---|---|---|---|---|---|---|")
    for d in dens:
        cm = get[("cuda", "macko", d)]
        wm = get[("wgpu", "macko", d)]
        sp = [float(r["speedup_over_dense"]) for r in cm.values()]
        fc = [float(r["fraction_of_ceiling"]) * 100 for r in cm.values()]
        ws = [float(r["speedup_over_dense"]) for r in wm.values()]
        wf = [float(r["fraction_of_ceiling"]) * 100 for r in wm.values()]
        ratio = [float(cm[s]["median_us"]) / float(wm[s]["median_us"]) for s in cm if s in wm]
        slower = sum(1 for x in sp if x < 1)
        print(f"| {d:g} | {fmt(sp, True)} | {fmt(fc, digits=1)} | {fmt(ws)} | {fmt(wf, digits=1)} | "
              f"{fmt(ratio, True)} | {slower} of {len(sp)} |")
    # dense (ours) vs cuBLAS
    ours = get[("cuda", "dense", dens[0])]
    cub = get[("cuda", "cublas", dens[0])]
    r = [float(cub[s]["median_us"]) / float(ours[s]["median_us"]) for s in ours if s in cub]
    def spread(xs: list) -> str:
        return f"median {st.median(xs):.3f}, min {min(xs):.3f}, max {max(xs):.3f}" if xs else "–"

    print(f"\ncuda dense (ours) speed over cuBLAS at d={dens[0]:g}: {spread(r)}, "
          f"{sum(1 for x in r if x < 1)} of {len(r)} shapes slower")
    wd = get[("wgpu", "dense", dens[0])]
    r2 = [float(cub[s]["median_us"]) / float(wd[s]["median_us"]) for s in wd if s in cub]
    print(f"wgpu dense speed over cuBLAS at d={dens[0]:g}: {spread(r2)}")
    # break-even: highest density at which the median speedup is >= 1
    for b in ("cuda", "wgpu"):
        speeds = {d: [float(r["speedup_over_dense"]) for r in get[(b, "macko", d)].values()] for d in dens}
        if not any(speeds.values()):
            print(f"{b}: no MACKO records")
            continue
        even = [d for d in dens if speeds[d] and st.median(speeds[d]) >= 1.0]
        print(f"{b}: median MACKO speedup ≥ 1 from d = {max(even):g} down" if even else f"{b}: never ≥ 1")
    mb = [(s, float(r["fraction_of_ceiling"])) for s, r in get[("cuda", "macko", 0.5)].items()]
    mb.sort(key=lambda t: t[1])
    print("cuda d=0.5 lowest % ceiling:", ", ".join(f"{s[0]}×{s[1]} {f*100:.0f}%" for s, f in mb[:5]))


if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[2] == "--summary":
    summary(usage_or_path())
