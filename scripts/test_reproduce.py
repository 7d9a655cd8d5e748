#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Tests of scripts/reproduce.py (meson suite `reproduce`):
- docs/reproduction.md is the script's table (same claims, in order, each verdict valid, every
  contradicted or open claim explained, every figure present): `--check-doc`;
- the config writer: a shipped config with overrides reads back (tomllib) as the overrides say,
  and `phaselab check` accepts every --quick and --full config the script writes;
- an end-to-end --quick run of the theory-only claims (c3, c3b, c4: seconds) writes
  reproduction.csv with a verdict, a measured value, a figure and the CPU of each claim, and the
  numbers it reports are recomputed here from the run's own tables;
- --full without --yes prints its CPU-hour estimate and runs nothing;
- scripts/memorisation.py (m6's memorised fraction) on tables worked out by hand, per sweep cell.
Writes "reproduce P F 0" to $PHASELAB_TEST_COUNTS (the README test command's tally)."""
import csv
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXE = os.environ.get("PHASELAB_EXE", os.path.join(ROOT, "build", "driver", "phaselab"))
spec = importlib.util.spec_from_file_location("reproduce", os.path.join(ROOT, "scripts", "reproduce.py"))
rp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rp)

passed = failed = 0


def case(name):
    def deco(fn):
        global passed, failed
        try:
            fn()
            passed += 1
            print(f"ok   {name}")
        except Exception as e:  # report and go on
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}")
        return fn
    return deco


def script(*args, **kw):
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "reproduce.py"), *args],
                          capture_output=True, text=True, **kw)


@case("docs/reproduction.md agrees with the script (--check-doc)")
def _():
    r = script("--check-doc")
    assert r.returncode == 0, r.stdout + r.stderr


@case("--check-doc fails on a doc whose claims differ")
def _():
    doc = open(rp.DOC).read()
    first = next(l for l in doc.splitlines() if l.startswith("| c1 |"))
    try:
        open(rp.DOC, "w").write(doc.replace(first + "\n", ""))
        r = script("--check-doc")
        assert r.returncode == 1 and "are not the script's" in r.stdout, r.stdout
    finally:
        open(rp.DOC, "w").write(doc)


@case("overrides: set, move between sweep and plugin table, remove a table")
def _():
    base = tomllib.load(open(os.path.join(ROOT, "configs", "search_copy_P.toml"), "rb"))
    cfg = rp.with_overrides(base, {"search": None, "sweep.P": [4, 8], "copy_task.L": 32,
                                   "sweep.L": None, "run.seeds": [5], "copy_task.sw2": 0.5})
    back = tomllib.loads(rp.toml_dump(cfg, "# header"))
    assert "search" not in back
    assert back["sweep"] == {"P": [4, 8]}, back["sweep"]
    assert back["copy_task"]["L"] == 32 and back["copy_task"]["sw2"] == 0.5
    assert back["run"]["seeds"] == [5]
    assert back["copy_task"]["attention"] == "softmax"  # untouched keys stay
    # a key set in the plugin table leaves the sweep, and the other way round
    c2 = rp.with_overrides(base, {"copy_task.L": 8})
    assert "L" not in c2["sweep"] and c2["copy_task"]["L"] == 8
    c3 = rp.with_overrides(base, {"sweep.V": [4, 8]})
    assert "V" not in c3["copy_task"] and c3["sweep"]["V"] == [4, 8]
    assert rp.toml_value(1e16) == "1e+16" and rp.toml_value(3.0) == "3.0" and rp.toml_value(True) == "true"


@case("every --quick and --full config passes `phaselab check`")
def _():
    with tempfile.TemporaryDirectory() as d:
        for mode in ("quick", "full"):
            ctx = rp.Ctx(os.path.join(d, mode), mode, EXE, 0)
            for name in rp.RUNS:
                p = ctx.write_config(name)
                if p is None:
                    continue
                r = subprocess.run([EXE, "check", p], capture_output=True, text=True)
                assert r.returncode == 0, f"{mode} {name}: {r.stdout}{r.stderr}"


@case("every claim names runs that exist, and the claim ids are unique")
def _():
    ids = [c[0] for c in rp.CLAIMS]
    assert len(ids) == len(set(ids)), ids
    for cid, _, _, runs, _ in rp.CLAIMS:
        assert runs and all(r in rp.RUNS for r in runs), (cid, runs)


