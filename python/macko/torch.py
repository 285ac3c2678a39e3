"""PyTorch support: products on torch tensors where they live, ``MackoLinear``, and the op.

Importable only where torch is installed::

    import torch
    from macko.torch import MackoLinear, replace_linear

    layer = torch.nn.Linear(4096, 11008, dtype=torch.float16, device="cuda")
    sparse = MackoLinear.from_linear(layer, density=0.5)   # prune each row to half, encode
    y = sparse(torch.randn(8, 4096, dtype=torch.float16, device="cuda"))

    replace_linear(model, density=0.5)                     # every nn.Linear of a model

CUDA tensors run macko's CUDA kernels on torch's current stream, reading and writing the
tensors' own memory: no copy to the host, no synchronization, so the product is ordered with
torch's work and is captured by CUDA graphs. CPU tensors run the CPU backend, sharing the
tensors' memory with NumPy. The product is the custom op ``torch.ops.macko.spmm`` (registered
with ``torch.library``, with a fake implementation for tracing), so ``torch.compile(...,
fullgraph=True, mode="reduce-overhead")`` and ``torch.library.opcheck`` work.

Bad input raises the errors of :mod:`macko.errors` (a wrong dtype is a ``DtypeError``, which
is a ``TypeError``; a wrong shape or device a ``ShapeError``, a ``ValueError``), never a crash
and never a silent copy to the host.
"""

import itertools
import threading
import weakref

import torch

from . import _native
from .errors import ConfigError, DtypeError, ShapeError

__all__ = ["MackoLinear", "replace_linear", "multiply", "device_for"]

# Kernels read x in 16-byte words; torch's allocator aligns far more, but a view may not be.
_ALIGN = 16
_OUT_DTYPES = {torch.float16: "float16", torch.float32: "float32"}

# DeviceMatrix objects by handle: ops take tensors and numbers, not Python objects, so the op
# names its matrix by an integer. A handle lives as long as the object that registered it.
_matrices = {}
_next_handle = itertools.count(1)
_lock = threading.Lock()
_devices = {}


def device_for(device):
    """The macko device for a torch device: the CPU backend for ``cpu``, the CUDA backend on
    the same GPU for ``cuda:N`` (an ``UnavailableError`` saying why if it cannot open)."""
    device = torch.device(device)
    if device.type == "cuda":
        key = ("cuda", device.index if device.index is not None else torch.cuda.current_device())
    elif device.type == "cpu":
        key = ("cpu", 0)
    else:
        raise ConfigError(f"macko runs on cpu and cuda tensors, not {device.type}")
    with _lock:
        if key not in _devices:
            _devices[key] = _native.Device(key[0], ordinal=key[1])
        return _devices[key]


def _register(matrix):
    with _lock:
        handle = next(_next_handle)
        _matrices[handle] = matrix
    return handle


def _release(handle):
    with _lock:
        _matrices.pop(handle, None)


def _check(matrix, x, what="x"):
    """Raises unless x is a float16 tensor of 1 or 2 dimensions on the matrix's device."""
    if not isinstance(x, torch.Tensor):
        raise DtypeError(f"{what} must be a torch.Tensor, not {type(x).__name__}")
    if x.dtype != torch.float16:
        raise DtypeError(f"{what} has dtype {x.dtype}; expected torch.float16")
    if x.dim() not in (1, 2):
        raise ShapeError(
            f"{what} must be 1-D (one vector) or 2-D (one vector per row), not {x.dim()}-D"
        )
    if x.shape[-1] != matrix.cols:
        raise ShapeError(
            f"{what} has {x.shape[-1]} elements per vector, but the matrix has "
            f"{matrix.cols} columns"
        )
    _check_device(matrix, x, what)


def _check_device(matrix, x, what):
    """Raises unless x is where the matrix is: macko never copies between devices, and a
    kernel on one GPU must not be handed another GPU's memory (tensor-parallel code keeps a
    layer per GPU)."""
    want = "cuda" if matrix.device_kind == "cuda" else "cpu"
    if x.device.type != want:
        raise ShapeError(
            f"{what} is on {x.device}, but the matrix is on macko's {matrix.device_kind} device; "
            f"move one of them (macko never copies between devices behind your back)"
        )
    if want == "cuda":
        index = x.device.index if x.device.index is not None else torch.cuda.current_device()
        if index != matrix.device_ordinal:
            raise ShapeError(
                f"{what} is on cuda:{index}, but the matrix is on cuda:{matrix.device_ordinal}; "
                f"move one of them (macko never copies between devices behind your back)"
            )


def _prepare(x):
    """x as a contiguous [B][cols] tensor whose data is 16-byte aligned (a copy only when the
    view is not already one)."""
    x2 = x.reshape(1, -1) if x.dim() == 1 else x
    if not x2.is_contiguous() or x2.data_ptr() % _ALIGN != 0:
        x2 = x2.contiguous() if not x2.is_contiguous() else x2.clone()
    return x2


