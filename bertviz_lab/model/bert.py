"""The BERT backbone, the base class shared by every BERT model, and input validation with clear errors."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torch import nn

from bertviz_lab import kernels
from bertviz_lab.model import footprint
from bertviz_lab.model import hook_points as hooking
from bertviz_lab.model.cache import Cache, DynamicCache, EncoderDecoderCache, StaticCache
from bertviz_lab.model.config import BERTConfig
from bertviz_lab.model.hook_points import ActivationCache, Hook, HookPoint, NamesFilter
from bertviz_lab.model.layers import BERTEmbeddings, BERTEncoder, BERTPooler

if TYPE_CHECKING:
    from typing_extensions import Self

    from bertviz_lab.model.weights import LoadReport


class BERTModelOutput(NamedTuple):
    """What the backbone returns: token states, pooled [CLS] state, and the cache when decoding."""

    last_hidden_state: torch.Tensor  # (B, T, C)
    pooler_output: torch.Tensor | None  # (B, C)
    past_key_values: Cache | None = None


# what each tensor argument of forward holds, for the error when something else is passed
FORWARD_TENSORS = {
    "input_ids": "token ids", "attention_mask": "mask values (1 = attend)", "token_type_ids": "segment ids",
    "position_ids": "position ids", "inputs_embeds": "embeddings", "encoder_hidden_states": "encoder states",
    "encoder_attention_mask": "mask values (1 = attend)", "cache_position": "cache positions",
}
INDEX_DTYPES = (torch.int64, torch.int32)  # what nn.Embedding accepts as indices


def check_tensor(name: str, value: Any, holds: str) -> None:
    """A list or array where a tensor belongs fails deep inside torch; name the argument here instead."""
    if value is not None and not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of {holds}, got {type(value).__name__}; "
                        f"convert it with torch.tensor(...).")


def check_index_dtype(name: str, tensor: torch.Tensor) -> None:
    """Ids index embedding tables, which take int64 or int32 only (not float, bool or int8)."""
    if tensor.dtype not in INDEX_DTYPES:
        raise TypeError(f"{name} must be an integer tensor (torch.int64 or torch.int32), got {tensor.dtype}.")


def value_range(tensor: torch.Tensor) -> tuple[int | float, int | float]:
    """(min, max) as Python numbers, in one read-back from the tensor's device; (0, 0) when it is empty."""
    if not tensor.numel():
        return 0, 0
    return tuple(torch.stack(torch.aminmax(tensor)).tolist())


def additive_mask(mask: torch.Tensor, dtype: torch.dtype, name: str = "attention_mask") -> torch.Tensor:
    """Turn a 0/1 or boolean mask (1 = attend) into an additive one; an additive mask (values <= 0) passes through."""
    if mask.dtype == torch.bool:
        keep = mask
    elif torch.compiler.is_compiling() and not mask.is_floating_point():
        keep = mask != 0  # integer 0/1 masks (what the tokenizer and trainer produce), unchecked inside a graph
    elif mask.is_floating_point() and bool((mask <= 0).all()) and not bool((mask == 1).any()):
        return mask.to(dtype)  # already additive: 0 = attend, large negative = hidden
    elif bool(((mask == 0) | (mask == 1)).all()):
        keep = mask == 1
    else:
        raise ValueError(f"{name} must hold 0/1 (1 = attend), booleans, or additive values <= 0; "
                         f"got values in [{mask.min().item()}, {mask.max().item()}].")
    return torch.zeros(keep.shape, dtype=dtype, device=mask.device).masked_fill_(~keep, torch.finfo(dtype).min)


def expand_mask(mask: torch.Tensor, batch: int, query_len: int, key_len: int, name: str) -> torch.Tensor:
    """Check a 2D (B, S), 3D (B, T, S) or 4D (B, 1|nh, T, S) mask against the input and make it 4D."""
    expected = {2: "(batch, key_len)", 3: "(batch, query_len, key_len)", 4: "(batch, 1 or heads, query_len, key_len)"}
    if mask.is_complex():
        raise TypeError(f"{name} must be a bool, integer or float tensor, got {mask.dtype}.")
    if mask.dim() not in expected:
        raise ValueError(f"{name} must be 2D, 3D or 4D, got shape {tuple(mask.shape)}.")
    given, given_dim = tuple(mask.shape), mask.dim()
    if mask.dim() == 2:
        mask = mask[:, None, None, :]
    elif mask.dim() == 3:
        mask = mask[:, None, :, :]
    b, _, q, k = mask.shape
    if b not in (1, batch) or q not in (1, query_len) or k != key_len:
        raise ValueError(f"{name} has shape {given} but the input needs {expected[given_dim]} with "
                         f"batch={batch}, query_len={query_len}, key_len={key_len}.")
    return mask


