"""The compiled encoder (`model.set_backend(compiled=True)`) against the eager layers and transformers, in one process.

    python benchmarks/compiled_encoder.py                                    # bert-base and MiniLM, 8 x 128 and 1 x 512
    python benchmarks/compiled_encoder.py --models bert-base --shapes 1x128,2x128,8x128 --seconds 60

Three models with the same weights (ours eager, ours with the compiled encoder, transformers with SDPA), fp32 on the
CPU under torch.inference_mode; each round runs one forward of each (each model first in turn), and the medians of
the per-round ratios are printed, so the machine's drift hits all three alike. The compile is paid before the timing
and reported.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from forward import build_pair


def compare(name: str, shapes: list[tuple[int, int]], seconds: float) -> None:
    eager, reference = build_pair(name, torch.device("cpu"), torch.float32)
    compiled, _ = build_pair(name, torch.device("cpu"), torch.float32)
    compiled.set_backend(compiled=True)
    models = {"eager": eager, "compiled": compiled, "hf": reference}
    generator = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for batch, seq in shapes:
            ids = torch.randint(1000, reference.config.vocab_size, (batch, seq), generator=generator)
            inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
            first = {}
            for key, model in models.items():
                start = time.perf_counter()
                model(**inputs)
                first[key] = time.perf_counter() - start
            diff = (compiled(**inputs).last_hidden_state - reference(**inputs).last_hidden_state).abs().max().item()
            times: dict[str, list[float]] = {key: [] for key in models}
            deadline = time.perf_counter() + seconds
            keys = list(models)
            while len(times["hf"]) < 8 or time.perf_counter() < deadline:
                lead = len(times["hf"]) % len(keys)  # each model goes first in turn, as in forward.py
                for key in keys[lead:] + keys[:lead]:
                    start = time.perf_counter()
                    models[key](**inputs)
                    times[key].append(time.perf_counter() - start)

            def ratio(slow: str, fast: str) -> float:
                return statistics.median(s / f for s, f in zip(times[slow], times[fast]))

            print(f"| {name:9s} | {batch:5d} × {seq:4d} | {ratio('hf', 'eager'):5.2f}x "
                  f"| {ratio('hf', 'compiled'):5.2f}x | {ratio('eager', 'compiled'):5.2f}x | {diff:.1e} "
                  f"| {len(times['hf']):6d} | {first['compiled']:6.1f} s |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="bert-base,minilm")
    parser.add_argument("--shapes", default="8x128,1x512", help="batch x sequence length, comma-separated")
    parser.add_argument("--seconds", type=float, default=30.0, help="at least this long per shape (and 8 rounds)")
    args = parser.parse_args()
    from bertviz_lab.kernels import machine

    print(f"torch {torch.__version__}; {machine.describe()}")
    print("| model     | batch × seq  | eager / HF | compiled / HF | compiled / eager | max diff | rounds | "
          "first compiled call |")
    print("|-----------|--------------|-------|-------|-------|----------|--------|--------|")
    shapes = [tuple(int(n) for n in shape.lower().split("x")) for shape in args.shapes.split(",")]
    for name in args.models.split(","):
        compare(name, shapes, args.seconds)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
