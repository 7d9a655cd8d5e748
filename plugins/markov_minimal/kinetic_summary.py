#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""K1* and K2* per layer-1 query/key learning-rate multiplier, from a markov_icl run folder
(configs/markov_kinetic.toml): reads RUN_DIR/summary.csv (written by markov_icl at the end of
the run: per point and seed the final phase, the class and the phase path) and prints, per
multiplier and seed, the brackets

  K1* (kinetic): the largest grid K that memorised without a 2-Gen phase first (class "mem") vs
                 the next grid K, which went through 2-Gen (class "gen" or "gen_then_mem");
  K2*          : the largest memorising K (final phase a Mem one) vs the next K, which ends in a
                 Gen phase;

each with the geometric mean of the bracket, then per multiplier the seed mean of log2 and the
spread. Without summary.csv (a run stopped early) the classes come from results.csv by the same
rule, for the runs that finished. Non-monotone sequences of classes are reported as such. Writes RUN_DIR/kinetic_summary.csv
and, with gnuplot installed, RUN_DIR/figures/k1_vs_multiplier.png.

    python3 plugins/markov_minimal/kinetic_summary.py [--out DIR] RUN_DIR [MORE_RUN_DIRS...]

Several folders are merged (the outputs go to --out, default the first folder); a run (K,
multiplier, seed) found in several folders is taken from the last one that has it.
"""
import csv
import math
import os
import shutil
import subprocess
import sys
from collections import defaultdict


def bracket(seq, lower_ok):
    """seq: [(K, cls)] sorted by K. The last K of the leading run where lower_ok(cls) holds, and
    the next K; None if the run is empty or covers the whole grid."""
    lo = None
    for i, (K, c) in enumerate(seq):
        if lower_ok(c):
            lo = i
        else:
            break
    if lo is None or lo + 1 >= len(seq):
        return None
    return seq[lo][0], seq[lo + 1][0]


def monotone(seq, lower_ok):
    flags = [lower_ok(c) for _, c in seq]
    return all(not (not a and b) for a, b in zip(flags, flags[1:]))


def classes_from_results(path):
    """The markov_icl summary's class per run from results.csv (for a run stopped before its
    summary was written): stable segments are runs of >= 2 checkpoints with the same label, or
    the last run; "gen_then_mem" if a stable 2-Gen segment precedes the first stable 2-Mem one
    and the final label is a Mem one, "mem" for other memorising runs, else "gen". Only runs
    whose final row (final = 1) is present are kept."""
    hist = defaultdict(list)
    final = set()
    for r in csv.DictReader(open(path)):
        key = (r["K"], r["lr_mult_l1_qk"], r["seed"])
        hist[key].append(r["phase"])
        if r["final"] == "1":
            final.add(key)
    out = []
    for key, ph in hist.items():
        if key not in final:
            continue
        seg, i = [], 0
        while i < len(ph):
            j = i
            while j + 1 < len(ph) and ph[j + 1] == ph[i]:
                j += 1
            if (j > i or j + 1 == len(ph)) and (not seg or seg[-1] != ph[i]):
                seg.append(ph[i])
            i = j + 1
        gen_first, seen_mem = False, False
        for lab in seg:
            seen_mem = seen_mem or lab == "2mem"
            if lab == "2gen" and not seen_mem:
                gen_first = True
        mem = ph[-1] in ("2mem", "1mem", "hybrid")
        cls = ("gen_then_mem" if gen_first else "mem") if mem else "gen"
        out.append({"K": key[0], "lr_mult_l1_qk": key[1], "seed": key[2], "class": cls,
                    "path": ">".join(seg)})
    return out


def main():
    args = sys.argv[1:]
    run = None
    if len(args) >= 2 and args[0] == "--out":
        run, args = args[1], args[2:]
        os.makedirs(run, exist_ok=True)
    if not args:
        sys.exit(__doc__)
    run = run or args[0]
    latest = {}
    for d in args:  # several folders (e.g. parts of one grid) are merged
        summary = os.path.join(d, "summary.csv")
        if os.path.exists(summary):
            part = list(csv.DictReader(open(summary)))
        else:
            print(f"{d}: no summary.csv (stopped early?): classes from results.csv, finished runs")
            part = classes_from_results(os.path.join(d, "results.csv"))
        for r in part:
            key = (float(r["K"]), float(r["lr_mult_l1_qk"]), int(r["seed"])) \
                if "lr_mult_l1_qk" in r else len(latest)
            if key in latest:
                print(f"{d}: K {r['K']} mult {r['lr_mult_l1_qk']} seed {r['seed']} replaces the "
                      "earlier folder's run")
            latest[key] = r
    rows = list(latest.values())
    if not rows or "lr_mult_l1_qk" not in rows[0]:
        sys.exit("summary.csv needs K and lr_mult_l1_qk columns (configs/markov_kinetic.toml)")
    by = defaultdict(list)
    paths = {}
    for r in rows:
        by[(float(r["lr_mult_l1_qk"]), int(r["seed"]))].append((float(r["K"]), r["class"]))
        paths[(float(r["lr_mult_l1_qk"]), int(r["seed"]), float(r["K"]))] = r.get("path", "")
    k1 = defaultdict(list)
    k2 = defaultdict(list)
    out = [["lr_mult_l1_qk", "seed", "classes", "k1_lo", "k1_hi", "k2_lo", "k2_hi", "monotone"]]
    print("per multiplier and seed: classes by K (m = mem, g = gen, G = gen_then_mem)")
    for (m, s), seq in sorted(by.items()):
        seq.sort()
        code = "".join({"mem": "m", "gen": "g", "gen_then_mem": "G"}.get(c, "?") for _, c in seq)
        b1 = bracket(seq, lambda c: c == "mem")
        b2 = bracket(seq, lambda c: c != "gen")
        mono = monotone(seq, lambda c: c == "mem") and monotone(seq, lambda c: c != "gen")
        if b1:
            k1[m].append(math.sqrt(b1[0] * b1[1]))
        if b2:
            k2[m].append(math.sqrt(b2[0] * b2[1]))
        fmt = lambda b: f"[{b[0]:g}, {b[1]:g}]" if b else "not bracketed"
        print(f"  mult {m:g} seed {s}: K {' '.join(f'{K:g}' for K, _ in seq)} -> {code}; "
              f"K1* {fmt(b1)}, K2* {fmt(b2)}{'' if mono else ' (non-monotone)'}")
        out.append([m, s, code, *(b1 or ("", "")), *(b2 or ("", "")), int(mono)])
        for K, _ in seq:
            print(f"      K {K:g}: {paths[(m, s, K)]}")
    print("\nper multiplier: geometric mean of the seed estimates [min, max] (seeds bracketed)")
    fig = {}
    for m in sorted({m for m, _ in by}):
        n = len([1 for (mm, _) in by if mm == m])
        line = f"  mult {m:g}:"
        for name, d in (("K1*", k1), ("K2*", k2)):
            v = d.get(m, [])
            if v:
                g = 2 ** (sum(math.log2(x) for x in v) / len(v))
                line += f" {name} {g:.3g} [{min(v):.3g}, {max(v):.3g}] ({len(v)}/{n})"
                fig.setdefault(m, {})[name] = (g, min(v), max(v))
            else:
                line += f" {name} not bracketed (0/{n})"
        print(line)
    with open(os.path.join(run, "kinetic_summary.csv"), "w", newline="") as f:
        csv.writer(f).writerows(out)
    if fig and shutil.which("gnuplot"):
        d = os.path.join(run, "figures")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "k1_vs_multiplier.dat"), "w") as f:
            f.write("# multiplier K1*_mean K1*_min K1*_max K2*_mean K2*_min K2*_max\n")
            for m, e in sorted(fig.items()):
                row = [m]
                for name in ("K1*", "K2*"):
                    row += e.get(name, ("NaN", "NaN", "NaN"))
                f.write(" ".join(str(x) for x in row) + "\n")
        with open(os.path.join(d, "k1_vs_multiplier.gp"), "w") as f:
            f.write(
                "set terminal pngcairo size 800,560 noenhanced\n"
                "set output 'k1_vs_multiplier.png'\n"
                "set logscale xy 2\nset xlabel 'lr_mult_l1_qk (layer-1 query/key learning rate)'\n"
                "set ylabel 'K'\nset key top right\n"
                "set title 'K1* (kinetic) and K2* vs the layer-1 QK multiplier: seed mean, range'\n"
                "plot 'k1_vs_multiplier.dat' u 1:2:3:4 w yerrorlines lw 2 t 'K1*', "
                "'' u ($1*1.06):5:6:7 w yerrorlines dt 2 t 'K2*'\n")
        subprocess.run(["gnuplot", "k1_vs_multiplier.gp"], cwd=d, check=False)
        print(f"\nfigure: {os.path.join(d, 'k1_vs_multiplier.png')}")


if __name__ == "__main__":
    main()
