"""What the attention panel sends to the browser, and how long %bert_inspect takes to build a widget.

    python benchmarks/widgets.py

For MiniLM (real weights) and bert-base (random weights) at 128 and 512 tokens: the model view's state, one
heatmap update (a layer change, measured from the widget's outgoing messages), the head view's state, and for
MiniLM the time from `%bert_inspect` to a built widget in fresh Jupyter kernels: as the next cell after
`%load_ext` (whose background warm-up imports the panels and loads the model), in the same cell as `%load_ext` (no
head start), and a later call. The reference for the model view is bertviz's approach of shipping every
layer × head map as JSON floats (~860 MB for 12 × 12 heads at 512 tokens; computed below as L·H·T²·~9 bytes).
What the live loss curves cost a training run is measured apart: `python benchmarks/widgets.py curves`.
"""

from __future__ import annotations

import json
import subprocess
import time

import torch


def text_of(tokenizer, tokens: int) -> str:
    """A text that tokenizes to exactly `tokens` tokens with [CLS] and [SEP]."""
    words = ("the quick brown fox jumps over the lazy dog while the cat watches from the warm window " * 60).split()
    for count in range(tokens, 0, -1):
        text = " ".join(words[:count])
        if len(tokenizer.encode(text, max_length=10**6)) <= tokens:
            return text
    raise ValueError(tokens)


def measure_panel(name: str, model, tokenizer, tokens: int) -> None:
    from payload import sent_messages, state_bytes

    from bertviz_lab.widgets import AttentionPanel

    panel = AttentionPanel(model=model, tokenizer=tokenizer, text=text_of(tokenizer, tokens), layer=0, head=0)
    T = len(panel.info.tokens)
    with sent_messages(panel.heatmap) as sizes:
        panel.layer.value = 1
    panel.view.value = "model view"
    model_view = state_bytes(panel.model_view)
    panel.view.value = "head view"
    head_view = state_bytes(panel.head_view)
    layers, heads = len(panel.attentions), panel.attentions[0].shape[1]
    bertviz_json = layers * heads * T * T * 9  # ~9 characters per float in JSON
    print(f"| {name:9s} | {T:4d} | {model_view / 1e3:9.1f} KB | {sum(sizes) / 1e6:8.2f} MB | {head_view / 1e3:8.1f} KB "
          f"| {bertviz_json / 1e6:9.0f} MB |", flush=True)


def run_cell(client, code: str) -> float:
    """Run one cell in the kernel and return the seconds until its reply, as the user waits for it."""
    start = time.perf_counter()
    errors: list[str] = []
    reply = client.execute_interactive(code, timeout=300, output_hook=lambda msg: errors.append(
        msg["content"].get("evalue", "")) if msg["msg_type"] == "error" else None)
    seconds = time.perf_counter() - start
    if reply["content"]["status"] != "ok" or errors:
        raise RuntimeError(f"cell {code!r} failed: {errors}")
    return seconds


def time_magic(text: str) -> None:
    """%bert_inspect in fresh Jupyter kernels: right after %load_ext in the same cell, and as the next cell."""
    from jupyter_client.manager import start_new_kernel

    attention = f'%bert_inspect --view attention "{text}"'
    workbench = f'%bert_inspect "{text}"'
    wait_for_warm_up = "from bertviz_lab.magics import wait_for_warm_up\nwait_for_warm_up()"

    def in_fresh_kernel(cells: list[str]) -> list[float]:
        manager, client = start_new_kernel(kernel_name="python3", stderr=subprocess.DEVNULL)
        try:
            return [run_cell(client, cell) for cell in cells]
        finally:
            manager.shutdown_kernel(now=True)

    both, later = in_fresh_kernel([f"%load_ext bertviz_lab\n{attention}", attention])
    load, warm_up, first, later_workbench = in_fresh_kernel(["%load_ext bertviz_lab", wait_for_warm_up, attention,
                                                             workbench])
    _, _, first_workbench = in_fresh_kernel(["%load_ext bertviz_lab", wait_for_warm_up, workbench])
    rows = (("`%load_ext bertviz_lab` (imports torch, starts the warm-up)", load),
            ("its warm-up, in the background (panels, kernels, default model)", warm_up),
            ("first `--view attention`, next cell after the warm-up", first),
            ("first whole workbench, next cell after the warm-up", first_workbench),
            ("`%load_ext` and a first `--view attention` in one cell", both),
            ("a later `--view attention`", later),
            ("a later whole workbench", later_workbench))
    for label, seconds in rows:
        print(f"| {label} | {seconds:5.2f} s |", flush=True)


