# SPDX-License-Identifier: Apache-2.0
"""phaselab's kernels beside NumPy and, when it is installed, PyTorch (CPU) from Python (not a
test: timings, printed; docs/python.md has one run's table).

    OPENBLAS_NUM_THREADS=1 python3 tests/python/speed_vs_numpy.py [--threads N] [--repeat R]

Every timing is the median of R calls (after 3 warm-up calls) of the same operation on the
same float32 arrays: phaselab's kernels run on one thread; PyTorch gets torch.set_num_threads(N)
(default 1, to match) and NumPy's BLAS gets what OPENBLAS_NUM_THREADS says. Without torch the
PyTorch column says "-".
"""
import argparse
import os
import platform
import statistics
import time

import numpy as np

from phaselab import kernels

try:
    import torch
except ImportError:  # the column is left out, nothing else changes
    torch = None


def median_us(f, repeat):
    for _ in range(3):
        f()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e6


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    if torch is not None:
        torch.set_num_threads(args.threads)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((512, 512)).astype(np.float32)
    y = np.empty_like(x)
    xt = torch.from_numpy(x) if torch is not None else None

    def numpy_softmax():
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def numpy_gelu():  # x * x * x: NumPy's x**3 calls pow, 8x slower here
        return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * (x * x * x))))

    # (kernel, size, phaselab, NumPy, PyTorch or None)
    cases = [
        ("softmax_rows", "512x512", lambda: kernels.softmax_rows(x, out=y), numpy_softmax,
         (lambda: torch.softmax(xt, dim=1)) if torch is not None else None),
        ("gelu (tanh)", "512x512", lambda: kernels.gelu(x, out=y), numpy_gelu,
         (lambda: torch.nn.functional.gelu(xt, approximate="tanh")) if torch is not None else None),
    ]
    for n in (64, 256):
        a, b = x[:n, :n].copy(), x[n:2 * n, :n].copy()
        c = np.empty((n, n), np.float32)
        if torch is not None:
            at, bt, ct = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(np.empty_like(c))
        cases.append((
            "gemm", f"{n}^3",
            lambda a=a, b=b, c=c: kernels.gemm(a, b, c),
            lambda a=a, b=b, c=c: np.matmul(a, b, out=c),
            (lambda at=at, bt=bt, ct=ct: torch.mm(at, bt, out=ct)) if torch is not None else None))

    print(f"CPU: {cpu_model()}; phaselab kernels: 1 thread; "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}; "
          + (f"PyTorch {torch.__version__}, torch.get_num_threads() = {torch.get_num_threads()}"
             if torch is not None else "PyTorch not installed")
          + f"; NumPy {np.__version__}; median of {args.repeat}")
    print("| kernel | size | phaselab variant | phaselab us | NumPy us | PyTorch us "
          "| NumPy / phaselab | PyTorch / phaselab |")
    print("|---|---|---|---|---|---|---|---|")
    for name, size, f_pl, f_np, f_pt in cases:
        t_pl, t_np = median_us(f_pl, args.repeat), median_us(f_np, args.repeat)
        t_pt = median_us(f_pt, args.repeat) if f_pt is not None else None
        kernel = name.split()[0]
        print(f"| {name} | {size} | `{kernels.variant(kernel)}` | {t_pl:.1f} | {t_np:.1f} | "
              + (f"{t_pt:.1f}" if t_pt is not None else "-")
              + f" | {t_np / t_pl:.2f} | "
              + (f"{t_pt / t_pl:.2f}" if t_pt is not None else "-") + " |")


if __name__ == "__main__":
    main()
