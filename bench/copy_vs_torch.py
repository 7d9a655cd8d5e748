#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Side-by-side speed of the copy-task Adam training: phaselab vs PyTorch and JAX (CPU, float32).

Same model and objective in both (docs/copy-task.md): A = row-softmax(G), F = A X W^T,
obj = (1/(P L)) sum ||F - Y||^2 + kappa/(P sw2) ||W||^2 + kappa/(P sg2) ||G||^2 with the priors as
Adam's L2 weight decay, full batch, lr 1e-2, a fixed number of steps, one thread each.

    python3 bench/copy_vs_torch.py [--build build] [--L 16 --V 4 --P 1000 --steps 1000]

Prints the median wall and CPU time of each (--reps repetitions) and the ratios torch / phaselab.
Three torch formulations of the same objective and gradients (autograd):
  einsum  A X^mu W^T per sequence by einsum, squared error summed;
  flat    all sequences side by side (X as L x (P V)): one GEMM, mse_loss;
  stats   the algorithm phaselab uses for full batches: token counts C (L V x L V) and D gathered
          once, then sse = sum_i A_i S A_i^T - 2 <A, T> + n with S, T contracted from C, D and W
          (cost independent of P);
and two phaselab paths: `stats` (posattn_gram_sse, the default for this shape) and `direct`
(posattn_onehot_sse, one pass over the P sequences per step). The one-time count gathering is
timed separately for both (it is not part of the training loop of either).
JAX (`pip install "jax[cpu]"`, skipped with --no-jax) runs the same three forms, the whole loop of
`steps` Adam steps under one jax.jit (lax.fori_loop), one XLA thread (XLA_FLAGS=
"--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1", the process held to one
core), compile time excluded.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time


