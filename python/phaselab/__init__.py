# SPDX-License-Identifier: Apache-2.0
"""phaselab from Python: runs, their results as DataFrames, checkpoints as arrays, the kernels on
NumPy arrays.

    import phaselab
    r = phaselab.run("configs/markov_default.toml", out="runs/m", overrides={"run.seeds": 2})
    r.results                        # pandas DataFrame: results.csv + constant parameters
    w, meta = phaselab.load_checkpoint(r.checkpoints()[-1])
    o, p = phaselab.kernels.attention(q, k, v)

The runs go through the driver bundled with the package (phaselab._native/bin/phaselab); the
kernels are the same library the driver links (phaselab._kernels, nanobind). docs/python.md.
"""
from __future__ import annotations

from typing import Any

from ._driver import PhaselabError, driver_path
from .checkpoints import CheckpointError, load_checkpoint, save_checkpoint
from .runs import Run, check, load, plugins, run

__version__ = "0.1.0"

__all__ = ["PhaselabError", "CheckpointError", "Run", "run", "load", "check", "plugins",
           "load_checkpoint", "save_checkpoint", "driver_path", "kernels", "__version__"]


def __getattr__(name: str) -> Any:  # phaselab.kernels imports the extension only when first used
    if name == "kernels":
        import importlib
        return importlib.import_module(".kernels", __name__)
    raise AttributeError(f"module 'phaselab' has no attribute {name!r}")
