"""The `bertviz-lab` command (and `python -m bertviz_lab`): one parser, one dispatch for `train`, `html` and
`corpus`; each command's work lives with its package (train/runner.py, widgets/notebook_html.py, corpus/cli.py)."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    """Every command, so that `bertviz-lab --help` lists them all."""
    from bertviz_lab.corpus.cli import add_corpus_parser
    from bertviz_lab.train.runner import add_train_parser

    parser = argparse.ArgumentParser(prog="bertviz-lab", description="bertviz_lab command line.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_train_parser(commands)
    commands.add_parser("html", add_help=False, help="write a notebook as an offline page, its scripts and "
                                                     "remote content removed (bertviz-lab html --help)")
    add_corpus_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit status (2 for bad usage, 0 for --help). `html` reads its own arguments
    (widgets/notebook_html.py), the others are parsed here."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["html"]:
        from bertviz_lab.widgets.notebook_html import main as html

        return html(argv[1:])
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # argparse exits 2 on bad usage, 0 on --help
        return int(exit_.code or 0)
    if args.command == "corpus":
        from bertviz_lab.corpus.cli import run as run_corpus

        return run_corpus(args)
    from bertviz_lab.train.runner import run_train

    return run_train(args)


if __name__ == "__main__":
    sys.exit(main())
