"""Corpus analysis: texts/s of `analyze` (statistics only) against a plain loop of transformers with
`output_attentions=True` computing the same statistics in NumPy, same texts, same run; peak RSS at 20,000 texts
against 2,000 (streaming); the folder's size per 1,000 texts with and without vectors.

    python benchmarks/corpus.py            # 512 texts of up to 128 tokens for the speed; 2,000 / 20,000 for RSS
    python benchmarks/corpus.py --quick    # 128 texts for the speed, 500 / 5,000 for RSS
    python benchmarks/corpus.py --only speed --device cuda   # both speed rows on a GPU
    python benchmarks/corpus.py --scale    # 10k, 100k and 1M tiny texts with hidden vectors: texts/s, peak RSS
    python benchmarks/corpus.py --only speed --texts stdlib [--precision bf16]
                                           # 1,000 sentences nobody here wrote: the standard library's docstrings

Goals: analyze >= 3x the plain loop on CPU with MiniLM at 128 tokens; peak RSS at the larger corpus within 10% of
the smaller one (the peak from the start of analyze, in a fresh process each; loading the model is not counted).
Both speed rows run MiniLM in fp32 on the CPU with every torch thread, batches of 32, truncation
at 128 tokens, on the same texts of varied length (1 to 12 built-in sentences each). The plain loop batches the
texts in their given order (padding to the longest) and reduces each text's (H, T, T) maps, unpadded, to the seven
statistics per head in NumPy, as code that dumps attention maps does; analyze sorts by length, reduces attention to
the statistics on the device inside the forward (on a CPU with the AVX2 kernels within the attention pass, no map
formed) and writes the folder (all included in its time).

--texts stdlib takes, instead of the built-in sentences, the first 1,000 sentences of 6 to 60 words of the module
docstrings of this Python's standard library (read from the .py files, in path order: real prose of mixed length
that was not picked to flatter anything). --precision bf16 runs analyze's row in bf16 (where the CPU computes it
natively); the plain loop stays fp32, as users run it.

--scale analyses tiny texts (1 to 4 words of the built-in sentences, ~5 tokens with [CLS] and [SEP]) read from a
text file, keeping hidden states (by default of the last layer only: every layer costs the same memory, one after
another, and six times the time and disk) so that above 200,000 vectors the HNSW index is built. Goal: the peak RSS
of the run (from the start of analyze, the texts read from the file included) at 1M texts within 1.5x of 100k.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import Iterator

import numpy as np


def varied_texts(count: int, seed: int = 0) -> list[str]:
    """Texts of 1 to 12 built-in sentences (about 12 to 200 tokens; a quarter reach the 128-token limit)."""
    from bertviz_lab.corpus import SENTENCES

    lines = SENTENCES.read_text(encoding="utf-8").splitlines()
    rng = random.Random(seed)
    return [" ".join(rng.sample(lines, rng.randint(1, 12))) for _ in range(count)]


def stdlib_sentences(count: int = 1000) -> list[str]:
    """The first `count` sentences of 6 to 60 words of the standard library's module docstrings, in path order."""
    import ast
    import re
    import sysconfig

    found: list[str] = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        if "site-packages" in path.parts or "test" in path.parts or "tests" in path.parts:
            continue
        try:
            docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for sentence in re.split(r"(?<=[.!?])\s+", " ".join((docstring or "").split())):
            if 6 <= len(sentence.split()) <= 60:
                found.append(sentence)
                if len(found) == count:
                    return found
    return found


def short_texts(count: int) -> list[str]:
    """`count` distinct built-in-like sentences (the built-in ones, numbered past the first round)."""
    from bertviz_lab.corpus import SENTENCES

    lines = SENTENCES.read_text(encoding="utf-8").splitlines()
    return [line if i < len(lines) else f"{line} ({i // len(lines)})" for i, line in
            ((i, lines[i % len(lines)]) for i in range(count))]


def is_punct(token: str) -> bool:
    return token not in ("[CLS]", "[SEP]") and bool(token) and all(
        unicodedata.category(ch).startswith("P") for ch in token)


