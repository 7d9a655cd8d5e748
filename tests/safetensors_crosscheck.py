#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Cross-check phaselab's safetensors code against the reference library (run by hand).

Needs numpy and safetensors from PyPI (pip install numpy safetensors) and a build with the
tests (build/tests/safetensors_tool). Three checks, each exact:

1. phaselab -> Python: `safetensors_tool example` writes a file; safetensors.numpy.load_file reads
   it; every array is compared bit for bit with the same values computed here from the formulas
   documented in tests/safetensors_tool.cc, and the metadata with safe_open().metadata().
2. byte identity: safetensors.numpy.save_file of those arrays (metadata in key order) gives the same
   bytes as phaselab's file.
3. Python -> phaselab: files written by safetensors.numpy.save_file (every dtype phaselab reads,
   scalars, empty tensors, unicode names and metadata) are read by `safetensors_tool dump`, whose
   per-tensor dtype, shape, size and FNV-1a checksum of the bytes must equal the ones computed here.

Usage: python3 tests/safetensors_crosscheck.py [BUILD_DIR]   (default: build)
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import safetensors
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

SPECIAL_F32 = [0x7FC00001, 0xFFC00ABC, 0x7F800001, 0xFF8FFFFF, 0x80000000,
               0x00000001, 0x007FFFFF, 0x807FFFFF, 0x7F800000, 0xFF800000]
M32, M64 = (1 << 32) - 1, (1 << 64) - 1


def example_arrays():
    u32 = [SPECIAL_F32[i] if i < len(SPECIAL_F32) else (2654435761 * i + 12345) & M32
           for i in range(3 * 5 * 7)]
    u64 = [(0x9E3779B97F4A7C15 * i + 1) & M64 for i in range(24)]
    return {
        "f32": np.array(u32, dtype="<u4").view("<f4").reshape(3, 5, 7),
        "f64": np.array(u64, dtype="<u8").view("<f8").reshape(4, 6),
        "i32": np.array([(2654435761 * i + 12345) & M32 for i in range(10)], "<u4").view("<i4"),
        "i64": np.array(u64[:4], dtype="<u8").view("<i8").reshape(2, 2),
        "scalar": np.array(-0.0, dtype="<f4"),
        "empty": np.zeros((0, 3), dtype="<f4"),
        "layers.0.qkv": (0.5 * np.arange(6, dtype=np.float32) - 1).reshape(2, 3),
    }


EXAMPLE_METADATA = {"config": '{"K": 16, "d": 32}', "seed": "7", "unicode": "\u00e9\U0001F600"}