@case("--quick --only c3,c3b,c4: verdicts, measured values recomputed from the tables")
def _():
    with tempfile.TemporaryDirectory() as d:
        r = script("--quick", "--only", "c3,c3b,c4", "--out", d, "--phaselab", EXE)
        assert r.returncode == 0, r.stdout + r.stderr
        rows = {x["id"]: x for x in csv.DictReader(open(os.path.join(d, "reproduction.csv")))}
        assert list(rows) == ["c3", "c3b", "c4"], list(rows)
        for x in rows.values():
            assert x["verdict"] in rp.VERDICTS, x
            assert x["figure"].endswith(".png") and os.path.exists(os.path.join(d, x["figure"])), x
            assert float(x["cpu_seconds"]) >= 0 and x["configs"].startswith("configs/"), x
        # c3's local slope at the largest L, recomputed from transition_points.csv
        tp = [t for t in csv.DictReader(open(os.path.join(d, "runs", "theory_asymptote", "transition_points.csv")))
              if t["objective"] == "marginal"]
        tp.sort(key=lambda t: int(t["L"]))
        a, b = tp[-2], tp[-1]
        slope = math.log(float(b["P_star"]) / float(a["P_star"])) / math.log(int(b["L"]) / int(a["L"]))
        assert f"-> {slope:.3g} (L=2^" in rows["c3"]["measured"], (slope, rows["c3"]["measured"])
        lnL = math.log(int(b["L"]))
        want = "reproduced" if 1 + 1 / lnL < slope < 1 + 2 / lnL else "contradicted"
        assert rows["c3"]["verdict"] == want or "residual" in rows["c3"]["measured"], rows["c3"]
        # c4: every slope quoted is the log-log slope of the two largest V at its L
        lin = [t for t in csv.DictReader(open(os.path.join(d, "runs", "theory_scaling", "transition_points.csv")))
               if t["attention"] == "linear" and t["L"] == "16"]
        lin.sort(key=lambda t: int(t["V"]))
        s = math.log(float(lin[-1]["P_star"]) / float(lin[-2]["P_star"])) / math.log(int(lin[-1]["V"]) / int(lin[-2]["V"]))
        assert f"{s:.3g} (L=16)" in rows["c4"]["measured"], (s, rows["c4"]["measured"])
        # a second call reuses the finished runs (no new CPU beyond the analysis)
        r2 = script("--quick", "--only", "c3,c3b,c4", "--out", d, "--phaselab", EXE)
        assert r2.returncode == 0 and "reproduce: theory_asymptote:" not in r2.stdout, r2.stdout


@case("--launcher shards:3 (shards, then merge) measures what one process measures")
def _():
    with tempfile.TemporaryDirectory() as d:
        one, three = os.path.join(d, "one"), os.path.join(d, "three")
        r1 = script("--quick", "--only", "c4", "--out", one, "--phaselab", EXE)
        r3 = script("--quick", "--only", "c4", "--out", three, "--phaselab", EXE, "--launcher", "shards:3")
        assert r1.returncode == 0 and r3.returncode == 0, r1.stdout + r1.stderr + r3.stdout + r3.stderr
        assert os.path.isdir(os.path.join(three, "runs", "theory_scaling.shards", "shard-2-of-3")), os.listdir(os.path.join(three, "runs"))
        m1 = next(csv.DictReader(open(os.path.join(one, "reproduction.csv"))))
        m3 = next(csv.DictReader(open(os.path.join(three, "reproduction.csv"))))
        assert m1["measured"] == m3["measured"] and m1["verdict"] == m3["verdict"], (m1, m3)
        merged = json.load(open(os.path.join(three, "runs", "theory_scaling", "run.json")))
        assert merged["status"] == "ok" and merged["counts"]["points"] == 50, merged["counts"]


@case("--full without --yes prints the estimate and runs nothing")
def _():
    with tempfile.TemporaryDirectory() as d:
        r = script("--full", "--out", d, "--phaselab", EXE)
        assert r.returncode == 0, r.stderr
        assert "CPU-hours in all" in r.stdout and "--yes" in r.stdout, r.stdout
        assert not os.path.exists(os.path.join(d, "runs")), os.listdir(d)


