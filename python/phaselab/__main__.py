# SPDX-License-Identifier: Apache-2.0
"""`python3 -m phaselab ARGS` (and the `phaselab` command a pip install puts on PATH): the
bundled driver with the same arguments, exit status and output."""
from __future__ import annotations

import os
import sys

from ._driver import PhaselabError, driver_path


def main() -> None:
    try:
        exe = str(driver_path())
    except PhaselabError as e:
        print(f"phaselab: {e.message}", file=sys.stderr)
        sys.exit(e.status)
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
