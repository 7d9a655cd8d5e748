#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How far a markov_icl network has memorised, as a number instead of a label.

The phase label (argmin of the KL distances to the four predictors) switches from 2-Gen to 2-Mem
as soon as the network is a little closer to the 2-Mem predictor than to the 2-Gen one; near K2*
the two predictors' losses differ by a few hundredths of a nat, so the switch time is a threshold
on a slowly growing quantity. This script reads a markov_icl run's results.csv and reports, per
(K, seed), the fraction of the Bayes gap recovered on the in-distribution set,

    f(t) = (bayes_2gen_id - loss_id(t)) / (bayes_2gen_id - bayes_2mem_id)

(0: the 2-Gen predictor's loss, 1: the 2-Mem predictor's), its final value, the first checkpoint
from which it stays >= --level (t_f), and the label's switch time (first checkpoint from which
the phase stays at its final value, as markov_icl's summary counts it), and f at half the run's
steps (f_half: where it still differs from the final value, the run has not converged).
A sweep over more than K (d_model, N, ...: every column before `step` other than K and seed) is
reported cell by cell, never pooled. Per K: medians over seeds (a time: over the seeds that got there, if at least half did).
Fits, for both times over the K where they have a median: a power law t ~ K^p, and
t ~ (K2* - K)^-gamma with K2* free (scanned from just above the largest K to 3x it; a best fit at
the scan's edge means no finite K2* fits).

  scripts/memorisation.py RUN_DIR [--level 0.5] [--budget B] [--csv OUT.csv] [--runs R.csv]
                          [--curves F.csv] [--front F.csv]
"""
import argparse
import csv
import math
import statistics
import sys
from collections import defaultdict


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return math.nan


def cell_columns(header):
    """The sweep columns other than K and seed: those before `step`."""
    if "step" not in header:
        sys.exit("memorisation: results.csv has no step column (not a markov_icl run?)")
    return [c for c in header[:header.index("step")] if c not in ("K", "seed")]


def per_run(rows, level, cells=(), budget=None):
    """(cell, K, seed) -> dict(f_final, f_half, t_f, t_label, phase_final); cell is the tuple of
    the values of the other sweep columns. With a budget, each run is read as if it had stopped
    there (checkpoints after it dropped), and runs that ended before it are left out."""
    by = defaultdict(list)
    for r in rows:
        by[(tuple(r[c] for c in cells), num(r["K"]), int(r["seed"]))].append(r)
    out = {}
    for key, rs in by.items():
        rs.sort(key=lambda r: num(r["step"]))
        if budget is not None:
            if num(rs[-1]["step"]) < budget:
                continue
            rs = [r for r in rs if num(r["step"]) <= budget]
        f = []
        for r in rs:
            gap = num(r["bayes_2gen_id"]) - num(r["bayes_2mem_id"])
            f.append((num(r["bayes_2gen_id"]) - num(r["loss_id"])) / gap if gap > 0 else math.nan)
        t_f = math.nan
        for i in range(len(rs)):
            if all(x >= level for x in f[i:]):
                t_f = num(rs[i]["step"])
                break
        last = rs[-1]["phase"]
        i = len(rs) - 1
        while i > 0 and rs[i - 1]["phase"] == last:
            i -= 1
        t_label = num(rs[i]["step"]) if last == "2mem" else math.nan
        half = num(rs[-1]["step"]) / 2
        i_half = min(range(len(rs)), key=lambda i: abs(num(rs[i]["step"]) - half))
        curve = [(num(r["step"]), x) for r, x in zip(rs, f)]
        out[key] = {"f_final": f[-1], "f_half": f[i_half], "f_slope": late_slope(curve), "t_f": t_f,
                    "curve": curve, "t_label": t_label, "phase_final": last,
                    "gap": num(rs[-1]["bayes_2gen_id"]) - num(rs[-1]["bayes_2mem_id"])}
    return out


def linfit(x, y):
    """Least-squares line y = a + b x: (b, rms residual); b is nan when x does not vary."""
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxx = sum((u - mx) ** 2 for u in x)
    if sxx <= 0:
        return math.nan, math.nan
    b = sum((u - mx) * (v - my) for u, v in zip(x, y)) / sxx
    return b, math.sqrt(sum((v - my - b * (u - mx)) ** 2 for u, v in zip(x, y)) / len(x))


def loglog(x, y):
    """log y = a + p log x: (p, rms of log y)."""
    return linfit([math.log(u) for u in x], [math.log(v) for v in y])


def semilog(K, t):
    """log t = a + K / K0: (K0, rms of log t)."""
    b, rms = linfit(K, [math.log(v) for v in t])
    return (1 / b if b else math.inf), rms


def free_k2(K, t):
    """Best (rms, K2*, gamma) of log t = a - gamma log(K2* - K), K2* scanned over (max K, 3 max K]."""
    best = None
    for i in range(1, 400):
        k2 = max(K) * (1 + 2.0 * i / 400)
        p, rms = loglog([k2 - k for k in K], t)
        if best is None or rms < best[0]:
            best = (rms, k2, -p)
    return best


def late_slope(curve, frac=4.0):
    """df / dlog10(t), least squares over the checkpoints with t >= t_last / frac: how fast f still
    rises at the end of the run, per decade of steps (0 once it has converged); nan with fewer than
    3 such checkpoints."""
    t_last = curve[-1][0]
    pts = [(math.log10(t), f) for t, f in curve if t >= t_last / frac and t > 0 and math.isfinite(f)]
    return linfit([x for x, _ in pts], [y for _, y in pts])[0] if len(pts) >= 3 else math.nan


def crossing(Ks, fs, level):
    """The K where f (against K, in order) first falls below level, interpolated linearly between
    the two bracketing K; nan if it never falls below, or starts below."""
    for i in range(1, len(Ks)):
        if fs[i - 1] >= level > fs[i]:
            return Ks[i - 1] + (fs[i - 1] - level) / (fs[i - 1] - fs[i]) * (Ks[i] - Ks[i - 1])
    return math.nan


def per_seed(runs, cell, level):
    """Each seed's K2* (where its f at the end falls below level, interpolated between the scan's K)
    and gamma of log t_f = c - gamma log(K2* - K) over its K below K2* that crossed the level."""
    seeds = sorted({k[2] for k in runs if k[0] == cell})
    out = []
    for s in seeds:
        ks = sorted(k[1] for k in runs if k[0] == cell and k[2] == s)
        rs = [runs[(cell, K, s)] for K in ks]
        row = {"seed": s, "k2_final": crossing(ks, [r["f_final"] for r in rs], level),
               "gamma": math.nan, "n": 0}
        k2 = row["k2_final"]
        pts = [(K, r["t_f"]) for K, r in zip(ks, rs) if math.isfinite(k2) and K < k2 and math.isfinite(r["t_f"])]
        if len(pts) >= 3:
            p, rms = loglog([k2 - K for K, _ in pts], [t for _, t in pts])
            row.update(gamma=-p, rms=rms, n=len(pts))
        out.append(row)
    return out


def at(curve, t):
    """f at step t: the checkpoint's value, else linear in log t between the two around it."""
    for (t0, f0), (t1, f1) in zip(curve, curve[1:]):
        if t0 == t:
            return f0
        if t0 < t < t1:
            if t0 <= 0:
                return f0 + (f1 - f0) * (t - t0) / (t1 - t0)
            return f0 + (f1 - f0) * math.log(t / t0) / math.log(t1 / t0)
    return curve[-1][1] if curve and curve[-1][0] == t else math.nan


