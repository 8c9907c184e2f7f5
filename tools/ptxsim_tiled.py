#!/usr/bin/env python3
"""Runs a tiled kernel (copy_tiled_bN, copy_tiled_e_bN, copy_tiled_a_bN), a reversed row kernel
(copy_rows_rev_bN, copy_rows_rev3_bN, ...) or a gathered row kernel (copy_rows_gather_bN,
cast_rows_gather_S_D) on the CPU with the PTX interpreter of ptxsim_wide.py, on a case that
devspan's planner made (tests/ptx/tiled_sim.rs, rows_sim.rs and gather_sim.rs write them).

A case is a JSON file:

    {"name": ..., "kernel": MODULE, "params": HEX, "threads": N, "grid": G, "dyn_smem": B,
     "regions": [[BASE, HEX], ...], "dst": [BASE, LEN], "expect": HEX}

The tool loads DIR/MODULE.ptx (DIR: the case file's folder), maps the regions (the source's
bytes, the destination poisoned), runs every block of the grid (G blocks, or [GX, GY]; each
looping over several tiles or rows) with `threads` threads, and checks that the destination region equals `expect` byte for
byte: every element written, none twice with another value, nothing else touched. Every
access must be aligned to its width and inside a mapped region (shared memory: inside the
kernel's declarations, and `dyn_smem` bytes of dynamic shared memory where the case gives
them); the interpreter raises otherwise. A kernel with `cp.async` copies runs twice, its
copies landing at the wait that completes them and at once.

Usage: ptxsim_tiled.py CASE.json... ; prints one line per case and exits non-zero on the first
failure.
"""
import json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptxsim_wide import Mem, run_kernel  # noqa: E402


def run_case(path):
    with open(path) as f:
        case = json.load(f)
    folder = os.path.dirname(os.path.abspath(path))
    with open(os.path.join(folder, case["kernel"] + ".ptx")) as f:
        text = f.read()
    # A kernel with cp.async copies runs twice: its copies landing as late as the hardware may
    # land them, then as early.
    for land in (("wait", "issue") if "cp.async" in text else ("wait",)):
        run_once(case, text, land)


def run_once(case, text, land):
    mem = Mem()
    for base, data in case["regions"]:
        for i, b in enumerate(bytes.fromhex(data)):
            mem.d[base + i] = b
    log = []
    params = bytes.fromhex(case["params"])
    # Registers that a predicated-off load left unwritten read as 0 (the kernels pack them,
    # then store nothing): any of it that reached the destination would not match `expect`.
    grid = case["grid"]
    try:
        run_kernel(text, params, mem, (case["threads"], 1),
                   tuple(grid) if isinstance(grid, list) else grid, log, undef=0,
                   dyn_smem=case.get("dyn_smem", 0), async_land=land)
    except AssertionError as e:
        raise SystemExit(f"{case['name']}: {case['kernel']}: {e}") from None
    base, n = case["dst"]
    got = mem.read(base, n)
    want = bytes.fromhex(case["expect"])
    if got != want:
        bad = next(i for i in range(n) if got[i] != want[i])
        raise SystemExit(
            f"{case['name']}: {case['kernel']} (copies landing at {land}): destination byte "
            f"{bad} is {got[bad]:#x}, expected {want[bad]:#x}"
        )
    stores = sum(1 for e in log if e[0] == "st")
    print(f"{case['name']}: {case['kernel']}: {case['threads']} threads x {case['grid']} blocks, "
          f"{stores} global stores, ok")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        run_case(p)
