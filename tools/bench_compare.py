#!/usr/bin/env python3
"""Compares the bandwidth bench's JSON of two builds (or steerings) row by row.

Usage, with the JSON of `bench-bandwidth --bench GROUP...` (`DEVSPAN_BENCH_JSON`) of each run,
measured on one machine, best in one command:

    python3 tools/bench_compare.py BASE.json NEW.json [STEERED.json]

Prints each row that both runs hold: its ratio to a device copy in BASE, in STEERED (when
given: the base build under `DEVSPAN_BENCH_STEER`, say) and in NEW, and the paths of BASE and
NEW. Rows whose path differs are marked `*`; for them it prints how many there are, the
geometric mean and the lowest of NEW / BASE, and how many are more than 1% slower. With
STEERED, rows that keep their path in NEW but run more than 1% faster steered are marked `+`
and listed.
"""

import json
import math
import sys


def load(path):
    with open(path) as f:
        return {(r["group"], r["name"]): r for r in json.load(f)["rows"]}


def main(argv):
    if len(argv) not in (3, 4):
        print("\n\n".join(__doc__.strip().split("\n\n")[1:3]), file=sys.stderr)
        return 2
    base, new = load(argv[1]), load(argv[2])
    steered = load(argv[3]) if len(argv) == 4 else {}
    changed, missed = [], []
    print(f"{'group':<12} {'row':<56} {'base':>6} {'steer':>6} {'new':>6}  paths (base/new)")
    for key, b in base.items():
        n = new.get(key)
        if n is None:
            continue
        s = steered.get(key)
        mark = ""
        if n["path"] != b["path"]:
            changed.append((key, b["ratio"], n["ratio"]))
            mark = " *"
        elif s and s["path"] != b["path"] and s["ratio"] > b["ratio"] * 1.01:
            missed.append((key, b["ratio"], s["ratio"], s["path"]))
            mark = " +"
        sr = f"{s['ratio']:6.3f}" if s else f"{'':>6}"
        print(
            f"{key[0][:12]:<12} {key[1][:56]:<56} {b['ratio']:6.3f} {sr} {n['ratio']:6.3f}"
            f"  {b['path']}/{n['path']}{mark}"
        )
    if changed:
        gains = [nr / br for _, br, nr in changed]
        worst = min(range(len(changed)), key=lambda i: gains[i])
        geo = math.exp(sum(math.log(g) for g in gains) / len(gains))
        print(
            f"rows on another path: {len(changed)}, new/base geomean {geo:.4f}, "
            f"lowest {gains[worst]:.4f} ({changed[worst][0][1]}), "
            f"more than 1% slower: {sum(1 for g in gains if g < 0.99)}"
        )
    else:
        print("rows on another path: 0")
    if steered:
        print(f"rows faster by more than 1% steered, on the same path in new: {len(missed)}")
        for key, br, sr, path in missed:
            print(f"   {key[1]}: {br:.3f} -> {sr:.3f} ({path})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
