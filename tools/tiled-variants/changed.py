#!/usr/bin/env python3
"""Weighs a planner change on the tiled launches: which cases it changes, and how the harness
timed them. No GPU needed for the first step.

Usage, from the project's root, with `tiled-variants cases` written by two builds (the old and
the new planner; `TILED_VARIANTS_UNLISTED=COUNT,SEED` draws more layouts):

    python3 tools/tiled-variants/changed.py split OLD.txt NEW.txt DIR
        writes DIR/old.txt and DIR/new.txt, the cases whose lines differ (the same names, in
        order), prints how many per element type and the kernels they launch; then
        `tiled-variants ptx DIR/ptx $(cat DIR/kernels.txt)` and, on a GPU machine,
        `harness ROUNDS old:DIR/old.txt:DIR/ptx new:DIR/new.txt:DIR/ptx > LOG`
    python3 tools/tiled-variants/changed.py summary LOG [DIR]
        the harness's two columns per case (ratio to a device copy) sorted by new/old, their
        geometric mean, how many moved by more than 2% either way; with DIR, each case's tile
        runs (bytes read and written, counted either direction) and whether a rest follows,
        old -> new.
    python3 tools/tiled-variants/changed.py kernels LOG
        two configurations of the same cases (a kernel variant against the base: `harness
        ROUNDS base:CASES:DIR0 other:CASES:DIR1`), per kernel and per change of resident
        blocks per multiprocessor: launches, geometric mean of other/base, how many moved by
        more than 2% either way, and the range, then the same per kernel, by how fast the base
        ran (under 0.35, 0.45, 0.55 of a device copy, and the rest).
    python3 tools/tiled-variants/changed.py map LOG CASES [WORST]
        where one build's plans are weak: the harness's log of one configuration over every
        case of CASES (`harness ROUNDS head:CASES:PTXDIR`), as geometric means and counts
        under 0.5 and 0.7 per element size, per kernel family, and per element size and
        shorter tile run, then the WORST (default 40) cases with their runs.

A cases line is `name|kernel|threads|tiles|elements|src size|dst size|untiled rests|params`,
then `|kernel|threads|tiles|params` per tiled rest; params are the bytes of `TiledArgs`.
"""
import math
import re
import struct
import sys


def tile_runs(params_hex, src_size, dst_size):
    """(read bytes, write bytes): the leading tile axes whose strides continue each other."""
    b = bytes.fromhex(params_hex)
    tile_rank = struct.unpack_from("<I", b, 24)[0]
    read = [struct.unpack_from("<IIIi", b, 40 + 16 * i) for i in range(tile_rank)]
    write = [struct.unpack_from("<IIIiII", b, 40 + 16 * 16 + 24 * i) for i in range(tile_rank)]

    def run(axes):
        e = 1
        for length, stride in axes:
            if abs(stride) != e:
                break
            e *= length
        return e

    return (run((a[0], a[3]) for a in read) * src_size,
            run((a[0], a[3]) for a in write) * dst_size)


def cases(path):
    out = {}
    for line in open(path):
        if "|" in line:
            out[line.split("|", 1)[0]] = line
    return out


def split(old_path, new_path, dir_):
    import os
    old, new = cases(old_path), cases(new_path)
    names = [n for n in old if n in new and old[n] != new[n]]
    os.makedirs(dir_, exist_ok=True)
    with open(f"{dir_}/old.txt", "w") as f:
        f.writelines(old[n] for n in names)
    with open(f"{dir_}/new.txt", "w") as f:
        f.writelines(new[n] for n in names)
    kernels = set()
    per_type = {}
    for n in names:
        for line in (old[n], new[n]):
            f = line.rstrip("\n").split("|")
            kernels.add(f[1])
            kernels.update(f[i] for i in range(9, len(f), 4))
        t = n.split()[1]
        per_type[t] = per_type.get(t, 0) + 1
    with open(f"{dir_}/kernels.txt", "w") as f:
        f.write(" ".join(sorted(kernels)) + "\n")
    print(f"{len(names)} of {len(old)} cases change: {per_type}")
    print(f"kernels: {' '.join(sorted(kernels))}")


def harness_rows(log):
    """The harness's case lines: (name, kernel, [(ratio, blocks per SM) per configuration]),
    the last line of each name (a name of more than 34 characters pushes its line's columns
    right; kernel names start with `copy_` or `cast_`)."""
    rows = {}
    for line in open(log):
        m = re.match(r"(.+?) +((?:copy|cast)_\S+)\s+\d+\s+-?\d+((?:\s+[\d.]+/\d+)+)", line)
        if m:
            cells = [c.split("/") for c in m.group(3).split()]
            rows[m.group(1).strip()] = (m.group(2), [(float(r), int(b)) for r, b in cells])
    return rows


def moves(q):
    """The geometric mean of the ratios `q` (new / old), and how many exceed 1.02 and fall
    below 0.98."""
    g = math.exp(sum(math.log(x) for x in q) / len(q))
    return g, sum(x > 1.02 for x in q), sum(x < 0.98 for x in q)


