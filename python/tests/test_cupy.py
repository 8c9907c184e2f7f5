"""devspan against CuPy on a CUDA device: round trips (negative strides included), writes into
the producer's memory, keep-alive of the producer, and fill / copy / cast / to_contiguous
against CuPy's own operations."""

import gc

import pytest

from conftest import need, no_gpu
from gpu_common import SIGNED, cast_values_ok

cp = need("cupy")
try:
    if cp.cuda.runtime.getDeviceCount() == 0:
        no_gpu("CuPy sees no CUDA device")
except cp.cuda.runtime.CUDARuntimeError as e:
    no_gpu(f"CuPy sees no CUDA device: {e}")

import devspan  # noqa: E402

# CuPy has no bfloat16.
DTYPES = {
    "u8": cp.uint8, "i8": cp.int8, "u16": cp.uint16, "i16": cp.int16, "u32": cp.uint32, "i32": cp.int32,
    "u64": cp.uint64, "i64": cp.int64, "f16": cp.float16, "f32": cp.float32, "f64": cp.float64,
}
BITS = {1: cp.int8, 2: cp.int16, 4: cp.int32, 8: cp.int64}


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    ia, ib = a.view(BITS[a.itemsize]) if a.size else a, b.view(BITS[b.itemsize]) if b.size else b
    assert bool((ia == ib).all()), f"{a}\n!=\n{b}"


def random(dtype, shape):
    n = 1
    for s in shape:
        n *= s
    raw = cp.random.randint(-128, 128, size=n * cp.dtype(dtype).itemsize, dtype=cp.int8)
    return raw.view(dtype).reshape(shape)


def values(dtype, shape, negative):
    lo = -100 if negative else 0
    q = cp.random.randint(lo * 4, 400, size=shape, dtype=cp.int64)
    if cp.dtype(dtype).kind == "f":
        return (q.astype(cp.float64) / 4).astype(dtype)
    return (q // 4).astype(dtype)


def layouts(x):
    return {
        "contiguous": x,
        "sliced": x[1:, ::2, 3:],
        "reversed": x[::-1, :, ::-2],
        "transposed": x.transpose(2, 0, 1),
        "fortran": cp.asfortranarray(x),
        "one": x[1:2, 4:5, 2:3],
        "empty": x[:, 3:3],
    }


LAYOUTS = ["contiguous", "sliced", "reversed", "transposed", "fortran", "one", "empty"]


def cupy_exports_bad_strides(src):
    """CuPy 14 exports a negative byte stride of a multi-byte element divided as an unsigned
    number (-180 bytes of u16 become 2**63 - 90 elements); devspan refuses such a tensor."""
    return src.itemsize > 1 and any(s < 0 for s in src.strides)


def refused_if_cupy_stride_bug(src, stream):
    """True (after checking devspan's refusal) when `src` hits CuPy's stride export bug."""
    if not cupy_exports_bad_strides(src):
        return False
    cap = src.__dlpack__(stream=1)
    with pytest.raises((devspan.NumericOverflowError, devspan.OutOfBoundsError)):
        devspan.from_dlpack(cap, stream=stream)
    return True


@pytest.fixture
def stream():
    return cp.cuda.get_current_stream().ptr


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(DTYPES))
def test_round_trip(name, layout, stream):
    x = random(DTYPES[name], (6, 9, 10))
    src = layouts(x)[layout]
    if refused_if_cupy_stride_bug(src, stream):
        pytest.xfail("CuPy exports negative strides of multi-byte elements as huge unsigned values")
    v = devspan.from_dlpack(src, stream=stream)
    item = src.itemsize
    assert v.dtype == name and v.shape == src.shape
    if src.size > 1:
        assert tuple(s * item for s in v.strides) == src.strides
        assert v.data_ptr == src.data.ptr
    back = cp.from_dlpack(v)
    same(back, src)
    if src.size > 1:
        assert back.data.ptr == src.data.ptr and back.strides == src.strides


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(DTYPES))
def test_to_contiguous(name, layout, stream):
    src = layouts(random(DTYPES[name], (6, 9, 10)))[layout]
    if refused_if_cupy_stride_bug(src, stream):
        pytest.xfail("CuPy exports negative strides of multi-byte elements as huge unsigned values")
    out = cp.from_dlpack(devspan.to_contiguous(src, stream=stream))
    assert out.flags.c_contiguous
    same(out, cp.ascontiguousarray(src))