@torch.library.custom_op("macko::spmm", mutates_args=())
def _spmm(x: torch.Tensor, handle: int, rows: int, out_dtype: torch.dtype) -> torch.Tensor:
    """Y = A·X: x is [B][cols] float16, contiguous and aligned; A is the matrix of `handle`."""
    matrix = _matrices.get(handle)
    if matrix is None:
        raise ConfigError(f"macko matrix handle {handle} was released")
    _check_device(matrix, x, "x")
    x = _prepare(x)
    batch = x.shape[0]
    if x.is_cuda:
        y = torch.empty((batch, rows), dtype=out_dtype, device=x.device)
        stream = torch.cuda.current_stream(x.device).cuda_stream
        matrix._multiply_cuda_pointers(
            x.data_ptr(), y.data_ptr(), batch, _OUT_DTYPES[out_dtype], stream
        )
        return y
    y = matrix.multiply(x.numpy(), out_dtype=_OUT_DTYPES[out_dtype])
    return torch.from_numpy(y)


@_spmm.register_fake
def _spmm_fake(x, handle, rows, out_dtype):
    return x.new_empty((x.shape[0], rows), dtype=out_dtype)


def multiply(matrix, x, out_dtype=torch.float32):
    """y = A·x (x 1-D) or Y = A·X (x 2-D, one vector per row) for a ``DeviceMatrix`` and a
    float16 tensor on the matrix's device; the result is a new tensor on that device."""
    _check(matrix, x)
    if out_dtype not in _OUT_DTYPES:
        raise DtypeError(f"out_dtype {out_dtype}: expected torch.float16 or torch.float32")
    if matrix.device_kind != "cuda":
        y = matrix.multiply(x.detach().numpy(), out_dtype=_OUT_DTYPES[out_dtype])
        return torch.from_numpy(y)
    handle = _register(matrix)
    try:
        # Queued on torch's stream; the caller's `matrix` keeps the device memory alive.
        y = _spmm(x.reshape(-1, matrix.cols), handle, matrix.rows, out_dtype)
    finally:
        _release(handle)
    return y.reshape(-1) if x.dim() == 1 else y


