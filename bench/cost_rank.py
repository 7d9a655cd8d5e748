#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How well a plugin's cost estimate orders its points: runs CONFIG at one thread (so a point's
seconds are its CPU time), reads each point's `cost` (the plugin's estimate, in run.json) and
`seconds`, and prints Spearman's rank correlation, the ratio seconds / cost per point, and the
points the estimate misorders most. The driver dispatches costliest first and `--shard` deals by
this estimate, so a rank correlation near 1 is what matters; the unit is the plugin's own.

  bench/cost_rank.py CONFIG... [--out DIR] [--phaselab build/driver/phaselab]
Several configs of one plugin pool their points (e.g. bench/cost/copy_task_*.toml: one per method).
--cpu runs each point as its own one-point shard (`--shard I/P` with P the point count) and takes
the process's CPU seconds (user + system) instead of the point's wall seconds: on a machine shared
with other work the wall seconds of a point stretch with the load, its CPU seconds do not. The
process adds ~0.07 s (loading the plugin, writing the folder).
"""
import argparse
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb)


def cpu_points(phaselab, cfg, d):
    """Each point of cfg in its own shard process; `seconds` replaced by that process's CPU."""
    plan = subprocess.run([phaselab, "run", cfg, "--plan"], check=True, capture_output=True,
                          text=True).stdout
    n = int(re.search(r"(\d+) points", plan).group(1))
    params = None
    pts = []
    for i in range(n):
        sd = os.path.join(d, f"shard-{i:0{len(str(n - 1))}d}-of-{n}")  # the driver's name
        cpu_file = os.path.join(sd, "cpu_seconds")
        if not os.path.exists(cpu_file):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.check_call([phaselab, "run", cfg, "--out", d, "--shard", f"{i}/{n}",
                                   "--threads", "1", "--quiet"])
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
            with open(cpu_file, "w") as f:
                f.write(f"{cpu}\n")
        cpu = float(open(cpu_file).read())
        rec = json.load(open(os.path.join(sd, "run.json")))
        params = rec["config"].get("params", {})
        done = [p for p in rec["points"] if p["status"] == "ok"]
        if len(done) == 1:
            pts.append({**{k: params[k] for k in ("method", "model") if k in params}, **done[0],
                        "seconds": cpu})
    return pts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config", nargs="+")
    ap.add_argument("--out")
    ap.add_argument("--cpu", action="store_true",
                    help="one process per point, its CPU seconds (for a shared machine)")
    ap.add_argument("--phaselab", default=os.path.join(ROOT, "build", "driver", "phaselab"))
    a = ap.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="cost-rank-")
    pts = []
    for i, cfg in enumerate(a.config):
        d = os.path.join(out, f"{i}-" + os.path.splitext(os.path.basename(cfg))[0])
        if a.cpu:
            pts += cpu_points(a.phaselab, cfg, d)
            continue
        if not os.path.exists(os.path.join(d, "run.json")):
            subprocess.check_call([a.phaselab, "run", cfg, "--out", d, "--threads", "1", "--quiet"])
        rec = json.load(open(os.path.join(d, "run.json")))
        params = rec["config"].get("params", {})
        for p in rec["points"]:
            if p["status"] == "ok":
                pts.append({**{k: params[k] for k in ("method", "model") if k in params}, **p})
    if not pts or "cost" not in pts[0]:
        sys.exit("cost_rank: the plugin has no cost estimate (no `cost` in run.json's points)")
    cost, sec = [p["cost"] for p in pts], [p["seconds"] for p in pts]
    rho = spearman(cost, sec)
    skip = ("index", "status", "seconds", "cost", "rows", "rank")
    scale = sum(sec) / sum(cost)
    print(f"{len(pts)} points, {sum(sec):.1f} s in all; Spearman rank correlation of cost and seconds: {rho:.3f}")
    worst = sorted(pts, key=lambda p: abs(math.log(max(p["seconds"], 1e-9) / (p["cost"] * scale))))[-5:]
    print("largest misestimates (seconds / (cost x mean seconds per cost)):")
    for p in reversed(worst):
        print("  " + " ".join(f"{k}={v}" for k, v in p.items() if k not in skip) +
              f": {p['seconds']:.3f} s, ratio {p['seconds'] / (p['cost'] * scale):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
