#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Cross-check of phaselab's Markov model, checkpoints and circuit probes against TransformerLens.

Run by hand (needs torch, transformer-lens, safetensors; not part of the test suite):

    build/plugins/circuits/circuits_dump CKPT.safetensors /tmp/dump.safetensors 32
    python3 bench/circuits_transformerlens.py CKPT.safetensors /tmp/dump.safetensors

CKPT is a phaselab checkpoint (markov_icl save = ..., or circuits save = true). The script loads it
into a TransformerLens model configured identically (TransformerBridge.boot_native; TransformerLens
4 removed HookedTransformer): pre-LN with the checkpoint's LayerNorm eps, learned absolute positions, GELU tanh form = "gelu_new", attention scale 1/sqrt(d_head), untied
unembedding, all biases zero; no weight folding or centring: the weights are loaded with
load_state_dict into a freshly built model, so they map one to one), runs the dump's sequences,
and compares with phaselab's own outputs in the dump:
  - logits of the clean and corrupted (permuted prefix) runs;
  - four ablations: layer-1 pattern -> uniform, layer-2 pattern -> exact previous token,
    M1 output -> 0, A2 output -> its per-position mean over the sequences;
  - five path-patching edges (A1->A2.k, E->A1.v, M1->A2.v, A2->U, E->A2.q) under the
    permutation corruption: the patched logits, and the plugin's dlogp and KL share.
