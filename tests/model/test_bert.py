"""The BERT backbone against transformers.BertModel (real checkpoint and random tiny ones), masks, the explicit
attention path, decoding with caches, chunked feed-forward, initialisation and input validation."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import transformers
from tiny_models import tiny_config, tiny_fields

from bertviz_lab.model import BERT, BERTConfig, DynamicCache, EncoderDecoderCache, StaticCache
from bertviz_lab.model.weights import BERT_Weights

ATOL = 1e-5


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def hf_pair(tmp_path, add_pooling_layer: bool = True, seed: int = 0, **kwargs):
    """A random transformers.BertModel (biases and LayerNorms perturbed too), saved by HF and loaded by us."""
    torch.manual_seed(seed)
    reference = transformers.BertModel(transformers.BertConfig(**tiny_fields(**kwargs)),
                                       add_pooling_layer=add_pooling_layer)
    with torch.no_grad():
        for parameter in reference.parameters():  # so zero biases and unit LayerNorms cannot hide a mix-up
            parameter.add_(torch.randn_like(parameter) * 0.05)
    reference.eval()
    reference.save_pretrained(str(tmp_path))
    config = dataclasses.replace(BERTConfig.from_pretrained(tmp_path), add_pooling_layer=add_pooling_layer)
    ours = BERT.from_pretrained(tmp_path, config=config, strict=True)
    assert not ours.training
    return ours, reference


def padded_batch(vocab_size: int = 100, lengths=(9, 6, 3), seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    T = max(lengths)
    input_ids = torch.randint(1, vocab_size, (len(lengths), T), generator=generator)
    attention_mask = torch.zeros(len(lengths), T, dtype=torch.long)
    for row, length in enumerate(lengths):
        attention_mask[row, :length] = 1
    input_ids = input_ids.masked_fill(attention_mask == 0, 0)
    return input_ids, attention_mask


# real checkpoint parity ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def minilm_and_reference():
    """(our MiniLM, transformers' BertModel of the same checkpoint, its tokenizer)."""
    path = BERT_Weights.DEFAULT.path
    ours = BERT.from_pretrained(path)
    reference = transformers.BertModel.from_pretrained(str(path)).eval()
    tokenizer = transformers.BertTokenizerFast(vocab_file=str(path / "vocab.txt"))
    assert not ours.load_report.missing and not ours.load_report.unexpected
    return ours, reference, tokenizer


def test_minilm_parity_padded_batch(minilm_and_reference):
    ours, reference, tokenizer = minilm_and_reference
    sentences = ["Hello world.",
                 "The quick brown fox jumps over the lazy dog, and then it naps under a tree in 2024!",
                 "BERT's attention heads: do they really look at [SEP]?"]
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    assert (batch["attention_mask"] == 0).any()  # the batch really is padded
    with torch.no_grad():
        got, want = ours(**batch), reference(**batch)
    keep = batch["attention_mask"].bool()
    assert got.last_hidden_state.shape == want.last_hidden_state.shape == (3, keep.shape[1], 384)
    assert max_diff(got.last_hidden_state[keep], want.last_hidden_state[keep]) <= ATOL
    assert max_diff(got.pooler_output, want.pooler_output) <= ATOL
    assert got.past_key_values is None


def test_minilm_parity_sentence_pair(minilm_and_reference):
    ours, reference, tokenizer = minilm_and_reference
    batch = tokenizer("The cat sat on the mat.", "Then it fell asleep in the warm afternoon sun.",
                      return_tensors="pt")
    assert batch["token_type_ids"].max() == 1
    with torch.no_grad():
        got, want = ours(**batch), reference(**batch)
    assert max_diff(got.last_hidden_state, want.last_hidden_state) <= ATOL
    assert max_diff(got.pooler_output, want.pooler_output) <= ATOL
    # token types matter: dropping them changes the output
    with torch.no_grad():
        untyped = ours(batch["input_ids"], batch["attention_mask"]).last_hidden_state
    assert max_diff(untyped, got.last_hidden_state) > 1e-3


# random tiny checkpoints -----------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(hidden_act="relu", type_vocab_size=3, layer_norm_eps=1e-6, pad_token_id=5),
    dict(hidden_act="gelu_new", num_attention_heads=8, num_hidden_layers=3, intermediate_size=40),
    dict(num_attention_heads=1, hidden_size=32, intermediate_size=64),
], ids=["default", "relu-3types", "gelu_new-8heads", "1head"])
def test_random_tiny_parity(tmp_path, kwargs):
    ours, reference = hf_pair(tmp_path, **kwargs)
    input_ids, attention_mask = padded_batch()
    token_type_ids = torch.randint(0, reference.config.type_vocab_size, input_ids.shape,
                                   generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        got = ours(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        want = reference(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
    keep = attention_mask.bool()
    assert max_diff(got.last_hidden_state[keep], want.last_hidden_state[keep]) <= ATOL
    assert max_diff(got.pooler_output, want.pooler_output) <= ATOL


def test_random_tiny_parity_position_ids_and_inputs_embeds(tmp_path):
    ours, reference = hf_pair(tmp_path)
    input_ids, attention_mask = padded_batch()
    position_ids = torch.arange(5, 5 + input_ids.shape[1]).unsqueeze(0).expand_as(input_ids)
    inputs_embeds = torch.randn(*input_ids.shape, 64, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        got = ours(input_ids, attention_mask=attention_mask, position_ids=position_ids).last_hidden_state
        want = reference(input_ids, attention_mask=attention_mask, position_ids=position_ids).last_hidden_state
        got_embeds = ours(inputs_embeds=inputs_embeds, attention_mask=attention_mask).last_hidden_state
        want_embeds = reference(inputs_embeds=inputs_embeds, attention_mask=attention_mask).last_hidden_state
    keep = attention_mask.bool()
    assert max_diff(got[keep], want[keep]) <= ATOL
    assert max_diff(got_embeds[keep], want_embeds[keep]) <= ATOL


def test_random_tiny_parity_without_pooler(tmp_path):
    ours, reference = hf_pair(tmp_path, add_pooling_layer=False)
    assert ours.pooler is None
    input_ids, _ = padded_batch(lengths=(7, 7))
    with torch.no_grad():
        got, want = ours(input_ids), reference(input_ids)
    assert got.pooler_output is None
    assert max_diff(got.last_hidden_state, want.last_hidden_state) <= ATOL


def test_random_tiny_attention_probabilities_match_hf_eager(tmp_path):
    ours, _ = hf_pair(tmp_path)
    reference = transformers.BertModel.from_pretrained(str(tmp_path), attn_implementation="eager").eval()
    input_ids, attention_mask = padded_batch()
    seen: dict[int, torch.Tensor] = {}
    handles = [layer.attention.self.probs.register_forward_hook(
        lambda module, args, output, i=i: seen.__setitem__(i, output.detach()))
        for i, layer in enumerate(ours.encoder.layer)]
    try:
        with torch.no_grad():
            ours(input_ids, attention_mask=attention_mask)
            want = reference(input_ids, attention_mask=attention_mask, output_attentions=True).attentions
    finally:
        for handle in handles:
            handle.remove()
    assert len(want) == len(seen) == 2
    keep = attention_mask.bool()  # query rows of padding tokens are meaningless in both
    for i, probs in seen.items():
        assert max_diff(probs.permute(0, 2, 1, 3)[keep], want[i].permute(0, 2, 1, 3)[keep]) <= ATOL


# attention masks -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    return BERT(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).eval()


def test_attention_mask_forms_agree(tiny_model):
    input_ids, mask = padded_batch()
    B, T = input_ids.shape
    neg = torch.finfo(torch.float32).min
    forms = {
        "int64": mask,
        "int32": mask.int(),
        "float01": mask.float(),
        "bool": mask.bool(),
        "additive2d": (1.0 - mask.float()) * neg,
        "additive2d-1e9": (1.0 - mask.float()) * -1e9,
        "3d": mask[:, None, :].expand(B, T, T),
        "4d": mask[:, None, None, :].expand(B, 1, T, T),
        "4d-bool": mask.bool()[:, None, None, :].expand(B, 1, T, T),
        "4d-additive": ((1.0 - mask.float()) * neg)[:, None, None, :].expand(B, 1, T, T),
    }
    with torch.no_grad():
        outputs = {name: tiny_model(input_ids, attention_mask=form).last_hidden_state for name, form in forms.items()}
    reference = outputs.pop("int64")
    for name, output in outputs.items():
        assert max_diff(output, reference) <= 1e-6, name
    # the mask does something: without it padded keys are attended
    with torch.no_grad():
        unmasked = tiny_model(input_ids).last_hidden_state
    assert max_diff(unmasked[1, :6], reference[1, :6]) > 1e-3


def test_all_ones_mask_equals_no_mask(tiny_model):
    input_ids = torch.randint(1, 100, (2, 8), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        plain = tiny_model(input_ids)
        for mask in (torch.ones(2, 8, dtype=torch.long), torch.ones(2, 8, dtype=torch.bool), torch.ones(2, 8, 8),
                     torch.zeros(2, 1, 8, 8)):  # the last one is additive: 0 = attend
            masked = tiny_model(input_ids, attention_mask=mask)
            assert max_diff(masked.last_hidden_state, plain.last_hidden_state) <= 1e-6
            assert max_diff(masked.pooler_output, plain.pooler_output) <= 1e-6


def test_padding_does_not_leak(tiny_model):
    """A sentence gives the same states alone and padded inside a batch."""
    input_ids, mask = padded_batch()
    with torch.no_grad():
        batched = tiny_model(input_ids, attention_mask=mask).last_hidden_state
        alone = tiny_model(input_ids[2:, :3]).last_hidden_state
    assert max_diff(batched[2, :3], alone[0]) <= ATOL


# explicit attention probabilities (a hook on the HookPoint) ------------------------------------------
def test_watched_probs_path_equals_sdpa(tiny_model):
    input_ids, mask = padded_batch()
    with torch.no_grad():
        fast = tiny_model(input_ids, attention_mask=mask)
    received: list[torch.Tensor] = []
    layer = tiny_model.encoder.layer[1].attention.self
    assert not layer.probs.is_watched
    handle = layer.probs.register_forward_hook(lambda module, args, output: received.append(output.detach().clone()))
    assert layer.probs.is_watched
    try:
        with torch.no_grad():
            slow = tiny_model(input_ids, attention_mask=mask)
    finally:
        handle.remove()
    assert not layer.probs.is_watched
    assert max_diff(slow.last_hidden_state, fast.last_hidden_state) <= ATOL
    assert max_diff(slow.pooler_output, fast.pooler_output) <= ATOL
    assert len(received) == 1
    probs = received[0]
    B, T = input_ids.shape
    assert probs.shape == (B, 4, T, T)
    torch.testing.assert_close(probs.sum(-1), torch.ones(B, 4, T), atol=1e-6, rtol=0)
    assert (probs >= 0).all()
    padded_keys = (mask == 0)[:, None, None, :].expand_as(probs)
    assert padded_keys.any() and (probs[padded_keys] == 0).all()
    # unwatched layers stay on the fast path: no hook called after removal
    with torch.no_grad():
        tiny_model(input_ids, attention_mask=mask)
    assert len(received) == 1


def test_every_layer_watched_equals_sdpa(tiny_model):
    input_ids, mask = padded_batch()
    with torch.no_grad():
        fast = tiny_model(input_ids, attention_mask=mask).last_hidden_state
    handles = [layer.attention.self.probs.register_forward_pre_hook(lambda module, args: None)
               for layer in tiny_model.encoder.layer]
    assert all(layer.attention.self.probs.is_watched for layer in tiny_model.encoder.layer)
    try:
        with torch.no_grad():
            slow = tiny_model(input_ids, attention_mask=mask).last_hidden_state
    finally:
        for handle in handles:
            handle.remove()
    assert not any(layer.attention.self.probs.is_watched for layer in tiny_model.encoder.layer)
    assert max_diff(slow, fast) <= ATOL


def test_hook_can_edit_probabilities(tiny_model):
    """The HookPoint's output is what the layer uses: a hook returning uniform attention changes the result."""
    input_ids = torch.randint(1, 100, (1, 6), generator=torch.Generator().manual_seed(6))
    layer = tiny_model.encoder.layer[0].attention.self
    handle = layer.probs.register_forward_hook(lambda module, args, output: torch.full_like(output, 1 / 6))
    try:
        with torch.no_grad():
            edited = tiny_model(input_ids).last_hidden_state
    finally:
        handle.remove()
    with torch.no_grad():
        plain = tiny_model(input_ids).last_hidden_state
    assert max_diff(edited, plain) > 1e-4


# decoder ---------------------------------------------------------------------------------------------
DECODER = dict(is_decoder=True, add_cross_attention=True)


@pytest.fixture
def decoder_pair(tmp_path):
    return hf_pair(tmp_path, **DECODER)


def encoder_states(B=2, S=5, seed=7):
    generator = torch.Generator().manual_seed(seed)
    states = torch.randn(B, S, 64, generator=generator)
    mask = torch.ones(B, S, dtype=torch.long)
    mask[1, 3:] = 0
    return states, mask


def test_decoder_parity_with_cross_attention(decoder_pair):
    ours, reference = decoder_pair
    assert hasattr(ours.encoder.layer[0], "crossattention")
    input_ids = torch.randint(1, 100, (2, 7), generator=torch.Generator().manual_seed(8))
    states, enc_mask = encoder_states()
    with torch.no_grad():
        got = ours(input_ids, encoder_hidden_states=states, encoder_attention_mask=enc_mask, use_cache=False)
        want = reference(input_ids, encoder_hidden_states=states, encoder_attention_mask=enc_mask, use_cache=False)
        got_unmasked = ours(input_ids, encoder_hidden_states=states, use_cache=False).last_hidden_state
        want_unmasked = reference(input_ids, encoder_hidden_states=states, use_cache=False).last_hidden_state
    assert max_diff(got.last_hidden_state, want.last_hidden_state) <= ATOL
    assert max_diff(got.pooler_output, want.pooler_output) <= ATOL
    assert max_diff(got_unmasked, want_unmasked) <= ATOL
    assert max_diff(got_unmasked[1], got.last_hidden_state[1]) > 1e-4  # the encoder mask matters


def test_decoder_parity_with_padding_mask(decoder_pair):
    ours, reference = decoder_pair
    input_ids, mask = padded_batch()
    states, enc_mask = encoder_states(B=3)
    with torch.no_grad():
        got = ours(input_ids, attention_mask=mask, encoder_hidden_states=states, encoder_attention_mask=enc_mask)
        want = reference(input_ids, attention_mask=mask, encoder_hidden_states=states,
                         encoder_attention_mask=enc_mask, use_cache=False)
    keep = mask.bool()
    assert max_diff(got.last_hidden_state[keep], want.last_hidden_state[keep]) <= ATOL


def test_decoder_is_causal(decoder_pair):
    ours, _ = decoder_pair
    input_ids = torch.randint(1, 100, (2, 8), generator=torch.Generator().manual_seed(9))
    changed = input_ids.clone()
    changed[:, 5] = (changed[:, 5] + 1) % 100
    states, enc_mask = encoder_states()
    with torch.no_grad():
        a = ours(input_ids, encoder_hidden_states=states, encoder_attention_mask=enc_mask).last_hidden_state
        b = ours(changed, encoder_hidden_states=states, encoder_attention_mask=enc_mask).last_hidden_state
    assert max_diff(a[:, :5], b[:, :5]) <= 1e-6
    assert max_diff(a[:, 5:], b[:, 5:]) > 1e-4


def test_decoder_watched_probs_are_causal(decoder_pair):
    ours, _ = decoder_pair
    input_ids = torch.randint(1, 100, (2, 6), generator=torch.Generator().manual_seed(10))
    states, enc_mask = encoder_states()
    with torch.no_grad():
        fast = ours(input_ids, encoder_hidden_states=states, encoder_attention_mask=enc_mask).last_hidden_state
    seen: dict[str, torch.Tensor] = {}
    layer = ours.encoder.layer[0]
    handles = [layer.attention.self.probs.register_forward_hook(lambda m, a, o: seen.__setitem__("self", o)),
               layer.crossattention.self.probs.register_forward_hook(lambda m, a, o: seen.__setitem__("cross", o))]
    try:
        with torch.no_grad():
            slow = ours(input_ids, encoder_hidden_states=states, encoder_attention_mask=enc_mask).last_hidden_state
    finally:
        for handle in handles:
            handle.remove()
    assert max_diff(slow, fast) <= ATOL
    assert seen["self"].shape == (2, 4, 6, 6) and seen["cross"].shape == (2, 4, 6, 5)
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)
    assert (seen["self"][..., future] == 0).all()
    assert (seen["cross"][1, :, :, 3:] == 0).all()
    torch.testing.assert_close(seen["cross"].sum(-1), torch.ones(2, 4, 6), atol=1e-6, rtol=0)


@pytest.fixture
def causal_pair(tmp_path):
    return hf_pair(tmp_path, is_decoder=True)


def test_decoder_without_cross_attention_parity(causal_pair):
    ours, reference = causal_pair
    input_ids = torch.randint(1, 100, (2, 7), generator=torch.Generator().manual_seed(11))
    with torch.no_grad():
        got = ours(input_ids).last_hidden_state
        want = reference(input_ids, use_cache=False).last_hidden_state
    assert max_diff(got, want) <= ATOL


def test_incremental_dynamic_cache_equals_full(causal_pair):
    ours, _ = causal_pair
    input_ids = torch.randint(1, 100, (2, 7), generator=torch.Generator().manual_seed(12))
    with torch.no_grad():
        full = ours(input_ids, use_cache=False)
        assert full.past_key_values is None
        cache = DynamicCache()
        steps = []
        for t in range(input_ids.shape[1]):
            out = ours(input_ids[:, t:t + 1], past_key_values=cache, use_cache=True)
            assert out.past_key_values is cache and cache.get_seq_length() == t + 1
            steps.append(out.last_hidden_state)
    assert max_diff(torch.cat(steps, dim=1), full.last_hidden_state) <= ATOL
    assert len(cache) == 2 and cache.keys[0].shape == (2, 4, 7, 16)


def test_incremental_cache_created_when_missing_and_prefill(causal_pair):
    ours, _ = causal_pair
    input_ids = torch.randint(1, 100, (1, 6), generator=torch.Generator().manual_seed(13))
    with torch.no_grad():
        full = ours(input_ids, use_cache=False).last_hidden_state
        first = ours(input_ids[:, :4], use_cache=True)  # prefill: the model makes the cache
        assert isinstance(first.past_key_values, DynamicCache)
        cache = first.past_key_values
        rest = [ours(input_ids[:, t:t + 1], past_key_values=cache, use_cache=True).last_hidden_state
                for t in (4, 5)]
    assert max_diff(torch.cat([first.last_hidden_state, *rest], dim=1), full) <= ATOL


def test_incremental_static_cache_equals_full(causal_pair):
    ours, _ = causal_pair
    input_ids = torch.randint(1, 100, (2, 7), generator=torch.Generator().manual_seed(14))
    max_len = 10
    with torch.no_grad():
        full = ours(input_ids, use_cache=False).last_hidden_state
        cache = StaticCache.for_config(ours.config, 2, max_len)
        steps = [ours(input_ids[:, :3], past_key_values=cache, use_cache=True,
                      cache_position=torch.arange(3)).last_hidden_state]
        for t in range(3, 7):
            out = ours(input_ids[:, t:t + 1], past_key_values=cache, use_cache=True,
                       cache_position=torch.tensor([t]))
            assert out.past_key_values is cache and cache.get_seq_length() == t + 1
            steps.append(out.last_hidden_state)
    assert cache.keys[0].shape == (2, 4, max_len, 16)
    assert max_diff(torch.cat(steps, dim=1), full) <= ATOL


def test_static_cache_with_full_length_mask(causal_pair):
    """A mask given with a StaticCache covers all max_cache_len keys; all-ones changes nothing."""
    ours, _ = causal_pair
    input_ids = torch.randint(1, 100, (2, 4), generator=torch.Generator().manual_seed(15))
    with torch.no_grad():
        full = ours(input_ids, use_cache=False).last_hidden_state
        cache = StaticCache.for_config(ours.config, 2, 6)
        steps = [ours(input_ids[:, t:t + 1], attention_mask=torch.ones(2, 6, dtype=torch.long), past_key_values=cache,
                      use_cache=True, cache_position=torch.tensor([t])).last_hidden_state for t in range(4)]
        with pytest.raises(ValueError, match="attention_mask has shape"):
            ours(input_ids[:, :1], attention_mask=torch.ones(2, 1, dtype=torch.long),
                 past_key_values=StaticCache.for_config(ours.config, 2, 6), cache_position=torch.tensor([0]))
    assert max_diff(torch.cat(steps, dim=1), full) <= ATOL


def test_static_cache_overflow_and_missing_position():
    cache = StaticCache(num_layers=1, batch_size=1, num_heads=2, head_size=4, max_cache_len=3)
    k = torch.randn(1, 2, 1, 4)
    with pytest.raises(ValueError, match="needs cache_position"):
        cache.update(k, k, 0)
    with pytest.raises(ValueError, match="holds 3 positions; position 3 does not fit"):
        cache.update(k, k, 0, torch.tensor([3]))


@pytest.mark.parametrize("self_cache", ["dynamic", "static"])
def test_incremental_encoder_decoder_cache_equals_full(decoder_pair, self_cache):
    ours, _ = decoder_pair
    input_ids = torch.randint(1, 100, (2, 6), generator=torch.Generator().manual_seed(16))
    states, enc_mask = encoder_states()
    with torch.no_grad():
        full = ours(input_ids, encoder_hidden_states=states, encoder_attention_mask=enc_mask,
                    use_cache=False).last_hidden_state
        inner = DynamicCache() if self_cache == "dynamic" else StaticCache.for_config(ours.config, 2, 8)
        cache = EncoderDecoderCache(inner)
        steps = []
        for t in range(6):
            kwargs = dict(cache_position=torch.tensor([t])) if self_cache == "static" else {}
            out = ours(input_ids[:, t:t + 1], encoder_hidden_states=states, encoder_attention_mask=enc_mask,
                       past_key_values=cache, use_cache=True, **kwargs)
            assert out.past_key_values is cache
            steps.append(out.last_hidden_state)
    assert cache.get_seq_length() == 6
    assert set(cache.cross_keys) == {0, 1} and cache.cross_keys[0][0].shape == (2, 4, 5, 16)
    assert max_diff(torch.cat(steps, dim=1), full) <= ATOL


def test_decoder_default_cache_is_encoder_decoder(decoder_pair):
    ours, _ = decoder_pair
    states, _ = encoder_states()
    with torch.no_grad():
        out = ours(torch.tensor([[1, 2], [3, 4]]), encoder_hidden_states=states)
    assert isinstance(out.past_key_values, EncoderDecoderCache)
    assert out.past_key_values.get_seq_length() == 2


# chunked feed-forward --------------------------------------------------------------------------------
def test_chunked_feed_forward_equals_unchunked():
    torch.manual_seed(0)
    plain = BERT(tiny_config()).eval()
    chunked = BERT(tiny_config(chunk_size_feed_forward=4)).eval()
    chunked.load_state_dict(plain.state_dict())
    input_ids, mask = padded_batch(lengths=(8, 5))
    with torch.no_grad():
        want = plain(input_ids, attention_mask=mask)
        got = chunked(input_ids, attention_mask=mask)
    assert max_diff(got.last_hidden_state, want.last_hidden_state) <= ATOL
    with pytest.raises(ValueError, match=r"sequence length 7 .*chunk_size_feed_forward=4"):
        chunked(input_ids[:, :7])


def test_chunked_feed_forward_matches_hf(tmp_path):
    ours, reference = hf_pair(tmp_path, chunk_size_feed_forward=3)
    assert ours.config.chunk_size_feed_forward == 3
    input_ids, mask = padded_batch(lengths=(9, 6))
    with torch.no_grad():
        got = ours(input_ids, attention_mask=mask).last_hidden_state
        want = reference(input_ids, attention_mask=mask).last_hidden_state
    keep = mask.bool()
    assert max_diff(got[keep], want[keep]) <= ATOL


# initialisation --------------------------------------------------------------------------------------
def test_initialisation():
    torch.manual_seed(0)
    config = BERTConfig.tiny(vocab_size=1000, initializer_range=0.05, pad_token_id=3, is_decoder=True,
                             add_cross_attention=True)
    model = BERT(config)
    checked = 0
    for name, module in model.named_modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
            weight = module.weight.detach()
            if isinstance(module, torch.nn.Embedding) and module.padding_idx is not None:
                assert (weight[module.padding_idx] == 0).all(), name
                weight = torch.cat([weight[:module.padding_idx], weight[module.padding_idx + 1:]])
            if weight.numel() >= 4096:  # enough samples for a 10% check
                assert abs(weight.std().item() - 0.05) <= 0.005, name
                assert abs(weight.mean().item()) <= 0.005, name
                checked += 1
            if isinstance(module, torch.nn.Linear):
                assert (module.bias == 0).all(), name
        elif isinstance(module, torch.nn.LayerNorm):
            assert (module.weight == 1).all() and (module.bias == 0).all(), name
    assert checked >= 15
    assert model.embeddings.word_embeddings.padding_idx == 3


# sinusoidal positions --------------------------------------------------------------------------------
def test_sinusoidal_position_embeddings():
    torch.manual_seed(0)
    model = BERT(tiny_config(position_embedding_type="sinusoidal")).eval()
    names = [name for name, _ in model.named_parameters()]
    assert not any("position_embeddings" in name for name in names)
    assert "embeddings.position_table" not in model.state_dict()  # a fixed table, not saved
    table = model.embeddings.position_table
    assert table.shape == (32, 64)
    torch.testing.assert_close(table[0, 0::2], torch.zeros(32))
    torch.testing.assert_close(table[0, 1::2], torch.ones(32))
    input_ids = torch.randint(1, 100, (2, 10), generator=torch.Generator().manual_seed(17))
    with torch.no_grad():
        out = model(input_ids)
        shifted = model(input_ids, position_ids=torch.arange(3, 13).unsqueeze(0))
    assert out.last_hidden_state.shape == (2, 10, 64) and torch.isfinite(out.last_hidden_state).all()
    assert max_diff(out.last_hidden_state, shifted.last_hidden_state) > 1e-4  # positions matter


# bad input (the full matrix is in test_bad_inputs.py) --------------------------------------------
def test_bad_encoder_attention_mask(decoder_pair):
    ours, _ = decoder_pair
    states, _ = encoder_states()
    with pytest.raises(ValueError, match=r"encoder_attention_mask has shape \(2, 4\)"), torch.no_grad():
        ours(torch.ones(2, 3, dtype=torch.long), encoder_hidden_states=states,
             encoder_attention_mask=torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"encoder_attention_mask must hold 0/1"), torch.no_grad():
        ours(torch.ones(2, 3, dtype=torch.long), encoder_hidden_states=states,
             encoder_attention_mask=torch.full((2, 5), 3))


def test_bad_config_type():
    with pytest.raises(TypeError, match="config must be a BERTConfig, got dict"):
        BERT(tiny_fields())


def test_decoder_cache_too_long_for_positions(causal_pair):
    ours, _ = causal_pair
    cache = DynamicCache()
    with torch.no_grad():
        ours(torch.ones(1, 30, dtype=torch.long), past_key_values=cache, use_cache=True)
        with pytest.raises(ValueError, match=r"33 positions is longer than"):
            ours(torch.ones(1, 3, dtype=torch.long), past_key_values=cache, use_cache=True)
