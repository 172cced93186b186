"""Before and after: the forward pass and the traced forward of two checkouts of bertviz_lab, in paired samples.

    python benchmarks/compare_checkouts.py BASE_DIR NEW_DIR            # every CPU row of forward.py, plain and traced,
                                                                       # and trace_overhead.py's q/k/v and shapes traces
    python benchmarks/compare_checkouts.py BASE_DIR NEW_DIR --quick    # fewer pairs (noisier)
    python benchmarks/compare_checkouts.py BASE_DIR NEW_DIR --rows minilm:1:512:yes,bert-base:1:128:shapes
    python benchmarks/compare_checkouts.py BASE_DIR NEW_DIR --untraced # only the untraced forward rows: a change to
                                                                       # the layers (new hook points) before/after

Traced: "no" (plain forward), "yes" (`trace(model, attentions=True, shapes=False)`, as forward.py's workbench
reads it), "qkv" (also every layer's queries, keys and values) and "shapes" (the default trace: module calls and
shapes recorded too), the last two for trace_overhead.py's bert-base shapes.

Each checkout runs in a process of its own (PYTHONPATH=its folder), both built the same (MiniLM from its package,
bert-base from a seeded random init). The processes take turns, one forward each, base and new alternating which
goes first, so that the drift of a shared machine hits both sides of a pair alike. Reported per row: the median
and the fastest time of each side, the median over pairs of new / base and the ratio of the fastest times (below 1:
the new checkout is faster). Run it under the benchmark lock on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

FORWARD_SHAPES = ((1, 32), (1, 128), (8, 128), (1, 512), (8, 512))  # forward.py's CPU rows
TRACE_SHAPES = ((1, 128), (8, 128), (1, 512), (8, 512))  # trace_overhead.py's rows (bert-base)
ROWS = ([(name, batch, seq, traced) for name in ("minilm", "bert-base") for batch, seq in FORWARD_SHAPES
         for traced in ("no", "yes")]
        + [("bert-base", batch, seq, traced) for batch, seq in TRACE_SHAPES for traced in ("qkv", "shapes")])
TRACE_OPTIONS = {"yes": dict(shapes=False), "qkv": dict(shapes=False, qkv=True), "shapes": dict(shapes=True)}


def worker() -> None:
    """Answer each request line {model, batch, seq, traced: no|yes|qkv|shapes} with the seconds of one forward."""
    import torch

    from bertviz_lab.model import BERT, BERT_Weights, BERTConfig
    from bertviz_lab.trace import trace

    models: dict[str, BERT] = {}
    for line in sys.stdin:
        request = json.loads(line)
        name = request["model"]
        if name not in models:
            torch.manual_seed(0)
            models[name] = (BERT.from_pretrained(BERT_Weights.DEFAULT.path) if name == "minilm"
                            else BERT(BERTConfig.base())).eval()
        model = models[name]
        generator = torch.Generator().manual_seed(0)
        ids = torch.randint(1000, model.config.vocab_size, (request["batch"], request["seq"]), generator=generator)
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
        with torch.inference_mode():
            start = time.perf_counter()
            if request["traced"] != "no":
                with trace(model, attentions=True, max_bytes=None, **TRACE_OPTIONS[request["traced"]]):
                    model(**inputs)
            else:
                model(**inputs)
            seconds = time.perf_counter() - start
        print(json.dumps(seconds), flush=True)


class Checkout:
    """A worker process on one checkout."""

    def __init__(self, folder: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.path.abspath(folder)}
        self.process = subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env)

    def time(self, request: dict) -> float:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def main() -> None:
    if sys.argv[1:] == ["--worker"]:
        worker()
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base", help="folder of the checkout before (its bertviz_lab package is imported)")
    parser.add_argument("new", help="folder of the checkout after")
    parser.add_argument("--quick", action="store_true", help="5 pairs and 4 s per row instead of 15 and 12 s")
    parser.add_argument("--rows", default=None, help="only these rows, as model:batch:seq:traced,... "
                                                    "(e.g. minilm:1:32:yes; traced: no, yes, qkv, shapes)")
    parser.add_argument("--untraced", action="store_true", help="only the untraced forward rows (traced: no), "
                                                                   "for a change that must not slow the plain forward")
    parser.add_argument("--seconds", type=float, default=None, help="at least this long per row")
    parser.add_argument("--pairs", type=int, default=None, help="at least this many pairs per row")
    args = parser.parse_args()
    pairs, seconds = (5, 4.0) if args.quick else (15, 12.0)
    pairs, seconds = args.pairs or pairs, args.seconds if args.seconds is not None else seconds
    wanted = None if args.rows is None else set(args.rows.split(","))
    base, new = Checkout(args.base), Checkout(args.new)
    print("| model | batch | seq | traced | base ms (median, fastest) | new ms (median, fastest) | new / base "
          "(median of pairs) | new / base (fastest) | pairs |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    try:
        for name, batch, seq, traced in ROWS:
            if wanted is not None and f"{name}:{batch}:{seq}:{traced}" not in wanted:
                continue
            if args.untraced and traced != "no":
                continue
            request = {"model": name, "batch": batch, "seq": seq, "traced": traced}
            base.time(request), new.time(request)  # warm-up (and building the model)
            times: dict[str, list[float]] = {"base": [], "new": []}
            deadline = time.perf_counter() + seconds
            while len(times["base"]) < pairs or time.perf_counter() < deadline:
                order = [("base", base), ("new", new)][:: 1 if len(times["base"]) % 2 == 0 else -1]
                for side, checkout in order:
                    times[side].append(checkout.time(request))
            ratio = statistics.median(n / b for b, n in zip(times["base"], times["new"]))
            b, n = times["base"], times["new"]
            print(f"| {name} | {batch} | {seq} | {traced} | "
                  f"{1000 * statistics.median(b):.1f}, {1000 * min(b):.1f} | "
                  f"{1000 * statistics.median(n):.1f}, {1000 * min(n):.1f} | {ratio:.3f} | {min(n) / min(b):.3f} | "
                  f"{len(b)} |", flush=True)
    finally:
        base.close()
        new.close()


if __name__ == "__main__":
    main()
