#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Do two builds give the same results? Runs shortened copies of the shipped configs with the
driver of each build and compares every csv of the two run folders byte for byte.

    python3 scripts/same-results.py OLD_BUILD NEW_BUILD [CONFIG ...]

CONFIG: config files or globs (default: configs/markov_*.toml, configs/circuits_*.toml,
configs/minimal_*.toml). Each config is shortened so that a run takes seconds: the first two
values of every list under [sweep] and [run], one seed, and the step, checkpoint, sample and
evaluation-set counts capped (CAPS below). Both builds run it from the repository root with
--threads 2, so that the thread-count invariance is exercised too.

A speed change that must not move any result (docs/performance.md, "Same bits") passes when every
csv is identical. Two differences are legitimate and are compared loosely: journal.csv lists the
points in the order they finished (compared as a set of rows), and columns of wall-clock seconds
(a header "seconds" or ending in "_seconds") are left out. Exit status 0: all the same; 1: a
difference (each listed); 2: usage."""
import csv
import glob
import os
import re
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = ["configs/markov_*.toml", "configs/circuits_*.toml", "configs/minimal_*.toml"]
# Upper bounds for the counts that set a run's length, wherever they appear outside [sweep].
CAPS = {"steps": 40, "checkpoints": 2, "n_eval": 32, "num_P": 4, "samples": 20, "burn_in": 10,
        "P_test": 64, "train_steps": 40, "eval_every": 20, "record_every": 10, "exact_P_max": 64,
        "n_chains": 2, "thin": 2}


def shorten(text):
    """The config text with its lists cut to two values and its counts capped (still valid TOML)."""
    lines, out, sec, i = text.split("\n"), [], "", 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^\[(.*)\]", line)
        if m:
            sec = m.group(1)
        m = re.match(r"^\s*([A-Za-z_0-9]+)\s*=\s*(\[.*)$", line)
        if m and sec in ("sweep", "run"):
            body, j = m.group(2), i
            while body.count("[") > body.count("]"):  # a list over several lines
                j += 1
                body += " " + lines[j]
            body = re.sub(r"#[^\n]*", "", body).strip()
            inner = body[1:body.rfind("]")]
            items = [x.strip() for x in re.split(r",(?![^\[]*\])", inner) if x.strip()]
            out.append(f"{m.group(1)} = [{', '.join(items[:2])}]")
            i = j + 1
            continue
        m = re.match(r"^\s*([A-Za-z_0-9]+)\s*=\s*([0-9.eE+-]+)\s*(#.*)?$", line)
        if m and m.group(1) in CAPS and sec != "sweep" and float(m.group(2)) > CAPS[m.group(1)]:
            line = f"{m.group(1)} = {CAPS[m.group(1)]}"
        if sec == "run" and re.match(r"^\s*seeds\s*=\s*[0-9]+", line):
            line = "seeds = 1"
        out.append(line)
        i += 1
    short = "\n".join(out)
    tomllib.loads(short)
    return short


def rows(path, name):
    """The csv's rows without its wall-clock columns; journal.csv's sorted."""
    with open(path, newline="") as f:
        table = list(csv.reader(f))
    if not table:
        return table
    keep = [k for k, h in enumerate(table[0]) if not (h == "seconds" or h.endswith("_seconds"))]
    table = [[r[k] for k in keep if k < len(r)] for r in table]
    return [table[0]] + sorted(table[1:]) if name == "journal.csv" else table


def main(argv):
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 2
    builds = {"old": os.path.abspath(argv[1]), "new": os.path.abspath(argv[2])}
    for b in builds.values():
        if not os.access(os.path.join(b, "driver", "phaselab"), os.X_OK):
            print(f"same-results: no driver at {b}/driver/phaselab")
            return 2
    configs = sorted({c for g in (argv[3:] or DEFAULT) for c in glob.glob(os.path.join(ROOT, g))
                      if c.endswith(".toml")} | {os.path.abspath(c) for c in argv[3:]
                                                  if os.path.isfile(c)})
    bad = 0
    with tempfile.TemporaryDirectory(prefix="same-results-") as tmp:
        for cfg in configs:
            name = os.path.basename(cfg)[:-5]
            short = os.path.join(tmp, name + ".toml")
            with open(cfg) as f, open(short, "w") as g:
                g.write(shorten(f.read()))
            rc = {}
            for side, b in builds.items():
                out = os.path.join(tmp, side, name)
                p = subprocess.run([os.path.join(b, "driver", "phaselab"), "run", short, "--out",
                                    out, "--threads", "2", "--quiet"], cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                rc[side] = p.returncode
            verdict = [] if rc["old"] == rc["new"] else [f"exit status {rc['old']} -> {rc['new']}"]
            old_dir, new_dir = (os.path.join(tmp, s, name) for s in ("old", "new"))
            files = sorted({f for d in (old_dir, new_dir) if os.path.isdir(d)
                            for f in os.listdir(d) if f.endswith(".csv")})
            for f in files:
                a, b = os.path.join(old_dir, f), os.path.join(new_dir, f)
                if not (os.path.exists(a) and os.path.exists(b)):
                    verdict.append(f"{f} only in {'old' if os.path.exists(a) else 'new'}")
                elif open(a, "rb").read() != open(b, "rb").read() and rows(a, f) != rows(b, f):
                    verdict.append(f"{f} differs")
            bad += bool(verdict)
            print(f"{name}: {len(files)} csv, exit status {rc['old']}: "
                  + ("; ".join(verdict) if verdict else "same"))
    print(f"same-results: {len(configs)} configs, {bad} with differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
