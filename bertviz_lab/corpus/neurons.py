"""Per-neuron maxima of the feed-forward layers, kept when analyze(..., neurons=k) asks: for every analysed layer and
every neuron of its intermediate activation (hook point `encoder.layer.{i}.intermediate.act`, after the GELU), the k
texts where that neuron fires most: each text's largest activation over its real tokens, and where.

Memory stays flat whatever the corpus size: a running top k per (layer, neuron), layers x neurons x k entries, that
each batch's per-text maxima are merged into. Texts rank by activation, then by text id, so "the k best" is one
well-defined set: each shard writes its own top k (SHARD_TABLE), and finish() merges the shards' tables in shard
order into the corpus' top k (TABLE). The top k of the union of the shards' top k's is the corpus' top k, so a
resumed run, or one spread over processes, gives the table an uninterrupted run gives."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch

SHARD_TABLE = "neurons.parquet"  # in each shard: its texts' top k per (layer, neuron)
TABLE = "neuron_maxima.parquet"  # in the folder: the corpus' top k per (layer, neuron), best first
COLUMNS = ("layer", "neuron", "text_id", "position", "activation")  # both tables, ordered by layer, neuron, rank
MAX_K = 10_000  # texts kept per neuron at most (the manifest's check)


def text_maxima(act: torch.Tensor, lengths: torch.Tensor, shortest: int) -> torch.Tensor:
    """(B, I) float32: each text's largest activation of each neuron over its real tokens. `act` (B, T, I) in any
    dtype; text b's real tokens are its first lengths[b], and every text has at least `shortest`: those positions are
    read in place, only the rest (little, as batches are sorted by length) is copied to mask its padding. A maximum
    adds nothing up, so taking it in the model's dtype and converting it to float32 gives exactly the float32
    maximum (a bf16 value converts exactly)."""
    values = act[:, :shortest].amax(dim=1)
    if shortest < act.shape[1]:
        padding = torch.arange(shortest, act.shape[1], device=act.device)[None, :] >= lengths[:, None]  # (B, T - s)
        values = torch.maximum(values, act[:, shortest:].masked_fill(padding[..., None], float("-inf")).amax(dim=1))
    return values.float()


def first_positions(act: torch.Tensor, rows: torch.Tensor, neurons: torch.Tensor, values: torch.Tensor,
                    lengths: torch.Tensor) -> torch.Tensor:
    """(S,) the first real position where neuron neurons[s] of text rows[s] takes its maximum values[s]: found only
    for the few (text, neuron) pairs that enter a top k (argmax over the whole batch costs 20x the maximum)."""
    columns = act[rows, :, neurons].float()  # (S, T): exact, as the maxima were taken from these values
    real = torch.arange(act.shape[1], device=act.device)[None, :] < lengths[rows][:, None]
    return ((columns == values[:, None]) & real).to(torch.uint8).argmax(dim=1)


class TopTexts:
    """The running top k texts of every neuron of one layer: values, text ids and positions, each (I, kept),
    best first (largest activation, then smallest text id)."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.values: torch.Tensor | None = None
        self.text_ids: torch.Tensor | None = None
        self.positions: torch.Tensor | None = None

    def add_batch(self, act: torch.Tensor, lengths: torch.Tensor, shortest: int, text_ids: torch.Tensor) -> None:
        """Merge a batch's texts (its (B, T, I) activations, as text_maxima takes them, and (B,) text ids); the
        position of a maximum is looked up only for the texts that enter the top k."""
        values = text_maxima(act, lengths, shortest).T  # (I, B)
        rows = torch.arange(values.shape[1], device=values.device)
        self.add(values, text_ids, (-1 - rows).expand_as(values))  # a new entry's position: -1 - its batch row
        assert self.values is not None and self.positions is not None  # set by add
        new = self.positions < 0
        neurons = new.nonzero()[:, 0]
        rows = -1 - self.positions[new]
        self.positions[new] = first_positions(act, rows, neurons, self.values[new], lengths)

    def add(self, values: torch.Tensor, text_ids: torch.Tensor, positions: torch.Tensor) -> None:
        """Merge candidates: values and positions (I, n), text ids (n,) or (I, n)."""
        text_ids = text_ids.expand_as(values) if text_ids.dim() == 1 else text_ids
        positions = positions.long()
        if self.values is not None:
            assert self.text_ids is not None and self.positions is not None  # set together
            values = torch.cat([self.values, values], dim=1)
            text_ids = torch.cat([self.text_ids, text_ids], dim=1)
            positions = torch.cat([self.positions, positions], dim=1)
        self.values, self.text_ids, self.positions = best(values, text_ids, positions, self.k)


