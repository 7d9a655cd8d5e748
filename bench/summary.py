#!/usr/bin/env python3
"""Scalar vs selected variant, every kernel: runs phaselab_bench on the scalar reference and on
the variant dispatch selects (from `phaselab kernels --json`), plus the FMA peak loop, and prints
a markdown table of medians (ns/item or GFLOP/s) and the speed-up.

    python3 bench/summary.py [--build build] [--reps 5] [--min-time 0.1]
"""
import argparse
import json
import re
import subprocess


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--min-time", default="0.1")
    a = ap.parse_args()
    kernels = json.loads(subprocess.run([f"{a.build}/driver/phaselab", "kernels", "--json"],
                                        check=True, capture_output=True, text=True).stdout)
    selected = {k["kernel"]: k["selected"] for k in kernels["kernels"]}
    names = sorted({re.escape(v) for v in selected.values()} |
                   {re.escape(k + ".scalar") for k in selected})
    regex = "^(peak/|(" + "|".join(names) + ")/)"
    out = subprocess.run([f"{a.build}/bench/phaselab_bench", f"--benchmark_filter={regex}",
                          f"--benchmark_repetitions={a.reps}", f"--benchmark_min_time={a.min_time}",
                          "--benchmark_report_aggregates_only=true", "--benchmark_format=json"],
                         check=True, capture_output=True, text=True).stdout
    med = {}
    for b in json.loads(out)["benchmarks"]:
        # With one repetition Google Benchmark reports the run itself, not aggregates.
        if b.get("aggregate_name", "median" if a.reps == 1 else "") != "median":
            continue
        if "GFLOPS" in b:
            med[b["run_name"]] = (b["GFLOPS"] / 1e9 if b["GFLOPS"] > 1e6 else b["GFLOPS"], "GFLOP/s")
        elif "ns_per_item" in b:
            med[b["run_name"]] = (b["ns_per_item"] * 1e9 if b["ns_per_item"] < 1e-3 else b["ns_per_item"], "ns/item")
    for n, (v, u) in med.items():
        if n.startswith("peak/"):
            print(f"FMA peak {n}: {v:.1f} {u}")
    print("\n| kernel | size | scalar | selected variant | selected | speed-up |")
    print("|---|---|---|---|---|---|")
    for k, sel in selected.items():
        for n, (v, u) in med.items():
            if not n.startswith(sel + "/"):
                continue
            size = n[len(sel) + 1:]
            ref = med.get(f"{k}.scalar/{size}")
            if not ref:
                continue
            sp = (v / ref[0]) if u == "GFLOP/s" else (ref[0] / v)
            print(f"| {k} | {size} | {ref[0]:.3g} {u} | {sel} | {v:.3g} {u} | {sp:.1f}x |")


if __name__ == "__main__":
    main()