def front(runs, cell, level):
    """The memorisation front: per seed and checkpoint step, the K where f at that step falls
    below level (crossing() over the scan's K), at every checkpoint step of any of the seed's K up
    to the last step all of them reached (a K without a checkpoint there: linear in log t).
    [(seed, step, K2*)] and, per seed, the power b of K2*(t) ~ t^b over the second half (in log t)
    of the steps where K2* is finite."""
    rows, fits = [], {}
    for s in sorted({k[2] for k in runs if k[0] == cell}):
        ks = sorted(k[1] for k in runs if k[0] == cell and k[2] == s)
        curves = [runs[(cell, K, s)]["curve"] for K in ks]
        end = min(c[-1][0] for c in curves)  # every K of the seed was evaluated up to here
        steps = sorted({t for c in curves for t, _ in c if t <= end})
        pts = []
        for t in steps:
            k2 = crossing(ks, [at(c, t) for c in curves], level)
            rows.append((s, t, k2))
            if math.isfinite(k2) and t > 0:
                pts.append((t, k2))
        if len(pts) >= 3:
            lo = math.log(pts[0][0]) + (math.log(pts[-1][0]) - math.log(pts[0][0])) / 2
            late = [(t, k) for t, k in pts if math.log(t) >= lo - 1e-9]
            if len(late) >= 3:
                fits[s] = loglog([t for t, _ in late], [k for _, k in late])
    return rows, fits


