"""macko: sparse matrix-vector products for pruned neural-network weights.

Weights are stored in MACKO-16-4 (binary16 values and 4-bit gap codes), CSR or dense form,
optionally with int8/int4 values, and multiplied on a CUDA GPU, any GPU wgpu reaches (Vulkan,
Metal, DX12), or the CPU::

    import numpy as np
    import macko

    w = np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float16)
    m = macko.Matrix.from_dense(w, density=0.5)    # prune each row to half, encode MACKO
    dev = macko.Device()                           # CUDA, else a GPU through wgpu, else the CPU
    a = dev.upload(m)
    x = np.ones(4096, dtype=np.float16)
    y = a @ x                                      # float32, shape (4096,)
    Y = a @ np.ones((8, 4096), dtype=np.float16)   # 8 vectors at once: shape (8, 4096)

Errors are subclasses of :class:`MackoError` (see :mod:`macko.errors`).
"""

from . import errors
from ._native import Device, DeviceMatrix, Matrix, __version__, load, save
from .errors import (
    ConfigError,
    DeviceError,
    DtypeError,
    FormatError,
    MackoError,
    OutOfMemoryError,
    ShapeError,
    UnavailableError,
    UnsupportedError,
)


def available():
    """Every backend, with the device it would use or why it is unavailable."""
    return Device.available()


__all__ = [
    "Matrix",
    "Device",
    "DeviceMatrix",
    "load",
    "save",
    "available",
    "errors",
    "MackoError",
    "FormatError",
    "ShapeError",
    "DtypeError",
    "ConfigError",
    "UnavailableError",
    "OutOfMemoryError",
    "UnsupportedError",
    "DeviceError",
    "__version__",
]