def torch_times(L, V, P, steps, reps, attention, form, hp):
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
    kappa, sw2, sg2 = hp["kappa"], hp["sw2"], hp["sg2"]
    prep = 0.0
    if form == "stats":
        c0 = time.process_time()
        Xp = X.reshape(P, L * V)
        C4 = (Xp.T @ Xp).reshape(L, V, L, V)  # C4[k, u, k', u'] = #{mu: x_k = u, x_k' = u'}
        D4 = (Y.reshape(P, L * V).T @ Xp).reshape(L, V, L, V)  # D4[i, o, k, u]
        n_loss = float(P * L)  # cyclic wrap: every row has a target
        prep = time.process_time() - c0
    times, cpu = [], []
    for _ in range(reps):
        W = (0.1 * torch.randn(V, V, generator=g)).requires_grad_()
        G = (0.1 * torch.randn(L, L, generator=g)).requires_grad_()
        opt = torch.optim.Adam([
            {"params": [W], "weight_decay": 2 * kappa / (P * sw2)},
            {"params": [G], "weight_decay": 2 * kappa / (P * sg2)},
        ], lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"])
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            opt.zero_grad(set_to_none=False)
            A = torch.softmax(G, dim=1) if attention == "softmax" else G
            if form == "einsum":
                F = torch.einsum("lk,pkv->plv", A, X) @ W.T
                loss = ((F - Y) ** 2).sum() / (P * L)
            elif form == "stats":
                S = torch.einsum("aubv,uv->ab", C4, W.T @ W)
                T = torch.einsum("iokw,ow->ik", D4, W)
                loss = ((A * (A @ S)).sum() - 2 * (A * T).sum() + n_loss) / (P * L)
            else:
                F = (A @ Xf).reshape(L, P, V) @ W.T
                loss = torch.nn.functional.mse_loss(F, Yf, reduction="sum") / (P * L)
            loss.backward()
            opt.step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    with torch.no_grad():  # the MAP objective at the end, priors included (phaselab reports it)
        obj = float(loss) + kappa / (P * sw2) * float((W * W).sum()) + kappa / (P * sg2) * float((G * G).sum())
    return times, cpu, obj, prep


def jax_times(L, V, P, steps, reps, attention, form, hp):
    """The same objective, Adam and forms in JAX: jax.jit over the whole training loop
    (lax.fori_loop of `steps` Adam steps), float32, one XLA thread. Compile time excluded."""
    # XLA keeps runtime threads beside its one compute thread: the process (phaselab and PyTorch
    # are done by now) is held to one core, so that CPU time compares one core with one core.
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])
    os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(1)
    tok = rng.integers(0, V, size=(P, L))
    X = jnp.asarray(np.eye(V, dtype=np.float32)[tok])  # P x L x V
    Y = jnp.roll(X, 1, axis=1)
    Xf = X.transpose(1, 0, 2).reshape(L, P * V)
    Yf = Y.transpose(1, 0, 2)
    kappa, sw2, sg2 = hp["kappa"], hp["sw2"], hp["sg2"]
    wd_w, wd_g = 2 * kappa / (P * sw2), 2 * kappa / (P * sg2)
    lr, b1, b2, eps = hp["lr"], hp["beta1"], hp["beta2"], hp["eps"]
    prep = 0.0
    if form == "stats":
        c0 = time.process_time()
        Xp = X.reshape(P, L * V)
        C4 = (Xp.T @ Xp).reshape(L, V, L, V)
        D4 = (Y.reshape(P, L * V).T @ Xp).reshape(L, V, L, V)
        C4.block_until_ready(), D4.block_until_ready()
        prep = time.process_time() - c0
        n_loss = float(P * L)

    def loss_fn(wg):
        W, G = wg
        A = jax.nn.softmax(G, axis=1) if attention == "softmax" else G
        if form == "einsum":
            F = jnp.einsum("lk,pkv->plv", A, X) @ W.T
            return ((F - Y) ** 2).sum() / (P * L)
        if form == "stats":
            S = jnp.einsum("aubv,uv->ab", C4, W.T @ W)
            T = jnp.einsum("iokw,ow->ik", D4, W)
            return ((A * (A @ S)).sum() - 2 * (A * T).sum() + n_loss) / (P * L)
        F = (A @ Xf).reshape(L, P, V) @ W.T
        return ((F - Yf) ** 2).sum() / (P * L)

    grad = jax.value_and_grad(loss_fn)

    def train(W, G):
        def body(i, st):
            (W, G), (mW, mG), (vW, vG), _ = st
            loss, (gW, gG) = grad((W, G))
            gW, gG = gW + wd_w * W, gG + wd_g * G  # Adam's L2 weight decay, as torch.optim.Adam
            t = (i + 1).astype(jnp.float32)
            c1, c2 = 1 - b1 ** t, 1 - b2 ** t
            out = []
            for p, m, v, g in ((W, mW, vW, gW), (G, mG, vG, gG)):
                m = b1 * m + (1 - b1) * g
                v = b2 * v + (1 - b2) * g * g
                out.append((p - lr / c1 * m / (jnp.sqrt(v) / jnp.sqrt(c2) + eps), m, v))
            return ((out[0][0], out[1][0]), (out[0][1], out[1][1]), (out[0][2], out[1][2]), loss)
        z = (jnp.zeros_like(W), jnp.zeros_like(G))
        (W, G), _, _, loss = jax.lax.fori_loop(0, steps, body, ((W, G), z, z, jnp.float32(0)))
        return W, G, loss

    train = jax.jit(train)
    times, cpu = [], []
    obj = float("nan")
    for r in range(reps + 1):
        W = jnp.asarray(0.1 * rng.standard_normal((V, V)), jnp.float32)
        G = jnp.asarray(0.1 * rng.standard_normal((L, L)), jnp.float32)
        t0, c0 = time.perf_counter(), time.process_time()
        W, G, loss = train(W, G)
        loss.block_until_ready()
        if r > 0:  # the first call compiles
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        obj = float(loss) + kappa / (P * sw2) * float((W * W).sum()) + kappa / (P * sg2) * float((G * G).sum())
    return times, cpu, obj, prep, jax.__version__


