#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One markov_icl training step, phaselab vs PyTorch (CPU), side by side.

The model: token embedding + learned positions, L pre-LN blocks (causal softmax attention, 1 head,
no linear biases; GELU-tanh MLP of width 4 d), final LN, untied unembedding to C logits,
cross-entropy at every position, AdamW (lr 1e-3, betas 0.9/0.95). The same shapes as
bench/markov_step.cc, which times phaselab's step (batch sampling included).

    python3 bench/markov_vs_torch.py [--build build] [--threads 1 2] [--reps 20] [--rounds 3]
                                     [--d 64 --N 128 --batch 64] [--target avx2] [--no-jax]

JAX (`pip install "jax[cpu]"`) runs the same model and AdamW step under one jax.jit, float32, in
its own process per thread count (XLA_FLAGS="--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1" for one thread; the process held to as many cores as threads,
since XLA's runtime threads otherwise add CPU time beside the compute thread), starting from the
weights and batch PyTorch starts from: the training losses of the first steps are printed for
both and must agree to a few digits (float32 rounding). --no-jax skips it.

Prints medians per implementation and thread count, the ratios peer/phaselab, the FLOP count
(matrix products only; attention counts the causal half) and the rate as % of the single-core
peak measured by markov_step --peak (the FMA loop of the widest ISA). Rounds alternate the
implementations so that machine noise hits all alike. --target forces phaselab's kernels
(e.g. avx2 on an AVX-512 machine).
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def make_torch_net(d, N, C, layers):
    """The Markov model in PyTorch (pre-LN GPT block, tanh GELU, no biases in the linear maps),
    built from torch's current random state; the peers of both benchmark scripts use it."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d, bias=False)
            self.o = nn.Linear(d, d, bias=False)
            self.ln2 = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 4 * d, bias=False)
            self.proj = nn.Linear(4 * d, d, bias=False)

        def forward(self, x):
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            a = F.scaled_dot_product_attention(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1),
                                               is_causal=True).squeeze(1)
            y = x + self.o(a)
            return y + self.proj(F.gelu(self.fc(self.ln2(y)), approximate="tanh"))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(C, d)
            self.wpe = nn.Parameter(torch.randn(N, d) * 0.01)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.lnf = nn.LayerNorm(d)
            self.u = nn.Linear(d, C, bias=False)

        def forward(self, x):
            h = self.wte(x) + self.wpe
            for b in self.blocks:
                h = b(h)
            return self.u(self.lnf(h))

    return Net()


def torch_step_ms(threads, d, N, B, C, layers, reps, init_out=None):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    torch.manual_seed(0)

    net = make_torch_net(d, N, C, layers)
    if init_out is not None:  # the initial weights and the batch, for the JAX run to start from
        import numpy as np
        np.savez(init_out, seq=seq_np(B, N, C), **{k: v.detach().numpy() for k, v in net.state_dict().items()})
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.0)
    seq = torch.from_numpy(seq_np(B, N, C)).long()
    times, cpu, losses = [], [], []
    for r in range(reps + 3):
        t0, c0 = time.perf_counter(), time.process_time()
        logits = net(seq[:, :N])
        loss = F.cross_entropy(logits.reshape(-1, C), seq[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if r >= 3:
            times.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
    return statistics.median(times), statistics.median(cpu), torch.__version__, losses


def seq_np(B, N, C):
    """The fixed batch every implementation trains on (B x (N + 1) tokens)."""
    import numpy as np
    return np.random.default_rng(0).integers(0, C, size=(B, N + 1)).astype(np.int32)


JAX_FLAGS = {1: "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}


def jax_worker(args):
    """Runs in its own process (XLA's thread count is fixed when the backend starts): the same
    model and AdamW step as torch_step_ms, jax.jit over the whole step, from the weights and batch
    torch saved. Prints one line of key=value pairs."""
    t = args.threads[0]
    # XLA keeps runtime threads of its own beside the compute threads the flags set (one thread
    # used 1.7 CPU seconds per second): the process is held to t cores, as phaselab and PyTorch
    # are by their thread counts.
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:t])
    os.environ["XLA_FLAGS"] = JAX_FLAGS.get(
        t, f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={t}")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    import numpy as np

    z = np.load(args.jax_worker)
    seq = jnp.asarray(z["seq"])
    params = {k: jnp.asarray(z[k]) for k in z.files if k != "seq"}
    d, N = args.d, args.N
    layers = len({k.split(".")[1] for k in params if k.startswith("blocks.")})  # as torch saved
    lr, b1, b2, eps = 1e-3, 0.9, 0.95, 1e-8

    def ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b

    mask = jnp.tril(jnp.ones((N, N), dtype=bool))

    def loss_fn(p, seq):
        x, y = seq[:, :N], seq[:, 1:]
        h = p["wte.weight"][x] + p["wpe"]
        for l in range(layers):
            w = lambda n: p[f"blocks.{l}.{n}"]
            q, k, v = jnp.split(ln(h, w("ln1.weight"), w("ln1.bias")) @ w("qkv.weight").T, 3, axis=-1)
            s = jnp.where(mask, q @ k.transpose(0, 2, 1) * (1.0 / np.sqrt(d)), -jnp.inf)
            h = h + (jax.nn.softmax(s, axis=-1) @ v) @ w("o.weight").T
            f = jax.nn.gelu(ln(h, w("ln2.weight"), w("ln2.bias")) @ w("fc.weight").T, approximate=True)
            h = h + f @ w("proj.weight").T
        u = ln(h, p["lnf.weight"], p["lnf.bias"]) @ p["u.weight"].T
        lse = jax.nn.logsumexp(u, axis=-1)
        return (lse - jnp.take_along_axis(u, y[..., None], axis=-1)[..., 0]).mean()

    def step(p, m, v, t, seq):
        loss, g = jax.value_and_grad(loss_fn)(p, seq)
        t = t + 1
        m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        p = jax.tree_util.tree_map(lambda p, m, v: p - lr / c1 * m / (jnp.sqrt(v) / jnp.sqrt(c2) + eps),
                                   p, m, v)
        return p, m, v, t, loss

    step = jax.jit(step, donate_argnums=(0, 1, 2))
    m = jax.tree_util.tree_map(jnp.zeros_like, params)
    v = jax.tree_util.tree_map(jnp.zeros_like, params)
    tt = jnp.zeros((), jnp.float32)
    times, cpu, losses = [], [], []
    for r in range(args.reps + 3):
        t0, c0 = time.perf_counter(), time.process_time()
        params, m, v, tt, loss = step(params, m, v, tt, seq)
        loss.block_until_ready()
        losses.append(float(loss))
        if r >= 3:
            times.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
    print(f"median_ms={statistics.median(times):.4f} cpu_ms={statistics.median(cpu):.4f} "
          f"version={jax.__version__} losses={','.join(f'{x:.9g}' for x in losses)}")


def jax_step_ms(threads, d, N, B, reps, init):
    cmd = [sys.executable, os.path.abspath(__file__), "--jax-worker", init, "--threads", str(threads),
           "--d", str(d), "--N", str(N), "--batch", str(B), "--reps", str(reps)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    kv = dict(re.findall(r"(\w+)=(\S+)", out))
    return (float(kv["median_ms"]), float(kv["cpu_ms"]), kv["version"],
            [float(x) for x in kv["losses"].split(",")])


def phaselab_step(build, threads, d, N, B, reps, peak, target=""):
    cmd = [f"{build}/bench/markov_step", "--threads", str(threads), "--d", str(d), "--N", str(N),
           "--batch", str(B), "--reps", str(reps)] + (["--peak"] if peak else []) + \
          (["--target", target] if target else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return dict(re.findall(r"(\w+)=(\S+)", out))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--N", type=int, default=128)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--target", default="", help="force a phaselab kernel target (e.g. avx2)")
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--jax-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.jax_worker:
        return jax_worker(args)
    use_jax = not args.no_jax
    if use_jax:
        try:
            import jax  # noqa: F401
        except ImportError:
            print("(jax not installed: pip install 'jax[cpu]'; running without it)")
            use_jax = False

    info = phaselab_step(args.build, 1, 8, 8, 1, 1, True, args.target)
    C, layers = int(info["C"]), int(info["layers"])  # the model markov_step times
    peak_isa = info.get("peak_isa", "?")
    peak = float(info.get("peak_gflops_1core", "nan"))
    rows = []
    agree = None
    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "init.npz")
        for t in args.threads:
            pl_ms, th_ms, jx_ms, pl_cpu, th_cpu, jx_cpu, info = [], [], [], [], [], [], {}
            tv = jv = "-"
            for r in range(args.rounds):
                info = phaselab_step(args.build, t, args.d, args.N, args.batch, args.reps, False, args.target)
                pl_ms.append(float(info["median_ms"]))
                pl_cpu.append(float(info["cpu_ms"]))
                ms, cms, tv, tl = torch_step_ms(t, args.d, args.N, args.batch, C, layers, args.reps,
                                                init if use_jax else None)
                th_ms.append(ms)
                th_cpu.append(cms)
                if use_jax:
                    ms, cms, jv, jl = jax_step_ms(t, args.d, args.N, args.batch, args.reps, init)
                    jx_ms.append(ms)
                    jx_cpu.append(cms)
                    if agree is None:
                        agree = (tl, jl)
            med = lambda v: statistics.median(v) if v else math.nan
            rows.append(dict(t=t, pl=med(pl_ms), th=med(th_ms), jx=med(jx_ms), plc=med(pl_cpu),
                             thc=med(th_cpu), jxc=med(jx_cpu), flops=float(info["flops"]),
                             target=info.get("target", "?"),
                             tv=tv, jv=jv))
    print(f"one training step: d_model {args.d}, N {args.N}, batch {args.batch}, 1 head, {layers} layers, "
          f"GELU MLP 4x, pre-LN, C {C}; FLOPs/step {rows[0]['flops']:.4g} (matrix products, fwd + 2x bwd)")
    print(f"phaselab kernel target {rows[0]['target']}; single-core peak ({peak_isa} FMA loop, per CPU "
          f"second): {peak:.1f} GFLOP/s")
    print("wall = median wall time per step; cpu = median process CPU time per step (all threads);")
    print("GFLOP/s and % of peak from phaselab's CPU time; ratios peer/phaselab (cpu)")
    print(f"{'threads':>7} {'phaselab ms':>12} {'torch ms':>9} {'jax ms':>9} {'GFLOP/s':>8} {'% peak':>7} "
          f"{'cpu: phaselab':>14} {'torch':>8} {'jax':>8} {'torch/pl':>9} {'jax/pl':>7}")
    for w in rows:
        g = w["flops"] / w["plc"] * 1e-6  # rate per CPU second: robust to a loaded machine
        print(f"{w['t']:>7} {w['pl']:>12.2f} {w['th']:>9.2f} {w['jx']:>9.2f} {g:>8.1f} "
              f"{100 * g / peak if peak == peak else math.nan:>7.1f} {w['plc']:>14.2f} {w['thc']:>8.2f} "
              f"{w['jxc']:>8.2f} {w['thc'] / w['plc']:>9.2f} {w['jxc'] / w['plc']:>7.2f}")
    # Is the 3x target reachable at all? The FLOP rate a step 3x faster than the fastest peer would
    # need, per CPU second, vs the 1-core FMA peak.
    print("3x the fastest peer would need (counted FLOPs / (peer CPU time / 3)):")
    for w in rows:
        best = min(w["thc"], w["jxc"]) if w["jxc"] == w["jxc"] else w["thc"]
        need = w["flops"] / (best / 3) * 1e-6
        print(f"  {w['t']} thread(s): {need:.1f} GFLOP/s per CPU second = {100 * need / peak:.0f}% of the "
              f"1-core peak (phaselab now: {w['flops'] / w['plc'] * 1e-6:.1f})")
    if agree:
        tl, jl = agree
        n = min(len(tl), len(jl), 5)
        rel = max(abs(a - b) / abs(a) for a, b in zip(tl[:n], jl[:n]))
        print(f"same weights, same batch: training loss of steps 1..{n}: torch "
              f"{', '.join(f'{x:.6f}' for x in tl[:n])}; jax {', '.join(f'{x:.6f}' for x in jl[:n])}; "
              f"max relative difference {rel:.1e}")
    print(f"torch {rows[0]['tv']}, jax {rows[0]['jv']}; medians over {args.rounds} alternating rounds of "
          f"{args.reps} steps")


if __name__ == "__main__":
    sys.exit(main())