def best(values: torch.Tensor, text_ids: torch.Tensor, positions: torch.Tensor,
         k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The first min(k, n) of each row of (I, n) candidates ordered by value (largest first), then text id, so equal
    activations (the same text twice in a corpus) rank the same in every run: one topk over an int64 key that
    orders that way (a float32's bits made to order as integers do, then the text id reversed), a third of the time
    of two stable sorts."""
    bits = (values + 0.0).view(torch.int32).long()  # + 0.0: -0.0 becomes 0.0, which it equals
    ordered = torch.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)  # negative floats' bits count the other way
    key = (ordered << 32) + (0xFFFFFFFF - text_ids)  # text ids are below 2**32
    order = torch.topk(key, min(k, key.shape[1]), dim=1).indices
    return values.gather(1, order), text_ids.gather(1, order), positions.gather(1, order)


def write_table(path: Path, layers: list[int], tops: Iterable[TopTexts]) -> None:
    """Write the top k's of `layers` (one TopTexts each, all of one width) as one table in COLUMNS' order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    values, text_ids, positions = [], [], []
    for top in tops:
        assert top.values is not None and top.text_ids is not None and top.positions is not None  # a text was added
        values.append(top.values.cpu().numpy())
        text_ids.append(top.text_ids.cpu().numpy())
        positions.append(top.positions.cpu().numpy())
    stacked = np.stack(values)  # (L, I, kept)
    L, width, kept = stacked.shape
    pq.write_table(pa.table({
        "layer": pa.array(np.repeat(np.asarray(layers), width * kept), pa.int16()),
        "neuron": pa.array(np.tile(np.repeat(np.arange(width), kept), L), pa.int32()),
        "text_id": pa.array(np.stack(text_ids).reshape(-1), pa.int64()),
        "position": pa.array(np.stack(positions).reshape(-1), pa.int32()),
        "activation": pa.array(stacked.reshape(-1), pa.float32())}), path)


def merge_shards(shard_dirs: list[Path], out: Path, layers: list[int], width: int, k: int) -> None:
    """The corpus' top k from the shards' tables (read one at a time: memory holds two layers x I x k tables),
    written to `out` through a temporary file and a rename."""
    import os

    import pyarrow.parquet as pq

    tops = [TopTexts(k) for _ in layers]
    for shard in shard_dirs:
        table = pq.read_table(shard / SHARD_TABLE, columns=list(COLUMNS[2:]))
        text_ids, positions, values = (  # copies: Arrow's buffers are read-only
            torch.tensor(table.column(name).to_numpy().reshape(len(layers), width, -1), dtype=dtype)
            for name, dtype in (("text_id", torch.int64), ("position", torch.int64), ("activation", torch.float32)))
        for i, top in enumerate(tops):
            top.add(values[i], text_ids[i], positions[i])
    temporary = out.with_name(f".{out.name}.tmp")
    write_table(temporary, layers, tops)
    os.replace(temporary, out)


def kept(manifest: dict[str, object]) -> int:
    """Texts kept per neuron in a folder: the k asked for, or all texts where the corpus holds fewer."""
    k, texts = manifest.get("neurons", 0), manifest["num_texts"]
    assert isinstance(k, int) and isinstance(texts, int)  # the manifest's schema checked them
    return min(k, texts)
