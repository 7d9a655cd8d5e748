#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The Markov training step at every shape the shipped configs train, on this machine.

Reads configs/markov_*.toml and configs/circuits_*.toml (or the configs given), resolves each
config's model and batch keys (C, N, d_model, heads, layers, mlp_mult, attn_only, batch, chunks)
against the plugin's declared defaults (`phaselab list PLUGIN`) and its [sweep] lists, and times
one training step of every distinct shape with bench/markov_step (one thread, CPU time), the
shapes alternating round by round. Prints a markdown table: the step's median CPU time (and
range over the rounds), GFLOP/s (matrix products only, as markov_step counts them), the
percentage of the FMA peak of the widest ISA, or of --target's ISA when that is forced (the
median of the peak loop over all calls, since the host's load moves single readings), and how much training CPU time each config spends at that
shape (steps x points; evaluations and set building not included).

    python3 bench/markov_shapes.py [--build build] [--rounds 3] [--seconds 1.0] [--target avx2]
                                   [CONFIG ...]

circuits configs count only when they train (source = "train"); markov_minimal trains the
minimal models, not this transformer, and is not timed.
"""
import argparse
import glob
import itertools
import os
import re
import statistics
import subprocess
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPE_KEYS = ["d_model", "N", "batch", "chunks", "C", "heads", "layers", "mlp_mult", "attn_only"]
PLUGINS = ("markov_icl", "circuits")


def plugin_defaults(phaselab, plugin):
    """{key: value} of the plugin's declared defaults, from `phaselab list PLUGIN`."""
    out = subprocess.run([phaselab, "list", plugin], capture_output=True, text=True, check=True)
    d = {}
    for line in out.stdout.splitlines():
        m = re.match(r"^\s+([A-Za-z_0-9]+)\s+(int|float|bool|enum|string)\s+=\s+(\S+)", line)
        if not m:
            continue
        key, kind, val = m.groups()
        if kind == "int":
            d[key] = int(val)
        elif kind == "float":
            d[key] = float(val)
        elif kind == "bool":
            d[key] = val == "true"
        else:
            d[key] = val.strip('"')
    return d


def config_shapes(path, phaselab, defaults_cache):
    """[(shape tuple, steps, points)] of one config, or None when it trains no transformer."""
    cfg = tomllib.load(open(path, "rb"))
    plugin = cfg.get("plugin")
    if plugin not in PLUGINS:
        return None
    if plugin not in defaults_cache:
        defaults_cache[plugin] = plugin_defaults(phaselab, plugin)
    keys = dict(defaults_cache[plugin])
    keys.update(cfg.get(plugin, {}))
    if plugin == "circuits" and keys.get("source", "train") != "train":
        return None
    sweep = cfg.get("sweep", {})
    seeds = cfg.get("run", {}).get("seeds", [0])
    n_seeds = len(seeds) if isinstance(seeds, list) else int(seeds)
    other = 1  # points per shape from the sweep's other keys (the sweep is a grid)
    for k, v in sweep.items():
        if k not in SHAPE_KEYS:
            other *= len(v)
    lists = [sweep.get(k, [keys[k]]) for k in SHAPE_KEYS]
    steps = sweep.get("steps", [keys["steps"]])
    out = []
    for combo in itertools.product(*lists):
        for st in steps:
            out.append((tuple(combo), int(st), other * n_seeds))
    return out


