"""bertviz's arguments checked and turned into attention sets: each a stack of per-layer (heads, queries, keys) maps
with the tokens along both sides, so a view draws self attention (square) and cross attention (rectangular) alike.

Whatever does not fit is a one-line ValueError or TypeError naming the argument, what it got and what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from bertviz_lab.util.files import shown

ENCODER_DECODER = ("encoder_attention", "decoder_attention", "cross_attention", "encoder_tokens", "decoder_tokens")
PAIR_SETS = (("all", "all", "all"), ("sentence A → sentence A", "a", "a"), ("sentence B → sentence B", "b", "b"),
             ("sentence A → sentence B", "a", "b"), ("sentence B → sentence A", "b", "a"))
HTML_ACTIONS = ("view", "return")


@dataclass(frozen=True)
class AttentionSet:
    """One choice of the views' attention dropdown: a model's self attention, a slice of it (a sentence pair's A → B),
    or an encoder-decoder's encoder, decoder or cross attention."""

    name: str  # "" where there is only one set
    maps: list[torch.Tensor]  # one float32 (heads, queries, keys) CPU tensor per layer shown
    layers: list[int]  # the model's numbers of those layers
    query_tokens: list[str]  # rows, as shown
    key_tokens: list[str]  # columns, as shown
    query_positions: list[int]  # their positions in the input
    key_positions: list[int]

    @property
    def num_heads(self) -> int:
        return int(self.maps[0].shape[0])

    @property
    def label(self) -> str:
        """The set's name in titles: 'cross attention', 'sentence A → sentence B', or '' for a model's attention."""
        return f"{self.name} attention" if self.name in ("encoder", "decoder", "cross") else self.name


def pretty_token(token: str) -> str:
    """A subword as a reader wants it: GPT-2's Ġ and SentencePiece's ▁ (a space before the word), BPE's </w> and
    WordPiece's ## (a word goes on) left out; a token that was only a space marker shows as ␣."""
    cleaned = token.replace("Ġ", " ").replace("▁", " ").replace("</w>", "")
    cleaned = cleaned[2:] if cleaned.startswith("##") and len(cleaned) > 2 else cleaned
    return cleaned.strip() or ("␣" if cleaned else token)


def check_tokens(tokens: Any, name: str, prettify: bool) -> list[str]:
    """A list of token strings (prettified for display if asked)."""
    if isinstance(tokens, str) or not isinstance(tokens, Sequence) or isinstance(tokens, (bytes, bytearray)):
        raise TypeError(f"{name} must be a list of token strings (tokenizer.convert_ids_to_tokens(ids)), got "
                        f"{type(tokens).__name__} {shown(tokens)}.")
    for i, token in enumerate(tokens):
        if not isinstance(token, str):
            raise TypeError(f"{name}[{i}] is {type(token).__name__} {shown(token)}, not a string: pass token strings "
                            "(tokenizer.convert_ids_to_tokens(ids)), not ids.")
    return [pretty_token(t) for t in tokens] if prettify else list(tokens)


def _layer_tensor(value: Any, name: str, index: int) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float32)
    if isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.number):
        return torch.from_numpy(np.asarray(value, dtype=np.float32))
    raise TypeError(f"{name}[{index}] is {type(value).__name__}; expected a torch tensor or a numpy array of "
                    "(batch, heads, queries, keys) attention weights.")


OUTPUTS_ATTENTIONS = ("pass outputs.attentions of a model run with output_attentions=True (with transformers 5 "
                      "the last output is not always the attentions)")


