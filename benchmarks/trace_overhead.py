"""What recording every attention map costs: bertviz_lab's trace() against transformers' output_attentions=True.

    python benchmarks/trace_overhead.py            # bert-base (random init), CPU, batch 1 and 8, seq 128 and 512
    python benchmarks/trace_overhead.py --quick    # fewer rounds (noisier)

For each shape, in one run with interleaved rounds (times: the fastest round, the least disturbed on a shared
machine; ratios: the median over rounds of traced / plain measured back to back):
  ours:  plain forward (SDPA)  vs  inside `trace(model, attentions=True, shapes=False)` (all layers, all heads,
         detached CPU copies kept), the same with `qkv=True` (every layer's queries, keys and values too) and, for
         reference, the default trace (module calls and shapes recorded too);
  transformers: plain forward (SDPA)  vs  eager attention with output_attentions=True (SDPA returns no maps).
Goals: ours ratio <= 1.15 at seq 128, <= 1.3 at seq 512, and no worse than transformers' ratio; with q/k/v
<= 1.2 at seq 128.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

import torch


def build_models():
    """(ours, transformers with SDPA, transformers with eager attention), all with the same random bert-base weights."""
    import transformers

    from bertviz_lab.model import BERT

    torch.manual_seed(0)
    sdpa = transformers.BertModel(transformers.BertConfig(), add_pooling_layer=True)
    with tempfile.TemporaryDirectory() as folder:
        sdpa.save_pretrained(folder)
        ours = BERT.from_pretrained(folder)
        sdpa = transformers.BertModel.from_pretrained(folder, attn_implementation="sdpa")
        eager = transformers.BertModel.from_pretrained(folder, attn_implementation="eager")
    return ours.eval(), sdpa.eval(), eager.eval()


def seconds(run: Callable[[], object], repeats: int) -> float:
    """Mean seconds of one call over `repeats` calls."""
    start = time.perf_counter()
    for _ in range(repeats):
        run()
    return (time.perf_counter() - start) / repeats


def compare(models, batch: int, seq: int, rounds: int) -> dict[str, float]:
    from bertviz_lab.trace import trace

    ours, sdpa, eager = models
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 30000, (batch, seq), generator=generator)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}

    def traced(shapes: bool, qkv: bool = False) -> Callable[[], object]:
        def run():
            with trace(ours, attentions=True, shapes=shapes, qkv=qkv, max_bytes=None) as t:
                ours(**inputs)
            return t
        return run

    runs = {
        "ours": lambda: ours(**inputs),
        "ours traced": traced(False),
        "ours traced+qkv": traced(False, qkv=True),
        "ours traced+shapes": traced(True),
        "hf": lambda: sdpa(**inputs),
        "hf attentions": lambda: eager(**inputs, output_attentions=True),
    }
    with torch.inference_mode():
        check = traced(False)()
        reference = eager(**inputs, output_attentions=True).attentions
        diff = max((a - b).abs().max().item() for a, b in zip(check.attentions, reference))
        del check, reference
        repeats = max(1, 512 // (batch * seq))
        for run in runs.values():  # warm-up
            run()
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(rounds):
            for name, run in runs.items():
                times[name].append(seconds(run, repeats))
    best = {name: min(t) for name, t in times.items()}
    for traced, plain in (("ours traced", "ours"), ("ours traced+qkv", "ours"), ("ours traced+shapes", "ours"),
                          ("hf attentions", "hf")):
        # ratio of neighbouring runs, median over rounds: machine noise hits both sides of one ratio alike
        best[f"{traced} ratio"] = statistics.median(a / b for a, b in zip(times[traced], times[plain]))
    best["max attention diff"] = diff
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 rounds instead of 7 (noisier)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--shapes", default="1x128,8x128,1x512,8x512", help="batch x seq list")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    models = build_models()
    from bertviz_lab.kernels import machine

    print(f"torch {torch.__version__}; {machine.describe()}; bert-base fp32, ms per forward")
    print("| batch | seq | ours plain | ours traced | ratio | traced+qkv | ratio | traced+shapes | ratio | HF plain "
          "| HF attentions | HF ratio | max diff |")
    print("|------:|----:|-----------:|------------:|------:|-----------:|------:|--------------:|------:|---------:"
          "|--------------:|---------:|---------:|")
    for item in args.shapes.split(","):
        batch, seq = (int(n) for n in item.lower().split("x"))
        m = compare(models, batch, seq, 3 if args.quick else 7)
        ms = {k: v * 1000 for k, v in m.items()}
        print(f"| {batch} | {seq} | {ms['ours']:.0f} | {ms['ours traced']:.0f} | {m['ours traced ratio']:.2f}x "
              f"| {ms['ours traced+qkv']:.0f} | {m['ours traced+qkv ratio']:.2f}x "
              f"| {ms['ours traced+shapes']:.0f} | {m['ours traced+shapes ratio']:.2f}x | {ms['hf']:.0f} "
              f"| {ms['hf attentions']:.0f} | {m['hf attentions ratio']:.2f}x | {m['max attention diff']:.1e} |",
              flush=True)


if __name__ == "__main__":
    main()
