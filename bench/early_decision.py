#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How often would ending a markov_icl point early have changed its label?

A boundary search labels a point by markov_icl's class on its final row (mem, gen_then_mem,
gen: plugins/markov_common/summary.hpp `analyse`). Ending a point once its class "can no longer
change" would save CPU, but only a rule measured never (or almost never) to change a label is
worth shipping. This script replays finished runs: for each point and each candidate rule it
finds the first checkpoint where the rule fires, computes the class from the phase history up to
that checkpoint (the same rule as the plugin: stable segments of >= 2 checkpoints, or the last
run), and compares it with the class of the whole run. It prints, per rule, the points where it
fired, how many of those changed class, and the training steps it would have saved.

    python3 bench/early_decision.py RUN_DIR [RUN_DIR ...]

Rules (each fires at the first checkpoint i >= 2 where it holds):
  mem_stable_N     the last N checkpoints are all 2mem (a stable 2-Mem phase);
  gen_stable_N     the last N checkpoints are all 2gen;
  label_stable_N   the class computed so far has not changed for N checkpoints.
"""
import csv
import math
import sys


def is_mem(p):
    return p in ("2mem", "1mem", "hybrid")


def segments(phases):
    seg, i = [], 0
    while i < len(phases):
        j = i
        while j + 1 < len(phases) and phases[j + 1] == phases[i]:
            j += 1
        if j > i or j + 1 == len(phases):
            if not seg or seg[-1] != phases[i]:
                seg.append(phases[i])
        i = j + 1
    return seg


def classify(phases):
    gen2_before_mem = seen_mem = False
    for lab in segments(phases):
        seen_mem = seen_mem or lab == "2mem"
        if lab == "2gen" and not seen_mem:
            gen2_before_mem = True
    final = phases[-1]
    return ("gen_then_mem" if gen2_before_mem else "mem") if is_mem(final) else "gen"


def points(run):
    pts = {}
    with open(f"{run}/results.csv", newline="") as f:
        for r in csv.DictReader(f):
            key = tuple((k, r[k]) for k in r if k not in RESULT_COLS)
            pts.setdefault(key, []).append((int(r["step"]), r["phase"], r.get("class", "")))
    return pts


RESULT_COLS = set("""step loss_train loss_id loss_ood bayes_2mem_id bayes_2gen_ood bayes_2gen_id
kl_2gen_id kl_1gen_id kl_2mem_id kl_1mem_id kl_hybrid_id kl_2gen_ood kl_1gen_ood kl_2mem_ood
kl_1mem_ood kl_hybrid_ood kl_2gen_id_late kl_1gen_id_late kl_2mem_id_late kl_1mem_id_late
kl_hybrid_id_late phase phase_code phase_late phase_ood final class search_round""".split())


def main():
    runs = sys.argv[1:]
    if not runs:
        sys.exit(__doc__)
    rules = {}
    for n in (2, 3, 4, 6):
        rules[f"mem_stable_{n}"] = lambda ph, hist, n=n: len(ph) >= n and all(p == "2mem" for p in ph[-n:])
        rules[f"gen_stable_{n}"] = lambda ph, hist, n=n: len(ph) >= n and all(p == "2gen" for p in ph[-n:])
        rules[f"label_stable_{n}"] = lambda ph, hist, n=n: len(hist) >= n and len(set(hist[-n:])) == 1
    stats = {k: [0, 0, 0.0, 0.0] for k in rules}  # fired, changed, steps saved, steps total
    n_points = 0
    for run in runs:
        for key, rows in points(run).items():
            rows.sort()
            steps = [s for s, _, _ in rows]
            phases = [p for _, p, _ in rows]
            full = classify(phases)
            if rows[-1][2] and rows[-1][2] != full:
                sys.exit(f"{run}: {key}: class column {rows[-1][2]} != recomputed {full}")
            n_points += 1
            hist = []
            fired = {}
            for i in range(len(phases)):
                hist.append(classify(phases[: i + 1]))
                for name, rule in rules.items():
                    if name not in fired and i >= 2 and i + 1 < len(phases) and rule(phases[: i + 1], hist):
                        fired[name] = i
            for name, i in fired.items():
                st = stats[name]
                st[0] += 1
                st[1] += hist[i] != full
                st[2] += steps[-1] - steps[i]
            for st in stats.values():
                st[3] += steps[-1]
    print(f"{n_points} points from {len(runs)} run(s)")
    print("| rule | fired on | label changed | training steps saved |")
    print("|---|---|---|---|")
    for name, (fired, changed, saved, total) in stats.items():
        print(f"| {name} | {fired} | {changed} ({100 * changed / max(fired, 1):.1f}%) | "
              f"{100 * saved / max(total, 1):.1f}% |")


if __name__ == "__main__":
    main()
