#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A boundary search against the dense grid it replaces, side by side.

Takes a config with a [search] table, derives the grid config of the same final resolution
(the searched key on a grid whose neighbours are at most 1 + rel_tol apart on a log scale,
rel_tol (max - min) apart on a linear one, every integer where that is finer than 1), runs both
with `phaselab run`, measures each process's CPU time (user + system, from wait4), and prints per
seed (and sweep combination) every boundary: the grid's bracket (adjacent grid values whose
labels differ, labelled by the same rule as the search: the column on the point's final row),
the search's bracket, whether they agree (the search's bracket contained in or overlapping the
grid's), and the CPU of each.

    python3 bench/search_vs_grid.py configs/search_markov_K.toml --out /tmp/cmp [--threads 2]
        [--only-sweep lr_mult_l1_qk=1.0] [--markdown]

--only-sweep keeps one value of a sweep key in both runs (the comparison at one setting);
--only-sweep 'seeds=[0, 1]' sets the seeds of both.
"""
import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
import time
import tomllib


def grid_values(s):
    lo, hi, tol = s["min"], s["max"], s.get("rel_tol", 0.2)
    log = s.get("scale", "log") == "log"
    integer = isinstance(lo, int) and isinstance(hi, int)
    vals = [lo]
    if integer:
        v = lo
        while v < hi:
            nxt = math.floor(v * (1 + tol)) if log else math.floor(v + tol * (hi - lo))
            v = min(hi, max(v + 1, nxt))
            vals.append(v)
        return vals
    n = math.ceil(math.log(hi / lo) / math.log(1 + tol)) if log else math.ceil(1 / tol)
    for i in range(1, n + 1):
        t = i / n
        vals.append(lo * (hi / lo) ** t if log else lo + t * (hi - lo))
    return vals


def strip_search(text):
    """The config text without its [search] table (up to the next table header)."""
    out, skip = [], False
    for line in text.splitlines():
        if re.match(r"^\s*\[", line):
            skip = re.match(r"^\s*\[search\]\s*(#.*)?$", line) is not None
        if not skip:
            out.append(line)
    return "\n".join(out) + "\n"


def with_sweep(text, key, values, only):
    """Adds `key = values` to [sweep] (made if absent); --only-sweep values replace theirs."""
    lines = text.splitlines()
    listed = "[" + ", ".join(repr(v) if isinstance(v, int) else format(v, ".17g") for v in values) + "]"
    for k, v in only.items():
        if k == "seeds":
            lines = [f"seeds = {v}" if re.match(r"^\s*seeds\s*=", l) else l for l in lines]
        else:
            lines = [f"{k} = [{v}]" if re.match(rf"^\s*{re.escape(k)}\s*=", l) else l for l in lines]
    for i, l in enumerate(lines):
        if re.match(r"^\s*\[sweep\]", l):
            lines.insert(i + 1, f"{key} = {listed}")
            return "\n".join(lines) + "\n"
    return "\n".join(lines) + f"\n[sweep]\n{key} = {listed}\n"


def only_sweep(text, only):
    lines = text.splitlines()
    if "seeds" in only:
        lines = [f"seeds = {only['seeds']}" if re.match(r"^\s*seeds\s*=", l) else l for l in lines]
    for k, v in only.items():
        if k != "seeds":
            lines = [f"{k} = [{v}]" if re.match(rf"^\s*{re.escape(k)}\s*=", l) else l for l in lines]
    return "\n".join(lines) + "\n"


def run(exe, cfg, out, threads):
    t0 = time.time()
    p = subprocess.Popen([exe, "run", cfg, "--out", out, "--quiet", "--threads", str(threads)])
    _, status, ru = os.wait4(p.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    if rc not in (0, 4):
        sys.exit(f"phaselab run {cfg} exited {rc}")
    return ru.ru_utime + ru.ru_stime, time.time() - t0


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def grid_brackets(out, key, column, sweep_keys, above=None):
    """Per (sweep values, seed): the brackets between adjacent grid values with other labels."""
    rows = read(os.path.join(out, "results.csv"))
    final = {}
    for r in rows:
        ident = tuple(r[k] for k in sweep_keys if k != key) + (r["seed"],)
        if "final" in r and r["final"] != "1":
            continue
        final[ident + (float(r[key]),)] = r[column]
    groups = {}
    for ident_v, lab in final.items():
        if above is not None:
            lab = "above" if float(lab) > above else "below"
        groups.setdefault(ident_v[:-1], []).append((ident_v[-1], lab))
    out_b = {}
    for ident, pts in groups.items():
        pts.sort()
        out_b[ident] = [(a[1], b[1], a[0], b[0]) for a, b in zip(pts, pts[1:]) if a[1] != b[1]]
    return out_b


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config")
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--phaselab", default="build/driver/phaselab")
    ap.add_argument("--only-sweep", action="append", default=[],
                    help="KEY=VALUE: one value of a sweep key; seeds=[0, 1] replaces [run] seeds")
    ap.add_argument("--skip-grid", action="store_true", help="reuse OUT/grid")
    args = ap.parse_args()
    text = open(args.config).read()
    cfg = tomllib.loads(text)
    s = cfg["search"]
    key = s["key"]
    only = dict(kv.split("=", 1) for kv in args.only_sweep)
    os.makedirs(args.out, exist_ok=True)
    search_cfg = os.path.join(args.out, "search.toml")
    grid_cfg = os.path.join(args.out, "grid.toml")
    open(search_cfg, "w").write(only_sweep(text, only))
    values = grid_values(s)
    open(grid_cfg, "w").write(with_sweep(strip_search(text), key, values, only))
    sweep_keys = [k for k in cfg.get("sweep", {})]
    cpu_s, wall_s = run(args.phaselab, search_cfg, os.path.join(args.out, "search"), args.threads)
    if args.skip_grid:
        rec = json.load(open(os.path.join(args.out, "grid", "cpu.json")))
        cpu_g, wall_g = rec["cpu"], rec["wall"]
    else:
        cpu_g, wall_g = run(args.phaselab, grid_cfg, os.path.join(args.out, "grid"), args.threads)
        json.dump({"cpu": cpu_g, "wall": wall_g}, open(os.path.join(args.out, "grid", "cpu.json"), "w"))
    g = grid_brackets(os.path.join(args.out, "grid"), key, s["column"], sweep_keys + [key], s.get("above"))
    b = read(os.path.join(args.out, "search", "boundaries.csv"))
    pts = read(os.path.join(args.out, "search", "search_points.csv"))
    evals = {}
    for p in pts:
        ident = tuple(p[k] for k in sweep_keys) + (p["seed"],)
        evals[ident] = evals.get(ident, 0) + 1
    print(f"grid: {len(values)} values of {key} per search ({values[0]} .. {values[-1]}), "
          f"CPU {cpu_g:.1f} s, wall {wall_g:.1f} s")
    print(f"search: {sum(evals.values())} evaluations in {len(evals)} searches, "
          f"CPU {cpu_s:.1f} s, wall {wall_s:.1f} s; CPU ratio search/grid {cpu_s / cpu_g:.3f}")
    head = sweep_keys + ["seed", "boundary", "grid bracket", "search bracket", "agree",
                         "grid points", "search points"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    agree_all = True
    by_ident = {}
    for r in b:
        ident = tuple(r[k] for k in sweep_keys) + (r["seed"],)
        by_ident.setdefault(ident, []).append(r)
    for ident in sorted(set(by_ident) | set(g)):
        grid_b = g.get(ident, [])
        search_b = [r for r in by_ident.get(ident, []) if r["lo"] != ""]
        n = max(len(grid_b), len(search_b), 1)
        for i in range(n):
            gb = grid_b[i] if i < len(grid_b) else None
            sb = search_b[i] if i < len(search_b) else None
            name = f"{(sb or {}).get('left') or (gb or ['?'])[0]} / {(sb or {}).get('right') or (gb or ['', '?'])[1]}"
            gtxt = f"[{gb[2]:g}, {gb[3]:g}]" if gb else "none"
            stxt = f"[{float(sb['lo']):g}, {float(sb['hi']):g}]" if sb else "none"
            ok = False
            if gb and sb:
                lo, hi = float(sb["lo"]), float(sb["hi"])
                ok = (gb[0], gb[1]) == (sb["left"], sb["right"]) and lo <= gb[3] and hi >= gb[2]
            elif not gb and not sb:
                ok = True
            agree_all = agree_all and ok
            print("| " + " | ".join(list(ident) + [name, gtxt, stxt, "yes" if ok else "NO",
                                                  str(len(values)), str(evals.get(ident, 0))]) + " |")
    print(f"all brackets agree: {'yes' if agree_all else 'no'}")


if __name__ == "__main__":
    main()