def phaselab_times(build, L, V, P, steps, reps, attention, path):
    exe = os.path.join(build, "plugins", "copy_task", "phaselab_copy_bench")
    out = subprocess.run([exe, "--L", str(L), "--V", str(V), "--P", str(P), "--steps", str(steps),
                          "--reps", str(reps), "--attention", attention, "--path", path],
                         check=True, capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1")).stdout
    reps_ = re.findall(r"rep \d+: ([0-9.]+) ms cpu ([0-9.]+) ms", out)
    info = re.search(r"target (\S+) posattn (\S+)", out)
    prep = re.search(r"setup_cpu_ms ([0-9.]+)", out)
    obj = re.findall(r"objective ([-0-9.e+]+)\)", out)
    hyper = re.search(r"^hyper (.*)$", out, re.M)
    hp = {k: float(v) for k, v in re.findall(r"(\w+)=(\S+)", hyper.group(1))} if hyper else {}
    return ([float(w) / 1000 for w, _ in reps_], [float(c) / 1000 for _, c in reps_],
            (info.group(1), info.group(2)) if info else ("?", "?"),
            float(prep.group(1)) / 1000 if prep else float("nan"), float(obj[-1]) if obj else float("nan"),
            hp)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--L", type=int, default=16)
    ap.add_argument("--V", type=int, default=4)
    ap.add_argument("--P", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--attention", default="softmax", choices=["softmax", "linear"])
    ap.add_argument("--no-jax", action="store_true")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("PyTorch is not installed (pip install torch --index-url https://download.pytorch.org/whl/cpu)")
    med = statistics.median
    ours = {path: phaselab_times(a.build, a.L, a.V, a.P, a.steps, a.reps, a.attention, path)
            for path in ("stats", "direct")}
    hp = ours["stats"][5]  # the objective's and Adam's constants, as phaselab_copy_bench has them
    forms = {f: torch_times(a.L, a.V, a.P, a.steps, a.reps, a.attention, f, hp)
             for f in ("einsum", "flat", "stats")}
    jforms = {}
    if not a.no_jax:
        try:
            jforms = {f: jax_times(a.L, a.V, a.P, a.steps, a.reps, a.attention, f, hp)
                      for f in ("einsum", "flat", "stats")}
        except ImportError:
            print("(jax not installed: pip install 'jax[cpu]'; running without it)")
    print(f"copy task Adam: L={a.L} V={a.V} P={a.P} steps={a.steps} {a.attention}, 1 thread, float32,"
          f" medians of {a.reps}")
    print(f"{'':44} {'wall ms':>9} {'cpu ms':>9} {'cpu us/step':>12} {'setup ms':>9} {'final obj':>10}")
    for path, (tt, tc, (target, variant), prep, obj, _) in ours.items():
        print(f"{'phaselab ' + path + ' ' + variant:44} {med(tt) * 1e3:9.2f} {med(tc) * 1e3:9.2f}"
              f" {med(tc) / a.steps * 1e6:12.2f} {prep * 1e3:9.3f} {obj:10.5f}")
    for f, (tt, tc, loss, prep) in forms.items():
        print(f"{'torch ' + torch.__version__ + ' ' + f:44} {med(tt) * 1e3:9.2f} {med(tc) * 1e3:9.2f}"
              f" {med(tc) / a.steps * 1e6:12.2f} {prep * 1e3:9.3f} {loss:10.5f}")
    for f, (tt, tc, loss, prep, jv) in jforms.items():
        print(f"{'jax ' + jv + ' jit ' + f:44} {med(tt) * 1e3:9.2f} {med(tc) * 1e3:9.2f}"
              f" {med(tc) / a.steps * 1e6:12.2f} {prep * 1e3:9.3f} {loss:10.5f}")
    print("(final obj: the MAP objective after the last step, priors included; the runs start from\n"
          " different random inits, so they agree to a few digits, not bit for bit)")
    pc = ours["stats"][1]
    for f, (tt, tc, _, _) in forms.items():
        print(f"ratio torch {f}/phaselab stats: cpu {med(tc) / med(pc):.1f}x")
    for f, (tt, tc, _, _, _) in jforms.items():
        print(f"ratio jax {f}/phaselab stats: cpu {med(tc) / med(pc):.1f}x")
    best = min(forms, key=lambda f: med(forms[f][1]))
    print(f"ratio vs torch's fastest form ({best}): cpu {med(forms[best][1]) / med(pc):.1f}x")
    if jforms:
        jb = min(jforms, key=lambda f: med(jforms[f][1]))
        print(f"ratio vs jax's fastest form ({jb}): cpu {med(jforms[jb][1]) / med(pc):.1f}x")
    pd = ours["direct"][1]
    bestd = min(("einsum", "flat"), key=lambda f: med(forms[f][1]))
    print(f"per-sequence algorithms (phaselab direct vs torch {bestd}): cpu"
          f" {med(forms[bestd][1]) / med(pd):.1f}x")
    if jforms:
        jd = min(("einsum", "flat"), key=lambda f: med(jforms[f][1]))
        print(f"per-sequence algorithms (phaselab direct vs jax {jd}): cpu"
              f" {med(jforms[jd][1]) / med(pd):.1f}x")

if __name__ == "__main__":
    main()
