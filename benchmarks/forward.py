"""Forward-pass throughput: bertviz_lab's BERT against transformers' BertModel, same weights, same run.

    python benchmarks/forward.py                 # CPU: MiniLM and bert-base, batch 1 and 8, seq 128 and 512,
                                                 #      and batch 1 seq 32 (one sentence, as the workbench sees it)
    python benchmarks/forward.py --quick         # 6 s per CPU row instead of 25 (noisier)
    python benchmarks/forward.py --gpu           # also bf16, batch 256, seq 128 on CUDA (when present)
    python benchmarks/forward.py --gpu-only      # only the CUDA rows (a short check on a GPU machine)
    python benchmarks/forward.py --gpu-only --compile   # also both models under torch.compile (CUDA rows)

Both models run fp32 (bf16 on GPU) under torch.inference_mode, transformers with its SDPA attention.
Samples (one forward each on the CPU) alternate between the two models so that machine noise hits both alike,
for at least 7 pairs and 25 s per row; the medians are reported, with the number of pairs.
BERTVIZ_LAB_FUSED_KERNELS=0 runs ours as plain PyTorch (no packed CPU weights, no fused GPU paths) to compare.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch


def build_pair(name: str, device: torch.device, dtype: torch.dtype):
    """(ours, reference) with identical weights: MiniLM from its package, bert-base randomly initialised."""
    import transformers

    from bertviz_lab.model import BERT, BERT_Weights

    if name == "minilm":
        path = str(BERT_Weights.DEFAULT.path)
        reference = transformers.BertModel.from_pretrained(path, attn_implementation="sdpa")
        ours = BERT.from_pretrained(path)
    else:
        torch.manual_seed(0)
        reference = transformers.BertModel(transformers.BertConfig(), add_pooling_layer=True)
        reference.config._attn_implementation = "sdpa"
        with tempfile.TemporaryDirectory() as folder:
            reference.save_pretrained(folder)
            ours = BERT.from_pretrained(folder)
    return (ours.to(device=device, dtype=dtype).eval(), reference.to(device=device, dtype=dtype).eval())


def time_model(model, inputs: dict, repeats: int, device: torch.device) -> float:
    """Seconds for one forward pass (one sample of `repeats`)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.inference_mode():
        for _ in range(repeats):
            model(**inputs)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats


def compare(name: str, batch: int, seq: int, device: torch.device, dtype: torch.dtype, rounds: int, repeats: int,
            compiled: bool = False, seconds: float = 0.0):
    """Print one table row; samples alternate between the models, at least `rounds` pairs and `seconds` long."""
    ours, reference = build_pair(name, device, dtype)
    if compiled:  # both models alike, default mode; the warm-up below pays the compilation
        ours, reference = torch.compile(ours), torch.compile(reference)
    vocab = reference.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, vocab, (batch, seq), generator=generator).to(device)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    with torch.inference_mode():
        diff = (ours(**inputs).last_hidden_state.float() - reference(**inputs).last_hidden_state.float()).abs().max()
    for model in (ours, reference):  # warm-up
        time_model(model, inputs, 1, device)
    ours_t, ref_t = [], []
    deadline = time.perf_counter() + seconds
    while len(ours_t) < rounds or time.perf_counter() < deadline:
        ours_t.append(time_model(ours, inputs, repeats, device))
        ref_t.append(time_model(reference, inputs, repeats, device))
    ours_sps, ref_sps = batch / statistics.median(ours_t), batch / statistics.median(ref_t)
    label = str(dtype).replace("torch.", "") + ("+compile" if compiled else "")
    print(f"| {name:9s} | {label:13s} | {batch:5d} | {seq:4d} | {ours_sps:10.1f} | "
          f"{ref_sps:10.1f} | {ours_sps / ref_sps:5.2f}x | {diff.item():.1e} | {len(ours_t):5d} |", flush=True)
    return ours_sps / ref_sps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="6 s per CPU row instead of 25, 3 GPU rounds instead of 7 (noisier)")
    parser.add_argument("--gpu", action="store_true", help="also run bf16 batch 256 seq 128 on CUDA")
    parser.add_argument("--gpu-only", action="store_true", help="only the CUDA rows")
    parser.add_argument("--compile", action="store_true", help="also the CUDA rows with both models torch.compile'd")
    parser.add_argument("--models", default="minilm,bert-base")
    args = parser.parse_args()
    if (args.gpu or args.gpu_only) and not torch.cuda.is_available():
        parser.error("--gpu/--gpu-only: no CUDA device here (torch.cuda.is_available() is False).")
    cpu = torch.device("cpu")
    from bertviz_lab.kernels import machine

    print(f"torch {torch.__version__}; {machine.describe()}")
    print("| model     | dtype         | batch | seq  | ours seq/s | HF seq/s   | ratio | max diff | pairs |")
    print("|-----------|---------------|-------|------|------------|------------|-------|----------|-------|")
    rounds = 3 if args.quick else 7
    # this CPU's speed drifts by ±15% over minutes: many short alternating samples, one forward each
    seconds = 6.0 if args.quick else 25.0
    for name in [] if args.gpu_only else args.models.split(","):
        for batch, seq in ((1, 32), (1, 128), (8, 128), (1, 512), (8, 512)):
            compare(name, batch, seq, cpu, torch.float32, rounds, 1, seconds=seconds)
    if args.gpu or args.gpu_only:
        print(f"CUDA: {torch.cuda.get_device_name()}")
        for compiled in (False, True) if args.compile else (False,):
            for name in args.models.split(","):
                compare(name, 256, 128, torch.device("cuda"), torch.bfloat16, rounds, 10, compiled)


if __name__ == "__main__":
    main()