@pytest.mark.parametrize("dst", list(DTYPES))
@pytest.mark.parametrize("src", list(DTYPES))
def test_cast_matches_astype(src, dst, stream):
    x = values(DTYPES[src], (7, 33, 5), negative=cast_values_ok(src, dst) and src in SIGNED)
    view = x[::2, 3:, 1:].transpose(1, 0, 2)  # positive strides: see cupy_exports_bad_strides
    out = cp.from_dlpack(devspan.cast(view, dst, stream=stream))
    assert out.flags.c_contiguous
    same(out, view.astype(DTYPES[dst]))


@pytest.mark.parametrize("name", list(DTYPES))
def test_fill_lands_in_producer_memory(name, stream):
    x = random(DTYPES[name], (8, 40))
    expect = x.copy()
    value = 3 if cp.dtype(DTYPES[name]).kind != "f" else 2.5
    region = (slice(1, None, 3), slice(None, None, -2 if x.itemsize == 1 else 2))
    expect[region] = value
    devspan.fill(devspan.from_dlpack(x[region], stream=stream), value, stream=stream)
    same(x, expect)


@pytest.mark.parametrize("dst", ["u8", "i64", "f16", "f32", "f64"])
@pytest.mark.parametrize("src", ["i8", "f16", "u16", "f64"])
def test_copy_matches_assignment(src, dst, stream):
    a = values(DTYPES[src], (16, 12), negative=cast_values_ok(src, dst) and src in SIGNED)
    out = random(DTYPES[dst], (12, 40))
    expect = out.copy()
    rows = -1 if out.itemsize == 1 else 1  # see cupy_exports_bad_strides
    expect[::rows, ::3][:, :8] = a[::2].T.astype(DTYPES[dst])
    devspan.copy(out[::rows, ::3][:, :8], a[::2].T, stream=stream)
    same(out, expect)


def test_producer_outlives_its_python_references(stream):
    x = cp.random.standard_normal((512, 300), dtype=cp.float32)
    expect = x[1::2, ::3].copy()
    v = devspan.from_dlpack(x[1::2, ::3], stream=stream)
    del x
    gc.collect()
    cp.get_default_memory_pool().free_all_blocks()
    junk = [cp.full((512, 300), -7.0, dtype=cp.float32) for _ in range(8)]
    same(cp.from_dlpack(devspan.to_contiguous(v, stream=stream)), expect)
    devspan.fill(v, 4.0, stream=stream)
    same(cp.from_dlpack(v), cp.full(expect.shape, 4.0, dtype=cp.float32))
    for j in junk:
        assert bool((j == -7.0).all())


def test_torch_and_cupy_share_through_devspan(stream):
    torch = pytest.importorskip("torch")
    x = cp.arange(24, dtype=cp.float32).reshape(4, 6)
    t = torch.from_dlpack(devspan.from_dlpack(x[:, ::2], stream=stream))  # torch has no negative strides
    devspan.fill(x[1], -1.0, stream=stream)
    cp.cuda.get_current_stream().synchronize()
    assert t[1].tolist() == [-1.0] * 3
    assert t[0].tolist() == [0.0, 2.0, 4.0]


def busy(stream, n=8192, rounds=4):
    """Queues tens of milliseconds of matrix products on `stream`, so that work on other
    streams that is not ordered after it runs first."""
    with stream:
        a = cp.ones((n, n), dtype=cp.float32)
        for _ in range(rounds):
            a = a @ a
            a *= 1.0 / n
    return a


class OnlyInterface:
    """Exports an array through __cuda_array_interface__ alone (as Numba's device arrays do)."""

    def __init__(self, a):
        self.a = a

    @property
    def __cuda_array_interface__(self):
        return self.a.__cuda_array_interface__


