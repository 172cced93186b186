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
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from bertviz_lab.corpus import folder, vectors
from bertviz_lab.corpus import neurons as neurons_module
from bertviz_lab.corpus.backbone import backbone_of, config_of
from bertviz_lab.corpus.corpus import Corpus
from bertviz_lab.corpus.extra import require_corpus_extra
from bertviz_lab.corpus.readers import Item, read_items
from bertviz_lab.corpus.statistics import STATISTICS, key_masks, punctuation_table
from bertviz_lab.corpus.vectors import VECTOR_KINDS
from bertviz_lab.kernels import machine
from bertviz_lab.model.attention_statistics import StatisticsCollected, attention_statistics
from bertviz_lab.model.hook_points import hook_points, hooks
from bertviz_lab.util import distributed


@dataclasses.dataclass
class Encoded:
    """Every text's token ids and token types, flat, with offsets: small enough to keep for any corpus size."""

    ids: npt.NDArray[np.int32]  # (tokens,)
    types: npt.NDArray[np.int8]  # (tokens,)
    offsets: npt.NDArray[np.int64]  # (texts + 1,)

    @property
    def lengths(self) -> npt.NDArray[Any]:
        return np.diff(self.offsets)

    def positions(self, text_ids: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """(indices into `ids`, position in its text) of every token of these texts, text after text."""
        lengths = self.lengths[text_ids]
        before = np.repeat(np.cumsum(lengths) - lengths, lengths)  # tokens of the earlier texts
        position = np.arange(lengths.sum()) - before
        return np.repeat(self.offsets[text_ids], lengths) + position, position

    def batch(self, text_ids: npt.NDArray[Any], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
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
    ids: list[npt.NDArray[Any]] = []  # one array a chunk (an array a text costs ~100 bytes each: 200 MB at 1M texts)
    types: list[npt.NDArray[Any]] = []
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
            second = [(part[i][1] or "")[:bound] for i in chosen] if pair else None  # pairs: never None
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


def _checked_neurons(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= neurons_module.MAX_K:
        raise ValueError(f"neurons must be an int of 0 (keep none) to {neurons_module.MAX_K:,}, the texts kept per "
                         f"feed-forward neuron; got {value!r}.")
    return int(value)


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
        ours = backbone.get_parameter("embeddings.word_embeddings.weight").detach()[:4].cpu()
        return "default" if ours.shape == stored.shape and torch.equal(ours.to(stored.dtype), stored) else None
    except Exception:  # no packaged model, another layout: not the default
        return None


class ShardWriter:
    """Runs batches of one shard asking the model for its attention statistics (reduced on the device), keeping
    the requested vectors and, with `neurons` > 0, each feed-forward neuron's top texts, then writes the shard's
    tables and arrays into a temporary folder and renames it."""

    def __init__(self, backbone: nn.Module, tokenizer: Any, layers: list[int], heads: list[int],
                 kinds: list[str], qk_heads: list[int], precision: str = "fp32", neurons: int = 0) -> None:
        self.backbone, self.tokenizer, self.layers, self.heads, self.kinds = backbone, tokenizer, layers, heads, kinds
        self.qk_heads, self.precision, self.neurons = qk_heads, precision, neurons
        self.tops: dict[int, neurons_module.TopTexts] = {}  # the shard's running top texts per layer (neurons > 0)
        self.num_heads = config_of(backbone).num_attention_heads
        self.chosen = [] if len(heads) == self.num_heads else heads  # [] for all heads
        self.device = next(backbone.parameters()).device
        special = list(getattr(tokenizer, "all_special_ids", []))
        vocab = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        self.vocab = np.array(vocab, dtype=object)  # id -> token, for the tokens table in one lookup
        self.punct = punctuation_table(vocab, special).to(self.device)
        self.cls_id, self.sep_id, self.pad_id = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
        self.batch: dict[str | tuple[str, int], Any] = {}  # "where", "valid", ... and (vector kind, layer)
        self.points = hook_points(backbone)
        self.thread = threading.get_ident()  # the hooks act on this thread's forwards only

    def _point(self, name: str) -> str:
        if name not in self.points:
            raise ValueError(f"the model has no hook point {name!r}; analyze needs a model with bertviz_lab's hook "
                             "points (bertviz_lab.load).")
        return name

    def _on_analyze_thread(self, read: Callable[[torch.Tensor, Any], None]) -> Callable[[torch.Tensor, Any], None]:
        """A hook that acts on analyze's own forwards only: the same model run on another thread meanwhile (a
        panel's, a training step's) passes through untouched and leaves this batch alone."""
        def hook(tensor: torch.Tensor, point: Any) -> None:
            if threading.get_ident() == self.thread:
                read(tensor, point)

        return hook

    def _hooks(self) -> list[tuple[str, Callable[[torch.Tensor, Any], None]]]:
        """The hooks that keep the requested vectors: hidden states after a layer, queries and keys of some heads.
        They only read, so every layer keeps its fast attention; the feed-forward's activation, read after its fused
        GELU, keeps its fast path too. Without hidden states kept, the last layer's activation hook ends the forward
        (StatisticsCollected): nothing after it is needed."""
        pairs: list[tuple[str, Callable[[torch.Tensor, Any], None]]] = []
        for layer in self.layers:
            if self.neurons:
                def on_act(act: torch.Tensor, point: Any, layer: int = layer) -> None:
                    self.tops[layer].add_batch(act, self.batch["lengths"], self.batch["shortest"],
                                               self.batch["text_ids"])
                    if layer == self._stop_after():
                        raise StatisticsCollected

                pairs.append((self._point(f"encoder.layer.{layer}.intermediate.act"), self._on_analyze_thread(on_act)))
            if "hidden" in self.kinds:
                def on_hidden(hidden: torch.Tensor, point: Any, layer: int = layer) -> None:
                    self.batch[("hidden", layer)] = hidden[self.batch["where"]].to("cpu", torch.float16)

                pairs.append((self._point(f"encoder.layer.{layer}.hidden"), self._on_analyze_thread(on_hidden)))
            if "qk" in self.kinds:
                for kind in ("q", "k"):
                    def on_qk(x: torch.Tensor, point: Any, layer: int = layer, kind: str = kind) -> None:
                        rows = x[:, self.qk_heads].transpose(1, 2)[self.batch["where"]]  # (n, heads, hs)
                        self.batch[(kind, layer)] = rows.to("cpu", torch.float16)

                    pairs.append((self._point(f"encoder.layer.{layer}.attention.self.{kind}"),
                                  self._on_analyze_thread(on_qk)))
        return pairs

    def _stop_after(self) -> int | None:
        """The layer after which the forward may stop: the last analysed one, unless hidden states are kept."""
        return self.layers[-1] if "hidden" not in self.kinds else None

    def _statistics(self, ids: torch.Tensor, types: torch.Tensor, mask: torch.Tensor) -> dict[int, torch.Tensor]:
        """One batch's forward, answering the model's attention statistics request for the analysed layers; it
        stops after the last one where no hidden states after it are kept (after its feed-forward activation where
        neuron maxima are kept)."""
        last = self._stop_after() if not self.neurons else None  # the neurons' hook stops it then
        with attention_statistics(self.layers, self.batch["valid"], self.batch["keys"][:, 0],
                                  self.chosen or None, stop_after=last) as found, self.autocast():
            try:
                self.backbone(input_ids=ids, token_type_ids=types, attention_mask=mask)
            except StatisticsCollected:
                pass
        missing = [layer for layer in self.layers if layer not in found]
        if missing:
            raise RuntimeError(f"layers {missing} gave no statistics: analyze needs a model whose self-attention "
                               "layers answer bertviz_lab's attention statistics (bertviz_lab.load).")
        return found

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """bf16 autocast for precision="bf16" (the attention statistics stay float32), else nothing."""
        if self.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def write(self, out: Path, index: int, text_ids: npt.NDArray[Any], items: list[Item], encoded: Encoded,
              batch_size: int, on_batch: Callable[[int], object]) -> None:
        """Compute shard `index` (texts `text_ids`, in this order) and publish it."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        stats, queries = [], []
        arrays: dict[tuple[str, int], list[npt.NDArray[Any]]] = {}
        self.tops = {layer: neurons_module.TopTexts(self.neurons) for layer in self.layers} if self.neurons else {}
        with hooks(self.backbone, self._hooks(), points=self.points), torch.inference_mode():
            for start in range(0, len(text_ids), batch_size):
                chunk = text_ids[start:start + batch_size]
                ids, types, mask = self.batch_inputs(chunk, encoded)
                found = self._statistics(ids, types, mask)
                sums = torch.stack([found[layer] for layer in self.layers]).cpu().double()
                batch_counts = mask.sum(1).cpu()  # (B,) queries per text
                stats.append((sums / batch_counts[None, :, None, None]).numpy())  # (L, B, H, 7) means
                queries.append(batch_counts.numpy())
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
        if self.neurons:
            neurons_module.write_table(target / neurons_module.SHARD_TABLE, self.layers,
                                       [self.tops[layer] for layer in self.layers])
            self.tops = {}
        folder.publish(target, folder.shard_dir(out, index))

    def batch_inputs(self, chunk: npt.NDArray[Any], encoded: Encoded) -> tuple[torch.Tensor, ...]:
        """The batch's inputs on the device, and the per-batch state the hooks read (valid queries, key masks)."""
        ids, types, mask = (x.to(self.device) for x in encoded.batch(chunk, self.pad_id))
        self.batch.update(valid=mask.to(torch.float32), where=mask.bool(),
                          text_ids=torch.from_numpy(np.asarray(chunk, dtype=np.int64)).to(self.device),
                          lengths=mask.sum(1), shortest=int(encoded.lengths[chunk].min()),
                          keys=key_masks(ids, self.cls_id, self.sep_id, self.punct))
        return ids, types, mask


PRECISIONS = ("fp32", "bf16")


def check_precision(precision: Any, device: torch.device) -> None:
    """fp32, or bf16 where `device` computes it natively; anything else is one line saying why."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}.")
    if precision == "bf16":
        refusal = machine.bf16_refusal(device)
        if refusal is not None:
            raise ValueError(refusal)
        caution = machine.bf16_caution(device)
        if caution is not None:
            warnings.warn(caution, stacklevel=3)


def finish(out: Path, settings: dict[str, Any], shard_sizes: list[int], num_heads: int,
           intermediate_size: int) -> None:
    """Rank 0, once every shard is on disk: the corpus-wide head statistics, the indexes, the neuron maxima, then
    the manifest."""
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
    extra: dict[str, Any] = {}  # written only where kept, so folders without them stay as they were
    if settings.get("neurons"):
        neurons_module.merge_shards(shard_dirs, out / neurons_module.TABLE, settings["layers"], intermediate_size,
                                    settings["neurons"])
        extra = {"neurons": settings["neurons"], "intermediate_size": intermediate_size}
    qk_heads = ([[layer, head] for layer in settings["layers"] for head in settings.get("qk_heads", settings["heads"])]
                if "qk" in settings["vectors"] else [])
    folder.write_json(out / folder.MANIFEST, {
        "format": folder.FORMAT, "complete": True, "hash": folder.settings_hash(settings),
        "model_name": settings["model_name"], "layers": settings["layers"], "heads": settings["heads"],
        "num_heads": num_heads, "vectors": settings["vectors"], "vector_layers": vector_layers, "qk_heads": qk_heads,
        "index_segment_rows": segment_rows, "precision": settings.get("precision", "fp32"),
        "num_texts": settings["num_texts"], "max_length": settings["max_length"],
        "shards": [{"name": folder.shard_name(i), "texts": n, "tokens": r}
                   for i, (n, r) in enumerate(zip(shard_sizes, rows))], **extra})


def analyze(model: nn.Module, tokenizer: Any, data: Any, out: str | os.PathLike[str], *, layers: Any = None,
            heads: Any = None, vectors: Any = (), qk_heads: Any = None, batch_size: int = 32, max_length: int = 128,
            text_column: str = "text", progress: bool = True, shard_size: int = 1024,
            model_name: str | None = None, encoding: str = "utf-8", errors: str = "strict",
            precision: str = "fp32", neurons: int = 0) -> Corpus:
    """Run `model` over the corpus `data` and write the folder `out` (per-head statistics, per-text values, tokens
    and the requested vectors: "hidden" states at `layers`, "qk" queries and keys of `qk_heads`, by default
    `heads`, at `layers`); resumes an interrupted run and returns at once where `out` holds this corpus already.
    A text file is decoded as `encoding`, its bad bytes handled as `errors` says ("replace" reads past them).

    precision="bf16" runs the model under bf16 autocast where the hardware computes bf16 natively (AMX or
    AVX-512 BF16 CPUs, GPUs from compute capability 8.0; elsewhere one line refuses it) and keeps the attention
    statistics in float32: every share within 2e-3 and the entropy within 1e-2 nats of the fp32 run. The folder
    records the precision.

    neurons=k keeps, for every analysed layer and every feed-forward neuron (the activation after the intermediate
    GELU), the k texts where it fires most: each text's largest activation over its real tokens (float32), and its
    position (Corpus.top_neuron_texts reads them). It costs a running top k per neuron in memory and no second
    forward."""
    require_corpus_extra()
    out = Path(out)
    backbone = backbone_of(model)
    config = config_of(backbone)
    check_precision(precision, next(backbone.parameters()).device)
    layers = _checked_indices(layers, config.num_hidden_layers, "layer")
    heads = _checked_indices(heads, config.num_attention_heads, "head")
    kinds = _checked_vectors(vectors)
    if qk_heads is not None and "qk" not in kinds:
        raise ValueError(f"qk_heads={qk_heads!r} names heads whose queries and keys to keep, but vectors={vectors!r} "
                         "keeps none: add 'qk' to vectors.")
    qk_heads = heads if qk_heads is None else _checked_indices(qk_heads, config.num_attention_heads, "head")
    neurons = _checked_neurons(neurons)
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
    if precision != "fp32":  # fp32 folders keep the settings (and the hash) they had
        settings["precision"] = precision
    if neurons:  # so do folders without neuron maxima
        settings["neurons"] = neurons
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
            shard_writer = ShardWriter(backbone, tokenizer, layers, heads, kinds, qk_heads, precision, neurons)
            _run_shards(shard_writer, out, shards, items, encoded, batch_size, progress and context.is_main, context)
            distributed.barrier(context)
            failure: Exception | None = None
            if context.is_main:
                try:
                    finish(out, settings, [len(s) for s in shards], config.num_attention_heads,
                           config.intermediate_size)
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


def _run_shards(writer: ShardWriter, out: Path, shards: list[npt.NDArray[Any]], items: list[Item], encoded: Encoded,
                batch_size: int, progress: bool, context: distributed.DistributedContext) -> None:
    """This process' shards (every world_size-th) that are not on disk yet, with a texts/s bar."""
    from tqdm.auto import tqdm

    mine = [i for i in range(len(shards)) if i % context.world_size == context.rank and not folder.shard_done(out, i)]
    if not mine:
        return
    backbone = writer.backbone
    was_training = backbone.training
    backbone.eval()
    try:
        with tqdm(total=sum(len(shards[i]) for i in mine), unit="text", disable=not progress,
                  desc="analyze") as bar:
            for i in mine:
                writer.write(out, i, shards[i], items, encoded, batch_size, bar.update)
    finally:
        backbone.train(was_training)
