"""Token saliency: how much each input token's word embedding moves one output, by gradient x input or
integrated gradients (Sundararajan et al., 2017) with Captum's default Gauss-Legendre rule.

Attributions are taken on the word embeddings only: the model runs with `inputs_embeds=` and adds position and
token-type embeddings itself. A token's score is its attribution summed over the hidden dimension.

Points go through the model in batches sized from a memory budget (`memory_budget`, default DEFAULT_MEMORY_BUDGET):
the bytes one point's forward and backward keep are estimated from the model's config and the sequence length
(bertviz_lab.model.footprint), and as many points as fit go at once; `internal_batch_size` caps that further.
Measured (benchmarks/saliency_memory.py): all-MiniLM-L6-v2 at 512 tokens keeps about 96 MB per point.

The integrated-gradients baseline is the input with every ordinary token replaced by [PAD] (`baseline="pad"`; the
[PAD] row is zero in a freshly initialised BERT, so this is the usual zero baseline) or by [MASK]
(`baseline="mask"`); [CLS], [SEP] and padding keep their own embedding, so the path changes only the words, the
model sees a well-formed sequence all along, and special tokens and padding score exactly 0.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from bertviz_lab.model import footprint
from bertviz_lab.model.bert import BERT
from bertviz_lab.model.factory import TASK_CLASSES
from bertviz_lab.model.tasks import TASK_MODELS
from bertviz_lab.util.files import shown

__all__ = ["saliency"]

METHODS = ("integrated_gradients", "gradient_x_input")
BASELINES = ("pad", "mask")
MAX_STEPS = 1024  # integration points per row; Gauss-Legendre nodes for 10**5 steps alone need 75 GiB
DEFAULT_MEMORY_BUDGET = 10**9  # bytes the points of one batch may keep for their backward pass
FALLBACK_BATCH = 8  # points per batch for a model whose config gives no sizes to estimate from
# bert-base-uncased's [CLS], [SEP] and [MASK] (also all-MiniLM-L6-v2's), used when no tokenizer is given
DEFAULT_SPECIAL_TOKEN_IDS = (101, 102)
DEFAULT_MASK_TOKEN_ID = 103
# keys a tokenizer may return that are not model inputs
TOKENIZER_ONLY_KEYS = ("special_tokens_mask", "offset_mapping", "overflow_to_sample_mapping", "length")

# what each task model's forward returns, named in order (a lone tensor is a one-name tuple)
OUTPUT_NAMES: tuple[tuple[type, tuple[str, ...]], ...] = (
    *((TASK_CLASSES[task.task], task.outputs) for task in TASK_MODELS),
    (BERT, ("last_hidden_state", "pooler_output")),
)
# other names of the same outputs in dictionary outputs (Hugging Face's ModelOutput keys)
OUTPUT_ALIASES = {"prediction_logits": "mlm_logits", "seq_relationship_logits": "nsp_logits"}

Target = str | tuple[str | int, ...] | Callable[[Any], torch.Tensor]


@dataclasses.dataclass(frozen=True)
class Shorthand:
    """A target named by output and indices: ("mlm", position, token_id) reads mlm_logits[:, position, token_id]."""

    text: str
    output: str
    index: tuple[int, ...]
    index_names: tuple[str, ...]

    def __call__(self, named: dict[str, Any], model_name: str) -> torch.Tensor:
        """The (B,) scores this target reads from a model's named outputs."""
        if not isinstance(named.get(self.output), torch.Tensor):
            raise ValueError(f"target {self.text} needs {self.output}, but {model_name} returns "
                             f"{describe_outputs(named)}; pass a callable target for this model.")
        logits: torch.Tensor = named[self.output]
        if logits.dim() != 1 + len(self.index):
            raise ValueError(f"target {self.text} needs {self.output} with {1 + len(self.index)} dimensions "
                             f"(batch, {', '.join(self.index_names)}), got shape {shape_text(logits)}.")
        for axis, (value, name) in enumerate(zip(self.index, self.index_names), start=1):
            if not 0 <= value < logits.shape[axis]:
                raise ValueError(f"target {self.text}: {name} {value} is out of range [0, {logits.shape[axis]}).")
        # a tuple first: mypy reads `x[(a, *b)]` as 3.11's `x[a, *b]`
        index: tuple[slice | int, ...] = (slice(None), *self.index)
        return logits[index]


