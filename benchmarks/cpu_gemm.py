"""bertviz_lab's CPU kernels (bertviz_lab/kernels/avx2.c) on BERT's shapes, fp32, all CPU threads: the GEMM
against MKL's addmm (what PyTorch and transformers call) and oneDNN's on a packed weight; attention against
PyTorch's scaled_dot_product_attention (its CPU flash kernel, with a padding mask, heads merged afterwards).

    python benchmarks/cpu_gemm.py                # MiniLM and bert-base shapes at 32, 128, 512 and 4096 tokens
    python benchmarks/cpu_gemm.py --seconds 1    # shorter samples (noisier)

For each shape the contenders alternate call by call for `--seconds`, so that machine noise hits all alike; the
tables give GFLOP/s from the median call and the ratios, then their geometric means.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F

WIDTHS = {"minilm": (384, 1536), "bert-base": (768, 3072)}
HEAD_SIZE = {"minilm": 32, "bert-base": 64}
HEADS = 12
ROWS = (32, 128, 512, 4096)


def shapes(model: str) -> list[tuple[int, int]]:
    """(in, out) of each linear layer in an encoder layer: fused QKV, attention output, FFN in, FFN out."""
    hidden, ffn = WIDTHS[model]
    return [(hidden, 3 * hidden), (hidden, hidden), (hidden, ffn), (ffn, hidden)]


def race(calls: dict, flops: float, seconds: float) -> dict[str, float]:
    """GFLOP/s of each call from its median time, calls alternating for `seconds` (at least 5 rounds)."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    with torch.inference_mode():
        for call in calls.values():
            call()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end or len(samples[next(iter(calls))]) < 5:
            for name, call in calls.items():
                start = time.perf_counter()
                call()
                samples[name].append(time.perf_counter() - start)
    return {name: flops / statistics.median(times) / 1e9 for name, times in samples.items()}


def measure_gemm(rows: int, fan_in: int, fan_out: int, seconds: float) -> dict[str, float]:
    """addmm, oneDNN and the AVX2 GEMM on one (rows, in) x (in, out) product with bias."""
    from bertviz_lab.kernels import avx2

    x, weight, bias = torch.randn(rows, fan_in), torch.randn(fan_out, fan_in), torch.randn(fan_out)
    onednn = torch.ops.mkldnn._reorder_linear_weight(weight, 1024)
    packed = avx2.pack(weight)
    return race({"addmm": lambda: F.linear(x, weight, bias),
                 "onednn": lambda: torch.ops.mkldnn._linear_pointwise(x, onednn, bias, "none", [], ""),
                 "avx2": lambda: avx2.linear(x, packed, bias, fan_out)}, 2 * rows * fan_in * fan_out, seconds)


def measure_attention(batch: int, tokens: int, head_size: int, seconds: float) -> dict[str, float]:
    """q, k, v as views into one fused projection, as the layers see them; the mask hides nothing."""
    from bertviz_lab.kernels import avx2

    qkv = torch.randn(batch, tokens, 3, HEADS, head_size)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    mask = torch.zeros(batch, 1, 1, tokens)
    merged = (batch, tokens, HEADS * head_size)
    return race({"sdpa": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2)
                 .reshape(merged),
                 "avx2": lambda: avx2.attention(q, k, v, mask, head_size ** -0.5)},
                4 * batch * HEADS * tokens * tokens * head_size, seconds)


def geometric_mean(values: list[float]) -> float:
    """The mean of ratios that treats 2x and 0.5x alike."""
    return math.exp(statistics.fmean(math.log(v) for v in values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="per shape (default 3)")
    parser.add_argument("--models", default="minilm,bert-base")
    args = parser.parse_args()
    from bertviz_lab.kernels import build

    if build.library() is None:
        raise SystemExit(f"the AVX2 kernels cannot run here: {build.unsupported_reason() or build.failure()}")
    from bertviz_lab.kernels import machine

    print(f"torch {torch.__version__}; {machine.describe()}")
    models = args.models.split(",")
    print("\n| model | rows | in | out | addmm GFLOP/s | oneDNN | AVX2 | oneDNN / addmm | AVX2 / addmm |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios: dict[str, list[float]] = {"onednn": [], "avx2": []}
    for model in models:
        for rows in ROWS:
            for fan_in, fan_out in shapes(model):
                speed = measure_gemm(rows, fan_in, fan_out, args.seconds)
                for name in ratios:
                    ratios[name].append(speed[name] / speed["addmm"])
                print(f"| {model} | {rows} | {fan_in} | {fan_out} | {speed['addmm']:.0f} | {speed['onednn']:.0f} | "
                      f"{speed['avx2']:.0f} | {speed['onednn'] / speed['addmm']:.2f}x | "
                      f"{speed['avx2'] / speed['addmm']:.2f}x |", flush=True)
    print(f"geometric mean vs addmm: oneDNN {geometric_mean(ratios['onednn']):.2f}x, "
          f"AVX2 {geometric_mean(ratios['avx2']):.2f}x")

    print("\n| model | batch | tokens | head size | SDPA GFLOP/s | AVX2 | AVX2 / SDPA |")
    print("|---|---|---|---|---|---|---|")
    attention_ratios = []
    for model in models:
        for batch, tokens in ((1, 32), (1, 128), (8, 128), (1, 512), (8, 512)):
            speed = measure_attention(batch, tokens, HEAD_SIZE[model], args.seconds)
            attention_ratios.append(speed["avx2"] / speed["sdpa"])
            print(f"| {model} | {batch} | {tokens} | {HEAD_SIZE[model]} | {speed['sdpa']:.0f} | {speed['avx2']:.0f} | "
                  f"{attention_ratios[-1]:.2f}x |", flush=True)
    print(f"geometric mean vs SDPA: AVX2 {geometric_mean(attention_ratios):.2f}x")


if __name__ == "__main__":
    main()
