"""BERTTokenizerFast: a WordPiece tokenizer over the `tokenizers` library that turns text into BERT inputs.

The pipeline is the one BERT was trained with: BertNormalizer (clean, lowercase, strip accents, space out CJK)
-> BertPreTokenizer (split on whitespace and punctuation) -> WordPiece (greedy longest match, `##` continuations)
-> TemplateProcessing (`[CLS] A [SEP]` with type ids 0, `[CLS] A [SEP] B [SEP]` with type ids 0 then 1).
Batches go through the Rust `encode_batch`, and tensors are built with one `torch.tensor` call per field.
"""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from typing import Any, Iterable, Sequence, Union

import numpy as np
import torch
from tokenizers import AddedToken, Encoding, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece
from tokenizers.trainers import WordPieceTrainer

from bertviz_lab.device import select_device
from bertviz_lab.model.weights import HubOptions, hub_files, is_hub_name
from bertviz_lab.util.files import (
    as_path,
    first_line,
    named,
    present,
    read_json_object,
    read_lines,
    read_text,
    shown,
)

__all__ = ["BERTTokenizerFast", "BatchEncoding", "load_vocab"]

VOCAB_FILE = "vocab.txt"
TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"

PathLike = Union[str, os.PathLike[str]]
TextInput = Union[str, tuple[str, str]]
Ids = Union[int, Sequence[int], torch.Tensor]

# User-facing strategy names -> the names the `tokenizers` library uses (None = off).
_PADDING: dict[Any, str | None] = {
    False: None,
    "do_not_pad": None,
    True: "longest",
    "longest": "longest",
    "max_length": "max_length",
}
_TRUNCATION: dict[Any, str | None] = {
    False: None,
    "do_not_truncate": None,
    True: "longest_first",
    "longest_first": "longest_first",
    "only_first": "only_first",
    "only_second": "only_second",
}
# tokenizer_config.json keys that map onto constructor arguments.
_CONFIG_KEYS = (
    "do_lower_case",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
    "strip_accents",
    "tokenize_chinese_chars",
    "model_max_length",
)
_SPECIAL_ATTRS = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")  # Hugging Face's order
_SPECIAL_DEFAULTS = ("[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]")
# transformers writes int(1e30) as model_max_length when a checkpoint sets none: treat it as unset, not as a limit.
_UNSET_MAX_LENGTH = 10**12
# What a tokenizer_config.json without these keys means (transformers' BertTokenizer defaults).
_NORMALIZER_DEFAULTS: dict[str, Any] = {"do_lower_case": True, "strip_accents": None, "tokenize_chinese_chars": True}


def load_vocab(vocab_file: PathLike) -> dict[str, int]:
    """Read a BERT vocab.txt (one token per line, id = line number), as transformers does; only a regular UTF-8
    file of bounded size is read."""
    return {token: i for i, token in enumerate(read_lines(Path(vocab_file)))}


def clean_up_tokenization(text: str) -> str:
    """Remove the spaces WordPiece decoding leaves before punctuation and contractions (Hugging Face's rules)."""
    return (
        text.replace(" .", ".")
        .replace(" ?", "?")
        .replace(" !", "!")
        .replace(" ,", ",")
        .replace(" ' ", "'")
        .replace(" n't", "n't")
        .replace(" 'm", "'m")
        .replace(" 's", "'s")
        .replace(" 've", "'ve")
        .replace(" 're", "'re")
    )


class BatchEncoding(dict[str, Any]):
    """The tokenizer's output: a plain dict of lists or tensors, plus .to(device) so `model(**enc.to(dev))` works."""

    def to(self, device: str | torch.device) -> "BatchEncoding":
        """Move every tensor value to `device` (in place) and return self."""
        dev = select_device(device)
        for key, value in self.items():
            if isinstance(value, torch.Tensor):
                self[key] = value.to(dev)
        return self


def _existing_file(path: PathLike, what: str) -> Path:
    """Fail early with the path in the message instead of a Rust error deep in `tokenizers`."""
    p = as_path(path, f"a path to the {what}")
    if not present(p):
        raise FileNotFoundError(f"{what} not found: {named(p)} does not exist")
    return p


def _read_backend(path: Path) -> Tokenizer:
    """A tokenizer.json through `tokenizers`, whose bare Exception (naming no file) becomes a ValueError naming it."""
    text = read_text(path)
    try:
        return Tokenizer.from_str(text)
    except Exception as error:  # the Rust library raises a bare Exception for every broken file
        raise ValueError(f"{named(path)} is not a tokenizer.json the tokenizers library can read: "
                         f"{first_line(error)}") from None


