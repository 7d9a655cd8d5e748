#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Side-by-side kernel timings: phaselab vs PyTorch (CPU) vs OpenBLAS sgemm, one thread each.

Runs, on the same machine and in the same session:
  * <build>/bench/phaselab_bench (Google Benchmark, JSON, --benchmark_repetitions, medians) for the
    FMA peak loop and the workloads below, every runnable variant of each kernel;
  * <build>/bench/openblas_bench (cblas_sgemm on the gemm shapes) with OPENBLAS_NUM_THREADS=1 and
    OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed from its environment (OpenBLAS picks its own
    kernel for this CPU);
  * the same workloads in PyTorch 2.x with torch.set_num_threads(1) (timed in-process, median of
    repetitions, each repetition long enough to dwarf the timer);
and prints a markdown table of medians and ratios.

Usage: python3 bench/compare.py [--build build] [--reps 5] [--min-time 0.2] [--json out.json]
                                [--isa avx2|avx512|neon|sve] [--rounds 3] [--only gemm]

--isa restricts phaselab to the variants of one ISA and runs the peers at that ISA too: PyTorch
with MKL_ENABLE_INSTRUCTIONS / ONEDNN_MAX_CPU_ISA (AVX2 or AVX512_CORE) and OpenBLAS with the
matching OPENBLAS_CORETYPE (Haswell, SkylakeX); so an AVX-512 machine also measures the AVX2
contest. Without --isa OpenBLAS picks its kernel from CPUID (0.3.21 falls back to its generic
Prescott kernel on CPUs it does not know, e.g. Sapphire Rapids under a hypervisor: `--isa`
then gives the fair figure). "% of peak" is against the FMA loop of the ISA of the variant.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

TRANS_TAG = {"nn": "", "nt": " B^T", "tn": " A^T"}


def bench_lines(bench, *flags):
    """The lines phaselab_bench prints for `flags` (its shape lists and dispatch choice)."""
    out = subprocess.run([bench, *flags], check=True, capture_output=True, text=True).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def gemm_shapes(bench):
    """(m, n, k, tr, model) of the GEMMs compared with the peers, from the C++ list
    (kernels/gemm/model_shapes.hpp): the square and tall shapes, then the Markov model's products
    (one chunk of 1024 rows, marked [model])."""
    return [(int(m), int(n), int(k), t, model) for model, flag in
            ((False, "--compared-shapes"), (True, "--model-shapes"))
            for (m, n, k, t) in bench_lines(bench, flag)]


def gemm_key(m, n, k, t, model):
    return f"gemm {m}x{n}x{k}{TRANS_TAG[t]}" + (" [model]" if model else "")


def workloads(bench):
    """(key, kernel, phaselab benchmark name after "<variant>/", unit, per-iteration items or
    flops) of every row. Units: "ns/elem" (lower is better), "GFLOP/s" (higher is better), "us"."""
    return [
        ("exp n=4096", "exp", "n:4096", "ns/elem", 4096),
        ("softmax rows 256x64", "softmax_rows", "256x64", "ns/elem", 256 * 64),
        ("gaussian n=4096", "gaussian", "n:4096", "ns/elem", 4096),
        ("gaussian n=1M", "gaussian", "n:1048576", "ns/elem", 1 << 20),
        ("adam n=4096 (in cache)", "adam", "n:4096", "ns/elem", 4096),
    ] + [
        (gemm_key(*g), "gemm", f"{g[3]}/m:{g[0]}/n:{g[1]}/k:{g[2]}", "GFLOP/s", 2 * g[0] * g[1] * g[2])
        for g in gemm_shapes(bench)
    ] + [
        ("attention fwd n=128 d=64", "attention", "fwd/n:128/d:64", "us", None),
        ("attention bwd n=128 d=64", "attention_bwd", "bwd/n:128/d:64", "us", None),
        ("attention fwd n=128 d=64 causal", "attention", "fwd/n:128/d:64/causal", "us", None),
        ("attention bwd n=128 d=64 causal", "attention_bwd", "bwd/n:128/d:64/causal", "us", None),
    ]


