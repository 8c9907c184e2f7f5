"""devspan.ElementwiseKernel on PyTorch tensors: strided, transposed and broadcast operands,
mixed element types and two outputs, scalars, in-place updates, refused calls and NVRTC's log,
each against PyTorch's own result on the same tensors."""

import pytest

from conftest import need, no_gpu

torch = need("torch")
if not torch.cuda.is_available():
    no_gpu("torch sees no CUDA device")

import devspan  # noqa: E402

DEV = "cuda"


def test_saxpy_on_transposed_and_broadcast_operands():
    g = torch.Generator(device=DEV).manual_seed(1)
    k = devspan.ElementwiseKernel("f32 a, f32 x, f32 y", "f32 z", "z = a * x + y")
    x = torch.randn(300, 200, device=DEV, generator=g)
    y = torch.randn(300, device=DEV, generator=g)
    z = torch.full((200, 300), float("nan"), device=DEV)
    k(2.5, x.T, y, z)
    torch.testing.assert_close(z, 2.5 * x.T + y, rtol=1e-6, atol=1e-6)
    # A strided output inside a larger tensor: the rest keeps its values.
    big = torch.full((400, 600), -7.0, device=DEV)
    out = big[::2, 1::2]
    src = torch.randn(200, 300, device=DEV, generator=g).flip(1)
    k(-1.0, src, y, out)
    torch.testing.assert_close(out, -1.0 * src + y, rtol=1e-6, atol=1e-6)
    mask = torch.ones_like(big, dtype=torch.bool)
    mask[::2, 1::2] = False
    assert bool((big[mask] == -7.0).all())


def test_mixed_types_two_outputs_and_in_place():
    g = torch.Generator(device=DEV).manual_seed(2)
    k = devspan.ElementwiseKernel("f16 x, i32 n, f64 w", "f32 s, f16 t", "s = x * n; t = (float)(w - x)")
    x = torch.randn(64, 48, device=DEV, generator=g).half()
    w = torch.randn(48, device=DEV, generator=g, dtype=torch.float64)
    s = torch.empty(64, 48, device=DEV)
    t = torch.empty(48, 64, device=DEV, dtype=torch.float16).T
    k(x, 3, w, s, t)
    torch.testing.assert_close(s, x.float() * 3, rtol=0, atol=0)
    torch.testing.assert_close(t, (w - x.double()).float().half(), rtol=0, atol=0)
    inc = devspan.ElementwiseKernel("f32 x", "f32 y", "y = x + 1")
    v = torch.arange(1000.0, device=DEV)
    inc(v, v)
    torch.testing.assert_close(v, torch.arange(1.0, 1001.0, device=DEV))
    with pytest.raises(devspan.AliasingError):
        inc(v[1:], v[:-1])


def test_bad_calls_raise_their_exceptions():
    k = devspan.ElementwiseKernel("f32 x", "f32 z", "z = x")
    x = torch.ones(4, 5, device=DEV)
    z = torch.zeros(4, 5, device=DEV)
    with pytest.raises(devspan.UnsupportedDtypeError):
        k(x.double(), z)
    with pytest.raises(devspan.ShapeMismatchError):
        k(torch.ones(4, 6, device=DEV), z)
    with pytest.raises(TypeError):
        k(x)
    # A scalar where an output goes is refused, not written.
    with pytest.raises(TypeError):
        k(x, 2.0)
    broken = devspan.ElementwiseKernel("f32 x", "f32 z", "z = x +;")
    with pytest.raises(devspan.CompileError, match="body"):
        broken(x, z)
    assert bool((z == 0).all())


def test_a_cache_dir_is_written_and_read_by_a_later_kernel(tmp_path):
    x = torch.arange(1000, dtype=torch.float32, device=DEV)
    z = torch.full_like(x, float("nan"))
    k = devspan.ElementwiseKernel("f32 x", "f32 z", "z = x * 3.0f", cache_dir=tmp_path / "k")
    k(x, z)
    torch.testing.assert_close(z, x * 3.0)
    files = list((tmp_path / "k").glob("*.ptx"))
    assert len(files) == 1 and files[0].stat().st_size > 100
    again = devspan.ElementwiseKernel("f32 x", "f32 z", "z = x * 3.0f", cache_dir=str(tmp_path / "k"))
    z.fill_(float("nan"))
    again(x, z)
    torch.testing.assert_close(z, x * 3.0)
    assert list((tmp_path / "k").glob("*")) == files
