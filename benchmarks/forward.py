"""Forward-pass throughput: bertviz_lab's BERT against transformers' BertModel, same weights, same run.

    python benchmarks/forward.py                 # CPU: MiniLM and bert-base, batch 1 and 8, seq 128 and 512,
                                                 #      and batch 1 seq 32 (one sentence, as the workbench sees it)
    python benchmarks/forward.py --quick         # 6 s per CPU row instead of 25 (noisier)
    python benchmarks/forward.py --onnx          # also ONNX Runtime (CPU rows; pip install onnxruntime onnx)
    python benchmarks/forward.py --graph         # ours with model.set_backend(compiled=True) on the CPU rows:
                                                 #      batches of 512+ tokens through one compiled graph
    python benchmarks/forward.py --gpu           # also bf16, batch 256, seq 128 on CUDA (when present)
    python benchmarks/forward.py --gpu-only      # only the CUDA rows (a short check on a GPU machine)
    python benchmarks/forward.py --gpu-only --compile   # also both models under torch.compile (CUDA rows)

Both models run fp32 (bf16 on GPU) under torch.inference_mode, transformers with its SDPA attention.
Samples (one forward each on the CPU) alternate between the models, each going first in turn, so that machine noise
hits them alike, for at least 7 rounds and 25 s per row; the medians are reported, with the number of rounds.
With --onnx, transformers' model exported to ONNX (opset 17, dynamic batch and length) runs in ONNX Runtime
with every graph optimisation on and the same number of threads, as a third sample in each round.
BERTVIZ_LAB_FUSED_KERNELS=0 runs ours as plain PyTorch (no packed CPU weights, no fused GPU paths) to compare.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import types

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


class OnnxRuntimeModel:
    """transformers' model exported to ONNX and run by ONNX Runtime's CPU provider (all graph optimisations,
    torch's thread count): called like the torch models, it answers `last_hidden_state`."""

    def __init__(self, reference: torch.nn.Module, folder: str) -> None:
        import onnxruntime

        class Positional(torch.nn.Module):  # the exporter passes inputs by position
            def __init__(self, model: torch.nn.Module) -> None:
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask, token_type_ids):
                return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                                  return_dict=False)[0]

        names = ["input_ids", "attention_mask", "token_type_ids"]
        ids = torch.ones((2, 16), dtype=torch.long)
        path = f"{folder}/model.onnx"
        with torch.no_grad():
            torch.onnx.export(Positional(reference).eval(), (ids, ids, torch.zeros_like(ids)), path,
                              input_names=names, output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                              dynamic_axes={name: {0: "batch", 1: "sequence"} for name in names})
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads, options.inter_op_num_threads = torch.get_num_threads(), 1
        # ONNX Runtime's threads spin for a while after each run by default, taking the cores from the sample that
        # comes next (ours, in the rounds below): 0.78x instead of 1.1x measured on a 2-core Xeon
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def __call__(self, **inputs: torch.Tensor) -> types.SimpleNamespace:
        feeds = {name: tensor.numpy() for name, tensor in inputs.items()}
        return types.SimpleNamespace(last_hidden_state=torch.from_numpy(self.session.run(None, feeds)[0]))