# What the live curves cost a training run: one Trainer in a fresh Jupyter kernel (every redraw serialized and sent
# like in a notebook, the panel displayed), trained in short segments with and without the curves attached, in
# alternating order. On a shared machine the load changes from minute to minute, so the cost is the median of the
# ratio of neighbouring segments; "CPU share" is the training thread's CPU time spent in the callback and its redraws
# (load-independent). "+ masking" also has a MaskingPreview following the trainer (refreshed every 2 s).
CURVES_SETUP = r"""
import copy, json, statistics, time
import torch
from IPython.display import display
from bertviz_lab.model import BERTConfig, BERTForPreTraining
from bertviz_lab.train import TrainConfig, Trainer, generate_synthetic_bert_batches, synthetic_to_training_batch
from bertviz_lab.train.runner import BertRunner
from bertviz_lab.widgets import LossCurves, MaskingPreview
from bertviz_lab.widgets.panels.training import DEMO_RUN

torch.set_num_threads(THREADS)


class TimedCurves(LossCurves):
    spent = 0.0  # CPU seconds of the calling (training) thread inside the callback, redraws included

    def __call__(self, record):
        started = time.thread_time()
        super().__call__(record)
        self.spent += time.thread_time() - started


def demo_trainer():
    run = copy.deepcopy(DEMO_RUN)
    run["training"].update(steps=100_000, device="cpu", eval_interval=25)
    return BertRunner(run).build_trainer()


def micro_trainer():
    torch.manual_seed(0)
    model = BERTForPreTraining(BERTConfig.tiny(vocab_size=200, hidden_size=32, num_attention_heads=2,
                                               intermediate_size=64, num_hidden_layers=1, max_position_embeddings=64))
    batches = [synthetic_to_training_batch(b) for b in generate_synthetic_bert_batches(8, 8, 16, 200, random_seed=0)]
    config = TrainConfig(max_steps=10**7, batch_size=8, eval_interval=0, progress=False, device="cpu", log_interval=0)
    return Trainer(model, batches, None, config)


def measure(trainer, seconds, pairs, modes):
    curves = TimedCurves(title="benchmark")
    display(curves)
    preview = None
    if "curves + masking" in modes:
        preview = MaskingPreview(trainer.tokenizer, "The cat sat on the mat because it was warm.",
                                 text_b="It slept all afternoon.")
        display(preview)
    start = time.perf_counter()
    trainer.fit(5)  # warm-up; then size each segment to about `seconds`
    steps = max(8, round(seconds * 5 / (time.perf_counter() - start)))
    rates, ratios = {mode: [] for mode in modes}, {mode: [] for mode in modes[1:]}
    train_cpu = curves_cpu = 0.0
    for index in range(pairs):
        order = modes if index % 2 == 0 else modes[::-1]
        segment = {}
        for mode in order:
            follower = getattr(preview, "follower", None)
            trainer.callbacks[:] = [c for c in trainer.callbacks if c is not curves and c is not follower]
            if mode != "without":
                curves.attach(trainer)
            if mode == "curves + masking":
                if preview.follower is None:
                    preview.follow(trainer)
                else:
                    trainer.callbacks.append(preview.follower)
            started, cpu, spent = time.perf_counter(), time.thread_time(), curves.spent
            trainer.fit(steps)  # in this (the kernel's) thread: thread_time is the training thread's CPU time
            segment[mode] = steps / (time.perf_counter() - started)
            if mode == "curves":
                train_cpu += time.thread_time() - cpu
                curves_cpu += curves.spent - spent
            rates[mode].append(segment[mode])
        for mode in modes[1:]:
            ratios[mode].append(segment[mode] / segment["without"])
    return {"steps": steps, "redraws": curves.redraws, "curves_cpu": curves_cpu / max(train_cpu, 1e-9),
            **{mode: statistics.median(r) for mode, r in rates.items()},
            **{f"ratio {mode}": statistics.median(r) for mode, r in ratios.items()},
            **{f"spread {mode}": [round(min(r), 3), round(max(r), 3)] for mode, r in ratios.items()}}
"""


