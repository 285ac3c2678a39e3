"""The cost of calling macko's op from PyTorch, beyond the kernel it launches.

For each case (a ``MackoLinear`` of a given shape, format and density, one vector), it
measures:

- **kernel**: the GPU time of macko's kernels alone, from the CUDA profiler (CUPTI) over a
  CUDA-graph replay of ``--calls`` products;
- **graph**: the time per product of that replay (CUDA events around the replay, median of
  ``--repeats``), so that ``graph - kernel`` is the op's overhead under CUDA graphs (the gap
  between kernels: launch latency within the graph, any extra kernel the op adds);
- **eager**: the time per product called from Python without a graph (synchronizing once after
  ``--calls`` calls), which is host time: the Python op dispatch, argument checks and launch.

The same is measured for ``torch.nn.functional.linear`` with the dense float16 weight, as the
baseline a user compares with.

    python3 python/bench/op_overhead.py --out op_overhead.json

Needs torch with CUDA and the macko wheel.
"""

import argparse
import json
import statistics
import sys

import torch


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="256x256,4096x4096,11008x4096",
                   help="comma-separated ROWSxCOLS")
    p.add_argument("--density", type=float, default=0.5)
    p.add_argument("--formats", default="macko",
                   help="comma-separated macko formats: macko, csr, dense, sparse24 (2:4 prunes "
                        "to half itself; --density does not apply to it)")
    p.add_argument("--calls", type=int, default=200, help="products per graph / eager loop")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--out", help="write the results as JSON here")
    return p.parse_args()


def events_ms(fn, repeats):
    """Median milliseconds of fn() between CUDA events, after one untimed call."""
    fn()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def capture(layer, x, calls):
    """A CUDA graph of `calls` products layer(x)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm-up on a side stream, as CUDA graph capture asks
            layer(x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    keep = []
    with torch.cuda.graph(graph):
        for _ in range(calls):
            keep.append(layer(x))
    return graph, keep


def kernel_us(graph, calls):
    """Microseconds of GPU kernel time per product in one replay, from the profiler; None
    where the profiler sees no kernels inside graphs."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    total = 0.0
    count = 0
    for evt in prof.events():
        if evt.device_type == torch.autograd.DeviceType.CUDA and "memcpy" not in evt.name.lower():
            total += evt.device_time if hasattr(evt, "device_time") else evt.cuda_time
            count += 1
    if count == 0:
        return None, 0
    return total / calls, count / calls


def measure(name, layer, x, args):
    graph, _keep = capture(layer, x, args.calls)
    graph_us = events_ms(graph.replay, args.repeats) * 1e3 / args.calls
    kern, kernels_per_call = kernel_us(graph, args.calls)

    def eager():
        for _ in range(args.calls):
            layer(x)

    eager_us = events_ms(eager, args.repeats) * 1e3 / args.calls
    row = {
        "what": name,
        "graph_us_per_call": graph_us,
        "kernel_us_per_call": kern,
        "kernels_per_call": kernels_per_call,
        "graph_overhead_us": None if kern is None else graph_us - kern,
        "eager_us_per_call": eager_us,
    }
    over = "-" if kern is None else f"{graph_us - kern:.2f}"
    kern_s = "-" if kern is None else f"{kern:.2f}"
    log(f"  {name}: graph {graph_us:.2f} µs/call, kernels {kern_s} µs "
        f"({kernels_per_call:.1f}/call), overhead {over} µs; eager {eager_us:.2f} µs/call")
    return row


def main():
    args = parse_args()
    from macko.torch import MackoLinear

    torch.manual_seed(0)
    rows_out = []
    log(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    for shape in args.shapes.split(","):
        rows, cols = (int(s) for s in shape.lower().split("x"))
        dense = torch.nn.Linear(cols, rows, bias=False, dtype=torch.float16, device="cuda")
        layers = []
        for fmt in args.formats.split(","):
            density = None if fmt == "sparse24" else args.density
            layers.append((fmt, MackoLinear.from_linear(dense, density=density, format=fmt)))
        layers.append(("torch dense", dense))
        x = torch.randn(1, cols, dtype=torch.float16, device="cuda")
        with torch.no_grad():
            log(f"{rows}x{cols}, d={args.density}")
            for name, layer in layers:
                row = measure(name, layer, x, args)
                row.update({"rows": rows, "cols": cols, "density": args.density})
                rows_out.append(row)
    record = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "calls": args.calls,
        "results": rows_out,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(record, f, indent=1)
    print("| shape | layer | graph µs/call | kernel µs/call | overhead µs | eager µs/call |")
    print("|---|---|---|---|---|---|")
    for r in rows_out:
        k = "-" if r["kernel_us_per_call"] is None else f"{r['kernel_us_per_call']:.2f}"
        o = "-" if r["graph_overhead_us"] is None else f"{r['graph_overhead_us']:.2f}"
        print(f"| {r['rows']}×{r['cols']} | {r['what']} | {r['graph_us_per_call']:.2f} | {k} | "
              f"{o} | {r['eager_us_per_call']:.2f} |")


if __name__ == "__main__":
    main()
