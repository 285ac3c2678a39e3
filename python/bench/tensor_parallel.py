"""Tensor parallelism for the decoding benchmark: a Llama model's decoder split over the GPUs
of one process group, Megatron-style, with macko's shards or plain dense slices.

Per decoder layer, the projections that open a block are split by output features (column
parallel: q/k/v by whole attention heads, gate/up by their rows) and the ones that close it by
input features (row parallel: o_proj and down_proj), followed by one all-reduce each: two
all-reduces a layer, as in Megatron-LM. Embeddings, norms and ``lm_head`` stay whole on every
rank (they are a few percent of the bytes), so every rank ends a step with the same logits and
picks the same next token.

The all-reduce is ``torch.distributed._functional_collectives.all_reduce``, which
``torch.compile(fullgraph=True)`` traces into the graph (and CUDA graphs capture with NCCL).
Hugging Face's static cache sizes itself from the first keys it sees, so each rank's cache holds
only its own heads.
"""

import torch
import torch.distributed._functional_collectives as funcol

COLUMN = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj",
          "mlp.up_proj")
ROW = ("self_attn.o_proj", "mlp.down_proj")


class AllReduce(torch.nn.Module):
    """A row-parallel layer followed by the sum of its partial outputs over the group."""

    def __init__(self, inner, group):
        super().__init__()
        self.inner = inner
        self.group = group

    def forward(self, x):
        return funcol.all_reduce(self.inner(x), "sum", self.group)


def dense_shard(linear, rank, world, parallel):
    """A plain ``nn.Linear`` holding one shard of ``linear`` (the dense baseline), sliced as
    ``MackoLinear.shard_of`` slices (``torch.tensor_split``); the bias goes with the column
    slice, or whole to rank 0 for a row slice."""
    axis = 0 if parallel == "column" else 1
    weight = torch.tensor_split(linear.weight.detach(), world, dim=axis)[rank].contiguous()
    bias = linear.bias
    if bias is not None:
        if parallel == "column":
            bias = torch.tensor_split(bias.detach(), world)[rank].contiguous()
        elif rank != 0:
            bias = None
    out_features, in_features = weight.shape
    shard = torch.nn.Linear(in_features, out_features, bias=bias is not None,
                            device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        shard.weight.copy_(weight)
        if bias is not None:
            shard.bias.copy_(bias)
    return shard


def check_heads(config, world):
    """Column slices of q/k/v must hold whole heads: ``world`` has to divide the head counts."""
    for name in ("num_attention_heads", "num_key_value_heads"):
        heads = getattr(config, name)
        if heads % world:
            raise ValueError(f"{name} = {heads} cannot be split evenly over {world} GPUs "
                             "(each rank needs whole attention heads)")


def shard_llama(model, rank, world, group, density=None):
    """Replaces, in place, every decoder projection of a Hugging Face Llama ``model`` by rank
    ``rank``'s shard: a ``MackoLinear`` pruned to ``density`` (pruned whole, then sliced, so the
    shards compose to the unsharded layer exactly) or, with ``density=None``, a dense
    ``nn.Linear`` slice. Returns the number of layers replaced."""
    from macko.torch import MackoLinear

    check_heads(model.config, world)
    replaced = 0
    for layer in model.model.layers:
        for path in COLUMN + ROW:
            parent_name, child_name = path.split(".")
            parent = getattr(layer, parent_name)
            linear = getattr(parent, child_name)
            parallel = "column" if path in COLUMN else "row"
            if density is None:
                shard = dense_shard(linear, rank, world, parallel)
            else:
                shard = MackoLinear.shard_of(linear, rank, world, parallel, density=density)
            if parallel == "row":
                shard = AllReduce(shard, group)
            setattr(parent, child_name, shard)
            del linear
            replaced += 1
    return replaced