@case("scripts/memorisation.py: the memorised fraction, its crossing time and the label's switch, by hand")
def _():
    # Two seeds at K = 8, gap 0.1 nats (2-Gen 1.0, 2-Mem 0.9). Seed 0's loss 1.0, 0.96, 0.94,
    # 0.93 -> f 0, 0.4, 0.6, 0.7: stays >= 0.5 from step 300; its phase 2gen, 2gen, 2mem, 2mem
    # -> switch at 300 too (label) ... seed 1: f 0, 0.6, 0.4, 0.8 -> stays >= 0.5 from 400; phase
    # 2gen, 2mem, 2gen, 2mem -> switch at 400. Medians: t_f 350, t_label 350, f final 0.75.
    cols = ["K", "seed", "step", "loss_id", "bayes_2gen_id", "bayes_2mem_id", "phase"]
    rows = [(8, 0, 100, 1.0, "2gen"), (8, 0, 200, 0.96, "2gen"), (8, 0, 300, 0.94, "2mem"), (8, 0, 400, 0.93, "2mem"),
            (8, 1, 100, 1.0, "2gen"), (8, 1, 200, 0.94, "2mem"), (8, 1, 300, 0.96, "2gen"), (8, 1, 400, 0.92, "2mem")]
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "results.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cols)
            for K, seed, step, loss, ph in rows:
                w.writerow([K, seed, step, loss, 1.0, 0.9, ph])
        out = os.path.join(d, "m.csv")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "memorisation.py"), d, "--csv", out],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        line = next(csv.DictReader(open(out)))
        for key, want in [("t_f", 350), ("t_label", 350), ("f_final", 0.75), ("f_min", 0.7), ("gap", 0.1)]:
            got = float(line[key])
            assert abs(got - want) <= 1e-9 + 1e-9 * abs(want), (key, got, want)
        assert line["labels"] == "mm", line



@case("scripts/memorisation.py: a sweep over d_model is reported per cell, never pooled")
def _():
    # K = 8, seed 0 at d_model 8 and 16; gap 0.1 nats. d_model 8: loss 1.0, 0.98, 0.97, 0.96 -> f 0,
    # 0.2, 0.3, 0.4 (f half at step 200: 0.2); d_model 16: 1.0, 0.94, 0.92, 0.91 -> f 0, 0.6, 0.8,
    # 0.9, stays >= 0.5 from step 200. Pooled under one (K, seed) the rows would interleave.
    cols = ["K", "d_model", "seed", "step", "loss_id", "bayes_2gen_id", "bayes_2mem_id", "phase"]
    losses = {8: [1.0, 0.98, 0.97, 0.96], 16: [1.0, 0.94, 0.92, 0.91]}
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "results.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cols)
            for dm in (16, 8):
                for i, loss in enumerate(losses[dm]):
                    w.writerow([8, dm, 0, 100 * (i + 1), loss, 1.0, 0.9, "2mem" if loss < 0.95 else "2gen"])
        out = os.path.join(d, "m.csv")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "memorisation.py"), d, "--csv", out],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        lines = list(csv.DictReader(open(out)))
        assert [l["d_model"] for l in lines] == ["8", "16"], lines
        want = {"8": {"f_final": 0.4, "f_half": 0.2, "seeds": 1}, "16": {"f_final": 0.9, "f_half": 0.6, "t_f": 200, "seeds": 1}}
        for l in lines:
            for key, v in want[l["d_model"]].items():
                got = float(l[key])
                assert abs(got - v) <= 1e-9 + 1e-9 * abs(v), (l["d_model"], key, got, v)
        assert lines[0]["t_f"] == "nan" and lines[0]["labels"] == "2", lines[0]
        assert "d_model = 8" in r.stdout and "d_model = 16" in r.stdout, r.stdout
        curves = os.path.join(d, "f.csv")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "memorisation.py"), d, "--curves", curves],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        got = [(c["d_model"], int(c["step"]), float(c["f"])) for c in csv.DictReader(open(curves))]
        want = [(dm, 100 * (i + 1), (1.0 - loss) / 0.1) for dm in ("16", "8") for i, loss in enumerate(losses[int(dm)])]
        assert sorted(x[:2] for x in got) == sorted(x[:2] for x in want), got
        for (dm, step, f), (_, _, fw) in zip(sorted(got), sorted(want)):
            assert abs(f - fw) <= 1e-6 + 1e-6 * abs(fw), (dm, step, f, fw)


