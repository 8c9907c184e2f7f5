#!/usr/bin/env python3
"""Host time per call of small operations from Python: devspan beside PyTorch's own call for the
same operation, on the same tensors, in one process.

Usage, on a machine with a CUDA GPU and PyTorch:

    bash python/build.sh          # or: pip install ./python
    python3 tools/host_time_bench.py [--n 1024] [--calls 2000] [--rounds 7] [--path DIR]

`--path DIR` puts DIR first on the import path (a directory holding a `devspan` package), so
that two builds can be compared by running the script once with each. Host time moves by about
15% from one process to the next, more than many changes are worth; `--ab DIR` compares in one
process instead: it loads the build in DIR (a directory holding a `devspan` package) beside the
first one, under another package name, and times the copy, cast, transposed copy and fill rows,
a copy from 64 source tensors in turn, `from_dlpack` and an `ElementwiseKernel` call
(`z = a * x + y`, beside `torch.add`), of both builds and PyTorch's own call in alternating
rounds (the order rotated every round), printing each median, the ratios to PyTorch, and B - A.

Rows, on f32 tensors of N elements (a square of about N elements for the transposed copy):
- `copy`: `b.copy_(a)` against `devspan.copy(b, a)`;
- `copy, cast`: `b.copy_(h)` with `h` f16 against `devspan.copy(b, h)`;
- `copy, transposed`: `b.copy_(a.T)` against `devspan.copy(b, a.T)`;
- `fill`: `b.fill_(0.5)` against `devspan.fill(b, 0.5)`;
- `from_dlpack`: `devspan.from_dlpack(a)` alone (the view is dropped at once), beside
  `torch.from_dlpack(a)`.

Each devspan call is timed twice: on the torch tensors themselves (imported for the call) and
on devspan tensors imported once beforehand (`devspan.from_dlpack`). The parts a torch
argument costs on its own are listed last: PyTorch's `__dlpack__` and `__dlpack_device__`, and
`torch.cuda.current_stream`.

A cell is the median over ROUNDS of (wall time of CALLS calls) / CALLS, in microseconds, after
200 warm-up calls; the GPU is synchronised between rounds, outside the timing. The operations
are small enough that the GPU keeps up, so the time is the host's.
"""

import argparse
import itertools
import pathlib
import statistics
import sys
import time


