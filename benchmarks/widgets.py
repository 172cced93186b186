"""What the attention panel sends to the browser, and how long %bert_inspect takes to build a widget.

    python benchmarks/widgets.py

For MiniLM (real weights) and bert-base (random weights) at 128 and 512 tokens: the model view's state, one
heatmap update (a layer change, measured from the widget's outgoing messages), the head view's state, and for
MiniLM the time from `%bert_inspect` to a built widget in fresh Jupyter kernels: as the next cell after
`%load_ext` (whose background warm-up imports plotly and loads the model), in the same cell as `%load_ext` (no
head start), and a later call. The reference for the model view is bertviz's approach of shipping every
layer × head map as JSON floats (~860 MB for 12 × 12 heads at 512 tokens; computed below as L·H·T²·~9 bytes).
"""

from __future__ import annotations

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
    from bertviz_lab.widgets import AttentionPanel
    from bertviz_lab.widgets.payload import sent_messages, state_bytes

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
            ("its warm-up, in the background (plotly, default model)", warm_up),
            ("first `--view attention`, next cell after the warm-up", first),
            ("first whole workbench, next cell after the warm-up", first_workbench),
            ("`%load_ext` and a first `--view attention` in one cell", both),
            ("a later `--view attention`", later),
            ("a later whole workbench", later_workbench))
    for label, seconds in rows:
        print(f"| {label} | {seconds:5.2f} s |", flush=True)


def main() -> None:
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    from bertviz_lab.model import BERT, BERTConfig
    from bertviz_lab.widgets.workbench import default_model_and_tokenizer

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
    main()
