"""Activation patching's cost: a bert-base-shaped masked-LM model (12 layers, random weights, seeded) on two texts of
64 tokens, every (layer, position) cell patched (`trace.patch`, point "hidden"), against one plain forward of one
text, in the same run.

    python benchmarks/patching.py                # 64 tokens, bert-base shape
    python benchmarks/patching.py --tokens 32 --preset tiny

Printed: the patched forwards `patch` ran (one per layer, each with one copy of the corrupted text per position),
the time of the whole grid, the time of one plain forward, and how many plain forwards the grid cost
(a cell-by-cell loop costs one forward per cell: layers × tokens).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from bertviz_lab.kernels import machine
from bertviz_lab.model import BERTConfig, BERTForMaskedLM
from bertviz_lab.trace import patch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--preset", choices=("base", "tiny"), default="base")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"torch {torch.__version__}; {machine.describe()}")
    torch.manual_seed(0)
    config = BERTConfig.base() if args.preset == "base" else BERTConfig.tiny()
    model = BERTForMaskedLM(config).eval()
    generator = torch.Generator().manual_seed(1)
    clean_ids = torch.randint(1000, config.vocab_size, (1, args.tokens), generator=generator)
    corrupted_ids = clean_ids.clone()
    corrupted_ids[0, 5] = (clean_ids[0, 5] + 1) % config.vocab_size  # one token differs
    clean = {"input_ids": clean_ids, "attention_mask": torch.ones_like(clean_ids)}
    corrupted = {"input_ids": corrupted_ids, "attention_mask": torch.ones_like(corrupted_ids)}
    target = args.tokens - 2

    def metric(logits: torch.Tensor) -> torch.Tensor:  # BERTForMaskedLM's output: (batch, tokens, vocab)
        return logits[0, target, 2000] - logits[0, target, 2001]

    with torch.inference_mode():
        model(**clean)  # warm-up
        plain = []
        for _ in range(args.repeats * 3):
            start = time.perf_counter()
            model(**clean)
            plain.append(time.perf_counter() - start)
    grid, forwards = [], 0
    for _ in range(args.repeats):
        start = time.perf_counter()
        result = patch(model, clean, corrupted, metric)
        grid.append(time.perf_counter() - start)
        forwards = result.forwards
    one, whole = statistics.median(plain), statistics.median(grid)
    cells = config.num_hidden_layers * args.tokens
    print(f"| model | layers × tokens | patched forwards | grid (median of {args.repeats}) | one plain forward "
          f"| grid / plain forward | a cell-by-cell loop |")
    print("|---|---|---:|---:|---:|---:|---:|")
    print(f"| {args.preset} | {config.num_hidden_layers} × {args.tokens} | {forwards} | {whole:.2f} s | "
          f"{one * 1000:.1f} ms | {whole / one:.0f} | {cells} forwards |")


if __name__ == "__main__":
    main()
