# SPDX-License-Identifier: Apache-2.0
"""phaselab's SIMD kernels on NumPy arrays (kernels/include/phaselab/kernels.def).

Every function takes float32 arrays (a float64 array is refused with a TypeError rather than
silently converted: say ``x.astype(np.float32)``), works on C-contiguous arrays in place without
copying them (a strided input is copied once to a contiguous one; an ``out=`` array must be
C-contiguous), releases the GIL while the kernel runs, and returns new arrays unless ``out=`` is
given. ``target`` picks the implementation: None (what dispatch picks on this CPU, as
`phaselab run` does), an ISA ("scalar", "avx2", "avx512", "neon", ...: the best variant that ISA
allows) or a variant name from variants() ("softmax_rows.intrin.avx512").
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

try:
    from . import _kernels as _k
except ImportError as e:  # pragma: no cover - a source tree without the extension
    raise ImportError("phaselab.kernels needs the compiled extension phaselab._kernels: install "
                      "the package with `python3 -m pip install .`") from e

__all__ = ["variants", "targets", "best_target", "variant", "exp", "gelu", "gelu_bwd", "gelu_fwd_grad",
           "softmax_rows", "softmax_rows_bwd", "layernorm", "layernorm_bwd", "gemm", "gemm_batched",
           "gemm_epilogue", "attention", "attention_bwd", "posattn", "posattn_bwd", "adam", "adamw",
           "sgld", "gaussian", "uniform_bits", "sum", "dot", "max"]


def variants(kernel: Optional[str] = None) -> list[dict[str, Any]]:
    """Every compiled variant: kernel, name, backend, isa, rank, supported (this CPU can run it)
    and selected (dispatch's pick). With `kernel`, only that kernel's."""
    out = _k.variants()
    return [v for v in out if kernel is None or v["kernel"] == kernel]


def targets() -> list[str]:
    """The kernel targets this build knows (best first)."""
    return list(_k.known_targets())


def best_target() -> str:
    """The best target this CPU supports (what dispatch uses)."""
    return str(_k.best_target())


def variant(kernel: str, target: Optional[str] = None) -> str:
    """The name of the variant `kernel` runs under `target` ("gemm.intrin.avx512")."""
    return str(_k.variant_name(kernel, target or ""))


# ----------------------------------------------------------------- argument checks
def _in(name: str, a: Any, ndim: Optional[int] = None) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        a = np.asarray(a)
        if a.dtype == np.float64:  # a Python list or scalar: float32 is what was meant
            a = a.astype(np.float32)
    if a.dtype != np.float32:
        raise TypeError(f"{name}: expected a float32 array, got {a.dtype} "
                        f"(convert with {name}.astype(np.float32))")
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-d array, got shape {a.shape}")
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _out(name: str, out: Optional[np.ndarray], shape: tuple[int, ...],
         dtype: Any = np.float32) -> np.ndarray:
    if out is None:
        return np.empty(shape, dtype=dtype)
    if not isinstance(out, np.ndarray) or out.dtype != dtype:
        raise TypeError(f"{name}: expected a {np.dtype(dtype).name} array, got "
                        f"{getattr(out, 'dtype', type(out).__name__)}")
    if out.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {out.shape}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError(f"{name}: must be a writeable C-contiguous array")
    return out


def _inout(name: str, a: Any, shape: Optional[tuple[int, ...]] = None) -> np.ndarray:
    """An array updated in place (optimiser state): float32, C-contiguous, writeable."""
    if not isinstance(a, np.ndarray) or a.dtype != np.float32:
        raise TypeError(f"{name}: expected a float32 array (updated in place), got "
                        f"{getattr(a, 'dtype', type(a).__name__)}")
    if not a.flags.c_contiguous or not a.flags.writeable:
        raise ValueError(f"{name}: must be a writeable C-contiguous array (updated in place)")
    if shape is not None and a.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {a.shape}")
    return a


def _t(target: Optional[str]) -> str:
    return target or ""


# ----------------------------------------------------------------- elementwise
def exp(x: np.ndarray, out: Optional[np.ndarray] = None, *,
        target: Optional[str] = None) -> np.ndarray:
    """y = exp(x), elementwise. `out` may be x (in place)."""
    x = _in("x", x)
    y = _out("out", out, x.shape)
    _k.exp(x, y, _t(target))
    return y


def gelu(x: np.ndarray, out: Optional[np.ndarray] = None, *,
         target: Optional[str] = None) -> np.ndarray:
    """GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). `out` may be x."""
    x = _in("x", x)
    y = _out("out", out, x.shape)
    _k.gelu(x, y, _t(target))
    return y


def gelu_bwd(x: np.ndarray, dy: np.ndarray, out: Optional[np.ndarray] = None, *,
             target: Optional[str] = None) -> np.ndarray:
    """dx = dy * gelu'(x)."""
    x, dy = _in("x", x), _in("dy", dy)
    if dy.shape != x.shape:
        raise ValueError(f"dy: expected x's shape {x.shape}, got {dy.shape}")
    dx = _out("out", out, x.shape)
    _k.gelu_bwd(x, dy, dx, _t(target))
    return dx