@dataclasses.dataclass(frozen=True)
class TokenIds:
    """The ids the baseline is built from: which token fills ordinary positions and which keep their own."""

    pad: int | None
    mask: int
    special: tuple[int, ...]


@dataclasses.dataclass
class Problem:
    """One attribution run: the model, the inputs besides the embeddings (batch first) and the target."""

    model: nn.Module
    rest: dict[str, Any]
    target: Callable[[Any], torch.Tensor]
    batch: int

    def gradients(self, embeds: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """d target / d embeds for points (N, T, C) that belong to batch rows `rows` (N,), in one forward."""
        embeds = embeds.detach().requires_grad_(True)
        kwargs = {k: v[rows] if self._per_row(v) else v for k, v in self.rest.items()}
        scores = self.target(self.model(inputs_embeds=embeds, **kwargs))
        if not isinstance(scores, torch.Tensor) or tuple(scores.shape) != (len(rows),):
            shape = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
            raise ValueError(f"the target must give one score per row of the model's output, shape (batch,), "
                             f"got {shape} for a batch of {len(rows)}.")
        if not scores.requires_grad:  # a target that does not depend on the input
            return torch.zeros_like(embeds)
        (grads,) = torch.autograd.grad(scores.sum(), embeds)
        return grads

    def _per_row(self, value: Any) -> bool:
        return isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] == self.batch


def saliency(model: nn.Module, inputs: Mapping[str, Any], target: Target, method: str = "integrated_gradients",
             steps: int = 64, baseline: str = "pad", *, tokenizer: Any = None,
             special_token_ids: Iterable[int] | None = None, mask_token_id: int | None = None,
             internal_batch_size: int | None = None, memory_budget: int | str | None = None,
             progress: Callable[[int, int], None] | None = None) -> torch.Tensor:
    """Score each input token for `target` (B, T), so a view can show which words an output rests on.

    `target`: a callable from the model's output to (B,) scores, or "nsp" (the IsNext logit),
    ("mlm", position, token_id), ("class", label), ("token", position, label). [CLS]/[SEP]/[MASK] ids come from
    `special_token_ids` / `mask_token_id`, else `tokenizer`, else bert-base-uncased's; [PAD] from `tokenizer`,
    else the model's config. `steps`: 1 to MAX_STEPS. `memory_budget` (bytes, or a size such as "512MB"; default
    1 GB) sizes the batches of points that go through the model at once; `internal_batch_size` caps them. The
    model runs in eval mode and is left as it was (modes, gradients, requires_grad); returns a float32 CPU tensor.
    `progress(done, total)` is called after each batch of points with the steps done so far (integrated gradients:
    of `steps`; gradient x input: one step), so a view can say how far a long run is.
    """
    check_choice("method", method, METHODS)
    check_choice("baseline", baseline, BASELINES)
    check_steps(steps)
    if internal_batch_size is not None:
        check_count("internal_batch_size", internal_batch_size)
    budget = memory_budget_bytes(memory_budget)
    embedding = word_embeddings(model)
    select = resolve_target(target, model)
    ids = token_ids(model, tokenizer, special_token_ids, mask_token_id, embedding.num_embeddings, baseline)
    with torch.inference_mode(False), torch.enable_grad(), evaluating(model):
        input_ids, rest = split_inputs(inputs, embedding.weight.device)
        check_ids("input_ids", input_ids, embedding.num_embeddings)
        x = embedding(input_ids).detach()  # (B, T, C)
        problem = Problem(model, rest, select, input_ids.shape[0])
        chunk = points_per_batch(model, embedding, input_ids.shape[1], budget, internal_batch_size)
        if method == "gradient_x_input":
            scores = gradient_x_input(problem, x, chunk)
            if progress is not None:
                progress(1, 1)
        else:
            base = embedding(baseline_ids(input_ids, inputs, ids, baseline)).detach()
            scores = integrated_gradients(problem, x, base, steps, chunk, progress)
    return scores.sum(-1).detach().to("cpu", torch.float32)


# the two methods ---------------------------------------------------------------------------------------
def gradient_x_input(problem: Problem, x: torch.Tensor, chunk: int) -> torch.Tensor:
    """grad * input per row (Captum's InputXGradient), `chunk` rows per forward."""
    rows = torch.arange(x.shape[0], device=x.device)
    grads = torch.cat([problem.gradients(x[part], part) for part in torch.split(rows, chunk)])
    return grads * x  # (B, T, C)