def layer_maps(attention: Any, name: str) -> list[torch.Tensor]:
    """Per-layer (batch 1, heads, queries, keys) weights -> per-layer (heads, queries, keys) float32 CPU tensors.
    A tuple of one tensor per layer, as output_attentions=True gives it, or those stacked in one (layers, batch,
    heads, queries, keys) tensor, as bertviz also takes."""
    if isinstance(attention, (torch.Tensor, np.ndarray)):
        if attention.ndim != 5:
            raise TypeError(f"{name} is one {type(attention).__name__} of shape {tuple(attention.shape)}; expected "
                            "a tuple with one (batch, heads, queries, keys) tensor per layer, or them stacked as "
                            f"(layers, batch, heads, queries, keys): {OUTPUTS_ATTENTIONS}.")
        attention = list(attention)
    if not isinstance(attention, Sequence) or isinstance(attention, (str, bytes)):
        raise TypeError(f"{name} must be a tuple of per-layer (batch, heads, queries, keys) tensors, got "
                        f"{type(attention).__name__}.")
    if not attention:
        raise ValueError(f"{name} holds no layers: was the model run with output_attentions=True (and eager "
                         "attention)?")
    maps: list[torch.Tensor] = []
    for i, value in enumerate(attention):
        tensor = _layer_tensor(value, name, i)
        if tensor.ndim != 4:
            raise ValueError(f"{name}[{i}] has {tensor.ndim} dimensions (shape {tuple(tensor.shape)}); expected 4: "
                             f"(batch, heads, queries, keys): {OUTPUTS_ATTENTIONS}.")
        if tensor.shape[0] != 1:
            raise ValueError(f"{name}[{i}] holds a batch of {tensor.shape[0]}; the views show one example: pass "
                             f"each layer's [i:i+1].")
        if maps and tensor.shape[1:] != maps[0].shape:
            raise ValueError(f"{name}[{i}] has shape {tuple(tensor.shape)} but {name}[0] has "
                             f"{(1, *maps[0].shape)}; every layer must have the same shape.")
        if not bool(torch.isfinite(tensor).all()):
            raise ValueError(f"{name}[{i}] holds NaN or infinite weights.")
        maps.append(tensor[0])
    return maps


def check_layers(include_layers: Any, count: int, name: str) -> list[int]:
    """The layer numbers to show: include_layers checked against the count, or every layer."""
    if include_layers is None:
        return list(range(count))
    if isinstance(include_layers, (str, bytes)) or not isinstance(include_layers, Sequence) or not include_layers:
        raise TypeError(f"include_layers must be a non-empty list of layer numbers, got {shown(include_layers)}.")
    for layer in include_layers:  # negative numbers count from the last layer, as bertviz's indexing does
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not -count <= layer < count:
            raise ValueError(f"include_layers has {shown(layer)}; {name} has layers 0..{count - 1} (or -{count}..-1 "
                             "from the last).")
    return [int(layer) % count for layer in include_layers]


def _fits(maps: list[torch.Tensor], name: str, queries: list[str], keys: list[str], query_name: str,
          key_name: str) -> None:
    Q, K = maps[0].shape[1:]
    if Q != len(queries):
        raise ValueError(f"{name} has {Q} query positions but {query_name} has {len(queries)} tokens.")
    if K != len(keys):
        raise ValueError(f"{name} has {K} key positions but {key_name} has {len(keys)} tokens.")


def _whole(name: str, maps: list[torch.Tensor], layers: list[int], queries: list[str],
           keys: list[str]) -> AttentionSet:
    return AttentionSet(name, [maps[layer] for layer in layers], layers, queries, keys, list(range(len(queries))),
                        list(range(len(keys))))


def _pair_sets(maps: list[torch.Tensor], layers: list[int], tokens: list[str],
               sentence_b_start: Any) -> list[AttentionSet]:
    """bertviz's five choices for a sentence pair: all, A → A, B → B, A → B, B → A (rows → columns)."""
    T = len(tokens)
    if isinstance(sentence_b_start, bool) or not isinstance(sentence_b_start, (int, np.integer)) \
            or not (0 < sentence_b_start < T or -T < sentence_b_start < 0):
        raise ValueError(f"sentence_b_start must be the position of sentence B's first token, 1..{T - 1} (or "
                         f"-{T - 1}..-1 from the end, as a slice counts), got {shown(sentence_b_start)}.")
    start = int(sentence_b_start) % T
    spans = {"all": range(T), "a": range(start), "b": range(start, T)}
    sets = []
    for name, rows, cols in PAIR_SETS:
        q, k = list(spans[rows]), list(spans[cols])
        chosen = [maps[layer][:, q][:, :, k] for layer in layers]
        sets.append(AttentionSet(name, chosen, layers, [tokens[i] for i in q], [tokens[i] for i in k], q, k))
    return sets


