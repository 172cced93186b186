"""analyze(): run a model over a corpus, shard by shard, and write a corpus folder (bertviz_lab.corpus.folder).

Texts are tokenized once and sorted by length (then by id) so batches carry little padding; the sorted order is cut
into shards of `shard_size` texts. Under torchrun each process takes every world_size-th shard, so the shards, and
the folder, are the same for any number of processes. A shard already on disk is never recomputed."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bertviz_lab import kernels
from bertviz_lab.corpus import folder, vectors
from bertviz_lab.corpus.backbone import backbone_of
from bertviz_lab.corpus.corpus import Corpus
from bertviz_lab.corpus.extra import require_corpus_extra
from bertviz_lab.corpus.readers import Item, read_items
from bertviz_lab.corpus.statistics import STATISTICS, key_masks, punctuation_table
from bertviz_lab.corpus.vectors import VECTOR_KINDS
from bertviz_lab.kernels import avx2
from bertviz_lab.kernels.attention import BACKENDS as ATTENTION_BACKENDS
from bertviz_lab.model.hook_points import Reader, hook_points, hooks
from bertviz_lab.train import distributed

AVX2_ATTENTION = ATTENTION_BACKENDS["avx2"]


@dataclasses.dataclass
class Encoded:
    """Every text's token ids and token types, flat, with offsets: small enough to keep for any corpus size."""

    ids: np.ndarray  # (tokens,) int32
    types: np.ndarray  # (tokens,) int8
    offsets: np.ndarray  # (texts + 1,) int64

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def positions(self, text_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(indices into `ids`, position in its text) of every token of these texts, text after text."""
        lengths = self.lengths[text_ids]
        before = np.repeat(np.cumsum(lengths) - lengths, lengths)  # tokens of the earlier texts
        position = np.arange(lengths.sum()) - before
        return np.repeat(self.offsets[text_ids], lengths) + position, position

    def batch(self, text_ids: np.ndarray, pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(input_ids, token_type_ids, attention_mask), each (B, T) long, padded to the longest text."""
        lengths = self.lengths[text_ids]
        ids = np.full((len(text_ids), lengths.max()), pad_id, dtype=np.int64)
        types = np.zeros_like(ids)
        for row, (text, n) in enumerate(zip(text_ids, lengths)):
            start = self.offsets[text]
            ids[row, :n] = self.ids[start:start + n]
            types[row, :n] = self.types[start:start + n]
        mask = np.arange(ids.shape[1])[None, :] < lengths[:, None]
        return torch.from_numpy(ids), torch.from_numpy(types), torch.from_numpy(mask.astype(np.int64))


CHARS_PER_TOKEN = 100  # WordPiece's longest word: a text's first max_length tokens span at most about this many each


def encode(tokenizer: Any, items: list[Item], max_length: int, chunk: int = 4096) -> Encoded:
    """Tokenize every item once ([CLS] a [SEP] (b [SEP]), truncated to max_length). The tokenizer sees only each
    text's first CHARS_PER_TOKEN x max_length characters: one huge line costs megabytes, not the gigabytes of
    tokenizing all of it. A text whose first max_length tokens lie in that span (any text but runs of whitespace or
    words of 100+ characters) gets exactly the tokens it would get whole."""
    bound = CHARS_PER_TOKEN * max_length
    ids: list[np.ndarray] = []  # one array a chunk (an array a text costs ~100 bytes each: 200 MB at 1M texts)
    types: list[np.ndarray] = []
    lengths: list[int] = []
    for start in range(0, len(items), chunk):
        part = items[start:start + chunk]
        singles = [i for i, (_, b) in enumerate(part) if b is None]
        pairs = [i for i, (_, b) in enumerate(part) if b is not None]
        rows: dict[int, tuple[list[int], list[int]]] = {}
        for chosen, pair in ((singles, False), (pairs, True)):
            if not chosen:
                continue
            texts = [part[i][0][:bound] for i in chosen]
            second = [part[i][1][:bound] for i in chosen] if pair else None
            enc = tokenizer(texts, text_pair=second, truncation=True, max_length=max_length)
            for i, row_ids, row_types in zip(chosen, enc["input_ids"], enc["token_type_ids"]):
                rows[i] = (row_ids, row_types)
        ids.append(np.fromiter((i for row in range(len(part)) for i in rows[row][0]), dtype=np.int32))
        types.append(np.fromiter((t for row in range(len(part)) for t in rows[row][1]), dtype=np.int8))
        lengths.extend(len(rows[row][0]) for row in range(len(part)))
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(lengths)
    return Encoded(np.concatenate(ids or [np.zeros(0, np.int32)]), np.concatenate(types or [np.zeros(0, np.int8)]),
                   offsets)


def _checked_indices(values: Any, count: int, what: str) -> list[int]:
    """Sorted unique layer or head indices; one that does not exist is an error naming the range."""
    if values is None:
        return list(range(count))
    values = [values] if isinstance(values, int) else list(values)
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < count:
            raise ValueError(f"{what} {value!r} does not exist: the model has {count} {what}s (0-{count - 1}).")
    if not values:
        raise ValueError(f"{what}s is empty; leave it out for all {count}.")
    return sorted({int(v) for v in values})


def _checked_vectors(value: Any) -> list[str]:
    kinds = [value] if isinstance(value, str) else list(value or ())
    unknown = [kind for kind in kinds if kind not in VECTOR_KINDS]
    if unknown:
        raise ValueError(f"vectors={unknown[0]!r} is not a kind of vector; expected any of {', '.join(VECTOR_KINDS)}.")
    return [kind for kind in VECTOR_KINDS if kind in kinds]


def _positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return value


def model_digest(backbone: nn.Module) -> str:
    """A digest of the configuration and a sample of every parameter: other weights give another digest."""
    digest = hashlib.sha256()
    config = getattr(backbone, "config", None)
    if config is not None:
        fields = config.to_dict() if hasattr(config, "to_dict") else vars(config)
        digest.update(json.dumps(fields, sort_keys=True, default=str).encode())
    for name, parameter in backbone.named_parameters():
        sample = parameter.detach().reshape(-1)[:4096].float().cpu().numpy()
        digest.update(name.encode() + str(tuple(parameter.shape)).encode() + sample.tobytes())
    return digest.hexdigest()[:16]


def data_digest(items: list[Item], encoded: Encoded) -> str:
    """A digest of the texts and the ids the tokenizer made of them."""
    digest = hashlib.sha256()
    for a, b in items:
        digest.update(a.encode() + b"\x00" + (b.encode() if b is not None else b"\x01") + b"\x02")
    digest.update(encoded.ids.tobytes() + encoded.types.tobytes() + encoded.offsets.tobytes())
    return digest.hexdigest()[:16]


def default_model_name(backbone: nn.Module) -> str | None:
    """'default' where the model holds the packaged default weights (so Corpus.open can load it again)."""
    try:
        from safetensors import safe_open

        from bertviz_lab.model.weights import BERT_Weights

        path = BERT_Weights.DEFAULT.path / "model.safetensors"
        with safe_open(str(path), "pt") as weights:
            stored = weights.get_slice("embeddings.word_embeddings.weight")[:4]
        ours = backbone.embeddings.word_embeddings.weight.detach()[:4].cpu()
        return "default" if ours.shape == stored.shape and torch.equal(ours.to(stored.dtype), stored) else None
    except Exception:  # no packaged model, another layout: not the default
        return None


class Enough(Exception):
    """Raised by the last hook a batch needs: the layers after it are not run."""


class StatisticsAttention:
    """The attention backend of an analysed layer on the AVX2 kernel while analyze runs: the kernel's output, and
    from the same pass the layer's statistics (for the batch's `valid` queries and key `keys`), kept in `batch`.
    A forward on any other thread than analyze's gets the plain kernel."""

    def __init__(self, batch: dict[Any, Any], layer: int, chosen: list[int], thread: int) -> None:
        self.batch, self.layer, self.chosen, self.thread = batch, layer, chosen, thread

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
                 dropout_p: float = 0.0, probabilities: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        if threading.get_ident() != self.thread:
            return AVX2_ATTENTION(q, k, v, mask, scale, dropout_p, probabilities=probabilities)
        if probabilities or dropout_p or torch.is_grad_enabled():
            raise RuntimeError("StatisticsAttention runs inside analyze only: inference, no watched probabilities")
        out, stats = avx2.attention_with_statistics(q, k, v, mask, scale, self.batch["valid"],
                                                    self.batch["keys"][:, 0])
        self.batch[("stats", self.layer)] = stats[:, self.chosen] if self.chosen else stats
        B, nh, T, hs = q.shape
        return out.view(B, T, nh, hs).transpose(1, 2), None  # the kernel writes (B, T, nh * hs)


class ShardWriter:
    """Runs batches of one shard with hooks that reduce attention to statistics on the device (and keep the
    requested vectors), then writes the shard's tables and arrays into a temporary folder and renames it."""

    def __init__(self, backbone: nn.Module, tokenizer: Any, layers: list[int], heads: list[int],
                 kinds: list[str], qk_heads: list[int]) -> None:
        self.backbone, self.tokenizer, self.layers, self.heads, self.kinds = backbone, tokenizer, layers, heads, kinds
        self.qk_heads = qk_heads
        self.chosen = [] if len(heads) == backbone.config.num_attention_heads else heads  # [] for all heads
        self.device = next(backbone.parameters()).device
        self.num_heads = backbone.config.num_attention_heads
        special = list(getattr(tokenizer, "all_special_ids", []))
        vocab = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        self.vocab = np.array(vocab, dtype=object)  # id -> token, for the tokens table in one lookup
        self.punct = punctuation_table(vocab, special).to(self.device)
        self.cls_id, self.sep_id, self.pad_id = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
        self.batch: dict[str, Any] = {}
        self.points = hook_points(backbone)
        self.thread = threading.get_ident()  # the hooks act on this thread's forwards only

    def _point(self, name: str) -> str:
        if name not in self.points:
            raise ValueError(f"the model has no hook point {name!r}; analyze needs a model with bertviz_lab's hook "
                             "points (bertviz_lab.load).")
        return name

    def _reader(self, read: Callable[[torch.Tensor, Any, bool], None]) -> Reader:
        """A reader that acts on analyze's own forwards only: the same model run on another thread meanwhile (a
        panel's, a warm-up's) passes through untouched and leaves this batch alone."""
        def on_analyze_thread(tensor: torch.Tensor, point: Any, handed_over: bool) -> None:
            if threading.get_ident() == self.thread:
                read(tensor, point, handed_over)

        return Reader(on_analyze_thread)

    def _hooks(self, scales: dict[int, float] | None, fused: list[int]) -> list[tuple[str, Callable]]:
        """Readers only: the attention backend keeps its fast path. Where the statistics kernel runs (`scales`), a
        layer's statistics come from its attention pass (the `fused` layers) or, for the others and the last one,
        from its queries and keys, and no probabilities are formed; elsewhere the backend hands the probabilities
        over."""
        chosen = self.chosen
        last = self.layers[-1] if "hidden" not in self.kinds else None  # after its statistics nothing more is needed
        pairs: list[tuple[str, Callable]] = []
        for layer in self.layers:
            if "hidden" in self.kinds:
                def on_hidden(hidden: torch.Tensor, point: Any, handed_over: bool, layer: int = layer) -> None:
                    self.batch[("hidden", layer)] = hidden[self.batch["where"]].to("cpu", torch.float16)

                pairs.append((self._point(f"encoder.layer.{layer}.hidden"), self._reader(on_hidden)))
            if "qk" in self.kinds:  # before the statistics' readers, which may end the forward at `k`
                for kind in ("q", "k"):
                    def on_qk(x: torch.Tensor, point: Any, handed_over: bool, layer: int = layer,
                              kind: str = kind) -> None:
                        rows = x[:, self.qk_heads].transpose(1, 2)[self.batch["where"]]  # (n, heads, hs)
                        self.batch[(kind, layer)] = rows.to("cpu", torch.float16)

                    pairs.append((self._point(f"encoder.layer.{layer}.attention.self.{kind}"), self._reader(on_qk)))
            if layer in fused:
                continue
            if scales is None:
                def on_probs(probs: torch.Tensor, point: Any, handed_over: bool, layer: int = layer) -> None:
                    probs = probs[:, chosen] if chosen else probs
                    self.batch[("stats", layer)] = kernels.probability_statistics(probs, self.batch["valid"],
                                                                                  self.batch["keys"])
                    if layer == last:
                        raise Enough

                pairs.append((self._point(f"encoder.layer.{layer}.attention.self.probs"), self._reader(on_probs)))
                continue

            if layer == last and self._ends_at_input(layer):
                project = self._queries_and_keys(layer)

                def on_input(hidden: torch.Tensor, point: Any, handed_over: bool, layer: int = layer) -> None:
                    q, k = project(hidden)
                    q, k = (q[:, chosen], k[:, chosen]) if chosen else (q, k)
                    self.batch[("stats", layer)] = kernels.attention_statistics(
                        q, k, self.batch["valid"], self.batch["keys"][:, 0], scales[layer])
                    raise Enough  # nothing of the layer itself runs

                pairs.append((self._point(f"encoder.layer.{layer - 1}.hidden"), self._reader(on_input)))
                continue

            def on_q(q: torch.Tensor, point: Any, handed_over: bool, layer: int = layer) -> None:
                self.batch[("query", layer)] = q[:, chosen] if chosen else q

            def on_k(k: torch.Tensor, point: Any, handed_over: bool, layer: int = layer) -> None:
                q, k = self.batch.pop(("query", layer)), k[:, chosen] if chosen else k
                self.batch[("stats", layer)] = kernels.attention_statistics(
                    q, k, self.batch["valid"], self.batch["keys"][:, 0], scales[layer])
                if layer == last:
                    raise Enough  # the layer's attention itself is not needed

            pairs.append((self._point(f"encoder.layer.{layer}.attention.self.q"), self._reader(on_q)))
            pairs.append((self._point(f"encoder.layer.{layer}.attention.self.k"), self._reader(on_k)))
        return pairs

    def _ends_at_input(self, layer: int) -> bool:
        """Whether the last analysed layer's queries and keys can come from its input (the previous layer's output)
        alone: none of its vectors are kept and it projects them with one fused self-attention weight."""
        return layer > 0 and "qk" not in self.kinds and isinstance(getattr(self._attention(layer), "qkv", None),
                                                                   nn.Linear)

    def _queries_and_keys(self, layer: int) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
        """The layer's queries and keys, (B, nh, T, hs) each, from its input: the first two thirds of its fused
        projection through the layer's own GEMM backend, so its values (a third of the product) are never made."""
        attention = self._attention(layer)
        C = attention.qkv.out_features // 3
        weight = attention.qkv.weight.detach()[:2 * C]
        bias = None if attention.qkv.bias is None else attention.qkv.bias.detach()[:2 * C]
        nh, hs = attention.num_heads, attention.head_size

        def project(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            gemm = attention.linear_backend
            y = None if gemm is None else gemm(x, weight, bias)
            y = F.linear(x, weight, bias) if y is None else y
            B, T, _ = y.shape
            q, k = y.view(B, T, 2 * nh, hs).transpose(1, 2).chunk(2, dim=1)
            return q, k

        return project

    def _scales(self) -> dict[int, float] | None:
        """Each analysed layer's attention scale where the statistics kernel can take its queries and keys (fp32
        CPU weights, an encoder's padding mask the only one), else None: the probabilities are reduced."""
        config = self.backbone.config
        weight = next(self.backbone.parameters())
        if config.is_decoder or not kernels.choice.cpu_reductions(weight.device, weight.dtype):
            return None
        scales = [getattr(self._attention(layer), "scale", None) for layer in self.layers]
        if any(not isinstance(scale, float) for scale in scales):
            return None
        return dict(zip(self.layers, scales))

    def _attention(self, layer: int) -> nn.Module:
        return self.backbone.get_submodule(f"encoder.layer.{layer}.attention.self")

    def _fused_layers(self, scales: dict[int, float] | None) -> list[int]:
        """The analysed layers whose attention runs on the AVX2 kernel and is needed (all but a last one that
        ends the forward): while analyze runs, that kernel also reduces their probabilities (StatisticsAttention)."""
        if scales is None:
            return []
        needed = self.layers if "hidden" in self.kinds else self.layers[:-1]
        return [layer for layer in needed if self._attention(layer).attention_backend is AVX2_ATTENTION]

    @contextlib.contextmanager
    def _statistics_attention(self, fused: list[int]) -> Iterator[None]:
        """Inside the block the fused layers run StatisticsAttention; their own backend again on exit, where nothing
        else (kernels.override, kernels.choose) gave them another meanwhile."""
        modules = {layer: self._attention(layer) for layer in fused}
        try:
            for layer, module in modules.items():
                module.attention_backend = StatisticsAttention(self.batch, layer, self.chosen, self.thread)
            yield
        finally:
            for module in modules.values():
                if isinstance(module.attention_backend, StatisticsAttention):
                    module.attention_backend = AVX2_ATTENTION

    def write(self, out: Path, index: int, text_ids: np.ndarray, items: list[Item], encoded: Encoded,
              batch_size: int, on_batch: Callable[[int], None]) -> None:
        """Compute shard `index` (texts `text_ids`, in this order) and publish it."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        stats, queries, arrays = [], [], {}
        scales = self._scales()
        fused = self._fused_layers(scales)
        with hooks(self.backbone, self._hooks(scales, fused), points=self.points), self._statistics_attention(fused), \
                torch.inference_mode():
            for start in range(0, len(text_ids), batch_size):
                chunk = text_ids[start:start + batch_size]
                ids, types, mask = self.batch_inputs(chunk, encoded)
                try:
                    self.backbone(input_ids=ids, token_type_ids=types, attention_mask=mask)
                except Enough:
                    pass
                missing = [layer for layer in self.layers if ("stats", layer) not in self.batch]
                if missing:
                    raise RuntimeError(f"layers {missing} gave no statistics: their attention backend was replaced "
                                       "while analyze ran (kernels.override, kernels.choose or model.to on another "
                                       "thread); run analyze again, it resumes from the last shard written.")
                sums = torch.stack([self.batch[("stats", layer)] for layer in self.layers]).cpu().double()
                counts = mask.sum(1).cpu()  # (B,) queries per text
                stats.append((sums / counts[None, :, None, None]).numpy())  # (L, B, H, 7) means
                queries.append(counts.numpy())
                for key, value in self.batch.items():
                    if isinstance(key, tuple) and key[0] in ("hidden", "q", "k"):
                        arrays.setdefault(key, []).append(value.numpy())
                self.batch.clear()
                on_batch(len(chunk))
        target = folder.temporary_shard_dir(out, index)
        means = np.concatenate(stats, axis=1)  # (L, N, H, 7)
        counts = np.concatenate(queries)
        L, N, H, _ = means.shape
        text_column = np.broadcast_to(text_ids[None, :, None], (L, N, H)).reshape(-1)
        columns = {"text_id": pa.array(text_column, pa.int64()),
                   "layer": pa.array(np.repeat(self.layers, N * H), pa.int16()),
                   "head": pa.array(np.tile(self.heads, L * N), pa.int16())}
        for s, name in enumerate(STATISTICS):
            columns[name] = pa.array(means[..., s].reshape(-1), pa.float32())  # ample for means of at most ~5
        columns["queries"] = pa.array(np.broadcast_to(counts[None, :, None], (L, N, H)).reshape(-1), pa.int32())
        pq.write_table(pa.table(columns), target / "text_stats.parquet")
        pq.write_table(pa.table({
            "text_id": pa.array(text_ids, pa.int64()),
            "text_a": [items[t][0] for t in text_ids],
            "text_b": pa.array([items[t][1] for t in text_ids], pa.string()),
            "num_tokens": pa.array(encoded.lengths[text_ids], pa.int32())}), target / "texts.parquet")
        rows, positions = encoded.positions(text_ids)
        pq.write_table(pa.table({
            "text_id": pa.array(np.repeat(text_ids, encoded.lengths[text_ids]), pa.int64()),
            "position": pa.array(positions, pa.int32()),
            "token": pa.array(self.vocab[encoded.ids[rows]], pa.string())}), target / "tokens.parquet")
        for (kind, layer), parts in arrays.items():
            array = np.concatenate(parts)
            if kind == "hidden":
                np.save(target / vectors.hidden_file(layer), array)
                continue
            for h, head in enumerate(self.qk_heads):
                np.save(target / vectors.qk_files(layer, head)[0 if kind == "q" else 1], np.ascontiguousarray(
                    array[:, h]))
        folder.publish(target, folder.shard_dir(out, index))

    def batch_inputs(self, chunk: np.ndarray, encoded: Encoded) -> tuple[torch.Tensor, ...]:
        """The batch's inputs on the device, and the per-batch state the hooks read (valid queries, key masks)."""
        ids, types, mask = (x.to(self.device) for x in encoded.batch(chunk, self.pad_id))
        self.batch.update(valid=mask.to(torch.float32), where=mask.bool(),
                          keys=key_masks(ids, self.cls_id, self.sep_id, self.punct))
        return ids, types, mask


def finish(out: Path, settings: dict[str, Any], shard_sizes: list[int], num_heads: int) -> None:
    """Rank 0, once every shard is on disk: the corpus-wide head statistics, the indexes, then the manifest."""
    import duckdb

    shard_dirs = [folder.shard_dir(out, i) for i in range(len(shard_sizes))]
    files = [str(d / "text_stats.parquet") for d in shard_dirs]
    means = ", ".join(f"sum({name}::double * queries) / sum(queries) as {name}" for name in STATISTICS)
    con = duckdb.connect()
    try:  # paths go in as values (a folder may be named "bob's corpus"); the SQL holds only our own names
        temporary = out / f".{folder.HEAD_STATS}.tmp"
        con.read_parquet(files).create_view("text_stats")
        con.sql(f"select layer::integer as layer, head::integer as head, {means}, sum(queries)::bigint as queries "
                "from text_stats group by layer, head order by layer, head").write_parquet(str(temporary))
        os.replace(temporary, out / folder.HEAD_STATS)
    finally:
        con.close()
    import pyarrow.parquet as pq

    rows = [pq.read_metadata(d / "tokens.parquet").num_rows for d in shard_dirs]
    vector_layers = settings["layers"] if "hidden" in settings["vectors"] else []
    segment_rows = vectors.SEGMENT_ROWS if vector_layers and vectors.needs_index(sum(rows)) else None
    if segment_rows:
        (out / folder.INDEX).mkdir(exist_ok=True)
        for layer in vector_layers:
            paths = [out / folder.INDEX / name for name in vectors.index_files(layer, sum(rows), segment_rows)]
            vectors.build_index(shard_dirs, vectors.hidden_file(layer), paths, segment_rows)
    qk_heads = ([[layer, head] for layer in settings["layers"] for head in settings.get("qk_heads", settings["heads"])]
                if "qk" in settings["vectors"] else [])
    folder.write_json(out / folder.MANIFEST, {
        "format": folder.FORMAT, "complete": True, "hash": folder.settings_hash(settings),
        "model_name": settings["model_name"], "layers": settings["layers"], "heads": settings["heads"],
        "num_heads": num_heads, "vectors": settings["vectors"], "vector_layers": vector_layers, "qk_heads": qk_heads,
        "index_segment_rows": segment_rows, "num_texts": settings["num_texts"], "max_length": settings["max_length"],
        "shards": [{"name": folder.shard_name(i), "texts": n, "tokens": r}
                   for i, (n, r) in enumerate(zip(shard_sizes, rows))]})


def analyze(model: nn.Module, tokenizer: Any, data: Any, out: str | os.PathLike, *, layers: Any = None,
            heads: Any = None, vectors: Any = (), qk_heads: Any = None, batch_size: int = 32, max_length: int = 128,
            text_column: str = "text", progress: bool = True, shard_size: int = 1024,
            model_name: str | None = None, encoding: str = "utf-8", errors: str = "strict") -> Corpus:
    """Run `model` over the corpus `data` and write the folder `out` (per-head statistics, per-text values, tokens
    and the requested vectors: "hidden" states at `layers`, "qk" queries and keys of `qk_heads`, by default
    `heads`, at `layers`); resumes an interrupted run and returns at once where `out` holds this corpus already.
    A text file is decoded as `encoding`, its bad bytes handled as `errors` says ("replace" reads past them)."""
    require_corpus_extra()
    out = Path(out)
    backbone = backbone_of(model)
    config = backbone.config
    layers = _checked_indices(layers, config.num_hidden_layers, "layer")
    heads = _checked_indices(heads, config.num_attention_heads, "head")
    kinds = _checked_vectors(vectors)
    if qk_heads is not None and "qk" not in kinds:
        raise ValueError(f"qk_heads={qk_heads!r} names heads whose queries and keys to keep, but vectors={vectors!r} "
                         "keeps none: add 'qk' to vectors.")
    qk_heads = heads if qk_heads is None else _checked_indices(qk_heads, config.num_attention_heads, "head")
    _positive(batch_size, "batch_size")
    _positive(shard_size, "shard_size")
    if _positive(max_length, "max_length") > config.max_positions:
        raise ValueError(f"max_length={max_length} is more than the {config.max_positions} tokens the model takes.")
    items = read_items(data, text_column, encoding, errors)
    encoded = encode(tokenizer, items, max_length)
    order = np.lexsort((np.arange(len(items)), encoded.lengths))  # by length, then by id
    shards = [order[i:i + shard_size] for i in range(0, len(order), shard_size)]
    name = model_name or default_model_name(backbone) or type(model).__name__
    settings = {"format": folder.FORMAT, "model": model_digest(backbone), "model_name": name,
                "data": data_digest(items, encoded), "num_texts": len(items), "layers": layers, "heads": heads,
                "vectors": kinds, "max_length": max_length, "shard_size": shard_size}
    if "qk" in kinds and qk_heads != heads:
        settings["qk_heads"] = qk_heads
    context = distributed.init_distributed(next(backbone.parameters()).device.type)
    writer = contextlib.ExitStack()  # rank 0 holds the folder's lock for the whole run, for every process of it
    try:
        outcome: Any = None
        if context.is_main:
            try:
                writer.enter_context(folder.writing(out))
                outcome = folder.prepare(out, settings)
            except ValueError as error:
                outcome = error
        outcome = distributed.broadcast_object(outcome, context)
        if isinstance(outcome, Exception):
            raise outcome
        if not outcome:
            _run_shards(backbone, tokenizer, out, shards, items, encoded, layers, heads, kinds, qk_heads, batch_size,
                        progress and context.is_main, context)
            distributed.barrier(context)
            failure: Exception | None = None
            if context.is_main:
                try:
                    finish(out, settings, [len(s) for s in shards], config.num_attention_heads)
                except Exception as error:  # told to every process, so none waits for a manifest that never comes
                    failure = error
            message = distributed.broadcast_object(None if failure is None else str(failure), context)
            if failure is not None:
                raise failure
            if message is not None:
                raise RuntimeError(f"rank 0 could not finish the corpus folder {out}: {message}")
    finally:
        writer.close()
        distributed.close_distributed(context)
    return Corpus.open(out, model=model, tokenizer=tokenizer)


def _run_shards(backbone: nn.Module, tokenizer: Any, out: Path, shards: list[np.ndarray], items: list[Item],
                encoded: Encoded, layers: list[int], heads: list[int], kinds: list[str], qk_heads: list[int],
                batch_size: int, progress: bool, context: distributed.DistributedContext) -> None:
    """This process' shards (every world_size-th) that are not on disk yet, with a texts/s bar."""
    from tqdm.auto import tqdm

    mine = [i for i in range(len(shards)) if i % context.world_size == context.rank and not folder.shard_done(out, i)]
    if not mine:
        return
    writer = ShardWriter(backbone, tokenizer, layers, heads, kinds, qk_heads)
    was_training = backbone.training
    backbone.eval()
    try:
        with tqdm(total=sum(len(shards[i]) for i in mine), unit="text", disable=not progress,
                  desc="analyze") as bar:
            for i in mine:
                writer.write(out, i, shards[i], items, encoded, batch_size, bar.update)
    finally:
        backbone.train(was_training)
