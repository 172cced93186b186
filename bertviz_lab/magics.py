"""%bert_inspect: one line (or cell) that opens the workbench, or one of its panels, on a text."""

from __future__ import annotations

import logging
import threading
from collections.abc import Set as AbstractSet
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.process import arg_split

from bertviz_lab.widgets.registry import magic_names

VIEWS = magic_names()
WARM_UP_THREAD = "bertviz_lab warm-up"


def _lookup(namespace: dict[str, Any], name: str, what: str) -> Any:
    """A name from the notebook's namespace; never evaluated, so `%bert_inspect os.system(...)` is just a bad name."""
    if not name.isidentifier():
        raise UsageError(f"{what} must be a variable name, got {name!r} (quote the text if it is the text).")
    if name not in namespace:
        raise UsageError(f"unknown name {name!r}: no variable of that name in this notebook "
                         f"(quote the text if {name!r} is the start of it).")
    return namespace[name]


def _load_named(name: str) -> tuple[Any, Any]:
    """--model NAME: a checkpoint folder or Hub repo id, loaded once per session; its errors in one line."""
    from bertviz_lab.widgets.panels.models import named_model_and_tokenizer

    try:
        return named_model_and_tokenizer(name)
    except (ValueError, TypeError, OSError, ImportError) as error:
        raise UsageError(str(error)) from None


def _text_of(word: str, unquoted: AbstractSet[str], namespace: dict[str, Any]) -> str:
    """The TEXT argument: the value of the variable it names where it is an unquoted name of one (`t = "The cat..."`
    then `%bert_inspect t`, as the names before it are variables too), else the word itself. A quoted word is always
    the text; an unquoted name of something that is not a str is a one-line error rather than a one-word text."""
    if word not in unquoted or not word.isidentifier() or word not in namespace:
        return word
    value = namespace[word]
    if not isinstance(value, str):
        raise UsageError(f"{word!r} names a variable of type {type(value).__name__}, not a text: %bert_inspect "
                         f"[MODEL TOKENIZER] \"TEXT\" (quote it to inspect the word {word!r} itself).")
    return value


def resolve(args: Any, cell: str | None, namespace: dict[str, Any],
            unquoted: AbstractSet[str] = frozenset()) -> dict[str, Any]:
    """Turn parsed arguments into the Workbench's arguments, checking every value with a one-line error.
    `unquoted`: the words of the line that had no quotes (a TEXT among them may name a variable)."""
    from bertviz_lab.model.bert import BERTPreTrainedModel

    words = list(args.words)
    if cell is not None:
        text = cell.strip()
        names = words
    elif not words and args.corpus is not None:  # a corpus alone: the workbench's own text, on its Corpus tab
        from bertviz_lab.widgets.panels.workbench import DEFAULT_TEXT

        names, text = [], DEFAULT_TEXT
    else:
        if not words:
            raise UsageError("missing TEXT: %bert_inspect [MODEL [TOKENIZER]] [options] \"TEXT\"")
        names, text = words[:-1], _text_of(words[-1], unquoted, namespace)
    if not text:
        raise UsageError("the text to inspect is empty.")
    if len(names) > 2:
        raise UsageError(f"expected at most MODEL and TOKENIZER before the text, got {len(names)} names: "
                         f"{' '.join(names)} (quote the text).")
    if args.model is not None and names:
        raise UsageError(f"give either --model NAME or the variables MODEL TOKENIZER, not both "
                         f"(got --model {args.model} and {' '.join(names)}).")
    model = _lookup(namespace, names[0], "MODEL") if names else None
    tokenizer = _lookup(namespace, names[1], "TOKENIZER") if len(names) > 1 else None
    if model is not None and not isinstance(model, BERTPreTrainedModel):
        raise UsageError(f"{names[0]!r} is of type {type(model).__name__}, not a bertviz_lab BERT model.")
    if tokenizer is not None and not hasattr(tokenizer, "encode_pretraining_inputs"):
        raise UsageError(f"{names[1]!r} is of type {type(tokenizer).__name__}, not a BERTTokenizerFast.")
    if model is not None and tokenizer is None:
        raise UsageError(f"give the tokenizer after the model: %bert_inspect {names[0]} TOKENIZER \"TEXT\".")
    if args.model is not None:
        model, tokenizer = _load_named(args.model)
    if args.device is not None:
        from bertviz_lab.device import select_device

        try:
            select_device(args.device)
        except (ValueError, TypeError) as error:
            raise UsageError(str(error)) from None
    for option in ("layer", "head"):
        value = getattr(args, option)
        if value is not None and value < 0:
            raise UsageError(f"--{option} must be >= 0, got {value}.")
    text_b = None if args.pair is None else _text_of(args.pair, unquoted, namespace)
    return {"model": model, "tokenizer": tokenizer, "text": text, "text_b": text_b, "view": args.view,
            "layer": args.layer, "head": args.head, "device": args.device,
            **({"corpus": args.corpus} if args.corpus is not None else {})}


