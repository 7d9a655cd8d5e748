# SPDX-License-Identifier: Apache-2.0
"""Tests of the Python package (pip-installed: scripts/test-python.sh runs them in a fresh venv).

Oracles: NumPy in float64 for the kernels (tolerance atol + rtol * |ref|), Python's csv module and
json for a run folder, the safetensors package for checkpoints, the driver's run.json for
overrides.
"""
from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import phaselab
from phaselab import PhaselabError
from phaselab import kernels as K

HERE = Path(__file__).resolve().parent
TINY = HERE / "tiny_markov.toml"


def close(got, ref, atol, rtol):
    """|got - ref| <= atol + rtol |ref| everywhere (ref in float64)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape
    err = np.abs(got - ref) - (atol + rtol * np.abs(ref))
    assert np.all(err <= 0), f"max excess {err.max():.3g} at {np.unravel_index(err.argmax(), err.shape)}"


def supported(kernel):
    """Every variant of `kernel` this CPU runs, by name (the scalar reference included)."""
    names = [v["name"] for v in K.variants(kernel) if v["supported"]]
    assert names, kernel
    return names


# PHASELAB_TEST_SEED: other inputs for the kernel tests (the tolerances must hold for any).
rng = np.random.default_rng(int(os.environ.get("PHASELAB_TEST_SEED", "31")))


def f32(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ----------------------------------------------------------------- kernels vs NumPy (float64)
def softmax_ref(x, scale=1.0, causal=False):
    s = x.astype(np.float64) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape, bool)), s, -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("variant", supported("softmax_rows"))
@pytest.mark.parametrize("causal", [False, True])
def test_softmax_rows(variant, causal):
    x = f32(37, 37, scale=4.0)
    close(K.softmax_rows(x, 0.7, causal, target=variant), softmax_ref(x, 0.7, causal), 1e-7, 2e-6)


@pytest.mark.parametrize("variant", supported("gemm"))
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_gemm(variant, ta, tb):
    m, n, k = 23, 41, 67
    a = f32(k, m) if ta else f32(m, k)
    b = f32(n, k) if tb else f32(k, n)
    c0 = f32(m, n)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = 0.5 * ((a64.T if ta else a64) @ (b64.T if tb else b64)) - 2.0 * c0
    c = c0.copy()
    out = K.gemm(a, b, c, alpha=0.5, beta=-2.0, trans_a=ta, trans_b=tb, target=variant)
    assert out is c  # updated in place, not copied
    # Float rounding of a k-term sum: about sqrt(k) eps |a||b| per element.
    scale = np.sqrt(k) * np.abs(a64).max() * np.abs(b64).max()
    close(out, ref, 1e-6 * scale, 1e-5)


@pytest.mark.parametrize("variant", supported("attention"))
@pytest.mark.parametrize("causal,linear", [(True, False), (False, False), (True, True)])
def test_attention(variant, causal, linear):
    n, dk, dv = 19, 8, 5
    q, k, v = f32(n, dk), f32(n, dk), f32(n, dv)
    scale = 1 / math.sqrt(dk)
    s = q.astype(np.float64) @ k.astype(np.float64).T * scale
    if linear:
        p = np.where(np.tril(np.ones((n, n), bool)), s, 0.0) if causal else s
    else:
        p = softmax_ref(q.astype(np.float64) @ k.astype(np.float64).T, scale, causal)
    o, pattern = K.attention(q, k, v, causal=causal, linear=linear, target=variant)
    close(pattern, p, 1e-6, 1e-5)
    close(o, p @ v.astype(np.float64), 1e-5, 1e-5)


@pytest.mark.parametrize("variant", supported("layernorm"))
def test_layernorm(variant):
    x, gamma, beta = f32(13, 64, scale=3.0) + 1.0, f32(64), f32(64)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1)
    rstd = 1 / np.sqrt(x64.var(axis=1) + 1e-5)
    y, m, r = K.layernorm(x, gamma, beta, 1e-5, target=variant)
    close(m, mean, 1e-6, 1e-5)
    close(r, rstd, 1e-6, 1e-5)
    close(y, (x64 - mean[:, None]) * rstd[:, None] * gamma + beta, 1e-5, 1e-5)


@pytest.mark.parametrize("variant", supported("layernorm_bwd"))
def test_layernorm_bwd(variant):
    x, gamma, dy = f32(9, 32, scale=2.0) - 0.5, f32(32), f32(9, 32)
    x64, g64, dy64 = (a.astype(np.float64) for a in (x, gamma, dy))
    mean = x64.mean(axis=1)
    rstd = 1 / np.sqrt(x64.var(axis=1) + 1e-5)
    xhat = (x64 - mean[:, None]) * rstd[:, None]
    dxhat = dy64 * g64
    dx = rstd[:, None] * (dxhat - dxhat.mean(axis=1, keepdims=True)
                          - xhat * (dxhat * xhat).mean(axis=1, keepdims=True))
    got = K.layernorm_bwd(dy, x, gamma, mean.astype(np.float32), rstd.astype(np.float32),
                          target=variant)
    close(got[0], dx, 1e-5, 1e-4)
    close(got[1], (dy64 * xhat).sum(axis=0), 1e-5, 1e-4)
    close(got[2], dy64.sum(axis=0), 1e-5, 1e-5)


@pytest.mark.parametrize("variant", supported("gemm_batched"))
def test_gemm_batched(variant):
    a, b, c0 = f32(3, 17, 29), f32(3, 11, 29), f32(3, 17, 11)
    ref = 2.0 * np.einsum("bmk,bnk->bmn", a.astype(np.float64), b.astype(np.float64)) + 0.5 * c0
    c = c0.copy()
    K.gemm_batched(a, b, c, alpha=2.0, beta=0.5, trans_b=True, target=variant)
    close(c, ref, 1e-4, 1e-5)


@pytest.mark.parametrize("variant", supported("gemm_epilogue"))
@pytest.mark.parametrize("epilogue", ["multiply", "add"])
def test_gemm_epilogue(variant, epilogue):
    a, b, e = f32(31, 19), f32(19, 23), f32(31, 23)
    p = 1.5 * (a.astype(np.float64) @ b.astype(np.float64))
    ref = p * e if epilogue == "multiply" else p + e
    close(K.gemm_epilogue(a, b, e, epilogue, alpha=1.5, target=variant), ref, 1e-4, 1e-5)


@pytest.mark.parametrize("variant", supported("posattn"))
def test_posattn_and_bwd(variant):
    p, L, V = 5, 7, 4
    a, x, w, df = f32(L, L), f32(p, L, V), f32(V, V), f32(p, L, V)
    a64, x64, w64, df64 = (t.astype(np.float64) for t in (a, x, w, df))
    h_ref = np.einsum("ik,pkv->piv", a64, x64)
    h, f = K.posattn(a, x, w, target=variant)
    close(h, h_ref, 1e-5, 1e-5)
    close(f, np.einsum("piv,ov->pio", h_ref, w64), 1e-5, 1e-5)
    da, dw = K.posattn_bwd(a, x, w, h, df, target=variant.split(".")[-1])  # the same ISA
    dh = np.einsum("pio,ov->piv", df64, w64)
    close(da, np.einsum("piv,pkv->ik", dh, x64), 1e-4, 1e-5)
    close(dw, np.einsum("pio,piv->ov", df64, h.astype(np.float64)), 1e-4, 1e-5)


@pytest.mark.parametrize("variant", supported("gelu"))
def test_gelu(variant):
    x = np.linspace(-8, 8, 1001, dtype=np.float32)
    x64 = x.astype(np.float64)
    ref = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3)))
    close(K.gelu(x, target=variant), ref, 1e-6, 1e-5)


@pytest.mark.parametrize("variant", supported("gelu_fwd_grad"))
def test_gelu_fwd_grad_and_bwd(variant):
    x = np.linspace(-8, 8, 1001, dtype=np.float32)
    x64 = x.astype(np.float64)
    c = math.sqrt(2 / math.pi)
    t = np.tanh(c * (x64 + 0.044715 * x64**3))
    grad = 0.5 * (1 + t) + 0.5 * x64 * (1 - t**2) * c * (1 + 3 * 0.044715 * x64**2)
    y, dydx = K.gelu_fwd_grad(x, target=variant)
    close(y, 0.5 * x64 * (1 + t), 1e-6, 1e-5)
    close(dydx, grad, 1e-6, 1e-5)
    dy = f32(1001)
    close(K.gelu_bwd(x, dy, target=variant.replace("gelu_fwd_grad", "gelu_bwd")),
          dy * grad, 1e-6, 1e-5)


@pytest.mark.parametrize("variant", supported("exp"))
def test_exp_in_place(variant):
    x = np.linspace(-80, 80, 4099, dtype=np.float32)
    ref = np.exp(x.astype(np.float64))
    y = K.exp(x, out=x, target=variant)
    assert y is x  # no copy: written into the given array
    close(x, ref, 0.0, 4e-7)


@pytest.mark.parametrize("variant", supported("adam"))
def test_adam_step(variant):
    p, g = f32(100), f32(100)
    m, v = f32(100) * 0.1, np.abs(f32(100)) * 0.01
    p0, m0, v0 = (a.astype(np.float64) for a in (p, m, v))
    # The kernel takes float hyperparameters: the oracle uses those values (1 - 0.99 in float is
    # 1e-6 away from 0.01 relatively, far above the kernel's rounding).
    lr, b1, b2, eps, wd = (float(np.float32(h)) for h in (1e-2, 0.9, 0.99, 1e-8, 0.1))
    step = 3
    g64 = g.astype(np.float64) + wd * p0
    m1 = b1 * m0 + (1 - b1) * g64
    v1 = b2 * v0 + (1 - b2) * g64**2
    ref = p0 - lr * (m1 / (1 - b1**step)) / (np.sqrt(v1 / (1 - b2**step)) + eps)
    K.adam(p, g, m, v, step, lr=lr, beta1=b1, beta2=b2, eps=eps, weight_decay=wd, target=variant)
    close(m, m1, 1e-7, 1e-6)
    close(v, v1, 1e-9, 1e-6)
    close(p, ref, 1e-6, 1e-5)


def test_sgld_adds_the_gaussian_stream():
    theta, grad = f32(1000), f32(1000)
    eta, temp = 0.01, 0.5
    xi = K.gaussian(1000, seed=7, stream=3, counter=11).astype(np.float64)
    ref = theta.astype(np.float64) - eta * grad + math.sqrt(2 * eta * temp) * xi
    K.sgld(theta, grad, eta, temp, seed=7, stream=3, counter=11)
    close(theta, ref, 1e-6, 1e-5)
    z = K.gaussian(200_000, seed=1)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01  # 4+ sigma margins


def test_reductions():
    x, y = f32(10_001), f32(10_001)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    close(K.sum(x), x64.sum(), 1e-9, 1e-12)
    close(K.dot(x, y), x64 @ y64, 1e-9, 1e-12)
    assert K.max(x) == x.max()


# ----------------------------------------------------------------- kernel errors and variants
def test_kernel_errors_are_clear():
    x = np.zeros((4, 4))
    with pytest.raises(TypeError, match="float32"):
        K.softmax_rows(x)
    with pytest.raises(ValueError, match="2-d"):
        K.softmax_rows(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="inner dimensions"):
        K.gemm(np.zeros((2, 3), np.float32), np.zeros((4, 5), np.float32))
    with pytest.raises(ValueError, match="unknown kernel target"):
        K.exp(np.zeros(3, np.float32), target="nosuchisa")
    with pytest.raises(ValueError, match="not a variant of exp"):
        K.exp(np.zeros(3, np.float32), target="gemm.scalar")
    with pytest.raises(ValueError, match="expected shape"):
        K.exp(np.zeros(3, np.float32), out=np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        K.adam(np.zeros((4, 4), np.float32)[:, ::2], np.zeros((4, 2), np.float32),
               np.zeros((4, 2), np.float32), np.zeros((4, 2), np.float32), 1)


def test_strided_input_is_accepted():
    x = f32(8, 16)[:, ::2]
    close(K.softmax_rows(x), softmax_ref(x), 1e-7, 2e-6)


def test_variants_list_one_selected_per_kernel():
    vs = K.variants()
    kernels = {v["kernel"] for v in vs}
    for k in ("exp", "softmax_rows", "gemm", "attention", "layernorm", "adam", "sgld"):
        assert k in kernels
        assert sum(v["selected"] for v in vs if v["kernel"] == k) == 1
        assert K.variant(k) == next(v["name"] for v in vs if v["kernel"] == k and v["selected"])
    assert K.variant("exp", "scalar") == "exp.scalar"
    assert K.best_target() in K.targets()


# ----------------------------------------------------------------- runs
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "tiny"
    return phaselab.run(TINY, out=out, threads=2, quiet=True)


def csv_rows(path):
    with open(path, newline="") as f:
        r = csv.reader(f)
        header = next(r)
        return header, list(r)


def same_cell(cell, value):
    if cell == "":
        return value is None or (isinstance(value, float) and math.isnan(value))
    try:
        return math.isclose(float(cell), float(value), rel_tol=0, abs_tol=0)
    except (TypeError, ValueError):
        return str(value) == cell


def test_load_equals_the_csv_files(tiny_run):
    run = phaselab.load(tiny_run.path)
    assert run.status == "ok" and run.exit_status == 0
    with open(run.path / "run.json") as f:
        record = json.load(f)
    header, rows = csv_rows(run.path / "results.csv")
    df = run.results
    assert list(df.columns[: len(header)]) == header
    assert len(df) == len(rows) == 2 * 2 * 4  # K x seeds x (3 checkpoints + step 0)
    for i, row in enumerate(rows):
        for name, cell in zip(header, row):
            assert same_cell(cell, df[name].iloc[i]), (i, name, cell, df[name].iloc[i])
    params = record["config"]["params"]
    assert run.params == params
    for key, value in params.items():
        assert key in df.columns
        assert (df[key] == value).all(), key
    # Typed as the plugin declares them: alpha is a float even though run.json writes 1.
    assert df["alpha"].dtype == np.float64 and df["N"].dtype == np.int64
    assert df["layernorm"].dtype == bool and df["positions"].iloc[0] == "learned"
    assert "K" not in params and sorted(df["K"].unique()) == [2, 4]
    for name in run.tables():
        h, r = csv_rows(run.path / f"{name}.csv")
        t = run.table(name)
        assert list(t.columns) == h and len(t) == len(r), name
    assert run.failures.empty and run.boundaries is None
    assert run.figures and all(p.is_file() for p in run.figures.values())
    assert "kl_history_id" in run.figures
    assert all(set(files) == {"png"} for files in run.figure_files.values())


def test_figure_formats_listed_in_figure_files_and_run_json(tmp_path):
    run = phaselab.run(TINY, out=tmp_path / "fmt", threads=2, quiet=True,
                       overrides={"run.figure_formats": ["png", "pdf", "svg"]})
    assert run.record["config"]["run"]["figure_formats"] == ["png", "pdf", "svg"]
    drawn = [f for f in run.record["figures"] if "png" in f]
    assert drawn
    files = run.figure_files
    for f in drawn:
        listed = {k: Path(v).resolve() for k, v in f.items() if k in ("png", "pdf", "svg")}
        assert listed == {k: p.resolve() for k, p in files[f["name"]].items()}
        assert files[f["name"]]["pdf"].read_bytes().startswith(b"%PDF-")
        assert files[f["name"]]["svg"].read_bytes().rstrip().endswith(b"</svg>")
        assert run.figures[f["name"]] == files[f["name"]]["png"]


def test_figure_files_are_what_the_run_drew_not_leftovers(tmp_path):
    # A run in three formats, resumed with PNG only: the PDF and SVG files stay in figures/,
    # but figure_files lists what run.json says the last run drew.
    out = tmp_path / "fmt2"
    phaselab.run(TINY, out=out, threads=2, quiet=True,
                 overrides={"run.figure_formats": ["png", "pdf", "svg"]})
    run = phaselab.run(TINY, out=out, threads=2, quiet=True, resume=True,
                       overrides={"run.figure_formats": ["png"]})
    assert list((out / "figures").glob("*.pdf"))  # the leftovers are there
    assert run.figure_files and all(set(f) == {"png"} for f in run.figure_files.values())


def test_checkpoint_matches_safetensors(tiny_run, tmp_path):
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    files = tiny_run.checkpoints()
    assert len(files) == 2 * 2 * 4
    tensors, meta = phaselab.load_checkpoint(files[-1])
    ref = load_file(str(files[-1]))
    assert sorted(tensors) == sorted(ref) and len(tensors) > 3
    for name, arr in ref.items():
        assert tensors[name].dtype == arr.dtype and np.array_equal(tensors[name], arr), name
    with safe_open(str(files[-1]), framework="numpy") as f:
        assert meta == f.metadata()
    # Edited and written back: the safetensors package reads what save_checkpoint wrote ...
    edited = dict(tensors, extra=np.arange(6, dtype=np.int64).reshape(2, 3))
    name0 = sorted(tensors)[0]
    edited[name0] = tensors[name0] * 2
    out = tmp_path / "edited.safetensors"
    phaselab.save_checkpoint(out, edited, {"note": "edited", **meta})
    back = load_file(str(out))
    assert sorted(back) == sorted(edited)
    for name, arr in edited.items():
        assert np.array_equal(back[name], arr) and back[name].dtype == arr.dtype, name
    with safe_open(str(out), framework="numpy") as f:
        assert f.metadata()["note"] == "edited"
    # ... and load_checkpoint reads what the package writes.
    mixed = {"a": f32(3, 4), "b": np.array([1, -2], np.int32), "c": np.array(True),
             "d": np.zeros((0, 3), np.float64), "e": np.arange(5, dtype=np.uint8)}
    save_file(mixed, str(tmp_path / "mixed.safetensors"), metadata={"k": "v"})
    got, m = phaselab.load_checkpoint(tmp_path / "mixed.safetensors")
    assert m == {"k": "v"}
    for name, arr in mixed.items():
        assert got[name].dtype == arr.dtype and got[name].shape == arr.shape
        assert np.array_equal(got[name], arr), name


def test_bad_checkpoint_raises(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\xff" * 7)
    with pytest.raises(phaselab.CheckpointError, match="shorter"):
        phaselab.load_checkpoint(bad)
    bad.write_bytes((10**9).to_bytes(8, "little") + b"{}")
    with pytest.raises(phaselab.CheckpointError, match="exceeds"):
        phaselab.load_checkpoint(bad)


def test_overrides_are_applied_and_recorded(tmp_path):
    run = phaselab.run(TINY, out=tmp_path / "o", quiet=True,
                       overrides={"markov_icl.steps": 20, "sweep.K": [3], "run.seeds": 1,
                                  "markov_icl.alpha": 0.5})
    assert run.record["config"]["overrides"] == ["markov_icl.steps=20", "sweep.K=[3]",
                                                 "run.seeds=1", "markov_icl.alpha=0.5"]
    df = run.results
    assert sorted(df["K"].unique()) == [3] and sorted(df["seed"].unique()) == [0]
    assert (df["steps"] == 20).all() and (df["alpha"] == 0.5).all()
    assert df["step"].max() == 20
    assert phaselab.check(TINY, overrides=["markov_icl.steps=5"]).endswith(
        "4 points (2 K x 2 seeds)")


def test_errors_carry_the_message_and_exit_status(tmp_path):
    with pytest.raises(PhaselabError) as e:
        phaselab.check(TINY, overrides={"markov_icl.C": "x"})
    assert e.value.status == 2
    assert 'override markov_icl.C="x": error: markov_icl.C must be an integer' in e.value.message
    with pytest.raises(PhaselabError) as e:
        phaselab.run(tmp_path / "missing.toml", out=tmp_path / "never", quiet=True)
    assert e.value.status == 2 and "missing.toml" in e.value.message
    assert not (tmp_path / "never").exists()
    bad = tmp_path / "bad.toml"
    bad.write_text('plugin = "no_such_plugin"\n')
    with pytest.raises(PhaselabError) as e:
        phaselab.check(bad)
    assert e.value.status == 3 and "no_such_plugin" in e.value.message
    with pytest.raises(FileNotFoundError):
        phaselab.load(tmp_path)


def test_plugins_and_the_command():
    found = {p["name"]: p for p in phaselab.plugins()}
    assert {"copy_task", "markov_icl", "circuits"} <= set(found)
    assert found["markov_icl"]["keys"]["K"]["type"] == "int"
    assert "results.csv" in found["markov_icl"]["tables"]
    out = subprocess.run([sys.executable, "-m", "phaselab", "--version"], capture_output=True,
                         text=True, check=True)
    assert "phaselab" in out.stdout


def test_ctrl_c_stops_the_driver_and_raises(tmp_path):
    # A child Python runs a long sweep; SIGINT to it (as a notebook's interrupt sends) must stop
    # the driver cleanly: PhaselabError 130, run.json "interrupted", the folder resumable.
    import signal
    import time

    out = tmp_path / "long"
    script = (
        "import signal, sys\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import phaselab\n"
        "try:\n"
        f"    phaselab.run({str(TINY)!r}, out={str(out)!r}, threads=1, quiet=True,\n"
        "                 overrides={'markov_icl.steps': 1000000, 'markov_icl.checkpoints': 2})\n"
        "except phaselab.PhaselabError as e:\n"
        "    print('status', e.status)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)  # Ctrl-C of the test run does not reach it
    try:
        for _ in range(600):  # the driver writes run.json before the first point starts
            if (out / "run.json").exists() or child.poll() is not None:
                break
            time.sleep(0.1)
        assert child.poll() is None, "the run ended before it could be interrupted"
        child.send_signal(signal.SIGINT)
        stdout, _ = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert "status 130" in stdout
    run = phaselab.load(out)
    assert run.status == "interrupted" and run.exit_status == 130
