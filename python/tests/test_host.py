"""Host-side tests of the devspan extension: they need no GPU and run in CI."""

import builtins
import gc
import pathlib
import re
import subprocess
import sys
import textwrap
import types

import pytest

import devspan
from conftest import INSTALLED
from dlpack_ctypes import BOOL, FLOAT, KDLCPU, KDLCUDA, Managed, capsule_name


KINDS = [
    "OutOfBounds", "Misaligned", "ShapeMismatch", "NumericOverflow", "Aliasing", "IncompatibleLayout", "InvalidAxis",
    "UnsupportedDtype", "DeviceMismatch", "NoDevice", "Driver", "InvalidArgument",
    "StreamCapture", "Compile",
]


def test_module_surface():
    assert devspan.DTYPES == ["u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f16", "bf16", "f32", "f64"]
    for f in ("from_dlpack", "from_cuda_array_interface", "fill", "copy", "cast", "to_contiguous"):
        assert callable(getattr(devspan, f))
    with pytest.raises(TypeError):
        devspan.Tensor()
    assert re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", devspan.__version__)
    # devspan re-exports every public name of its extension module, and nothing else.
    public = set(devspan._devspan.__all__)
    assert public >= {n for n in dir(devspan._devspan) if not n.startswith("_")}
    assert set(devspan.__all__) == public
    assert all(getattr(devspan, n) is getattr(devspan._devspan, n) for n in public)


@pytest.mark.skipif(not INSTALLED, reason="tests the installed package (DEVSPAN_TEST_INSTALLED=1)")
def test_installed_package():
    import importlib.metadata
    import pathlib

    assert importlib.metadata.version("devspan") == devspan.__version__
    here = pathlib.Path(devspan.__file__).parent
    assert (here / "py.typed").is_file() and (here / "_devspan.pyi").is_file()


def test_exception_classes():
    assert issubclass(devspan.Error, Exception) and devspan.Error.__module__ == "devspan"
    assert devspan.DevspanError is devspan.Error
    classes = [getattr(devspan, f"{k}Error") for k in KINDS]
    for c in classes:
        assert c.__bases__ == (devspan.Error,) and c.__module__ == "devspan", c
    exported = {v for v in vars(devspan).values() if isinstance(v, type) and issubclass(v, devspan.Error)}
    assert exported == {devspan.Error, *classes}
    # No class of devspan's shadows a Python builtin.
    assert not [n for n in devspan.__all__ if hasattr(builtins, n)]


@pytest.mark.parametrize("obj", [123, "text", [1, 2], None, object()])
def test_wrong_types_are_type_errors(obj):
    with pytest.raises(TypeError, match="capsule or an object with __dlpack__"):
        devspan.from_dlpack(obj)
    with pytest.raises(TypeError):
        devspan.fill(obj, 1)
    with pytest.raises(TypeError):
        devspan.to_contiguous(obj)


def test_cpu_tensors_are_refused():
    np = pytest.importorskip("numpy")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for f in (lambda: devspan.from_dlpack(a), lambda: devspan.fill(a, 0), lambda: devspan.cast(a, "f16"),
              lambda: devspan.copy(a, a), lambda: devspan.to_contiguous(a)):
        with pytest.raises(devspan.DeviceMismatchError, match="kDLCPU"):
            f()
    assert (a == np.arange(12, dtype=np.float32).reshape(3, 4)).all()


def test_cpu_capsule_is_consumed_and_refused():
    np = pytest.importorskip("numpy")
    for kwargs, used in (({}, b"used_dltensor"), ({"max_version": (1, 0)}, b"used_dltensor_versioned")):
        cap = np.zeros(3).__dlpack__(**kwargs)
        with pytest.raises(devspan.DeviceMismatchError):
            devspan.from_dlpack(cap)
        assert capsule_name(cap) == used
        with pytest.raises(ValueError, match="already consumed"):
            devspan.from_dlpack(cap)


@pytest.mark.parametrize("versioned", [False, True])
def test_cpu_managed_tensor_deleter_called_once(versioned):
    m = Managed(versioned, (2, 3), device=(KDLCPU, 0))
    cap = m.capsule()
    with pytest.raises(devspan.DeviceMismatchError, match="kDLCPU"):
        devspan.from_dlpack(cap)
    assert m.deleted == 1
    assert capsule_name(cap) == (b"used_dltensor_versioned" if versioned else b"used_dltensor")
    del cap
    gc.collect()
    assert m.deleted == 1


