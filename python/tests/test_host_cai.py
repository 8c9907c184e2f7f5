"""Host-side tests of the CUDA Array Interface import: every malformed interface is refused with
a devspan error before any CUDA call, so they need no GPU and run in CI."""

import pytest

import devspan

ADDRESS = 0x7F00_0000_0000
GOOD = {"shape": (2, 3), "typestr": "<f4", "data": (ADDRESS, False), "version": 3}


class Cai:
    """An object that exports `interface` as its __cuda_array_interface__."""

    def __init__(self, interface):
        self.__cuda_array_interface__ = interface


def without(key):
    d = dict(GOOD)
    del d[key]
    return d


def good(**entries):
    return {**GOOD, **entries}


IMPORTS = {
    "from_cuda_array_interface": lambda obj: devspan.from_cuda_array_interface(obj),
    "from_dlpack": lambda obj: devspan.from_dlpack(obj),
    "fill": lambda obj: devspan.fill(obj, 1.0),
    "to_contiguous": lambda obj: devspan.to_contiguous(obj),
    "copy_src": lambda obj: devspan.copy(Cai(GOOD), obj),
}

MALFORMED = [
    ([1, 2], devspan.InvalidArgumentError, "must be a dict"),
    (without("shape"), devspan.InvalidArgumentError, '"shape"'),
    (without("typestr"), devspan.InvalidArgumentError, '"typestr"'),
    (without("data"), devspan.InvalidArgumentError, '"data"'),
    (without("version"), devspan.InvalidArgumentError, '"version"'),
    (good(version=4), devspan.InvalidArgumentError, "version 4"),
    (good(version="3"), devspan.InvalidArgumentError, "version must be an int"),
    (good(typestr=b"<f4"), devspan.InvalidArgumentError, "typestr must be a str"),
    (good(typestr="<c8"), devspan.UnsupportedDtypeError, "<c8"),
    (good(typestr="|b1"), devspan.UnsupportedDtypeError, "b1"),
    (good(typestr=">f4"), devspan.UnsupportedDtypeError, "big-endian"),
    (good(typestr="<V2"), devspan.UnsupportedDtypeError, "V2"),
    (good(typestr="float32"), devspan.UnsupportedDtypeError, "float32"),
    (good(shape=6), devspan.InvalidArgumentError, "shape must be a tuple"),
    (good(shape=(2, 3.0)), devspan.InvalidArgumentError, r"shape\[1\] must be an int"),
    (good(shape=(2, -3)), devspan.InvalidArgumentError, "-3"),
    (good(shape=(1 << 31, 1 << 31)), devspan.NumericOverflowError, "isize::MAX"),
    (good(shape=(1 << 70,)), devspan.NumericOverflowError, "64 bits"),
    (good(shape=(1,) * 65), devspan.InvalidArgumentError, "at most 64"),
    (good(strides=(12, 6)), devspan.MisalignedError, "stride 6"),
    (good(strides=(12,)), devspan.InvalidArgumentError, "1 entries"),
    (good(strides="C"), devspan.InvalidArgumentError, "strides must be a tuple"),
    (good(data=None), devspan.InvalidArgumentError, "null data pointer"),
    (good(data=(0, False)), devspan.InvalidArgumentError, "null data pointer"),
    (good(data=(ADDRESS + 2, False)), devspan.MisalignedError, "aligned"),
    (good(data=(-4096, False)), devspan.InvalidArgumentError, "negative"),
    (good(data=(1 << 64, False)), devspan.NumericOverflowError, "64 bits"),
    (good(data=ADDRESS), devspan.InvalidArgumentError, "2-tuple"),
    (good(data=(ADDRESS,)), devspan.InvalidArgumentError, "2-tuple"),
    (good(data=(str(ADDRESS), False)), devspan.InvalidArgumentError, "must be an int"),
    (good(data=(ADDRESS, "no")), devspan.InvalidArgumentError, "read-only flag"),
    (good(mask=Cai(GOOD)), devspan.InvalidArgumentError, "masked"),
    (good(stream=0), devspan.InvalidArgumentError, "stream 0 is disallowed"),
    (good(stream=-1), devspan.InvalidArgumentError, "not a CUDA stream"),
    (good(stream=7), devspan.InvalidArgumentError, "cannot be a CUstream"),
    (good(stream=1.0), devspan.InvalidArgumentError, "stream must be an int"),
]


@pytest.mark.parametrize("call", list(IMPORTS))
@pytest.mark.parametrize("interface, error, message", MALFORMED)
def test_malformed_interfaces_are_devspan_errors(interface, error, message, call):
    with pytest.raises(error, match=message):
        IMPORTS[call](Cai(interface))


def test_well_formed_interfaces_reach_the_driver():
    """Without a GPU the first CUDA call reports NoDevice; with one, the made-up address is not
    memory the driver knows."""
    expected = (devspan.NoDeviceError, devspan.DeviceMismatchError)
    for interface in (
        GOOD,
        good(strides=None, mask=None, stream=None, descr=[("", "<f4")]),
        good(strides=(-4, 8), data=(ADDRESS + 16, True), version=2),
        good(shape=[4], typestr="|u1", version=0),
        good(typestr="=i8", stream=1),
    ):
        with pytest.raises(expected):
            devspan.from_cuda_array_interface(Cai(interface))


def test_objects_without_an_interface():
    with pytest.raises(TypeError, match="__cuda_array_interface__"):
        devspan.from_cuda_array_interface(object())
    with pytest.raises(TypeError, match="__cuda_array_interface__"):
        devspan.from_cuda_array_interface(GOOD)  # a dict is not an object exporting one

    class Raising:
        @property
        def __cuda_array_interface__(self):
            raise AttributeError("no CUDA memory")

    with pytest.raises(TypeError, match="__cuda_array_interface__"):
        devspan.from_cuda_array_interface(Raising())
    with pytest.raises(TypeError, match="__cuda_array_interface__"):
        devspan.from_dlpack(Raising())


def test_explicit_streams_are_checked_first():
    with pytest.raises(ValueError, match="not a CUDA stream"):
        devspan.from_cuda_array_interface(Cai([1, 2]), stream=-5)