def gelu_fwd_grad(x: np.ndarray, *, target: Optional[str] = None) -> tuple[np.ndarray, np.ndarray]:
    """(gelu(x), gelu'(x)) in one pass."""
    x = _in("x", x)
    y, dydx = np.empty_like(x), np.empty_like(x)
    _k.gelu_fwd_grad(x, y, dydx, _t(target))
    return y, dydx


# ----------------------------------------------------------------- softmax, layernorm
def softmax_rows(x: np.ndarray, scale: float = 1.0, causal: bool = False,
                 out: Optional[np.ndarray] = None, *, target: Optional[str] = None) -> np.ndarray:
    """y[r] = softmax(scale * x[r]) over each row of a 2-d x (rows x cols). causal: only columns
    c <= r take part, the others are written as 0."""
    x = _in("x", x, 2)
    y = _out("out", out, x.shape)
    _k.softmax_rows(x, y, float(scale), bool(causal), _t(target))
    return y


def softmax_rows_bwd(y: np.ndarray, dy: np.ndarray, scale: float = 1.0, causal: bool = False,
                     out: Optional[np.ndarray] = None, *,
                     target: Optional[str] = None) -> np.ndarray:
    """dx = scale * y * (dy - rowsum(dy * y)), y the forward output."""
    y, dy = _in("y", y, 2), _in("dy", dy, 2)
    if dy.shape != y.shape:
        raise ValueError(f"dy: expected y's shape {y.shape}, got {dy.shape}")
    dx = _out("out", out, y.shape)
    _k.softmax_rows_bwd(y, dy, dx, float(scale), bool(causal), _t(target))
    return dx


def layernorm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5, *,
              target: Optional[str] = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of x (rows x d): y = (x - mean) * rstd * gamma + beta. Returns (y, mean, rstd)."""
    x = _in("x", x, 2)
    gamma, beta = _in("gamma", gamma, 1), _in("beta", beta, 1)
    rows, d = x.shape
    for name, a in (("gamma", gamma), ("beta", beta)):
        if a.shape != (d,):
            raise ValueError(f"{name}: expected shape ({d},) (x.shape[1]), got {a.shape}")
    y = np.empty_like(x)
    mean, rstd = np.empty(rows, np.float32), np.empty(rows, np.float32)
    _k.layernorm(x, gamma, beta, y, mean, rstd, float(eps), _t(target))
    return y, mean, rstd


def layernorm_bwd(dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, mean: np.ndarray,
                  rstd: np.ndarray, *, target: Optional[str] = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Backward of layernorm given its mean and rstd: returns (dx, dgamma, dbeta). (The kernel
    accumulates into its outputs, the residual-stream convention; here they start at 0.)"""
    x = _in("x", x, 2)
    rows, d = x.shape
    dy = _in("dy", dy, 2)
    if dy.shape != x.shape:
        raise ValueError(f"dy: expected x's shape {x.shape}, got {dy.shape}")
    gamma, mean, rstd = _in("gamma", gamma, 1), _in("mean", mean, 1), _in("rstd", rstd, 1)
    if gamma.shape != (d,):
        raise ValueError(f"gamma: expected shape ({d},), got {gamma.shape}")
    for name, a in (("mean", mean), ("rstd", rstd)):
        if a.shape != (rows,):
            raise ValueError(f"{name}: expected shape ({rows},), got {a.shape}")
    dx = np.zeros_like(x)
    dgamma, dbeta = np.zeros(d, np.float32), np.zeros(d, np.float32)
    _k.layernorm_bwd(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, _t(target))
    return dx, dgamma, dbeta


