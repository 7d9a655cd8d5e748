#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that every code block of docs/*.md marked `<!-- excerpt: PATH -->` (on the line before
the block) is a verbatim part of PATH, so the guides cannot drift from the code they quote.
Exit status 1 with the first differing line of each stale block."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
bad = checked = 0
for md in sorted((root / "docs").glob("*.md")):
    text = md.read_text()
    for m in re.finditer(r"<!-- excerpt: (\S+) -->\n```[a-z]*\n(.*?)```\n", text, re.S):
        path, block = m.group(1), m.group(2)
        checked += 1
        src = (root / path).read_text()
        if block in src:
            continue
        bad += 1
        line = text[: m.start()].count("\n") + 1
        first = next((l for l in block.splitlines() if l not in src.splitlines()), "?")
        print(f"{md.relative_to(root)}:{line}: excerpt of {path} is stale: {first!r}")
print(f"docs excerpts: {checked} checked, {bad} stale")
sys.exit(1 if bad else 0)