def numpy_statistics(attentions: list[np.ndarray], tokens: list[str]) -> np.ndarray:
    """(layers, heads, 7) sums over the queries of one text from its unpadded (H, T, T) maps."""
    sep = np.array([t == "[SEP]" for t in tokens], dtype=np.float32)
    punct = np.array([is_punct(t) for t in tokens], dtype=np.float32)
    out = []
    for a in attentions:
        with np.errstate(divide="ignore", invalid="ignore"):
            entropy = -np.where(a > 0, a * np.log(a), 0.0).sum(-1)
        own = np.diagonal(a, 0, 1, 2)
        prev = np.pad(np.diagonal(a, -1, 1, 2), ((0, 0), (1, 0)))
        nxt = np.pad(np.diagonal(a, 1, 1, 2), ((0, 0), (0, 1)))
        per_query = np.stack([entropy, a[:, :, 0], a @ sep, own, prev, nxt, a @ punct], axis=-1)
        out.append(per_query.sum(1))
    return np.stack(out)


def plain_loop(texts: list[str], batch_size: int, max_length: int, device: str = "cpu") -> float:
    """texts/s of transformers (eager attention, output_attentions=True) + NumPy statistics."""
    import torch
    import transformers

    from bertviz_lab.model import BERT_Weights, BERTTokenizerFast

    path = BERT_Weights.DEFAULT.path
    model = transformers.BertModel.from_pretrained(str(path), attn_implementation="eager").eval().to(device)
    tokenizer = BERTTokenizerFast.from_pretrained(path)
    start = time.perf_counter()
    totals = np.zeros((model.config.num_hidden_layers, model.config.num_attention_heads, 7))
    for first in range(0, len(texts), batch_size):
        enc = tokenizer(texts[first:first + batch_size], truncation=True, max_length=max_length,
                        return_tensors="pt")
        with torch.inference_mode():
            out = model(**{k: v.to(device) for k, v in enc.items()}, output_attentions=True)
            attentions = [a.cpu().numpy() for a in out.attentions]
        for row, ids in enumerate(enc["input_ids"]):
            n = int(enc["attention_mask"][row].sum())
            tokens = tokenizer.convert_ids_to_tokens(ids[:n].tolist())
            totals += numpy_statistics([a[row, :, :n, :n] for a in attentions], tokens)
    return len(texts) / (time.perf_counter() - start)


def ours(texts: list[str], batch_size: int, max_length: int, vectors: tuple = (),
         device: str = "cpu", precision: str = "fp32") -> tuple[float, int]:
    """(texts/s of analyze, the folder's size in bytes)."""
    from bertviz_lab.corpus import analyze
    from bertviz_lab.model import BERT, BERT_Weights, BERTTokenizerFast

    path = BERT_Weights.DEFAULT.path  # the checkpoint the plain loop reads
    model, tokenizer = BERT.from_pretrained(path, device=device), BERTTokenizerFast.from_pretrained(path)
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        analyze(model, tokenizer, texts, Path(folder) / "c", batch_size=batch_size, max_length=max_length,
                vectors=vectors, progress=False, precision=precision)
        seconds = time.perf_counter() - start
        size = sum(p.stat().st_size for p in (Path(folder) / "c").rglob("*") if p.is_file())
    return len(texts) / seconds, size


def rss_worker(count: int) -> None:
    """Analyse `count` short texts and print the peak RSS in MB (run in a child process of its own)."""
    import bertviz_lab
    from bertviz_lab.corpus import analyze

    model, tokenizer = bertviz_lab.load_default()
    texts = short_texts(count)
    with tempfile.TemporaryDirectory() as folder:
        Path("/proc/self/clear_refs").write_text("5")  # the peak from here on: loading the model is not measured
        start = time.perf_counter()
        analyze(model, tokenizer, texts, Path(folder) / "c", progress=False)
        seconds = time.perf_counter() - start
        peak = status_mb("VmHWM")
    print(json.dumps({"texts": count, "peak_rss_mb": peak, "texts_per_s": count / seconds}))


