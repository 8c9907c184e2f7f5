# Type stubs of the extension module devspan._devspan (src/python/ in the devspan crate).
# `python -m mypy.stubtest devspan` checks them against the built module.

import os
import pathlib
from typing import Any, Protocol, SupportsFloat, SupportsIndex, final

from typing_extensions import CapsuleType, TypeAlias

__all__ = [
    "Tensor",
    "ElementwiseKernel",
    "Error",
    "DevspanError",
    "OutOfBoundsError",
    "MisalignedError",
    "ShapeMismatchError",
    "NumericOverflowError",
    "AliasingError",
    "IncompatibleLayoutError",
    "InvalidAxisError",
    "UnsupportedDtypeError",
    "DeviceMismatchError",
    "NoDeviceError",
    "DriverError",
    "InvalidArgumentError",
    "StreamCaptureError",
    "CompileError",
    "DTYPES",
    "from_dlpack",
    "from_cuda_array_interface",
    "fill",
    "copy",
    "cast",
    "to_contiguous",
    "__version__",
]

__version__: str

DTYPES: list[str]
"""devspan's element type names: "u8", "i8", ..., "f16", "bf16", "f32", "f64"."""

class _SupportsDLPack(Protocol):
    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...

class _SupportsCudaArrayInterface(Protocol):
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...

_TensorLike: TypeAlias = Tensor | _SupportsDLPack | _SupportsCudaArrayInterface | CapsuleType
"""A devspan.Tensor, an object with __dlpack__ (torch.Tensor, cupy.ndarray, ...) or
__cuda_array_interface__ (a Numba device array, ...), or a DLPack capsule."""

_Scalar: TypeAlias = SupportsIndex | SupportsFloat

@final
class Tensor:
    """A strided view over CUDA memory owned by a DLPack producer or by devspan itself."""

    @property
    def shape(self) -> tuple[int, ...]:
        """Axis lengths."""
    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements (may be negative or zero)."""
    @property
    def dtype(self) -> str:
        """Element type name: one of DTYPES."""
    @property
    def device(self) -> int:
        """CUDA device ordinal."""
    @property
    def readonly(self) -> bool:
        """Whether devspan refuses to write the tensor."""
    @property
    def data_ptr(self) -> int:
        """Device address of the element at index zero."""
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The tensor as a CUDA Array Interface (version 3) dict; its stream is one that
        devspan keeps for the tensor's consumers. AttributeError for bf16 tensors."""
    def __dlpack_device__(self) -> tuple[int, int]: ...
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> CapsuleType: ...

def from_dlpack(obj: _TensorLike, stream: int | None = None) -> Tensor:
    """A view over the tensor of any DLPack or CUDA Array Interface producer, without copying.
    With no stream, the producer's work is ordered before the current stream of the framework
    that made obj (PyTorch, CuPy), else before the legacy default stream."""

def from_cuda_array_interface(
    obj: Tensor | _SupportsCudaArrayInterface, stream: int | None = None
) -> Tensor:
    """A view over the memory that obj.__cuda_array_interface__ describes, without copying;
    it keeps obj alive and follows the interface's stream."""

def fill(dst: _TensorLike, value: _Scalar, stream: int | None = None) -> None:
    """Sets every element of dst to value, on stream (None: the current stream of the
    framework that made dst, else the legacy default stream)."""

@final
class ElementwiseKernel:
    """A CUDA C body over typed inputs and outputs, compiled by NVRTC and run over tensors of
    any layout: ElementwiseKernel("f32 a, f32 x, f32 y", "f32 z", "z = a * x + y")."""

    def __new__(
        cls, in_params: str, out_params: str, operation: str, *, cache_dir: str | os.PathLike[str] | None = None
    ) -> ElementwiseKernel: ...
    @property
    def cache_dir(self) -> pathlib.Path | None:
        """The directory compiled variants are kept in, or None."""
    def __call__(self, *args: _TensorLike | _Scalar, stream: int | None = None) -> None:
        """Runs the kernel: the inputs (tensors or scalars), then the outputs (tensors)."""

def copy(dst: _TensorLike, src: _TensorLike, stream: int | None = None) -> None:
    """Copies src into dst on stream (a stream of dst's device), converting the element type
    and broadcasting src; src may live on another device."""

def cast(
    src: _TensorLike, dtype: object, stream: int | None = None, device: int | None = None
) -> Tensor:
    """A new contiguous devspan tensor with the elements of src converted to dtype (a name
    such as "f16" or "float16", a NumPy/CuPy dtype or scalar type, or a torch.dtype), on
    device (None: src's device); stream is a stream of that device."""

def to_contiguous(
    src: _TensorLike, stream: int | None = None, device: int | None = None
) -> Tensor:
    """A new contiguous devspan tensor with the elements of src, on device (None: src's
    device); always a copy."""

class Error(Exception):
    """An error reported by devspan; each kind of error has its own subclass."""

DevspanError = Error

class OutOfBoundsError(Error): ...
class MisalignedError(Error): ...
class ShapeMismatchError(Error): ...
class NumericOverflowError(Error): ...
class AliasingError(Error): ...
class IncompatibleLayoutError(Error): ...
class InvalidAxisError(Error): ...
class UnsupportedDtypeError(Error): ...
class DeviceMismatchError(Error): ...
class NoDeviceError(Error): ...
class DriverError(Error): ...
class InvalidArgumentError(Error): ...
class StreamCaptureError(Error): ...
class CompileError(Error): ...
