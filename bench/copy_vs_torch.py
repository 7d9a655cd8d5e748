#!/usr/bin/env python3
"""Side-by-side speed of the copy-task Adam training: phaselab vs PyTorch (CPU, float32).

Same model and objective in both (spec copy-task.md): A = row-softmax(G), F = A X W^T,
obj = (1/(P L)) sum ||F - Y||^2 + kappa/(P sw2) ||W||^2 + kappa/(P sg2) ||G||^2 with the priors as
Adam's L2 weight decay, full batch, lr 1e-2, a fixed number of steps, one thread each.

    python3 bench/copy_vs_torch.py [--build build] [--L 16 --V 4 --P 1000 --steps 1000]

Prints the median wall and CPU time of each (--reps repetitions) and the ratios torch / phaselab,
for torch's einsum formulation and for its fastest one ("flat": one GEMM over all sequences and
mse_loss). phaselab runs the fused one-hot kernel posattn_onehot_sse.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time


def torch_times(L, V, P, steps, reps, attention, form):
    import torch

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    tok = torch.randint(0, V, (P, L), generator=g)
    X = torch.nn.functional.one_hot(tok, V).float()  # P x L x V
    Y = torch.roll(X, shifts=1, dims=1)  # y_l = x_{l-1 mod L}
    # "flat": all sequences side by side, X as L x (P V), so A X is one GEMM (torch's fastest
    # formulation we found; einsum and batched matmul are 15-40% slower).
    Xf = X.permute(1, 0, 2).reshape(L, P * V).contiguous()
    Yf = Y.permute(1, 0, 2).contiguous()  # L x P x V
    kappa = sw2 = sg2 = 1.0
    times, cpu = [], []
    for _ in range(reps):
        W = (0.1 * torch.randn(V, V, generator=g)).requires_grad_()
        G = (0.1 * torch.randn(L, L, generator=g)).requires_grad_()
        opt = torch.optim.Adam([
            {"params": [W], "weight_decay": 2 * kappa / (P * sw2)},
            {"params": [G], "weight_decay": 2 * kappa / (P * sg2)},
        ], lr=1e-2, betas=(0.9, 0.999), eps=1e-8)
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            opt.zero_grad(set_to_none=False)
            A = torch.softmax(G, dim=1) if attention == "softmax" else G
            if form == "einsum":
                F = torch.einsum("lk,pkv->plv", A, X) @ W.T
                loss = ((F - Y) ** 2).sum() / (P * L)
            else:
                F = (A @ Xf).reshape(L, P, V) @ W.T
                loss = torch.nn.functional.mse_loss(F, Yf, reduction="sum") / (P * L)
            loss.backward()
            opt.step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return times, cpu, float(loss.detach())


def phaselab_times(build, L, V, P, steps, reps, attention):
    exe = os.path.join(build, "plugins", "copy_task", "phaselab_copy_bench")
    out = subprocess.run([exe, "--L", str(L), "--V", str(V), "--P", str(P), "--steps", str(steps),
                          "--reps", str(reps), "--attention", attention],
                         check=True, capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1")).stdout
    reps_ = re.findall(r"rep \d+: ([0-9.]+) ms cpu ([0-9.]+) ms", out)
    info = re.search(r"target (\S+) posattn (\S+)", out)
    return ([float(w) / 1000 for w, _ in reps_], [float(c) / 1000 for _, c in reps_],
            (info.group(1), info.group(2)) if info else ("?", "?"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--L", type=int, default=16)
    ap.add_argument("--V", type=int, default=4)
    ap.add_argument("--P", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--attention", default="softmax", choices=["softmax", "linear"])
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("PyTorch is not installed (pip install torch --index-url https://download.pytorch.org/whl/cpu)")
    pt, pc, (target, variant) = phaselab_times(a.build, a.L, a.V, a.P, a.steps, a.reps, a.attention)
    med = statistics.median
    forms = {f: torch_times(a.L, a.V, a.P, a.steps, a.reps, a.attention, f) for f in ("einsum", "flat")}
    print(f"copy task Adam: L={a.L} V={a.V} P={a.P} steps={a.steps} {a.attention}, 1 thread, float32,"
          f" medians of {a.reps}")
    print(f"{'':28} {'wall ms':>10} {'cpu ms':>10} {'cpu us/step':>12}")
    print(f"{'phaselab ' + target + ' ' + variant:28} {med(pt) * 1e3:10.2f} {med(pc) * 1e3:10.2f}"
          f" {med(pc) / a.steps * 1e6:12.2f}")
    for f, (tt, tc, _) in forms.items():
        print(f"{'torch ' + torch.__version__ + ' ' + f:28} {med(tt) * 1e3:10.2f} {med(tc) * 1e3:10.2f}"
              f" {med(tc) / a.steps * 1e6:12.2f}")
    for f, (tt, tc, _) in forms.items():
        print(f"ratio torch {f}/phaselab: wall {med(tt) / med(pt):.1f}x, cpu {med(tc) / med(pc):.1f}x")
    best = min(forms, key=lambda f: med(forms[f][1]))
    print(f"ratio vs torch's fastest ({best}): cpu {med(forms[best][1]) / med(pc):.1f}x")


if __name__ == "__main__":
    main()
