"""`python -m bertviz_lab`: the `bertviz-lab` command (bertviz_lab/cli.py)."""

from __future__ import annotations

import sys

from bertviz_lab.cli import main

if __name__ == "__main__":
    sys.exit(main())
