"""devspan: strided views over CUDA tensors of any DLPack framework (PyTorch, CuPy, JAX, ...),
with fill, copy, cast and to_contiguous kernels that run on the caller's stream.

    import torch, devspan
    s = torch.cuda.current_stream().cuda_stream
    t = torch.randn(64, 48, device="cuda")
    v = devspan.from_dlpack(t[::2, 5:].T, stream=s)  # a view; keeps t's memory alive
    h = torch.from_dlpack(devspan.cast(v, "bf16", stream=s))
    devspan.fill(v, 0.5, stream=s)                    # writes land in t

Errors devspan reports are instances of a subclass of devspan.Error, one per kind of error.
"""

from ._devspan import (
    DTYPES,
    AliasingError,
    DeviceMismatchError,
    DevspanError,
    DriverError,
    Error,
    IncompatibleLayoutError,
    InvalidArgumentError,
    InvalidAxisError,
    MisalignedError,
    NoDeviceError,
    OutOfBoundsError,
    OverflowError,
    ShapeMismatchError,
    StreamCaptureError,
    Tensor,
    UnsupportedDtypeError,
    __version__,
    cast,
    copy,
    fill,
    from_dlpack,
    to_contiguous,
)

__all__ = [
    "DTYPES",
    "AliasingError",
    "DeviceMismatchError",
    "DevspanError",
    "DriverError",
    "Error",
    "IncompatibleLayoutError",
    "InvalidArgumentError",
    "InvalidAxisError",
    "MisalignedError",
    "NoDeviceError",
    "OutOfBoundsError",
    "OverflowError",
    "ShapeMismatchError",
    "StreamCaptureError",
    "Tensor",
    "UnsupportedDtypeError",
    "__version__",
    "cast",
    "copy",
    "fill",
    "from_dlpack",
    "to_contiguous",
]
