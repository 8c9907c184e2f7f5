#!/usr/bin/env python3
"""PyTorch, CuPy and devspan side by side on the `narrow`, `narrow-cast`, `rank`, `flip`,
`flip-cast`, `flip-odd` and `short-rows` cases of benches/bandwidth.rs, and on moved pixels and complex numbers (`pixels`: the
`copy` group's transposes and more), in one process.

Usage, on a machine with a CUDA GPU and PyTorch (CuPy and devspan are optional; a missing one is
skipped, and the script says so):

    bash python/build.sh                 # builds python/devspan/_devspan.abi3.so (or: pip install ./python)
    python3 tools/any_layout_bench.py                      # every group
    python3 tools/any_layout_bench.py narrow --json any_layout.json
    python3 tools/any_layout_bench.py narrow-cast --only "u8 -> f32"
    python3 tools/any_layout_bench.py rank --only "rank 28" --reps 11
    python3 tools/any_layout_bench.py --queued             # device time alone (see below)
    python3 tools/any_layout_bench.py --list               # the cases, nothing timed

Each `narrow`, `rank` and `pixels` case makes the permuted tensor contiguous: PyTorch
`t.permute(p).contiguous()`, CuPy `cupy.ascontiguousarray(cupy.transpose(a, p))` of the same
memory (through DLPack), and devspan `devspan.to_contiguous(t.permute(p))`. Each `narrow-cast`
case (the narrow layouts with C = 3 or 4, shapes as for 4-byte elements, copied with a cast:
u8 -> f32, f32 -> f16, f16 -> f32) makes it contiguous in the target type T in one call:
PyTorch `torch.empty(shape, dtype=T).copy_(t.permute(p))`, CuPy `out = cupy.empty(shape,
dtype=T); cupy.copyto(out, cupy.transpose(a, p))`, and devspan `devspan.cast(t.permute(p), T)`.
All three run on one torch stream, which CuPy is given as an external stream and devspan finds
as the tensor's current stream. Each is timed with CUDA events around the call (allocation of
the result included, as a user sees it): 3 warm-up calls, then the median of --reps calls (21,
at least 11). A case counts the bytes it reads plus writes: elements * (size(F) + size(T)), so
twice the tensor's bytes without a cast. A cell is the ratio of the time of a device-to-device
copy of as many bytes, counted read + written as well (torch `dst.copy_(src)` of contiguous
uint8 tensors of half that count, timed in the same process right after the case) to the
framework's time: above 1 is faster than that copy. A framework that refuses a case shows its
error text in the cell.

Each `flip` case makes a view read backwards along some axes contiguous (a reversed vector,
images flipped left-right or upside down, channels reversed, pairs swapped): PyTorch
`torch.flip(t, axes)` (its tensors have no negative strides; `flip` copies), CuPy
`cupy.ascontiguousarray(cupy.flip(a, axes))`, and devspan
`devspan.to_contiguous` of that CuPy view (negative strides, through the CUDA Array Interface
alone, since the DLPack export of some CuPy releases garbles negative strides; without CuPy the
devspan cell says so). Each `flip-cast` case (the `flip` layouts with shapes for 4-byte elements,
u8 -> f32 and f16 -> f32) does the same with a cast: PyTorch `torch.flip(t, axes).to(T)` (two
passes: PyTorch has no flip with a cast), CuPy `cupy.copyto` of the flipped view into a new
array of T, and devspan `devspan.cast` of CuPy's flipped view. The `flip-odd` cases (images
of 5 and 7 channels flipped left-right or with their channels reversed, u8, f16 and f32) run
as the `flip` cases do. The `short-rows` cases (a `[rows, c]` array of u8, f16 and f32 with
rows of c = 3 to 1000 elements, about 1 GiB) run its runs in reversed order and each run
reversed as the `flip` cases do, and the column slice `x[:, :c]` of a `[rows, c + 1]` array
(the bench's `from [.., ..c]` rows) as the `narrow` cases do: `.contiguous()`,
`cupy.ascontiguousarray`, `devspan.to_contiguous` of the torch view; the `into [.., ..c]`
cases write the contiguous `[rows, c]` array into the first c columns of a `[rows, c + 1]`
array that each framework has of its own (poisoned first, allocated outside the timing):
`dst[:, :c].copy_(x)`, `cupy.copyto` into CuPy's view of it, `devspan.copy` into the torch
view.

With --queued, each timed call is preceded by a GPU sleep of about a millisecond
(`torch.cuda._sleep`), so that the call's host work runs while the stream is still busy and
the events time the device work alone; without it, a call's host time before its first launch
counts too (as a caller sees it). A call that still shows host time with --queued waits for
the device inside.

Sources hold random bits (never all zeros). Every result is checked on a sample of 4096
positions, bit for bit: PyTorch's against the elements its positions address in the source
(for a cast, those elements converted by torch, `src_elems.to(T)`), the others against the same
and against PyTorch's result where PyTorch made one; a result of another shape or dtype, or a
mismatch, marks the cell and is listed below the table. Random bits include NaNs in f32 and f16
sources, and a conversion may change a NaN's payload: where a cast's source element is a NaN,
the results need only be NaNs too (every other position, and every position of a copy without a
cast, is compared bit for bit).

The cases, their names and the seeded random permutations (splitmix64, Fisher-Yates) are those
of benches/bandwidth.rs: keep the two in step.
"""