@pytest.mark.parametrize("versioned", [False, True])
@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"code": BOOL, "bits": 8}, devspan.UnsupportedDtypeError, "bool"),
        ({"code": FLOAT, "bits": 32, "lanes": 4}, devspan.UnsupportedDtypeError, "lanes"),
        ({"code": FLOAT, "bits": 8}, devspan.UnsupportedDtypeError, None),
        ({"byte_offset": 2}, devspan.MisalignedError, None),
        ({"data": 0}, devspan.InvalidArgumentError, "null data pointer"),
        ({"device": (KDLCUDA, -1)}, devspan.InvalidArgumentError, "negative device id"),
        ({"shape": (2, -3)}, devspan.InvalidArgumentError, "-3"),
        ({"shape": (1 << 40, 1 << 40)}, devspan.NumericOverflowError, None),
        ({"shape": (4, 4), "strides": (-4, 1), "data": 0x10}, devspan.OutOfBoundsError, None),
    ],
)
def test_bad_managed_tensors_are_errors_and_deleted_once(versioned, kwargs, error, message):
    kwargs = dict(kwargs)
    shape = kwargs.pop("shape", (2, 3))
    m = Managed(versioned, shape, **kwargs)
    with pytest.raises(error, match=message):
        devspan.from_dlpack(m.capsule())
    gc.collect()
    assert m.deleted == 1


def test_unknown_major_version_is_refused_and_deleted():
    m = Managed(True, (2, 3), major=2)
    with pytest.raises(devspan.InvalidArgumentError, match="version"):
        devspan.from_dlpack(m.capsule())
    assert m.deleted == 1


def test_capsules_that_are_not_dlpack():
    m = Managed(False, (2, 3))
    with pytest.raises(ValueError, match="not a DLPack capsule"):
        devspan.from_dlpack(m.capsule(b"other"))
    with pytest.raises(ValueError, match="already consumed"):
        devspan.from_dlpack(m.capsule(b"used_dltensor"))
    with pytest.raises(ValueError, match="without a name"):
        devspan.from_dlpack(m.capsule(b""))
    gc.collect()
    assert m.deleted == 0  # never taken: the producer still owns it


def test_bad_arguments():
    np = pytest.importorskip("numpy")
    a = np.zeros(3, dtype=np.float32)
    with pytest.raises(ValueError, match="not a CUDA stream"):
        devspan.from_dlpack(a, stream=-5)
    with pytest.raises(TypeError, match="element types"):
        devspan.cast(a, "complex64")
    with pytest.raises(TypeError, match="element types"):
        devspan.cast(a, np.bool_)


@pytest.mark.parametrize("versioned", [False, True])
def test_cuda_tensors_without_a_device_or_with_one(versioned):
    """A well-formed CUDA tensor. With no usable GPU every entry point reports NoDevice (saving
    and restoring the thread's current CUDA context must not need the driver) and deletes the
    tensor once. With a GPU the import is a view that keeps the tensor until it is dropped; its
    address is made up, so nothing else is run on it."""
    m = Managed(versioned, (2, 3))
    try:
        v = devspan.from_dlpack(m.capsule())
    except devspan.NoDeviceError:
        assert m.deleted == 1
    else:
        assert v.shape == (2, 3) and v.dtype == "f32"
        assert m.deleted == 0
        del v
        gc.collect()
        assert m.deleted == 1
        return
    calls = {
        "fill": lambda dst, _: devspan.fill(dst, 1),
        "cast": lambda src, _: devspan.cast(src, "f16"),
        "to_contiguous": lambda src, _: devspan.to_contiguous(src),
        "copy": lambda dst, src: devspan.copy(dst, src),
    }
    for name, call in calls.items():
        m, other = Managed(versioned, (2, 3)), Managed(versioned, (2, 3))
        second = other.capsule()
        with pytest.raises(devspan.NoDeviceError):
            call(m.capsule(), second)
        gc.collect()
        assert m.deleted == 1, name
        # copy(dst, src) imports dst first: src is never taken and stays its producer's.
        assert other.deleted == 0, name
        assert capsule_name(second) == (b"dltensor_versioned" if versioned else b"dltensor"), name


class Refused(Exception):
    """Raised by Producer.__dlpack__ once it has recorded the stream it was asked for."""


class Producer:
    """A DLPack producer of CUDA device `device` that records each stream it is asked to order
    its work before, and then refuses to export."""

    def __init__(self, device=0):
        self.device = device
        self.streams = []

    def __dlpack_device__(self):
        return (KDLCUDA, self.device)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        raise Refused()


# Stand-ins for the tensor classes of PyTorch and CuPy: devspan knows a framework by the module
# of an object's class (or of a base class).
TorchTensor = type("Tensor", (Producer,), {"__module__": "torch"})
CupyArray = type("ndarray", (Producer,), {"__module__": "cupy._core.core"})


