# SPDX-License-Identifier: Apache-2.0
"""Checkpoints: safetensors files (what the markov plugins save) as NumPy arrays and back.

The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length,
a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}} padded with spaces
to 8 bytes, then the little-endian tensor bytes. Read here with NumPy alone, so that the values
equal the safetensors package's view of the file (tests/python compares them).
"""
from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Mapping, Optional, Union

import numpy as np

PathLike = Union[str, "os.PathLike[str]"]

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
           "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}
_CODES = {np.dtype(v).str if v not in ("i1", "u1", "?") else v: k for k, v in _DTYPES.items()}
_MAX_HEADER = 100 * 1024 * 1024


class CheckpointError(ValueError):
    """The file is not a valid safetensors file (the reason names the problem)."""


def load_checkpoint(path: PathLike) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Reads a safetensors file: ({tensor name: array}, metadata).

    Arrays are copies in native byte order with the file's dtype and shape (BF16 is read as
    uint16 bit patterns, since NumPy has no bfloat16). Raises CheckpointError on a malformed file.
    """
    data = Path(path).read_bytes()
    if len(data) < 8:
        raise CheckpointError(f"{path}: {len(data)} bytes, shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > _MAX_HEADER or 8 + n > len(data):
        raise CheckpointError(f"{path}: header length {n} exceeds the file ({len(data)} bytes)")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path}: header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    body = memoryview(data)[8 + n:]
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        try:
            code, shape, (begin, end) = info["dtype"], list(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{path}: tensor {name!r}: needs dtype, shape and data_offsets")
        if code == "BF16":
            dtype = np.dtype("<u2")
        elif code in _DTYPES:
            dtype = np.dtype(_DTYPES[code])
        else:
            raise CheckpointError(f"{path}: tensor {name!r}: dtype {code} is not supported")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not 0 <= begin <= end <= len(body) or end - begin != count * dtype.itemsize:
            raise CheckpointError(f"{path}: tensor {name!r}: data_offsets [{begin}, {end}] do not "
                                  f"fit {code} {shape} in {len(body)} bytes of data")
        arr = np.frombuffer(body[begin:end], dtype=dtype).reshape(shape)
        tensors[name] = arr.astype(dtype.newbyteorder("="), copy=True)
    return tensors, dict(metadata)


def save_checkpoint(path: PathLike, tensors: Mapping[str, np.ndarray],
                    metadata: Optional[Mapping[str, str]] = None) -> None:
    """Writes tensors (and string metadata) as a safetensors file that phaselab, the safetensors
    package and PyTorch read. Tensors are stored by name in sorted order, little-endian."""
    header: dict[str, object] = {}
    if metadata:
        bad = [k for k, v in metadata.items() if not isinstance(k, str) or not isinstance(v, str)]
        if bad:
            raise TypeError(f"metadata must map str to str (not: {bad})")
        header["__metadata__"] = dict(metadata)
    blobs = []
    offset = 0
    for name in sorted(tensors):
        arr = np.asarray(tensors[name])
        key = arr.dtype.newbyteorder("<").str if arr.dtype.itemsize > 1 else arr.dtype.str
        key = {"|i1": "i1", "|u1": "u1", "|b1": "?"}.get(key, key)
        if key not in _CODES:
            raise TypeError(f"tensor {name!r}: dtype {arr.dtype} has no safetensors code")
        raw = np.ascontiguousarray(arr, dtype=np.dtype(key)).tobytes()
        header[name] = {"dtype": _CODES[key], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
    os.replace(tmp, path)
