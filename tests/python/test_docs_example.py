# SPDX-License-Identifier: Apache-2.0
"""docs/python.md's example runs as written: its ```python blocks, in order, in one namespace,
from a folder that holds the repository's configs/ (as the repository root does)."""
from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_docs_python_md_example(tmp_path, capsys):
    text = (ROOT / "docs" / "python.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```$", text, re.S | re.M)
    assert len(blocks) >= 5
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        namespace: dict = {"__name__": "__docs__"}
        for i, block in enumerate(blocks):
            exec(compile(block, f"docs/python.md block {i + 1}", "exec"), namespace)
    finally:
        os.chdir(cwd)
    assert (tmp_path / "runs/python-example/kl_histories.png").stat().st_size > 10_000
    out = capsys.readouterr().out
    assert "softmax_rows 512x512: NumPy" in out and "gemm 256^3" in out
    with capsys.disabled():  # the speed lines, for the log
        print("\n" + "\n".join(line for line in out.splitlines() if " us, phaselab " in line))
