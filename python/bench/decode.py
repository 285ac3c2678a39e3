"""End-to-end decoding with macko's layers: a Llama-2-7B-shaped model, dense against pruned.

Builds ``LlamaForCausalLM`` from its configuration (hidden 4096, intermediate 11008, 32 layers,
32 heads, vocabulary 32000: Llama-2-7B's shapes; random weights, nothing downloaded) in float16
on the GPU, then for each density prunes every linear layer of the decoder per row by
magnitude and replaces it by ``macko.torch.MackoLinear`` (``lm_head`` stays dense, as in the
MACKO write-up), and decodes with Hugging Face's static cache, the decoding step compiled by
``generate`` with ``torch.compile(fullgraph=True, mode="reduce-overhead")``. It reports tokens per second (the median of
``--repeats`` timed generations after ``--warmup`` untimed ones) and the device memory in use
(``cudaMemGetInfo``: torch's allocations and macko's alike; ``torch.cuda.max_memory_allocated``
would not see macko's).

    python3 python/bench/decode.py --densities dense,0.5,0.1 --batch 1 --out results.jsonl

Needs torch with CUDA, transformers and the macko wheel. Each density builds the model anew
from the same seed, so every run starts from the same dense weights.

``--tp N`` runs each configuration tensor-parallel over N GPUs (``tensor_parallel.py``: one
process a GPU, NCCL, two all-reduces a decoder layer; dense runs are split the same way), and
reports rank 0's tokens per second and memory (each GPU holds one shard of the decoder).
Before timing, the dense run compares its prompt logits with the unsharded model's.
"""

import argparse
import gc
import json
import statistics
import sys
import time

import torch


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--densities", default="dense,0.7,0.5,0.3,0.1",
                   help="comma-separated: 'dense' and/or densities in (0, 1]")
    p.add_argument("--batch", default="1", help="comma-separated batch sizes (sequences)")
    p.add_argument("--layers", type=int, default=32, help="decoder layers (32 for Llama-2-7B)")
    p.add_argument("--prompt", type=int, default=8, help="prompt tokens per sequence")
    p.add_argument("--tokens", type=int, default=128, help="new tokens per generation")
    p.add_argument("--warmup", type=int, default=2, help="untimed generations first")
    p.add_argument("--repeats", type=int, default=3, help="timed generations (median)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-compile", action="store_true", help="eager decoding (for debugging)")
    p.add_argument("--loop", choices=("generate", "graph"), default="generate",
                   help="'generate': Hugging Face's generate() with its own compilation; "
                        "'graph': a hand-written greedy loop over model.forward compiled with "
                        "CUDA graphs, one replay per token (prefill untimed)")
    p.add_argument("--tp", type=int, default=1,
                   help="tensor-parallel over this many GPUs of the machine (one process each, "
                        "NCCL); 1: one GPU")
    p.add_argument("--single", help=argparse.SUPPRESS)
    p.add_argument("--out", help="append one JSON line per (density, batch) here")
    return p.parse_args()


def device_memory_in_use():
    free, total = torch.cuda.mem_get_info()
    return total - free


def build_model(args):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=args.layers,
        num_attention_heads=32,
        num_key_value_heads=32,
        vocab_size=32000,
        max_position_embeddings=4096,
    )
    torch.manual_seed(args.seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float16)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def sparsify(model, density):
    from macko.torch import replace_linear

    start = time.perf_counter()
    names = replace_linear(model.model, density=density)
    gc.collect()
    torch.cuda.empty_cache()
    log(f"  {len(names)} linear layers pruned to {density} and encoded in "
        f"{time.perf_counter() - start:.1f} s")
    return len(names)


def compile_options(args):
    """generate()'s own compilation of the decoding step (with the static cache it compiles the
    forward pass itself; compiling `model.forward` by hand as well breaks its CUDA graphs)."""
    if args.no_compile:
        return {"disable_compile": True}
    from transformers import CompileConfig

    return {"compile_config": CompileConfig(fullgraph=True, mode="reduce-overhead")}


def generate_once(model, ids, args):
    tokens = args.tokens
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=tokens,
        min_new_tokens=tokens,
        do_sample=False,
        cache_implementation="static",
        pad_token_id=0,
        **compile_options(args),
    )
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    if out.shape[1] != ids.shape[1] + tokens:
        raise RuntimeError(f"generated {out.shape[1] - ids.shape[1]} tokens, not {tokens}")
    return elapsed