class MackoLinear(torch.nn.Module):
    """A linear layer whose weight is stored in macko's format (MACKO-16-4 by default) on the
    device of the layer it replaces: ``y = x @ W.T + b`` through macko's kernels.

    Inputs of any float dtype are rounded to float16 (the kernels' input type); the output has
    the input's dtype. Leading dimensions are batch dimensions: ``(..., in_features)`` in,
    ``(..., out_features)`` out, all the vectors of one call multiplied together (the matrix is
    read once per call).
    """

    def __init__(self, matrix, bias=None, device="cpu"):
        super().__init__()
        if not isinstance(matrix, _native.Matrix):
            raise DtypeError(f"matrix must be a macko.Matrix, not {type(matrix).__name__}")
        self.in_features = matrix.cols
        self.out_features = matrix.rows
        self._install(matrix, torch.device(device))
        if bias is not None:
            bias = torch.nn.Parameter(bias.detach().clone(), requires_grad=False)
        self.bias = bias

    def _install(self, matrix, device):
        """Uploads `matrix` to macko's device for the torch device `device` and registers it
        for the op (the previous upload, if any, is released when nothing uses it)."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        dev = device_for(device)
        weight = dev.upload(matrix)
        # The upload was queued on macko's own stream; torch's stream must not read the
        # matrix before it lands.
        dev.synchronize()
        handle = _register(weight)
        previous = self.__dict__.get("_handle")
        self.matrix = matrix
        self._torch_device = device
        self._device = dev
        self._weight = weight
        self._handle = handle
        weakref.finalize(self, _release, handle)
        if previous is not None:
            # The old copy's memory goes now: a CUDA graph captured before `load_state_dict`
            # or `.to()` must be captured again (it would read the old copy).
            _release(previous)

    def get_extra_state(self):
        """The weight in the state dict: the matrix as safetensors bytes (``Matrix.to_bytes``,
        checksums included), so that ``state_dict``/``load_state_dict`` and ``torch.save``
        carry it."""
        return {"macko_matrix": self.matrix.to_bytes()}

    def set_extra_state(self, state):
        if not isinstance(state, dict) or "macko_matrix" not in state:
            raise ConfigError("this state was not saved from a MackoLinear (no 'macko_matrix')")
        matrix = _native.Matrix.from_bytes(state["macko_matrix"])
        if matrix.shape != (self.out_features, self.in_features):
            raise ShapeError(
                f"the saved matrix is {matrix.shape[0]}×{matrix.shape[1]}, but this layer is "
                f"{self.out_features}×{self.in_features}"
            )
        self._install(matrix, self._torch_device)

    def _apply(self, fn, *args, **kwargs):
        # `.to(device)`, `.cuda()`, `.cpu()`: the bias moves through torch; the matrix is
        # uploaded again where the probe tensor went. Dtype changes leave the matrix alone.
        super()._apply(fn, *args, **kwargs)
        target = fn(torch.empty(0, device=self._torch_device)).device
        if target != self._torch_device:
            self._install(self.matrix, target)
        return self

    def __getstate__(self):
        # Pickling (``torch.save(model)``): the host matrix travels (as bytes), not the device
        # objects, which are remade on unpickling.
        state = self.__dict__.copy()
        for key in ("_device", "_weight", "_handle"):
            state.pop(key, None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._install(self.matrix, self._torch_device)

    @classmethod
    def from_linear(cls, linear, density=None, format="macko", quantize=None, group=None):
        """A ``MackoLinear`` from an ``nn.Linear`` (its weight pruned per row to ``density``
        by magnitude first, if given), on the linear layer's device, keeping its bias."""
        if not isinstance(linear, torch.nn.Linear):
            raise DtypeError(f"expected a torch.nn.Linear, not {type(linear).__name__}")
        w = linear.weight.detach()
        w = w.to("cpu", torch.float16 if w.dtype == torch.float16 else torch.float32).numpy()
        matrix = _native.Matrix.from_dense(
            w, format=format, density=density, quantize=quantize, group=group
        )
        return cls(matrix, linear.bias, device=linear.weight.device)

    @classmethod
    def shard_of(
        cls,
        linear,
        rank,
        world,
        parallel,
        density=None,
        format="macko",
        quantize=None,
        group=None,
        device=None,
    ):
        """The ``MackoLinear`` of one tensor-parallel shard of an ``nn.Linear``.

        ``parallel="column"`` splits the output features: shard ``rank`` of ``world`` computes
        its slice of the output (with its slice of the bias), and the slices concatenate to
        the whole. ``parallel="row"`` splits the input features: the shard takes its slice of
        the input, the partial outputs sum to the whole (an all-reduce), and only rank 0 keeps
        the bias. Slices follow ``torch.tensor_split`` (the first ``n % world`` shards one
        longer), so no divisibility rule applies beyond the format's own.

        The weight is pruned to ``density`` whole, before it is sliced, so the shards together
        are exactly the unsharded ``from_linear(linear, density)`` (2:4 is the exception: it
        is pruned per shard, since a column slice may cut its groups of four). Each shard is
        encoded on its own and put on ``device`` (default: the layer's).
        """
        if not isinstance(linear, torch.nn.Linear):
            raise DtypeError(f"expected a torch.nn.Linear, not {type(linear).__name__}")
        if parallel not in ("column", "row"):
            raise ConfigError(f"parallel={parallel!r}: expected 'column' or 'row'")
        if not (isinstance(world, int) and isinstance(rank, int) and 0 <= rank < world):
            raise ConfigError(f"rank={rank}, world={world}: need integers with 0 <= rank < world")
        w = linear.weight.detach()
        w = w.to("cpu", torch.float16 if w.dtype == torch.float16 else torch.float32).numpy()
        if density is not None and format != "sparse24":
            w = _native.Matrix.from_dense(w, format="dense", density=density).to_dense()
            density = None
        axis = 0 if parallel == "column" else 1
        if w.shape[axis] < world:
            raise ShapeError(
                f"{w.shape[axis]} {'output' if axis == 0 else 'input'} features cannot be split "
                f"into {world} non-empty shards"
            )
        bounds = torch.tensor_split(torch.arange(w.shape[axis]), world)[rank]
        lo, hi = int(bounds[0]), int(bounds[-1]) + 1
        piece = w[lo:hi] if axis == 0 else w[:, lo:hi]
        matrix = _native.Matrix.from_dense(
            piece.copy(), format=format, density=density, quantize=quantize, group=group
        )
        bias = linear.bias
        if bias is not None:
            bias = bias.detach()[lo:hi] if axis == 0 else (bias.detach() if rank == 0 else None)
        return cls(matrix, bias, device=linear.weight.device if device is None else device)

    def forward(self, x):
        if x.shape[-1] != self.in_features:
            raise ShapeError(
                f"input has {x.shape[-1]} features, but the layer takes {self.in_features}"
            )
        _check_device(self._weight, x, "input")
        lead = x.shape[:-1]
        x16 = x if x.dtype == torch.float16 else x.to(torch.float16)
        # Contiguous here (traceable); the op aligns it if a view is not (data pointers are
        # not traceable by torch.compile).
        x2 = x16.reshape(-1, self.in_features).contiguous()
        out_dtype = torch.float16 if x.dtype == torch.float16 else torch.float32
        y = torch.ops.macko.spmm(x2, self._handle, self.out_features, out_dtype)
        y = y.reshape(*lead, self.out_features)
        if y.dtype != x.dtype:
            y = y.to(x.dtype)
        if self.bias is not None:
            y = y + self.bias
        return y

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"format={self.matrix.format}, nbytes={self.matrix.nbytes}, "
            f"bias={self.bias is not None}"
        )


def replace_linear(model, density=None, format="macko", quantize=None, group=None, skip=()):
    """Replaces every ``nn.Linear`` of ``model`` (in place) by a ``MackoLinear`` made from it,
    except those whose qualified name is in ``skip`` (an LLM's ``lm_head``, say). Returns the
    names replaced, in order."""
    skip = set(skip)
    replaced = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if isinstance(child, torch.nn.Linear) and full not in skip:
                setattr(
                    module,
                    child_name,
                    MackoLinear.from_linear(
                        child, density=density, format=format, quantize=quantize, group=group
                    ),
                )
                replaced.append(full)
    return replaced