def attention_sets(attention: Any = None, tokens: Any = None, sentence_b_start: Any = None,
                   prettify_tokens: bool = True, encoder_attention: Any = None, decoder_attention: Any = None,
                   cross_attention: Any = None, encoder_tokens: Any = None, decoder_tokens: Any = None,
                   include_layers: Any = None) -> list[AttentionSet]:
    """bertviz's arguments, checked, as the sets the views' attention dropdown offers."""
    given = {"encoder_attention": encoder_attention, "decoder_attention": decoder_attention,
             "cross_attention": cross_attention, "encoder_tokens": encoder_tokens, "decoder_tokens": decoder_tokens}
    if attention is not None:
        mixed = [name for name in ENCODER_DECODER if given[name] is not None]
        if mixed:
            raise ValueError(f"give either attention= and tokens= (a self-attention model) or the encoder-decoder "
                             f"arguments, not both (got attention= and {', '.join(n + '=' for n in mixed)}).")
        if tokens is None:
            raise ValueError("attention= needs tokens=: the list of token strings the attention is over.")
        maps = layer_maps(attention, "attention")
        shown_tokens = check_tokens(tokens, "tokens", prettify_tokens)
        _fits(maps, "attention", shown_tokens, shown_tokens, "tokens", "tokens")
        if maps[0].shape[1] != maps[0].shape[2]:
            raise ValueError(f"attention has {maps[0].shape[1]} queries and {maps[0].shape[2]} keys; a model's self "
                             "attention is square (pass a rectangular one as cross_attention=).")
        layers = check_layers(include_layers, len(maps), "attention")
        if sentence_b_start is None:
            return [_whole("", maps, layers, shown_tokens, shown_tokens)]
        return _pair_sets(maps, layers, shown_tokens, sentence_b_start)
    if encoder_attention is None and decoder_attention is None and cross_attention is None:
        raise ValueError("nothing to show: give attention= and tokens=, or encoder_attention=, decoder_attention= "
                         "and/or cross_attention= with encoder_tokens= and decoder_tokens=.")
    if sentence_b_start is not None:
        raise ValueError("sentence_b_start applies to attention= (a self-attention model), not to the "
                         "encoder-decoder arguments.")
    needs = {"encoder": ("encoder_tokens",), "decoder": ("decoder_tokens",),
             "cross": ("decoder_tokens", "encoder_tokens")}
    sets = []
    for kind, value in (("encoder", encoder_attention), ("decoder", decoder_attention), ("cross", cross_attention)):
        if value is None:
            continue
        for needed in needs[kind]:
            if given[needed] is None:
                raise ValueError(f"{kind}_attention= needs {needed}=.")
        name = f"{kind}_attention"
        maps = layer_maps(value, name)
        query_name, key_name = {"encoder": ("encoder_tokens", "encoder_tokens"),
                                "decoder": ("decoder_tokens", "decoder_tokens"),
                                "cross": ("decoder_tokens", "encoder_tokens")}[kind]
        queries = check_tokens(given[query_name], query_name, prettify_tokens)
        keys = check_tokens(given[key_name], key_name, prettify_tokens)
        _fits(maps, name, queries, keys, query_name, key_name)
        sets.append(_whole(kind, maps, check_layers(include_layers, len(maps), name), queries, keys))
    return sets


def check_heads(heads: Any, count: int, name: str = "heads") -> list[int] | None:
    """Head numbers checked against a layer's count (None stays None: every head)."""
    if heads is None:
        return None
    if isinstance(heads, (str, bytes)) or not isinstance(heads, Sequence) or not heads:
        raise TypeError(f"{name} must be a non-empty list of head numbers, got {shown(heads)}.")
    for head in heads:
        if isinstance(head, bool) or not isinstance(head, (int, np.integer)) or not 0 <= head < count:
            raise ValueError(f"{name} has {shown(head)}; the layers have heads 0..{count - 1}.")
    return sorted({int(head) for head in heads})


def check_html_action(html_action: Any) -> str:
    if html_action not in HTML_ACTIONS:
        raise ValueError(f"html_action must be one of {HTML_ACTIONS}, got {shown(html_action)}.")
    return html_action