def static_cache(model, batch, length):
    """A StaticCache for `batch` sequences of `length` positions, whatever keyword arguments
    this transformers version's constructor takes."""
    import inspect

    from transformers import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kwargs = {"config": model.config, "max_cache_len": length}
    extra = {"max_batch_size": batch, "batch_size": batch, "device": "cuda",
             "dtype": torch.float16}
    kwargs.update({k: v for k, v in extra.items() if k in params})
    return StaticCache(**kwargs)


class GraphLoop:
    """Greedy decoding with one compiled forward pass per token: each generation empties the
    static cache and prefills the prompt eagerly (untimed), then decodes `tokens` tokens, the
    forward pass of each a CUDA-graph replay (``torch.compile(mode="reduce-overhead",
    fullgraph=True)``); the next token is the argmax of the logits, taken outside the graph.
    Only the decoding loop is timed."""

    def __init__(self, model, ids, args):
        self.model = model
        self.ids = ids
        self.tokens = args.tokens
        batch, prompt = ids.shape
        self.prompt = prompt
        self.cache = static_cache(model, batch, prompt + args.tokens + 1)
        self.position = torch.tensor([prompt], device="cuda")
        forward = model.forward
        self.step = forward if args.no_compile else torch.compile(
            forward, mode="reduce-overhead", fullgraph=True)

    def prefill(self):
        """The cache emptied and filled with the prompt; the first new token."""
        # Newer transformers count the cache's length inside the cache (not from
        # cache_position): a restart must empty it.
        self.cache.reset()
        positions = torch.arange(self.prompt, device="cuda")
        logits = self.model(self.ids, past_key_values=self.cache, cache_position=positions,
                            use_cache=True).logits
        return logits[:, -1].argmax(-1, keepdim=True)

    def generate(self):
        with torch.no_grad():
            token = self.prefill()
            self.position.fill_(self.prompt)
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(self.tokens):
                torch.compiler.cudagraph_mark_step_begin()
                logits = self.step(token, past_key_values=self.cache,
                                   cache_position=self.position, use_cache=True).logits
                token = logits[:, -1].argmax(-1, keepdim=True)
                self.position += 1
            torch.cuda.synchronize()
            return time.perf_counter() - start


def distributed_setup(args):
    """This process's rank in a group of ``args.tp`` (started by `run_in_own_process`), its GPU
    made current and the NCCL group initialised; (0, None) without tensor parallelism."""
    if args.tp == 1:
        return 0, None
    import os

    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=rank, world_size=args.tp, device_id=device)
    return rank, dist.group.WORLD


def shard(args, model, density, rank, group, ids):
    """The model's decoder split over the group (`tensor_parallel.shard_llama`); for the dense
    run, the largest difference of the prompt's logits from the unsharded model's, relative to
    their largest magnitude. float16 partial sums added in another order give a few 10⁻³ (an
    H100 pair: 5.9·10⁻³); a split that mixes up heads or drops a partial sum gives differences
    of the logits' own size, hence the bound of 0.1."""
    from tensor_parallel import shard_llama

    start = time.perf_counter()
    reference = None
    if density == "dense":
        with torch.no_grad():
            reference = model(ids).logits.float()
    replaced = shard_llama(model, rank, args.tp, group,
                           density=None if density == "dense" else float(density))
    gc.collect()
    torch.cuda.empty_cache()
    log(f"  rank {rank}: {replaced} linear layers sharded over {args.tp} GPUs in "
        f"{time.perf_counter() - start:.1f} s")
    difference = None
    if reference is not None:
        with torch.no_grad():
            got = model(ids).logits.float()
        difference = float((got - reference).abs().max() / reference.abs().max())
        log(f"  rank {rank}: prompt logits differ from the unsharded model's by "
            f"{difference:.2e} of their largest magnitude")
        if not difference < 0.1:
            raise RuntimeError(f"tensor-parallel logits differ from the unsharded model's by "
                               f"{difference:.2e} of their largest magnitude")
    return (0 if density == "dense" else replaced), difference


