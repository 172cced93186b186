"""The packed CPU GEMMs on BERT's linear-layer shapes: MKL's addmm (what PyTorch and transformers call), oneDNN's
on a packed weight, and bertviz_lab's AVX2 kernel (bertviz_lab/model/cpu_gemm.c), fp32, all CPU threads.

    python benchmarks/cpu_gemm.py                # MiniLM and bert-base shapes at 32, 128, 512 and 4096 rows
    python benchmarks/cpu_gemm.py --seconds 1    # shorter samples (noisier)

For each shape the three alternate call by call for `--seconds`, so that machine noise hits all alike; the table
gives GFLOP/s from the median call and the ratios to addmm, then their geometric means.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F

WIDTHS = {"minilm": (384, 1536), "bert-base": (768, 3072)}
ROWS = (32, 128, 512, 4096)


def shapes(model: str) -> list[tuple[int, int]]:
    """(in, out) of each linear layer in an encoder layer: fused QKV, attention output, FFN in, FFN out."""
    hidden, ffn = WIDTHS[model]
    return [(hidden, 3 * hidden), (hidden, hidden), (hidden, ffn), (ffn, hidden)]


def measure(rows: int, fan_in: int, fan_out: int, seconds: float) -> dict[str, float]:
    """GFLOP/s of each GEMM on one shape, calls alternating."""
    from bertviz_lab.model import cpu_gemm

    x, weight, bias = torch.randn(rows, fan_in), torch.randn(fan_out, fan_in), torch.randn(fan_out)
    onednn = torch.ops.mkldnn._reorder_linear_weight(weight, 1024)
    packed = cpu_gemm.pack(weight)
    calls = {"addmm": lambda: F.linear(x, weight, bias),
             "onednn": lambda: torch.ops.mkldnn._linear_pointwise(x, onednn, bias, "none", [], ""),
             "avx2": lambda: cpu_gemm.linear(x, packed, bias, fan_out)}
    samples: dict[str, list[float]] = {name: [] for name in calls}
    with torch.inference_mode():
        for call in calls.values():
            call()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end or len(samples["avx2"]) < 5:
            for name, call in calls.items():
                start = time.perf_counter()
                call()
                samples[name].append(time.perf_counter() - start)
    flops = 2 * rows * fan_in * fan_out
    return {name: flops / statistics.median(times) / 1e9 for name, times in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="per shape (default 3)")
    parser.add_argument("--models", default="minilm,bert-base")
    args = parser.parse_args()
    from bertviz_lab.model import cpu_gemm

    if cpu_gemm.library() is None:
        raise SystemExit(f"the AVX2 GEMM cannot run here: {cpu_gemm.unsupported_reason()}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {torch.backends.cpu.get_cpu_capability()}")
    print("| model | rows | in | out | addmm GFLOP/s | oneDNN | AVX2 | oneDNN / addmm | AVX2 / addmm |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios: dict[str, list[float]] = {"onednn": [], "avx2": []}
    for model in args.models.split(","):
        for rows in ROWS:
            for fan_in, fan_out in shapes(model):
                speed = measure(rows, fan_in, fan_out, args.seconds)
                for name in ratios:
                    ratios[name].append(speed[name] / speed["addmm"])
                print(f"| {model} | {rows} | {fan_in} | {fan_out} | {speed['addmm']:.0f} | {speed['onednn']:.0f} | "
                      f"{speed['avx2']:.0f} | {speed['onednn'] / speed['addmm']:.2f}x | "
                      f"{speed['avx2'] / speed['addmm']:.2f}x |", flush=True)
    means = {name: math.exp(statistics.fmean(math.log(r) for r in values)) for name, values in ratios.items()}
    print(f"geometric mean vs addmm: oneDNN {means['onednn']:.2f}x, AVX2 {means['avx2']:.2f}x")


if __name__ == "__main__":
    main()
