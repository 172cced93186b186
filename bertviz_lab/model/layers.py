"""BERT building blocks: embeddings, attention, feed-forward, layer, encoder, pooler.

Shapes: B batch, T query length, S key length, C hidden size, nh heads, hs head size.
Module and parameter names follow Hugging Face's BERT except the fused projections
(`attention.self.qkv`, `crossattention.self.kv`), which weights.py splits and joins.
Attention is written out below (`BERTSelfAttention.attention`), and so are the linear layers, residual add +
LayerNorm and the activation, as plain nn.Linear / nn.LayerNorm / GELU. The model gives each layer its backends once
for the device and dtype of its weights (bertviz_lab.kernels.choose: SDPA or the CPU attention kernel, a GEMM on
packed CPU weights, GELU in that GEMM's epilogue, add + LayerNorm in one GPU kernel); each computes the same thing
faster from tensors, is reached through one call, and stands aside (answers None) where it does not apply. A layer
whose modules someone hooks calls them as modules. HookPoints mark the tensors a trace or a hook can read or replace;
a watched `probs` point makes its layer write the attention out, a watched `attn_out` or `mlp_out` makes its
block add and normalise with the plain modules. Inside `attention_statistics(...)` a self-attention
layer also answers its per-head statistics (attention_statistics.py), through the backend's `with_statistics`.
A model that asks for it (`set_backend(compiled=True)`) gives the encoder one more backend, its layers as a compiled
graph for large inference batches, which the encoder calls only where no hook could watch a layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules import module as _module

from bertviz_lab import kernels
from bertviz_lab.model.attention_statistics import StatisticsRequest, current_request
from bertviz_lab.model.cache import Cache, EncoderDecoderCache
from bertviz_lab.model.config import BERTConfig
from bertviz_lab.model.families import family_of
from bertviz_lab.model.hook_points import HookPoint


def sinusoidal_table(num_positions: int, dim: int) -> torch.Tensor:
    """The fixed sin/cos position table of 'Attention Is All You Need'; (num_positions, dim)."""
    position = torch.arange(num_positions, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(num_positions, dim)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq[: dim // 2])
    return table


def hooked(*modules: nn.Module) -> bool:
    """Whether a hook could see these modules run (their own or a module-wide one): then they run as modules."""
    if _module._global_forward_hooks or _module._global_forward_pre_hooks:
        return True
    return any(m._forward_hooks or m._forward_pre_hooks for m in modules)


def linear(layer: nn.Linear, x: torch.Tensor, gemm: kernels.PackedLinear | None) -> torch.Tensor:
    """layer(x) = x @ W.T + b, computed by `gemm` (the packed CPU GEMM the model was given) where it applies; a
    hooked layer is still called as a module, its hooks run around the GEMM's product."""
    if gemm is None or torch.compiler.is_compiling():
        plain: torch.Tensor = layer(x)
        return plain
    if hooked(layer):
        return _hooked_linear(layer, x, gemm)
    y = gemm(x, layer.weight, layer.bias)
    if y is None:
        y = layer(x)
    return y


def _hooked_linear(layer: nn.Linear, x: torch.Tensor, gemm: kernels.PackedLinear) -> torch.Tensor:
    """layer(x) with its hooks, the product from `gemm` for this one call (a trace recording module calls keeps
    the model's speed and its output bits)."""
    def forward(x: torch.Tensor) -> torch.Tensor:
        y = gemm(x, layer.weight, layer.bias)
        return F.linear(x, layer.weight, layer.bias) if y is None else y

    return _call_with_forward(layer, forward, x)


def _call_with_forward(module: nn.Module, forward: Callable[[torch.Tensor], torch.Tensor],
                       x: torch.Tensor) -> torch.Tensor:
    """module(x), its hooks run around `forward` for this one call; the module keeps its class (nn.Linear,
    nn.LayerNorm) for hooks and checkpoints."""
    vars(module)["forward"] = forward  # nn.Module runs the hooks around `forward`
    try:
        y: torch.Tensor = module(x)
        return y
    finally:
        vars(module).pop("forward", None)


