# SPDX-License-Identifier: Apache-2.0
"""The bundled `phaselab` driver: finding it, calling it, turning its failures into exceptions."""
from __future__ import annotations

import collections
import math
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, Union

PathLike = Union[str, "os.PathLike[str]"]
Overrides = Union[Mapping[str, Any], Iterable[str], None]


class PhaselabError(RuntimeError):
    """The driver refused or failed.

    ``status`` is its exit status (2 usage or config error, 3 plugin load or ABI error, 4 a point
    failed, 5 a file could not be written, 130 interrupted), ``message`` its error text and
    ``command`` the command line that was run.
    """

    def __init__(self, message: str, status: int, command: Sequence[str] = ()) -> None:
        super().__init__(f"{message} (phaselab exit status {status})")
        self.message = message
        self.status = status
        self.command = list(command)


def driver_path() -> Path:
    """The phaselab executable used: $PHASELAB_EXE, else the one in this package (pip install),
    else `phaselab` on PATH."""
    env = os.environ.get("PHASELAB_EXE")
    if env:
        return Path(env)
    bundled = Path(__file__).resolve().parent / "_native" / "bin" / "phaselab"
    if bundled.is_file():
        return bundled
    found = shutil.which("phaselab")
    if found:
        return Path(found)
    raise PhaselabError("no phaselab driver: not bundled with this package (pip install . builds "
                        "it), not in $PHASELAB_EXE and not on PATH", 127)


def toml_value(value: Any) -> str:
    """A Python value written as a TOML value (for key=value overrides)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = repr(value)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if hasattr(value, "item"):  # NumPy scalars
        return toml_value(value.item())
    if hasattr(value, "tolist"):  # NumPy arrays
        return toml_value(value.tolist())
    raise TypeError(f"override value {value!r}: expected bool, int, float, str or a list of them")


def override_args(overrides: Overrides) -> list[str]:
    """`key=value` arguments from a mapping {"copy_task.L": 32} or strings ["copy_task.L=32"]."""
    if overrides is None:
        return []
    if isinstance(overrides, str):
        raise TypeError("overrides: give a mapping {key: value} or a list of 'key=value' strings")
    if isinstance(overrides, Mapping):
        return [f"{k}={toml_value(v)}" for k, v in overrides.items()]
    out = []
    for item in overrides:
        if not isinstance(item, str) or "=" not in item:
            raise TypeError(f"override {item!r}: expected a 'key=value' string")
        out.append(item)
    return out


def _error_text(lines: Sequence[str]) -> str:
    errors = [ln for ln in lines if re.search(r"\berror\b", ln)]
    return "\n".join(errors or lines[-5:]).strip() or "phaselab failed without a message"


def call(args: Sequence[str], *, echo: bool = False) -> tuple[int, list[str]]:
    """Runs the driver with `args`; returns (exit status, output lines: stdout and stderr).

    With echo, each line is written to sys.stderr as it comes (the driver's progress lines: not on
    a terminal it logs plain lines, "[3/12] K=4 seed=1: ok (0.07 s)"); with tqdm installed those
    become a progress bar (tqdm.auto: a widget in Jupyter) and the other lines print above it. Ctrl-C (KeyboardInterrupt) is passed on to the driver as
    SIGINT, which finishes the rows it is writing and exits 130; then PhaselabError(130) is
    raised."""
    cmd = [str(driver_path()), *map(str, args)]
    lines: collections.deque[str] = collections.deque(maxlen=5000)  # the last lines
    progress = _Progress() if echo else None
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          bufsize=1, errors="replace") as proc:
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                line = line.rstrip("\n")
                lines.append(line)
                if progress:
                    progress.line(line)
            status = proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise PhaselabError("interrupted (Ctrl-C): the driver stopped; what it finished is in "
                                "its run folder (resume=True continues it)", 130, cmd) from None
        finally:
            if progress:
                progress.close()
    return status, list(lines)


class _Progress:
    """The driver's "[i/N] label: ok" lines as a tqdm bar when tqdm is installed, else echoed."""

    def __init__(self) -> None:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
        self._tqdm = tqdm
        self._bar: Any = None

    def line(self, line: str) -> None:
        m = re.match(r"^\[(\d+)/(\d+)\] (.*)$", line)
        if m and self._tqdm is not None:
            if self._bar is None:
                self._bar = self._tqdm(total=int(m.group(2)), unit="point", desc="phaselab",
                                       file=sys.stderr)
            self._bar.set_postfix_str(m.group(3)[:60], refresh=False)
            self._bar.update(int(m.group(1)) - self._bar.n)
        elif self._bar is not None:
            self._bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def check_call(args: Sequence[str], *, echo: bool = False) -> list[str]:
    """call(), raising PhaselabError on a non-zero exit status."""
    status, lines = call(args, echo=echo)
    if status != 0:
        raise PhaselabError(_error_text(lines), status, [str(driver_path()), *map(str, args)])
    return lines
