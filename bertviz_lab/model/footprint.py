"""What a BERT costs in memory, worked out from its config alone, so that an absurd size is one clear error before
any tensor is made instead of minutes in the allocator and a crash.

One estimate (`estimate`): the parameters (exactly as this package builds them), their bytes at a dtype, and the
activations of a batch: what autograd keeps for a backward pass ("training": with dropout; "gradients": eval mode,
as saliency runs), or one layer's tensors at a time ("inference"). Training adds AdamW's state: parameters x 4
(weights, gradients, two moments).

`check_fits` compares an estimate with the memory this process can still have: MemAvailable (/proc/meminfo, else
os.sysconf), lowered by a cgroup's memory limit and by RLIMIT_AS. The environment variable BERTVIZ_LAB_MEMORY_LIMIT
overrides that: a size to assume instead ("64GB", "512MiB", a number of bytes), or "off" to check nothing.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from bertviz_lab.model.config import BERTConfig
from bertviz_lab.model.tasks import BY_ARCHITECTURE
from bertviz_lab.util.fields import fields_of
from bertviz_lab.util.files import clip, shown

MEMORY_LIMIT_VARIABLE = "BERTVIZ_LAB_MEMORY_LIMIT"
OVERRIDE_HINT = f"set {MEMORY_LIMIT_VARIABLE} to override (a size such as 64GB, or off)"

MODES = ("inference", "gradients", "training")
OPTIMIZER_FACTOR = 4  # AdamW training holds weights, gradients and two moments per parameter
SIZE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
               "max_position_embeddings", "type_vocab_size", "num_labels")
# BERTConfig's defaults (bert-base) of the size fields: the what-if that names the field an estimate rests on
BERT_BASE = {name: fields_of(BERTConfig)[name].default for name in SIZE_FIELDS}
REQUIRED_FIELDS = SIZE_FIELDS[:5]  # a config without these cannot be estimated; the others default to bert-base's
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15, "e": 10**18}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?(?:e\d+)?)\s*([kmgtpe]?)(i?)b?\s*", re.I)


# sizes ---------------------------------------------------------------------------------------------------
def format_bytes(count: float) -> str:
    """"28 TB", "1.3 GB", "512 MB": decimal units, two significant digits, for error messages."""
    for unit in ("B", "KB", "MB", "GB", "TB", "PB", "EB"):
        if count < 999.5 or unit == "EB":
            break
        count /= 1000
    if count >= 1e5:
        return f"{count:.1e} {unit}"
    return f"{count:.2g} {unit}" if count < 10 else f"{count:.0f} {unit}"


def parse_size(text: str, name: str) -> int:
    """Bytes from "64GB", "1.5 TB", "512MiB", "4g" or "1000000" (KB, MB, ... are powers of 1000, KiB, MiB, ...
    of 1024); a ValueError naming `name` otherwise."""
    found = _SIZE.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise ValueError(f"{name}={shown(text)} is not a size: expected e.g. 64GB, 512MiB or a number of bytes.")
    number, prefix, binary = found.groups()
    unit = 1024 ** "kmgtpe".index(prefix.lower()) * 1024 if binary and prefix else _UNITS[prefix.lower()]
    size = float(number) * unit
    if not math.isfinite(size) or size < 1:
        raise ValueError(f"{name}={shown(text)} is not a finite size of at least one byte.")
    return int(size)


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The numbers of a BERT that decide its memory, as plain ints (a what-if may change one without validation)."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    intermediate_size: int
    num_attention_heads: int = 12
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    num_labels: int = 2
    absolute_positions: bool = True  # else a sinusoidal table (a buffer, not parameters)
    cross_attention: bool = False
    tied: bool = True  # the MLM decoder shares the word embeddings
    pooler: bool = True
    heads: tuple[str, ...] = ()

    @classmethod
    def of(cls, config: Any, heads: Iterable[str] = (), pooler: bool | None = None) -> "Sizes":
        """The sizes of a BERTConfig (or any config with the same attribute names, e.g. transformers')."""
        def read(name: str) -> int:
            value = getattr(config, name, None if name in REQUIRED_FIELDS else BERT_BASE[name])
            if value is None:
                raise ValueError(f"config has no {name}, which the memory estimate needs.")
            return int(value)

        tied = getattr(config, "tie_word_embedding", getattr(config, "tie_word_embeddings", True))
        return cls(
            **{name: read(name) for name in SIZE_FIELDS},
            absolute_positions=getattr(config, "position_embedding_type", "absolute") == "absolute",
            cross_attention=bool(getattr(config, "add_cross_attention", False)), tied=bool(tied),
            pooler=bool(getattr(config, "add_pooling_layer", True) if pooler is None else pooler), heads=tuple(heads))

    def values(self) -> dict[str, int]:
        """The size fields by name."""
        return {name: getattr(self, name) for name in SIZE_FIELDS}


def heads_of(model_class: type) -> tuple[str, ...]:
    """The heads a model class adds to the backbone, from its Hugging Face class name (none for the backbone)."""
    task = BY_ARCHITECTURE.get(getattr(model_class, "hf_architecture", model_class.__name__))
    return task.heads if task is not None else ()


def parameter_count(sizes: Sizes) -> int:
    """Parameters of the model these sizes build, tied weights counted once (as `model.num_parameters()`)."""
    V, C, L, F = sizes.vocab_size, sizes.hidden_size, sizes.num_hidden_layers, sizes.intermediate_size

    def linear(n_in: int, n_out: int) -> int:
        return n_in * n_out + n_out  # weight and bias

    embeddings = (V + sizes.type_vocab_size + (sizes.max_position_embeddings if sizes.absolute_positions else 0)) * C
    embeddings += 2 * C  # LayerNorm
    attention = linear(C, 3 * C) + linear(C, C) + 2 * C  # fused q/k/v, output projection, LayerNorm
    cross = linear(C, C) + linear(C, 2 * C) + linear(C, C) + 2 * C if sizes.cross_attention else 0
    feed_forward = linear(C, F) + linear(F, C) + 2 * C
    total = embeddings + L * (attention + cross + feed_forward) + (linear(C, C) if sizes.pooler else 0)
    heads = {"mlm": linear(C, C) + 2 * C + V + (0 if sizes.tied else V * C), "nsp": linear(C, 2),
             "classifier": linear(C, sizes.num_labels), "token_classifier": linear(C, sizes.num_labels),
             "qa": linear(C, 2)}
    return total + sum(heads[name] for name in sizes.heads)


def activation_elements(sizes: Sizes, batch: int, sequence_length: int, mode: str = "inference",
                        mlm_share: float = 1.0) -> int:
    """Elements of activations for `batch` sequences of `sequence_length` tokens.

    Per token and layer, a backward pass keeps about 12 hidden-wide tensors (the layer input, q/k/v, attention
    output, projections, residuals and LayerNorms) and 2 feed-forward-wide ones (before and after the activation);
    training's attention with dropout also keeps each head's scores and probabilities (2 x heads x T). Measured:
    all-MiniLM-L6-v2 at 512 tokens, 96 MB per point of integrated gradients; this gives 98 MB. Inference holds
    one layer's tensors at a time. An MLM head adds the vocabulary logits (and their gradient) at `mlm_share` of
    the tokens (pretraining decodes only the masked ones).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}.")
    C, F, L, T = sizes.hidden_size, sizes.intermediate_size, sizes.num_hidden_layers, sequence_length
    nh, V = sizes.num_attention_heads, sizes.vocab_size
    copies = {"inference": 1, "gradients": 2, "training": 3}[mode]  # logits, their gradient, the softmax
    if mode == "inference":
        per_token = 6 * C + 2 * F + nh * T
    else:
        per_token = L * (12 * C + 2 * F + (2 * nh * T if mode == "training" else 0)) + 4 * C
    if "mlm" in sizes.heads:
        per_token += math.ceil(copies * (V + 3 * C) * mlm_share)
    if "token_classifier" in sizes.heads or "classifier" in sizes.heads:
        per_token += copies * sizes.num_labels
    return batch * T * per_token


@dataclasses.dataclass(frozen=True)
class Footprint:
    """One estimate: parameters, their bytes, and the bytes of activations (and AdamW state when training)."""

    parameters: int
    parameter_bytes: int
    activation_bytes: int
    mode: str
    dtype: str

    @property
    def total_bytes(self) -> int:
        """Everything at once: weights (x4 for training: gradients and AdamW's two moments) plus activations."""
        return self.parameter_bytes * (OPTIMIZER_FACTOR if self.mode == "training" else 1) + self.activation_bytes


def estimate(config: Any, batch: int = 0, sequence_length: int = 0, mode: str = "inference",
             dtype_bytes: int = 4, dtype: str = "float32", heads: Iterable[str] = (),
             pooler: bool | None = None, mlm_share: float = 1.0) -> Footprint:
    """The memory of a model of `config` (a BERTConfig or Sizes) with `heads`, and of a batch through it."""
    sizes = config if isinstance(config, Sizes) else Sizes.of(config, heads, pooler)
    parameters = parameter_count(sizes)
    buffers = 0 if sizes.absolute_positions else sizes.max_position_embeddings * sizes.hidden_size
    activations = activation_elements(sizes, batch, sequence_length, mode, mlm_share) if batch and sequence_length \
        else 0
    return Footprint(parameters, (parameters + buffers) * dtype_bytes, activations * dtype_bytes, mode, dtype)


def dominant(cost: Callable[[Mapping[str, int]], int], values: Mapping[str, int],
             reference: Mapping[str, int]) -> str:
    """The key whose value, put back to its reference (where above it), saves the most of `cost(values)`; where
    none is above its reference, the key whose halving saves the most."""
    whole = cost(values)
    saved = {key: whole - cost({**values, key: min(values[key], reference[key])}) for key in reference}
    if max(saved.values()) <= 0:
        saved = {key: whole - cost({**values, key: max(1, values[key] // 2)}) for key in reference}
    return max(saved, key=saved.__getitem__)


# the memory this process may use ------------------------------------------------------------------------------
def _read_int(path: str) -> int | None:
    try:
        with open(path) as file:
            text = file.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _status_kb(path: str, field: str) -> int | None:
    """A `Field:  123 kB` line of /proc/meminfo or /proc/self/status, in bytes."""
    try:
        with open(path) as file:
            for line in file:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _system_available() -> int | None:
    found = _status_kb("/proc/meminfo", "MemAvailable")
    if found is not None:
        return found
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _cgroup_room() -> int | None:
    """What a container's memory limit (cgroup v2, else v1) leaves."""
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit = _read_int(limit_file)
        if limit is not None:
            return limit - (_read_int(usage_file) or 0)
    return None


def _address_space_room() -> int | None:
    """What RLIMIT_AS (ulimit -v) leaves of this process' address space."""
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == resource.RLIM_INFINITY:
        return None
    return limit - (_status_kb("/proc/self/status", "VmSize") or 0)


def available_memory() -> int | None:
    """Bytes this process can still allocate (the least of the machine's, its cgroup's and its ulimit's), or None
    where none of them can be read."""
    known = [room for room in (_system_available(), _cgroup_room(), _address_space_room()) if room is not None]
    return max(0, min(known)) if known else None


@dataclasses.dataclass(frozen=True)
class MemoryLimit:
    """The bytes an estimate must fit in (None: nothing is checked) and where that number comes from."""

    bytes: int | None
    source: str


def memory_limit() -> MemoryLimit:
    """BERTVIZ_LAB_MEMORY_LIMIT when set ("off": no limit), else what this process can still allocate."""
    given = os.environ.get(MEMORY_LIMIT_VARIABLE, "").strip()
    if given.lower() in ("off", "none"):
        return MemoryLimit(None, f"{MEMORY_LIMIT_VARIABLE}={given}")
    if given:
        size = parse_size(given, MEMORY_LIMIT_VARIABLE)
        return MemoryLimit(size, f"{MEMORY_LIMIT_VARIABLE}={clip(given)} allows {format_bytes(size)}")
    available = available_memory()
    return MemoryLimit(available, f"this machine has {format_bytes(available or 0)} available")


def check_fits(needed: int, what: str, culprit: Callable[[], tuple[str, Any]],
               error: type[Exception] = ValueError) -> None:
    """Raise `error` ("name=value needs about 28 TB of ...; this machine has 23 GB available; set ...") when `needed`
    bytes exceed the memory limit; `culprit()` gives the name and value to blame, asked only then. A bad
    BERTVIZ_LAB_MEMORY_LIMIT is an `error` too."""
    try:
        limit = memory_limit()
    except ValueError as bad:
        raise error(str(bad)) from None
    if limit.bytes is None or needed <= limit.bytes:
        return
    name, value = culprit()
    raise error(f"{name}={shown(value)} needs about {format_bytes(needed)} {what}; {limit.source}; {OVERRIDE_HINT}.")


def check_model(config: Any, model_class: type, dtype: Any) -> None:
    """Refuse to build `model_class(config)` with parameters of `dtype` (a torch.dtype) when they cannot fit in
    memory: a ValueError naming the config field the size rests on, before any tensor is made."""
    sizes = Sizes.of(config, heads_of(model_class), getattr(model_class, "add_pooling_layer", None))

    def weights(values: Mapping[str, int]) -> int:
        changed: dict[str, Any] = dict(values)  # integer fields only, by name
        return estimate(dataclasses.replace(sizes, **changed), dtype_bytes=dtype.itemsize).parameter_bytes

    def culprit() -> tuple[str, int]:
        field = dominant(weights, sizes.values(), BERT_BASE)
        return f"BERTConfig.{field}", getattr(sizes, field)

    check_fits(weights({}), f"of parameters ({str(dtype).removeprefix('torch.')})", culprit)
