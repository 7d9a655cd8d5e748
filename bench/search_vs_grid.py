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
    ap.add_argument("--reuse", action="store_true",
                    help="compare the runs already in OUT (and the CPU recorded when they ran)")
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
    def timed(cfg_path, name):
        out = os.path.join(args.out, name)
        if args.reuse:  # the CPU measured when the run was made
            rec = json.load(open(os.path.join(out, "cpu.json")))
            return rec["cpu"], rec["wall"]
        cpu, wall = run(args.phaselab, cfg_path, out, args.threads)
        json.dump({"cpu": cpu, "wall": wall}, open(os.path.join(out, "cpu.json"), "w"))
        return cpu, wall

    cpu_s, wall_s = timed(search_cfg, "search")
    cpu_g, wall_g = timed(grid_cfg, "grid")
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
    # Every boundary the search reports, and whether the grid has one with the same labels in an
    # overlapping bracket (the grid's brackets are between adjacent grid values).
    by_ident = {}
    for r in b:
        ident = tuple(r[k] for k in sweep_keys) + (r["seed"],)
        by_ident.setdefault(ident, []).append(r)
    head = sweep_keys + ["seed", "search boundary", "search bracket", "grid brackets with these labels",
                         "confirmed", "search points", "grid points"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    confirmed = total = 0
    for ident in sorted(set(by_ident) | set(g)):
        grid_b = g.get(ident, [])
        for r in by_ident.get(ident, []):
            if r["lo"] == "":
                same = [x for x in grid_b]
                print("| " + " | ".join(list(ident) + [r["note"], "none", str(len(same)) + " grid brackets",
                                                      "yes" if not same else "NO", str(evals.get(ident, 0)),
                                                      str(len(values))]) + " |")
                total += 1
                confirmed += not same
                continue
            lo, hi = float(r["lo"]), float(r["hi"])
            match = [x for x in grid_b if (x[0], x[1]) == (r["left"], r["right"])]
            ok = any(x[2] <= hi and x[3] >= lo for x in match)
            total += 1
            confirmed += ok
            gl = ", ".join(f"[{x[2]:g}, {x[3]:g}]" for x in match) or "none"
            print("| " + " | ".join(list(ident) + [f"{r['left']} / {r['right']}", f"[{lo:g}, {hi:g}]", gl,
                                                  "yes" if ok else "NO", str(evals.get(ident, 0)),
                                                  str(len(values))]) + " |")
    print(f"search boundaries confirmed by the grid: {confirmed} of {total}")
    if s["column"] == "class":
        # markov_icl: K1* and K2* by the summary's leading-run rule (plugins/markov_common/
        # summary.hpp k_boundaries), applied to the grid's points and to the search's points.
        print()
        print("K1*, K2* by markov_icl's summary rule (leading runs), on each set of points:")
        head = sweep_keys + ["seed", "grid classes (m mem, G gen_then_mem, g gen)", "grid K1*", "search K1*",
                             "agree", "grid K2*", "search K2*", "agree"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        gp = final_labels(os.path.join(args.out, "grid"), key, "class", sweep_keys + [key])
        sp = final_labels(os.path.join(args.out, "search"), key, "class", sweep_keys + [key])
        for ident in sorted(gp):
            gk1, gk2 = leading_runs(gp[ident])
            sk1, sk2 = leading_runs(sp.get(ident, []))
            letters = "".join({"mem": "m", "gen_then_mem": "G", "gen": "g"}.get(c, "?") for _, c in gp[ident])
            def txt(x):
                return f"[{x[0]:g}, {x[1]:g}]" if x else "none"
            def agree(a, c):
                return "yes" if (a and c and a[0] <= c[1] and a[1] >= c[0]) or (not a and not c) else "NO"
            print("| " + " | ".join(list(ident) + [letters, txt(gk1), txt(sk1), agree(gk1, sk1),
                                                  txt(gk2), txt(sk2), agree(gk2, sk2)]) + " |")


def final_labels(out, key, column, keys):
    rows = read(os.path.join(out, "results.csv"))
    per = {}
    for r in rows:
        if "final" in r and r["final"] != "1":
            continue
        ident = tuple(r[k] for k in keys if k != key) + (r["seed"],)
        per.setdefault(ident, []).append((float(r[key]), r[column]))
    return {k: sorted(v) for k, v in per.items()}


def leading_runs(pts):
    """(K1* bracket, K2* bracket): the end of the leading run of mem, of memorising classes."""
    def bracket(pred):
        i = 0
        while i < len(pts) and pred(pts[i][1]):
            i += 1
        return (pts[i - 1][0], pts[i][0]) if 0 < i < len(pts) else None
    return bracket(lambda c: c == "mem"), bracket(lambda c: c in ("mem", "gen_then_mem"))


if __name__ == "__main__":
    main()