@case("scripts/memorisation.py: per-seed K2*, gamma against it, the late slope and the front, by hand")
def _():
    # One seed, level 0.5, gap 0.1 nats (2-Gen 1.0, 2-Mem 0.9), checkpoints 100..1600 (doubling).
    # f at the end: K 6 0.9, 10 0.7, 12 0.6, 16 0.4 -> K2* = 12 + (0.6-0.5)/(0.6-0.4)*4 = 14.
    # f first stays >= 0.5 at 100 (K 6), 400 (K 10), 1600 (K 12): t = 6400 (14 - K)^-2 exactly,
    # so gamma = 2. Front: 6.8, 7.6, 10, 11, 14 at 100..1600; over the later half of log t
    # (400, 800, 1600, equally spaced) K2* ~ t^b with b = ln(14/10)/ln 4. Late slope of K = 12
    # (t >= 1600/4): (0.6 - 0.3)/log10(4); f at half the run (800): 0.4.
    f = {6: [0.6, 0.7, 0.8, 0.9, 0.9], 10: [0.1, 0.2, 0.5, 0.6, 0.7], 12: [0.1, 0.2, 0.3, 0.4, 0.6],
         16: [0.1, 0.2, 0.3, 0.35, 0.4]}
    steps = [100, 200, 400, 800, 1600]
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "results.csv"), "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["K", "seed", "step", "loss_id", "bayes_2gen_id", "bayes_2mem_id", "phase"])
            for K, fs in f.items():
                for t, x in zip(steps, fs):
                    w.writerow([K, 0, t, repr(1.0 - 0.1 * x), 1.0, 0.9, "2mem" if x > 0.5 else "2gen"])
        out, fr = os.path.join(d, "m.csv"), os.path.join(d, "front.csv")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "memorisation.py"), d, "--csv", out,
                            "--front", fr], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        k12 = next(l for l in csv.DictReader(open(out)) if float(l["K"]) == 12)
        for key, want in [("f_slope", 0.3 / math.log10(4)), ("f_half", 0.4), ("f_final", 0.6), ("t_f", 1600)]:
            got = float(k12[key])
            assert abs(got - want) <= 1e-9 + 1e-9 * abs(want), (key, got, want)
        got = [(int(x["step"]), float(x["k2"])) for x in csv.DictReader(open(fr))]
        want = list(zip(steps, [6.8, 7.6, 10.0, 11.0, 14.0]))
        assert [t for t, _ in got] == steps, got
        for (t, k), (_, kw) in zip(got, want):
            assert abs(k - kw) <= 1e-9 + 1e-9 * kw, (t, k, kw)
        assert "K2* (f at the end < 0.5) 14.00; gamma 2.00 over 3 K (rms 0.000)" in r.stdout, r.stdout
        b = math.log(14 / 10) / math.log(4)
        assert f"K2* ~ t^{b:.2f} " in r.stdout, (b, r.stdout)
        runs_csv = os.path.join(d, "runs.csv")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "memorisation.py"), d, "--runs", runs_csv],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        per = {float(x["K"]): x for x in csv.DictReader(open(runs_csv))}
        assert sorted(per) == [6, 10, 12, 16], per
        for K, tf in [(6, 100), (10, 400), (12, 1600)]:
            assert float(per[K]["t_f"]) == tf, (K, per[K])
        assert per[16]["t_f"] == "nan" and per[16]["phase"] == "2gen", per[16]
        assert abs(float(per[12]["f_slope"]) - 0.3 / math.log10(4)) <= 1e-6, per[12]
        # --budget 800: each run read as if it had stopped at 800 -> f at the end 0.9, 0.6, 0.4, 0.35,
        # K2* = 10 + (0.6-0.5)/(0.6-0.4)*2 = 11; a budget past every run's end leaves nothing.
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "memorisation.py"), d, "--budget", "800"],
                           capture_output=True, text=True)
        assert r.returncode == 0 and "K2* (f at the end < 0.5) 11.00;" in r.stdout, r.stdout + r.stderr
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "memorisation.py"), d, "--budget", "3200"],
                           capture_output=True, text=True)
        assert r.returncode != 0 and "no run reached the budget" in r.stderr, r.stdout + r.stderr

print(f"reproduce: {passed} passed, {failed} failed")
counts = os.environ.get("PHASELAB_TEST_COUNTS")
if counts:
    with open(counts, "a") as f:
        f.write(f"reproduce {passed} {failed} 0\n")
sys.exit(1 if failed else 0)