class BERTPreTrainedModel(nn.Module):
    """Shared by the backbone and the heads: config, initialisation, devices, loading and saving."""

    config: BERTConfig
    load_report: LoadReport  # set by from_pretrained: what the checkpoint lacked or had besides
    base_model_prefix = "bert"

    def __init__(self, config: BERTConfig) -> None:
        super().__init__()
        if not isinstance(config, BERTConfig):
            raise TypeError(f"config must be a BERTConfig, got {type(config).__name__}.")
        footprint.check_model(config, type(self), torch.get_default_dtype())  # before any parameter is made
        self.config = config

    def _init_weights(self, module: nn.Module) -> None:
        """N(0, initializer_range) weights, zero biases, zeroed padding row, unit LayerNorm."""
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def post_init(self) -> None:
        """Initialise every weight, tie the output embeddings to the input ones, name the hook points and give each
        layer its backends for the device and dtype of its weights (bertviz_lab.kernels.choose: attention, the
        packed CPU GEMM, GELU, add + LayerNorm; the modules stay plain nn.Linear and nn.LayerNorm)."""
        self.apply(self._init_weights)
        self.tie_weights()
        self.hook_points()
        kernels.choose(self)

    def _apply(self, fn: Any, recurse: bool = True) -> Self:
        """Moving or casting the model (to, cuda, half, ...) gives its layers the backends for where and what their
        weights are now."""
        super()._apply(fn, recurse)  # type: ignore[no-untyped-call]  # torch leaves Module._apply unannotated
        kernels.choose(self)
        return self

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A copy or an unpickled model is given its backends like a new one, by the rules it had."""
        super().__setstate__(state)  # type: ignore[no-untyped-call]  # unannotated in torch
        kernels.choose(self)

    def set_backend(self, *, attention: str | None = None, cpu_gemm: str | None = None,
                    fast: bool | None = None, compiled: bool | None = None) -> None:
        """Run `attention` ("eager", "sdpa", "avx2") and the CPU GEMM `cpu_gemm` ("avx2", "onednn", "mkl", "off")
        in this model from now on ("auto": this machine's choice); `compiled=True` runs the encoder as one
        torch.compile graph for fp32 CPU inference batches of 512 tokens or more (batch throughput; the first such
        batch compiles it, 10-25 s); `fast=False` plain PyTorch everywhere. No other model changes
        (bertviz_lab.kernels.override(model, ...) does the same for a block)."""
        kernels.set_backend(self, attention=attention, cpu_gemm=cpu_gemm, fast=fast, compiled=compiled)

    # hooks, as TransformerLens has them -----------------------------------------------------------------------
    def hook_points(self) -> dict[str, HookPoint]:
        """Every hook point by name (each point's `name` is its key here)."""
        return hooking.hook_points(self)

    def hooks(self, fwd_hooks: Iterable[tuple[NamesFilter, Hook]] = (), *,
              bwd_hooks: Iterable[tuple[NamesFilter, Hook]] = ()) -> contextlib.AbstractContextManager[nn.Module]:
        """A block in which each `(name_or_filter, hook)` is on the points it selects; `hook(tensor, point)` may
        return a replacement, and so may a backward hook `hook(grad, point)` (on the gradient of the point's tensor
        when a backward pass inside the block reaches it). Every one of them is removed on exit, also after an
        error."""
        return hooking.hooks(self, fwd_hooks, bwd_hooks=bwd_hooks)

    def run_with_cache(self, *model_args: Any, names_filter: NamesFilter = None,
                       device: str | torch.device | None = None, incl_bwd: bool = False,
                       metric: Callable[[Any], torch.Tensor] | None = None,
                       **model_kwargs: Any) -> tuple[Any, ActivationCache]:
        """The forward's output and an ActivationCache keyed by hook name of the points `names_filter` selects (a
        name, names, a predicate; all by default), detached, on `device` (default where they were computed).
        `incl_bwd=True` adds each point's gradient of `metric(output)` (a scalar) as NAME + "_grad", with grad
        enabled for this call even under torch.no_grad() (not under torch.inference_mode(): an error)."""
        return hooking.run_with_cache(self, *model_args, names_filter=names_filter, device=device,
                                      incl_bwd=incl_bwd, metric=metric, **model_kwargs)

    def tie_weights(self) -> None:
        """Heads with an MLM decoder share its weight with the word embeddings (when configured)."""

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    def to(self, *args: Any, **kwargs: Any) -> Self:
        """Like nn.Module.to, and also accepts "auto" and "gpu" and checks the device exists."""
        from bertviz_lab.device import select_device

        if args and args[0] is not None and not isinstance(args[0], (torch.dtype, torch.Tensor)):
            args = (select_device(args[0]), *args[1:])  # to(device, ...): the other forms are to(dtype), to(tensor)
        elif kwargs.get("device") is not None:
            kwargs["device"] = select_device(kwargs["device"])
        return super().to(*args, **kwargs)

    def num_parameters(self, trainable_only: bool = False) -> int:
        """Number of parameters, tied weights counted once."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    @classmethod
    def from_pretrained(cls, path_or_weights: Any = None, *, weights: Any = None, config: BERTConfig | None = None,
                        device: str | torch.device | None = None, strict: bool = False, revision: str | None = None,
                        cache_dir: str | os.PathLike[str] | None = None, local_files_only: bool = False,
                        token: str | bool | None = None) -> Self:
        """Load a checkpoint folder, a BERT_Weights entry or a Hub repo id ("bert-base-uncased"); see weights.py."""
        from bertviz_lab.model.weights import HubOptions, load_pretrained

        hub = HubOptions(revision=revision, cache_dir=cache_dir, local_files_only=local_files_only, token=token)
        return load_pretrained(cls, weights if weights is not None else path_or_weights, config=config,
                               device=device, strict=strict, hub=hub)

    def save_pretrained(self, directory: str | os.PathLike[str]) -> None:
        """Write config.json and model.safetensors with Hugging Face parameter names."""
        from bertviz_lab.model.weights import save_pretrained

        save_pretrained(self, directory)


class BERT(BERTPreTrainedModel):
    """The BERT encoder (or decoder, with is_decoder) without a task head."""

    base_model_prefix = ""
    hf_architecture = "BertModel"

    def __init__(self, config: BERTConfig, add_pooling_layer: bool | None = None) -> None:
        super().__init__(config)
        self.embeddings = BERTEmbeddings(config)
        self.encoder = BERTEncoder(config)
        add_pooling_layer = config.add_pooling_layer if add_pooling_layer is None else add_pooling_layer
        self.pooler = BERTPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embeddings.word_embeddings = value

    def _check_tensors(self, inputs: dict[str, Any]) -> None:
        """Every tensor argument is a tensor, on the model's device (torch's own errors name neither)."""
        device = self.device
        for name, value in inputs.items():
            check_tensor(name, value, FORWARD_TENSORS[name])
            if value is not None and value.device != device:
                raise ValueError(f"{name} is on {value.device} but the model is on {device}; "
                                 f"move it with {name}.to(model.device).")

    def _check_inputs(self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None,
                      token_type_ids: torch.Tensor | None, position_ids: torch.Tensor | None,
                      encoder_hidden_states: torch.Tensor | None, past_length: int) -> tuple[int, int]:
        if torch.compiler.is_compiling():  # value checks read tensors back: checked eagerly, not in compiled graphs
            given = input_ids if input_ids is not None else inputs_embeds
            assert given is not None  # exactly one of them, as the eager runs checked
            rows, length = given.shape[:2]
            return rows, length
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids or inputs_embeds.")
        if input_ids is not None:
            shape, name = self._check_ids(input_ids), "input_ids"
        else:
            assert inputs_embeds is not None  # exactly one of the two, checked above
            shape, name = self._check_embeds(inputs_embeds), "inputs_embeds"
        if shape[0] == 0:
            raise ValueError(f"{name} has 0 rows: a batch needs at least one sequence.")
        if shape[1] == 0:
            raise ValueError(f"{name} has 0 tokens per row (shape {shape}): pass at least one token.")
        if position_ids is None and past_length + shape[1] > self.config.max_positions:
            raise ValueError(f"sequence of {past_length + shape[1]} positions is longer than the model allows "
                             f"(max_position_embeddings={self.config.max_position_embeddings}); truncate the input.")
        if position_ids is not None:
            self._check_position_ids(position_ids, shape)
        if token_type_ids is not None:
            self._check_token_type_ids(token_type_ids, shape)
        if encoder_hidden_states is not None:
            self._check_encoder_states(encoder_hidden_states, shape[0])
        return shape

    def _check_ids(self, input_ids: torch.Tensor) -> tuple[int, int]:
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be 2D (batch, seq_len), got shape {tuple(input_ids.shape)}.")
        check_index_dtype("input_ids", input_ids)
        low, high = value_range(input_ids)
        vocab_size = self.config.vocab_size
        if low < 0 or high >= vocab_size:
            bad = high if high >= vocab_size else low
            raise ValueError(f"input_ids contains token id {bad}, outside the vocabulary [0, {vocab_size}).")
        rows, length = input_ids.shape  # 2-D, checked above
        return rows, length

    def _check_embeds(self, inputs_embeds: torch.Tensor) -> tuple[int, int]:
        """Shape and dtype only: NaN/Inf pass through, since looking for them would cost a device sync per call."""
        if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != self.config.embedding_width:
            raise ValueError(f"inputs_embeds must be (batch, seq_len, {self.config.embedding_width}), "
                             f"got {tuple(inputs_embeds.shape)}.")
        if inputs_embeds.dtype != self.dtype:
            raise TypeError(f"inputs_embeds is {inputs_embeds.dtype} but the model is {self.dtype}; convert them "
                            f"with inputs_embeds.to(model.dtype).")
        rows, length = inputs_embeds.shape[:2]
        return rows, length

    def _check_position_ids(self, position_ids: torch.Tensor, shape: tuple[int, int]) -> None:
        if position_ids.dim() not in (1, 2) or position_ids.shape[-1] != shape[1] \
                or (position_ids.dim() == 2 and position_ids.shape[0] not in (1, shape[0])):
            raise ValueError(f"position_ids has shape {tuple(position_ids.shape)}, expected {shape} "
                             f"or (1, {shape[1]}).")
        check_index_dtype("position_ids", position_ids)
        low, high = value_range(position_ids)
        if low < 0:
            raise ValueError(f"position_ids must be >= 0, got {low}.")
        if high >= self.config.max_position_embeddings:
            raise ValueError(f"position_ids reach {high}, but max_position_embeddings is "
                             f"{self.config.max_position_embeddings}.")

    def _check_token_type_ids(self, token_type_ids: torch.Tensor, shape: tuple[int, int]) -> None:
        if token_type_ids.shape[-1] != shape[1] or token_type_ids.dim() != 2 \
                or token_type_ids.shape[0] not in (1, shape[0]):
            raise ValueError(f"token_type_ids has shape {tuple(token_type_ids.shape)}, expected {shape}.")
        check_index_dtype("token_type_ids", token_type_ids)
        low, high = value_range(token_type_ids)
        if low < 0 or high >= self.config.type_vocab_size:
            raise ValueError(f"token_type_ids must lie in [0, {self.config.type_vocab_size}), got values in "
                             f"[{low}, {high}].")

    def _check_encoder_states(self, states: torch.Tensor, batch: int) -> None:
        C = self.config.hidden_size
        if states.dim() != 3 or states.shape[0] != batch or states.shape[1] == 0 or states.shape[2] != C:
            raise ValueError(f"encoder_hidden_states has shape {tuple(states.shape)}, expected "
                             f"(batch={batch}, enc_len >= 1, {C}).")
        if states.dtype != self.dtype:
            raise TypeError(f"encoder_hidden_states is {states.dtype} but the model is {self.dtype}; convert them "
                            f"with encoder_hidden_states.to(model.dtype).")

    def _self_attention_mask(self, attention_mask: torch.Tensor | None, batch: int, seq_len: int, past_length: int,
                             key_len: int, cache_position: torch.Tensor | None, dtype: torch.dtype,
                             device: torch.device) -> torch.Tensor | None:
        mask = None
        if attention_mask is not None:
            expanded = expand_mask(attention_mask, batch, seq_len, key_len, "attention_mask")
            # nothing to hide (one read-back): leave the mask out, SDPA's unmasked kernel is faster
            hides_nothing = attention_mask.dim() == 2 and not self.config.is_decoder \
                and not torch.compiler.is_compiling() and bool((attention_mask == 1).all())
            if not hides_nothing:
                mask = additive_mask(expanded, dtype)
        if self.config.is_decoder:
            assert cache_position is not None  # forward gives a decoder its positions in the cache
            key_positions = torch.arange(key_len, device=device)
            allowed = key_positions[None, :] <= cache_position[:, None]  # (T, S)
            causal = torch.zeros((seq_len, key_len), dtype=dtype, device=device)
            causal.masked_fill_(~allowed, torch.finfo(dtype).min)
            mask = causal[None, None] if mask is None else (mask + causal).clamp_min(torch.finfo(dtype).min)
        return mask

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                inputs_embeds: torch.Tensor | None = None, encoder_hidden_states: torch.Tensor | None = None,
                encoder_attention_mask: torch.Tensor | None = None, past_key_values: Cache | None = None,
                use_cache: bool | None = None, cache_position: torch.Tensor | None = None) -> BERTModelOutput:
        """Token states (B, T, C) and pooled [CLS] state; NaN or Inf in inputs_embeds flow through unchecked."""
        config = self.config
        if not torch.compiler.is_compiling():
            self._check_tensors(dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                                     position_ids=position_ids, inputs_embeds=inputs_embeds,
                                     encoder_hidden_states=encoder_hidden_states,
                                     encoder_attention_mask=encoder_attention_mask, cache_position=cache_position))
        use_cache = bool(config.is_decoder and (config.use_cache if use_cache is None else use_cache))
        if past_key_values is not None and not config.is_decoder:
            raise ValueError("past_key_values needs a decoder: build the model with BERTConfig(is_decoder=True).")
        if use_cache and past_key_values is None:
            past_key_values = EncoderDecoderCache() if config.add_cross_attention else DynamicCache()
        past_length = past_key_values.get_seq_length() if past_key_values is not None else 0
        if cache_position is not None and cache_position.numel():
            past_length = int(cache_position[0])
        B, T = self._check_inputs(input_ids, inputs_embeds, token_type_ids, position_ids,
                                   encoder_hidden_states, past_length)
        given = input_ids if input_ids is not None else inputs_embeds
        assert given is not None  # _check_inputs took exactly one of them
        device = given.device
        if cache_position is None and config.is_decoder:  # positions of this step's tokens in the cache
            cache_position = torch.arange(past_length, past_length + T, device=device)
        if position_ids is None and past_length:
            assert cache_position is not None  # a past length comes with cache_position or a decoder's (set above)
            position_ids = cache_position.unsqueeze(0)

        x = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds, past_length)  # (B, T, C)
        self_cache = getattr(past_key_values, "self_attention_cache", past_key_values)
        key_len = self_cache.max_cache_len if isinstance(self_cache, StaticCache) else past_length + T
        mask = self._self_attention_mask(attention_mask, B, T, past_length, key_len, cache_position, x.dtype, device)
        cross_mask = None
        if encoder_hidden_states is not None and encoder_attention_mask is not None:
            cross_mask = additive_mask(expand_mask(encoder_attention_mask, B, T, encoder_hidden_states.shape[1],
                                                   "encoder_attention_mask"), x.dtype, "encoder_attention_mask")
        x = self.encoder(x, mask, encoder_hidden_states, cross_mask, past_key_values, cache_position)
        pooled = self.pooler(x) if self.pooler is not None else None
        return BERTModelOutput(x, pooled, past_key_values if use_cache else None)