def _check_choice(value: Any, table: dict[Any, str | None], name: str) -> str | None:
    """Map a padding/truncation argument to its strategy, or name the bad value."""
    if isinstance(value, (bool, str)) and value in table:
        return table[value]
    allowed = ", ".join(repr(k) for k in table)
    raise ValueError(f"{name}={value!r} is not a known {name} strategy; expected one of {allowed}")


def _as_id_list(ids: Ids) -> list[int]:
    """Accept an int, a sequence of ints, or a 0-D/1-D tensor, and return a list of Python ints."""
    if isinstance(ids, torch.Tensor):
        if ids.dim() > 1:
            raise ValueError(f"expected a 1-D tensor of token ids, got shape {tuple(ids.shape)}; "
                             "use batch_decode for 2-D")
        ids = ids.tolist()
    if isinstance(ids, int):
        return [ids]
    return [int(i) for i in ids]


def _is_positive_int(value: Any) -> bool:
    """True for an int of at least 1; bools are refused, though Python counts them as ints."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _continuing_characters(backend: Tokenizer, texts: Sequence[str]) -> list[str]:
    """"##c" for every character c of the normalized texts that can continue a word (the pre-tokenizer keeps it
    joined to a letter before it: not whitespace, punctuation or a CJK character), in code-point order."""
    characters: set[str] = set()
    for text in texts:
        characters.update(backend.normalizer.normalize_str(text))
    joined = [c for c in sorted(characters)
              if [word for word, _ in backend.pre_tokenizer.pre_tokenize_str("a" + c)] == ["a" + c]]
    return ["##" + c for c in joined]


def _special_tokens(kwargs: dict[str, Any]) -> dict[str, str]:
    """Each special token's name -> its text, from keyword arguments, BERT's own where one is not given."""
    return {name: kwargs.get(name, default) for name, default in zip(_SPECIAL_ATTRS, _SPECIAL_DEFAULTS)}


def _missing_special_token(source: str, name: str, token: str) -> ValueError:
    """The error for a special token the vocabulary lacks, naming the argument that would fix it."""
    return ValueError(f"the vocabulary {source} has no {name} {token!r}; add it or pass {name}= with a token it has")


def _tokenizer_source(path: PathLike, hub: HubOptions) -> Path:
    """A local tokenizer folder or file, or the cached snapshot of a Hub repo id with its tokenizer files."""
    if is_hub_name(path):
        return hub_files(str(path), (TOKENIZER_FILE, VOCAB_FILE), hub, optional=(CONFIG_FILE, SPECIAL_TOKENS_FILE),
                         what="the tokenizer")
    p = as_path(path, f"a tokenizer folder, a {TOKENIZER_FILE} or {VOCAB_FILE}, or a Hub repo id")
    if not present(p) or not p.exists():
        raise FileNotFoundError(
            f"no tokenizer at {named(p)}: expected a local folder with {TOKENIZER_FILE} or {VOCAB_FILE}, "
            "or a Hugging Face Hub repo id such as 'bert-base-uncased'"
        )
    hub.refuse_revision(p)
    return p


def _read_settings(folder: Path) -> dict[str, Any] | None:
    """Constructor arguments from tokenizer_config.json (specials also from special_tokens_map.json); None without.

    Every value is checked here, so a bad one is an error naming the file and the key."""
    config_path = folder / CONFIG_FILE
    if not present(config_path):
        return None
    config = read_json_object(config_path)
    specials_path = folder / SPECIAL_TOKENS_FILE
    specials = read_json_object(specials_path) if present(specials_path) else {}
    settings: dict[str, Any] = {}
    for key in _CONFIG_KEYS:
        source = config_path if key in config or key not in specials else specials_path
        value = config.get(key, specials.get(key) if key in _SPECIAL_ATTRS else None)
        if isinstance(value, dict) and "content" in value:  # a serialized AddedToken
            value = value["content"]
        if value is not None or (key == "strip_accents" and key in config):  # null elsewhere: the default
            settings[key] = _checked_setting(source, key, value)
    limit = settings.pop("model_max_length", None)
    if limit is not None and limit < _UNSET_MAX_LENGTH:
        settings["model_max_length"] = limit
    return settings


def _checked_setting(file: Path, key: str, value: Any) -> Any:
    """A tokenizer_config.json value as the constructor takes it, or a ValueError naming the file, key and value."""
    if key == "model_max_length":
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)  # 1e30 written as a float: the same "no limit" as int(1e30)
        ok, expected = _is_positive_int(value), "a positive integer"
    elif key in _SPECIAL_ATTRS:
        ok, expected = isinstance(value, str) and bool(value), "a token (a non-empty string)"
    elif key == "strip_accents":
        ok, expected = value is None or isinstance(value, bool), "true, false or null"
    else:
        ok, expected = isinstance(value, bool), "true or false"
    if not ok:
        raise ValueError(f"{named(file)}: {key} must be {expected}, got {type(value).__name__} {shown(value)}")
    return value


class BERTTokenizerFast:
    """Fast BERT WordPiece tokenizer with a Hugging Face-like API, built on the `tokenizers` library."""

    def __init__(
        self,
        vocab_file: PathLike | None = None,
        tokenizer_file: PathLike | None = None,
        do_lower_case: bool = True,
        unk_token: str = "[UNK]",
        sep_token: str = "[SEP]",
        pad_token: str = "[PAD]",
        cls_token: str = "[CLS]",
        mask_token: str = "[MASK]",
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        model_max_length: int = 512,
    ) -> None:
        specials = dict(unk_token=unk_token, sep_token=sep_token, pad_token=pad_token, cls_token=cls_token,
                        mask_token=mask_token)
        if tokenizer_file is not None:
            path = _existing_file(tokenizer_file, "tokenizer file")
            backend = _read_backend(path)
            source = named(path)
        elif vocab_file is not None:
            path = _existing_file(vocab_file, "vocab file")
            vocab = load_vocab(path)
            backend = self._build_backend(vocab, do_lower_case, strip_accents, tokenize_chinese_chars, specials,
                                          named(path))
            source = named(path)
        else:
            raise ValueError(
                "BERTTokenizerFast needs vocab_file= (a vocab.txt) or tokenizer_file= (a tokenizer.json), got neither; "
                "use BERTTokenizerFast.from_pretrained(folder) or BERTTokenizerFast.train_from_texts(texts) instead"
            )
        self._setup(backend, specials, do_lower_case, strip_accents, tokenize_chinese_chars, model_max_length, source)

    # ------------------------------------------------------------------ construction

    @staticmethod
    def _build_backend(
        vocab: dict[str, int] | None,
        do_lower_case: bool,
        strip_accents: bool | None,
        tokenize_chinese_chars: bool,
        specials: dict[str, str],
        source: str,
    ) -> Tokenizer:
        """Assemble the BERT pipeline around a vocabulary (None = an empty WordPiece model to train)."""
        if vocab is not None:
            for name, token in specials.items():
                if token not in vocab:
                    raise _missing_special_token(source, name, token)
            backend = Tokenizer(WordPiece(vocab, unk_token=specials["unk_token"], max_input_chars_per_word=100))
        else:
            backend = Tokenizer(WordPiece(unk_token=specials["unk_token"], max_input_chars_per_word=100))
        backend.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=tokenize_chinese_chars, strip_accents=strip_accents,
            lowercase=do_lower_case,
        )
        backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        backend.decoder = decoders.WordPiece(prefix="##", cleanup=True)  # what transformers writes, for interop
        return backend

    def _setup(
        self,
        backend: Tokenizer,
        specials: dict[str, str],
        do_lower_case: bool,
        strip_accents: bool | None,
        tokenize_chinese_chars: bool,
        model_max_length: int,
        source: str,
    ) -> None:
        """Validate special tokens, register them, and drop any fixed padding/truncation a tokenizer.json carries."""
        backend.no_padding()  # e.g. the MiniLM tokenizer.json pads and truncates everything to 128
        backend.no_truncation()
        ids: dict[str, int] = {}
        for name, token in specials.items():
            token_id = backend.token_to_id(token)
            if token_id is None:
                raise _missing_special_token(source, name, token)
            ids[name] = token_id  # registering a token of the vocabulary below keeps its id
        # Registered as special added tokens: "[MASK]" typed in text stays one token, and decode can skip them.
        backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials.values()])
        if backend.post_processor is None:
            cls, sep = specials["cls_token"], specials["sep_token"]
            backend.post_processor = processors.TemplateProcessing(
                single=f"{cls}:0 $A:0 {sep}:0",
                pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
                special_tokens=[(cls, backend.token_to_id(cls)), (sep, backend.token_to_id(sep))],
            )
        norm = backend.normalizer
        if isinstance(norm, normalizers.BertNormalizer):  # the file, not the arguments, decides how text is normalized
            do_lower_case, strip_accents = norm.lowercase, norm.strip_accents
            tokenize_chinese_chars = norm.handle_chinese_chars
        if not isinstance(model_max_length, int) or model_max_length < 1:
            raise ValueError(f"model_max_length must be a positive int, got {model_max_length!r}")

        self._tokenizer = backend
        self._lock = threading.Lock()  # padding/truncation are set on the shared backend for the length of one call
        self.unk_token, self.sep_token = specials["unk_token"], specials["sep_token"]
        self.pad_token, self.cls_token = specials["pad_token"], specials["cls_token"]
        self.mask_token = specials["mask_token"]
        self.do_lower_case = bool(do_lower_case)
        self.strip_accents = strip_accents
        self.tokenize_chinese_chars = bool(tokenize_chinese_chars)
        self.model_max_length = model_max_length
        prefix = getattr(backend.model, "continuing_subword_prefix", "##")
        # cleanup is applied by decode() when asked; None in TokenizerFast, whose decode() runs its own pipeline's
        self._decoder: decoders.WordPiece | None = decoders.WordPiece(prefix=prefix, cleanup=False)
        self._ids = ids

    @classmethod
    def _from_backend(cls, backend: Tokenizer, **kwargs: Any) -> "BERTTokenizerFast":
        """Wrap an already-built `tokenizers.Tokenizer` (used by train_from_texts)."""
        self = cls.__new__(cls)
        specials = _special_tokens(kwargs)
        self._setup(
            backend,
            specials,
            kwargs.get("do_lower_case", True),
            kwargs.get("strip_accents"),
            kwargs.get("tokenize_chinese_chars", True),
            kwargs.get("model_max_length", 512),
            "trained tokenizer",
        )
        return self

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the lock (DataLoader workers with spawn need this)."""
        state = self.__dict__.copy()
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Recreate the lock after unpickling."""
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ save / load / train

    @classmethod
    def from_pretrained(
        cls,
        path: PathLike,
        *,
        revision: str | None = None,
        cache_dir: PathLike | None = None,
        local_files_only: bool = False,
        token: str | bool | None = None,
        **overrides: Any,
    ) -> "BERTTokenizerFast":
        """Load a folder (save_pretrained's, a Hugging Face BERT's) or a Hub repo id, set up by its tokenizer_config."""
        p = _tokenizer_source(path, HubOptions(revision, cache_dir, local_files_only, token))
        if not p.is_dir():  # a tokenizer.json or vocab.txt given directly
            if p.suffix == ".json":
                return cls(tokenizer_file=p, **overrides)
            return cls(vocab_file=p, **overrides)
        settings = _read_settings(p)
        kwargs = {**(settings or {}), **overrides}
        if present(p / TOKENIZER_FILE):
            tokenizer = cls(tokenizer_file=p / TOKENIZER_FILE, **kwargs)
            if settings is not None or any(key in overrides for key in _NORMALIZER_DEFAULTS):
                # transformers builds the normalizer from the config (and BertTokenizer's defaults), not the file
                tokenizer._normalize_as(**{key: kwargs.get(key, value) for key, value in _NORMALIZER_DEFAULTS.items()})
            return tokenizer
        if present(p / VOCAB_FILE):
            return cls(vocab_file=p / VOCAB_FILE, **kwargs)
        raise FileNotFoundError(f"no {TOKENIZER_FILE} or {VOCAB_FILE} in {named(p)}")

    def _normalize_as(self, do_lower_case: bool, strip_accents: bool | None, tokenize_chinese_chars: bool) -> None:
        """Replace the backend's normalizer by BERT's with these settings (a cased model stays cased)."""
        self._tokenizer.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=tokenize_chinese_chars, strip_accents=strip_accents,
            lowercase=do_lower_case,
        )
        self.do_lower_case, self.strip_accents = bool(do_lower_case), strip_accents
        self.tokenize_chinese_chars = bool(tokenize_chinese_chars)

    def save_pretrained(self, save_directory: PathLike) -> tuple[str, ...]:
        """Write vocab.txt, tokenizer.json and tokenizer_config.json (transformers loads them too); return the paths."""
        out = Path(save_directory)
        if out.exists() and not out.is_dir():
            raise ValueError(f"save_pretrained needs a directory, but {str(out)!r} is a file")
        out.mkdir(parents=True, exist_ok=True)
        vocab = self._tokenizer.get_vocab(with_added_tokens=False)
        vocab_path = out / VOCAB_FILE
        with open(vocab_path, "w", encoding="utf-8") as f:
            for token, _ in sorted(vocab.items(), key=lambda kv: kv[1]):
                f.write(token + "\n")
        tokenizer_path = out / TOKENIZER_FILE
        self._tokenizer.save(str(tokenizer_path))
        config = {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": self.do_lower_case,
            "strip_accents": self.strip_accents,
            "tokenize_chinese_chars": self.tokenize_chinese_chars,
            "model_max_length": self.model_max_length,
            "clean_up_tokenization_spaces": True,
            **{name: getattr(self, name) for name in _SPECIAL_ATTRS},
        }
        config_path = out / CONFIG_FILE
        config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        return str(vocab_path), str(tokenizer_path), str(config_path)

    @classmethod
    def train_from_texts(
        cls,
        texts: Iterable[str],
        vocab_size: int = 8000,
        min_frequency: int = 2,
        do_lower_case: bool = True,
        **kwargs: Any,
    ) -> "BERTTokenizerFast":
        """Learn a WordPiece vocabulary from texts; [PAD]=0, [UNK], [CLS], [SEP], [MASK] get ids 0-4.

        The same texts give the same vocabulary in every process: `tokenizers` numbers the word-continuing
        characters ("##e") in the order of its own hash map, which is seeded per process, and breaks ties between
        equally frequent merges by those numbers; here they are numbered first, in code-point order (ids 5 on),
        so every tie breaks one way. The texts are read twice for it (an iterator is first kept in a list).

        Extra keyword arguments: the special token names, strip_accents, tokenize_chinese_chars, model_max_length,
        and the trainer's limit_alphabet, initial_alphabet, show_progress.
        """
        if isinstance(texts, str):
            raise TypeError("train_from_texts expects an iterable of texts, got a single str; wrap it in a list")
        texts = texts if isinstance(texts, Sequence) else list(texts)
        trainer_keys = {"limit_alphabet", "initial_alphabet", "show_progress"}
        known = set(_SPECIAL_ATTRS) | {"strip_accents", "tokenize_chinese_chars", "model_max_length"} | trainer_keys
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TypeError(f"train_from_texts got unexpected keyword arguments {unknown}; "
                            f"expected some of {sorted(known)}")
        specials = _special_tokens(kwargs)
        ordered = [specials[name] for name in ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token")]
        if not isinstance(vocab_size, int) or vocab_size <= len(ordered):
            raise ValueError(f"vocab_size must be an int larger than the {len(ordered)} special tokens, "
                             f"got {vocab_size!r}")
        backend = cls._build_backend(
            None, do_lower_case, kwargs.get("strip_accents"), kwargs.get("tokenize_chinese_chars", True), specials,
            "training",
        )
        trainer_kwargs = {k: kwargs[k] for k in ("limit_alphabet", "initial_alphabet") if k in kwargs}
        continuing = _continuing_characters(backend, texts)
        trainer = WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=ordered + continuing,  # numbered in this order, before anything the texts bring
            show_progress=kwargs.get("show_progress", False),
            continuing_subword_prefix="##",
            **trainer_kwargs,
        )
        backend.train_from_iterator(texts, trainer=trainer)
        vocab = backend.get_vocab(with_added_tokens=False)
        # the same pipeline around the vocabulary, where only the five specials are added tokens ("##e" is not one)
        backend = cls._build_backend(vocab, do_lower_case, kwargs.get("strip_accents"),
                                     kwargs.get("tokenize_chinese_chars", True), specials, "training")
        rest = {k: v for k, v in kwargs.items() if k not in trainer_keys}
        return cls._from_backend(backend, do_lower_case=do_lower_case, **rest)

    # ------------------------------------------------------------------ vocabulary

    @property
    def backend_tokenizer(self) -> Tokenizer:
        """The underlying `tokenizers.Tokenizer` (no padding or truncation set on it)."""
        return self._tokenizer

    @property
    def vocab_size(self) -> int:
        """Size of the WordPiece vocabulary (the model's embedding rows)."""
        return self._tokenizer.get_vocab_size(with_added_tokens=False)

    @property
    def vocab(self) -> dict[str, int]:
        """A fresh token -> id dict."""
        return self._tokenizer.get_vocab(with_added_tokens=True)

    def __len__(self) -> int:
        """Vocabulary size including added tokens."""
        return self._tokenizer.get_vocab_size(with_added_tokens=True)

    @property
    def pad_token_id(self) -> int:
        """Id of [PAD], used for padding and ignored by attention."""
        return self._ids["pad_token"]

    @property
    def cls_token_id(self) -> int:
        """Id of [CLS], the first token of every sequence."""
        return self._ids["cls_token"]

    @property
    def sep_token_id(self) -> int:
        """Id of [SEP], which ends each segment."""
        return self._ids["sep_token"]

    @property
    def mask_token_id(self) -> int:
        """Id of [MASK], what masked-LM inputs replace tokens with."""
        return self._ids["mask_token"]

    @property
    def unk_token_id(self) -> int:
        """Id of [UNK], for words WordPiece cannot spell."""
        return self._ids["unk_token"]

    @property
    def all_special_tokens(self) -> list[str]:
        """The special tokens, in Hugging Face's order (unk, sep, pad, cls, mask)."""
        return [getattr(self, name) for name in _SPECIAL_ATTRS]

    @property
    def all_special_ids(self) -> list[int]:
        """Ids of the special tokens, in the order of all_special_tokens."""
        return [self._ids[name] for name in _SPECIAL_ATTRS]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(vocab_size={self.vocab_size}, do_lower_case={self.do_lower_case}, "
            f"model_max_length={self.model_max_length})"
        )

    def tokenize(self, text: str) -> list[str]:
        """WordPiece tokens of `text`, without special tokens."""
        self._check_text(text, "text")
        return self._tokenizer.encode(text, add_special_tokens=False).tokens

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | list[int]:
        """Map token(s) to id(s); tokens outside the vocabulary map to [UNK]."""
        unk = self.unk_token_id
        if isinstance(tokens, str):
            tid = self._tokenizer.token_to_id(tokens)
            return unk if tid is None else tid
        out = []
        for t in tokens:
            tid = self._tokenizer.token_to_id(t)
            out.append(unk if tid is None else tid)
        return out

    def convert_ids_to_tokens(self, ids: Ids, skip_special_tokens: bool = False) -> str | list[str]:
        """Map id(s) to token string(s), optionally dropping special tokens."""
        single = isinstance(ids, int) or (isinstance(ids, torch.Tensor) and ids.dim() == 0)
        id_list = _as_id_list(ids)
        n = len(self)
        special = set(self.all_special_ids) if skip_special_tokens else ()
        tokens = []
        for i in id_list:
            if not 0 <= i < n:
                raise ValueError(f"token id {i} is outside the vocabulary (ids 0..{n - 1})")
            if i not in special:
                token = self._tokenizer.id_to_token(i)
                if token is None:  # a tokenizer.json whose vocabulary skips ids
                    raise ValueError(f"token id {i} has no token in the vocabulary")
                tokens.append(token)
        if single:
            return tokens[0] if tokens else ""
        return tokens

    # ------------------------------------------------------------------ encoding

    @staticmethod
    def _check_text(text: Any, name: str) -> None:
        """Raise a TypeError naming the argument when it is not a str."""
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str, got {type(text).__name__}")

    def _encode_batch(
        self,
        inputs: list[TextInput],
        add_special_tokens: bool,
        max_length: int | None,
        truncation: bool | str,
        padding: bool | str,
    ) -> list[Encoding]:
        """Encode many inputs in one Rust call, with padding/truncation set on the backend for this call only."""
        trunc = _check_choice(truncation, _TRUNCATION, "truncation")
        pad = _check_choice(padding, _PADDING, "padding")
        if max_length is not None and not _is_positive_int(max_length):
            raise ValueError(f"max_length must be a positive int or None, got {max_length!r}")
        limit = max_length if max_length is not None else self.model_max_length
        limit_name = "max_length" if max_length is not None else "model_max_length"
        if trunc is not None and add_special_tokens:
            counts = (self._tokenizer.num_special_tokens_to_add(isinstance(x, tuple)) for x in inputs)
            n_special = max(counts, default=0)
            if limit < n_special + 1:
                raise ValueError(f"{limit_name}={limit} leaves no room for text next to the {n_special} special tokens")
        with self._lock:
            try:
                if trunc is not None:
                    self._tokenizer.enable_truncation(limit, strategy=trunc)
                if pad is not None:
                    self._tokenizer.enable_padding(
                        pad_id=self.pad_token_id,
                        pad_type_id=0,
                        pad_token=self.pad_token,
                        length=limit if pad == "max_length" else None,
                    )
                encodings = self._tokenizer.encode_batch(inputs, add_special_tokens=add_special_tokens)
            except Exception as err:  # tokenizers raises bare Exceptions, e.g. only_second without a second text
                raise ValueError(f"tokenization failed with truncation={truncation!r}, "
                                 f"max_length={max_length!r}: {err}") from err
            finally:
                self._tokenizer.no_truncation()
                self._tokenizer.no_padding()
        if trunc is None:
            for i, enc in enumerate(encodings):
                if len(enc.ids) > limit:
                    n = sum(enc.attention_mask)  # the real length, in case padding stretched it
                    if n > limit:
                        where = "text is" if len(encodings) == 1 else f"text {i} of the batch is"
                        raise ValueError(f"{where} {n} tokens long, longer than {limit_name}={limit}; "
                                         "pass truncation=True")
        return encodings

    @staticmethod
    def _to_output(
        encodings: list[Encoding],
        return_tensors: str | None,
        return_special_tokens_mask: bool,
        return_offsets_mapping: bool,
        single: bool,
    ) -> BatchEncoding:
        """Collect fields from encodings into lists (single: flat) or (B, T) long tensors."""
        data: dict[str, Any] = {
            "input_ids": [e.ids for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
            "attention_mask": [e.attention_mask for e in encodings],
        }
        if return_special_tokens_mask:
            data["special_tokens_mask"] = [e.special_tokens_mask for e in encodings]
        if return_offsets_mapping:
            data["offsets"] = [e.offsets for e in encodings]
        if return_tensors == "pt":
            if not encodings:
                return BatchEncoding({k: torch.empty((0, 0), dtype=torch.long) for k in data})
            # one conversion per field; via numpy because torch.tensor(nested lists) is ~6x slower on big batches
            return BatchEncoding({k: torch.from_numpy(np.array(v, dtype=np.int64)) for k, v in data.items()})
        if single:
            return BatchEncoding({k: v[0] for k, v in data.items()})
        return BatchEncoding(data)

    @staticmethod
    def _check_return_tensors(return_tensors: Any) -> None:
        """Only lists (None) and PyTorch ("pt") are supported."""
        if return_tensors not in (None, "pt"):
            raise ValueError(f"return_tensors={return_tensors!r} is not supported; "
                             "expected None (lists) or 'pt' (torch tensors)")

    def encode(
        self,
        text_a: str,
        text_b: str | None = None,
        add_special_tokens: bool = True,
        max_length: int | None = None,
        truncation: bool | str = False,
        padding: bool | str = False,
    ) -> list[int]:
        """Token ids of one text or text pair (with [CLS]/[SEP] by default)."""
        self._check_text(text_a, "text_a")
        if text_b is not None:
            self._check_text(text_b, "text_b")
        item: TextInput = text_a if text_b is None else (text_a, text_b)
        return self._encode_batch([item], add_special_tokens, max_length, truncation, padding)[0].ids

    def encode_plus(
        self,
        text_a: str,
        text_b: str | None = None,
        add_special_tokens: bool = True,
        max_length: int | None = None,
        truncation: bool | str = False,
        padding: bool | str = False,
        return_tensors: str | None = None,
        return_special_tokens_mask: bool = True,
        return_offsets_mapping: bool = False,
    ) -> BatchEncoding:
        """Model inputs of one text or pair: ids, token types, attention and special-token masks (lists or (1, T))."""
        self._check_text(text_a, "text_a")
        if text_b is not None:
            self._check_text(text_b, "text_b")
        self._check_return_tensors(return_tensors)
        item: TextInput = text_a if text_b is None else (text_a, text_b)
        encodings = self._encode_batch([item], add_special_tokens, max_length, truncation, padding)
        return self._to_output(encodings, return_tensors, return_special_tokens_mask, return_offsets_mapping,
                               single=True)

    def batch_encode_plus(
        self,
        texts: Sequence[str],
        text_pairs: Sequence[str] | None = None,
        add_special_tokens: bool = True,
        max_length: int | None = None,
        truncation: bool | str = False,
        padding: bool | str = False,
        return_tensors: str | None = None,
        return_special_tokens_mask: bool = False,
        return_offsets_mapping: bool = False,
    ) -> BatchEncoding:
        """Model inputs for a batch; with return_tensors="pt", (B, T) long tensors padded to the longest at least."""
        if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
            raise TypeError(f"texts must be a list or tuple of str, got {type(texts).__name__}")
        for i, t in enumerate(texts):
            self._check_text(t, f"texts[{i}]")
        inputs: list[TextInput]
        if text_pairs is None:
            inputs = list(texts)
        else:
            if isinstance(text_pairs, str) or not isinstance(text_pairs, (list, tuple)):
                raise TypeError(f"text_pairs must be a list or tuple of str, got {type(text_pairs).__name__}")
            if len(text_pairs) != len(texts):
                raise ValueError(f"got {len(texts)} texts but {len(text_pairs)} text_pairs; "
                                 "they must pair up one to one")
            for i, t in enumerate(text_pairs):
                self._check_text(t, f"text_pairs[{i}]")
            inputs = list(zip(texts, text_pairs))
        self._check_return_tensors(return_tensors)
        if return_tensors == "pt" and _check_choice(padding, _PADDING, "padding") is None:
            padding = "longest"  # a (B, T) tensor needs equal lengths; attention_mask marks the padding
        encodings = self._encode_batch(inputs, add_special_tokens, max_length, truncation, padding)
        return self._to_output(encodings, return_tensors, return_special_tokens_mask, return_offsets_mapping,
                               single=False)

    def __call__(
        self,
        text_or_texts: str | Sequence[str],
        text_pair: str | Sequence[str] | None = None,
        add_special_tokens: bool = True,
        max_length: int | None = None,
        truncation: bool | str = False,
        padding: bool | str = False,
        return_tensors: str | None = None,
        return_special_tokens_mask: bool = False,
        return_offsets_mapping: bool = False,
    ) -> BatchEncoding:
        """Encode one text (like encode_plus) or a list of texts (like batch_encode_plus); `model(**tok(...))` works."""
        kwargs: dict[str, Any] = dict(
            add_special_tokens=add_special_tokens,
            max_length=max_length,
            truncation=truncation,
            padding=padding,
            return_tensors=return_tensors,
            return_special_tokens_mask=return_special_tokens_mask,
            return_offsets_mapping=return_offsets_mapping,
        )
        if isinstance(text_or_texts, str):
            if text_pair is not None and not isinstance(text_pair, str):
                raise TypeError(f"text_pair must be a str when the text is a str, got {type(text_pair).__name__}")
            return self.encode_plus(text_or_texts, text_pair, **kwargs)
        if isinstance(text_or_texts, (list, tuple)):
            return self.batch_encode_plus(text_or_texts, text_pair, **kwargs)
        raise TypeError(f"expected a str or a list of str, got {type(text_or_texts).__name__}")

    def encode_pretraining_inputs(
        self,
        text_a: str,
        text_b: str | None = None,
        max_length: int | None = None,
        return_tensors: str | None = "pt",
        device: str | torch.device | None = None,
        *,
        truncation: bool | str = False,
    ) -> BatchEncoding:
        """The *_from_text helpers' inputs: ids, token types, attention and special-token masks, (1, T) on `device`."""
        enc = self.encode_plus(
            text_a, text_b, max_length=max_length, truncation=truncation, return_tensors=return_tensors,
            return_special_tokens_mask=True,
        )
        return enc.to(device) if device is not None else enc

    # ------------------------------------------------------------------ decoding

    def decode(self, ids: Ids, skip_special_tokens: bool = True, clean_up_tokenization_spaces: bool = True) -> str:
        """Text from ids: join WordPieces, optionally drop special tokens and tidy spaces before punctuation."""
        tokens = self.convert_ids_to_tokens(_as_id_list(ids), skip_special_tokens=skip_special_tokens)
        assert self._decoder is not None  # set by every constructor whose decode() is this one
        text = self._decoder.decode(tokens)
        return clean_up_tokenization(text) if clean_up_tokenization_spaces else text

    def batch_decode(
        self,
        sequences: Sequence[Ids] | torch.Tensor,
        skip_special_tokens: bool = True,
        clean_up_tokenization_spaces: bool = True,
    ) -> list[str]:
        """decode() for each sequence of a batch (a list of id lists or a 2-D tensor)."""
        if isinstance(sequences, torch.Tensor):
            if sequences.dim() != 2:
                raise ValueError(f"batch_decode expects a 2-D tensor (batch, seq), got shape {tuple(sequences.shape)}")
            sequences = sequences.tolist()
        return [self.decode(s, skip_special_tokens, clean_up_tokenization_spaces) for s in sequences]
