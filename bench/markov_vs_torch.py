#!/usr/bin/env python3
"""One markov_icl training step, phaselab vs PyTorch (CPU), side by side.

The model: token embedding + learned positions, L pre-LN blocks (causal softmax attention, 1 head,
no linear biases; GELU-tanh MLP of width 4 d), final LN, untied unembedding to C logits,
cross-entropy at every position, AdamW (lr 1e-3, betas 0.9/0.95). The same shapes as
bench/markov_step.cc, which times phaselab's step (batch sampling included).

    python3 bench/markov_vs_torch.py [--build build] [--threads 1 2] [--reps 20] [--rounds 3]

Prints medians per implementation and thread count, the ratio torch/phaselab, the FLOP count
(matrix products only; attention counts the causal half) and the rate as % of the single-core
peak measured by markov_step --peak (an AVX-512 FMA loop). Rounds alternate the two
implementations so that machine noise hits both alike.
"""
import argparse
import math
import re
import statistics
import subprocess
import sys
import time


def torch_step_ms(threads, d, N, B, C, layers, reps):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    torch.manual_seed(0)

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

    net = Net()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.0)
    seq = torch.randint(0, C, (B, N + 1))
    times, cpu = [], []
    for r in range(reps + 3):
        t0, c0 = time.perf_counter(), time.process_time()
        logits = net(seq[:, :N])
        loss = F.cross_entropy(logits.reshape(-1, C), seq[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if r >= 3:
            times.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
    return statistics.median(times), statistics.median(cpu), torch.__version__


def phaselab_step(build, threads, d, N, B, reps, peak):
    cmd = [f"{build}/bench/markov_step", "--threads", str(threads), "--d", str(d), "--N", str(N),
           "--batch", str(B), "--reps", str(reps)] + (["--peak"] if peak else [])
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
    args = ap.parse_args()
    C, layers = 10, 2

    peak = float(phaselab_step(args.build, 1, 8, 8, 1, 1, True).get("peak_gflops_1core", "nan"))
    rows = []
    for t in args.threads:
        pl_ms, th_ms, pl_cpu, th_cpu, info = [], [], [], [], {}
        for _ in range(args.rounds):
            info = phaselab_step(args.build, t, args.d, args.N, args.batch, args.reps, False)
            pl_ms.append(float(info["median_ms"]))
            pl_cpu.append(float(info["cpu_ms"]))
            ms, cms, tv = torch_step_ms(t, args.d, args.N, args.batch, C, layers, args.reps)
            th_ms.append(ms)
            th_cpu.append(cms)
        flops = float(info["flops"])
        p, q = statistics.median(pl_ms), statistics.median(th_ms)
        rows.append((t, p, q, flops, tv,
                     statistics.median(pl_cpu), statistics.median(th_cpu)))
    print(f"one training step: d_model {args.d}, N {args.N}, batch {args.batch}, 1 head, {layers} layers, "
          f"GELU MLP 4x, pre-LN, C {C}; FLOPs/step {rows[0][3]:.4g} (matrix products, fwd + 2x bwd)")
    print(f"single-core peak (AVX-512 FMA loop, per CPU second): {peak:.1f} GFLOP/s")
    print("wall = median wall time per step; cpu = median process CPU time per step (all threads)")
    print(f"{'threads':>7} {'phaselab ms':>12} {'torch ms':>10} {'torch/phaselab':>15} "
          f"{'GFLOP/s (cpu)':>17} {'% 1-core peak':>14} {'cpu: phaselab':>14} {'torch':>9} "
          f"{'ratio':>6}")
    for t, p, q, flops, tv, pc, qc in rows:
        g = flops / pc * 1e-6  # rate per CPU second: robust to a loaded machine
        print(f"{t:>7} {p:>12.2f} {q:>10.2f} {q / p:>15.2f} {g:>17.1f} "
              f"{100 * g / peak if peak == peak else math.nan:>14.1f} {pc:>14.2f} {qc:>9.2f} "
              f"{qc / pc:>6.2f}")
    # Is the 3x target reachable at all? The FLOP rate a step 3x faster than torch would need, vs
    # the FMA peak of the cores used (wall clock), and per CPU second (robust to a loaded machine).
    print("3x torch would need (counted FLOPs / (torch time / 3)):")
    for t, p, q, flops, tv, pc, qc in rows:
        need_wall, need_cpu = flops / (q / 3) * 1e-6, flops / (qc / 3) * 1e-6
        print(f"  {t} thread(s): {need_wall:.1f} GFLOP/s wall = {100 * need_wall / (t * peak):.0f}% of the "
              f"{t}-core peak; per CPU second {need_cpu:.1f} GFLOP/s = {100 * need_cpu / peak:.0f}% of the "
              f"1-core peak (phaselab now: {flops / pc * 1e-6:.1f})")
    print(f"torch {rows[0][5]}; medians over {args.rounds} alternating rounds of {args.reps} steps")


if __name__ == "__main__":
    sys.exit(main())