def test_calls_without_a_stream_follow_cupys_current_stream():
    """Work queued on a non-blocking stream, then devspan's calls with no stream, then CuPy's
    next work on that stream: nothing synchronises, and the values are right only if devspan's
    calls run on that stream, in order (`float()` waits for that stream alone)."""
    s = cp.cuda.Stream(non_blocking=True)
    n = 1 << 24
    with s:
        x = cp.zeros(n, dtype=cp.float32)
        v = devspan.from_dlpack(x[1::2])  # a devspan tensor of CuPy's
        busy(s)
        x += 1
        devspan.fill(v, 7.0)  # on s, after the addition
        h = devspan.cast(v, "f64")  # a devspan result, which follows CuPy as well
        got = (float(x.astype(cp.float64).sum()), float(cp.from_dlpack(h).sum()))
        # A CuPy array imported for the call, queued on s like the calls above.
        devspan.fill(x[::2], 5.0)
        total = float(x.astype(cp.float64).sum())
    assert got == (8.0 * (n // 2), 7.0 * (n // 2))
    assert total == 12.0 * (n // 2)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(DTYPES))
def test_cuda_array_interface_round_trip(name, layout):
    """Both ways, negative strides included (the interface counts strides in bytes)."""
    x = random(DTYPES[name], (6, 9, 10))
    src = layouts(x)[layout]
    v = devspan.from_cuda_array_interface(src)
    assert devspan.from_cuda_array_interface(v) is v
    item = src.itemsize
    assert v.dtype == name and v.shape == src.shape and not v.readonly
    if src.size > 1:
        assert tuple(s * item for s in v.strides) == src.strides
        assert v.data_ptr == src.data.ptr
    cai = v.__cuda_array_interface__
    assert cai["version"] == 3 and cai["typestr"] == src.dtype.str and cai["shape"] == src.shape
    assert cai["descr"] == [("", src.dtype.str)] and cai["data"][1] is False
    assert isinstance(cai["stream"], int) and cai["stream"] > 2
    back = cp.asarray(v)  # reads v's interface, and synchronises on its stream
    same(back, src)
    if src.size > 1:
        assert back.data.ptr == src.data.ptr and back.strides == src.strides
        assert (cai["strides"] is None) == src.flags.c_contiguous
    # Through from_dlpack, from an object with the interface alone.
    same(cp.from_dlpack(devspan.to_contiguous(devspan.from_dlpack(OnlyInterface(src)))), cp.ascontiguousarray(src))


def test_interface_producer_is_kept_alive():
    x = cp.random.standard_normal((512, 300), dtype=cp.float32)
    expect = x[1::2, ::3].copy()
    v = devspan.from_dlpack(OnlyInterface(x[1::2, ::3]))
    del x
    gc.collect()
    cp.get_default_memory_pool().free_all_blocks()
    junk = [cp.full((512, 300), -7.0, dtype=cp.float32) for _ in range(8)]
    same(cp.from_dlpack(devspan.to_contiguous(v)), expect)
    devspan.fill(v, 4.0)
    same(cp.asarray(v), cp.full(expect.shape, 4.0, dtype=cp.float32))
    for j in junk:
        assert bool((j == -7.0).all())


def test_interface_stream_orders_devspan_and_the_producer():
    """An imported interface names the producer's stream `s`; devspan works on `other`. devspan
    waits for the work queued on `s`, and `s` waits for devspan's later work on the view."""
    s, other = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    n = 1 << 24
    with s:
        x = cp.zeros(n, dtype=cp.float32)
        busy(s)
        x += 2
        # CuPy's interface names its current stream, s.
        assert x.__cuda_array_interface__["stream"] == s.ptr
        v = devspan.from_cuda_array_interface(x, stream=other.ptr)
        h = devspan.to_contiguous(v, stream=other.ptr)
    with other:
        first = float(cp.from_dlpack(h).sum())
    assert first == 2.0 * n
    busy(other)
    devspan.fill(v, 9.0, stream=other.ptr)
    with s:
        second = float(x.sum())
    assert second == 9.0 * n


def test_interface_consumers_are_ordered_with_devspan():
    """v's interface names a stream that waits for devspan's work. A consumer that synchronises
    on it (CuPy) sees devspan's writes; one that queues its work there (as Numba does) is
    ordered before devspan's later work and after it."""
    s, other = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    n = 1 << 24
    x = cp.zeros(n, dtype=cp.float32)
    v = devspan.from_dlpack(x)
    busy(s)
    devspan.fill(v, 4.0, stream=s.ptr)
    y = cp.asarray(v)  # CuPy synchronises on the interface's stream
    with other:
        assert float(y.sum()) == 4.0 * n
    ext = cp.cuda.ExternalStream(v.__cuda_array_interface__["stream"])
    busy(ext)
    with ext:
        y.fill(6.0)  # queued on the interface's stream
    h = devspan.to_contiguous(v, stream=other.ptr)  # waits for the work queued there
    with other:
        assert float(cp.from_dlpack(h).sum()) == 6.0 * n
    busy(other)
    devspan.fill(v, 8.0, stream=other.ptr)  # the interface's stream waits for it
    with ext:
        assert float(y.sum()) == 8.0 * n