def per_call_us(f, calls, rounds, sync):
    for _ in range(200):
        f()
    sync()
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            f()
        out.append((time.perf_counter() - t0) / calls * 1e6)
        sync()
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--path", default=None)
    ap.add_argument("--ab", default=None, metavar="DIR")
    args = ap.parse_args()
    first = args.path or str(pathlib.Path(__file__).resolve().parents[1] / "python")
    sys.path.insert(0, first)
    import torch
    import devspan

    print(f"devspan from {pathlib.Path(devspan.__file__).resolve().parent}")
    dev = "cuda"
    n = args.n
    side = max(1, round(n ** 0.5))
    a = torch.randn(n, device=dev)
    b = torch.empty(n, device=dev)
    h = torch.randn(n, device=dev).half()
    sq = torch.randn(side, side, device=dev)
    bsq = torch.empty(side, side, device=dev)
    sync = torch.cuda.synchronize
    va, vb, vh = devspan.from_dlpack(a), devspan.from_dlpack(b), devspan.from_dlpack(h)
    vsqt, vbsq = devspan.from_dlpack(sq.T), devspan.from_dlpack(bsq)

    def t(f):
        return per_call_us(f, args.calls, args.rounds, sync)

    rows = [
        ("copy", lambda: b.copy_(a), lambda: devspan.copy(b, a), lambda: devspan.copy(vb, va)),
        ("copy, cast", lambda: b.copy_(h), lambda: devspan.copy(b, h), lambda: devspan.copy(vb, vh)),
        ("copy, transposed", lambda: bsq.copy_(sq.T), lambda: devspan.copy(bsq, sq.T),
         lambda: devspan.copy(vbsq, vsqt)),
        ("fill", lambda: b.fill_(0.5), lambda: devspan.fill(b, 0.5), lambda: devspan.fill(vb, 0.5)),
        ("from_dlpack", lambda: torch.from_dlpack(a), lambda: devspan.from_dlpack(a), None),
    ]
    print(f"host time per call, us ({n} f32; transposed {side}x{side}); "
          f"median of {args.rounds} rounds of {args.calls} calls")
    print(f"{'call':<18} {'torch':>8} {'devspan':>9} {'ratio':>7} {'devspan on devspan tensors':>28}")
    for name, tf, df, vf in rows:
        tt, dt = t(tf), t(df)
        vt = f"{t(vf):.1f}" if vf else "-"
        print(f"{name:<18} {tt:8.1f} {dt:9.1f} {dt / tt:7.2f} {vt:>28}")
    # Check that the calls did what they say.
    devspan.copy(b, a)
    sync()
    assert torch.equal(b, a)
    devspan.copy(bsq, sq.T)
    sync()
    assert torch.equal(bsq, sq.T)
    s = torch.cuda.current_stream().cuda_stream
    parts = [
        ("a.__dlpack__", lambda: a.__dlpack__(stream=1 if s == 0 else s, max_version=(1, 1))),
        ("a.__dlpack_device__", lambda: a.__dlpack_device__()),
        ("current_stream", lambda: torch.cuda.current_stream(0).cuda_stream),
    ]
    print("parts a torch argument costs on its own, us:")
    for name, f in parts:
        print(f"  {name:<22} {t(f):6.1f}")
    # What the binding reads from a plain torch tensor (python/src/framework.rs, TorchLayout),
    # the stream it asks for, and the second tensor it holds; then one torch argument alone.
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    reads = [
        ("a.is_cuda", lambda: a.is_cuda),
        ("a.requires_grad", lambda: a.requires_grad),
        ("a.layout", lambda: a.layout),
        ("a.is_neg()", lambda: a.is_neg()),
        ("a.dtype", lambda: a.dtype),
        ("a.get_device()", lambda: a.get_device()),
        ("a.shape", lambda: a.shape),
        ("a.data_ptr()", lambda: a.data_ptr()),
        ("a.stride()", lambda: a.stride()),
        ("a.detach()", lambda: a.detach()),
    ]
    if raw is not None:
        reads.append(("_cuda_getCurrentRawStream", lambda: raw(0)))
    print("the reads of the binding's direct path for a torch tensor, us:")
    total = 0.0
    for name, f in reads:
        us = t(f)
        total += us
        print(f"  {name:<26} {us:6.2f}")
    print(f"  {'sum':<26} {total:6.2f}")
    print("one torch argument, the other a devspan tensor, us:")
    print(f"  {'copy(vb, a)':<26} {t(lambda: devspan.copy(vb, a)):6.1f}")
    print(f"  {'copy(b, va)':<26} {t(lambda: devspan.copy(b, va)):6.1f}")
    if args.ab:
        other = load_as(args.ab, "devspan_b")
        # A different source tensor in every call, 64 in turn.
        turn = itertools.cycle([torch.randn(n, device=dev) for _ in range(64)])
        c = torch.empty(n, device=dev)
        print(f"A/B in one process: A = {pathlib.Path(devspan.__file__).resolve().parent}, "
              f"B = {pathlib.Path(other.__file__).resolve().parent}")
        ab_rows = [
            ("copy", lambda: b.copy_(a), lambda m: lambda: m.copy(b, a)),
            ("copy, cast", lambda: b.copy_(h), lambda m: lambda: m.copy(b, h)),
            ("copy, transposed", lambda: bsq.copy_(sq.T), lambda m: lambda: m.copy(bsq, sq.T)),
            ("fill", lambda: b.fill_(0.5), lambda m: lambda: m.fill(b, 0.5)),
            ("copy, 64 sources", lambda: b.copy_(next(turn)), lambda m: lambda: m.copy(b, next(turn))),
            ("from_dlpack", lambda: torch.from_dlpack(a), lambda m: lambda: m.from_dlpack(a)),
        ]
        # `z = a * x + y` through each build's ElementwiseKernel (NVRTC), beside torch.add.
        try:
            kernels = [m.ElementwiseKernel("f32 a, f32 x, f32 y", "f32 z", "z = a * x + y")
                       for m in (devspan, other)]
            ab_rows.append(("elementwise", lambda: torch.add(b, a, alpha=2.0, out=c),
                            lambda m: (lambda k: lambda: k(2.0, a, b, c))(kernels[m is other])))
        except Exception as e:  # no NVRTC: the row is left out, and said so
            print(f"elementwise row left out: {e}")
        print(f"{'call':<18} {'torch':>7} {'A':>7} {'B':>7} {'A ratio':>8} {'B ratio':>8} {'B - A':>7}")
        for name, tf, make in ab_rows:
            tt, at, bt = alternating([tf, make(devspan), make(other)], args.calls, args.rounds, sync)
            print(f"{name:<18} {tt:7.2f} {at:7.2f} {bt:7.2f} {at / tt:8.2f} {bt / tt:8.2f} {bt - at:7.2f}")
        other.copy(b, a)
        sync()
        assert torch.equal(b, a)
    return 0


def load_as(directory, name):
    """The `devspan` package in `directory`, imported as the package `name` (beside the one
    already imported: each build's extension module is its own shared object)."""
    import importlib.util

    pkg = pathlib.Path(directory) / "devspan"
    spec = importlib.util.spec_from_file_location(
        name, pkg / "__init__.py", submodule_search_locations=[str(pkg)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def alternating(fs, calls, rounds, sync):
    """Per-call medians of each of `fs`, timed in alternating rounds: every round times each
    function once (CALLS calls), starting with a different one each round."""
    for f in fs:
        for _ in range(200):
            f()
    sync()
    times = [[] for _ in fs]
    for r in range(rounds * 3):
        for k in range(len(fs)):
            i = (r + k) % len(fs)
            t0 = time.perf_counter()
            for _ in range(calls):
                fs[i]()
            times[i].append((time.perf_counter() - t0) / calls * 1e6)
            sync()
    return [statistics.median(t) for t in times]


if __name__ == "__main__":
    sys.exit(main())
