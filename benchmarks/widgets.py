"""What the attention panel sends to the browser, and how long %bert_inspect takes to build a widget.

    python benchmarks/widgets.py

For MiniLM (real weights) and bert-base (random weights) at 128 and 512 tokens: the model view's state, one
heatmap update (a layer change, measured from the widget's outgoing messages), the head view's state, and for
MiniLM the time from `%bert_inspect` to a built widget (the first call in the process, which imports plotly and
loads the model, and a warm call). The reference for the model view is bertviz's approach of shipping every
layer × head map as JSON floats (~860 MB for 12 × 12 heads at 512 tokens; computed below as L·H·T²·~9 bytes).
"""

from __future__ import annotations

import contextlib
import io
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


def time_magic() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "bertviz_lab")
    text = '"The cat sat on the mat because it was warm, and the dog slept by the door all afternoon."'
    for label in ("first call (imports, model load)", "warm call"):
        start = time.perf_counter()
        widget = shell.run_line_magic("bert_inspect", f"--view attention {text}")
        seconds = time.perf_counter() - start
        print(f"| {label:33s} | {type(widget).__name__:14s} | {seconds:6.2f} s |", flush=True)
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # outside a kernel the architecture tab prints its diagram
        shell.run_line_magic("bert_inspect", text)
    print(f"| {'warm call, whole workbench':33s} | {'Workbench':14s} | {time.perf_counter() - start:6.2f} s |")


def main() -> None:
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    print("| time from %bert_inspect (MiniLM, 128 tokens) | widget | seconds |")
    print("|---|---|---|")
    time_magic()
    from bertviz_lab.model import BERT, BERTConfig
    from bertviz_lab.widgets.workbench import default_model_and_tokenizer

    minilm, tokenizer = default_model_and_tokenizer()
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
