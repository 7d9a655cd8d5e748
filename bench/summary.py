#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Kernel benchmark tables: every variant compiled for this machine side by side, per kernel and
size, with the speed-up over the scalar reference; optionally joined with another machine's file.

    python3 bench/summary.py [KERNEL...] [--build build-bench] [--json FILE] [--baseline FILE]
                             [--reps 3] [--min-time 0.1] [--size REGEX]
                             [--exe-wrapper "qemu-aarch64 -cpu max"] [--emulated]
    python3 bench/summary.py --load FILE [--baseline FILE]     # tables from a saved file

KERNEL: kernel names as in `phaselab kernels` (default: all). Each cell is the median over
--reps repetitions of Google Benchmark's measurement: ns per element (or sample, parameter) for
the elementwise kernels, GFLOP/s for GEMM and attention; the ratio is always "times faster than
scalar" (scalar time / variant time), so > 1 is a gain whatever the unit. The fastest variant of
each size is marked **bold**; the last columns give the variant dispatch picks on this machine
(`phaselab kernels --json` of the same build), its speed as a fraction of the fastest's
(1 = dispatch picked the fastest) and the spread of the repetitions (the largest coefficient of
variation, stddev / mean, among the row's variants: differences smaller than it are noise). Each
kernel's table ends with how often dispatch picked the fastest.

--json FILE writes the results with kernel, backend, isa, variant, size, value, unit,
ratio_to_scalar per row and, once per file, CPU model, commit, date and whether the run was
emulated. --baseline FILE joins such a file from another machine (an ARM laptop, or the aarch64
build under qemu) by (kernel, size, backend): per backend the best ISA of each machine, with its
ratio to that machine's scalar. Variant names embed the ISA (hwy.avx512 vs hwy.sve2), so the
backend is the common key. Timings under emulation (qemu) say nothing about real ARM speed; such
files are labelled "emulated" wherever they are shown.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty", "--abbrev=12"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def split_name(run_name):
    """'gemm.hwy.avx512/nn/m:64/n:64/k:64' -> (kernel, backend, isa, variant, size)."""
    variant, _, size = run_name.partition("/")
    parts = variant.split(".")
    if len(parts) == 2 and parts[1] == "scalar":
        return parts[0], "scalar", "scalar", variant, size
    if len(parts) != 3:
        return None
    return parts[0], parts[1], parts[2], variant, size


def value_of(b):
    """(value, unit, higher_is_better) of one Google Benchmark JSON entry, or None."""
    if "GFLOPS" in b:
        # A rate counter of flops * 1e-9 per iteration: already GFLOP/s.
        return b["GFLOPS"], "GFLOP/s", True
    if "ns_per_item" in b:
        # An inverted rate counter (bench/support.hpp set_items): seconds per item, whatever its
        # size (1.2 ms per item is 1.2e-3, not a nanosecond count).
        return b["ns_per_item"] * 1e9, "ns/elem", False
    return None


def run_bench(a):
    exe = os.path.join(a.build, "bench", "phaselab_bench")
    if not os.path.exists(exe):
        sys.exit(f"summary.py: {exe} not found: configure with -Dbench=true and build it")
    kernels = "|".join(re.escape(k) for k in a.kernels) if a.kernels else "[a-z0-9_]+"
    regex = f"^({kernels})\\.[a-z0-9_.]+/"
    if a.size:
        regex += f".*({a.size})"
    cmd = shlex.split(a.exe_wrapper) + [exe, f"--benchmark_filter={regex}",
                                        f"--benchmark_repetitions={a.reps}",
                                        f"--benchmark_min_time={a.min_time}",
                                        "--benchmark_report_aggregates_only=true",
                                        "--benchmark_format=json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    data = json.loads(out)
    rows = []
    spread = spreads(data["benchmarks"])
    for b in data["benchmarks"]:
        # With one repetition Google Benchmark reports the run itself, not aggregates.
        if b.get("aggregate_name", "median" if a.reps == 1 else "") != "median":
            continue
        name = split_name(b["run_name"])
        val = value_of(b)
        if not name or not val:
            continue
        kernel, backend, isa, variant, size = name
        rows.append({"kernel": kernel, "backend": backend, "isa": isa, "variant": variant,
                     "size": size, "value": val[0], "unit": val[1], "higher_is_better": val[2],
                     "spread": spread.get(b["run_name"])})
    if not rows:
        sys.exit(f"summary.py: no benchmark matched {regex}")
    for r in rows:
        ref = next((s for s in rows if s["kernel"] == r["kernel"] and s["size"] == r["size"]
                    and s["backend"] == "scalar"), None)
        r["ratio_to_scalar"] = None if not ref else (
            r["value"] / ref["value"] if r["higher_is_better"] else ref["value"] / r["value"])
    emulated = a.emulated or bool(a.exe_wrapper)
    arch = platform.machine()
    m = re.search(r"qemu-(\w+)", a.exe_wrapper or "")
    if m:
        arch = m.group(1)
    return {"cpu": (f"{a.exe_wrapper} (emulated) on {cpu_model()}" if a.exe_wrapper
                    else cpu_model()),
            "arch": arch, "emulated": emulated, "commit": commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "best_target": data.get("context", {}).get("phaselab.best_target", ""),
            "dispatched": dispatched(a), "reps": a.reps, "results": rows}


def spreads(benchmarks):
    """run_name -> stddev / mean of its measured value over the repetitions (None: one rep)."""
    agg = {}
    for b in benchmarks:
        name = b.get("aggregate_name")
        if name in ("mean", "stddev"):
            val = value_of(b)
            if val:
                agg.setdefault(b["run_name"], {})[name] = val[0]
    return {k: v["stddev"] / v["mean"] for k, v in agg.items()
            if "stddev" in v and v.get("mean")}


def dispatched(a):
    """kernel -> the variant dispatch picks on this machine (`phaselab kernels --json` of the
    same build; under --exe-wrapper through it), {} when the build has no driver."""
    exe = os.path.join(a.build, "driver", "phaselab")
    if not os.path.exists(exe):
        return {}
    try:
        out = subprocess.run(shlex.split(a.exe_wrapper) + [exe, "kernels", "--json"], check=True,
                             capture_output=True, text=True).stdout
        return {k["kernel"]: k["selected"] for k in json.loads(out)["kernels"] if k["selected"]}
    except (OSError, subprocess.CalledProcessError, ValueError, KeyError):
        return {}


def fmt(v):
    return f"{v:.3g}" if v < 1000 else f"{v:.0f}"


def label(doc):
    return f"{doc['arch']}{' (emulated)' if doc.get('emulated') else ''}"


def order(rows):
    kernels = []
    for r in rows:
        if r["kernel"] not in kernels:
            kernels.append(r["kernel"])
    return kernels


def faster(r, s):
    """Whether row r is faster than row s (same kernel and size)."""
    return r["value"] > s["value"] if r["higher_is_better"] else r["value"] < s["value"]


def speed_of(r, fastest):
    """r's speed as a fraction of the fastest's (1: it is the fastest)."""
    return r["value"] / fastest["value"] if r["higher_is_better"] else fastest["value"] / r["value"]


def print_tables(doc):
    print(f"CPU: {doc['cpu']}; {label(doc)}; commit {doc['commit']}; {doc['date']}; "
          f"median of {doc['reps']}")
    picks = doc.get("dispatched") or {}
    rows = doc["results"]
    for k in order(rows):
        kr = [r for r in rows if r["kernel"] == k]
        variants = sorted({r["variant"] for r in kr},
                          key=lambda v: (v != k + ".scalar", v.split(".")[1:]))
        sizes = []
        for r in kr:
            if r["size"] not in sizes:
                sizes.append(r["size"])
        unit = kr[0]["unit"]
        better = "higher" if kr[0]["higher_is_better"] else "lower"
        pick = picks.get(k)
        print(f"\n### {k}: {unit} ({better} is better), (x) = times faster than scalar, "
              f"**fastest**\n")
        extra = ["dispatch", "dispatch / fastest", "spread"]
        print("| size | " + " | ".join([v[len(k) + 1:] for v in variants] + extra) + " |")
        print("|---" * (len(variants) + 1 + len(extra)) + "|")
        hits = counted = near = 0
        losses = []
        for s in sizes:
            sr = [r for r in kr if r["size"] == s]
            fastest = sr[0]
            for r in sr:
                if faster(r, fastest):
                    fastest = r
            cells = []
            for v in variants:
                r = next((r for r in sr if r["variant"] == v), None)
                if not r:
                    cells.append("")
                    continue
                text = fmt(r["value"])
                if r["backend"] != "scalar" and r["ratio_to_scalar"] is not None:
                    text += f" ({r['ratio_to_scalar']:.1f}x)"
                cells.append(f"**{text}**" if r is fastest else text)
            sp = [r["spread"] for r in sr if r.get("spread") is not None]
            d = next((r for r in sr if r["variant"] == pick), None)
            if d is None:
                cells += [pick[len(k) + 1:] + " (not measured)" if pick else "not recorded", ""]
            else:
                ratio = speed_of(d, fastest)
                counted += 1
                hits += d is fastest
                noise = d is not fastest and bool(sp) and 1 - ratio <= max(sp)
                near += noise
                losses.append(1 - ratio)
                cells += [pick[len(k) + 1:],
                          "1 (fastest)" if d is fastest else
                          f"{ratio:.2f} ({fastest['variant'][len(k) + 1:]}"
                          f"{', within spread' if noise else ''})"]
            cells.append(f"{100 * max(sp):.1f}%" if sp else "")
            print(f"| {s} | " + " | ".join(cells) + " |")
        if counted:
            losses.sort()
            print(f"\ndispatch ({pick}) is the fastest on {hits} of {counted} sizes (and within "
                  f"the spread of the repetitions of the fastest on {near} more); its speed as a "
                  f"fraction of the fastest: median {1 - losses[len(losses) // 2]:.2f}, "
                  f"worst {1 - losses[-1]:.2f}")


def best_per_backend(rows):
    """(kernel, size, backend) -> the row of the fastest ISA."""
    best = {}
    for r in rows:
        key = (r["kernel"], r["size"], r["backend"])
        cur = best.get(key)
        if cur is None or (r["ratio_to_scalar"] or 0) > (cur["ratio_to_scalar"] or 0):
            best[key] = r
    return best


def print_joined(doc, base):
    a, b = best_per_backend(doc["results"]), best_per_backend(base["results"])
    la, lb = label(doc), label(base)
    print(f"\nJoined by (kernel, size, backend), the best ISA of each backend per machine:\n"
          f"  A = {la}: {doc['cpu']}, commit {doc['commit']}\n"
          f"  B = {lb}: {base['cpu']}, commit {base['commit']}")
    if base.get("emulated") or doc.get("emulated"):
        print("  (emulated timings measure the emulator, not the hardware: compare the ratios "
              "to scalar within a machine, not the absolute numbers across)")
    sizes = []  # in the order of first appearance
    for r in doc["results"] + base["results"]:
        if r["size"] not in sizes:
            sizes.append(r["size"])
    left_out = 0
    for k in order(doc["results"] + base["results"]):
        keys = sorted({key for key in list(a) + list(b) if key[0] == k},
                      key=lambda t: (sizes.index(t[1]), t[2] != "scalar", t[2]))
        # Sizes measured on both machines only (another machine may have run a subset).
        both = {key[1] for key in keys if (key[0], key[1], "scalar") in a
                and (key[0], key[1], "scalar") in b}
        left_out += len({key[1] for key in keys} - both)
        keys = [key for key in keys if key[1] in both]
        if not keys:
            continue
        unit = (a.get(keys[0]) or b.get(keys[0]))["unit"]
        print(f"\n### {k}: {unit}, (x) = times faster than that machine's scalar\n")
        print(f"| size | backend | A isa | A | B isa | B |")
        print("|---|---|---|---|---|---|")
        for key in keys:
            def cell(r):
                if not r:
                    return "", "-"
                if r["backend"] == "scalar" or r["ratio_to_scalar"] is None:
                    return r["isa"], fmt(r["value"])
                return r["isa"], f"{fmt(r['value'])} ({r['ratio_to_scalar']:.1f}x)"
            ia, va = cell(a.get(key))
            ib, vb = cell(b.get(key))
            print(f"| {key[1]} | {key[2]} | {ia} | {va} | {ib} | {vb} |")
    if left_out:
        print(f"\n({left_out} kernel sizes measured on one machine only are left out)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kernels", nargs="*", help="kernels to run (default: all)")
    ap.add_argument("--build", default="build-bench", help="build folder with bench/phaselab_bench")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--min-time", default="0.1", help="seconds per repetition (Google Benchmark)")
    ap.add_argument("--size", help="only sizes matching this regex (e.g. '256x64|m:64/')")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--baseline", help="join with this file from another machine")
    ap.add_argument("--load", help="read results from this file instead of running")
    ap.add_argument("--exe-wrapper", default="", help="run the benchmark binary through this "
                    "(e.g. qemu-aarch64 -cpu max for a cross build); marks the file emulated")
    ap.add_argument("--emulated", action="store_true", help="mark the results as emulated")
    a = ap.parse_args()
    if a.load:
        with open(a.load) as f:
            doc = json.load(f)
        if a.kernels:
            doc["results"] = [r for r in doc["results"] if r["kernel"] in a.kernels]
    else:
        doc = run_bench(a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    print_tables(doc)
    if a.baseline:
        with open(a.baseline) as f:
            base = json.load(f)
        if a.kernels:
            base["results"] = [r for r in base["results"] if r["kernel"] in a.kernels]
        print_joined(doc, base)


if __name__ == "__main__":
    main()