def integrated_gradients(problem: Problem, x: torch.Tensor, base: torch.Tensor, steps: int,
                         chunk: int, progress: Callable[[int, int], None] | None = None) -> torch.Tensor:
    """(x - base) * the Gauss-Legendre mean of gradients on the straight path, `chunk` points per forward;
    `progress(steps done, steps)` after each forward."""
    alphas, weights = gauss_legendre(steps, x.device)
    B, delta = x.shape[0], x - base
    total = torch.zeros(x.shape, dtype=torch.promote_types(x.dtype, torch.float32), device=x.device)
    for flat in torch.split(torch.arange(steps * B, device=x.device), chunk):
        step, rows = flat // B, flat % B  # points ordered step-major, as Captum's
        points = base[rows] + alphas[step].to(x.dtype)[:, None, None] * delta[rows]  # (N, T, C)
        grads = problem.gradients(points, rows)
        total.index_add_(0, rows, weights[step].to(total.dtype)[:, None, None] * grads.to(total.dtype))
        if progress is not None:
            progress((int(flat[-1]) + 1) // B, steps)  # steps every row has finished
    return total * delta


def gauss_legendre(steps: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Captum's default rule ("gausslegendre"): (alphas in (0, 1), weights summing to 1), float64."""
    nodes, weights = np.polynomial.legendre.leggauss(steps)
    return (torch.tensor(0.5 * (1 + nodes), device=device, dtype=torch.float64),
            torch.tensor(0.5 * weights, device=device, dtype=torch.float64))


# how many points at once ----------------------------------------------------------------------------------
def memory_budget_bytes(budget: Any) -> int:
    """The budget in bytes: DEFAULT_MEMORY_BUDGET for None, an int or float of bytes, or a size such as "512MB"."""
    if budget is None:
        return DEFAULT_MEMORY_BUDGET
    if isinstance(budget, str):
        return footprint.parse_size(budget, "memory_budget")
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        raise TypeError(f"memory_budget must be a number of bytes or a size such as '512MB', "
                        f"got {type(budget).__name__} {shown(budget)}.")
    if not 1 <= budget < math.inf:
        raise ValueError(f"memory_budget must be a finite number of bytes (at least 1), got {budget!r}.")
    return int(budget)


def point_bytes(model: nn.Module, embedding: nn.Embedding, sequence_length: int) -> int | None:
    """Bytes one point keeps through its forward and backward pass (activations, and MLM logits where the model
    has that head), from the model's config; None when the config gives no sizes."""
    try:
        sizes = footprint.Sizes.of(getattr(model, "config", None), footprint.heads_of(type(model)))
    except (TypeError, ValueError):
        return None
    elements = footprint.activation_elements(sizes, 1, sequence_length, "gradients")
    return elements * embedding.weight.element_size()


def points_per_batch(model: nn.Module, embedding: nn.Embedding, sequence_length: int, budget: int,
                     cap: int | None) -> int:
    """As many points as `budget` holds (at least one), at most `cap`."""
    per_point = point_bytes(model, embedding, sequence_length)
    fitting = FALLBACK_BATCH if per_point is None else max(1, budget // per_point)
    return fitting if cap is None else min(fitting, cap)


# inputs, baseline, model state -------------------------------------------------------------------------
def split_inputs(inputs: Mapping[str, Any], device: torch.device) -> tuple[torch.Tensor, dict[str, Any]]:
    """input_ids and the other forward arguments, on the model's device, usable by autograd."""
    if not isinstance(inputs, Mapping):
        raise TypeError(f"inputs must be the tokenizer's dict (input_ids, attention_mask, ...), "
                        f"got {type(inputs).__name__}.")
    if "inputs_embeds" in inputs:
        raise ValueError("inputs must not hold inputs_embeds: saliency builds them from input_ids.")
    if not isinstance(inputs.get("input_ids"), torch.Tensor):
        found = type(inputs["input_ids"]).__name__ if "input_ids" in inputs else f"only {sorted(inputs)}"
        raise ValueError(f"inputs must hold input_ids as a (batch, seq_len) tensor, got {found}; "
                         f"tokenize with return_tensors='pt'.")
    moved = {k: ordinary(v, device) for k, v in inputs.items() if k not in TOKENIZER_ONLY_KEYS}
    return moved.pop("input_ids"), moved


def ordinary(value: Any, device: torch.device) -> Any:
    """A tensor on `device` that autograd may use (inference-mode tensors are copied); anything else as is."""
    if not isinstance(value, torch.Tensor):
        return value
    value = value.to(device)
    return value.clone() if value.is_inference() else value


def check_ids(name: str, ids: torch.Tensor, vocab_size: int) -> None:
    """Ids are a 2D integer tensor within the vocabulary (nn.Embedding's own error names neither)."""
    if ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"{name} must be an integer tensor (torch.int64 or torch.int32), got {ids.dtype}.")
    if ids.dim() != 2 or not ids.numel():
        raise ValueError(f"{name} must be a non-empty (batch, seq_len) tensor, got shape {tuple(ids.shape)}.")
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab_size:
        raise ValueError(f"{name} holds ids in [{low}, {high}] but the vocabulary has {vocab_size} tokens.")


def word_embeddings(model: nn.Module) -> nn.Embedding:
    """The model's word-embedding table, after checking that its forward takes inputs_embeds."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a BERT model (an nn.Module), got {type(model).__name__}.")
    parameters = inspect.signature(model.forward).parameters
    if "inputs_embeds" not in parameters and not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        raise TypeError(f"{type(model).__name__}.forward takes no inputs_embeds, which saliency runs the model "
                        f"with; pass the BERT model inside it (for create_bert_model(...), its .model).")
    get_input_embeddings = getattr(model, "get_input_embeddings", None)
    if not callable(get_input_embeddings):
        raise TypeError(f"{type(model).__name__} has no get_input_embeddings(), which saliency reads the word "
                        f"embeddings from.")
    embedding = get_input_embeddings()
    if not isinstance(embedding, nn.Embedding):
        raise TypeError(f"{type(model).__name__}.get_input_embeddings() must return an nn.Embedding, "
                        f"got {type(embedding).__name__}.")
    return embedding


def token_ids(model: nn.Module, tokenizer: Any, special: Iterable[int] | None, mask: int | None,
              vocab_size: int, baseline: str) -> TokenIds:
    """[PAD], [MASK] and the ids that keep their embedding, from the arguments, the tokenizer or the defaults."""
    if special is None:
        special = ((tokenizer.cls_token_id, tokenizer.sep_token_id) if tokenizer is not None
                   else DEFAULT_SPECIAL_TOKEN_IDS)
    if mask is None:
        mask = tokenizer.mask_token_id if tokenizer is not None else DEFAULT_MASK_TOKEN_ID
    pad = tokenizer.pad_token_id if tokenizer is not None else model_pad_id(model)
    ids = TokenIds(pad=pad, mask=mask, special=tuple(special))
    for value in ids.special:
        check_token_id("special_token_ids", value, vocab_size)
    if baseline == "mask":
        check_token_id("mask_token_id", ids.mask, vocab_size)
    elif ids.pad is None:
        raise ValueError("baseline='pad' needs a [PAD] id, but the model's config has pad_token_id=None; "
                         "pass tokenizer=... or use baseline='mask'.")
    else:
        check_token_id("pad_token_id", ids.pad, vocab_size)
    return ids


def model_pad_id(model: nn.Module) -> int | None:
    """[PAD] as the model's config names it, else its embedding's padding row."""
    config = getattr(model, "config", None)
    pad = getattr(config, "pad_token_id", None)
    return pad if pad is not None else word_embeddings(model).padding_idx


def check_token_id(name: str, value: Any, vocab_size: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must hold int token ids, got {type(value).__name__} {value!r}.")
    if not 0 <= value < vocab_size:
        raise ValueError(f"{name} {value} is out of range: the vocabulary has {vocab_size} tokens.")


def baseline_ids(input_ids: torch.Tensor, inputs: Mapping[str, Any], ids: TokenIds, baseline: str) -> torch.Tensor:
    """The input with ordinary tokens replaced by [PAD] or [MASK]; [CLS], [SEP] and padding kept."""
    fill = ids.pad if baseline == "pad" else ids.mask
    assert fill is not None  # token_ids refuses baseline="pad" where there is no [PAD] id
    return torch.where(keeps_embedding(input_ids, inputs, ids), input_ids, torch.full_like(input_ids, fill))


def keeps_embedding(input_ids: torch.Tensor, inputs: Mapping[str, Any], ids: TokenIds) -> torch.Tensor:
    """(B, T) True at special tokens and padding: by id, attention mask and the tokenizer's special_tokens_mask."""
    keep = torch.isin(input_ids, torch.tensor(ids.special, dtype=input_ids.dtype, device=input_ids.device))
    if ids.pad is not None:
        keep |= input_ids == ids.pad
    for name, marks in (("attention_mask", 0), ("special_tokens_mask", 1)):
        value = inputs.get(name)
        if isinstance(value, torch.Tensor) and value.shape == input_ids.shape:
            keep |= value.to(input_ids.device) == marks
    return keep


@contextlib.contextmanager
def evaluating(model: nn.Module) -> Iterator[None]:
    """Eval mode inside (dropout off, so attributions are deterministic); every module's own mode back after."""
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


# targets -------------------------------------------------------------------------------------------------
def resolve_target(target: Target, model: nn.Module) -> Callable[[Any], torch.Tensor]:
    """A function from the model's output to (B,) scores, for a callable or a shorthand target."""
    if callable(target):
        return target
    shorthand = parse_target(target)
    model_name = type(model).__name__
    return lambda output: shorthand(named_outputs(model, output), model_name)


def parse_target(target: Any) -> Shorthand:
    """"nsp", ("mlm", position, token_id), ("class", label) or ("token", position, label), checked."""
    if isinstance(target, str) and target == "nsp":
        return Shorthand("'nsp'", "nsp_logits", (0,), ("label",))
    forms = {"mlm": ("mlm_logits", ("position", "token id")), "class": ("class_logits", ("label",)),
             "token": ("token_logits", ("position", "label"))}
    expected = ("a callable, 'nsp', ('mlm', position, token_id), ('class', label) or ('token', position, label)")
    if not isinstance(target, tuple) or not target or target[0] not in forms:
        kind = TypeError if not isinstance(target, (str, tuple)) else ValueError
        raise kind(f"target must be {expected}, got {target!r}.")
    output, names = forms[target[0]]
    if len(target) != 1 + len(names):
        raise ValueError(f"target must be {expected}, got {target!r}.")
    for value, name in zip(target[1:], names):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"target {target!r}: {name} must be an int, got {type(value).__name__} {value!r}.")
    return Shorthand(repr(target), output, tuple(target[1:]), names)


def _output_name(name: str) -> str:
    return OUTPUT_ALIASES.get(name, name)


def named_outputs(model: nn.Module, output: Any) -> dict[str, Any]:
    """The model's outputs by name: from its class (task models), or the keys/fields of a dict or dataclass."""
    if isinstance(output, Mapping):
        return {_output_name(k): v for k, v in output.items()}
    if dataclasses.is_dataclass(output):
        return {_output_name(f.name): getattr(output, f.name) for f in dataclasses.fields(output)}
    values = (output,) if isinstance(output, torch.Tensor) else tuple(output) if isinstance(output, tuple) else ()
    for kinds, names in OUTPUT_NAMES:
        if isinstance(model, kinds):
            return dict(zip(names, values))
    if hasattr(output, "_fields"):
        return dict(zip(output._fields, values))
    return {f"output[{i}]": value for i, value in enumerate(values)} or {"output": output}


def describe_outputs(named: dict[str, Any]) -> str:
    """"mlm_logits (batch, 8, 100), ..." for an error message."""
    parts = [f"{name} {shape_text(v)}" if isinstance(v, torch.Tensor) else f"{name} ({type(v).__name__})"
             for name, v in named.items()]
    return ", ".join(parts) or "nothing"


def shape_text(tensor: torch.Tensor) -> str:
    """A shape with its first dimension as "batch", which here counts interpolation points, not input rows."""
    return "(" + ", ".join(["batch", *map(str, tensor.shape[1:])]) + ")" if tensor.dim() else "()"


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in choices:
        kind = ValueError if isinstance(value, str) else TypeError
        raise kind(f"{name} must be one of {choices}, got {value!r}.")


def check_count(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a positive int, got {type(value).__name__} {shown(value)}.")
    if value < 1:
        raise ValueError(f"{name} must be a positive int (at least 1), got {shown(value)}.")


def check_steps(steps: Any) -> None:
    """1 <= steps <= MAX_STEPS, an int (the panel's toolbar has the same bounds)."""
    check_count("steps", steps)
    if steps > MAX_STEPS:
        raise ValueError(f"steps must be at most {MAX_STEPS}, got {shown(steps)}.")