@magics_class
class BertInspectMagics(Magics):
    """The %bert_inspect magic."""

    @no_var_expand  # the line is taken literally: IPython would run {code} and substitute $names in the text
    @magic_arguments()
    @argument("--view", choices=VIEWS, default="all", help="which panel to open (default: the whole workbench)")
    @argument("--layer", type=int, default=None, help="attention layer to show first (attention, neuron or all views)")
    @argument("--head", type=int, default=None, help="attention head to show first (attention, neuron or all views)")
    @argument("--pair", default=None, metavar="TEXT_B", help="a second sentence (sentence B)")
    @argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps")
    @argument("--model", default=None, metavar="NAME",
              help="a checkpoint folder or Hugging Face Hub repo id (e.g. bert-base-uncased), loaded with every head")
    @argument("--corpus", default=None, metavar="DIR",
              help="a corpus folder (bertviz-lab corpus, or analyze()): opens the workbench on its Corpus tab")
    @argument("words", nargs="*", metavar="[MODEL [TOKENIZER]] TEXT",
              help="variable names of a model and its tokenizer (optional), then the quoted text")
    @line_cell_magic
    def bert_inspect(self, line: str, cell: str | None = None):
        """Inspect BERT on a text:
        %bert_inspect [MODEL [TOKENIZER] | --model NAME] [--view V] [--layer L] [--head H] [--pair B] [--device D]
                      "TEXT"; %bert_inspect --corpus DIR opens an analysed corpus (the text is then optional).

        With no MODEL the default pretrained model (all-MiniLM-L6-v2) is used; --model NAME loads a checkpoint folder
        or Hub repo id from the Hugging Face cache (HF_HUB_OFFLINE=1: the cache only). As a cell magic
        (%%bert_inspect ...), the cell body is the text. Names are looked up in the notebook, never evaluated:
        TEXT (and --pair's) may be the name of a variable holding the text (`%bert_inspect t`), and a quoted text
        is taken literally ({...} and $name are not expanded).
        """
        try:
            # intermixed: names, options and the text may come in any order ("m tok --layer 1 'text'"; plain
            # parse_args rejects a positional after options); posix: quotes group words and are removed
            args = self.bert_inspect.parser.parse_intermixed_args(arg_split(line, posix=True))
        except UsageError:
            raise
        except ValueError as error:  # shlex: e.g. an unclosed quote
            raise UsageError(f"cannot split the arguments ({error}); quote the text: %bert_inspect \"TEXT\"") from None
        except SystemExit as error:  # argparse exits on a bad option
            raise UsageError(f"bad option in: {line}") from error
        unquoted = set(arg_split(line, posix=False))  # a quoted word keeps its quotes here
        options = resolve(args, cell, self.shell.user_ns if self.shell is not None else {}, unquoted)
        from bertviz_lab.widgets.panels.workbench import open_view

        try:
            return open_view(**options)
        except (ValueError, TypeError, ImportError) as error:
            raise UsageError(str(error)) from None


def warm_up() -> None:
    """Import the panels, build (or verify) the CPU kernels and load the default model, so the first %bert_inspect
    or forward only computes."""
    from bertviz_lab import kernels
    from bertviz_lab.widgets import Workbench  # noqa: F401 (ipywidgets, anywidget and every panel's module)
    from bertviz_lab.widgets.panels.models import default_model_and_tokenizer

    kernels.warm_up()  # compiles the AVX2 kernels where they are not cached yet (about a second)
    default_model_and_tokenizer()


def _warm_up_quietly() -> None:
    try:
        warm_up()
    except Exception:  # only a head start: %bert_inspect meets and reports the same error itself
        logging.getLogger(__name__).debug("%s failed", WARM_UP_THREAD, exc_info=True)


def wait_for_warm_up() -> None:
    """Block until the warm-up that `%load_ext` started has finished (at once if none is running)."""
    for thread in threading.enumerate():
        if thread.name == WARM_UP_THREAD:
            thread.join()


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext bertviz_lab` registers %bert_inspect and warms it up in a background thread.

    In a fresh kernel the first call would otherwise spend seconds importing the panels, building the CPU kernels
    and loading the default model; done while the user types the next cell, it is free.
    """
    ipython.register_magics(BertInspectMagics)
    threading.Thread(target=_warm_up_quietly, name=WARM_UP_THREAD, daemon=True).start()