def compare(name: str, batch: int, seq: int, device: torch.device, dtype: torch.dtype, rounds: int, repeats: int,
            compiled: bool = False, seconds: float = 0.0, onnx: bool = False, graph: bool = False):
    """Print one table row; samples alternate between the models, at least `rounds` rounds and `seconds` long.
    `graph`: ours runs its encoder as one compiled graph (set_backend(compiled=True)), transformers eagerly."""
    ours, reference = build_pair(name, device, dtype)
    if graph:
        ours.set_backend(compiled=True)
    runtime = None
    if onnx:
        with tempfile.TemporaryDirectory() as folder:
            runtime = OnnxRuntimeModel(reference, folder)
    if compiled:  # both models alike, default mode; the warm-up below pays the compilation
        ours, reference = torch.compile(ours), torch.compile(reference)
    vocab = reference.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, vocab, (batch, seq), generator=generator).to(device)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    models = [ours, reference] if runtime is None else [ours, reference, runtime]
    with torch.inference_mode():
        expected = reference(**inputs).last_hidden_state.float()
        start = time.perf_counter()
        ours(**inputs)  # with --graph, the compile (inductor's cache on disk makes a later process's shorter)
        first_call = time.perf_counter() - start
        diff = max((model(**inputs).last_hidden_state.float() - expected).abs().max().item()
                   for model in models if model is not reference)
    for model in models:  # warm-up
        time_model(model, inputs, 1, device)
    times: list[list[float]] = [[] for _ in models]
    deadline = time.perf_counter() + seconds
    while len(times[0]) < rounds or time.perf_counter() < deadline:
        first = len(times[0]) % len(models)  # each model goes first in turn, so none always runs right after
        for index in [*range(first, len(models)), *range(first)]:  # the same other one
            times[index].append(time_model(models[index], inputs, repeats, device))
    ours_sps, ref_sps, *ort_sps = (batch / statistics.median(samples) for samples in times)
    label = str(dtype).replace("torch.", "") + ("+compile" if compiled else " graph" if graph else "")
    onnx_columns = f" {ort_sps[0]:10.1f} | {ours_sps / ort_sps[0]:5.2f}x |" if ort_sps else ""
    print(f"| {name:9s} | {label:13s} | {batch:5d} | {seq:4d} | {ours_sps:10.1f} | "
          f"{ref_sps:10.1f} | {ours_sps / ref_sps:5.2f}x |{onnx_columns} {diff:.1e} | {len(times[0]):5d} |"
          + (f" first call {first_call:.1f} s" if graph else ""), flush=True)
    return ours_sps / ref_sps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="6 s per CPU row instead of 25, 3 GPU rounds instead of 7 (noisier)")
    parser.add_argument("--gpu", action="store_true", help="also run bf16 batch 256 seq 128 on CUDA")
    parser.add_argument("--gpu-only", action="store_true", help="only the CUDA rows")
    parser.add_argument("--compile", action="store_true", help="also the CUDA rows with both models torch.compile'd")
    parser.add_argument("--onnx", action="store_true",
                        help="also ONNX Runtime on the CPU rows (needs onnxruntime and onnx installed)")
    parser.add_argument("--graph", action="store_true",
                        help="CPU rows: ours with model.set_backend(compiled=True) (its encoder as one compiled graph "
                             "for batches of 512 tokens or more; the first call compiles it), transformers eager")
    parser.add_argument("--models", default="minilm,bert-base")
    parser.add_argument("--shapes", default="1x32,1x128,8x128,1x512,8x512",
                        help="the CPU rows' batch x sequence length, comma-separated")
    args = parser.parse_args()
    if (args.gpu or args.gpu_only) and not torch.cuda.is_available():
        parser.error("--gpu/--gpu-only: no CUDA device here (torch.cuda.is_available() is False).")
    cpu = torch.device("cpu")
    from bertviz_lab.kernels import machine

    print(f"torch {torch.__version__}; {machine.describe()}")
    if args.onnx:
        try:
            import onnx  # noqa: F401  (the exporter needs it)
            import onnxruntime
        except ImportError as error:
            parser.error(f"--onnx: {error.name} is not installed (pip install onnxruntime onnx).")
        print(f"onnxruntime {onnxruntime.__version__}")
    onnx_head = (" ORT seq/s  | / ORT |", "------------|-------|") if args.onnx else ("", "")
    print("| model     | dtype         | batch | seq  | ours seq/s | HF seq/s   | ratio |"
          f"{onnx_head[0]} max diff | pairs |")
    print(f"|-----------|---------------|-------|------|------------|------------|-------|{onnx_head[1]}"
          "----------|-------|")
    rounds = 3 if args.quick else 7
    # this CPU's speed drifts by ±15% over minutes: many short alternating samples, one forward each
    seconds = 6.0 if args.quick else 25.0
    for name in [] if args.gpu_only else args.models.split(","):
        for shape in args.shapes.split(","):
            batch, seq = (int(n) for n in shape.lower().split("x"))
            compare(name, batch, seq, cpu, torch.float32, rounds, 1, seconds=seconds, onnx=args.onnx,
                    graph=args.graph)
    if args.gpu or args.gpu_only:
        print(f"CUDA: {torch.cuda.get_device_name()}")
        for compiled in (False, True) if args.compile else (False,):
            for name in args.models.split(","):
                compare(name, 256, 128, torch.device("cuda"), torch.bfloat16, rounds, 10, compiled)


if __name__ == "__main__":
    main()
