"""Uses devspan's public API with the types its stubs give; `mypy --strict` checks this file
(.ci/run). It is never run: it needs a GPU, and pytest does not collect it."""

from typing import Any

import numpy as np
from typing_extensions import assert_type

import devspan


def usage(a: np.ndarray, stream: int) -> None:
    assert_type(devspan.__version__, str)
    assert_type(devspan.DTYPES, list[str])
    v = devspan.from_dlpack(a, stream=stream)
    assert_type(v, devspan.Tensor)
    assert_type(v.shape, tuple[int, ...])
    assert_type(v.strides, tuple[int, ...])
    assert_type(v.dtype, str)
    assert_type(v.device, int)
    assert_type(v.readonly, bool)
    assert_type(v.data_ptr, int)
    assert_type(v.__dlpack_device__(), tuple[int, int])
    devspan.from_dlpack(v.__dlpack__(max_version=(1, 0), stream=stream))
    assert_type(v.__cuda_array_interface__, dict[str, Any])
    assert_type(devspan.from_cuda_array_interface(v), devspan.Tensor)
    devspan.from_cuda_array_interface(v, stream=stream)
    devspan.from_dlpack(v)
    devspan.fill(v, 1)
    devspan.fill(v, 0.5, stream=stream)
    devspan.fill(a, 1)
    devspan.fill(v, np.float32(2))
    devspan.copy(v, a, stream=None)
    h = devspan.cast(v, "f16", stream=stream)
    devspan.cast(a, np.float32)
    devspan.copy(a, devspan.to_contiguous(h))
    assert_type(devspan.cast(v, "f32", device=1), devspan.Tensor)
    assert_type(devspan.to_contiguous(v, stream=stream, device=0), devspan.Tensor)
    try:
        devspan.fill(v, 1)
    except devspan.ShapeMismatchError as e:
        assert_type(e, devspan.ShapeMismatchError)
    except devspan.NumericOverflowError:
        pass
    except devspan.DevspanError as e:
        assert_type(e, devspan.Error)


class Interface:
    """Exports memory through the CUDA Array Interface alone."""

    def __init__(self, interface: dict[str, Any]) -> None:
        self.__cuda_array_interface__ = interface


def interface_usage(interface: dict[str, Any]) -> None:
    v = devspan.from_cuda_array_interface(Interface(interface))
    devspan.copy(v, Interface(interface))
    devspan.to_contiguous(Interface(interface))


def errors() -> list[type[devspan.Error]]:
    return [
        devspan.OutOfBoundsError, devspan.MisalignedError, devspan.ShapeMismatchError, devspan.NumericOverflowError,
        devspan.AliasingError, devspan.IncompatibleLayoutError, devspan.InvalidAxisError,
        devspan.UnsupportedDtypeError, devspan.DeviceMismatchError, devspan.NoDeviceError, devspan.DriverError,
        devspan.InvalidArgumentError, devspan.StreamCaptureError,
    ]