def report(runs, cell, cells, level):
    """One cell's table and fits, printed; its lines for the csv."""
    Ks = sorted({k[1] for k in runs if k[0] == cell})
    lines = []
    print(f"K      seeds  gap (nats)  f final (median, min-max)  f half   df/dec  t_f (f >= {level:g}, median)   "
          "t_label (median)  labels")
    for K in Ks:
        rs = [runs[k] for k in sorted(runs) if k[0] == cell and k[1] == K]
        ff = [r["f_final"] for r in rs]
        tf = [r["t_f"] for r in rs]
        tl = [r["t_label"] for r in rs]
        def med(v):  # over the seeds that got there, if at least half did
            got = [x for x in v if math.isfinite(x)]
            return statistics.median(got) if got and 2 * len(got) >= len(v) else math.nan
        line = dict(zip(cells, cell))
        line.update({"K": K, "seeds": len(rs), "gap": statistics.median(r["gap"] for r in rs),
                     "f_final": statistics.median(ff), "f_min": min(ff), "f_max": max(ff),
                     "f_half": statistics.median(r["f_half"] for r in rs),
                     "f_slope": statistics.median(r["f_slope"] for r in rs),
                     "t_f": med(tf), "t_label": med(tl),
                     "labels": "".join("m" if r["phase_final"] == "2mem" else r["phase_final"][0] for r in rs)})
        lines.append(line)
        print(f"{K:<6g} {len(rs):<6d} {line['gap']:<11.4f} {line['f_final']:.2f} ({line['f_min']:.2f}-{line['f_max']:.2f})"
              f"{'':14s}{line['f_half']:<8.2f} {line['f_slope']:<7.3f} {line['t_f']:<30.0f} {line['t_label']:<17.0f} {line['labels']}")
    for name in ("t_f", "t_label"):
        pts = [(l["K"], l[name]) for l in lines if math.isfinite(l[name])]
        if len(pts) < 3:
            print(f"{name}: fewer than 3 K with a median; no fit")
            continue
        K, t = [p[0] for p in pts], [p[1] for p in pts]
        p, rms_p = loglog(K, t)
        rms, k2, g = free_k2(K, t)
        edge = k2 >= max(K) * 2.9
        k0, rms_e = semilog(K, t)
        print(f"{name}: {len(K)} K ({min(K):g}-{max(K):g}); t ~ K^{p:.2f} (rms {rms_p:.3f}); "
              f"t ~ exp(K / {k0:.3g}) (rms {rms_e:.3f}); "
              + (f"(K2* - K)^-gamma: no finite K2* fits (best at the scan's edge, rms {rms:.3f})" if edge
                 else f"(K2* - K)^-gamma: gamma {g:.2f} at K2* {k2:.1f} (rms {rms:.3f})"))
    for row in per_seed(runs, cell, level):
        print(f"seed {row['seed']}: K2* (f at the end < {level:g}) {row['k2_final']:.2f}; "
              + (f"gamma {row['gamma']:.2f} over {row['n']} K (rms {row['rms']:.3f})"
                 if row["n"] else "gamma: fewer than 3 K below K2*"))
    rows, fits = front(runs, cell, level)
    for seed, (b, rms) in sorted(fits.items()):
        last = [k for sd, t, k in rows if sd == seed and math.isfinite(k)]
        print(f"seed {seed}: front K2*(t) (f >= {level:g} below it) reaches {last[-1]:.2f} at the last step; "
              f"K2* ~ t^{b:.2f} over the later half of the steps (rms {rms:.3f}; a front that stops moving fits ~0)")
    return lines, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    ap.add_argument("--level", type=float, default=0.5)
    ap.add_argument("--budget", type=float, default=None,
                    help="read every run as if it had stopped at this step (runs that ended earlier are left out)")
    ap.add_argument("--csv", default=None, help="the per-K table")
    ap.add_argument("--runs", default=None,
                    help="one row per run: the sweep columns, K, seed, f_final, f_half, f_slope, t_f, t_label, phase")
    ap.add_argument("--front", default=None,
                    help="the memorisation front: the sweep columns, seed, step, K2* (for phaselab plot)")
    ap.add_argument("--curves", default=None,
                    help="f at every checkpoint: the sweep columns, K, seed, step, f (for phaselab plot)")
    a = ap.parse_args()
    with open(f"{a.run}/results.csv", newline="") as f:
        reader = csv.DictReader(f)
        cells = cell_columns(reader.fieldnames)
        rows = list(reader)
    runs = per_run(rows, a.level, cells, a.budget)
    if not runs:
        sys.exit(f"memorisation: no run reached the budget of {a.budget:g} steps")
    lines, fronts = [], []
    for cell in sorted({k[0] for k in runs}, key=lambda c: [num(v) if math.isfinite(num(v)) else v for v in c]):
        if cells:
            print(" ".join(f"{c} = {v}" for c, v in zip(cells, cell)))
        got, fr = report(runs, cell, cells, a.level)
        lines += got
        fronts += [list(cell) + [seed, f"{t:g}", f"{k:.6g}"] for seed, t, k in fr]
    if a.runs:
        with open(a.runs, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cells + ["K", "seed", "f_final", "f_half", "f_slope", "t_f", "t_label", "phase"])
            for (cell, K, seed), r in sorted(runs.items()):
                w.writerow(list(cell) + [f"{K:g}", seed] + [f"{r[k]:.6g}" for k in ("f_final", "f_half", "f_slope")]
                           + [f"{r['t_f']:g}", f"{r['t_label']:g}", r["phase_final"]])
    if a.front:
        with open(a.front, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cells + ["seed", "step", "k2"])
            w.writerows(fronts)
    if a.curves:
        with open(a.curves, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cells + ["K", "seed", "step", "f"])
            for (cell, K, seed), r in sorted(runs.items()):
                for step, x in r["curve"]:
                    w.writerow(list(cell) + [f"{K:g}", seed, f"{step:g}", f"{x:.6g}"])
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(lines[0]))
            w.writeheader()
            w.writerows(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
