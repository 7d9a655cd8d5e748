# SPDX-License-Identifier: Apache-2.0
"""phaselab's kernels beside NumPy from Python (not a test: timings, printed; docs/python.md).

    OPENBLAS_NUM_THREADS=1 python3 tests/python/speed_vs_numpy.py
"""
import time

import numpy as np

from phaselab import kernels


def best_of(f, repeat=30):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts)


rng = np.random.default_rng(1)
x = rng.standard_normal((512, 512)).astype(np.float32)
y = np.empty_like(x)


def numpy_softmax():
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def numpy_gelu():
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


t1, t2 = best_of(numpy_softmax), best_of(lambda: kernels.softmax_rows(x, out=y))
print(f"softmax_rows 512x512: NumPy {t1 * 1e6:.0f} us, {kernels.variant('softmax_rows')} "
      f"{t2 * 1e6:.0f} us: {t1 / t2:.1f}x")
t1, t2 = best_of(numpy_gelu), best_of(lambda: kernels.gelu(x, out=y))
print(f"gelu 512x512: NumPy {t1 * 1e6:.0f} us, {kernels.variant('gelu')} {t2 * 1e6:.0f} us: "
      f"{t1 / t2:.1f}x")
for n in (64, 256):
    a, b = x[:n, :n].copy(), x[n:2 * n, :n].copy()
    c = np.empty((n, n), np.float32)
    t1, t2 = best_of(lambda: a @ b), best_of(lambda: kernels.gemm(a, b, c))
    print(f"gemm {n}^3: NumPy {t1 * 1e6:.1f} us, {kernels.variant('gemm')} {t2 * 1e6:.1f} us: "
          f"{t1 / t2:.2f}x")
