"""Per-head attention statistics reduced on the device inside the forward: a hook at each layer's `probs` turns the
(B, H, T, S) map into per-(text, head) sums, so no attention map ever reaches the CPU.

For every non-padding query position i of a text and every head, the statistics of kernels/head_statistics.py
(STATISTICS here are their names, the tables' columns, in order): the entropy of its attention (nats), the weight on
[CLS], the total weight on [SEP], the weight on itself (i), on the previous (i-1) and next (i+1) token (0 where that
position does not exist or is padding, the query still counted) and the total weight on punctuation keys (tokens
made only of Unicode punctuation, P*; special tokens are not punctuation). Means are token-weighted: sum over
queries / number of queries.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import numpy as np
import torch

from bertviz_lab.kernels.head_statistics import STATISTIC_NAMES

STATISTICS = STATISTIC_NAMES  # the tables' statistic columns, in the order the kernels write them


def is_punctuation(token: str) -> bool:
    """A token made only of punctuation characters (Unicode category P*)."""
    return bool(token) and not token.isalnum() and all(unicodedata.category(ch).startswith("P") for ch in token)


def punctuation_table(tokens: Sequence[str], special_ids: Sequence[int]) -> torch.Tensor:
    """(vocab,) bool: which token ids are punctuation (special tokens never are). `is_punctuation` for a whole
    vocabulary at once: each distinct character is classified once, and one regular expression finds the lines of
    the joined vocabulary made only of punctuation (15 ms for 30,522 tokens instead of 75)."""
    text = "\n".join(tokens)
    if text.count("\n") != max(len(tokens) - 1, 0):  # a token with a line break of its own: one by one
        table = torch.tensor([is_punctuation(token) for token in tokens], dtype=torch.bool)
    else:
        marks = "".join(sorted(ch for ch in set(text) if unicodedata.category(ch).startswith("P")))
        table = torch.zeros(len(tokens), dtype=torch.bool)
        if marks:
            starts = np.cumsum([0] + [len(token) + 1 for token in tokens[:-1]])  # where each token's line starts
            hits = [m.start() for m in re.finditer(f"^[{re.escape(marks)}]+$", text, re.MULTILINE)]
            table[torch.from_numpy(np.searchsorted(starts, np.array(hits, dtype=np.int64)))] = True
    table[[i for i in special_ids if 0 <= i < len(tokens)]] = False
    return table


def key_masks(input_ids: torch.Tensor, cls_id: int, sep_id: int, punct: torch.Tensor) -> torch.Tensor:
    """(B, 1, S, 3) float: which keys are [CLS], [SEP] and punctuation, for one batch of ids."""
    masks = torch.stack([input_ids == cls_id, input_ids == sep_id, punct[input_ids]], dim=-1)
    return masks.to(torch.float32)[:, None]