# ----------------------------------------------------------------- gemm, attention
def gemm(a: np.ndarray, b: np.ndarray, c: Optional[np.ndarray] = None, *, alpha: float = 1.0,
         beta: float = 0.0, trans_a: bool = False, trans_b: bool = False,
         target: Optional[str] = None) -> np.ndarray:
    """C = alpha op(A) op(B) + beta C, op(X) = X.T when trans_x. Without `c` a new C is
    returned (beta must be 0); with `c` it is updated in place and returned."""
    a, b = _in("a", a, 2), _in("b", b, 2)
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    kb, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
    if k != kb:
        raise ValueError(f"gemm: op(a) is {m} x {k} but op(b) is {kb} x {n}: inner dimensions "
                         "differ")
    if c is None and beta != 0:
        raise ValueError("gemm: beta != 0 needs c")
    c = _out("c", c, (m, n))
    _k.gemm(bool(trans_a), bool(trans_b), float(alpha), a, b, float(beta), c, _t(target))
    return c


def gemm_batched(a: np.ndarray, b: np.ndarray, c: Optional[np.ndarray] = None, *,
                 alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False,
                 trans_b: bool = False, target: Optional[str] = None) -> np.ndarray:
    """gemm over a leading batch axis: a (batch x ...), b (batch x ...), c (batch x m x n)."""
    a, b = _in("a", a, 3), _in("b", b, 3)
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"gemm_batched: a has batch {a.shape[0]}, b {b.shape[0]}")
    m, k = (a.shape[2], a.shape[1]) if trans_a else a.shape[1:]
    kb, n = (b.shape[2], b.shape[1]) if trans_b else b.shape[1:]
    if k != kb:
        raise ValueError(f"gemm_batched: op(a) is {m} x {k} but op(b) is {kb} x {n}: inner "
                         "dimensions differ")
    if c is None and beta != 0:
        raise ValueError("gemm_batched: beta != 0 needs c")
    c = _out("c", c, (a.shape[0], m, n))
    _k.gemm_batched(bool(trans_a), bool(trans_b), float(alpha), a, b, float(beta), c, _t(target))
    return c


def gemm_epilogue(a: np.ndarray, b: np.ndarray, e: np.ndarray, epilogue: str = "multiply", *,
                  alpha: float = 1.0, trans_a: bool = False, trans_b: bool = False,
                  out: Optional[np.ndarray] = None, target: Optional[str] = None) -> np.ndarray:
    """C = (alpha op(A) op(B)) * E (epilogue "multiply") or alpha op(A) op(B) + E ("add"), E of
    C's shape, in one pass over C."""
    codes = {"multiply": 1, "add": 2}
    if epilogue not in codes:
        raise ValueError(f"epilogue: 'multiply' or 'add', got {epilogue!r}")
    a, b = _in("a", a, 2), _in("b", b, 2)
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    kb, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
    if k != kb:
        raise ValueError(f"gemm_epilogue: op(a) is {m} x {k} but op(b) is {kb} x {n}: inner "
                         "dimensions differ")
    e = _in("e", e, 2)
    if e.shape != (m, n):
        raise ValueError(f"e: expected shape {(m, n)}, got {e.shape}")
    c = _out("out", out, (m, n))
    if np.shares_memory(c, e):
        raise ValueError("out must not overlap e")
    _k.gemm_epilogue(bool(trans_a), bool(trans_b), float(alpha), a, b, codes[epilogue], e, c,
                     _t(target))
    return c


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: Optional[float] = None,
              causal: bool = True, linear: bool = False, *,
              target: Optional[str] = None) -> tuple[np.ndarray, np.ndarray]:
    """One head over n positions: P = softmax_rows(scale Q K^T) (P = scale Q K^T when linear),
    causal masks c > r; O = P V. q, k: n x d_k, v: n x d_v; scale defaults to 1/sqrt(d_k).
    Returns (O, P): the output and the attention pattern."""
    q, k, v = _in("q", q, 2), _in("k", k, 2), _in("v", v, 2)
    n, dk = q.shape
    if k.shape != q.shape:
        raise ValueError(f"k: expected q's shape {q.shape}, got {k.shape}")
    if v.shape[0] != n:
        raise ValueError(f"v: expected {n} rows (q.shape[0]), got shape {v.shape}")
    o = np.empty((n, v.shape[1]), np.float32)
    p = np.empty((n, n), np.float32)
    s = float(scale) if scale is not None else 1.0 / float(np.sqrt(dk))
    _k.attention(q, k, v, o, p, s, bool(causal), bool(linear), _t(target))
    return o, p