def bits(a):
    a = np.array(a, order="C")
    return a.view(f"<u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


def fnv1a64(b):
    h = 0xCBF29CE484222325
    for c in b:
        h = ((h ^ c) * 0x100000001B3) & M64
    return h


def expected_dump(tensors, metadata):
    dt = {"f8": "F64", "f4": "F32", "f2": "F16", "i8": "I64", "i4": "I32", "i2": "I16", "i1": "I8",
          "u8": "U64", "u4": "U32", "u2": "U16", "u1": "U8", "b1": "BOOL"}
    lines = [f"meta {json.dumps(k, ensure_ascii=False)} {json.dumps(v, ensure_ascii=False)}"
             for k, v in sorted(metadata.items(), key=lambda kv: kv[0].encode())]
    rows = []
    for name, a in tensors.items():
        a = np.array(a, order="C")  # (ascontiguousarray would turn a scalar into shape [1])
        data = a.astype(a.dtype.newbyteorder("<")).tobytes()
        shape = "[" + ",".join(str(s) for s in a.shape) + "]"
        rows.append(f"tensor {json.dumps(name, ensure_ascii=False)} {dt[a.dtype.str[1:]]} "
                    f"{shape} {len(data)} {fnv1a64(data):016x}")
    return lines, rows


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    tool = os.path.join(build, "tests", "safetensors_tool")
    print(f"numpy {np.__version__}, safetensors {safetensors.__version__}, tool {tool}")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        # 1. phaselab writes, Python reads.
        ours = os.path.join(tmp, "phaselab.safetensors")
        subprocess.run([tool, "example", ours], check=True)
        loaded = load_file(ours)
        want = example_arrays()
        with safe_open(ours, framework="numpy") as f:
            meta = f.metadata()
        ok = set(loaded) == set(want) and meta == EXAMPLE_METADATA
        for name, a in want.items():
            b = loaded.get(name)
            same = (b is not None and b.dtype == a.dtype and b.shape == a.shape
                    and np.array_equal(bits(a), bits(b)))
            ok &= bool(same)
            if not same:
                print(f"  MISMATCH {name}: want {a.dtype}{a.shape}, got "
                      f"{None if b is None else (b.dtype, b.shape)}")
        print(f"1. phaselab -> safetensors.numpy.load_file: {len(want)} tensors "
              f"({sum(a.size for a in want.values())} values, "
              f"{int(sum(np.isnan(a).sum() for a in want.values() if a.dtype.kind == 'f'))} NaNs), "
              f"metadata {len(meta or {})} keys: {'bit-identical' if ok else 'DIFFERENT'}")
        failures += not ok

        # 2. The reference writer's bytes for the same content. It writes "__metadata__" keys in
        # hash-map order (it varies from run to run), so the header is compared as JSON with the
        # metadata keys unordered and the tensor entries in order; everything else byte for byte.
        ref = os.path.join(tmp, "reference.safetensors")
        save_file(want, ref, metadata=EXAMPLE_METADATA)
        a, b = open(ours, "rb").read(), open(ref, "rb").read()
        na, nb = int.from_bytes(a[:8], "little"), int.from_bytes(b[:8], "little")
        ha, hb = json.loads(a[8:8 + na]), json.loads(b[8:8 + nb])
        same = (a[:8] == b[:8] and list(ha.items()) == list(hb.items())
                and a[8 + na:] == b[8 + nb:])
        print(f"2. file bytes, phaselab vs safetensors.numpy.save_file: {len(a)} vs {len(b)} bytes, "
              f"{'identical' if a == b else 'identical up to the order of the metadata keys' if same else 'DIFFERENT'}")
        failures += not same
        # With one metadata key the order question disappears: the whole files must be identical.
        one = {"seed": "7"}
        save_file(want, ref, metadata=one)
        b = open(ref, "rb").read()
        nb = int.from_bytes(b[:8], "little")
        # phaselab's header for the same content, rebuilt from its own example by dropping keys.
        ha = json.loads(a[8:8 + na])
        ha["__metadata__"] = one
        text = json.dumps(ha, separators=(",", ":"), ensure_ascii=False).encode()
        text += b" " * (-len(text) % 8)
        ours_one = len(text).to_bytes(8, "little") + text + a[8 + na:]
        print(f"   with one metadata key: reference file {len(b)} bytes, "
              f"{'identical' if b == ours_one else 'DIFFERENT'} to phaselab's layout")
        failures += b != ours_one

        # 3. Python writes, phaselab reads.
        rng = np.random.default_rng(2026)
        files = {
            "example": (want, EXAMPLE_METADATA),
            "dtypes": ({f"t_{d}": (rng.standard_normal((3, 4)) * 100).astype(d)
                        for d in ["<f8", "<f4", "<f2", "<i8", "<i4", "<i2", "i1", "<u8", "<u4",
                                  "<u2", "u1"]} | {"mask": rng.random((5,)) > 0.5}, {}),
            "unicode": ({"w\u00e9ight \"q\"\n": np.arange(7, dtype="<f4"),
                         "\U0001F600": np.zeros((2, 0, 3), dtype="<i8"), "s": np.array(3, "<i4")},
                        {"b": "2", "a": "\u2211\t\\", "\u00e9": ""}),
            "markov-like": ({f"h.{l}.{m}": rng.standard_normal(s).astype("<f4")
                             for l in range(2)
                             for m, s in [("ln1.weight", (32,)), ("attn.qkv", (96, 32)),
                                          ("mlp.fc", (128, 32)), ("mlp.proj", (32, 128))]}
                            | {"wte": rng.standard_normal((10, 32)).astype("<f4")},
                            {"K": "16", "chain_seed": "99", "phase": "2-Gen"}),
        }
        for name, (tensors, metadata) in files.items():
            path = os.path.join(tmp, name + ".safetensors")
            save_file(tensors, path, metadata=metadata or None)
            run = subprocess.run([tool, "dump", path], capture_output=True, text=True)
            got = run.stdout.splitlines()
            meta_lines, rows = expected_dump(tensors, metadata)
            ok = (run.returncode == 0 and got[:len(meta_lines)] == meta_lines
                  and sorted(got[len(meta_lines):]) == sorted(rows))
            print(f"3. safetensors.numpy.save_file -> phaselab ({name}): {len(rows)} tensors, "
                  f"{len(meta_lines)} metadata keys: {'identical' if ok else 'DIFFERENT'}")
            if not ok:
                print("   stderr:", run.stderr.strip())
                for line in sorted(set(got) ^ set(meta_lines + rows)):
                    print("   ", "got " if line in got else "want", line)
            failures += not ok

        # 4. A file Python refuses, phaselab refuses too (a truncated one).
        cut = os.path.join(tmp, "cut.safetensors")
        open(cut, "wb").write(open(ours, "rb").read()[:-3])
        try:
            load_file(cut)
            py = "accepted"
        except Exception as e:  # noqa: BLE001 (the library raises its own types)
            py = f"refused ({type(e).__name__})"
        run = subprocess.run([tool, "dump", cut], capture_output=True, text=True)
        print(f"4. truncated by 3 bytes: python {py}; phaselab "
              f"{'refused: ' + run.stderr.strip() if run.returncode else 'ACCEPTED'}")
        failures += run.returncode == 0
    print("all checks passed" if failures == 0 else f"{failures} checks FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
