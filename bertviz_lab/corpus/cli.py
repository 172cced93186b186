"""`bertviz-lab corpus --model NAME --data FILE --out DIR`: analyze() from the command line, also under torchrun
(each process takes its share of the shards; rank 0 writes the manifest)."""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any


def _int_list(value: str) -> list[int]:
    """'0,1,5' -> [0, 1, 5]."""
    try:
        return [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 0,1,5, got {value!r}") from None


def _kinds(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def add_corpus_parser(commands: Any) -> argparse.ArgumentParser:
    """The `corpus` subcommand on the CLI's subparsers."""
    corpus: argparse.ArgumentParser = commands.add_parser(
        "corpus", help="analyse a corpus: per-head attention statistics, nearest contexts, query-key maps",
        description="Run a model over a corpus and write a corpus folder (Parquet tables, a vector index) that "
                    "bertviz_lab.corpus.Corpus.open reads. Rerunning resumes an interrupted run and recomputes "
                    "nothing done. Runs under torchrun as well (the processes share the shards).")
    corpus.add_argument("--model", required=True,
                        help="'default' (the packaged MiniLM), a checkpoint folder or a Hugging Face Hub repo id")
    corpus.add_argument("--data", required=True,
                        help="a .txt (one text per line), .jsonl, .csv or .parquet file; 'builtin' for the built-in "
                             "corpus")
    corpus.add_argument("--out", required=True, help="the corpus folder to write (or resume)")
    corpus.add_argument("--layers", type=_int_list, help="layers to analyse, e.g. 0,1,5 (default: all)")
    corpus.add_argument("--heads", type=_int_list, help="heads to analyse in each layer, e.g. 0,3 (default: all)")
    corpus.add_argument("--vectors", type=_kinds, default=[],
                        help="vectors to store: hidden (hidden states, for nearest contexts), qk (queries and keys, "
                             "for query-key maps), e.g. hidden,qk (default: none)")
    corpus.add_argument("--qk-heads", type=_int_list,
                        help="with --vectors qk: the heads whose queries and keys to keep, e.g. 2,7 (default: --heads)")
    corpus.add_argument("--neurons", type=int, default=0, metavar="K",
                        help="keep, for every analysed layer and every feed-forward neuron (after the GELU), the K "
                             "texts where it fires most, for Corpus.top_neuron_texts (default: 0, none)")
    corpus.add_argument("--text-column", default="text", help="the text column of .jsonl/.csv/.parquet (default: text)")
    corpus.add_argument("--encoding", default="utf-8",
                        help="the encoding of a .txt/.jsonl/.csv file, any Python codec (default: utf-8)")
    corpus.add_argument("--errors", default="strict", choices=("strict", "replace", "ignore", "backslashreplace"),
                        help="bytes not in that encoding: strict stops naming the line, replace reads past them "
                             "(default: strict)")
    corpus.add_argument("--batch-size", type=int, default=32, help="texts per forward (default: 32)")
    corpus.add_argument("--max-length", type=int, default=128, help="tokens per text at most (default: 128)")
    corpus.add_argument("--shard-size", type=int, default=1024,
                        help="texts per shard, the unit of resuming and of sharing over processes (default: 1024)")
    corpus.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, mps or auto (default: cpu)")
    corpus.add_argument("--precision", default="fp32", choices=("fp32", "bf16"),
                        help="bf16: the model under bf16 autocast, statistics in float32, where the hardware computes "
                             "bf16 natively (AMX, AVX-512 BF16, GPUs from compute capability 8.0) (default: fp32)")
    corpus.add_argument("--no-progress", action="store_true", help="no progress bar")
    return corpus


def run(args: argparse.Namespace) -> int:
    """Analyse as `args` say; 0, 2 with one line on stderr for bad input or a failed write, 128 + the signal's number
    (130, 143) with one line when Ctrl-C or SIGTERM stops the run (the folder keeps every finished shard, and the
    same command resumes)."""
    import os
    import signal

    from bertviz_lab.corpus import SENTENCES, analyze, folder
    from bertviz_lab.corpus.analyze import check_precision
    from bertviz_lab.corpus.extra import require_corpus_extra
    from bertviz_lab.device import select_device
    from bertviz_lab.model.auto import load, load_default
    from bertviz_lab.model.bert import BERTPreTrainedModel
    from bertviz_lab.util.files import named
    from bertviz_lab.util.interrupts import interrupt_handlers
    from bertviz_lab.util.paths import folder_problem, write_failure

    try:
        require_corpus_extra()  # before anything is written or loaded
    except ImportError as error:
        return _error(str(error))
    problem = folder_problem(args.out)  # before the model loads: a bad --out costs nothing
    if problem is not None:
        return _error(f"--out {named(args.out)} {problem}")
    try:
        # rank 0 takes the folder before the model loads: a second run into it stops at once (analyze holds it on)
        writing = folder.writing(Path(args.out)) if int(os.environ.get("RANK", "0")) == 0 else nullcontext()
        with interrupt_handlers(_interrupt), writing:
            device = select_device(args.device)
            if device.type == "cuda" and "LOCAL_RANK" in os.environ:  # torchrun: one GPU per process
                device = select_device(f"cuda:{os.environ['LOCAL_RANK']}")
            check_precision(args.precision, device)  # refused before the model loads
            model: BERTPreTrainedModel
            if args.model == "default":
                model, tokenizer = load_default(device=device)
            else:
                model, tokenizer = load(args.model, device=device)
            data = SENTENCES if args.data == "builtin" else args.data
            corpus = analyze(model, tokenizer, data, args.out, layers=args.layers, heads=args.heads,
                             vectors=args.vectors, qk_heads=args.qk_heads, batch_size=args.batch_size,
                             max_length=args.max_length, text_column=args.text_column,
                             progress=not args.no_progress, shard_size=args.shard_size, model_name=args.model,
                             encoding=args.encoding, errors=args.errors, precision=args.precision,
                             neurons=args.neurons)
    except KeyboardInterrupt as error:
        print(f"bertviz-lab corpus: interrupted {_progress(args.out)}; rerun the same command to resume.",
              file=sys.stderr)
        return 128 + getattr(error, "number", signal.SIGINT)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as error:
        return _error(str(error))
    except OSError as error:  # a full disk, a folder made read-only meanwhile
        _, why = write_failure(error, args.out)
        where = named(error.filename) if error.filename else f"--out {named(args.out)}"
        return _error(f"{where}: {why} {_progress(args.out)}; rerun the same command to resume.")
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"{corpus.num_texts} texts, layers {corpus.layers}, {len(corpus.heads)} heads per layer, vectors "
              f"{', '.join(corpus.manifest['vectors']) or 'none'}"
              f"{f', top {args.neurons} texts per neuron' if corpus.neuron_layers else ''}: {corpus.path}")
    return 0


def _error(message: str) -> int:
    print(f"bertviz-lab corpus: error: {' '.join(message.split())}", file=sys.stderr)
    return 2


def _progress(out: str) -> str:
    """"after 3 of 8 shards", from the folder itself (its settings and the shards renamed into place)."""
    import math

    from bertviz_lab.corpus import folder

    recorded = folder.read_json(Path(out) / folder.SETTINGS) or {}
    settings = recorded.get("settings")
    if not isinstance(settings, dict):
        settings = {}
    texts, size = settings.get("num_texts"), settings.get("shard_size")
    if not isinstance(texts, int) or not isinstance(size, int) or size < 1:
        return "before any shard was written"
    total = math.ceil(texts / size)
    done = sum(folder.shard_done(Path(out), index) for index in range(total))
    return f"after {done} of {total} shards"


class _Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, with the signal's number (the exit code is 128 + it)."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number


def _interrupt(number: int, frame: Any) -> None:
    raise _Interrupted(number)
