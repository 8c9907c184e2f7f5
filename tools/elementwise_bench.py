#!/usr/bin/env python3
"""`z = a * x + y` side by side: devspan.ElementwiseKernel, CuPy's ElementwiseKernel and PyTorch
eager (`torch.add(y, x, alpha=a, out=z)`, one kernel), in one process, on the same tensors.

Usage, on a machine with a CUDA GPU, PyTorch and NVRTC (CuPy and devspan are optional; a
missing one is skipped, and the script says so):

    bash python/build.sh          # or: pip install ./python
    python3 tools/elementwise_bench.py [--reps 21] [--side 16384] [--queued]

Cases, in f32 and f16, on SIDE x SIDE outputs: contiguous operands; x and y transposed
(`x.T` of a contiguous tensor); x and y sliced `[:, ::2]` from tensors twice as wide. Each
call is timed with CUDA events (3 warm-up calls, then the median of --reps) on one torch
stream, which CuPy is given as an external stream and devspan finds as the tensors' current
stream. A cell is the ratio of the time of a device-to-device copy of the same traffic (the
bytes read plus the bytes written, halved: `dst.copy_(src)` of uint8 tensors) to the call's
time. The first call of each framework, which compiles, is reported apart. Results are
checked against PyTorch's. With --queued, a GPU sleep of about a millisecond precedes each
timed call, so that its host work overlaps the sleep and the events time the device work
alone; without it, a call's host time before its launch counts too, as a caller sees it. Last,
the host time per call (launch included) on 1024-element f32 tensors.
"""

import argparse
import pathlib
import statistics
import sys
import time

# The repository's python/devspan (with the extension module python/build.sh places there)
# comes first; an installed devspan otherwise.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))


def cupy_stream(cupy, stream):
    """The torch stream as a CuPy stream."""
    try:
        return cupy.cuda.Stream.from_external(stream)
    except (AttributeError, TypeError, ValueError):
        return cupy.cuda.ExternalStream(stream.cuda_stream)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--side", type=int, default=16384)
    ap.add_argument("--queued", action="store_true",
                    help="sleep the stream about a millisecond before each timed call, so that the "
                         "events time the device work alone, not the call's host work")
    args = ap.parse_args()
    import torch

    try:
        import devspan
    except ImportError as e:
        devspan = None
        print(f"devspan not importable ({e}); skipped")
    try:
        import cupy
    except ImportError as e:
        cupy = None
        print(f"cupy not importable ({e}); skipped")
    dev = torch.device("cuda")
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)
    side = args.side

    def timed(f):
        for _ in range(3):
            f()
        ts = []
        for _ in range(args.reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if args.queued:
                torch.cuda._sleep(2_000_000)
            a.record()
            f()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b))
        return statistics.median(ts)

    def memcpy_ms(nbytes):
        s = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        d = torch.empty_like(s)
        return timed(lambda: d.copy_(s))

    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}"
          + (f"; cupy {cupy.__version__}" if cupy else ""))
    header = f"{'case':<28} {'memcpy ms':>10} {'devspan':>9} {'cupy':>9} {'torch':>9}"
    print(header)
    for dtype, cname, ctype in ((torch.float32, "f32", "float32"), (torch.float16, "f16", "float16")):
        ds = devspan.ElementwiseKernel(f"f32 a, {cname} x, {cname} y", f"{cname} z", "z = a * x + y") if devspan else None
        cp = None
        if cupy:
            cp = cupy.ElementwiseKernel(f"float32 a, {ctype} x, {ctype} y", f"{ctype} z", "z = a * x + y", "saxpy")
        g = torch.Generator(device=dev).manual_seed(7)
        x = torch.randn(side, side, device=dev, generator=g).to(dtype)
        y = torch.randn(side, side, device=dev, generator=g).to(dtype)
        xw = torch.randn(side, 2 * side, device=dev, generator=g).to(dtype)
        yw = torch.randn(side, 2 * side, device=dev, generator=g).to(dtype)
        z = torch.empty(side, side, device=dev, dtype=dtype)
        cases = [("contiguous", x, y), ("transposed", x.T, y.T), ("sliced [:, ::2]", xw[:, ::2], yw[:, ::2])]
        traffic = 3 * side * side * x.element_size() // 2
        base = memcpy_ms(traffic)
        for name, xs, ys in cases:
            want = torch.add(ys, xs, alpha=2.0)
            cells, first = {}, {}
            if ds:
                t0 = time.perf_counter()
                ds(2.0, xs, ys, z)
                torch.cuda.synchronize()
                first["devspan"] = (time.perf_counter() - t0) * 1e3
                torch.testing.assert_close(z, want, rtol=2e-3, atol=2e-3)
                cells["devspan"] = base / timed(lambda: ds(2.0, xs, ys, z))
            if cp:
                with cupy_stream(cupy, stream):
                    cx, cy, cz = cupy.from_dlpack(xs), cupy.from_dlpack(ys), cupy.from_dlpack(z)
                    t0 = time.perf_counter()
                    cp(2.0, cx, cy, cz)
                    torch.cuda.synchronize()
                    first["cupy"] = (time.perf_counter() - t0) * 1e3
                    torch.testing.assert_close(z, want, rtol=2e-3, atol=2e-3)
                    cells["cupy"] = base / timed(lambda: cp(2.0, cx, cy, cz))
            cells["torch"] = base / timed(lambda: torch.add(ys, xs, alpha=2.0, out=z))
            row = f"{cname + ' ' + name:<28} {base:10.3f}"
            for k in ("devspan", "cupy", "torch"):
                row += f" {cells[k]:9.3f}" if k in cells else f" {'-':>9}"
            print(row + "   first call ms: " + ", ".join(f"{k} {v:.1f}" for k, v in first.items()))
    # Host time per call on a small tensor (1024 f32), the launch included.
    x = torch.randn(1024, device=dev)
    y = torch.randn(1024, device=dev)
    z = torch.empty(1024, device=dev)
    calls = {"torch": lambda: torch.add(y, x, alpha=2.0, out=z)}
    if devspan:
        k = devspan.ElementwiseKernel("f32 a, f32 x, f32 y", "f32 z", "z = a * x + y")
        calls["devspan"] = lambda: k(2.0, x, y, z)
    if cupy:
        kc = cupy.ElementwiseKernel("float32 a, float32 x, float32 y", "float32 z", "z = a * x + y", "saxpy")
        cx, cy, cz = cupy.from_dlpack(x), cupy.from_dlpack(y), cupy.from_dlpack(z)
        calls["cupy"] = lambda: kc(2.0, cx, cy, cz)
    for name, f in calls.items():
        for _ in range(100):
            f()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(2000):
            f()
        us = (time.perf_counter() - t0) / 2000 * 1e6
        torch.cuda.synchronize()
        print(f"host time per call, 1024 f32: {name} {us:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
