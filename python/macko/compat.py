"""A drop-in for the reference implementation's module ``macko_spmv``.

Programs written for the reference (``compress``, ``multiply``, ``move_to_device`` and the op
``torch.ops.macko_spmv.multiply``) run unchanged on macko's kernels after::

    import sys
    import macko.compat
    sys.modules["macko_spmv"] = macko.compat

    import macko_spmv                           # now this module
    c = macko_spmv.compress(W)                  # W: contiguous 2-D float16, on cpu or cuda
    y = macko_spmv.multiply(c, v)               # float16, shape (rows,)

The contract is the reference's (with one note for CUDA graphs below):

- ``compress(M)`` returns ``(values, deltas, row_indices, rows, cols)`` on M's device: values
  float16 padded to a multiple of 8, deltas uint8 (two 4-bit gap codes a byte, low nibble
  first), row_indices int32 with rows + 1 entries, rows and cols Python ints; bit for bit the
  reference's arrays (the golden vectors of ``fixtures/macko-reference`` are its output).
- ``multiply(compressed, V)`` returns ``A·V`` as a new float16 vector of ``rows`` entries on
  V's device; V is float16, contiguous, with ``cols`` elements (any shape: it is read flat).
- ``move_to_device(compressed, device)`` moves the three arrays.
- ``torch.ops.macko_spmv.multiply(values, deltas, row_indices, rows, cols, V)`` is the same
  product as a custom op with a fake implementation, so ``torch.compile(fullgraph=True,
  mode="reduce-overhead")``, CUDA graphs and ``torch.library.opcheck`` work, and a vmap rule
  that turns ``torch.vmap`` over V (the reference's decoding script maps its op over tokens)
  into one few-token product that reads the matrix once.

Differences from the reference, all additions: ``multiply`` also takes CPU tensors (macko's CPU
backend); bad input raises the typed errors of :mod:`macko.errors` (``DtypeError``,
``ShapeError``, ``FormatError``...) naming the bad value, where the reference asserts or
crashes; arrays that break the format's rules are refused, never multiplied.

CUDA graphs: a compiled function's plain tensor inputs are copied into the graph's own buffers
and captured there, where macko cannot upload a matrix it has not seen. The arrays of
``compress`` and ``move_to_device``, and those of every eager ``multiply``, are therefore marked
as static inputs (``torch._dynamo.mark_static_address``), as a module's buffers are: capture
then sees the very tensors of the first, eager, product. A matrix first met during capture is
refused with a ``ConfigError`` saying so.

What it costs: macko multiplies its own copy of the matrix (its kernels read a layout planned
at upload, not the three arrays as given). The first ``multiply`` of a compressed matrix on a
device validates the arrays and uploads that copy, which is kept while the ``values`` tensor
object lives and its contents are unchanged (an in-place change is seen through the tensor's
version counter and uploads again). The arrays and the copy both occupy device memory: for the
memory saving of MACKO, use :class:`macko.torch.MackoLinear`, which holds only macko's copy.
"""

import threading
import weakref

import torch

from . import _native
from .errors import ConfigError, DtypeError, FormatError, ShapeError, UnsupportedError
from .torch import device_for

__all__ = ["compress", "multiply", "move_to_device"]

# Kernels read V in 16-byte words; torch's allocator aligns far more, but a view may not be.
_ALIGN = 16


def _check_tensor(t, what, dtype):
    if not isinstance(t, torch.Tensor):
        raise DtypeError(f"{what} must be a torch.Tensor, not {type(t).__name__}")
    if t.dtype != dtype:
        raise DtypeError(f"{what} has dtype {t.dtype}; expected {dtype}")


def compress(M):
    """Encodes a contiguous 2-D float16 tensor (on the CPU or a CUDA device) in MACKO-16-4:
    ``(values, deltas, row_indices, rows, cols)`` on M's device, bit for bit the reference's."""
    _check_tensor(M, "M", torch.float16)
    if M.dim() != 2:
        raise ShapeError(f"M must be 2-D (rows × cols), not {M.dim()}-D")
    if not M.is_contiguous():
        raise ShapeError("M must be contiguous (row-major), as the reference requires")
    if M.device.type not in ("cpu", "cuda"):
        raise UnsupportedError(f"compress takes cpu or cuda tensors, not {M.device.type}")
    host = M.detach().to("cpu").numpy()
    parts = _native.Matrix.from_dense(host, format="macko").parts()
    row_ptr = parts["row_ptr"]
    if row_ptr[-1] > torch.iinfo(torch.int32).max:
        raise ConfigError(
            f"M stores {row_ptr[-1]} entries; the reference's int32 row_indices hold at most "
            f"{torch.iinfo(torch.int32).max} (use macko.Matrix, whose row pointers are 32-bit "
            "unsigned)"
        )
    compressed = (
        torch.from_numpy(parts["values"]),
        torch.from_numpy(parts["codes"]),
        torch.from_numpy(row_ptr.astype("int32")),
        int(M.shape[0]),
        int(M.shape[1]),
    )
    return move_to_device(compressed, M.device)


