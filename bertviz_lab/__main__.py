"""`python -m bertviz_lab` and the `bertviz-lab` console script."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Dispatch to the CLI (training lives in bertviz_lab.train.runner)."""
    from bertviz_lab.train.runner import main as run_cli

    return run_cli(argv)


if __name__ == "__main__":
    sys.exit(main())