def attention_bwd(q: np.ndarray, k: np.ndarray, v: np.ndarray, p: np.ndarray, d_o: np.ndarray,
                  scale: Optional[float] = None, causal: bool = True, linear: bool = False, *,
                  target: Optional[str] = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Backward of attention given its P and dO: returns (dQ, dK, dV)."""
    q, k, v = _in("q", q, 2), _in("k", k, 2), _in("v", v, 2)
    p, d_o = _in("p", p, 2), _in("d_o", d_o, 2)
    n, dk = q.shape
    if k.shape != q.shape or v.shape[0] != n:
        raise ValueError(f"k, v: expected {n} rows and k of q's shape {q.shape}")
    if p.shape != (n, n):
        raise ValueError(f"p: expected shape {(n, n)}, got {p.shape}")
    if d_o.shape != v.shape:
        raise ValueError(f"d_o: expected v's shape {v.shape}, got {d_o.shape}")
    dq, dkk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    scratch = np.empty((n, n), np.float32)
    s = float(scale) if scale is not None else 1.0 / float(np.sqrt(dk))
    _k.attention_bwd(q, k, v, p, d_o, dq, dkk, dv, scratch, s, bool(causal), bool(linear),
                     _t(target))
    return dq, dkk, dv


def posattn(a: np.ndarray, x: np.ndarray, w: np.ndarray, *,
            target: Optional[str] = None) -> tuple[np.ndarray, np.ndarray]:
    """Copy-task positional attention over p sequences: a (L x L), x (p x L x V), w (V x V);
    h = A X (per sequence), f = h W^T. Returns (h, f)."""
    a, x, w = _in("a", a, 2), _in("x", x, 3), _in("w", w, 2)
    _, L, V = x.shape
    if a.shape != (L, L):
        raise ValueError(f"a: expected shape {(L, L)} (x is p x L x V), got {a.shape}")
    if w.shape != (V, V):
        raise ValueError(f"w: expected shape {(V, V)}, got {w.shape}")
    h, f = np.empty_like(x), np.empty_like(x)
    _k.posattn(a, x, w, h, f, _t(target))
    return h, f


def posattn_bwd(a: np.ndarray, x: np.ndarray, w: np.ndarray, h: np.ndarray, df: np.ndarray, *,
                target: Optional[str] = None) -> tuple[np.ndarray, np.ndarray]:
    """Backward of posattn given h and df (p x L x V): returns (da, dw), da = sum_mu (df W) X^T,
    dw = sum_mu df^T h."""
    a, x, w = _in("a", a, 2), _in("x", x, 3), _in("w", w, 2)
    h, df = _in("h", h, 3), _in("df", df, 3)
    _, L, V = x.shape
    if a.shape != (L, L) or w.shape != (V, V):
        raise ValueError(f"a, w: expected shapes {(L, L)} and {(V, V)}, got {a.shape}, {w.shape}")
    for name, arr in (("h", h), ("df", df)):
        if arr.shape != x.shape:
            raise ValueError(f"{name}: expected x's shape {x.shape}, got {arr.shape}")
    da, dw, dh = np.empty_like(a), np.empty_like(w), np.empty_like(x)
    _k.posattn_bwd(a, x, w, h, df, da, dw, dh, _t(target))
    return da, dw


# ----------------------------------------------------------------- optimisers
def adam(param: np.ndarray, grad: np.ndarray, m: np.ndarray, v: np.ndarray, step: int, *,
         lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
         weight_decay: float = 0.0, target: Optional[str] = None) -> None:
    """One Adam step in place on param, m, v (L2 weight decay folded into the gradient; bias
    correction at the 1-based `step`)."""
    _adam(param, grad, m, v, step, lr, beta1, beta2, eps, weight_decay, False, target)


def adamw(param: np.ndarray, grad: np.ndarray, m: np.ndarray, v: np.ndarray, step: int, *,
          lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 0.0, target: Optional[str] = None) -> None:
    """One AdamW step in place (decoupled weight decay)."""
    _adam(param, grad, m, v, step, lr, beta1, beta2, eps, weight_decay, True, target)


def _adam(param: np.ndarray, grad: np.ndarray, m: np.ndarray, v: np.ndarray, step: int, lr: float,
          beta1: float, beta2: float, eps: float, wd: float, decoupled: bool,
          target: Optional[str]) -> None:
    param = _inout("param", param)
    grad = _in("grad", grad)
    if grad.shape != param.shape:
        raise ValueError(f"grad: expected param's shape {param.shape}, got {grad.shape}")
    m, v = _inout("m", m, param.shape), _inout("v", v, param.shape)
    if step < 1:
        raise ValueError(f"step: the first step is 1, got {step}")
    _k.adam(param, grad, m, v, float(lr), float(beta1), float(beta2), float(eps), float(wd),
            int(step), decoupled, _t(target))


def sgld(theta: np.ndarray, grad: np.ndarray, eta: float, temperature: float, *, seed: int = 0,
         stream: int = 0, counter: int = 0, target: Optional[str] = None) -> None:
    """One SGLD step in place: theta -= eta grad; theta += sqrt(2 eta T) xi, xi the gaussian()
    samples counter.. of (seed, stream)."""
    theta = _inout("theta", theta)
    grad = _in("grad", grad)
    if grad.shape != theta.shape:
        raise ValueError(f"grad: expected theta's shape {theta.shape}, got {grad.shape}")
    _k.sgld(theta, grad, float(eta), float(temperature), int(seed), int(stream), int(counter),
            _t(target))


# ----------------------------------------------------------------- random numbers, reductions
def gaussian(n: int, *, seed: int = 0, stream: int = 0, counter: int = 0,
             target: Optional[str] = None) -> np.ndarray:
    """n N(0, 1) samples: numbers counter.. of the Philox stream (seed, stream)."""
    out = np.empty(int(n), np.float32)
    _k.gaussian(out, int(seed), int(stream), int(counter), _t(target))
    return out


def uniform_bits(n: int, *, seed: int = 0, stream: int = 0, counter: int = 0,
                 target: Optional[str] = None) -> np.ndarray:
    """n raw uint32 words of the same stream (identical on every target)."""
    out = np.empty(int(n), np.uint32)
    _k.uniform_bits(out, int(seed), int(stream), int(counter), _t(target))
    return out


def sum(x: np.ndarray, *, target: Optional[str] = None) -> float:  # noqa: A001
    """Sum of every element in double, in a fixed order (bit-identical on every target)."""
    return float(_k.sum(_in("x", x), _t(target)))


def dot(x: np.ndarray, y: np.ndarray, *, target: Optional[str] = None) -> float:
    """Dot product of x and y (same size) in double, fixed order."""
    x, y = _in("x", x), _in("y", y)
    if x.size != y.size:
        raise ValueError(f"dot: x has {x.size} elements, y {y.size}")
    return float(_k.dot(x, y, _t(target)))


def max(x: np.ndarray, *, target: Optional[str] = None) -> float:  # noqa: A001
    """Largest element (NaN if any is NaN, -inf if x is empty)."""
    return float(_k.max(_in("x", x), _t(target)))
