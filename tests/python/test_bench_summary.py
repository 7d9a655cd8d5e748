# SPDX-License-Identifier: Apache-2.0
"""bench/summary.py's tables from a saved file: the fastest variant per size marked, the
dispatched variant and its speed relative to the fastest, the spread of the repetitions; files
written before those fields existed still load. The oracle is the numbers put in the file."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = ROOT / "bench" / "summary.py"


def row(variant, size, value, spread=None, unit="GFLOP/s", higher=True, scalar=None):
    kernel, backend, *isa = variant.split(".")
    return {"kernel": kernel, "backend": backend, "isa": isa[0] if isa else "scalar",
            "variant": variant, "size": size, "value": value, "unit": unit,
            "higher_is_better": higher, "spread": spread,
            "ratio_to_scalar": None if scalar is None else (value / scalar if higher else scalar / value)}


def summary(tmp_path, doc, *args):
    f = tmp_path / "doc.json"
    f.write_text(json.dumps(doc))
    return subprocess.run([sys.executable, str(SUMMARY), "--load", str(f), *args],
                          capture_output=True, text=True, check=True).stdout


def test_fastest_dispatch_and_spread(tmp_path):
    rows = [row("gemm.scalar", "m:64", 2.0, 0.01), row("gemm.hwy.avx512", "m:64", 40.0, 0.02, scalar=2.0),
            row("gemm.intrin.avx512", "m:64", 50.0, 0.05, scalar=2.0),
            row("gemm.scalar", "m:256", 2.0, 0.01), row("gemm.hwy.avx512", "m:256", 60.0, 0.01, scalar=2.0),
            row("gemm.intrin.avx512", "m:256", 45.0, 0.03, scalar=2.0),
            row("exp.scalar", "n:1024", 4.0, unit="ns/elem", higher=False),
            row("exp.hwy.avx512", "n:1024", 0.5, unit="ns/elem", higher=False, scalar=4.0)]
    doc = {"cpu": "test cpu", "arch": "x86_64", "emulated": False, "commit": "abc", "date": "today",
           "reps": 3, "dispatched": {"gemm": "gemm.intrin.avx512", "exp": "exp.hwy.avx512"},
           "results": rows}
    out = summary(tmp_path, doc)
    lines = {ln.split("|")[1].strip(): ln for ln in out.splitlines() if ln.startswith("| m:") or ln.startswith("| n:")}
    # m:64: intrin is fastest and dispatched.
    assert "**50 (25.0x)**" in lines["m:64"] and "| intrin.avx512 | 1 (fastest) | 5.0% |" in lines["m:64"]
    # m:256: hwy is fastest (60), dispatch intrin runs at 45/60 = 0.75 of it.
    assert "**60 (30.0x)**" in lines["m:256"]
    assert "| intrin.avx512 | 0.75 (hwy.avx512) | 3.0% |" in lines["m:256"]
    assert "dispatch (gemm.intrin.avx512) is the fastest on 1 of 2 sizes" in out
    assert "median 0.75, worst 0.75" in out or "median 1.00, worst 0.75" in out
    # Lower is better for ns/elem: 0.5 is the fastest.
    assert "**0.5 (8.0x)**" in lines["n:1024"] and "1 (fastest)" in lines["n:1024"]
    assert "dispatch (exp.hwy.avx512) is the fastest on 1 of 1 sizes" in out


def test_older_files_without_dispatch_or_spread(tmp_path):
    base = ROOT / "bench" / "baselines" / "aarch64-qemu-emulated.json"
    out = subprocess.run([sys.executable, str(SUMMARY), "--load", str(base), "softmax_rows"],
                         capture_output=True, text=True, check=True).stdout
    assert "### softmax_rows" in out and "**" in out