def move_to_device(compressed, device):
    """The compressed matrix with its three arrays on ``device`` (rows and cols unchanged)."""
    values, deltas, row_indices, rows, cols = _unpack(compressed)
    return (
        _static(values.to(device=device)),
        _static(deltas.to(device=device)),
        _static(row_indices.to(device=device)),
        rows,
        cols,
    )


def _static(t):
    """`t` marked as a static input for torch.compile's CUDA graphs.

    Under ``mode="reduce-overhead"`` a compiled function's plain tensor inputs are copied into
    the graph's own buffers before each replay, and its capture sees those copies, at
    addresses the upload cache has never seen (and cannot upload from while capturing).
    Parameters and buffers of a module are static already; the arrays ``compress`` returns
    are marked too, so that a compiled function taking them (the reference's own test does)
    captures a product of the matrix uploaded by its first, eager, call."""
    if t.is_cuda and not torch.compiler.is_compiling():
        torch._dynamo.mark_static_address(t, guard=False)
    return t


def multiply(compressed_M, V):
    """``A·V`` as a new float16 vector of ``rows`` entries on V's device (cpu or cuda)."""
    values, deltas, row_indices, rows, cols = _unpack(compressed_M)
    if isinstance(values, torch.Tensor) and not torch.compiler.is_compiling():
        # Arrays loaded from a file (not made by compress) become static here, at their first
        # eager product, before any compiled function captures them.
        for t in (values, deltas, row_indices):
            if isinstance(t, torch.Tensor):
                _static(t)
    return torch.ops.macko_spmv.multiply.default(values, deltas, row_indices, rows, cols, V)


def _unpack(compressed):
    if not isinstance(compressed, (tuple, list)) or len(compressed) != 5:
        raise DtypeError(
            "a compressed matrix is the 5-tuple (values, deltas, row_indices, rows, cols) that "
            "compress returns"
        )
    return tuple(compressed)


# --- the product -----------------------------------------------------------------------------

# Uploaded copies by (device, array addresses, shape). An entry remembers the values tensor it
# was made from (weakly: when that tensor object dies, the entry goes, so memory reused by
# another matrix is never mistaken for it) and the arrays' version counters (an in-place
# change uploads again).
_uploads = {}
_uploads_lock = threading.Lock()


class _Upload:
    __slots__ = ("owner", "versions", "matrix")

    def __init__(self, owner, versions, matrix):
        self.owner = owner
        self.versions = versions
        self.matrix = matrix


def _forget(key, owner_ref):
    with _uploads_lock:
        entry = _uploads.get(key)
        if entry is not None and entry.owner is owner_ref:
            del _uploads[key]


def _check_arrays(values, deltas, row_indices, rows, cols, V):
    _check_tensor(values, "M_values", torch.float16)
    _check_tensor(deltas, "M_deltas", torch.uint8)
    _check_tensor(row_indices, "M_row_indices", torch.int32)
    _check_tensor(V, "V", torch.float16)
    for name, t in (("M_values", values), ("M_deltas", deltas), ("M_row_indices", row_indices)):
        if t.dim() != 1:
            raise ShapeError(f"{name} must be 1-D, not {t.dim()}-D")
        if t.device != V.device:
            raise ShapeError(
                f"{name} is on {t.device} but V is on {V.device}; move one of them "
                "(move_to_device)"
            )
    if V.device.type not in ("cpu", "cuda"):
        raise UnsupportedError(f"macko multiplies cpu and cuda tensors, not {V.device.type}")
    if rows < 0 or cols < 0:
        raise ShapeError(f"rows={rows}, cols={cols}: a matrix's sides are not negative")


def _matrix(values, deltas, row_indices, rows, cols, device):
    """The uploaded copy of the compressed matrix on ``device`` (uploaded on first use)."""
    key = (
        str(device),
        values.data_ptr(),
        deltas.data_ptr(),
        row_indices.data_ptr(),
        values.numel(),
        deltas.numel(),
        row_indices.numel(),
        rows,
        cols,
    )
    versions = (values._version, deltas._version, row_indices._version)
    with _uploads_lock:
        entry = _uploads.get(key)
    if entry is not None and entry.versions == versions and entry.owner() is not None:
        return entry.matrix
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        raise ConfigError(
            "macko_spmv.multiply met this compressed matrix for the first time during CUDA "
            "graph capture, where it cannot upload it; run the product once before capturing "
            "(torch.compile's mode='reduce-overhead' does: its first calls run eagerly)"
        )
    row_ptr = row_indices.detach().to("cpu").numpy()
    if (row_ptr < 0).any():
        raise FormatError("M_row_indices has a negative entry; row offsets count up from 0")
    host = _native.Matrix.from_macko_parts(
        rows,
        cols,
        row_ptr.astype("uint32"),
        values.detach().to("cpu").numpy(),
        deltas.detach().to("cpu").numpy(),
    )
    dev = device_for(device)
    uploaded = dev.upload(host)
    # The upload is queued on macko's own stream: torch's stream must not read it before it
    # lands.
    dev.synchronize()
    owner = weakref.ref(values)
    with _uploads_lock:
        _uploads[key] = _Upload(owner, versions, uploaded)
    weakref.finalize(values, _forget, key, owner)
    return uploaded