import argparse
import json
import os
import statistics
import sys

GIB = 1 << 30
MASK = (1 << 64) - 1
SAMPLE = 4096
# About a millisecond of GPU clock cycles (--queued).
SLEEP_CYCLES = 2_000_000


# --- The cases (as benches/bandwidth.rs: narrow_layouts, narrow_cast_workloads, RANK_SHAPES,
# rank_permutations) ----------------------------------------------------------------------------


def splitmix64(state):
    """One draw: (new state, value)."""
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def seeded_permutation(rank, seed):
    """Fisher-Yates from the identity, from the last position down, draws modulo the positions left."""
    state = seed
    p = list(range(rank))
    for i in range(rank - 1, 0, -1):
        state, r = splitmix64(state)
        j = r % (i + 1)
        p[i], p[j] = p[j], p[i]
    return p


def show_shape(shape):
    """Runs of equal extents written n^k: [2, 3^17]."""
    parts, i = [], 0
    while i < len(shape):
        run = 1
        while i + run < len(shape) and shape[i + run] == shape[i]:
            run += 1
        parts.append(f"{shape[i]}^{run}" if run > 1 else str(shape[i]))
        i += run
    return "[" + ", ".join(parts) + "]"


def narrow_layouts(size):
    out = []
    for c in (2, 3, 4, 8):
        side = 8192
        while c * side * side * size > GIB:
            side //= 2
        out.append((f"CHW -> HWC, C={c} H=W={side}", [c, side, side], [1, 2, 0]))
        out.append((f"HWC -> CHW, C={c} H=W={side}", [side, side, c], [2, 0, 1]))
    # Planes of an odd number of pixels, off their 16-byte alignment.
    side = 8191
    out.append((f"CHW -> HWC, C=3 H=W={side}", [3, side, side], [1, 2, 0]))
    out.append((f"HWC -> CHW, C=3 H=W={side}", [side, side, 3], [2, 0, 1]))
    for c in (3, 4):
        h = w = 256
        n = (256 << 20) // (c * h * w * size)
        out.append((f"NCHW -> NHWC, N={n} C={c} H=W={h}", [n, c, h, w], [0, 2, 3, 1]))
        out.append((f"NHWC -> NCHW, N={n} C={c} H=W={h}", [n, h, w, c], [0, 3, 1, 2]))
    return out


RANK_SHAPES = [
    [128, 3, 4, 2, 4, 3, 4, 2, 512],
    [4] * 14,
    [2, 3, 4] * 6,
    [2] + [3] * 17,
    [2] * 27,
    [2] * 28,
]


def rank_permutations(rank, index):
    out = [
        ("reversed", list(range(rank - 1, -1, -1))),
        ("cyclic", [(i + 1) % rank for i in range(rank)]),
    ]
    for k in (1, 2):
        seed = 1000 * index + k
        out.append((f"random (seed {seed})", seeded_permutation(rank, seed)))
    return out