Prints the maximum absolute difference of each and exits 1 when one exceeds 1e-4.
"""
import sys

import numpy as np
import torch
from safetensors import safe_open
from safetensors.numpy import load_file

TOL = 1e-4


def load_model(path):
    """A TransformerLens model with the checkpoint's weights: TransformerBridge.boot_native
    (TransformerLens 4 removed HookedTransformer; the native model stores nn.Linear weights
    (out x in), as phaselab does). Biases are zero; nothing is folded or centred."""
    with safe_open(path, "np") as f:
        meta = f.metadata()
        t = {k: f.get_tensor(k) for k in f.keys()}
    if meta.get("format") != "phaselab.markov.v1":
        sys.exit(f"{path}: not a phaselab Markov-model checkpoint")
    C, N, d = int(meta["C"]), int(meta["N"]), int(meta["d_model"])
    H, L, F = int(meta["heads"]), int(meta["layers"]), int(meta["ffn"])
    if meta["positions"] != "learned" or meta["layernorm"] != "true" or meta["tied"] != "false":
        sys.exit("this script covers pre-LN, learned positions, untied unembedding")
    attn_only = meta["mlp"] != "true"
    dh = d // H
    common = dict(n_layers=L, d_model=d, n_ctx=N, d_head=dh, n_heads=H, d_vocab=C,
                  act_fn="gelu_new", normalization_type="LN", eps=float(meta["ln_eps"]),
                  positional_embedding_type="standard", attn_only=attn_only,
                  use_attn_scale=True)
    if not attn_only:
        common["d_mlp"] = F
    T = lambda a: torch.tensor(np.ascontiguousarray(a), dtype=torch.float32)
    from transformer_lens import TransformerBridge, TransformerBridgeConfig
    cfg = TransformerBridgeConfig(architecture="TransformerLensNative", **common)
    model = TransformerBridge.boot_native(cfg, dtype=torch.float32, device="cpu")
    sd = {"embed.weight": T(t["wte"]), "pos_embed.weight": T(t["wpe"]),
          "ln_final.weight": T(t["lnf"][0]), "ln_final.bias": T(t["lnf"][1]),
          "unembed.weight": T(t["unembed"])}
    for l in range(L):
        p, q = f"blocks.{l}.", f"l{l + 1}."
        qkv = t[q + "qkv"]
        for i, name in enumerate("qkv"):
            sd[p + f"attn.{name}.weight"] = T(qkv[i * d:(i + 1) * d])
        sd[p + "attn.o.weight"] = T(t[q + "o"])
        sd[p + "ln1.weight"], sd[p + "ln1.bias"] = T(t[q + "ln1"][0]), T(t[q + "ln1"][1])
        if not attn_only:
            sd[p + "ln2.weight"], sd[p + "ln2.bias"] = T(t[q + "ln2"][0]), T(t[q + "ln2"][1])
            sd[p + "mlp.in.weight"], sd[p + "mlp.out.weight"] = T(t[q + "fc"]), T(t[q + "proj"])
    own = model.state_dict()
    for k, v in own.items():  # every bias that phaselab does not have: zero
        if k not in sd and k.endswith(".bias"):
            sd[k] = torch.zeros_like(v)
    extra = sorted(set(sd) - set(own))
    missing = sorted(k for k in set(own) - set(sd) if not k.endswith((".IGNORE", ".mask")))
    if extra or missing:
        sys.exit(f"state dict mismatch: not in the model {extra}, not loaded {missing}")
    model.load_state_dict(sd, strict=False)
    model.eval()
    return model, cfg, t


# Component outputs (senders) and receiver hooks, in phaselab's names.
def sender_hook(name):
    if name == "E":
        return ["hook_embed", "hook_pos_embed"]
    kind, l = name[0], int(name[1:]) - 1
    return [f"blocks.{l}.hook_attn_out" if kind == "A" else f"blocks.{l}.hook_mlp_out"]


def receiver_patch(name, L, t, eps, clean, delta):
    """(hook name, hook fn) that makes receiver `name` read clean residual + delta.

    TransformerLens 4's native bridge has no hook on the separate residual inputs of q, k and v
    (use_split_qkv_input is refused for it), so the patch is applied where each receiver's
    LayerNorm output enters its linear map: the hook returns LN(clean residual + delta), with the
    LayerNorm recomputed here from the checkpoint's gain and bias (F.layer_norm). Only that one
    linear map sees the change; the residual stream itself is untouched, as in phaselab."""
    import torch.nn.functional as Fn

    def ln(x, w):
        return Fn.layer_norm(x, (x.shape[-1],), torch.tensor(w[0]), torch.tensor(w[1]), eps)

    if name == "U":
        resid = clean[f"blocks.{L - 1}.hook_resid_post"]
        return f"blocks.{L - 1}.hook_out", lambda v, hook: resid + delta
    if name.startswith("M"):
        l = int(name[1:]) - 1
        x = ln(clean[f"blocks.{l}.hook_resid_mid"] + delta, t[f"l{l + 1}.ln2"])
        return f"blocks.{l}.mlp.hook_in", lambda v, hook: x
    l, part = int(name[1]) - 1, name.split(".")[1]
    x = ln(clean[f"blocks.{l}.hook_resid_pre"] + delta, t[f"l{l + 1}.ln1"])
    return f"blocks.{l}.attn.{part}.hook_in", lambda v, hook: x


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model, cfg, t = load_model(sys.argv[1])
    dump = load_file(sys.argv[2])
    L, N = cfg.n_layers, cfg.n_ctx
    x = torch.tensor(dump["tokens"][:, :N], dtype=torch.long)
    xb = torch.tensor(dump["tokens_permute"][:, :N], dtype=torch.long)
    y = torch.tensor(dump["tokens"][:, N], dtype=torch.long)
    worst = {}

    def compare(label, ours, ref):
        diff = float(np.max(np.abs(ours.detach().numpy() - ref)))
        worst[label] = diff
        print(f"{label:28s} max |TL - phaselab| = {diff:.3e}")

    with torch.no_grad():
        clean_logits, clean = model.run_with_cache(x)
        bad_logits, bad = model.run_with_cache(xb)
        # the model's own logits must not depend on the hooks: check the plain forward too
        compare("logits clean (plain)", model(x), dump["logits"])
        compare("logits clean", clean_logits, dump["logits"])
        compare("logits permuted", bad_logits, dump["logits_permute"])

        nb = x.shape[0]
        tri = torch.tril(torch.ones(N, N))
        uniform = (tri / tri.sum(-1, keepdim=True)).expand(nb, cfg.n_heads, N, N)
        prev = torch.zeros(N, N)
        prev[0, 0] = 1
        prev[torch.arange(1, N), torch.arange(0, N - 1)] = 1
        prev = prev.expand(nb, cfg.n_heads, N, N)
        a2 = clean["blocks.1.hook_attn_out"]
        a2_mean = a2.mean(0, keepdim=True).expand_as(a2)
        abl = {
            "A1_uniform": [("blocks.0.attn.hook_pattern", lambda v, hook: uniform)],
            "A2_prev": [("blocks.1.attn.hook_pattern", lambda v, hook: prev)],
            "M1_zero": [("blocks.0.hook_mlp_out", lambda v, hook: torch.zeros_like(v))],
            "A2_mean": [("blocks.1.hook_attn_out", lambda v, hook: a2_mean)],
        }
        for name, hooks in abl.items():
            compare("ablation " + name, model.run_with_hooks(x, fwd_hooks=hooks),
                    dump["abl/" + name])

        def last_logp(logits):
            return torch.log_softmax(logits[:, -1].double(), -1)

        lp_clean, lp_bad = last_logp(clean_logits), last_logp(bad_logits)
        ar = torch.arange(nb)
        kl_bad = (lp_clean.exp() * (lp_clean - lp_bad)).sum(-1).mean()
        edges = ["A1->A2.k", "E->A1.v", "M1->A2.v", "A2->U", "E->A2.q"]
        for i, e in enumerate(edges):
            s, r = e.split("->")
            delta = sum(bad[h] - clean[h] for h in sender_hook(s))
            hooks = [receiver_patch(r, L, t, cfg.eps, clean, delta)]
            out = model.run_with_hooks(x, fwd_hooks=hooks)
            compare("patch " + e, out, dump["patch/" + e])
            lp = last_logp(out)
            dlogp = float((lp[ar, y] - lp_clean[ar, y]).mean())
            kl_frac = float((lp_clean.exp() * (lp_clean - lp)).sum(-1).mean() / kl_bad)
            d1 = abs(dlogp - float(dump["edge_dlogp"][i]))
            d2 = abs(kl_frac - float(dump["edge_kl_frac"][i]))
            worst["dlogp " + e], worst["kl_frac " + e] = d1, d2
            print(f"{'':28s} dlogp TL {dlogp:+.6f} phaselab {dump['edge_dlogp'][i]:+.6f} "
                  f"(diff {d1:.1e}); KL share TL {kl_frac:.6f} phaselab "
                  f"{dump['edge_kl_frac'][i]:.6f} (diff {d2:.1e})")
    bad_ones = {k: v for k, v in worst.items() if not v <= TOL}
    print(f"largest difference {max(worst.values()):.3e} (tolerance {TOL:g}); "
          f"{'FAIL ' + str(sorted(bad_ones)) if bad_ones else 'all within tolerance'}")
    sys.exit(1 if bad_ones else 0)


if __name__ == "__main__":
    main()
