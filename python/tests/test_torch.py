"""devspan against PyTorch on a CUDA device: round trips, writes into the producer's memory,
keep-alive of the producer, and fill / copy / cast / to_contiguous against PyTorch's own ops."""

import gc
import subprocess
import sys
import textwrap

import pytest

from conftest import need, no_gpu
from dlpack_ctypes import KDLCUDA, Managed
from gpu_common import SIGNED, cast_values_ok

torch = need("torch")
if not torch.cuda.is_available():
    no_gpu("torch sees no CUDA device")

import devspan  # noqa: E402

DTYPES = {
    "u8": torch.uint8, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
    "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
    "u16": torch.uint16, "u32": torch.uint32, "u64": torch.uint64,
}
BITS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
NAME = {v: k for k, v in DTYPES.items()}


def bits(t):
    """The tensor's elements as same-sized integers (exact comparison, NaN included)."""
    return t.view(BITS[t.element_size()])


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    assert torch.equal(bits(a), bits(b)), f"{a}\n!=\n{b}"


def same_strides(shape, a, b):
    """Strides agree on every axis longer than 1 (producers may normalise the others)."""
    if 0 in shape:
        return True
    return all(x == y for n, x, y in zip(shape, a, b) if n > 1)


def random(dtype, shape):
    """Fresh random data: raw random bits for round trips (any bit pattern is an element)."""
    n = 1
    for s in shape:
        n *= s
    size = torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(-128, 128, (n * size,), dtype=torch.int8, device="cuda")
    return raw.view(dtype).view(shape)


def values(dtype, shape, negative):
    """Random numbers every element type holds exactly (quarters up to +-100, integers for ints)."""
    lo = -100 if negative else 0
    q = torch.randint(lo * 4, 400, shape, dtype=torch.int64, device="cuda")
    if dtype.is_floating_point:
        return (q.to(torch.float64) / 4).to(dtype)
    return (q // 4).to(dtype)


def layouts(x):
    """Contiguous and non-contiguous views of a 3-d tensor."""
    return {
        "contiguous": x,
        "sliced": x[1:, ::2, 3:],
        "transposed": x.permute(2, 0, 1),
        "strided_t": x[::2, 1:, ::3].transpose(0, 2),
        "one": x[1:2, 4:5, 2:3],
        "empty": x[:, 3:3],
    }


LAYOUTS = ["contiguous", "sliced", "transposed", "strided_t", "one", "empty"]


@pytest.fixture
def stream():
    return torch.cuda.current_stream().cuda_stream


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(DTYPES))
def test_round_trip(name, layout, stream):
    x = random(DTYPES[name], (6, 9, 10))
    src = layouts(x)[layout]
    v = devspan.from_dlpack(src, stream=stream)
    assert v.dtype == name and v.shape == tuple(src.shape)
    assert same_strides(src.shape, v.strides, src.stride()), (v.strides, src.stride())
    assert not v.readonly
    back = torch.from_dlpack(v)
    assert same_strides(src.shape, back.stride(), src.stride())
    same(back, src)
    legacy = torch.utils.dlpack.from_dlpack(v.__dlpack__(stream=1))
    same(legacy, src)
    again = devspan.from_dlpack(v.__dlpack__(max_version=(1, 0)), stream=stream)
    if src.numel() > 0:
        assert v.data_ptr == src.data_ptr() == back.data_ptr() == legacy.data_ptr() == again.data_ptr


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", list(DTYPES))
def test_to_contiguous(name, layout, stream):
    x = random(DTYPES[name], (6, 9, 10))
    src = layouts(x)[layout]
    c = devspan.to_contiguous(devspan.from_dlpack(src, stream=stream), stream=stream)
    out = torch.from_dlpack(c)
    assert out.is_contiguous()
    if src.numel() > 0:
        assert out.data_ptr() != src.data_ptr()
    same(out, src.contiguous())