def run(args, density, batch):
    rank, group = distributed_setup(args)
    log(f"== {density}, batch {batch}: building the model" + (f" (rank {rank})" if group else ""))
    gc.collect()
    torch.cuda.empty_cache()
    base = device_memory_in_use()
    model = build_model(args)
    ids = torch.randint(1, 32000, (batch, args.prompt), device="cuda",
                        generator=torch.Generator("cuda").manual_seed(args.seed))
    difference = None
    if group is not None:
        replaced, difference = shard(args, model, density, rank, group, ids)
    else:
        replaced = 0 if density == "dense" else sparsify(model, float(density))
    if args.loop == "graph":
        loop = GraphLoop(model, ids, args)
        once = loop.generate
    else:
        def once():
            return generate_once(model, ids, args)
    log(f"  warm-up ({args.warmup} generations; the first compiles)")
    for _ in range(args.warmup):
        once()
    times = [once() for _ in range(args.repeats)]
    median = statistics.median(times)
    record = {
        "density": density,
        "batch": batch,
        "layers": args.layers,
        "linear_layers_replaced": replaced,
        "new_tokens": args.tokens,
        "prompt_tokens": args.prompt,
        "seconds": times,
        "tokens_per_s": batch * args.tokens / median,
        "memory_in_use_bytes": device_memory_in_use() - base,
        "compiled": not args.no_compile,
        "loop": args.loop,
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "tp": args.tp,
    }
    if difference is not None:
        record["tp_logits_difference"] = difference
    log(f"  {record['tokens_per_s']:.1f} tokens/s, "
        f"{record['memory_in_use_bytes'] / 2**30:.2f} GiB in use")
    del model
    if args.loop == "graph":
        del loop
    torch._dynamo.reset()
    if group is not None:
        import torch.distributed as dist

        dist.destroy_process_group()
    return record


def run_in_own_process(args, density, batch):
    """One configuration in a fresh Python process (one per GPU with ``--tp``; rank 0's record
    is the result): memory in use is then measured from the same empty device every time
    (macko frees through CUDA's stream-ordered pool, which keeps freed memory until a
    synchronization), and no compiled graph outlives its model."""
    import os
    import socket
    import subprocess

    cmd = [sys.executable, __file__, *sys.argv[1:], "--single", f"{density}:{batch}"]
    env = dict(os.environ)
    if args.tp > 1:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(args.tp))
    ranks = []
    for rank in range(args.tp):
        env_rank = dict(env, RANK=str(rank), LOCAL_RANK=str(rank))
        out = subprocess.PIPE if rank == 0 else subprocess.DEVNULL
        ranks.append(subprocess.Popen(cmd, stdout=out, text=True, env=env_rank))
    # A rank that fails leaves the others waiting in a collective for ever: stop them all.
    while any(p.poll() is None for p in ranks):
        if any(p.poll() not in (None, 0) for p in ranks):
            for p in ranks:
                if p.poll() is None:
                    p.kill()
        time.sleep(0.5)
    stdout = ranks[0].stdout.read()
    codes = [p.returncode for p in ranks]
    if any(codes):
        log(f"  {density}, batch {batch}: the run failed (exit codes {codes})")
        return None
    return json.loads(stdout.strip().splitlines()[-1])


def main():
    args = parse_args()
    import transformers

    if not args.single:
        log(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
            f"transformers {transformers.__version__}")
        if args.tp < 1 or args.tp > torch.cuda.device_count():
            sys.exit(f"--tp {args.tp}: this machine has {torch.cuda.device_count()} GPUs")
    if args.single:
        density, batch = args.single.split(":")
        print(json.dumps(run(args, density, int(batch))), flush=True)
        return
    records = []
    for batch in [int(b) for b in args.batch.split(",")]:
        for density in [d.strip() for d in args.densities.split(",")]:
            record = run_in_own_process(args, density, batch)
            if record is None:
                continue
            records.append(record)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(record) + "\n")
    dense = {r["batch"]: r for r in records if r["density"] == "dense"}
    print("| batch | density | tokens/s | × dense | memory in use (GiB) | × dense |")
    print("|---|---|---|---|---|---|")
    for r in records:
        d = dense.get(r["batch"])
        speed = f"{r['tokens_per_s'] / d['tokens_per_s']:.2f}" if d else "-"
        mem = f"{r['memory_in_use_bytes'] / d['memory_in_use_bytes']:.2f}" if d else "-"
        print(f"| {r['batch']} | {r['density']} | {r['tokens_per_s']:.1f} | {speed} | "
              f"{r['memory_in_use_bytes'] / 2**30:.2f} | {mem} |")


if __name__ == "__main__":
    main()