def run_step(markov_step, shape, reps, target):
    d, N, batch, chunks, C, heads, layers, mult, attn_only = shape
    cmd = [markov_step, "--threads", "1", "--d", str(d), "--N", str(N), "--batch", str(batch),
           "--chunks", str(chunks), "--C", str(C), "--heads", str(heads), "--layers", str(layers),
           "--mlp-mult", str(mult), "--reps", str(reps), "--peak"]
    if attn_only:
        cmd.append("--attn-only")
    if target:
        cmd += ["--target", target]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    line = out.strip().splitlines()[-1]
    kv = dict(re.findall(r"(\w+)=(\S+)", line))
    # With a forced target (avx2 on an AVX-512 machine), the peak of that target's FMA loop.
    peak = kv.get(f"peak_{target}", kv["peak_gflops_1core"]) if target else kv["peak_gflops_1core"]
    if target and f"peak_{target}" in kv:
        kv["peak_isa"] = target
    return float(kv["cpu_ms"]), float(kv["flops"]), float(peak), kv


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("configs", nargs="*")
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0, help="timed seconds per call (about)")
    ap.add_argument("--target", default="")
    args = ap.parse_args()
    build = os.path.join(ROOT, args.build) if not os.path.isabs(args.build) else args.build
    phaselab = os.path.join(build, "driver", "phaselab")
    markov_step = os.path.join(build, "bench", "markov_step")
    for f in (phaselab, markov_step):
        if not os.path.exists(f):
            sys.exit(f"markov_shapes: {f} not found (a build with -Dbench=true)")
    paths = args.configs or sorted(glob.glob(os.path.join(ROOT, "configs", "markov_*.toml")) +
                                   glob.glob(os.path.join(ROOT, "configs", "circuits_*.toml")))
    shapes = {}  # shape -> [(config, steps, points)]
    cache = {}
    for p in paths:
        rows = config_shapes(p, phaselab, cache)
        name = os.path.splitext(os.path.basename(p))[0]
        if rows is None:
            print(f"# {name}: trains no transformer (not timed)", file=sys.stderr)
            continue
        for shape, steps, points in rows:
            shapes.setdefault(shape, []).append((name, steps, points))
        # The driver's own count of the config's points, against this grid's.
        chk = subprocess.run([phaselab, "check", p], capture_output=True, text=True)
        m = re.search(r"(\d+) points?", chk.stdout)
        if not m or int(m.group(1)) != sum(r[2] for r in rows):
            print(f"# {name}: phaselab check reads {m.group(1) if m else '?'} points, this grid "
                  f"{sum(r[2] for r in rows)}: its CPU column is approximate", file=sys.stderr)
    if not shapes:
        sys.exit("markov_shapes: no config trains the Markov transformer")

    order = sorted(shapes, key=lambda s: (s[0], s[1], s[2]))
    # Repetitions per call from a first short call per shape (about --seconds of steps).
    reps, times, peaks, flops = {}, {s: [] for s in order}, [], {}
    for s in order:
        ms, fl, pk, _ = run_step(markov_step, s, 2, args.target)
        reps[s] = max(3, min(200, int(args.seconds * 1e3 / max(ms, 1e-3))))
        flops[s] = fl
    for r in range(args.rounds):
        for s in (order if r % 2 == 0 else list(reversed(order))):
            ms, _, pk, kv = run_step(markov_step, s, reps[s], args.target)
            times[s].append(ms)
            peaks.append(pk)
            isa = kv.get("peak_isa", "?")
    peak = statistics.median(peaks)
    print(f"Markov training step, 1 thread, kernel target {kv.get('target', '?')}; FMA-loop peak "
          f"({isa}) median {peak:.1f} GFLOP/s over {len(peaks)} readings "
          f"({min(peaks):.0f}-{max(peaks):.0f}); {args.rounds} alternating rounds per shape\n")
    print("| d_model | N | batch | chunks | C | layers | ms/step (range) | GFLOP/s | % of peak "
          "| configs (steps x points) | training CPU at 1 thread |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for s in order:
        med = statistics.median(times[s])
        gf = flops[s] / (med * 1e-3) / 1e9
        extra = []
        if s[5] != 1:
            extra.append(f"{s[5]} heads")
        if s[7] != 4:
            extra.append(f"mlp x{s[7]}")
        if s[8]:
            extra.append("attention only")
        uses, total_h = [], 0.0
        for name, steps, points in shapes[s]:
            uses.append(f"{name} ({steps} x {points})")
            total_h += steps * points * med * 1e-3 / 3600
        cpu = f"{total_h:.2f} h" if total_h >= 0.1 else f"{total_h * 60:.1f} min"
        label = ", ".join(uses) + (" [" + ", ".join(extra) + "]" if extra else "")
        print(f"| {s[0]} | {s[1]} | {s[2]} | {s[3]} | {s[4]} | {s[6]} | {med:.2f} "
              f"({min(times[s]):.2f}-{max(times[s]):.2f}) | {gf:.1f} | {100 * gf / peak:.0f}% "
              f"| {label} | {cpu} |")


if __name__ == "__main__":
    main()