def summary(log, dir_=None):
    rows = [(name, cells[0][0], cells[1][0])
            for name, (_, cells) in harness_rows(log).items() if len(cells) >= 2]
    if not rows:
        sys.exit("no case lines of two configurations in " + log)
    old = cases(f"{dir_}/old.txt") if dir_ else {}
    new = cases(f"{dir_}/new.txt") if dir_ else {}

    def shape(line):
        f = line.rstrip("\n").split("|")
        r, w = tile_runs(f[8], int(f[5]), int(f[6]))
        rest = len(f) > 9 or f[7] != "0"
        return f"{r}/{w}{' +rest' if rest else ''}"

    for name, a, b in sorted(rows, key=lambda x: x[2] / x[1]):
        runs = f"  runs {shape(old[name])} -> {shape(new[name])}" if name in old else ""
        print(f"{name:34} {a:.3f} -> {b:.3f}  x{b / a:.3f}{runs}")
    g, up, down = moves([b / a for _, a, b in rows])
    print(f"{len(rows)} cases: geomean x{g:.3f}, {up} faster and {down} slower by more than 2%; "
          f"min {min(a for _, a, _ in rows):.3f} -> {min(b for _, _, b in rows):.3f}")


def by_kernel(log):
    rows = [(kernel, cells[0], cells[1])
            for kernel, cells in harness_rows(log).values() if len(cells) >= 2]
    if not rows:
        sys.exit("no case lines of two configurations in " + log)

    def line(label, group):
        if not group:
            return
        q = [b / a for (a, _), (b, _) in group]
        g, up, down = moves(q)
        print(f"{label:44} {len(q):5} x{g:.3f}  {up:4} faster {down:4} slower  "
              f"x{min(q):.3f}-x{max(q):.3f}")

    kernels = sorted({k for k, _, _ in rows})
    for k in kernels:
        mine = [(a, b) for kk, a, b in rows if kk == k]
        line(k, mine)
        for occ in sorted({(a[1], b[1]) for a, b in mine}):
            line(f"  blocks/SM {occ[0]} -> {occ[1]}",
                 [(a, b) for a, b in mine if (a[1], b[1]) == occ])
    print()
    edges = [0.0, 0.35, 0.45, 0.55, math.inf]
    for k in kernels:
        for low, high in zip(edges, edges[1:]):
            group = [(a, b) for kk, a, b in rows if kk == k and low <= a[0] < high]
            line(f"{k}, base {low:.2f}-{'' if high == math.inf else f'{high:.2f}'}", group)


def weak_spots(log, cases_path, worst=40):
    all_cases = cases(cases_path)
    rows = []
    timed = harness_rows(log)
    for name, (kernel, cells) in timed.items():
        if name not in all_cases:
            continue
        f = all_cases[name].rstrip("\n").split("|")
        rows.append({
            "name": name,
            "kernel": kernel,
            "ratio": cells[0][0],
            "blocks": cells[0][1],
            "size": int(f[5]),
            "runs": tile_runs(f[8], int(f[5]), int(f[6])),
            "rest": len(f) > 9 or f[7] != "0",
        })
    if not rows:
        sys.exit(f"no case lines of {cases_path} in {log}")
    missing = len(all_cases) - len(rows)
    if missing:
        print(f"{missing} of the {len(all_cases)} cases have no line in {log}")

    def line(label, group):
        if group:
            g = math.exp(sum(math.log(r["ratio"]) for r in group) / len(group))
            low = sum(r["ratio"] < 0.5 for r in group)
            mid = sum(r["ratio"] < 0.7 for r in group)
            print(f"{label:42} {len(group):5} cases  geomean {g:.3f}  under 0.5: {low:4}  "
                  f"under 0.7: {mid:4}")

    sizes = sorted({r["size"] for r in rows})
    for s in sizes:
        line(f"{s}-byte elements", [r for r in rows if r["size"] == s])
    print()
    for k in sorted({r["kernel"].rsplit("_", 1)[0] for r in rows}):
        line(k, [r for r in rows if r["kernel"].rsplit("_", 1)[0] == k])
    print()
    edges = [16, 32, 64, 128, 256, 512, 1024, None]
    for s in sizes:
        low = 0
        for e in edges:
            group = [r for r in rows if r["size"] == s and min(r["runs"]) >= low
                     and (e is None or min(r["runs"]) < e)]
            line(f"{s}-byte, shorter run {low}-{'' if e is None else e - 1} bytes", group)
            low = e
    print()
    for r in sorted(rows, key=lambda r: r["ratio"])[:int(worst)]:
        rd, wr = r["runs"]
        print(f"{r['ratio']:.3f}/{r['blocks']} {r['name']:34} {r['kernel']:26} runs {rd}/{wr}"
              f"{' +rest' if r['rest'] else ''}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "split":
        split(*sys.argv[2:])
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "summary":
        summary(*sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "kernels":
        by_kernel(sys.argv[2])
    elif len(sys.argv) in (4, 5) and sys.argv[1] == "map":
        weak_spots(*sys.argv[2:])
    else:
        sys.exit(__doc__)
