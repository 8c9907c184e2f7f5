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


def summary(log, dir_=None):
    rows = []
    for line in open(log):
        m = re.match(r"(.{34}) (\S+)\s+\d+\s+\d+\s+([\d.]+)/\d+\s+([\d.]+)/\d+", line)
        if m:
            rows.append((m.group(1).strip(), float(m.group(3)), float(m.group(4))))
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
    g = math.exp(sum(math.log(b / a) for _, a, b in rows) / len(rows))
    up = sum(b > 1.02 * a for _, a, b in rows)
    down = sum(b < 0.98 * a for _, a, b in rows)
    print(f"{len(rows)} cases: geomean x{g:.3f}, {up} faster and {down} slower by more than 2%; "
          f"min {min(a for _, a, _ in rows):.3f} -> {min(b for _, _, b in rows):.3f}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "split":
        split(*sys.argv[2:])
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "summary":
        summary(*sys.argv[2:])
    else:
        sys.exit(__doc__)
