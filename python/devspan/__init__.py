"""devspan: strided views over CUDA tensors of any DLPack or CUDA Array Interface framework
(PyTorch, CuPy, JAX, Numba, ...), with fill, copy, cast and to_contiguous kernels that run on
the caller's stream.

    import torch, devspan
    t = torch.randn(64, 48, device="cuda")
    v = devspan.from_dlpack(t[::2, 5:].T)  # a view; keeps t's memory alive
    h = torch.from_dlpack(devspan.cast(v, "bf16"))
    devspan.fill(v, 0.5)                    # writes land in t

With no stream argument a call runs on the current stream of the framework that made its
tensors (torch.cuda.current_stream(), cupy.cuda.get_current_stream()), else on the legacy
default stream; stream=... names one (a torch.cuda.Stream's cuda_stream, a cupy.cuda.Stream's
ptr, 1 for the legacy and 2 for the per-thread default stream).

Errors devspan reports are instances of a subclass of devspan.Error, one per kind of error.
"""

from ._devspan import (
    DTYPES,
    AliasingError,
    CompileError,
    DeviceMismatchError,
    DevspanError,
    DriverError,
    ElementwiseKernel,
    Error,
    IncompatibleLayoutError,
    InvalidArgumentError,
    InvalidAxisError,
    MisalignedError,
    NoDeviceError,
    NumericOverflowError,
    OutOfBoundsError,
    ShapeMismatchError,
    StreamCaptureError,
    Tensor,
    UnsupportedDtypeError,
    __version__,
    cast,
    copy,
    fill,
    from_cuda_array_interface,
    from_dlpack,
    to_contiguous,
)

__all__ = [
    "DTYPES",
    "AliasingError",
    "CompileError",
    "DeviceMismatchError",
    "DevspanError",
    "DriverError",
    "ElementwiseKernel",
    "Error",
    "IncompatibleLayoutError",
    "InvalidArgumentError",
    "InvalidAxisError",
    "MisalignedError",
    "NoDeviceError",
    "NumericOverflowError",
    "OutOfBoundsError",
    "ShapeMismatchError",
    "StreamCaptureError",
    "Tensor",
    "UnsupportedDtypeError",
    "__version__",
    "cast",
    "copy",
    "fill",
    "from_cuda_array_interface",
    "from_dlpack",
    "to_contiguous",
]