@pytest.mark.parametrize("dst", list(DTYPES))
@pytest.mark.parametrize("src", list(DTYPES))
def test_cast_matches_torch(src, dst, stream):
    x = values(DTYPES[src], (7, 33, 5), negative=cast_values_ok(src, dst) and src in SIGNED)
    view = x[::2, 3:, 1:].transpose(0, 1)
    out = torch.from_dlpack(devspan.cast(view, dst, stream=stream))
    assert out.is_contiguous()
    same(out, view.to(DTYPES[dst]))
    same(torch.from_dlpack(devspan.cast(devspan.from_dlpack(view, stream=stream), DTYPES[dst], stream=stream)),
         view.to(DTYPES[dst]))


@pytest.mark.parametrize("name", list(DTYPES))
def test_fill_lands_in_producer_memory(name, stream):
    dtype = DTYPES[name]
    x = random(dtype, (8, 40))
    expect = x.clone()
    value = 3 if not dtype.is_floating_point else 2.5
    expect[1::3, ::2].fill_(value)
    v = devspan.from_dlpack(x[1::3, ::2], stream=stream)
    devspan.fill(v, value, stream=stream)
    same(x, expect)
    # A torch tensor directly (imported for the call only).
    devspan.fill(x[0], 1, stream=stream)
    expect[0].fill_(1)
    same(x, expect)


@pytest.mark.parametrize("name,value,expect_bits", [
    # Just above the f16 tie between 1 and 1 + 2^-10: rounded once, it goes up.
    ("f16", 1.0004882812509095, 0x3C01),
    ("bf16", 1.0039062500000002, 0x3F81),
    # Integers above a tie once rounded through f32 first.
    ("bf16", (1 << 24) + (1 << 16) + 1, 0x4B81),
    ("f16", 2051, 0x6802),
])
def test_fill_rounds_the_value_once(name, value, expect_bits, stream):
    x = torch.zeros(5, dtype=DTYPES[name], device="cuda")
    devspan.fill(x, value, stream=stream)
    torch.cuda.synchronize()
    assert bits(x).tolist() == [expect_bits - (1 << 16) if expect_bits >= 1 << 15 else expect_bits] * 5
    # The same value through devspan's own f64 cast.
    src = torch.full((5,), float(value), dtype=torch.float64, device="cuda")
    out = torch.from_dlpack(devspan.cast(src, name, stream=stream))
    torch.cuda.synchronize()
    same(out, x)


@pytest.mark.parametrize("dst", ["u8", "i32", "f16", "bf16", "f32", "f64", "u64"])
@pytest.mark.parametrize("src", ["i16", "f32", "bf16", "u32"])
def test_copy_matches_copy_(src, dst, stream):
    a = values(DTYPES[src], (16, 12), negative=cast_values_ok(src, dst) and src in SIGNED)
    out = random(DTYPES[dst], (12, 40))
    expect = out.clone()
    expect[:, ::3][:, :8].copy_(a[::2].T.to(DTYPES[dst]))
    devspan.copy(out[:, ::3][:, :8], a[::2].T, stream=stream)
    same(out, expect)
    # Broadcasting a row.
    expect[2:5, :12].copy_(a[0].to(DTYPES[dst]).expand(3, 12))
    devspan.copy(devspan.from_dlpack(out[2:5, :12], stream=stream), a[0], stream=stream)
    same(out, expect)


def test_producer_outlives_its_python_references(stream):
    x = torch.randn(512, 300, device="cuda")
    expect = x[1::2, ::3].clone()
    v = devspan.from_dlpack(x[1::2, ::3], stream=stream)
    del x
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    junk = [torch.full((512, 300), -7.0, device="cuda") for _ in range(8)]  # would reuse freed memory
    same(torch.from_dlpack(devspan.to_contiguous(v, stream=stream)), expect)
    devspan.fill(v, 4.0, stream=stream)
    same(torch.from_dlpack(v), torch.full_like(expect, 4.0))
    for j in junk:
        assert bool((j == -7.0).all())
    # An exported result outlives the devspan tensor it came from.
    t = torch.from_dlpack(devspan.cast(v, "f64", stream=stream))
    del v
    gc.collect()
    same(t, torch.full(expect.shape, 4.0, dtype=torch.float64, device="cuda"))


