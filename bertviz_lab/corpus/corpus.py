"""Corpus: a finished corpus folder read back: head statistics, per-text values, texts and tokens through DuckDB
over the Parquet shards, nearest contexts from the vector index, query-key maps from the stored queries and keys."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bertviz_lab.corpus import folder, neurons, vectors
from bertviz_lab.corpus import manifest as checks
from bertviz_lab.corpus.extra import require_corpus_extra
from bertviz_lab.corpus.statistics import STATISTICS

CONTEXT = 5  # tokens of context on each side of a nearest match or a neuron's maximum
# a text as one string: text_a, or text_a [SEP] text_b (SQL over `texts t`, our own text, no value in it)
WHOLE_TEXT = "case when t.text_b is null then t.text_a else t.text_a || ' [SEP] ' || t.text_b end"


def context(tokens: Any, position: int) -> tuple[str, str]:
    """(left, right): up to CONTEXT tokens of a text before and after its token `position`, each joined by spaces."""
    return (" ".join(tokens[max(0, position - CONTEXT):position]),
            " ".join(tokens[position + 1:position + 1 + CONTEXT]))


class Corpus:
    """A complete corpus folder (see bertviz_lab.corpus.folder); `Corpus.open(path)` reads one."""

    def __init__(self, path: Path, manifest: dict[str, Any], model: Any = None, tokenizer: Any = None) -> None:
        self.path = path
        self.manifest = manifest
        self._model, self._tokenizer = model, tokenizer
        self._con: Any = None
        # (text_ids, positions, tokens) of every stored token, in vector row order
        self._rows: tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any]] | None = None
        self._starts: dict[int, int] | None = None

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, model: Any = None, tokenizer: Any = None) -> "Corpus":
        """Read a corpus folder, which may come from anyone: its manifest and files are checked first (a ValueError
        of one line names the folder, file or field that is wrong), and nothing in it is run or followed (no SQL from
        its strings, no link, no file outside it, no model loaded by its name). `model` and `tokenizer` are needed
        only by nearest() on new text; a corpus of the packaged default model loads that one itself."""
        require_corpus_extra()
        path = Path(path)
        return cls(path, checks.read_manifest(path), model, tokenizer)

    # what it holds --------------------------------------------------------------------------------------------
    @property
    def num_texts(self) -> int:
        return int(self.manifest["num_texts"])

    @property
    def layers(self) -> list[int]:
        return list(self.manifest["layers"])

    @property
    def heads(self) -> list[int]:
        return list(self.manifest["heads"])

    @property
    def num_heads(self) -> int:
        return int(self.manifest["num_heads"])

    @property
    def model_name(self) -> str:
        return str(self.manifest["model_name"])

    @property
    def precision(self) -> str:
        """The precision the model ran in: "fp32", or "bf16" (statistics within 2e-3, entropy 1e-2 of fp32)."""
        return str(self.manifest.get("precision", "fp32"))

    @property
    def vector_layers(self) -> list[int]:
        return list(self.manifest["vector_layers"])

    @property
    def qk_heads(self) -> list[tuple[int, int]]:
        return [(int(layer), int(head)) for layer, head in self.manifest["qk_heads"]]

    @property
    def neuron_layers(self) -> list[int]:
        """The layers whose feed-forward neurons have their top texts kept (analyze(..., neurons=K)); [] for none."""
        return self.layers if self.manifest.get("neurons") else []

    @property
    def neurons_kept(self) -> int:
        """How many top texts each feed-forward neuron has (analyze's `neurons=`); 0 where none were kept."""
        return neurons.kept(self.manifest) if self.manifest.get("neurons") else 0

    def __repr__(self) -> str:
        return (f"Corpus({str(self.path)!r}: {self.num_texts} texts, layers {self.layers}, {len(self.heads)} heads, "
                f"model {self.model_name})")

    def _shard_dirs(self) -> list[Path]:
        return [self.path / folder.SHARDS / entry["name"] for entry in self.manifest["shards"]]

    # tables ---------------------------------------------------------------------------------------------------
    @property
    def connection(self) -> Any:
        """A DuckDB connection with the views head_stats, text_stats, texts and tokens over the Parquet files. It may
        open those files and nothing else: external access is off for every other path (no other file, no network,
        no extension) and its configuration is locked, so no query on it can change that."""
        if self._con is None:
            import duckdb

            con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
            try:
                con.execute("set allowed_paths = ?", [checks.data_files(self.path, self.manifest)])
                con.execute("set enable_external_access = false")
                con.execute("set lock_configuration = true")
                dirs = self._shard_dirs()
                for table in checks.TABLES:  # file names go in as values, never as SQL text
                    con.read_parquet([str(d / f"{table}.parquet") for d in dirs]).create_view(table)
                con.read_parquet(str(self.path / folder.HEAD_STATS)).create_view("head_stats")
                if self.neuron_layers:
                    con.read_parquet(str(self.path / neurons.TABLE)).create_view("neuron_maxima")
            except BaseException:
                con.close()
                raise
            self._con = con
        return self._con

    def sql(self, query: str, parameters: list[Any] | None = None) -> Any:
        """A pandas DataFrame of your DuckDB query over the tables head_stats, text_stats, texts and tokens. It runs
        on `connection`, which reads this folder's tables and no other file: `copy ... to`, `read_csv('/etc/...')`,
        `attach`-ing a file, extensions and the network are refused with DuckDB's permission error."""
        return self.connection.execute(query, parameters or []).df()

    def head_stats(self) -> Any:
        """Per (layer, head): the token-weighted means of STATISTICS over the whole corpus and its query count."""
        return self.sql("select * from head_stats order by layer, head")

    def top_texts(self, layer: int, head: int, stat: str, k: int = 10, largest: bool = True) -> Any:
        """The k texts where head (layer, head) has the largest (or smallest) mean of `stat`."""
        self._check_head(layer, head)
        if stat not in STATISTICS:
            raise ValueError(f"stat={stat!r} is not a statistic; expected one of {', '.join(STATISTICS)}.")
        _check_k(k)
        order = "desc" if largest else "asc"
        return self.sql(
            f"select s.text_id, {WHOLE_TEXT} as text, s.{stat} as value, s.queries from text_stats s "
            f"join texts t using (text_id) where s.layer = ? and s.head = ? order by value {order}, s.text_id limit ?",
            [layer, head, int(k)])

    def _check_head(self, layer: int, head: int) -> None:
        if layer not in self.layers:
            raise ValueError(f"layer {layer!r} is not in this corpus; it holds layers {self.layers}.")
        if head not in self.heads:
            raise ValueError(f"head {head!r} is not in this corpus; it holds heads {self.heads}.")

    def _check_text_id(self, text_id: Any) -> int:
        if isinstance(text_id, bool) or not isinstance(text_id, (int, np.integer)) or not 0 <= text_id < self.num_texts:
            raise ValueError(f"text id {text_id!r} is not in this corpus of {self.num_texts} texts "
                             f"(0-{self.num_texts - 1}).")
        return int(text_id)

    def text(self, text_id: int) -> tuple[str, str | None]:
        """(text_a, text_b or None) of one text."""
        row = self.connection.execute("select text_a, text_b from texts where text_id = ?",
                                      [self._check_text_id(text_id)]).fetchone()
        return row[0], row[1]

    def tokens(self, text_id: int) -> list[str]:
        """The tokens the model saw for one text, [CLS] ... [SEP]."""
        rows = self.connection.execute("select token from tokens where text_id = ? order by position",
                                       [self._check_text_id(text_id)]).fetchall()
        return [row[0] for row in rows]

    # vectors --------------------------------------------------------------------------------------------------
    def _token_rows(self) -> tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any]]:
        """(text_id, position, token) of every stored token, in the order of the vector files' rows."""
        if self._rows is None:
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.concat_tables([pq.read_table(d / "tokens.parquet") for d in self._shard_dirs()])
            self._rows = (table.column("text_id").to_numpy(), table.column("position").to_numpy(),
                          np.asarray(table.column("token").to_pylist(), dtype=object))
            starts = np.flatnonzero(self._rows[1] == 0)
            self._starts = dict(zip(self._rows[0][starts].tolist(), starts.tolist()))
        return self._rows

    def _row_of(self, text_id: int | np.integer, position: int) -> int:
        """The vector row of a stored token."""
        self._token_rows()
        assert self._starts is not None  # _token_rows() sets it with the rows
        text_id = self._check_text_id(text_id)
        start = self._starts[text_id]
        length = len(self.tokens(text_id))
        if isinstance(position, bool) or not isinstance(position, (int, np.integer)) or not 0 <= position < length:
            raise ValueError(f"position {position!r} is not in text {text_id}, which has {length} tokens.")
        return start + int(position)

    def vectors(self, layer: int) -> npt.NDArray[np.float32]:
        """(tokens, hidden) float32 hidden states stored at `layer`, in token row order (for brute-force checks)."""
        self._check_vector_layer(layer)
        return vectors.stacked(self._shard_dirs(), vectors.hidden_file(layer))

    def vector(self, text_id: int, position: int, layer: int) -> npt.NDArray[np.float32]:
        """(hidden,) float32: the stored hidden state of token `position` of text `text_id` at `layer`."""
        self._check_vector_layer(layer)
        return self._query_vector(int(text_id) if isinstance(text_id, np.integer) else text_id, position, layer)

    def _check_vector_layer(self, layer: int) -> None:
        if layer not in self.vector_layers:
            stored = f"layers {self.vector_layers}" if self.vector_layers else "none (analyze with vectors=('hidden',))"
            raise ValueError(f"layer {layer!r} has no stored hidden states; this corpus stores {stored}.")

    def _query_vector(self, text: Any, position: int, layer: int) -> npt.NDArray[np.float32]:
        """The hidden state at `layer` of token `position` of `text`: a stored one (text id) or a new one (str)."""
        if not isinstance(text, str):
            if not isinstance(text, (int, np.integer)) or isinstance(text, bool):
                raise TypeError(f"text must be a str or a text id (int), got {type(text).__name__}.")
            row = self._row_of(text, position)
            shard, offset = self._locate(row)
            stored: npt.NDArray[Any] = np.load(self._shard_dirs()[shard] / vectors.hidden_file(layer), mmap_mode="r")
            kept: npt.NDArray[Any] = stored[offset]  # (hidden,) float16
            return kept.astype(np.float32)
        model, tokenizer = self._model_and_tokenizer()
        from bertviz_lab.corpus.backbone import backbone_of

        backbone = backbone_of(model)
        enc = tokenizer(text, truncation=True, max_length=int(self.manifest["max_length"]), return_tensors="pt")
        length = enc["input_ids"].shape[1]
        if isinstance(position, bool) or not isinstance(position, (int, np.integer)) or not 0 <= position < length:
            raise ValueError(f"position {position!r} is not in the text, which has {length} tokens.")
        import torch

        from bertviz_lab.model.hook_points import run_with_cache

        device = next(backbone.parameters()).device
        with torch.inference_mode():
            _, cache = run_with_cache(backbone, input_ids=enc["input_ids"].to(device),
                                      token_type_ids=enc["token_type_ids"].to(device),
                                      attention_mask=enc["attention_mask"].to(device),
                                      names_filter=f"encoder.layer.{layer}.hidden", device="cpu")
        hidden = cache[f"encoder.layer.{layer}.hidden"][0, int(position)]
        return hidden.to(torch.float16).float().numpy()  # as the stored vectors are kept

    def _locate(self, row: int) -> tuple[int, int]:
        """(shard number, row inside it) of a global vector row."""
        ends = np.cumsum([entry["tokens"] for entry in self.manifest["shards"]])
        shard = int(np.searchsorted(ends, row, side="right"))
        return shard, row - (int(ends[shard - 1]) if shard else 0)

    def _model_and_tokenizer(self) -> tuple[Any, Any]:
        """The model the corpus was analysed with: the one given to open(), or the packaged default model where the
        corpus names it. A folder never makes anything load by its own say: a name of another model (a Hub repo id,
        a folder) is only reported, since loading it could reach the network or read files outside the corpus."""
        if self._model is None or self._tokenizer is None:
            if self.model_name != "default":
                raise ValueError(f"nearest() on new text needs the model this corpus was analysed with "
                                 f"({self.model_name!r}), which a corpus folder never loads by itself: "
                                 f"Corpus.open({str(self.path)!r}, model=..., tokenizer=...) with that model, or pass "
                                 "a text id.")
            from bertviz_lab.model.auto import load_default

            self._model, self._tokenizer = load_default()
        return self._model, self._tokenizer

    def nearest(self, text: str | int, position: int, layer: int, k: int = 10, *, exact: bool | None = None) -> Any:
        """The k stored tokens whose hidden state at `layer` is most cosine-similar to that of token `position` of
        `text` (a str run through the model, or a text id): text_id, position, token, left/right context, score.
        `exact`: True searches by brute force; False or None walk the layer's HNSW graphs where it has them (above
        200,000 stored vectors) and search exactly where it has none."""
        import pandas as pd

        self._check_vector_layer(layer)
        _check_k(k)
        query = self._query_vector(text, position, layer)
        rows, scores = vectors.search(self._shard_dirs(), self._index(layer), layer, query, int(k), exact,
                                      self._stored(), self.manifest.get("index_segment_rows"))
        text_ids, positions, tokens = self._token_rows()
        records = []
        for row, score in sorted(zip(rows.tolist(), scores.tolist()), key=lambda pair: (-pair[1], pair[0])):
            start = row - int(positions[row])
            end = start + int(np.searchsorted(text_ids[start:], text_ids[row], side="right"))
            left, right = context(tokens[start:end], int(positions[row]))
            records.append({"text_id": int(text_ids[row]), "position": int(positions[row]), "token": tokens[row],
                            "left": left, "right": right, "score": score})
        return pd.DataFrame.from_records(records, columns=["text_id", "position", "token", "left", "right", "score"])

    def _index(self, layer: int) -> list[Path] | None:
        """The segments of the layer's HNSW index (checked on open like every file the manifest lists), or None where
        the layer has none (searched exactly)."""
        segment_rows = self.manifest.get("index_segment_rows")
        if not segment_rows:
            return None
        return [self.path / folder.INDEX / name for name in vectors.index_files(layer, self._stored(), segment_rows)]

    def _stored(self) -> int:
        """How many token rows (and vectors a vector layer) the corpus stores."""
        return sum(entry["tokens"] for entry in self.manifest["shards"])

    def qk_map(self, layer: int, head: int, n: int = 2000, method: str = "pca", seed: int = 0) -> Any:
        """Queries and keys of n sampled tokens of head (layer, head), each set translated to a shared mean (as
        AttentionViz does), in one 2-D projection: kind, text_id, position, token, x, y."""
        import pandas as pd

        if (layer, head) not in self.qk_heads:
            pairs = self.qk_heads
            stored = ("none (analyze with vectors=('qk',))" if not pairs else f"those of {len(pairs)} heads"
                      if len(pairs) > 12 else "those of " + ", ".join(f"({a}, {b})" for a, b in pairs))
            raise ValueError(f"head ({layer}, {head}) has no stored queries and keys; this corpus stores {stored}.")
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise ValueError(f"n must be an int of at least 2, got {n!r}.")
        q_name, k_name = vectors.qk_files(layer, head)
        total = self._stored()
        rows = np.sort(np.random.default_rng(seed).choice(total, size=min(n, total), replace=False))
        q = vectors.gathered(self._shard_dirs(), q_name, rows).astype(np.float64)
        k = vectors.gathered(self._shard_dirs(), k_name, rows).astype(np.float64)
        points = np.concatenate([q - q.mean(0), k - k.mean(0)])
        xy = vectors.project_2d(points, method, seed)
        text_ids, positions, tokens = self._token_rows()
        m = len(rows)
        return pd.DataFrame({"kind": ["query"] * m + ["key"] * m,
                             "text_id": np.tile(text_ids[rows], 2).astype(np.int64),
                             "position": np.tile(positions[rows], 2).astype(np.int64),
                             "token": np.tile(tokens[rows], 2), "x": xy[:, 0], "y": xy[:, 1]})

    # neurons --------------------------------------------------------------------------------------------------
    def top_neuron_texts(self, layer: int, neuron: int, k: int = 5) -> Any:
        """The k texts where feed-forward neuron `neuron` of `layer` (its activation after the intermediate GELU)
        fires most, best first: text_id, position and token of the text's largest activation, the activation, a few
        tokens of context on each side (left, right, as nearest() gives them) and the whole text."""
        import pandas as pd

        self._check_neuron(layer, neuron)
        _check_k(k)
        kept = neurons.kept(self.manifest)
        if k > kept:
            raise ValueError(f"k={k} is more than the {kept} texts this corpus keeps per neuron; analyze with "
                             f"neurons={int(k)} or more to keep more.")
        top = self.connection.execute(
            f"select n.text_id, n.position, n.activation, {WHOLE_TEXT} as text from neuron_maxima n join texts t "
            "using (text_id) where n.layer = ? and n.neuron = ? order by n.activation desc, n.text_id limit ?",
            [int(layer), int(neuron), int(k)]).fetchall()
        ids = sorted({row[0] for row in top})
        found = self.connection.execute(  # the placeholders' count is ours; the ids go in as values
            f"select text_id, list(token order by position) from tokens where text_id in ({', '.join('?' * len(ids))}) "
            "group by text_id", ids).fetchall() if ids else []
        tokens = dict(found)
        records = []
        for text_id, position, activation, text in top:
            words = tokens.get(text_id) or []
            if not 0 <= position < len(words):
                raise ValueError(f"{neurons.TABLE} names position {position} of text {text_id}, which has "
                                 f"{len(words)} tokens; {folder.DAMAGED}.")
            left, right = context(words, position)
            records.append({"text_id": text_id, "position": position, "token": words[position],
                            "activation": activation, "left": left, "right": right, "text": text})
        return pd.DataFrame.from_records(records, columns=["text_id", "position", "token", "activation", "left",
                                                           "right", "text"])

    def _check_neuron(self, layer: int, neuron: int) -> None:
        """One line where the corpus keeps no neuron maxima of `layer`, or `neuron` is not one of its neurons."""
        if not self.neuron_layers:
            raise ValueError("this corpus keeps no neuron maxima; run analyze(..., neurons=K) or bertviz-lab corpus "
                             "--neurons K to keep each feed-forward neuron's top K texts.")
        if isinstance(layer, bool) or layer not in self.neuron_layers:
            raise ValueError(f"layer {layer!r} has no neuron maxima; this corpus keeps them for layers "
                             f"{self.neuron_layers}.")
        width = int(self.manifest["intermediate_size"])
        if isinstance(neuron, bool) or not isinstance(neuron, (int, np.integer)) or not 0 <= neuron < width:
            raise ValueError(f"neuron {neuron!r} does not exist: layer {layer} has {width} feed-forward neurons "
                             f"(0-{width - 1}).")

    def close(self) -> None:
        """Close the DuckDB connection (reopened on the next query)."""
        if self._con is not None:
            self._con.close()
            self._con = None


def _check_k(k: Any) -> None:
    """How many results a query asks for: a positive int (numpy's too), else one line saying so."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}.")
