"""`python -m bertviz_lab` and the `bertviz-lab` console script."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Dispatch: `html` writes a notebook as an offline page; everything else is the training CLI."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["html"]:
        from bertviz_lab.widgets.notebook_html import main as html

        return html(argv[1:])
    from bertviz_lab.train.runner import main as run_cli

    return run_cli(argv)


if __name__ == "__main__":
    sys.exit(main())