def tiny_texts(count: int, seed: int = 0) -> Iterator[str]:
    """`count` texts of 1 to 4 words drawn from the built-in sentences' words."""
    from bertviz_lab.corpus import SENTENCES

    words = sorted({word.strip(".,;:!?\"'()") for word in SENTENCES.read_text(encoding="utf-8").split()} - {""})
    rng = random.Random(seed)
    for _ in range(count):
        yield " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))


def scale_worker(count: int, layers: str) -> None:
    """Analyse `count` tiny texts from a text file with hidden vectors at `layers` ('last', 'all' or a list) and
    print texts/s, peak RSS (from the start of analyze), tokens, index segments and the folder's size (run in a
    process of its own)."""
    import bertviz_lab
    from bertviz_lab.corpus import analyze

    model, tokenizer = bertviz_lab.load_default()
    chosen = ([model.config.num_hidden_layers - 1] if layers == "last" else None if layers == "all"
              else [int(layer) for layer in layers.split(",")])
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "texts.txt"
        with source.open("w", encoding="utf-8") as file:
            file.writelines(text + "\n" for text in tiny_texts(count))
        Path("/proc/self/clear_refs").write_text("5")
        start = time.perf_counter()
        corpus = analyze(model, tokenizer, source, Path(folder) / "c", vectors=("hidden",), layers=chosen,
                         progress=False)
        seconds = time.perf_counter() - start
        peak = status_mb("VmHWM")
        tokens = sum(entry["tokens"] for entry in corpus.manifest["shards"])
        segments = len(list((corpus.path / "index").glob("*.usearch"))) if (corpus.path / "index").is_dir() else 0
        size = sum(p.stat().st_size for p in corpus.path.rglob("*") if p.is_file())
    print(json.dumps({"texts": count, "tokens": tokens, "layers": len(corpus.vector_layers), "segments": segments,
                      "peak_rss_mb": peak, "texts_per_s": count / seconds, "seconds": seconds,
                      "folder_gb": size / 2**30}))


def scale(counts: list[int], layers: str) -> None:
    import torch

    from bertviz_lab.kernels import machine

    print(f"{machine.describe()}, "
          f"torch {torch.__version__}; MiniLM fp32, batches of 32; hidden states of layers: {layers}")
    rows = []
    print("| tiny texts | tokens (vectors a layer) | layers kept | index segments | texts/s | time | peak RSS | "
          "folder |")
    for count in counts:
        done = subprocess.run([sys.executable, __file__, "--scale-worker", str(count), "--layers", layers],
                              capture_output=True, text=True, timeout=4 * 3600, check=True)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"| {row['texts']:,} | {row['tokens']:,} | {row['layers']} | {row['segments']} | "
              f"{row['texts_per_s']:.0f} | {row['seconds']:.0f} s | {row['peak_rss_mb']:.0f} MB | "
              f"{row['folder_gb']:.2f} GB |", flush=True)
    for small, large in zip(rows, rows[1:]):
        print(f"peak RSS at {large['texts']:,} texts is {large['peak_rss_mb'] / small['peak_rss_mb']:.2f}x that at "
              f"{small['texts']:,} (goal within 1.5x)")


def status_mb(field: str) -> float:
    """A field of /proc/self/status (VmRSS, VmHWM) in MB."""
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(field))
    return int(line.split()[1]) / 1024