def flip_layouts(size):
    """(name, shape, axes read backwards), as benches/bandwidth.rs: flip_layouts."""
    n = GIB // size
    side = 8192
    out = [(f"[{n}] reversed", [n], [0])]
    for c in (3, 4):
        out.append((f"HWC C={c} H=W={side}, W reversed", [side, side, c], [1]))
        out.append((f"CHW C={c} H=W={side}, W reversed", [c, side, side], [2]))
    out.append((f"CHW C=3 H=W={side}, H reversed", [3, side, side], [1]))
    out.append((f"CHW C=3 H=W={side}, H and W reversed", [3, side, side], [1, 2]))
    for c in (3, 4):
        out.append((f"HWC C={c} H=W={side}, C reversed", [side, side, c], [2]))
    out.append((f"[{n // 2}, 2] pairs swapped", [n // 2, 2], [1]))
    return out


def flip_odd_layouts():
    """(name, shape, axes read backwards), as benches/bandwidth.rs: flip_odd_layouts."""
    h = 8192
    out = []
    for c in (5, 7):
        w = GIB // 4 // (h * c)
        for what, axis in (("W", 1), ("C", 2)):
            out.append((f"HWC C={c} {h}x{w}, {what} reversed", [h, w, c], [axis]))
    return out


SHORT_ROW_CS = (3, 5, 7, 9, 17, 24, 33, 48, 100, 250, 1000)


def short_row_layouts(size):
    """(name, source shape, how), as benches/bandwidth.rs: short_rows: how is ("flip", axes
    read backwards), ("columns", c: the first c columns read) or ("into", c: a contiguous
    source written into the first c columns of a [rows, c + 1] array)."""
    n = GIB // size
    out = []
    for c in SHORT_ROW_CS:
        rows = n // (c + 1)
        out.append((f"[{rows}, {c}] runs reversed", [rows, c], ("flip", [0])))
        out.append((f"[{rows}, {c}] each run reversed", [rows, c], ("flip", [1])))
        out.append((f"[{rows}, {c}] from [.., ..{c}]", [rows, c + 1], ("columns", c)))
        out.append((f"[{rows}, {c}] into [.., ..{c}]", [rows, c], ("into", c)))
    return out


def pixel_layouts():
    """(dtype, name, shape, permutation) of the `copy` group's moved pixels and complex numbers,
    as benches/bandwidth.rs: copy_workloads, and more channels and types."""
    side = 16384
    return [
        ("f32", f"transpose of complex f32 {side} x {side // 2}", [side, side // 2, 2], [1, 0, 2]),
        ("u8", f"transpose of an image of 3 u8 channels {side}^2", [side, side, 3], [1, 0, 2]),
        ("u8", f"transpose of an image of 4 u8 channels {side}^2", [side, side, 4], [1, 0, 2]),
        ("f16", f"transpose of an image of 3 f16 channels {side}^2", [side, side, 3], [1, 0, 2]),
    ]


class CudaArrayInterface:
    """An array seen through its `__cuda_array_interface__` alone (byte strides), not through
    `__dlpack__`: CuPy releases before the fix of cupy/cupy#10172 divide negative strides by an
    unsigned item size in their DLPack export, which devspan then refuses as overflowing."""

    def __init__(self, array):
        self.array = array
        self.__cuda_array_interface__ = array.__cuda_array_interface__


SIZES = {"u8": 1, "f16": 2, "f32": 4}
GROUPS = ("narrow", "narrow-cast", "rank", "flip", "flip-cast", "flip-odd", "short-rows", "pixels")
# The groups whose cases read a view backwards (their last field: the axes).
FLIP_GROUPS = ("flip", "flip-cast", "flip-odd")
# The `narrow-cast` group's (source, target) types.
CAST_PAIRS = [("u8", "f32"), ("f32", "f16"), ("f16", "f32")]
# The `flip-cast` group's.
FLIP_CAST_PAIRS = [("u8", "f32"), ("f16", "f32")]
# CuPy's (NumPy's) names of the types.
NUMPY_NAMES = {"u8": "uint8", "f16": "float16", "f32": "float32"}


def cases(groups):
    """(group, name, source dtype name, result dtype name, source shape, permutation), in the
    bench's order; for the `flip`, `flip-cast` and `flip-odd` groups the last is the axes read
    backwards; for `short-rows`, ("flip", axes), ("columns", c): the first c columns, or
    ("into", c): written into the first c columns of a wider array.
    The two dtypes differ in the `narrow-cast` and `flip-cast` groups alone."""
    out = []
    if "narrow" in groups:
        for ty, size in SIZES.items():
            for name, shape, perm in narrow_layouts(size):
                out.append(("narrow", f"{ty} {name}", ty, ty, shape, perm))
            if ty == "f32":
                m = 1 << 27
                for name, shape in (
                    ("split -> interleaved complex", [2, m]),
                    ("interleaved -> split complex", [m, 2]),
                ):
                    out.append(
                        ("narrow", f"f32 {name}, [{shape[0]}, {shape[1]}]", ty, ty, shape, [1, 0])
                    )
    if "narrow-cast" in groups:
        # Shapes for 4-byte elements, so that the f32 side stays within 1 GiB.
        for ty, to in CAST_PAIRS:
            for name, shape, perm in narrow_layouts(4):
                if "C=3" in name or "C=4" in name:
                    out.append(("narrow-cast", f"{ty} -> {to} {name}", ty, to, shape, perm))
    if "rank" in groups:
        for ty, size in SIZES.items():
            shapes = list(RANK_SHAPES) + ([[2] * 30] if size == 1 else [])
            for index, shape in enumerate(shapes):
                for kind, perm in rank_permutations(len(shape), index):
                    name = f"{ty} rank {len(shape)} {show_shape(shape)} {kind}"
                    out.append(("rank", name, ty, ty, shape, perm))
    if "flip" in groups:
        for ty, size in SIZES.items():
            for name, shape, axes in flip_layouts(size):
                out.append(("flip", f"{ty} {name}", ty, ty, shape, axes))
    if "flip-cast" in groups:
        # Shapes for 4-byte elements, as the bench's.
        for ty, to in FLIP_CAST_PAIRS:
            for name, shape, axes in flip_layouts(4):
                out.append(("flip-cast", f"{ty} -> {to} {name}", ty, to, shape, axes))
    if "flip-odd" in groups:
        for ty in SIZES:
            for name, shape, axes in flip_odd_layouts():
                out.append(("flip-odd", f"{ty} {name}", ty, ty, shape, axes))
    if "short-rows" in groups:
        for ty, size in SIZES.items():
            for name, shape, how in short_row_layouts(size):
                out.append(("short-rows", f"{ty} {name}", ty, ty, shape, how))
    if "pixels" in groups:
        for ty, name, shape, perm in pixel_layouts():
            out.append(("pixels", name, ty, ty, shape, perm))
    return out


def counted_bytes(n, ty, to):
    """Bytes read plus written by a case of n elements from ty to to (the reference copy moves
    half of them, counted read + written as well)."""
    return n * (SIZES[ty] + SIZES[to])


# --- Frameworks --------------------------------------------------------------------------------


def load_frameworks():
    """(torch, cupy or None, devspan or None, notes)."""
    notes = []
    try:
        import torch
    except ImportError as e:
        sys.exit(f"any_layout_bench: PyTorch is needed (tensors, events, the reference copy): {e}")
    if not torch.cuda.is_available():
        sys.exit("any_layout_bench: torch sees no CUDA device; nothing to measure")
    try:
        import cupy
    except ImportError as e:
        cupy = None
        notes.append(f"CuPy: skipped, not importable ({e})")
    # The source package, where python/build.sh has built its extension; else an installed one.
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")
    pkg = os.path.join(here, "devspan")
    if os.path.isdir(pkg) and any(f.startswith("_devspan") for f in os.listdir(pkg)):
        sys.path.insert(0, os.path.abspath(here))
    try:
        import devspan
    except ImportError as e:
        devspan = None
        notes.append(
            f"devspan: skipped, not importable ({e}); build it with `bash python/build.sh` "
            "or `pip install ./python`"
        )
    return torch, cupy, devspan, notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "groups", nargs="*",
        help="narrow, narrow-cast, rank, flip, flip-cast, flip-odd, short-rows, pixels "
        "(default: all)",
    )
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    ap.add_argument("--reps", type=int, default=21, help="timed calls per cell (median; >= 11)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed calls before them")
    ap.add_argument("--only", metavar="TEXT", help="only the cases whose name contains TEXT")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument(
        "--queued", action="store_true",
        help="a GPU sleep before each timed call: the events time the device work alone",
    )
    args = ap.parse_args()
    groups = args.groups or list(GROUPS)
    for g in groups:
        if g not in GROUPS:
            ap.error(f"unknown group {g!r} ({', '.join(GROUPS)})")
    if args.reps < 11:
        ap.error("--reps must be at least 11")
    todo = [c for c in cases(groups) if not args.only or args.only in c[1]]
    if args.list:
        for group, name, _, _, shape, perm in todo:
            print(f"{group:<11} {name:<60} shape {shape} perm {perm}")
        return

    torch, cupy, devspan, notes = load_frameworks()
    dtypes = {"u8": torch.uint8, "f16": torch.float16, "f32": torch.float32}
    bits_of = {1: torch.uint8, 2: torch.int16, 4: torch.int32}
    stream = torch.cuda.Stream()
    if args.queued and not hasattr(torch.cuda, "_sleep"):
        sys.exit("any_layout_bench: --queued needs torch.cuda._sleep, which this torch lacks")
    cp_stream = cupy.cuda.ExternalStream(stream.cuda_stream) if cupy is not None else None
    header = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cupy": getattr(cupy, "__version__", None),
        "devspan": getattr(devspan, "__version__", None),
        "devspan_from": getattr(devspan, "__file__", None),
        "reps": args.reps,
        "warmup": args.warmup,
        "queued": args.queued,
    }
    print(f"device: {header['device']}; torch {header['torch']}, cupy {header['cupy']}, "
          f"devspan {header['devspan']} ({header['devspan_from']})")
    for n in notes:
        print(n)

    def time_ms(fn):
        """Median milliseconds of fn() on `stream`, each call between its own pair of events."""
        for _ in range(args.warmup):
            fn()
        stream.synchronize()
        times = []
        for _ in range(args.reps):
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            if args.queued:
                torch.cuda._sleep(SLEEP_CYCLES)
            a.record(stream)
            out = fn()
            b.record(stream)
            b.synchronize()
            times.append(a.elapsed_time(b))
            del out
        return statistics.median(times)

    def bits(t):
        return t.view(bits_of[t.element_size()])

    rows = []
    mismatches = []
    width = max([len(c[1]) for c in todo] + [4])
    with torch.cuda.stream(stream):
        # Two contiguous byte buffers for the reference copy, of the largest case.
        most = max(
            counted_bytes(_numel(shape), ty, to) // 2 for _, _, ty, to, shape, _ in todo
        ) if todo else 0
        ref_src = torch.randint(0, 256, (max(most, 1),), dtype=torch.uint8, device="cuda")
        ref_dst = torch.empty_like(ref_src)
        for ty in SIZES:
            mine = [c for c in todo if c[2] == ty]
            if not mine:
                continue
            dtype = dtypes[ty]
            size = SIZES[ty]
            elems = max(_numel(c[4]) for c in mine)
            # Random bits: 32-bit words over their whole range, seen as the element type.
            words = torch.randint(
                -(1 << 31), (1 << 31) - 1, ((elems * size + 3) // 4,), dtype=torch.int32,
                device="cuda",
            )
            flat = words.view(torch.uint8)[: elems * size].view(dtype)
            for group, name, _, to, shape, perm in mine:
                base = flat[:_numel(shape)].view(shape)
                flip = perm if group in FLIP_GROUPS else None
                columns = None
                into = None
                if group == "short-rows":
                    kind, what = perm
                    if kind == "flip":
                        flip = what
                    elif kind == "columns":
                        columns = what
                    else:
                        into = what
                # The view's shape and strides, and its element zero in `base`.
                if into is not None:
                    # The source is `base` itself; each framework writes into the first
                    # `into` columns of its own [rows, into + 1] array, poisoned first.
                    src = base
                    view_shape, view_strides, start = list(shape), list(base.stride()), 0
                    wide = [shape[0], into + 1]
                    targets = {}
                    present = {"torch": True, "cupy": cupy is not None, "devspan": devspan is not None}
                    for fw in (f for f, here in present.items() if here):
                        t = torch.empty(wide, dtype=dtype, device="cuda")
                        bits(t).fill_(-1 if size > 1 else 255)
                        targets[fw] = t
                elif columns is not None:
                    src = base[:, :columns]
                    view_shape, view_strides, start = list(src.shape), list(src.stride()), 0
                elif flip is None:
                    src = base.permute(perm)
                    view_shape, view_strides, start = list(src.shape), list(src.stride()), 0
                else:
                    src = None
                    view_shape, view_strides, start = list(shape), list(base.stride()), 0
                    for a in flip:
                        start += (shape[a] - 1) * view_strides[a]
                        view_strides[a] = -view_strides[a]
                # Elements of the view (the copy's), fewer than the array's for a column slice.
                n = _numel(view_shape)
                to_dtype = dtypes[to]
                cast = to != ty
                counted = counted_bytes(n, ty, to)
                nbytes = counted // 2
                # The sample: flat positions of the result and the source elements they address.
                gen = torch.Generator(device="cuda")
                gen.manual_seed(n ^ len(shape))
                pos = torch.randint(0, n, (SAMPLE,), device="cuda", generator=gen)
                off = torch.full_like(pos, start)
                rest = pos.clone()
                for extent, st in zip(reversed(view_shape), reversed(view_strides)):
                    off += (rest % extent) * st
                    rest //= extent
                src_elems = flat[off]
                expect = src_elems.to(to_dtype) if cast else src_elems
                # A cast of a NaN need only give a NaN (its payload may change); a copy keeps it.
                nan_at = src_elems.isnan() if cast and src_elems.is_floating_point() else None

                def agree(a, b):
                    """Two samples of the result type: bit for bit, NaN for NaN at nan_at."""
                    if nan_at is None:
                        return torch.equal(bits(a), bits(b))
                    keep = ~nan_at
                    return (
                        torch.equal(bits(a[keep]), bits(b[keep]))
                        and bool(a[nan_at].isnan().all())
                        and bool(b[nan_at].isnan().all())
                    )

                cells = {}
                results = {}

                def run(fw, fn, make_sample):
                    try:
                        ms = time_ms(fn)
                        out = fn()
                        stream.synchronize()
                        sample, shape_ok = make_sample(out)
                        del out
                    except Exception as e:  # noqa: BLE001: any refusal goes in the cell
                        text = f"{type(e).__name__}: {e}".strip().splitlines()[0]
                        cells[fw] = {"error": text}
                        torch.cuda.synchronize()
                        return
                    cells[fw] = {"ms": ms}
                    results[fw] = (sample, shape_ok)

                def torch_sample(out):
                    return out.reshape(-1)[pos], tuple(out.shape) == tuple(view_shape)

                def torch_fn():
                    if into is not None:
                        return targets["torch"][:, :into].copy_(src)
                    if flip is not None:
                        # PyTorch has no flip with a cast: a flipped copy, then the cast.
                        flipped = torch.flip(base, flip)
                        return flipped.to(to_dtype) if cast else flipped
                    if not cast:
                        return src.contiguous()
                    return torch.empty(src.shape, dtype=to_dtype, device=src.device).copy_(src)

                run("torch", torch_fn, torch_sample)
                if cupy is not None:
                    with cp_stream:
                        try:
                            cp_base = cupy.from_dlpack(base)
                            if into is not None:
                                cp_src = cp_base
                                cp_dst = cupy.from_dlpack(targets["cupy"])[:, :into]
                            elif columns is not None:
                                cp_src = cp_base[:, :columns]
                            elif flip is None:
                                cp_src = cupy.transpose(cp_base, perm)
                            else:
                                cp_src = cupy.flip(cp_base, tuple(flip))
                        except Exception as e:  # noqa: BLE001
                            cp_src = e

                        def cp_fn():
                            if isinstance(cp_src, Exception):
                                raise cp_src
                            if into is not None:
                                cupy.copyto(cp_dst, cp_src)
                                return cp_dst
                            if not cast:
                                return cupy.ascontiguousarray(cp_src)
                            out = cupy.empty(cp_src.shape, dtype=NUMPY_NAMES[to])
                            cupy.copyto(out, cp_src)
                            return out

                        def cp_sample(out):
                            t = torch.from_dlpack(out)
                            return torch_sample(t)

                        run("cupy", cp_fn, cp_sample)
                if devspan is not None:
                    def ds_sample(out):
                        t = torch.from_dlpack(out)
                        return torch_sample(t)

                    def ds_fn():
                        if into is not None:
                            view = targets["devspan"][:, :into]
                            devspan.copy(view, src)
                            return view
                        if flip is not None:
                            # A view read backwards: CuPy's, whose strides are negative.
                            if cupy is None:
                                raise RuntimeError("a reversed view needs CuPy here")
                            if isinstance(cp_src, Exception):
                                raise cp_src
                            with cp_stream:
                                view = CudaArrayInterface(cp_src)
                                if cast:
                                    return devspan.cast(view, to)
                                return devspan.to_contiguous(view)
                        if not cast:
                            return devspan.to_contiguous(src)
                        return devspan.cast(src, to)

                    run("devspan", ds_fn, ds_sample)
                memcpy = time_ms(lambda: ref_dst[:nbytes].copy_(ref_src[:nbytes]))
                # Every result against the source elements its sample addresses (converted by
                # torch for a cast), and the others against torch's result where torch made one.
                for fw, (sample, shape_ok) in results.items():
                    problems = []
                    if not shape_ok:
                        problems.append("its shape differs")
                    if sample.dtype != to_dtype:
                        problems.append(f"its dtype is {sample.dtype}, not {to_dtype}")
                    else:
                        if not agree(sample, expect):
                            problems.append(
                                "its elements differ from the source's converted by torch"
                                if cast else "its elements differ from the source's"
                            )
                        if fw != "torch" and "torch" in results:
                            ref = results["torch"][0]
                            if ref.dtype == to_dtype and not agree(sample, ref):
                                problems.append("its elements differ from torch's result")
                    cells[fw]["match"] = not problems
                    if problems:
                        mismatches.append(f"{name}: {fw}: {'; '.join(problems)}")
                for c in cells.values():
                    if "ms" in c:
                        c["ratio"] = memcpy / c["ms"]
                row = {
                    "group": group,
                    "name": name,
                    "dtype": ty,
                    "to_dtype": to,
                    "shape": shape,
                    "perm": perm,
                    "bytes": counted,
                    "memcpy_ms": memcpy,
                }
                for fw in ("torch", "cupy", "devspan"):
                    row[fw] = cells.get(fw)
                rows.append(row)
                print(_line(row, width), flush=True)
                del base, src, pos, off, rest, src_elems, expect, nan_at, results
            del words, flat
            torch.cuda.empty_cache()

    print()
    print(_line(None, width))
    for row in rows:
        print(_line(row, width))
    refusals = [
        f"  {r['name']}: {fw}: {r[fw]['error']}"
        for r in rows
        for fw in ("torch", "cupy", "devspan")
        if r[fw] and "error" in r[fw]
    ]
    if refusals:
        print(f"{len(refusals)} refusals:")
        print("\n".join(refusals))
    for fw in ("torch", "cupy", "devspan"):
        ratios = [r[fw]["ratio"] for r in rows if r[fw] and "ratio" in r[fw]]
        refused = sum(1 for r in rows if r[fw] and "error" in r[fw])
        if ratios:
            print(
                f"{fw}: {len(ratios)} cases, min ratio {min(ratios):.3f}, "
                f"median {statistics.median(ratios):.3f}; {refused} refused"
            )
        elif refused:
            print(f"{fw}: every case refused")
    if mismatches:
        print(f"{len(mismatches)} MISMATCHES:")
        for m in mismatches:
            print(f"  {m}")
    else:
        print("every result matched")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**header, "notes": notes, "rows": rows, "mismatches": mismatches}, f, indent=1)
        print(f"wrote {args.json}")
    if mismatches:
        sys.exit(1)


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _cell(c):
    if c is None:
        return "skipped"
    if "error" in c:
        text = c["error"]
        return text if len(text) <= 40 else text[:37] + "..."
    mark = "" if c.get("match", True) else " MISMATCH"
    return f"{c['ratio']:.3f}{mark}"


def _line(row, width):
    """A table line: the header for None. A cell longer than its column (an error) widens it."""
    if row is None:
        return f"{'case':<{width}} {'torch':>14} {'cupy':>14} {'devspan':>14}"
    cells = [_cell(row[fw]) for fw in ("torch", "cupy", "devspan")]
    return f"{row['name']:<{width}} " + " ".join(f"{c:>14}" for c in cells)


if __name__ == "__main__":
    main()
