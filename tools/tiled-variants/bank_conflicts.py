#!/usr/bin/env python3
"""Shared-memory bank conflicts of the tiled kernels' gathers, modelled on the host from the
launches that `tiled-variants cases` writes, under the kernels' line rotation and a family of
others. No GPU needed.

Usage, from the project's root:

    tools/tiled-variants/target/release/tiled-variants cases > cases.txt
    python3 tools/tiled-variants/bank_conflicts.py cases.txt [NAME_PREFIX]

The model follows the tiled kernels (kernels/src/emit/tiled.rs) for elements of 1, 2 and 4
bytes:
- read position r of a tile is kept at byte r * size of the tile in shared memory, in units of
  4 bytes, 32 to a 128-byte line, unit j of line L at unit j ^ rot(L)
  (`tiled_smem_offset`: rot(L) = (L ^ L >> 5) % 32, or (L ^ L >> 1 ^ L >> 4) % 32 for the
  vector copies of 1-byte elements, `tiled_smem_shifts`);
- store slot s = t + k * threads of thread t gathers the elements of write positions
  s * vd .. s * vd + vd - 1 (vd: 16 bytes of elements for the vector kernels, 1 for the
  element-wise ones), one shared load each, and the 32 lanes of a warp issue each load
  together. (The element-wise kernels give each warp consecutive runs of 32 slots instead;
  their loads then cover the same runs of 32 positions, in another order, so the mean is the
  same.)

For each load instruction of each warp, the cost is the largest number of distinct 4-byte
words that its lanes touch in one bank (1: conflict-free); a case's figure is the mean over
its instructions. It prints that figure under the kernels' rotation (`now`) and the best one
of the family rot(L) = (L ^ L >> s [^ L >> t]) % 32, with the rotations that reach it.

The model counts words per bank only: it leaves out the stage's stores (consecutive units,
conflict-free under any rotation of whole lines), broadcasts across instructions, and
8-byte elements.
"""

import itertools
import struct
import sys


def decode(line):
    """(name, kernel, threads, volume, element size, vector, write axes) of a case line."""
    f = line.rstrip("\n").split("|")
    b = bytes.fromhex(f[8])
    volume, tile_rank, _batch_rank, vector = struct.unpack_from("<4I", b, 20)
    write = [struct.unpack_from("<IIIiII", b, 40 + 16 * 16 + 24 * i) for i in range(tile_rank)]
    return f[0], f[1], int(f[2]), volume, int(f[6]), vector, write


def read_positions(volume, write):
    """The read position of every write position of the tile."""
    out = []
    for w in range(volume):
        x, r = w, 0
        for length, _magic, _shift, _dst, read, _pad in write:
            x, c = divmod(x, length)
            r += c * read
        out.append(r)
    return out


def rotation(shifts):
    """rot(L) = L ^ (L >> s) for each s in `shifts`, modulo 32."""
    def rot(line):
        v = line
        for s in shifts:
            v ^= line >> s
        return v & 31
    return rot


def cost(positions, volume, threads, size, vd, rot):
    """Mean over the gather's warp instructions of the most distinct words in one bank."""
    stores = volume // vd
    total = n = 0
    for k in range((stores + threads - 1) // threads):
        for w0 in range(0, threads, 32):
            for j in range(vd):
                banks = {}
                for lane in range(32):
                    s = w0 + lane + k * threads
                    if s >= stores:
                        continue
                    b = positions[vd * s + j] * size
                    unit, line = b >> 2, b >> 7
                    word = (line << 5) | ((unit & 31) ^ rot(line))
                    banks.setdefault(word & 31, set()).add(word)
                if banks:
                    total += max(len(v) for v in banks.values())
                    n += 1
    return total / n if n else 0.0


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    prefix = sys.argv[2] if len(sys.argv) > 2 else ""
    family = {f"x{s}": rotation([s]) for s in range(1, 8)}
    family.update({f"x{s}{t}": rotation([s, t]) for s, t in itertools.combinations(range(1, 8), 2)})
    for line in open(sys.argv[1]):
        name, kernel, threads, volume, size, vector, write = decode(line)
        if not name.startswith(prefix) or size > 4 or "tiled" not in kernel:
            continue
        vd = 16 // size if vector else 1
        positions = read_positions(volume, write)
        wide = ("copy_tiled_b1", "copy_tiled_a_b1")
        ours = "x14" if vector and kernel in wide else "x5"
        now = cost(positions, volume, threads, size, vd, family[ours])
        costs = {k: cost(positions, volume, threads, size, vd, f) for k, f in family.items()}
        best = min(costs.values())
        which = [k for k, v in costs.items() if v == best][:4]
        print(f"{name:34} {kernel:18} volume {volume:6}  now {now:5.2f}  best {best:5.2f} {' '.join(which)}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