def run_gbench(exe, regex, reps, min_time, env=None):
    """Median real time (ns) and counters per benchmark name."""
    cmd = [exe, f"--benchmark_filter={regex}", f"--benchmark_repetitions={reps}",
           f"--benchmark_min_time={min_time}", "--benchmark_report_aggregates_only=true",
           "--benchmark_format=json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    res = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue  # (with one repetition Google Benchmark reports the run, no aggregates)
        name = b["run_name"]
        scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
        res[name] = {"cpu_ns": b["cpu_time"] * scale, "real_ns": b["real_time"] * scale,
                     "gflops": b.get("GFLOPS")}
    return res


def torch_workloads(reps, shapes, only=None):
    """Median ns per call of each workload in PyTorch, one thread."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    torch.manual_seed(0)

    def timeit(fn, min_time=0.1):
        fn()
        n = 1
        while True:  # calibrate: one repetition lasts at least min_time
            t0 = time.process_time_ns()
            for _ in range(n):
                fn()
            dt = time.process_time_ns() - t0
            if dt >= min_time * 1e9:
                break
            n *= 2
        samples = []
        for _ in range(reps):
            t0 = time.process_time_ns()
            for _ in range(n):
                fn()
            samples.append((time.process_time_ns() - t0) / n)
        return statistics.median(samples)

    res = {}
    if only in (None, "gemm"):
        gemm_workloads(torch, timeit, res, shapes)
    if only is None:
        elementwise_workloads(torch, timeit, res)
    if only in (None, "attention", "attention_bwd"):
        attention_workloads(torch, F, timeit, res)
    return res, torch.__version__


def elementwise_workloads(torch, timeit, res):
    x = torch.empty(4096).uniform_(-10, 10)
    y = torch.empty(4096)
    res["exp n=4096"] = timeit(lambda: torch.exp(x, out=y))
    s = torch.empty(256, 64).uniform_(-8, 8)
    res["softmax rows 256x64"] = timeit(lambda: torch.softmax(s * 0.125, dim=-1))
    g = torch.empty(4096)
    res["gaussian n=4096"] = timeit(lambda: g.normal_())
    gl = torch.empty(1 << 20)
    res["gaussian n=1M"] = timeit(lambda: gl.normal_())
    p = torch.nn.Parameter(torch.empty(4096).uniform_(-1, 1))
    p.grad = torch.empty(4096).uniform_(-1, 1)
    opt = torch.optim.Adam([p], lr=1e-3, foreach=False)
    res["adam n=4096 (in cache)"] = timeit(opt.step)


def gemm_workloads(torch, timeit, res, shapes):
    for (m, n, k, t, model) in shapes:
        # the transposed operand stored transposed (a view of its transpose), as in phaselab's
        a = torch.empty(k, m).uniform_(-1, 1).T if t == "tn" else torch.empty(m, k).uniform_(-1, 1)
        b = torch.empty(n, k).uniform_(-1, 1).T if t == "nt" else torch.empty(k, n).uniform_(-1, 1)
        c = torch.empty(m, n)
        res[gemm_key(m, n, k, t, model)] = timeit(lambda: torch.mm(a, b, out=c))


def attention_workloads(torch, F, timeit, res):
    # Attention, one head, n = 128, d = 64: explicit ops with autograd (matching the kernel) and
    # PyTorch's fused scaled_dot_product_attention; the faster of the two is the baseline.
    n, d = 128, 64
    for causal in (False, True):
        tag = " causal" if causal else ""
        q, k, v = (torch.empty(n, d).uniform_(-1, 1).requires_grad_() for _ in range(3))
        do = torch.empty(n, d).uniform_(-1, 1)
        mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None

        def explicit_fwd():
            sc = (q @ k.T) * 0.125
            if causal:
                sc = sc.masked_fill(~mask, float("-inf"))
            return torch.softmax(sc, dim=-1) @ v

        def sdpa_fwd():
            return F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=causal,
                                                  scale=0.125)[0]

        for label, fwd in (("explicit", explicit_fwd), ("sdpa", sdpa_fwd)):
            with torch.no_grad():
                res[f"attention fwd n=128 d=64{tag} [{label}]"] = timeit(fwd)

            def fwd_bwd(fwd=fwd):
                q.grad = k.grad = v.grad = None
                fwd().backward(do)
            res[f"attention fwd+bwd n=128 d=64{tag} [{label}]"] = timeit(fwd_bwd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--json", help="also write every measurement here")
    ap.add_argument("--only", help="only the workloads of this kernel (e.g. gemm)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternate phaselab, OpenBLAS and PyTorch this many times (medians)")
    ap.add_argument("--isa", help="only this ISA's variants; the peers forced to it (avx2, avx512)")
    args = ap.parse_args()
    isa_env = {"avx2": ("AVX2", "AVX2", "Haswell"), "avx512": ("AVX512", "AVX512_CORE", "SkylakeX")}
    if args.isa in isa_env:  # before torch is imported (MKL and oneDNN read these at start-up)
        os.environ["MKL_ENABLE_INSTRUCTIONS"], os.environ["ONEDNN_MAX_CPU_ISA"] = isa_env[args.isa][:2]
    bench = os.path.join(args.build, "bench", "phaselab_bench")
    blas = os.path.join(args.build, "bench", "openblas_bench")
    if not os.path.exists(bench):
        sys.exit(f"{bench} not found: build with `meson setup {args.build} && ninja -C {args.build}`")

    rows = [w for w in workloads(bench) if not args.only or w[1] == args.only]
    shapes_gemm = gemm_shapes(bench)
    # The variant dispatch selects for each kernel (under --isa: restricted to that ISA and those
    # it implies): the figure a user gets, and the one the ratios are quoted for.
    try:
        dispatch = dict(bench_lines(bench, "--dispatch", args.isa or "best"))
    except subprocess.CalledProcessError:
        dispatch = {}  # an ISA this build does not know: the fastest variant stands in
    kernels = sorted({w[1] for w in rows})
    shapes = "|".join(sorted({w[2] for w in rows}))
    variant = f"[a-z0-9_]+\\.{args.isa}" if args.isa else "[a-z0-9_.]+"  # --isa: no scalar runs
    regex = f"^(peak/.*|({'|'.join(kernels)})\\.{variant}/({shapes}))$"
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    env["OPENBLAS_NUM_THREADS"] = "1"
    if args.isa in isa_env:
        env["OPENBLAS_CORETYPE"] = isa_env[args.isa][2]
    if not os.path.exists(blas):
        print("openblas_bench not built (apt-get install libopenblas-dev, then reconfigure)",
              file=sys.stderr)
    # --rounds: the three implementations in alternation, so that a load change on a shared
    # machine hits all of them alike; every figure is the median over rounds of the per-round
    # medians.
    rounds_ours, rounds_blas, rounds_torch = [], [], []
    torch_version = None
    for rnd in range(args.rounds):
        print(f"round {rnd + 1}/{args.rounds}: phaselab_bench ...", file=sys.stderr)
        o = run_gbench(bench, regex, args.reps, args.min_time)
        if args.isa:
            o = {k: v for k, v in o.items()
                 if k.startswith("peak/") or k.split("/")[0].endswith("." + args.isa)
                 or k.split("/")[0].endswith(".scalar")}
        rounds_ours.append(o)
        if os.path.exists(blas):
            print(f"round {rnd + 1}/{args.rounds}: openblas_bench ...", file=sys.stderr)
            rounds_blas.append(run_gbench(blas, "openblas/.*", args.reps, args.min_time, env))
        try:
            print(f"round {rnd + 1}/{args.rounds}: PyTorch ...", file=sys.stderr)
            t, torch_version = torch_workloads(args.reps, shapes_gemm, args.only)
            rounds_torch.append(t)
        except ImportError:
            print("PyTorch not importable (pip install torch)", file=sys.stderr)

    def med_rounds(rs):
        out = {}
        for k in set().union(*rs) if rs else []:
            vals = [r[k] for r in rs if k in r]
            srt = sorted(vals, key=lambda v: v["cpu_ns"])
            out[k] = srt[len(srt) // 2]  # the round with the median time (its counters too)
        return out

    ours, blas_res = med_rounds(rounds_ours), med_rounds(rounds_blas)
    torch_res = {k: statistics.median(r[k] for r in rounds_torch if k in r)
                 for k in set().union(*rounds_torch)} if rounds_torch else {}

    peak = {k.split("/")[-1]: v["gflops"] for k, v in ours.items() if k.startswith("peak/")}
    lines = []
    lines.append(f"FMA-loop peak, one core: " +
                 ", ".join(f"{isa} {g:.0f} GFLOP/s" for isa, g in sorted(peak.items())) +
                 (f"; PyTorch {torch_version}" if torch_version else "") +
                 (f"; ISA forced to {args.isa} (OpenBLAS core {isa_env[args.isa][2]}, MKL/oneDNN "
                  f"{isa_env[args.isa][0]})" if args.isa in isa_env else "") + "\n")
    lines.append("| workload | phaselab variant (dispatch) | phaselab | fastest variant | scalar | "
                 "hwy (same ISA) | PyTorch | phaselab / PyTorch | OpenBLAS | phaselab / OpenBLAS | "
                 "% of peak |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")

    def per_item(ns, items):
        return ns / items

    for key, kernel, shape, unit, size in rows:
        cands = {name.split("/")[0]: r for name, r in ours.items()
                 if name.startswith(kernel + ".") and name.endswith("/" + shape)
                 and name.split("/", 1)[1] == shape}
        if not cands:
            continue
        fastest = min(cands, key=lambda n: cands[n]["cpu_ns"])
        best_name = dispatch.get(kernel) if dispatch.get(kernel) in cands else fastest
        best = cands[best_name]
        isa = best_name.split(".")[-1]
        hwy = cands.get(f"{kernel}.hwy.{isa}")
        scalar = cands.get(f"{kernel}.scalar")

        def fmt(r):
            if r is None:
                return "-"
            if unit == "ns/elem":
                return f"{per_item(r['cpu_ns'], size):.3f} ns/elem"
            if unit == "GFLOP/s":
                return f"{r['gflops']:.1f} GFLOP/s"
            return f"{r['cpu_ns'] / 1e3:.1f} us"

        tkey = key
        t = torch_res.get(tkey)
        if kernel.startswith("attention"):
            t = None  # attention is compared fwd+bwd below
        torch_cell, ratio_t = "-", "-"
        if t is not None:
            if unit == "GFLOP/s":
                torch_cell = f"{size / t:.1f} GFLOP/s"
            else:
                torch_cell = f"{t / size:.3f} ns/elem"
            ratio_t = f"{t / best['cpu_ns']:.2f}x"
        blas_cell, ratio_b, pct = "-", "-", "-"
        if kernel == "gemm":
            b = blas_res.get("openblas/sgemm/" + shape)
            if b:
                blas_cell = f"{b['gflops']:.1f} GFLOP/s"
                ratio_b = f"{best['gflops'] / b['gflops']:.2f}x"
            if isa in peak:
                pct = f"{100 * best['gflops'] / peak[isa]:.0f}% {isa}"
        fast_cell = "same" if fastest == best_name else f"{fastest} {fmt(cands[fastest])}"
        lines.append(f"| {key} | {best_name} | {fmt(best)} | {fast_cell} | {fmt(scalar)} | {fmt(hwy)} | "
                     f"{torch_cell} | {ratio_t} | {blas_cell} | {ratio_b} | {pct} |")

    # Fused attention forward + backward against PyTorch (explicit ops and SDPA).
    lines.append("")
    lines.append("| attention n=128 d=64, forward + backward | phaselab (dispatched fwd + bwd) | "
                 "PyTorch explicit | PyTorch SDPA | phaselab speed-up vs faster PyTorch |")
    lines.append("|---|---|---|---|---|")
    for tag, sfx in (("", ""), (" causal", "/causal")):
        def best_of(kernel, shape):
            c = {n.split("/")[0]: r for n, r in ours.items()
                 if n.startswith(kernel + ".") and n.split("/", 1)[1] == shape}
            if not c:
                return None, None
            nm = dispatch.get(kernel) if dispatch.get(kernel) in c else min(
                c, key=lambda n: c[n]["cpu_ns"])
            return nm, c[nm]["cpu_ns"]
        fn, f_ns = best_of("attention", "fwd/n:128/d:64" + sfx)
        bn, b_ns = best_of("attention_bwd", "bwd/n:128/d:64" + sfx)
        if f_ns is None or b_ns is None:
            continue
        ex = torch_res.get(f"attention fwd+bwd n=128 d=64{tag} [explicit]")
        sd = torch_res.get(f"attention fwd+bwd n=128 d=64{tag} [sdpa]")
        ours_ns = f_ns + b_ns
        faster = min(x for x in (ex, sd) if x is not None) if (ex or sd) else None
        lines.append(f"| {'causal' if tag else 'dense'} | {ours_ns / 1e3:.1f} us ({fn}, {bn}) | "
                     f"{ex / 1e3 if ex else float('nan'):.1f} us | "
                     f"{sd / 1e3 if sd else float('nan'):.1f} us | "
                     f"{(faster / ours_ns) if faster else float('nan'):.2f}x |")
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"phaselab": ours, "openblas": blas_res, "torch": torch_res,
                       "torch_version": torch_version}, f, indent=1)


if __name__ == "__main__":
    main()
