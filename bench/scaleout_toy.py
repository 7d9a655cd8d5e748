#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Scale-out side by side: the same toy sweep under one process, `mpirun -n R` and cost-dealt
shards plus `merge`, for one or two phaselab builds (before / after a change), with wall and CPU
seconds (medians of --reps runs) and a check that every layout gives the one-process tables.

The toy test plugin sleeps `sleep_ms` per point (no CPU), so the cases measure dispatch and
writing, not arithmetic, and run on a 2-core machine at the thread counts of a cluster node:
  long96   96 points of 2 s, 64 threads in all (one process x 64, 2 ranks x 32, 2 shards x 32)
  tail     30 points of 0.10-0.13 s and one of 3 s placed last, 4 threads in all (1 x 4, 2 x 2,
           2 shards x 2)
  tiny1000 1000 points of microseconds (the writes dominate), 2 threads in all, in the folder
           given by --dir (ext4, tmpfs, a network disk...)
  empty    one point: the cost of starting each layout (mpirun's launch, the merge)
  tiny20000 20000 points of microseconds: one process x 1, 3 ranks x 1, 16 shards x 1

  bench/scaleout_toy.py --build NAME=BUILD_DIR [--build NAME=BUILD_DIR] [--case long96,tail,...]
                        [--reps 3] [--dir FOLDER] [--json OUT.json]
BUILD_DIR is a meson build tree (driver/phaselab and driver/tests/plugins/toy in it). Figures are
not drawn unless --figures: gnuplot would dominate the tiny cases.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CASES = {
    # name: (sweep TOML, toy table TOML, threads per process in one process / ranks / shards)
    "long96": ("n = [" + ", ".join(str(i) for i in range(1, 97)) + "]", "sleep_ms = 2000",
               {"one": (1, 64), "mpi": (2, 32), "shards": (2, 32)}),
    "tail": ("sleep_ms = [" + ", ".join(str(100 + i) for i in range(30)) + ", 3000]", "",
             {"one": (1, 4), "mpi": (2, 2), "shards": (2, 2)}),
    # tiny points: seeds of one parameter set (sweeping n would make the toy's work grow with n)
    "tiny1000": ("seeds=1000", "", {"one": (1, 2), "mpi": (2, 1), "shards": (2, 1)}),
    # one point: what starting each layout costs (mpirun's launch, a merge)
    "empty": ("n = [1]", "", {"one": (1, 2), "mpi": (2, 1), "shards": (2, 1)}),
    # docs/scale-out.md's bottleneck paragraph: 20000 points, one process, 3 ranks, 16 shards
    "tiny20000": ("seeds=20000", "", {"one": (1, 1), "mpi": (3, 1), "shards": (16, 1)}),
}
TABLES = ["results.csv", "history.csv", "points.csv"]


def timed(cmd, env):
    """Runs cmd; returns (wall s, CPU s of it and its children)."""
    r0 = os.times()
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    r1 = os.times()
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return wall, (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)


def run_layout(exe, env, cfg, out, layout, ranks, threads):
    if layout == "one":
        return timed([exe, "run", cfg, "--out", out, "--threads", str(threads), "--quiet"], env)
    if layout == "mpi":
        return timed(["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                      "-n", str(ranks), exe, "run", cfg, "--out", out, "--threads", str(threads),
                      "--quiet"], env)
    # shards: all at once (as an array would run them), then merge; wall = the slowest + merge
    os.makedirs(out, exist_ok=True)
    r0 = os.times()
    t0 = time.perf_counter()
    procs = [subprocess.Popen([exe, "run", cfg, "--out", out, "--shard",
                               f"{k}/{ranks}", "--threads", str(threads), "--quiet"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for k in range(ranks)]
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            sys.exit(f"a shard failed ({p.returncode}): {err[-2000:]}")
    shards = sorted(f"{out}/{d}" for d in os.listdir(out) if d.startswith("shard-"))
    p = subprocess.run([exe, "merge", out] + shards, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"merge failed: {p.stderr[-2000:]}")
    r1 = os.times()
    return (time.perf_counter() - t0,
            (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system))


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="append", required=True, help="NAME=BUILD_DIR")
    ap.add_argument("--case", default="long96,tail,tiny1000")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the run folders go (default: a temporary folder)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--figures", action="store_true",
                    help="draw the figures (gnuplot; the toy's per-point history figure costs "
                         "O(points^2) in gnuplot, so the default leaves them out)")
    a = ap.parse_args()
    builds = []
    for b in a.build:
        name, _, d = b.partition("=")
        d = os.path.abspath(d)
        builds.append((name, f"{d}/driver/phaselab", f"{d}/driver/tests/plugins/toy"))
    base = tempfile.mkdtemp(prefix="scaleout-toy-", dir=a.dir)
    rows = []
    try:
        for case in a.case.split(","):
            sweep, toy, layouts = CASES[case]
            cfg = f"{base}/{case}.toml"
            with open(cfg, "w") as f:
                if sweep.startswith("seeds="):
                    head, sweep = f"seeds = {sweep[6:]}\n", ""
                else:
                    head, sweep = "seeds = 1\n", f"[sweep]\n{sweep}\n"
                f.write(f'plugin = "toy"\nname = "{case}"\n[run]\n{head}{sweep}'
                        + (f"[toy]\n{toy}\n" if toy else ""))
            ref = None
            for name, exe, plugins in builds:
                env = dict(os.environ, PHASELAB_PLUGIN_PATH=plugins)
                if not a.figures:
                    env["PHASELAB_GNUPLOT"] = "/nonexistent/gnuplot"  # the run says so and goes on
                for layout, (ranks, threads) in layouts.items():
                    walls, cpus, same = [], [], True
                    for rep in range(a.reps):  # interleaving builds per rep would be fairer; the
                        out = f"{base}/{case}-{name}-{layout}-{rep}"  # toy sleeps, so noise is small
                        w, c = run_layout(exe, env, cfg, out, layout, ranks, threads)
                        walls.append(w)
                        cpus.append(c)
                        tabs = [read(f"{out}/{t}") for t in TABLES]
                        if ref is None:
                            ref = tabs
                        same = same and tabs == ref
                        with open(f"{out}/run.json") as f:
                            writes = json.load(f).get("writes", {})
                        shutil.rmtree(out)
                    rows.append({"case": case, "build": name, "layout": layout,
                                 "ranks x threads": f"{ranks} x {threads}",
                                 "wall_s": statistics.median(walls), "wall_min": min(walls),
                                 "wall_max": max(walls), "cpu_s": statistics.median(cpus),
                                 "identical": same, "batches": writes.get("batches"),
                                 "fdatasync": writes.get("fdatasync")})
                    r = rows[-1]
                    print(f"{case:9s} {name:7s} {layout:7s} {r['ranks x threads']:8s} wall {r['wall_s']:6.2f} s "
                          f"[{r['wall_min']:.2f}, {r['wall_max']:.2f}]  cpu {r['cpu_s']:6.2f} s  "
                          f"tables {'identical' if same else 'DIFFER'}"
                          + (f"  writes {r['batches']} batches / {r['fdatasync']} fdatasync"
                             if r["batches"] is not None and layout != "shards" else ""), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
