# SPDX-License-Identifier: Apache-2.0
"""Runs: starting them through the bundled driver and reading a run folder as DataFrames."""
from __future__ import annotations

import functools
import json
import re
import warnings
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from ._driver import Overrides, PathLike, PhaselabError, call, check_call, override_args

# Files of a run folder that are not result tables.
_NOT_TABLES = {"journal"}


class Run:
    """One run folder: run.json, results.csv and the other tables, figures, checkpoints.

    Attributes:
        path: the run folder.
        record: run.json as a dict (resolved config, versions, CPU, kernels, counts, points).
        params: the constant parameters (the plugin's table in the resolved config: every key not
            swept), with their values.
        sweep: the swept keys and their lists.
        status: run.json's status ("ok", "failed", "interrupted", ...), exit_status its code.
    """

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        record_file = self.path / "run.json"
        if not record_file.is_file():
            raise FileNotFoundError(f"{self.path} is not a phaselab run folder: no run.json")
        with open(record_file, encoding="utf-8") as f:
            self.record: dict[str, Any] = json.load(f)
        config = self.record.get("config", {})
        self.plugin: str = config.get("plugin", "")
        self.sweep: dict[str, list[Any]] = dict(config.get("sweep", {}))
        self.params: dict[str, Any] = dict(config.get("params", {}))
        self.status: str = self.record.get("status", "unknown")
        self.exit_status: Optional[int] = self.record.get("exit_status")
        self._tables: dict[str, pd.DataFrame] = {}

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}, plugin={self.plugin!r}, status={self.status!r})"

    # ----------------------------------------------------------------- tables
    def tables(self) -> list[str]:
        """Names of the CSV tables in the folder ("results", "summary", ...)."""
        return sorted(p.stem for p in self.path.glob("*.csv") if p.stem not in _NOT_TABLES)

    def table(self, name: str, *, with_params: bool = False) -> pd.DataFrame:
        """The table NAME.csv as read from the file (with_params: constant parameters added as
        columns, as in `results`)."""
        if name.endswith(".csv"):
            name = name[:-4]
        file = self.path / f"{name}.csv"
        if not file.is_file():
            raise KeyError(f"{self.path} has no table {name!r} (tables: {', '.join(self.tables())})")
        if name not in self._tables:
            self._tables[name] = _read_csv(file)
        df = self._tables[name].copy()
        return self._add_params(df) if with_params else df

    @property
    def results(self) -> pd.DataFrame:
        """results.csv, one row per row of the file, with every constant parameter of run.json
        added as a typed column after the file's columns."""
        return self.table("results", with_params=True)

    @property
    def failures(self) -> pd.DataFrame:
        """failures.csv (points that failed, with their reason); empty when none failed."""
        file = self.path / "failures.csv"
        return _read_csv(file) if file.is_file() else pd.DataFrame()

    @property
    def boundaries(self) -> Optional[pd.DataFrame]:
        """boundaries.csv of a boundary search, None when the run did not search."""
        file = self.path / "boundaries.csv"
        return _read_csv(file) if file.is_file() else None

    @property
    def figures(self) -> dict[str, Path]:
        """Figure name -> image file (PNG; PDF or SVG where only those exist). Every format of
        each figure (``[run] figure_formats``): :attr:`figure_files`."""
        return {name: files.get("png") or files.get("pdf") or files["svg"]
                for name, files in self.figure_files.items()}

    @property
    def figure_files(self) -> dict[str, dict[str, Path]]:
        """Figure name -> {format: file} for every format drawn: ``{"loss": {"png": ...,
        "pdf": ..., "svg": ...}}`` with ``[run] figure_formats = ["png", "pdf", "svg"]``."""
        out: dict[str, dict[str, Path]] = {}
        folder = self.path / "figures"
        listed = [f for f in self.record.get("figures", []) if isinstance(f, dict) and "name" in f]
        if listed:  # what this run drew (a folder may keep files of an earlier run's formats)
            for f in listed:
                for ext in ("png", "pdf", "svg"):
                    if f.get(ext) and (folder / Path(f[ext]).name).is_file():
                        out.setdefault(f["name"], {})[ext] = folder / Path(f[ext]).name
            return dict(sorted(out.items()))
        for ext in ("png", "pdf", "svg"):  # a record without the list: what the folder holds
            for p in sorted(folder.glob(f"*.{ext}")):
                out.setdefault(p.stem, {})[ext] = p
        return dict(sorted(out.items()))

    def checkpoints(self) -> list[Path]:
        """Every safetensors file under the folder, sorted."""
        return sorted(self.path.rglob("*.safetensors"))

    # ----------------------------------------------------------------- helpers
    def _add_params(self, df: pd.DataFrame) -> pd.DataFrame:
        types = _param_types(self.plugin)
        for key, value in self.params.items():
            if key in df.columns:
                continue
            df[key] = pd.Series([_typed(value, types.get(key))] * len(df), index=df.index,
                                dtype=_dtype(value, types.get(key)))
        return df


def _read_csv(file: Path) -> pd.DataFrame:
    # Strings stay strings ("" is missing), numbers are numbers; a column of 0/1 stays integer;
    # every float is the double its text names, so a value equals what the driver wrote.
    df: pd.DataFrame = pd.read_csv(file, keep_default_na=False, na_values=[""], **_PRECISE)
    return df


