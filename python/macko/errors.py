"""The exceptions macko raises.

Every one is a :class:`MackoError` and also the built-in exception a Python caller would
catch for that kind of problem, so ``except ValueError`` keeps working. The message is the Rust
library's, naming the bad value and the rule it broke.
"""


class MackoError(Exception):
    """Base class of every macko error."""


class FormatError(MackoError, ValueError):
    """A matrix, array or file breaks a rule of the format (docs/FORMAT.md)."""


class ShapeError(MackoError, ValueError):
    """Shapes do not fit together (x's length, a batch, a matrix from another device)."""


class DtypeError(MackoError, TypeError):
    """An argument has the wrong type or dtype."""


class ConfigError(MackoError, ValueError):
    """An option has a bad value (an unknown backend or format, a density outside (0, 1])."""


class UnavailableError(MackoError, RuntimeError):
    """The backend asked for is not on this machine; the message says what is missing."""


class OutOfMemoryError(MackoError, MemoryError):
    """The device cannot hold the data (or an array exceeds one of its limits)."""


class UnsupportedError(MackoError, NotImplementedError):
    """The backend has no kernel for this kind of matrix yet (the CPU multiplies every kind)."""


class DeviceError(MackoError, RuntimeError):
    """The device or its driver failed."""


__all__ = [
    "MackoError",
    "FormatError",
    "ShapeError",
    "DtypeError",
    "ConfigError",
    "UnavailableError",
    "OutOfMemoryError",
    "UnsupportedError",
    "DeviceError",
]