def measure_live_curves(pairs: int = 9, seconds: float = 3.0, threads: int = 2) -> None:
    """Training throughput with and without the live curves, in a fresh kernel; the cost printed as a ratio."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", stderr=subprocess.DEVNULL)
    outputs: list[str] = []

    def cell(code: str) -> None:
        reply = client.execute_interactive(code, timeout=3600, output_hook=lambda msg: outputs.append(
            msg["content"].get("text", "")) if msg["msg_type"] == "stream" else None)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"the benchmark cell failed: {reply['content'].get('evalue')}")

    print(f"| run (Trainer, CPU, {threads} threads) | step | steps/s without | with curves | ratio (min-max) "
          "| curves' CPU share | with curves + masking | ratio (min-max) | redraws |")
    print("|---|---|---|---|---|---|---|---|---|")
    try:
        cell(CURVES_SETUP.replace("THREADS", str(threads)))
        runs = (("micro: 1 layer, 32 wide, batch 8 × 16", "micro_trainer()", ("without", "curves")),
                ("Training tab demo: tiny preset, batch 32 × 64", "demo_trainer()",
                 ("without", "curves", "curves + masking")))
        for label, build, modes in runs:
            outputs.clear()
            cell(f"print(json.dumps(measure({build}, {seconds}, {pairs}, {modes!r})))")
            result = json.loads("".join(outputs).strip().splitlines()[-1])
            base = result["without"]

            def ratio(mode: str) -> str:
                low, high = result[f"spread {mode}"]
                return f"{result[f'ratio {mode}']:.3f} ({low:.2f}-{high:.2f})"

            masking = (f"{result['curves + masking']:.2f} | {ratio('curves + masking')}"
                       if "curves + masking" in result else "– | –")
            print(f"| {label} | {1e3 / base:.0f} ms | {base:.2f} | {result['curves']:.2f} | {ratio('curves')} | "
                  f"{result['curves_cpu'] * 100:.2f}% | {masking} | {result['redraws']} |", flush=True)
    finally:
        manager.shutdown_kernel(now=True)


def main() -> None:
    from bertviz_lab.kernels import machine

    print(f"torch {torch.__version__}; {machine.describe()}")
    from bertviz_lab.model import BERT, BERTConfig
    from bertviz_lab.widgets.panels.models import default_model_and_tokenizer

    minilm, tokenizer = default_model_and_tokenizer()
    print("| fresh Jupyter kernel, MiniLM, 128 tokens | seconds |")
    print("|---|---|")
    time_magic(text_of(tokenizer, 128))
    torch.manual_seed(0)
    base = BERT(BERTConfig.base()).eval()
    print()
    print("| model     | tokens | model view | heatmap update | head view | bertviz-style JSON |")
    print("|-----------|--------|------------|----------------|-----------|--------------------|")
    for name, model in (("MiniLM", minilm), ("bert-base", base)):
        for tokens in (128, 512):
            measure_panel(name, model, tokenizer, tokens)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["curves"]:  # python benchmarks/widgets.py curves: only the live-curves cost
        measure_live_curves()
    else:
        main()
        print()
        measure_live_curves()