def layer_norm(norm: nn.LayerNorm, x: torch.Tensor, fused: kernels.AddLayerNorm | None) -> torch.Tensor:
    """norm(x), in the arithmetic of the add + LayerNorm backend the layer was given where it applies (a hooked
    LayerNorm is still called as a module): a traced forward gives the output of an untraced one bit for bit."""
    if fused is None:
        plain: torch.Tensor = norm(x)
        return plain

    def forward(x: torch.Tensor) -> torch.Tensor:
        y = fused.layer_norm(x, norm.weight, norm.bias, norm.eps)
        return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps) if y is None else y

    return _call_with_forward(norm, forward, x) if hooked(norm) else forward(x)


class BERTEmbeddings(nn.Module):
    """Word + position + token-type embeddings, then LayerNorm and dropout; the family (families.py) decides where
    positions start (RoBERTa: after the padding index), whether token types exist (not in DistilBERT) and whether
    narrower embeddings are projected up to the hidden size (ELECTRA)."""

    position_table: torch.Tensor  # a buffer, registered for sinusoidal positions only

    def __init__(self, config: BERTConfig) -> None:
        super().__init__()
        self.config = config
        self.family = family_of(config)
        E, C = config.embedding_width, config.hidden_size
        self.word_embeddings = nn.Embedding(config.vocab_size, E, padding_idx=config.pad_token_id)
        if config.position_embedding_type == "absolute":
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, E)
        else:
            self.register_buffer("position_table", sinusoidal_table(config.max_position_embeddings, E),
                                 persistent=False)
        if self.family.token_types:
            self.token_type_embeddings = nn.Embedding(config.type_vocab_size, E)
        self.LayerNorm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        if E != C:
            self.project = nn.Linear(E, C)  # ELECTRA's embeddings_project
        self.hidden = HookPoint()

    def position_ids(self, input_ids: torch.Tensor | None, B: int, T: int, past_length: int,
                     device: torch.device) -> torch.Tensor:
        """0, 1, 2, ... after any cached tokens; RoBERTa counts only non-pad tokens from padding_idx + 1 and gives
        padding the padding index."""
        if not self.family.positions_after_padding:
            return torch.arange(past_length, past_length + T, device=device).unsqueeze(0)
        pad = self.config.pad_token_id or 0
        if input_ids is None:  # no ids to find padding in: every token counts
            return torch.arange(pad + 1 + past_length, pad + 1 + past_length + T, device=device).unsqueeze(0)
        real = (input_ids != pad).long()  # (B, T)
        return (torch.cumsum(real, dim=1) + past_length) * real + pad

    def forward(self, input_ids: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
                past_length: int = 0) -> torch.Tensor:
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)  # (B, T, E)
        B, T = inputs_embeds.shape[:2]
        if position_ids is None:
            position_ids = self.position_ids(input_ids, B, T, past_length, inputs_embeds.device)
        if self.config.position_embedding_type == "absolute":
            positions = self.position_embeddings(position_ids)
        else:
            positions = self.position_table[position_ids].to(inputs_embeds.dtype)
        x = inputs_embeds + positions
        if self.family.token_types:
            if token_type_ids is None:
                token_type_ids = torch.zeros((1, T), dtype=torch.long, device=inputs_embeds.device)
            x = x + self.token_type_embeddings(token_type_ids)
        x = self.dropout(self.LayerNorm(x))
        if hasattr(self, "project"):
            x = self.project(x)  # (B, T, C)
        return self.hidden(x)


