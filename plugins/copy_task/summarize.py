#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Per-P summary of a copy_task run folder (results.csv): one line per (attention, L, V, method,
init, P) with the seed mean of the columns that carry the claims, plus the MAP-branch and
coexistence counts over seeds.

    python3 plugins/copy_task/summarize.py runs/<name>-<timestamp> [--cols cG,objective]
"""
import argparse
import csv
import math
import os
import statistics
from collections import OrderedDict, defaultdict


def num(x):
    try:
        v = float(x)
        return v if math.isfinite(v) else None
    except (TypeError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--cols", default=None, help="comma-separated columns (default depends on method)")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(os.path.join(a.run_dir, "results.csv"))))
    if not rows:
        raise SystemExit("results.csv has no rows")
    # Group by every sweep key (the columns before `seed`) except P, then method and init.
    header = list(rows[0].keys())
    sweep = header[:header.index("seed")] if "seed" in header else []
    keys = [k for k in sweep if k != "P"] + [k for k in ("method", "init") if k in rows[0]]
    groups = OrderedDict()
    for r in rows:
        if r.get("status", "ok") not in ("ok", ""):
            continue
        gk = tuple(r.get(k, "") for k in keys)
        groups.setdefault(gk, defaultdict(list))[num(r["P"])].append(r)
    for gk in sorted(groups, key=lambda g: tuple(str(x) for x in g)):
        method = dict(zip(keys, gk)).get("method", rows[0].get("method", ""))
        cols = a.cols.split(",") if a.cols else (
            ["cG", "abs_cG", "objective", "train_mse", "test_mse", "steps"] if method == "adam"
            else ["cG_mean", "cG_var", "abs_cG_mean", "abs_cG_var", "train_mse", "accept_rate"])
        print("== " + " ".join(f"{k}={v}" for k, v in zip(keys, gk) if v != ""))
        print(f"{'P':>8} {'n':>3} " + " ".join(f"{c:>12}" for c in cols) + "   is_map  coexist  branches")
        for P in sorted(groups[gk]):
            rs = groups[gk][P]
            vals = []
            for c in cols:
                xs = [num(r.get(c)) for r in rs if num(r.get(c)) is not None]
                vals.append(f"{statistics.mean(xs):12.5g}" if xs else f"{'':>12}")
            im = sum(1 for r in rs if r.get("is_map") == "1")
            co = sum(1 for r in rs if r.get("coexist") == "1")
            br = "".join("H" if r.get("branch") == "high" else "l" for r in rs)
            print(f"{P:8g} {len(rs):3d} " + " ".join(vals) + f"   {im:2d}/{len(rs):<3d} {co:2d}/{len(rs):<3d}  {br}")


if __name__ == "__main__":
    main()
