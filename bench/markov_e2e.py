#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The whole markov_default experiment end to end: phaselab vs a PyTorch peer, wall time.

phaselab: `phaselab run` on configs/markov_default.toml (or --config), optionally with fewer
steps (--steps; everything else unchanged, so the checkpoints are log-spaced over the shorter
run), its points in parallel on --threads cores.

The peer does the same work in PyTorch (float32, the model and AdamW of bench/markov_vs_torch.py,
linear warm-up, the config's batch, lr, betas, steps): per sweep point it draws K Markov chains
(Dirichlet(alpha) transition rows), an ID and an OOD evaluation set of n_eval sequences, trains
with a fresh batch of sequences from the K chains every step, and at every checkpoint (the same
log-spaced steps) runs the forward pass over both evaluation sets in batches of `batch`, with the
loss and the KL(q || p_net) of five predictor outputs q per position. Its q are the in-context
bigram and unigram estimates (2-Gen, 1-Gen) and three stand-ins of the same shape for the
memorising predictors, so its evaluation costs what phaselab's costs; phaselab's own run also
computes the exact Bayesian predictors of every evaluation sequence, which the peer does not
(in the peer's favour). Points are spread over --threads worker processes of one PyTorch thread
each, as the phaselab driver spreads them over cores.

    python3 bench/markov_e2e.py [--build build] [--steps 4000] [--threads 2] [--skip-torch]

Prints the wall and CPU time of each and the ratio. The full run is 6 points x 4000 steps; on a
shared machine --steps 400 is the shortened run with identical shapes (1/10 of the steps).
"""
import argparse
import math
import multiprocessing as mp
import os
import re
import resource
import subprocess
import sys
import tempfile
import time



def read_config(path):
    try:
        import tomllib
    except ImportError:
        sys.exit("Python >= 3.11 needed (tomllib)")
    text = open(path).read()
    return tomllib.loads(text), text


def checkpoint_steps(steps, n):
    v = [0]
    for i in range(n):
        e = i / (n - 1) if n > 1 else 1.0
        s = int(round(steps ** e))
        if s > v[-1]:
            v.append(s)
    if v[-1] != steps:
        v.append(steps)
    return v


def torch_point(args):
    (K, seed, C, N, d, layers, B, steps, lr, warmup, n_eval, ckpts, alpha) = args
    import numpy as np
    import torch
    import torch.nn.functional as F

    from markov_vs_torch import make_torch_net  # the same PyTorch model as the step benchmark

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng([seed, K])

    def chains(k):
        T = rng.dirichlet([alpha] * C, size=(k, C))  # k x C x C
        return T, np.cumsum(T, axis=-1)

    def sample(cum, idx, length):
        n = len(idx)
        x = np.empty((n, length), np.int64)
        x[:, 0] = rng.integers(0, C, n)
        for t in range(1, length):
            u = rng.random(n)[:, None]
            x[:, t] = np.minimum((u > cum[idx, x[:, t - 1]]).sum(-1), C - 1)
        return x

    Ttr, cum = chains(K)

    def eval_set(train):
        if train:
            seq = sample(cum, rng.integers(0, K, n_eval), N + 1)
        else:
            _, c1 = chains(n_eval)
            seq = sample(c1, np.arange(n_eval), N + 1)
        # q: n x N x 5 x C. 2-Gen / 1-Gen from in-context counts; three stand-ins.
        x = seq[:, :N]
        oh = np.eye(C)[x]                                   # n x N x C
        uni = (np.cumsum(oh, 1) + alpha) / (np.arange(1, N + 1)[None, :, None] + C * alpha)
        big = np.zeros((n_eval, C, C))
        q2 = np.empty((n_eval, N, C))
        for t in range(N):
            q2[:, t] = (big[np.arange(n_eval), x[:, t]] + alpha) / (
                big[np.arange(n_eval), x[:, t]].sum(-1, keepdims=True) + C * alpha)
            if t + 1 < N:
                big[np.arange(n_eval), x[:, t], x[:, t + 1]] += 1
        q = np.stack([q2, uni, q2, uni, 0.5 * (q2 + uni)], axis=2).astype(np.float32)
        qlogq = (q * np.log(np.maximum(q, 1e-8))).sum(-1)
        return torch.from_numpy(seq), torch.from_numpy(q), torch.from_numpy(qlogq.astype(np.float32))

    sets = [eval_set(True), eval_set(False)]

    net = make_torch_net(d, N, C, layers)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    late0 = N - max(1, round(0.25 * N))
    rows = []
    nxt = 0
    for step in range(steps + 1):
        if step > 0:
            for g in opt.param_groups:
                g["lr"] = lr * min(1.0, step / warmup) if warmup > 0 else lr
            seq = torch.from_numpy(sample(cum, rng.integers(0, K, B), N + 1))
            logits = net(seq[:, :N])
            loss = F.cross_entropy(logits.reshape(-1, C), seq[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if nxt < len(ckpts) and ckpts[nxt] == step:
            nxt += 1
            out = []
            with torch.no_grad():
                for seq, q, qlogq in sets:
                    L, KL, KLl = 0.0, torch.zeros(5, dtype=torch.float64), torch.zeros(5, dtype=torch.float64)
                    for b0 in range(0, n_eval, B):
                        s = seq[b0:b0 + B]
                        lp = F.log_softmax(net(s[:, :N]).double(), -1)  # nb x N x C
                        L += float(-lp.gather(-1, s[:, 1:, None]).sum())
                        kl = qlogq[b0:b0 + B].double() - torch.einsum("bnac,bnc->bna", q[b0:b0 + B].double(), lp)
                        KL += kl.sum((0, 1))
                        KLl += kl[:, late0:].sum((0, 1))
                    out.append((L / (n_eval * N), (KL / (n_eval * N)).tolist()))
            rows.append((step, out))
    return K, rows[-1][1][0][0], rows[-1][1][1][0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--config", default=os.path.join(os.path.dirname(__file__), "..", "configs",
                                                     "markov_default.toml"))
    ap.add_argument("--steps", type=int, help="override markov_icl.steps (default: the config's)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--target", default="")
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--skip-phaselab", action="store_true")
    a = ap.parse_args()
    cfg, text = read_config(a.config)
    m = cfg["markov_icl"]
    steps = a.steps or int(m["steps"])
    Ks = cfg["sweep"]["K"]
    seeds = cfg["run"].get("seeds", [0])
    N, d = cfg["sweep"]["N"][0], cfg["sweep"]["d_model"][0]
    ckpts = checkpoint_steps(steps, int(m["checkpoints"]))
    print(f"{os.path.basename(a.config)}: {len(Ks) * len(seeds)} points (K = {Ks}), {steps} steps each"
          f"{' (shortened from ' + str(m['steps']) + ')' if steps != int(m['steps']) else ''}, "
          f"d_model {d}, N {N}, batch {m['batch']}, n_eval {m['n_eval']}, {len(ckpts)} checkpoints; "
          f"{a.threads} cores")
    res = {}
    if not a.skip_phaselab:
        with tempfile.TemporaryDirectory() as tmp:
            conf = os.path.join(tmp, "e2e.toml")
            body = re.sub(r"(?m)^steps\s*=.*$", f"steps = {steps}", text)
            open(conf, "w").write(body)
            cmd = [os.path.join(a.build, "driver", "phaselab"), "run", conf, "--out",
                   os.path.join(tmp, "run"), "--threads", str(a.threads), "--quiet"]
            if a.target:
                cmd += ["--target", a.target]
            # The driver searches its own build's plugin folder (compiled in); a copied build
            # folder would load the original's plugin. PHASELAB_PLUGIN_PATH is searched first.
            env = dict(os.environ)
            plugin_dir = os.path.join(a.build, "plugins", "markov_icl")
            env["PHASELAB_PLUGIN_PATH"] = os.path.abspath(plugin_dir)
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, env=env)
            wall = time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            res["phaselab"] = (wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    if not a.skip_torch:
        jobs = [(K, s, int(m["C"]), N, d, int(m["layers"]), int(m["batch"]), steps, float(m["lr"]),
                 int(m.get("warmup", 0)), int(m["n_eval"]), ckpts, float(m.get("alpha", 1.0)))
                for s in seeds for K in Ks]
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        with mp.get_context("spawn").Pool(a.threads) as pool:
            out = pool.map(torch_point, jobs, chunksize=1)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        res["torch"] = (wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
        print("torch final ID/OOD loss per K: " +
              ", ".join(f"K={K}: {l0:.3f}/{l1:.3f}" for K, l0, l1 in out))
    for k, (w, c) in res.items():
        print(f"{k:>9}: wall {w:8.1f} s   cpu {c:8.1f} s")
    if len(res) == 2:
        print(f"torch / phaselab: wall {res['torch'][0] / res['phaselab'][0]:.2f}x, "
              f"cpu {res['torch'][1] / res['phaselab'][1]:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
