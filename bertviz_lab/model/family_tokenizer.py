"""Tokenizers of the BERT family from their files: `load_tokenizer(folder_or_repo)` picks the class the files call for.

BERT, DistilBERT and ELECTRA ship a WordPiece vocabulary: BERTTokenizerFast reads them. RoBERTa (byte-level BPE) and
XLM-RoBERTa (SentencePiece Unigram) ship a `tokenizer.json` whose pipeline is the whole tokenizer: TokenizerFast runs
it as written through the `tokenizers` library, with the special tokens tokenizer_config.json names (`<s>`, `</s>`,
`<pad>`, `<unk>`, `<mask>`), and offers the same methods as BERTTokenizerFast, so every panel takes either.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from bertviz_lab.model.families import ROBERTA
from bertviz_lab.model.tokenizer import (
    _SPECIAL_ATTRS,
    _UNSET_MAX_LENGTH,
    CONFIG_FILE,
    SPECIAL_TOKENS_FILE,
    TOKENIZER_FILE,
    VOCAB_FILE,
    BERTTokenizerFast,
    Ids,
    PathLike,
    _as_id_list,
    _missing_special_token,
    _read_backend,
    _tokenizer_source,
)
from bertviz_lab.model.weights import HubOptions
from bertviz_lab.util.files import named, present, read_json_object

__all__ = ["TokenizerFast", "load_tokenizer"]


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or a serialized AddedToken."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


class TokenizerFast(BERTTokenizerFast):
    """A tokenizer.json pipeline run as written (byte-level BPE, SentencePiece Unigram, ...), with BERTTokenizerFast's
    methods; the special tokens default to RoBERTa's."""

    def __init__(self, tokenizer_file: PathLike, model_max_length: int = 512, **special_tokens: str) -> None:
        path = Path(tokenizer_file)
        backend = _read_backend(path)
        backend.no_padding()
        backend.no_truncation()
        specials = {name: special_tokens.get(name) or ROBERTA.special_tokens[name] for name in _SPECIAL_ATTRS}
        ids: dict[str, int] = {}
        for name, token in specials.items():
            token_id = backend.token_to_id(token)
            if token_id is None:
                raise _missing_special_token(named(path), name, token)
            ids[name] = token_id
        if not isinstance(model_max_length, int) or model_max_length < 1:
            raise ValueError(f"model_max_length must be a positive int, got {model_max_length!r}")
        self._tokenizer: Tokenizer = backend
        self._lock = threading.Lock()
        for name, token in specials.items():
            setattr(self, name, token)
        self.do_lower_case, self.strip_accents, self.tokenize_chinese_chars = False, None, False
        self.model_max_length = model_max_length
        self._ids = ids
        self._decoder = None  # decode() runs the tokenizer.json's own decoder

    @classmethod
    def from_pretrained(cls, path: PathLike, *, revision: str | None = None, cache_dir: PathLike | None = None,
                        local_files_only: bool = False, token: str | bool | None = None,
                        **overrides: Any) -> "TokenizerFast":
        """A folder with tokenizer.json (and tokenizer_config.json naming its special tokens), or a Hub repo id."""
        folder = _tokenizer_source(path, HubOptions(revision, cache_dir, local_files_only, token))
        file = folder if not folder.is_dir() else folder / TOKENIZER_FILE
        if not present(file):
            raise FileNotFoundError(f"no {TOKENIZER_FILE} in {named(folder)}")
        settings = _settings(file.parent)
        return cls(file, **{**settings, **overrides})

    def save_pretrained(self, save_directory: PathLike) -> tuple[str, ...]:
        """Write tokenizer.json and tokenizer_config.json (transformers' AutoTokenizer loads them)."""
        out = Path(save_directory)
        if out.exists() and not out.is_dir():
            raise ValueError(f"save_pretrained needs a directory, but {str(out)!r} is a file")
        out.mkdir(parents=True, exist_ok=True)
        tokenizer_path, config_path = out / TOKENIZER_FILE, out / CONFIG_FILE
        self._tokenizer.save(str(tokenizer_path))
        config = {"model_max_length": self.model_max_length, "bos_token": self.cls_token,
                  "eos_token": self.sep_token, **{name: getattr(self, name) for name in _SPECIAL_ATTRS}}
        config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        return str(tokenizer_path), str(config_path)

    def decode(self, ids: Ids, skip_special_tokens: bool = True, clean_up_tokenization_spaces: bool = True) -> str:
        """Text from ids through the file's own decoder (byte-level, Metaspace, ...)."""
        return self._tokenizer.decode(_as_id_list(ids), skip_special_tokens=skip_special_tokens)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size}, model_max_length={self.model_max_length})"


def _settings(folder: Path) -> dict[str, Any]:
    """Special tokens and model_max_length from tokenizer_config.json and special_tokens_map.json, where present."""
    config = read_json_object(folder / CONFIG_FILE) if present(folder / CONFIG_FILE) else {}
    specials = read_json_object(folder / SPECIAL_TOKENS_FILE) if present(folder / SPECIAL_TOKENS_FILE) else {}
    settings: dict[str, Any] = {}
    for name in _SPECIAL_ATTRS:
        token = _token_text(config.get(name, specials.get(name)))
        if token is not None:
            settings[name] = token
    limit = config.get("model_max_length")
    if isinstance(limit, float) and limit.is_integer():
        limit = int(limit)
    if isinstance(limit, int) and not isinstance(limit, bool) and 1 <= limit < _UNSET_MAX_LENGTH:
        settings["model_max_length"] = limit
    return settings


def _is_wordpiece(folder: Path) -> bool:
    """True when the folder holds a BERT WordPiece tokenizer (a vocab.txt alone, or a WordPiece tokenizer.json)."""
    if not present(folder / TOKENIZER_FILE):
        return present(folder / VOCAB_FILE)
    try:
        model = read_json_object(folder / TOKENIZER_FILE).get("model")
    except ValueError:  # not JSON: BERTTokenizerFast names the file and what is wrong with it
        return True
    return isinstance(model, dict) and model.get("type") in ("WordPiece", None)


def load_tokenizer(path: PathLike, *, revision: str | None = None, cache_dir: PathLike | None = None,
                   local_files_only: bool = False, token: str | bool | None = None) -> BERTTokenizerFast:
    """The tokenizer a folder or Hub repo ships: BERTTokenizerFast for WordPiece, else TokenizerFast."""
    folder = _tokenizer_source(path, HubOptions(revision, cache_dir, local_files_only, token))
    folder = folder if folder.is_dir() else folder.parent
    if _is_wordpiece(folder):
        return BERTTokenizerFast.from_pretrained(path, revision=revision, cache_dir=cache_dir,
                                                 local_files_only=local_files_only, token=token)
    return TokenizerFast.from_pretrained(folder)
