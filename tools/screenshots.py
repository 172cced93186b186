#!/usr/bin/env python
"""Regenerate the README's pictures from the browser test run.

    python tools/screenshots.py     # docs/images/*.png, the PICTURES below

It runs `pytest tests/browser` (JupyterLab in headless Chromium, every notebook run top to bottom) with
BERTVIZ_LAB_SCREENSHOTS set to the output folder: a notebook's pictures are written there only when its test passed.
Screenshots of every whole notebook land in screenshots/ (git-ignored) on every run of the browser test.
Extra arguments go to pytest, e.g. `python tools/screenshots.py -- -k "00 or 04 or 05"` or `-- -k inside`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PICTURES = {  # file -> what it shows (and which notebook makes it)
    "workbench_attention.png": "the workbench's attention heatmap (00_workbench)",
    "loss_curves.png": "live MLM/NSP loss curves while a tiny BERT trains (04_pretraining_live)",
    "architecture.png": "BERT-base as a mermaid diagram with tensor shapes (05_architecture)",
    "saliency_view.png": "the saliency view on a sentence pair (tests/browser/test_saliency_in_browser.py)",
    "neuron_view.png": "the neuron view: q against every key's k in one head "
                       "(tests/browser/test_inside_attention_in_browser.py)",
    "neuron_view_long.png": "the neuron view's window of 48 keys at 512 tokens, in an 800-px output area "
                            "(tests/browser/test_inside_attention_in_browser.py)",
    "head_ablation.png": "the model view with two heads switched off: change, badges, predictions "
                         "(tests/browser/test_inside_attention_in_browser.py)",
    "head_view.png": "the head view: one head's chips and lines (tests/browser/test_inside_attention_in_browser.py)",
    "keyboard_model_view.png": "the model view by keyboard: a head switched off with Space, its focus ring and keys "
                               "(tests/browser/test_keyboard_in_browser.py)",
    "keyboard_neuron_view.png": "the neuron view by keyboard: one dimension of a key read out "
                                "(tests/browser/test_keyboard_in_browser.py)",
    "keyboard_loss_curves.png": "the loss curves by keyboard: a step's values read out "
                                "(tests/browser/test_keyboard_in_browser.py)",
    "theme-light.png": "the workbench in JupyterLab Light (tests/browser/test_themes_in_browser.py)",
    "theme-dark.png": "the workbench in JupyterLab Dark (tests/browser/test_themes_in_browser.py)",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/images", help="folder for the README's pictures (default docs/images)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    out = Path(args.out) if Path(args.out).is_absolute() else REPO / args.out
    started = time.time()
    env = dict(os.environ, BERTVIZ_LAB_SCREENSHOTS=str(out))
    command = [sys.executable, "-m", "pytest", "tests/browser", "-q", "-p", "no:cacheprovider", *args.pytest_args]
    code = subprocess.call(command, cwd=REPO, env=env)
    missing = []
    for name, what in PICTURES.items():
        path = out / name
        fresh = path.exists() and path.stat().st_mtime >= started
        shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        print(f"{'written' if fresh else 'NOT written'}: {shown}  ({what})")
        if not fresh:
            missing.append(name)
    if missing:
        print(f"{len(missing)} picture(s) not regenerated: their notebook's browser test failed or was deselected.",
              file=sys.stderr)
    return code or (1 if missing else 0)


if __name__ == "__main__":
    sys.exit(main())