class BERTSelfAttention(nn.Module):
    """Multi-head attention over fused projections; the probabilities are formed only when a hook watches them."""

    def __init__(self, config: BERTConfig, layer_idx: int, is_cross_attention: bool = False) -> None:
        super().__init__()
        C = config.hidden_size
        self.num_heads, self.head_size = config.num_attention_heads, config.head_size
        self.scale = 1.0 / math.sqrt(self.head_size)  # of q . k
        self.layer_idx, self.is_cross_attention = layer_idx, is_cross_attention
        self.is_decoder = config.is_decoder
        if is_cross_attention:
            self.query = nn.Linear(C, C)
            self.kv = nn.Linear(C, 2 * C)
        else:
            self.qkv = nn.Linear(C, 3 * C)
        self.dropout_p = config.attention_probs_dropout_prob
        # given once per device and dtype by the model (kernels.choose); None: the math of `attention` below, and
        # the nn.Linear projections
        self.attention_backend: kernels.AttentionBackend | None = None
        self.linear_backend: kernels.PackedLinear | None = None
        self.q, self.k, self.v = HookPoint(), HookPoint(), HookPoint()  # (B, nh, T|S, hs)
        self.probs = HookPoint()  # (B, nh, T, S) attention probabilities, only computed when watched
        self.context = HookPoint()  # (B, nh, T, hs) each head's output, before the output projection

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, -1, self.head_size).transpose(1, 2)  # (B, nh, T, hs)

    def _project(self, hidden_states: torch.Tensor, encoder_hidden_states: torch.Tensor | None,
                 cache: Cache | None, cache_position: torch.Tensor | None,
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if not self.is_cross_attention:
            qkv = linear(self.qkv, hidden_states, self.linear_backend)  # (B, T, 3C)
            q, k, v = self._heads(qkv).chunk(3, dim=1)  # 3 x (B, nh, T, hs)
            if cache is not None:
                k, v = cache.update(k, v, self.layer_idx, cache_position)
            return q, k, v
        q = self._heads(linear(self.query, hidden_states, self.linear_backend))
        cached = cache.cross_attention(self.layer_idx) if isinstance(cache, EncoderDecoderCache) else None
        if cached is not None:
            return (q, *cached)
        assert encoder_hidden_states is not None  # the layer runs its cross-attention only where they are given
        kv = linear(self.kv, encoder_hidden_states, self.linear_backend)  # (B, S, 2C)
        k, v = self._heads(kv).chunk(2, dim=1)  # 2 x (B, nh, S, hs)
        if isinstance(cache, EncoderDecoderCache):
            cache.set_cross_attention(self.layer_idx, k, v)
        return q, k, v

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                encoder_hidden_states: torch.Tensor | None = None, cache: Cache | None = None,
                cache_position: torch.Tensor | None = None) -> torch.Tensor:
        B, T, C = hidden_states.shape
        q, k, v = self._project(hidden_states, encoder_hidden_states, cache, cache_position)
        q, k, v = self.q(q), self.k(k), self.v(v)
        dropout_p = self.dropout_p if self.training else 0.0
        backend, request = self.attention_backend, None if self.is_cross_attention else current_request()
        if request is not None and request.wants(self.layer_idx):
            y = self._with_statistics(q, k, v, attention_mask, dropout_p, request)
            assert y is not None  # None only after the request's last layer, whose statistics stopped the forward
        elif backend is None or self.probs.is_watched:
            # the plain path: a hook on the probabilities sees them and may replace them
            y = self.attention(q, k, v, attention_mask, dropout_p)
        else:  # the backend given to this layer for its device and dtype computes what `attention` does, faster
            y = backend(q, k, v, attention_mask, self.scale, dropout_p)
        y = self.context(y)  # (B, nh, T, hs)
        return y.transpose(1, 2).reshape(B, T, C)

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                  dropout_p: float) -> torch.Tensor:
        """softmax(q @ k.T * scale + mask) @ v, the probabilities passed through the `probs` hook point (whose
        hooks may replace them)."""
        probs = self.probs(self._softmax(q, k, mask).to(q.dtype))  # (B, nh, T, S)
        return F.dropout(probs, dropout_p, training=dropout_p > 0) @ v  # (B, nh, T, hs)

    def _softmax(self, q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """softmax(q @ k.T * scale + mask) in float32, scaled and masked in place: the (B, nh, T, S) scores are
        allocated once (at 8 x 512 this takes a third less time than new tensors for each step)."""
        scores = (q @ k.transpose(-2, -1)).mul_(self.scale)  # (B, nh, T, S)
        if mask is not None:
            scores = scores.add_(mask)  # 0 where a query may attend, very negative where not
        return scores.softmax(dim=-1, dtype=torch.float32)

    def _with_statistics(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                         dropout_p: float, request: StatisticsRequest) -> torch.Tensor | None:
        """The attention output (None after the request's last layer) and, delivered to `request`, this layer's
        per-head statistics: from the backend's `with_statistics` where it runs, else from the probabilities of the
        plain path (reduced in float32)."""
        output = request.needs_output(self.layer_idx)
        backend = self.attention_backend
        if backend is not None and not self.probs.is_watched and not self.is_decoder and not dropout_p:
            y, statistics = backend.with_statistics(q, k, v, mask, self.scale, request.valid, request.kinds, output)
        else:
            exact = self._softmax(q.float(), k.float(), mask)
            probs = self.probs(exact.to(q.dtype))  # hooks see the probabilities, and may replace them
            reduced = probs.float() if self.probs.is_watched else exact  # what the layer attended with
            statistics = request.from_probabilities(reduced)
            y = F.dropout(probs, dropout_p, training=dropout_p > 0) @ v if output else None
        request.deliver(self.layer_idx, statistics)  # raises StatisticsCollected after the last layer asked for
        return y


class BERTOutput(nn.Module):
    """Projection back to the hidden size, dropout, residual, post-LayerNorm (after attention and after the MLP).

    `point` names the HookPoint on the block's output before the residual add (`attn_out` after attention,
    `mlp_out` after the feed-forward), so the names read as TransformerLens's. `heads` (attention only) adds the
    `head_out` point: each head's context times its columns of the projection, (B, nh, T, C), formed only while a
    hook watches it; the output is then the sum of those (possibly replaced) contributions plus the bias."""

    def __init__(self, config: BERTConfig, in_features: int, point: str, heads: int = 0) -> None:
        super().__init__()
        self.dense = nn.Linear(in_features, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        # given once per device and dtype by the model (kernels.choose); None: the plain modules
        self.linear_backend: kernels.PackedLinear | None = None
        self.add_layer_norm_backend: kernels.AddLayerNorm | None = None
        self.heads = heads
        if heads:
            self.head_out = HookPoint()  # (B, nh, T, C) each head's share of the projection, only formed when watched
        self.point_name = point
        self.add_module(point, HookPoint())  # (B, T, C) the block's output before the residual add

    @property
    def point(self) -> HookPoint:
        """The output's hook point (`attn_out` or `mlp_out`)."""
        return cast(HookPoint, self._modules[self.point_name])

    def forward(self, hidden_states: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        if self.heads and self.head_out.is_watched:
            y = self._from_heads(hidden_states)
        else:
            y = linear(self.dense, hidden_states, self.linear_backend)  # (B, T, C)
        point, fused = self.point, self.add_layer_norm_backend  # fused: the sum and the LayerNorm in one pass
        if fused is not None and not point.is_watched and not hooked(self.LayerNorm, self.dropout):
            norm, dropout_p = self.LayerNorm, self.dropout.p if self.training else 0.0
            out = fused(y, residual, norm.weight, norm.bias, norm.eps, dropout_p)
            if out is not None:
                return out
        return layer_norm(self.LayerNorm, point(self.dropout(y)) + residual, fused)  # (B, T, C)

    def _from_heads(self, context: torch.Tensor) -> torch.Tensor:
        """dense(context) as the sum over heads of each head's contribution, which passes the `head_out` point (a
        hook may replace it) first; the product is written out (no GEMM backend, no hooks of `dense`)."""
        B, T, _ = context.shape
        weight = self.dense.weight  # (C, nh * hs): head h owns the columns h * hs ... (h + 1) * hs
        per_head = torch.einsum("bthd,chd->bhtc", context.view(B, T, self.heads, -1),
                                weight.view(weight.shape[0], self.heads, -1))  # (B, nh, T, C)
        return self.head_out(per_head).sum(dim=1) + self.dense.bias


class BERTAttention(nn.Module):
    """Self- or cross-attention followed by its output projection."""

    def __init__(self, config: BERTConfig, layer_idx: int, is_cross_attention: bool = False) -> None:
        super().__init__()
        self.self = BERTSelfAttention(config, layer_idx, is_cross_attention)
        self.output = BERTOutput(config, config.hidden_size, "attn_out", heads=config.num_attention_heads)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                encoder_hidden_states: torch.Tensor | None = None, cache: Cache | None = None,
                cache_position: torch.Tensor | None = None) -> torch.Tensor:
        y = self.self(hidden_states, attention_mask, encoder_hidden_states, cache, cache_position)
        out: torch.Tensor = self.output(y, hidden_states)
        return out


class BERTIntermediate(nn.Module):
    """First feed-forward projection and activation."""

    def __init__(self, config: BERTConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = config.activation()
        # given once per device and dtype by the model (kernels.choose; GELU's for a GELU hidden_act); None: the
        # plain nn.Linear and activation
        self.linear_backend: kernels.PackedLinear | None = None
        self.gelu_backend: kernels.LinearGELU | None = None
        self.act = HookPoint()  # (B, T, intermediate) after the activation

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        fused = self.gelu_backend  # act(dense(x)) as one GEMM with GELU in its epilogue, where it applies
        if fused is not None and not hooked(self.dense):
            y = fused(hidden_states, self.dense.weight, self.dense.bias)
            if y is not None:
                return self.act(y)
        y = linear(self.dense, hidden_states, self.linear_backend)  # (B, T, intermediate)
        activated = None if fused is None else fused.gelu(y)  # a hooked dense: the fused pass's GELU arithmetic
        return self.act(self.intermediate_act_fn(y) if activated is None else activated)


class BERTLayer(nn.Module):
    """One post-LN transformer block: attention, optional cross-attention, chunkable feed-forward."""

    def __init__(self, config: BERTConfig, layer_idx: int) -> None:
        super().__init__()
        self.chunk_size = config.chunk_size_feed_forward
        self.attention = BERTAttention(config, layer_idx)
        if config.add_cross_attention:
            self.crossattention = BERTAttention(config, layer_idx, is_cross_attention=True)
        self.resid_mid = HookPoint()  # (B, T, C) the residual stream the feed-forward reads
        self.intermediate = BERTIntermediate(config)
        self.output = BERTOutput(config, config.intermediate_size, "mlp_out")
        self.hidden = HookPoint()  # (B, T, C) the residual stream after this layer

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        """Intermediate + output on (a chunk of) the sequence."""
        y: torch.Tensor = self.output(self.intermediate(x), x)
        return y

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                encoder_hidden_states: torch.Tensor | None = None, encoder_attention_mask: torch.Tensor | None = None,
                cache: Cache | None = None, cache_position: torch.Tensor | None = None) -> torch.Tensor:
        x = self.attention(hidden_states, attention_mask, cache=cache, cache_position=cache_position)
        if encoder_hidden_states is not None:
            if not hasattr(self, "crossattention"):
                raise ValueError("encoder_hidden_states were given but this model has no cross-attention "
                                 "(build it with BERTConfig(is_decoder=True, add_cross_attention=True)).")
            x = self.crossattention(x, encoder_attention_mask, encoder_hidden_states, cache=cache)
        x = self.resid_mid(x)
        if self.chunk_size:
            T = x.shape[1]
            if T % self.chunk_size:
                raise ValueError(f"sequence length {T} is not a multiple of chunk_size_feed_forward={self.chunk_size}; "
                                 "pad the input or choose a chunk size that divides it.")
        if self.chunk_size and not (self.intermediate.act.is_watched or self.output.point.is_watched):
            x = torch.cat([self.feed_forward(part) for part in torch.split(x, self.chunk_size, dim=1)], dim=1)
        else:
            x = self.feed_forward(x)
        return self.hidden(x)


class BERTEncoder(nn.Module):
    """The stack of layers. A model that asked for it (set_backend(compiled=True)) runs them as one compiled graph
    for large inference batches, wherever no hook could watch them and no statistics are asked for."""

    def __init__(self, config: BERTConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(BERTLayer(config, i) for i in range(config.num_hidden_layers))
        self.compiled_backend: kernels.CompiledLayers | None = None  # given by the model (kernels.choose)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                encoder_hidden_states: torch.Tensor | None = None, encoder_attention_mask: torch.Tensor | None = None,
                cache: Cache | None = None, cache_position: torch.Tensor | None = None) -> torch.Tensor:
        compiled = self.compiled_backend
        if (compiled is not None and encoder_hidden_states is None and cache is None and not self.training
                and current_request() is None and not hooked(*self.layer.modules())):
            y = compiled(self.layer, hidden_states, attention_mask)
            if y is not None:
                return y
        for layer in self.layer:
            hidden_states = layer(hidden_states, attention_mask, encoder_hidden_states, encoder_attention_mask,
                                  cache, cache_position)
        return hidden_states


class BERTPooler(nn.Module):
    """Dense + tanh on the first ([CLS]) token."""

    def __init__(self, config: BERTConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()
        self.linear_backend: kernels.PackedLinear | None = None  # given by the model (kernels.choose)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        pooled: torch.Tensor = self.activation(linear(self.dense, hidden_states[:, 0], self.linear_backend))
        return pooled