def child_rss(count: int) -> dict:
    done = subprocess.run([sys.executable, __file__, "--rss-worker", str(count)], capture_output=True, text=True,
                          timeout=3600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer texts (noisier)")
    parser.add_argument("--only", choices=("speed", "rss", "size"), help="one of the three measurements")
    parser.add_argument("--device", default="cpu", help="where both speed rows run (e.g. cuda; RSS and size: CPU)")
    parser.add_argument("--rounds", type=int, default=3, help="speed rounds (the ratio is their median)")
    parser.add_argument("--texts", choices=("builtin", "stdlib"), default="builtin",
                        help="speed: built-in sentence groups, or 1,000 sentences of the standard library's docstrings")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="speed: analyze's precision")
    parser.add_argument("--scale", action="store_true", help="texts/s and peak RSS at 10k, 100k and 1M tiny texts")
    parser.add_argument("--counts", default="10000,100000,1000000", help="--scale: how many tiny texts, each run")
    parser.add_argument("--layers", default="last", help="--scale: layers whose hidden states to keep: 'last', "
                        "'all' or e.g. 0,5")
    parser.add_argument("--rss-worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--scale-worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_worker:
        return rss_worker(args.rss_worker)
    if args.scale:
        return scale([int(count) for count in args.counts.split(",")], args.layers)
    if args.scale_worker:
        return scale_worker(args.scale_worker, args.layers)
    import torch

    speed_texts = 128 if args.quick else (1000 if args.texts == "stdlib" else 512)
    small, large = (500, 5000) if args.quick else (2000, 20000)
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    print(f"{where}, {torch.get_num_threads()} torch threads, torch {torch.__version__}; MiniLM (6 layers, 12 heads), "
          f"fp32, batches of 32, max_length 128")
    if args.only in (None, "speed"):
        speed(speed_texts, args.device, args.rounds, args.texts, args.precision)
    if args.only in (None, "rss"):
        rss(small, large)
    if args.only in (None, "size"):
        size()


def speed(count: int, device: str = "cpu", rounds: int = 3, source: str = "builtin", precision: str = "fp32") -> None:
    """Rounds of (plain loop, analyze) on the same texts; the ratio is the median of the rounds' own ratios (a round
    sees one phase of a shared machine; rates across rounds drift by 20% here)."""
    from bertviz_lab.kernels import machine

    texts = varied_texts(count) if source == "builtin" else stdlib_sentences(count)
    lengths = sorted(len(text.split()) for text in texts)
    print(f"machine: {machine.describe()}")
    kind = "built-in sentence groups" if source == "builtin" else "standard-library docstring sentences"
    print(f"texts: {len(texts)} {kind}, {lengths[0]}-{lengths[-1]} words (median {lengths[len(lengths) // 2]}); "
          f"analyze in {precision}")
    ours(texts[:64], 32, 128, device=device, precision=precision)  # warm-up: kernels, caches
    rows = []
    for _ in range(rounds):
        reference = plain_loop(texts, 32, 128, device)
        rows.append((ours(texts, 32, 128, device=device, precision=precision)[0], reference))
    print(f"| {len(texts)} texts, up to 128 tokens | analyze ({precision}, statistics only) | transformers "
          f"output_attentions + NumPy (fp32) | ratio (goal >= 3x fp32, 6x bf16 on AMX) |")
    for i, (rate, reference) in enumerate(rows, 1):
        print(f"| round {i}, texts/s | {rate:.1f} | {reference:.1f} | {rate / reference:.2f}x |")
    ratios = sorted(rate / reference for rate, reference in rows)
    print(f"median ratio {ratios[len(ratios) // 2]:.2f}x over {rounds} rounds (min {ratios[0]:.2f}x, "
          f"max {ratios[-1]:.2f}x)")


def rss(small: int, large: int) -> None:
    rows = [child_rss(small), child_rss(large)]
    growth = rows[1]["peak_rss_mb"] / rows[0]["peak_rss_mb"] - 1
    print("| corpus (built-in sentences, ~15 tokens) | peak RSS while analyze runs | texts/s |")
    for row in rows:
        print(f"| {row['texts']:,} texts | {row['peak_rss_mb']:.0f} MB | {row['texts_per_s']:.0f} |")
    print(f"peak RSS grows {growth * 100:+.1f}% from {small:,} to {large:,} texts (goal within 10%)")


def size() -> None:
    sizes = short_texts(1000)
    _, plain = ours(sizes, 32, 128)
    _, hidden = ours(sizes, 32, 128, vectors=("hidden",))
    _, both = ours(sizes, 32, 128, vectors=("hidden", "qk"))
    print("| folder per 1,000 texts (~15 tokens each, all 6 layers x 12 heads) | size |")
    print(f"| statistics, texts, tokens | {plain / 2**20:.1f} MB |")
    print(f"| + hidden states (6 layers, float16; ~15,000 a layer, searched exactly, no index) "
          f"| {hidden / 2**20:.1f} MB |")
    print(f"| + hidden states + queries and keys (72 heads) | {both / 2**20:.1f} MB |")


if __name__ == "__main__":
    main()