class TorchSubclass(TorchTensor):
    pass


@pytest.fixture
def frameworks(monkeypatch):
    """Fake `torch` and `cupy` modules whose current stream on device d is `streams[d]`;
    `queried` lists the (framework, device) pairs asked for."""
    state = types.SimpleNamespace(torch={0: 0, 1: 0x7000}, cupy={0: 0x9000, 1: 2}, queried=[])

    def torch_current_stream(device=None):
        state.queried.append(("torch", device))
        return types.SimpleNamespace(cuda_stream=state.torch[device])

    def cupy_current_stream(device_id=-1):
        state.queried.append(("cupy", device_id))
        return types.SimpleNamespace(ptr=state.cupy[device_id])

    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(current_stream=torch_current_stream)
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(get_current_stream=cupy_current_stream)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    return state


def test_calls_without_a_stream_use_the_frameworks_current_stream(frameworks):
    """The stream a call runs on is the one it asks the producer to order its work before."""
    for make, device, expect in [
        (TorchTensor, 1, 0x7000),
        (TorchTensor, 0, 1),  # PyTorch's default stream (0) is the legacy default stream
        (TorchSubclass, 1, 0x7000),
        (CupyArray, 0, 0x9000),
        (CupyArray, 1, 2),
        (Producer, 1, 1),  # no framework: the legacy default stream
    ]:
        for call in (devspan.from_dlpack, lambda x: devspan.fill(x, 1), lambda x: devspan.cast(x, "f16"),
                     devspan.to_contiguous):
            p = make(device)
            with pytest.raises(Refused):
                call(p)
            assert p.streams == [expect], (make, device)
    assert ("torch", 1) in frameworks.queried and ("cupy", 1) in frameworks.queried


def test_explicit_streams_win(frameworks):
    for s in (1, 2, 0x5000):
        p = TorchTensor(1)
        with pytest.raises(Refused):
            devspan.from_dlpack(p, stream=s)
        assert p.streams == [s]
    assert frameworks.queried == []


def test_copy_runs_on_the_first_argument_that_asks_for_a_stream(frameworks):
    dst, src = Producer(0), CupyArray(0)
    with pytest.raises(Refused):
        devspan.copy(dst, src)
    assert dst.streams == [0x9000] and src.streams == []  # dst is imported first
    dst, src = TorchTensor(1), CupyArray(1)
    with pytest.raises(Refused):
        devspan.copy(dst, src)
    assert dst.streams == [0x7000]


NO_IMPORT_SCRIPT = """
import sys
sys.path.insert(0, {path!r})
import numpy as np
import devspan


class Cai:
    __cuda_array_interface__ = {{"shape": (2,), "typestr": "<f4", "data": (4096, False), "version": 3}}


a = np.zeros(3, dtype=np.float32)
for obj in (a, a.__dlpack__(), Cai(), object()):
    for call in (devspan.from_dlpack, lambda x: devspan.fill(x, 1), devspan.to_contiguous):
        try:
            call(obj)
        except Exception:
            pass
print(sorted(m for m in ("torch", "cupy") if m in sys.modules))
"""


def test_no_framework_is_imported_for_other_objects():
    path = str(pathlib.Path(devspan.__file__).resolve().parents[1])
    script = textwrap.dedent(NO_IMPORT_SCRIPT).format(path=path)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "[]", r.stdout + r.stderr


def test_elementwise_kernel_declarations_are_checked_without_a_gpu():
    k = devspan.ElementwiseKernel("f32 a, float16 x", "f64 z", "z = a * x")
    assert "f32 a, f16 x" in repr(k) and "f64 z" in repr(k)
    with pytest.raises(devspan.InvalidArgumentError):
        devspan.ElementwiseKernel("f32 x", "", "x")
    with pytest.raises(devspan.InvalidArgumentError):
        devspan.ElementwiseKernel("f32 x, f32 x", "f32 z", "z = x")
    with pytest.raises(devspan.InvalidArgumentError):
        devspan.ElementwiseKernel("f32 ds_x", "f32 z", "z = ds_x")
    with pytest.raises(devspan.UnsupportedDtypeError):
        devspan.ElementwiseKernel("complex64 x", "f32 z", "z = x")
    # Argument counts are checked before any tensor is looked at.
    with pytest.raises(TypeError):
        k(1.0, object())
    assert k.cache_dir is None
    c = devspan.ElementwiseKernel("f32 x", "f32 z", "z = x", cache_dir="/tmp/devspan-kernels")
    assert str(c.cache_dir) == "/tmp/devspan-kernels"
    with pytest.raises(TypeError):
        devspan.ElementwiseKernel("f32 x", "f32 z", "z = x", "/tmp/positional")