def _aligned(v2):
    """v2 ([B][cols]) contiguous with 16-byte-aligned data: a copy only when it is not."""
    if not v2.is_contiguous():
        return v2.contiguous()
    if v2.data_ptr() % _ALIGN != 0:
        return v2.clone()
    return v2


def _product(values, deltas, row_indices, rows, cols, v2):
    """Y = A·V for V [B][cols] float16: Y [B][rows] float16 on V's device."""
    matrix = _matrix(values, deltas, row_indices, rows, cols, v2.device)
    v2 = _aligned(v2)
    batch = v2.shape[0]
    if v2.is_cuda:
        y = torch.empty((batch, rows), dtype=torch.float16, device=v2.device)
        if batch > 0 and rows > 0:
            stream = torch.cuda.current_stream(v2.device).cuda_stream
            matrix._multiply_cuda_pointers(v2.data_ptr(), y.data_ptr(), batch, "float16", stream)
        elif rows > 0:
            y.zero_()
        return y
    if batch == 0:
        return torch.empty((0, rows), dtype=torch.float16)
    return torch.from_numpy(matrix.multiply(v2.numpy(), out_dtype="float16"))


def _register_op():
    try:
        op = torch.library.custom_op("macko_spmv::multiply", mutates_args=())
    except RuntimeError as e:  # the reference's own extension is loaded in this process
        raise ConfigError(
            f"torch.ops.macko_spmv.multiply is already defined ({e}); import macko.compat "
            "instead of the reference's macko_spmv, not beside it"
        ) from e

    def multiply_op(
        M_values: torch.Tensor,
        M_deltas: torch.Tensor,
        M_row_indices: torch.Tensor,
        M_rows: int,
        M_cols: int,
        V: torch.Tensor,
    ) -> torch.Tensor:
        _check_arrays(M_values, M_deltas, M_row_indices, M_rows, M_cols, V)
        if not V.is_contiguous():
            raise ShapeError("V must be contiguous, as the reference requires")
        if V.numel() != M_cols:
            raise ShapeError(f"V has {V.numel()} elements, but the matrix has {M_cols} columns")
        y = _product(M_values, M_deltas, M_row_indices, M_rows, M_cols, V.reshape(1, M_cols))
        return y.reshape(M_rows)

    multiply_op.__doc__ = "A·V as float16 (rows,), the reference's op."
    multiply_op = op(multiply_op)

    @multiply_op.register_fake
    def _(M_values, M_deltas, M_row_indices, M_rows, M_cols, V):
        return M_values.new_empty((M_rows,))

    @torch.library.custom_op("macko::compat_multiply_batch", mutates_args=())
    def multiply_batch(
        M_values: torch.Tensor,
        M_deltas: torch.Tensor,
        M_row_indices: torch.Tensor,
        M_rows: int,
        M_cols: int,
        V: torch.Tensor,
    ) -> torch.Tensor:
        """A·V for V [B][cols]: [B][rows] float16, the matrix read once."""
        _check_arrays(M_values, M_deltas, M_row_indices, M_rows, M_cols, V)
        if V.dim() != 2 or V.shape[1] != M_cols:
            raise ShapeError(
                f"V must be [B][{M_cols}] for the batched product, not {tuple(V.shape)}"
            )
        return _product(M_values, M_deltas, M_row_indices, M_rows, M_cols, V)

    @multiply_batch.register_fake
    def _(M_values, M_deltas, M_row_indices, M_rows, M_cols, V):
        return M_values.new_empty((V.shape[0], M_rows))

    def vmap_rule(info, in_dims, M_values, M_deltas, M_row_indices, M_rows, M_cols, V):
        if any(d is not None for d in in_dims[:3]):
            raise UnsupportedError(
                "torch.vmap over the compressed matrix's arrays: macko maps over V only"
            )
        v_dim = in_dims[5]
        if v_dim is None:
            y = multiply_op(M_values, M_deltas, M_row_indices, M_rows, M_cols, V)
            return y, None
        v = V.movedim(v_dim, 0)
        if v[0].numel() != M_cols:
            raise ShapeError(
                f"each V has {v[0].numel()} elements, but the matrix has {M_cols} columns"
            )
        v2 = v.reshape(info.batch_size, M_cols)
        y = multiply_batch(M_values, M_deltas, M_row_indices, M_rows, M_cols, v2)
        return y, 0

    multiply_op.register_vmap(vmap_rule)
    return multiply_op


_multiply_op = _register_op()