def test_broadcast_and_read_only_views(stream):
    x = torch.arange(6, dtype=torch.float32, device="cuda")
    b = x.expand(4, 6)
    v = devspan.from_dlpack(b, stream=stream)
    assert v.readonly and v.strides == (0, 1)
    with pytest.raises(devspan.InvalidArgumentError, match="read-only"):
        devspan.fill(v, 1.0, stream=stream)
    same(torch.from_dlpack(devspan.to_contiguous(v, stream=stream)), b.contiguous())
    with pytest.raises(BufferError):
        v.__dlpack__()  # read-only views only export as versioned tensors
    again = devspan.from_dlpack(v.__dlpack__(max_version=(1, 0)), stream=stream)
    assert again.readonly and again.strides == (0, 1)  # exported with DLPACK_FLAG_BITMASK_READ_ONLY


def test_overlapping_copy_is_refused(stream):
    x = torch.arange(10, dtype=torch.int32, device="cuda")
    with pytest.raises(devspan.AliasingError):
        devspan.copy(x[1:], x[:-1], stream=stream)
    same(x, torch.arange(10, dtype=torch.int32, device="cuda"))


def test_side_streams_are_ordered():
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    n = 1 << 26
    with torch.cuda.stream(s1):
        x = torch.ones(n, device="cuda")
        x.mul_(3.0)  # pending on s1 when devspan takes it
        v = devspan.from_dlpack(x[::2], stream=s2.cuda_stream)  # s2 waits for s1's work
    h = devspan.cast(v, "f16", stream=s2.cuda_stream)
    devspan.fill(v, 5.0, stream=s1.cuda_stream)  # s1 waits for s2's read of v
    with torch.cuda.stream(s1):
        t = torch.from_dlpack(h)  # s1 waits for the cast on s2
        total = t.double().sum()
        filled = x[::2].double().sum()
    s1.synchronize()
    assert total.item() == 3.0 * (n // 2)
    assert filled.item() == 5.0 * (n // 2)
    del x, t
    torch.cuda.synchronize()


def test_device_and_export_arguments(stream):
    x = torch.zeros(3, device="cuda")
    device = x.device.index or 0
    # A producer whose deleter calls are counted, over x's memory.
    m = Managed(True, (3,), data=x.data_ptr(), device=(KDLCUDA, device))
    v = devspan.from_dlpack(m.capsule(), stream=stream)
    assert v.__dlpack_device__() == (2, device)
    with pytest.raises(BufferError):
        v.__dlpack__(dl_device=(1, 0))
    with pytest.raises(BufferError):
        v.__dlpack__(copy=True)
    assert "Tensor" in repr(v)
    caps = [v.__dlpack__(max_version=(1, 0)), v.__dlpack__()]  # versioned and legacy
    del v
    gc.collect()
    assert m.deleted == 0  # the unconsumed capsules keep the producer alive
    caps.pop()
    gc.collect()
    assert m.deleted == 0
    caps.pop()  # never consumed: the last capsule's destructor deletes its tensor
    gc.collect()
    assert m.deleted == 1


def test_imports_of_one_tensor_are_ordered_across_streams():
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    n = 1 << 24
    x = torch.zeros(n, device="cuda")
    torch.cuda.synchronize()
    a = devspan.from_dlpack(x, stream=s1.cuda_stream)
    b = devspan.from_dlpack(x[::2], stream=s2.cuda_stream)  # another Tensor over the same memory
    with torch.cuda.stream(s1):
        torch.cuda._sleep(200_000_000)  # holds s1 back, so an unordered reader runs first
    devspan.fill(a, 3.0, stream=s1.cuda_stream)
    h = devspan.cast(b, "f64", stream=s2.cuda_stream)  # must wait for the fill through `a`
    with torch.cuda.stream(s2):
        total = torch.from_dlpack(h).sum()
    s2.synchronize()
    assert total.item() == 3.0 * (n // 2)
    del a, b, h
    torch.cuda.synchronize()


CURRENT_CONTEXT_SCRIPT = """
import ctypes, sys
import torch
sys.path.insert(0, {path!r})
import devspan

cuda = ctypes.CDLL("libcuda.so.1")


def current():
    ctx = ctypes.c_void_p()
    assert cuda.cuCtxGetCurrent(ctypes.byref(ctx)) == 0
    return ctx.value


x = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
assert current() is not None  # PyTorch made the primary context current
assert cuda.cuCtxSetCurrent(None) == 0
v = devspan.from_dlpack(x, stream=1)  # the first import: devspan creates its context
assert current() is None, "from_dlpack"
h = devspan.cast(v, "f16", stream=1)
assert current() is None, "cast"
del h  # frees devspan's allocation, which needs its own context current
assert current() is None, "dropping a cast result"
devspan.fill(v, 2.0, stream=1)  # would report an error stored by a failed free
assert current() is None, "fill"
del v
assert current() is None, "dropping an import"
torch.cuda.synchronize()
assert bool((x == 2.0).all())
print("context kept")
"""


def test_calls_keep_the_current_context():
    """In a fresh process, so that devspan's first import creates its context."""
    import pathlib

    # The directory that holds the devspan package this test imported (installed or not).
    path = str(pathlib.Path(devspan.__file__).resolve().parents[1])
    script = textwrap.dedent(CURRENT_CONTEXT_SCRIPT).format(path=path)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "context kept" in r.stdout, r.stdout + r.stderr


def new_block_is_clean(n, ptr):
    """After the last reference to a tensor of `n` f32 at `ptr` went (collected here), a new
    tensor of zeros on the default stream must read only zeros once all work is done, whatever
    devspan had queued on the old one; whether PyTorch's allocator gave it the same block."""
    gc.collect()
    u = torch.zeros(n, device="cuda")
    reused = u.data_ptr() == ptr
    torch.cuda.synchronize()
    assert int((u != 0).sum().item()) == 0
    return reused


def test_producer_memory_is_released_after_queued_work():
    """Two-stream drop: devspan's fill of a torch tensor is queued behind a busy side stream; the
    tensor and the view go, and PyTorch's caching allocator hands the block out again on its own
    stream. The new tensor must never see the fill."""
    s2 = torch.cuda.Stream()
    n = 1 << 26
    reused = 0
    for _ in range(3):
        t = torch.empty(n, device="cuda")
        ptr = t.data_ptr()
        v = devspan.from_dlpack(t, stream=s2.cuda_stream)
        with torch.cuda.stream(s2):
            torch.cuda._sleep(200_000_000)  # about 0.1 s of device cycles
        devspan.fill(v, 7.0, stream=s2.cuda_stream)
        del v, t
        reused += new_block_is_clean(n, ptr)
    print(f"block reused in {reused} of 3 rounds")


def test_calls_without_a_stream_follow_torchs_current_stream():
    """Work queued on a side stream, then devspan's calls with no stream, then PyTorch's next
    work on that stream: nothing synchronises, and the values are right only if devspan's calls
    run on the side stream, in order (`.item()` waits for that stream alone)."""
    s = torch.cuda.Stream()
    n = 1 << 24
    with torch.cuda.stream(s):
        x = torch.zeros(n, device="cuda")
        v = devspan.from_dlpack(x[1::2])  # a devspan tensor of PyTorch's
        torch.cuda._sleep(200_000_000)  # holds s back, so work on any other stream runs first
        x.fill_(1.0)
        devspan.fill(v, 7.0)  # on s, after fill_
        h = devspan.cast(v, "f64")  # a devspan result, which follows PyTorch as well
        got = (x.double().sum().item(), torch.from_dlpack(h).sum().item())
        # A torch tensor imported for the call, queued on s like the calls above.
        devspan.fill(x[::2], 5.0)
        total = x.double().sum().item()
    assert got == (8.0 * (n // 2), 7.0 * (n // 2))
    assert total == 12.0 * (n // 2)


def test_devspan_tensors_follow_torchs_current_stream_where_they_are_used():
    s = torch.cuda.Stream()
    n = 1 << 24
    x = torch.zeros(n, device="cuda")
    v = devspan.from_dlpack(x)  # on PyTorch's default stream
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)
        x.fill_(2.0)
        devspan.fill(v, 6.0)  # on s, after fill_
        got = x.double().sum().item()
    assert got == 6.0 * n


def test_torch_consumers_wait_for_devspans_work():
    """devspan writes on a busy side stream; PyTorch takes the results on another side stream
    through torch.from_dlpack, which passes that stream to __dlpack__."""
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    n = 1 << 24
    x = torch.zeros(n, device="cuda")
    v = devspan.from_dlpack(x)
    with torch.cuda.stream(s1):
        torch.cuda._sleep(200_000_000)
        devspan.fill(v, 3.0)  # on s1
        h = devspan.cast(v, "f64")  # on s1
    with torch.cuda.stream(s2):
        t = torch.from_dlpack(v)  # s2 waits for the fill
        u = torch.from_dlpack(h)  # and for the cast
        got = (t.double().sum().item(), u.sum().item())
    assert got == (3.0 * n, 3.0 * n)


def test_cuda_array_interface_of_torch_tensors():
    x = random(torch.float32, (6, 9, 10))
    src = x[1:, ::2, 3:]
    v = devspan.from_cuda_array_interface(src)
    assert v.shape == tuple(src.shape) and v.strides == src.stride() and v.data_ptr == src.data_ptr()
    same(torch.from_dlpack(devspan.to_contiguous(v)), src.contiguous())
    cai = v.__cuda_array_interface__
    assert cai["typestr"] == "<f4" and cai["data"] == (src.data_ptr(), False)
    assert cai["strides"] == tuple(4 * s for s in src.stride())


def test_bf16_tensors_have_no_cuda_array_interface():
    v = devspan.from_dlpack(torch.zeros(3, dtype=torch.bfloat16, device="cuda"))
    assert not hasattr(v, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="bf16"):
        v.__cuda_array_interface__


def test_calls_on_torch_tensors_return_before_their_work_and_hold_the_memory():
    """A call on torch tensors imported for it is queued behind a busy side stream and returns
    at once. The tensors go away in the meantime; PyTorch's next allocations of the same size
    must not get their memory while the call's work is queued, and the fill must land."""
    s2 = torch.cuda.Stream()
    n = 1 << 24
    for _ in range(3):
        t = torch.zeros(n, device="cuda")
        src = torch.full((n,), 3.0, device="cuda")
        ptrs = {t.data_ptr(), src.data_ptr()}
        s2.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s2):
            torch.cuda._sleep(200_000_000)  # about 0.1 s of device cycles
        devspan.copy(t, src, stream=s2.cuda_stream)
        assert not s2.query(), "the call waited for its work"
        keep = t  # the destination stays; the source goes
        del src, t
        gc.collect()
        u = [torch.empty(n, device="cuda") for _ in range(2)]
        for x in u:
            assert x.data_ptr() not in ptrs or s2.query(), "memory went back before the work"
            x.fill_(-1.0)
        s2.synchronize()
        torch.cuda.synchronize()
        assert bool((keep == 3.0).all())
        del keep, u


def test_torch_tensors_of_a_call_go_back_to_pytorch_after_its_work():
    """Without any later devspan call, the tensors of a call are released once its work has
    completed (a devspan thread checks every 10 ms while tensors are held)."""
    import time
    import weakref

    s2 = torch.cuda.Stream()
    t = torch.zeros(1 << 20, device="cuda")
    alive = weakref.ref(t)
    with torch.cuda.stream(s2):
        torch.cuda._sleep(50_000_000)
    devspan.fill(t, 2.0, stream=s2.cuda_stream)
    del t
    gc.collect()
    s2.synchronize()
    deadline = time.monotonic() + 5.0
    while alive() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert alive() is None, "the tensor is still held 5 s after its work completed"


@pytest.mark.parametrize("make", [
    lambda: torch.arange(24.0, device="cuda").reshape(2, 3, 4),
    lambda: torch.arange(24.0, device="cuda").reshape(2, 3, 4).permute(2, 0, 1),
    lambda: torch.arange(48, dtype=torch.int16, device="cuda").reshape(4, 12)[1:, ::3],
    lambda: torch.arange(6.0, device="cuda").expand(4, 6),
    lambda: torch.tensor(5.0, device="cuda"),
    lambda: torch.zeros(0, 3, device="cuda"),
    lambda: torch.nn.Parameter(torch.arange(4.0, device="cuda"), requires_grad=False),
])
def test_torch_tensors_read_directly_and_through_dlpack_agree(make):
    """Plain torch tensors are read from their own attributes, the rest through __dlpack__:
    both give the same view, and the same results."""
    x = make()
    direct = devspan.from_dlpack(x)
    through = devspan.from_dlpack(x.__dlpack__(max_version=(1, 0)))
    assert direct.shape == through.shape == tuple(x.shape)
    if x.numel() > 0:
        assert direct.data_ptr == through.data_ptr == x.data_ptr()
        assert same_strides(tuple(x.shape), direct.strides, through.strides)
    assert direct.dtype == through.dtype
    assert direct.readonly == through.readonly
    same(torch.from_dlpack(devspan.to_contiguous(x)), x.contiguous().detach())


def test_torch_tensors_that_require_grad_are_refused_as_pytorch_refuses_their_export():
    x = torch.zeros(3, device="cuda", requires_grad=True)
    with pytest.raises((RuntimeError, BufferError)):
        devspan.from_dlpack(x)
    with pytest.raises((RuntimeError, BufferError)):
        devspan.fill(x, 1.0)
    assert bool((x == 0).all())


def test_torch_tensors_on_another_stream_wait_for_pytorchs_current_stream():
    """A torch tensor imported directly for a call on a side stream: the side stream first
    waits for PyTorch's current stream, where the tensor's data is still being written."""
    s2 = torch.cuda.Stream()
    n = 1 << 24
    x = torch.zeros(n, device="cuda")
    y = torch.empty(n, device="cuda")
    torch.cuda._sleep(200_000_000)  # on PyTorch's current stream
    x.fill_(4.0)
    devspan.copy(y, x, stream=s2.cuda_stream)
    s2.synchronize()
    assert bool((y == 4.0).all())


def test_a_torch_tensor_pointed_elsewhere_keeps_the_viewed_memory():
    """The view holds the storage it reads, not the user's tensor object: `set_` on that object
    must not free the memory devspan still writes."""
    n = 1 << 20
    x = torch.zeros(n, device="cuda")
    old = x.data_ptr()
    v = devspan.from_dlpack(x)
    x.set_(torch.ones(n, device="cuda"))
    gc.collect()
    u = torch.full((n,), 3.0, device="cuda")
    assert u.data_ptr() != old, "the viewed memory went back to PyTorch"
    devspan.fill(v, 7.0)
    torch.cuda.synchronize()
    assert bool((u == 3.0).all()) and bool((x == 1.0).all())
    del v


def test_a_torch_tensor_pointed_elsewhere_during_a_queued_call_keeps_its_memory():
    """A tensor imported for one call: the call's queued work holds the storage it writes, so
    pointing the tensor elsewhere (`set_`) before that work runs does not hand the memory to
    the next allocation. (Once the work has completed, devspan releases the memory and PyTorch
    may hand it out again, hence `s2.query()`; the collection runs first, as it can outlast the
    busy kernel.)"""
    n = 1 << 20
    s2 = torch.cuda.Stream()
    x = torch.zeros(n, device="cuda")
    old = x.data_ptr()
    gc.collect()
    torch.cuda.synchronize()
    with torch.cuda.stream(s2):
        torch.cuda._sleep(200_000_000)
    devspan.fill(x, 7.0, stream=s2.cuda_stream)
    x.set_(torch.ones(n, device="cuda"))
    u = torch.full((n,), 3.0, device="cuda")
    assert u.data_ptr() != old or s2.query(), "the memory of queued work went back to PyTorch"
    torch.cuda.synchronize()
    assert bool((u == 3.0).all()) and bool((x == 1.0).all())


EXIT_SCRIPT = """
import sys
sys.path.insert(0, {path!r})
import torch, devspan
s = torch.cuda.Stream()
x = [torch.randn(1 << 20, device="cuda") for _ in range(8)]
with torch.cuda.stream(s):
    torch.cuda._sleep(100_000_000)
for t in x:
    devspan.fill(t, 1.0, stream=s.cuda_stream)  # still queued when the interpreter exits
print("queued")
"""


def test_a_process_exits_cleanly_with_calls_still_queued():
    import pathlib

    path = str(pathlib.Path(devspan.__file__).resolve().parents[1])
    script = textwrap.dedent(EXIT_SCRIPT).format(path=path)
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and "queued" in r.stdout, r.stdout + r.stderr


def test_device_argument_of_its_own_device_and_an_unknown_device(stream):
    x = torch.randn(64, 48, device="cuda")
    d = x.device.index or 0
    t = devspan.cast(x.t()[::2], "f16", stream=stream, device=d)
    assert t.device == d
    same(torch.from_dlpack(t), x.t()[::2].half())
    same(torch.from_dlpack(devspan.to_contiguous(x[::3], device=d)), x[::3])
    with pytest.raises(devspan.NoDeviceError, match="requested but only"):
        devspan.to_contiguous(x, device=torch.cuda.device_count() + 7)
    with pytest.raises(devspan.NoDeviceError):
        devspan.cast(x, "f64", device=torch.cuda.device_count())


two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")


@two_gpus
@pytest.mark.parametrize("dtype", ["f32", "u8", "f16", "f64"])
def test_copy_and_cast_between_devices(dtype):
    # Integers below 200 (exact in every type, so every cast has one right answer), then a
    # quarter for the float types.
    src = torch.randint(0, 200, (300, 257), device="cuda:1").to(DTYPES[dtype])
    if src.is_floating_point():
        src += 0.25
    layouts = [src, src.t(), src[:, ::2], src[5:-3:3, 1:100]]
    for a in layouts:
        # Into a transposed destination on device 0, with a cast; then the same type.
        out = torch.full((a.shape[1], a.shape[0]), 7, dtype=torch.float64, device="cuda:0").t()
        devspan.copy(out, a)
        same(out, a.to(torch.float64).to("cuda:0"))
        same(torch.from_dlpack(devspan.to_contiguous(a, device=0)), a.to("cuda:0"))
        c = devspan.cast(a, "f32", device=0)
        assert c.device == 0
        same(torch.from_dlpack(c), a.to(torch.float32).to("cuda:0"))
    # Broadcast source on the other device.
    out = torch.zeros(6, 257, dtype=DTYPES[dtype], device="cuda:0")
    devspan.copy(out, src[3])
    same(out, src[3].expand(6, 257).to("cuda:0"))


@two_gpus
def test_copy_between_devices_follows_both_devices_streams():
    n = 1 << 24
    src = torch.ones(2 * n, device="cuda:1")
    dst = torch.zeros(n, device="cuda:0")
    with torch.cuda.device(1):
        torch.cuda._sleep(200_000_000)  # the source's stream is busy ...
        src.fill_(3.0)  # ... and the value devspan must read is queued behind it
    with torch.cuda.device(0):
        torch.cuda._sleep(50_000_000)
        dst.fill_(-1.0)  # queued before the copy on the destination's stream
    devspan.copy(dst, src[::2])
    with torch.cuda.device(1):
        src.fill_(9.0)  # must follow the copy's read
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    assert bool((dst == 3.0).all())
    assert bool((src == 9.0).all())


@two_gpus
def test_a_side_stream_of_the_source_device_follows_the_read():
    n = 1 << 24
    side = torch.cuda.Stream(device=1)  # non-blocking: not ordered with the legacy default stream
    with torch.cuda.device(1), torch.cuda.stream(side):
        src = torch.full((2 * n,), 3.0, device="cuda:1")
    dst = torch.zeros(n, device="cuda:0")
    with torch.cuda.device(0):
        torch.cuda._sleep(200_000_000)  # the copy, on device 0's stream, runs late
    with torch.cuda.device(1), torch.cuda.stream(side):
        devspan.copy(dst, src[::2])  # src is taken on `side`, PyTorch's current stream there
        src.fill_(9.0)  # queued on `side` after the call: must wait for the read
        out = devspan.cast(src[1::2], "f64", device=0)  # read of the new values, on device 0
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    assert bool((dst == 3.0).all())
    assert bool((torch.from_dlpack(out) == 9.0).all())


def test_many_calls_on_one_side_stream_stay_in_order_with_pytorchs_work():
    """More calls than devspan holds tensors for before it checks their work, all on one side
    stream behind a busy kernel, between PyTorch's own work on the same tensors: every step
    sees the one before it."""
    s = torch.cuda.Stream()
    a = torch.zeros(1 << 20, device="cuda")
    b = torch.zeros_like(a)
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)
        for i in range(40):
            a.fill_(float(i))
            devspan.copy(b, a)
            b.add_(1.0)
            devspan.copy(a, b)
    s.synchronize()
    assert bool((a == 40.0).all()) and bool((b == 40.0).all())


def test_calls_alternating_between_two_streams_wait_for_each_other():
    """devspan's calls on the same tensors alternate between two side streams, the calls on the
    first queued behind a busy kernel each time: each call waits for the other stream's earlier
    calls, so the last call's values win."""
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    a = torch.zeros(1 << 20, device="cuda")
    b = torch.zeros_like(a)
    torch.cuda.synchronize()
    for i in range(24):
        with torch.cuda.stream(s1 if i % 2 == 0 else s2):
            if i % 2 == 0:
                torch.cuda._sleep(5_000_000)
            devspan.fill(a, float(i))
            devspan.copy(b, a)
    torch.cuda.synchronize()
    assert bool((a == 23.0).all()) and bool((b == 23.0).all())


def test_a_tensor_passed_to_many_calls_stays_alive_until_the_last_ones_work():
    """One PyTorch tensor passed to many calls on a side stream behind busy kernels, whole and
    as two halves: the calls share what keeps its memory alive. The tensor goes while that work
    is queued, and PyTorch's allocator hands its block out again on the default stream: the new
    tensor must never see the calls' writes."""
    s = torch.cuda.Stream()
    n = 1 << 24
    reused = 0
    for _ in range(3):
        t = torch.empty(n, device="cuda")
        ptr = t.data_ptr()
        lo, hi = t[: n // 2], t[n // 2 :]
        for i in range(12):
            with torch.cuda.stream(s):
                torch.cuda._sleep(2_000_000)
            devspan.fill(t, float(i), stream=s.cuda_stream)
            devspan.fill(lo, 1.0, stream=s.cuda_stream)
            devspan.fill(hi, 2.0, stream=s.cuda_stream)
        del t, lo, hi
        reused += new_block_is_clean(n, ptr)
    print(f"block reused in {reused} of 3 rounds")


def allocated_returns_to(base, call=None, seconds=2.0):
    """Whether PyTorch's allocated memory comes back to `base` within `seconds`, calling
    `call` meanwhile when given."""
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if torch.cuda.memory_allocated() == base:
            return True
        if call is not None:
            call()
        else:
            time.sleep(0.001)
    return torch.cuda.memory_allocated() == base


@pytest.mark.parametrize("calls_go_on", [False, True], ids=["idle", "calls go on"])
def test_memory_of_a_tensor_passed_to_many_calls_goes_back_after_them(calls_go_on):
    """A tensor passed to many calls, then dropped: devspan gives its memory back once the
    work is done, whether no further call comes or calls on other tensors go on."""
    small = torch.zeros(16, device="cuda")
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    t = torch.empty(1 << 24, device="cuda")
    for i in range(50):
        devspan.fill(t, float(i))
        devspan.copy(small, t[:16])
    torch.cuda.synchronize()
    assert float(small[0]) == 49.0
    del t
    gc.collect()
    go_on = (lambda: devspan.fill(small, 1.0)) if calls_go_on else None
    assert allocated_returns_to(base, go_on), (torch.cuda.memory_allocated(), base)