# pandas < 3 parses floats with a fast parser that may differ in the last bit unless asked for
# round_trip; pandas 3 is exact by default and deprecates the argument.
_PRECISE: dict[str, Any] = ({} if int(pd.__version__.split(".")[0]) >= 3
                            else {"float_precision": "round_trip"})


def _typed(value: Any, kind: Optional[str]) -> Any:
    if kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return value


def _dtype(value: Any, kind: Optional[str]) -> str:
    if kind == "float" or (kind is None and isinstance(value, float)):
        return "float64"
    if kind == "bool" or isinstance(value, bool):
        return "bool"
    if kind == "int" or isinstance(value, int):
        return "int64"
    return "object"


@functools.lru_cache(maxsize=None)
def _param_types(plugin: str) -> dict[str, str]:
    """Key -> type ("int", "float", "bool", "string") from `phaselab list PLUGIN`; {} if the
    driver or the plugin is not here (then run.json's JSON types are used)."""
    if not plugin:
        return {}
    try:
        status, lines = call(["list", plugin])
    except (PhaselabError, OSError):
        return {}
    if status != 0:
        return {}
    types = {}
    for line in lines:
        m = re.match(r"^    (\S+)\s+(int|float|bool|string|str)\s", line)
        if m:
            types[m.group(1)] = m.group(2)
    return types


def load(run_dir: PathLike) -> Run:
    """Reads a run folder (what `phaselab run` wrote): see Run."""
    return Run(run_dir)


def run(config: PathLike, out: Optional[PathLike] = None, overrides: Overrides = None,
        threads: Optional[int] = None, resume: bool = False, *, target: Optional[str] = None,
        quiet: bool = False, allow_failures: bool = True) -> Run:
    """Runs CONFIG with the bundled driver (`phaselab run`) and returns the loaded run.

    Args:
        config: the TOML config file.
        out: the run folder (default: the config's run.out, else runs/<name>-<timestamp>).
        overrides: key=value overrides, {"copy_task.L": 32, "sweep.P": [10, 100]} or
            ["copy_task.L=32"]; type-checked like the file and recorded in run.json.
        threads: worker threads (0: all cores); default the config's.
        resume: skip the points already in the folder's results.
        target: force a kernel target ("scalar", "avx2", ...).
        quiet: do not echo the driver's progress lines (they go to sys.stderr).
        allow_failures: a run where some points failed (exit status 4) returns the Run (with a
            warning; see Run.failures); False raises PhaselabError instead.

    Raises:
        PhaselabError: the driver's message and exit status (2 config error, 3 plugin, ...);
            Ctrl-C stops the driver and raises it with status 130.
    """
    args = ["run", str(config)]
    if out is not None:
        args += ["--out", str(out)]
    if threads is not None:
        args += ["--threads", str(int(threads))]
    if resume:
        args.append("--resume")
    if target:
        args += ["--target", target]
    args += override_args(overrides)
    status, lines = call(args, echo=not quiet)
    folder: Optional[Path] = Path(out) if out is not None else None
    for line in lines:
        m = re.match(r"^run record: (.*)run\.json$", line)
        if m:
            folder = Path(m.group(1))
    if status not in (0, 4) or (status == 4 and not allow_failures) or folder is None:
        from ._driver import _error_text, driver_path
        raise PhaselabError(_error_text(lines), status, [str(driver_path()), *args])
    result = Run(folder)
    if status == 4:
        warnings.warn(f"phaselab: {len(result.failures)} point(s) failed in {folder} "
                      "(Run.failures has their reasons)", RuntimeWarning, stacklevel=2)
    return result


def check(config: PathLike, overrides: Overrides = None) -> str:
    """Validates CONFIG (with overrides) without running it; returns the driver's summary line
    ("...: ok: plugin copy_task 0.1.0, 12 points ...").

    Raises:
        PhaselabError: what is wrong (file:line:column: error: ...), exit status 2 or 3.
    """
    lines = check_call(["check", str(config), *override_args(overrides)])
    return "\n".join(lines).strip()


def plugins() -> list[dict[str, Any]]:
    """The plugins the driver finds (`phaselab list`): name, version, description, path, keys
    (name -> {"type", "default", "help"}), tables and figures."""
    lines = check_call(["list"])
    out: list[dict[str, Any]] = []
    for line in lines:
        head = re.match(r"^(\S+) (\S+)  (.*)$", line)
        if head:
            out.append({"name": head.group(1), "version": head.group(2),
                        "description": head.group(3), "path": "", "keys": {}, "tables": [],
                        "figures": []})
            continue
        if not out:
            continue
        cur = out[-1]
        key = re.match(r"^    (\S+)\s+(\S+)\s+= (\S*)\s*(.*)$", line)
        if key:
            default = key.group(3)
            if len(default) >= 2 and default[0] == default[-1] == '"':
                default = default[1:-1]
            cur["keys"][key.group(1)] = {"type": key.group(2), "default": default,
                                         "help": key.group(4)}
        elif line.startswith("    ") and not cur["path"]:
            cur["path"] = line.strip()
        elif line.startswith("  tables: "):
            cur["tables"] = [t.split(" ")[0] for t in re.split(r"\), ", line[10:])]
        elif line.startswith("  figures: "):
            cur["figures"] = [f.strip() for f in line[11:].split(",")]
    return out
