"""trace(): what it records (attentions, hidden states, calls, inputs, tokens), that it changes nothing, cleans up
after itself (also on errors and when nested), keeps to its byte limit, and leaks nothing over 1,000 passes."""

from __future__ import annotations

import gc
import os
import weakref

import pytest
import torch
from trace_testlib import hook_count, padded_batch, trace_config

from bertviz_lab.model import (
    BERT,
    BERTForCausalLM,
    BERTForPreTraining,
    BERTModelOutput,
    DynamicCache,
    create_bert_model,
)
from bertviz_lab.trace import HookPoint, Trace, TraceSizeError, hook_points, trace
from bertviz_lab.trace.records import MODEL_INPUT


def probs_points(model):
    return [m for n, m in hook_points(model).items() if n.endswith(".probs")]


# hook points -------------------------------------------------------------------------------------------
def test_hook_point_names_are_stable_and_documented():
    torch.manual_seed(0)
    model = BERT(trace_config(num_hidden_layers=2, is_decoder=True, add_cross_attention=True))
    per_layer = [*(f"{block}.{name}" for block in ("attention", "crossattention")
                   for name in ("self.q", "self.k", "self.v", "self.probs", "self.context", "output.head_out",
                                "output.attn_out")), "resid_mid", "intermediate.act", "output.mlp_out", "hidden"]
    assert list(hook_points(model)) == ["embeddings.hidden", *(f"encoder.layer.{i}.{name}" for i in range(2)
                                                               for name in per_layer)]
    heads = BERTForPreTraining(trace_config(num_hidden_layers=1))
    assert "bert.encoder.layer.0.attention.self.probs" in hook_points(heads)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        hook_points("model")


def test_nothing_is_hooked_outside_a_trace(tiny_bert, batch):
    assert hook_count(tiny_bert) == 0
    assert not any(p.is_watched for p in probs_points(tiny_bert))


# attentions --------------------------------------------------------------------------------------------
def test_attentions_are_detached_cpu_copies_whose_rows_sum_to_one(tiny_bert, batch):
    ids, mask, types = batch
    with trace(tiny_bert) as t:
        assert all(p.is_watched for p in probs_points(tiny_bert))
        tiny_bert(ids, mask, types)  # grad mode on: the trace must still hold no graph
    assert isinstance(t, Trace) and t.attention_layers == [0, 1, 2] and len(t.attentions) == 3
    for a in t.attentions:
        assert a.shape == (3, 4, 8, 8) and a.device.type == "cpu"
        assert not a.requires_grad and a.grad_fn is None
        torch.testing.assert_close(a.sum(-1), torch.ones(3, 4, 8))
        assert (a.masked_select((mask == 0)[:, None, None, :].expand_as(a)) == 0).all()  # padded keys get 0
    assert t.attention(-1) is t.attentions[2]
    assert t.cross_attentions == []
    with pytest.raises(ValueError, match="no attention recorded for layer 5"):
        t.attention(5)


def test_outputs_are_unchanged_by_a_trace(tiny_bert, batch):
    ids, mask, types = batch
    with torch.no_grad():
        plain = tiny_bert(ids, mask, types)
        with trace(tiny_bert, attentions=False, hidden_states=True, shapes=True):
            observed = tiny_bert(ids, mask, types)
        assert torch.equal(plain.last_hidden_state, observed.last_hidden_state)  # bit for bit
        assert torch.equal(plain.pooler_output, observed.pooler_output)
        # Watching attention switches those layers to explicit softmax (by design); the trace itself adds nothing.
        handles = [p.register_forward_hook(lambda *args: None) for p in probs_points(tiny_bert)]
        explicit = tiny_bert(ids, mask, types)
        for handle in handles:
            handle.remove()
        with trace(tiny_bert, attentions=True, hidden_states=True, shapes=True):
            traced = tiny_bert(ids, mask, types)
    assert torch.equal(explicit.last_hidden_state, traced.last_hidden_state)
    torch.testing.assert_close(traced.last_hidden_state, plain.last_hidden_state, atol=1e-5, rtol=0)


def test_selected_layers_heads_and_rows(tiny_bert, batch):
    ids, mask, types = batch
    with torch.no_grad(), trace(tiny_bert, hidden_states=True) as full:
        tiny_bert(ids, mask, types)
    with torch.no_grad(), trace(tiny_bert, hidden_states=True, layers=[-1, 0], heads=[1, 3], batch_index=[0, 2],
                                tokens=[[str(i) for i in range(8)]] * 3) as part:
        watched = [p.is_watched for p in probs_points(tiny_bert)]
        tiny_bert(ids, mask, types)
    assert watched == [True, False, True]  # an unrecorded layer keeps SDPA
    assert part.attention_layers == [0, 2]
    assert torch.equal(part.attention(0), full.attention(0)[[0, 2]][:, [1, 3]])
    # layer 1 ran SDPA here, explicit softmax in `full`: later layers agree to rounding only
    torch.testing.assert_close(part.attention(2), full.attention(2)[[0, 2]][:, [1, 3]], atol=1e-6, rtol=0)
    assert [h.shape for h in part.hidden_states] == [(2, 8, 32)] * 3  # embeddings, after layer 0, after layer 2
    assert torch.equal(part.hidden_state(1), full.hidden_state(1)[[0, 2]])
    torch.testing.assert_close(part.hidden_state(-1), full.hidden_state(-1)[[0, 2]], atol=1e-5, rtol=0)
    assert torch.equal(part.input_ids, ids[[0, 2]]) and torch.equal(part.attention_mask, mask[[0, 2]])
    assert len(part.tokens) == 2


def test_hidden_states_follow_hugging_face_numbering(tiny_bert, batch):
    ids, mask, _ = batch
    with torch.no_grad(), trace(tiny_bert, attentions=False, hidden_states=True) as t:
        out = tiny_bert(ids, mask)
    assert len(t.hidden_states) == 4 and t.attentions == []
    assert torch.equal(t.hidden_state(-1), out.last_hidden_state)
    assert torch.equal(t.hidden_states[-1], out.last_hidden_state)
    assert t.hidden_states[-1].data_ptr() != out.last_hidden_state.data_ptr()  # a copy, not the model's tensor
    with pytest.raises(ValueError, match="hidden_states=True"):
        Trace(tiny_bert, hidden_states=False).hidden_state(0)


def test_cross_attention_and_cached_decoding_are_recorded():
    torch.manual_seed(0)
    model = BERTForCausalLM(trace_config(is_decoder=True, add_cross_attention=True)).eval()
    ids, memory = torch.randint(5, 100, (2, 6)), torch.randn(2, 4, 32)
    with torch.no_grad(), trace(model) as t:
        cache = DynamicCache()
        model(ids[:, :5], encoder_hidden_states=memory, past_key_values=cache, use_cache=True)
        model(ids[:, 5:], encoder_hidden_states=memory, past_key_values=cache, use_cache=True)
    assert len(t.passes) == 2
    assert [a.shape for a in t.cross_attentions] == [(2, 4, 5, 4)] * 3
    assert t.attentions[0].shape == (2, 4, 5, 5)
    assert t.passes[1].attentions[0].shape == (2, 4, 1, 6)  # one new query over six cached keys
    assert torch.triu(t.attentions[0], diagonal=1).abs().max() == 0  # causal


# cleanup -----------------------------------------------------------------------------------------------
def test_no_hook_remains_after_exit_or_exception_and_others_hooks_survive(tiny_bert, batch):
    ids, mask, _ = batch
    mine = tiny_bert.encoder.layer[0].register_forward_hook(lambda *args: None)
    with trace(tiny_bert, hidden_states=True):
        assert hook_count(tiny_bert) > 1
        tiny_bert(ids, mask)
    assert hook_count(tiny_bert) == 1
    with pytest.raises(RuntimeError, match="boom"):
        with trace(tiny_bert, hidden_states=True):
            tiny_bert(ids, mask)
            raise RuntimeError("boom")
    assert hook_count(tiny_bert) == 1
    with pytest.raises(ValueError, match="token id"):  # the forward itself raises
        with trace(tiny_bert, hidden_states=True):
            tiny_bert(ids + 1000, mask)
    assert hook_count(tiny_bert) == 1
    mine.remove()
    assert hook_count(tiny_bert) == 0 and not any(p.is_watched for p in probs_points(tiny_bert))


def test_nested_traces_keep_each_others_hooks(tiny_bert, batch):
    ids, mask, _ = batch
    with trace(tiny_bert, layers=0) as outer:
        with trace(tiny_bert, attentions=False, hidden_states=True) as inner:
            tiny_bert(ids, mask)
        assert hook_count(tiny_bert) > 0
        tiny_bert(ids[:1], mask[:1])  # only the outer trace still records
    assert hook_count(tiny_bert) == 0
    assert len(inner.passes) == 1 and len(inner.hidden_states) == 4
    assert len(outer.passes) == 2 and outer.passes[1].attentions[0].shape == (1, 4, 8, 8)
    assert outer.calls[0].path == "" and {c.pass_index for c in outer.calls} == {0, 1}


def test_byte_limit_names_the_option_and_cleans_up(tiny_bert, batch):
    ids, mask, _ = batch
    with pytest.raises(TraceSizeError, match=r"max_bytes=2000") as info:
        with trace(tiny_bert, max_bytes=2000):
            tiny_bert(ids, mask)
    assert isinstance(info.value, ValueError) and "layers=" in str(info.value)
    assert hook_count(tiny_bert) == 0
    with trace(tiny_bert, max_bytes=None, hidden_states=True) as t:
        tiny_bert(ids, mask)
    kept = [*t.attentions, *t.hidden_states, *t.passes[0].inputs.values()]
    expected = sum(x.numel() * x.element_size() for x in kept)
    assert t.nbytes == expected


def test_bad_arguments_are_named(tiny_bert, batch):
    with pytest.raises(TypeError, match="nn.Module"):
        with trace("bert"):
            pass
    with pytest.raises(ValueError, match=r"layers=5 is out of range.*3"):
        with trace(tiny_bert, layers=5):
            pass
    with pytest.raises(ValueError, match=r"heads=\[4\] is out of range"):
        with trace(tiny_bert, heads=[4]):
            pass
    with pytest.raises(TypeError, match="heads must be"):
        with trace(tiny_bert, heads="all"):
            pass
    with pytest.raises(ValueError, match="max_bytes must be"):
        with trace(tiny_bert, max_bytes=0):
            pass
    with pytest.raises(ValueError, match=r"batch_index=\[7\] is out of range for a batch of 3"):
        with trace(tiny_bert, batch_index=7):
            tiny_bert(batch[0])
    with pytest.raises(ValueError, match="layers=.*no BERT layers"):
        with trace(torch.nn.Linear(2, 2), layers=0):
            pass
    assert hook_count(tiny_bert) == 0


# calls -------------------------------------------------------------------------------------------------
def test_calls_record_keyword_tensors_and_named_tuple_outputs(tiny_bert, batch):
    ids, mask, types = batch
    with torch.no_grad(), trace(tiny_bert, attentions=False) as t:
        out = tiny_bert(input_ids=ids, attention_mask=mask, token_type_ids=types)
    assert isinstance(out, BERTModelOutput)
    root = t.calls[0]
    assert (root.path, root.class_name, root.depth, root.parent) == ("", "BERT", 0, None)
    assert [(s.name, s.shape) for s in root.inputs] == [("input_ids", (3, 8)), ("attention_mask", (3, 8)),
                                                          ("token_type_ids", (3, 8))]
    assert [(s.name, s.shape) for s in root.outputs] == [("last_hidden_state", (3, 8, 32)), ("pooler_output", (3, 32))]
    assert root.input_sources == (MODEL_INPUT,) * 3
    paths = [c.path for c in t.calls]
    assert paths.index("embeddings") < paths.index("embeddings.word_embeddings") < paths.index("encoder.layer.0")
    assert not any(isinstance(tiny_bert.get_submodule(p), HookPoint) for p in paths if p)
    attention = next(c for c in t.calls if c.path == "encoder.layer.1.attention")
    assert [s.name for s in attention.inputs] == ["arg0", "arg1"]  # hidden states, mask; no cache in an encoder
    assert attention.inputs[1].shape == (3, 1, 1, 8) and attention.depth == 3
    assert t.calls[attention.parent].path == "encoder.layer.1"
    qkv = next(c for c in t.calls if c.path == "encoder.layer.1.attention.self.qkv")
    assert qkv.outputs[0].shape == (3, 8, 96) and qkv.num_params == 32 * 96 + 96
    layer0 = next(c for c in t.calls if c.path == "encoder.layer.0")
    source = t.calls[next(c for c in t.calls if c.path == "encoder.layer.1").input_sources[0]]
    assert source.path.startswith("encoder.layer.0.") and layer0.output_sources == (source.index,)  # data flow
    assert root.num_params == tiny_bert.num_parameters() and not root.shares_params


def test_calls_record_tuple_and_dict_outputs_and_count_tied_weights_once():
    torch.manual_seed(0)
    model = BERTForPreTraining(trace_config()).eval()
    ids, mask, types = padded_batch()
    with torch.no_grad(), trace(model, attentions=False) as t:
        model(ids, mask, types)
    root = t.calls[0]
    assert [(s.name, s.shape) for s in root.outputs] == [("0", (3, 8, 100)), ("1", (3, 2))]
    unique = {id(p): p.numel() for p in model.parameters()}
    assert root.num_params == sum(unique.values()) == model.num_parameters()
    every = sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))
    assert root.num_params < every  # tied weights exist
    decoder = next(c for c in t.calls if c.path == "cls.predictions.decoder")
    assert decoder.shares_params and decoder.num_params == 100 * 32 + 100
    assert not next(c for c in t.calls if c.path == "cls.seq_relationship").shares_params
    model.bert.embeddings.requires_grad_(False)
    with torch.no_grad(), trace(model, attentions=False) as frozen:
        model(ids)
    assert frozen.calls[0].trainable_params == root.num_params - sum(
        p.numel() for p in model.bert.embeddings.parameters())

    dict_model = create_bert_model(vocab_size=100, max_seq_length=16, d_model=32, num_heads=4, d_ff=64, num_layers=2)
    with torch.no_grad(), trace(dict_model.eval(), hidden_states=True) as t:
        dict_model(ids, segment_ids=types, attention_mask=mask)
    assert [s.name for s in t.calls[0].outputs] == ["mlm_logits", "nsp_logits", "sequence_output", "pooled_output"]
    assert torch.equal(t.token_type_ids, types)  # segment_ids remembered as token types
    assert t.calls[0].num_params == sum(p.numel() for p in dict_model.parameters())
    assert len(t.attentions) == 2 and len(t.hidden_states) == 3


def test_shapes_false_records_no_calls_but_keeps_inputs(tiny_bert, batch):
    ids, mask, types = batch
    with trace(tiny_bert, shapes=False) as t:
        tiny_bert(ids, attention_mask=mask, token_type_ids=types)
    assert t.calls == [] and len(t.attentions) == 3
    assert torch.equal(t.input_ids, ids) and torch.equal(t.token_type_ids, types)
    with pytest.raises(ValueError, match="shapes=True"):
        t.summary()


# tokens and inputs ---------------------------------------------------------------------------------------
def test_tokens_from_an_encoding_with_padding_and_sentence_pairs(minilm_tokenizer, tiny_bert):
    encoding = minilm_tokenizer(["The cat sat.", "A dog ran far away."], ["It purred.", "Then it came home again."],
                         return_tensors="pt")
    ids = encoding["input_ids"] % 100  # the tiny model's vocabulary; token strings come from the real ids
    with trace(tiny_bert, tokens=encoding, tokenizer=minilm_tokenizer) as t:
        tiny_bert(ids, encoding["attention_mask"], encoding["token_type_ids"])
    assert t.tokens[0][:6] == ["[CLS]", "the", "cat", "sat", ".", "[SEP]"]
    padded = int((encoding["attention_mask"].sum(1) < ids.shape[1]).nonzero()[0])
    assert t.tokens[padded][-1] == "[PAD]" and t.tokens[1][:2] == ["[CLS]", "a"]
    assert len(t.tokens) == 2 and all(len(row) == ids.shape[1] for row in t.tokens)
    assert torch.equal(t.attention_mask, encoding["attention_mask"])
    assert torch.equal(t.token_type_ids, encoding["token_type_ids"]) and t.token_type_ids.max() == 1


def test_attach_tokens_accepts_lists_and_names_bad_values(minilm_tokenizer, tiny_bert, batch):
    ids, mask, _ = batch
    with trace(tiny_bert) as t:
        tiny_bert(ids, mask)
    assert t.tokens is None
    assert t.attach_tokens([f"t{i}" for i in range(8)]) is t and t.tokens == [[f"t{i}" for i in range(8)]]
    t.attach_tokens([[f"r{r}t{i}" for i in range(8)] for r in range(3)])
    assert t.tokens[2][0] == "r2t0"
    with pytest.raises(ValueError, match="3 positions but the traced input has 8"):
        t.attach_tokens(["a", "b", "c"])
    with pytest.raises(TypeError, match="tokenize it first"):
        t.attach_tokens("the cat sat")
    with pytest.raises(ValueError, match="tokenizer=..."):
        t.attach_tokens({"input_ids": ids})
    with pytest.raises(ValueError, match="no 'input_ids'"):
        t.attach_tokens({"ids": ids}, minilm_tokenizer)
    with pytest.raises(TypeError, match="tokens must be"):
        t.attach_tokens(42)
    single = minilm_tokenizer("The cat sat.")  # lists, one sequence
    loose = Trace(tiny_bert).attach_tokens(single, minilm_tokenizer)
    assert loose.tokens == [["[CLS]", "the", "cat", "sat", ".", "[SEP]"]]
    assert loose.input_ids.shape == (1, 6) and loose.attention_mask.tolist() == [[1] * 6]


def test_positional_inputs_are_remembered_from_the_first_pass(tiny_bert, batch):
    ids, mask, types = batch
    with trace(tiny_bert, shapes=False) as t:
        tiny_bert(ids, mask, types)
        tiny_bert(ids[:1, :4])
    assert len(t.passes) == 2 and t.passes[1].inputs["input_ids"].shape == (1, 4)
    assert torch.equal(t.input_ids, ids) and torch.equal(t.attention_mask, mask)
    assert t.passes[0].batch_size == 3 and t.attentions[0].shape[0] == 3
    assert "2 forward pass" in repr(t)


# leaks -------------------------------------------------------------------------------------------------
def test_a_finished_trace_does_not_keep_the_model_alive(batch):
    torch.manual_seed(0)
    model = BERTForPreTraining(trace_config())
    with trace(model, hidden_states=True) as t:
        model(batch[0])
    ref = weakref.ref(model)
    del model
    gc.collect()
    assert ref() is None and len(t.attentions) == 3 and t.summary().total_params > 0


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")
def test_a_thousand_traced_passes_leave_memory_flat():
    torch.manual_seed(0)
    model = BERT(trace_config(num_hidden_layers=2)).eval()
    ids, mask, _ = padded_batch((8, 6))
    traces = []

    def run(n):
        for _ in range(n):
            with torch.no_grad(), trace(model, hidden_states=True) as t:
                model(ids, mask)
            traces.append(weakref.ref(t))

    run(100)  # warm-up: allocator pools and caches settle
    gc.collect()
    before = _rss_bytes()
    run(1000)
    gc.collect()
    grown = _rss_bytes() - before
    assert grown < 8 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB over 1,000 traced passes"
    assert sum(ref() is not None for ref in traces) == 0  # no trace kept alive by the model or hooks
    assert hook_count(model) == 0


@pytest.mark.usefixtures("avx2_forced")
def test_a_lone_trace_keeps_the_probabilities_uncopied_and_the_output_within_rounding(monkeypatch):
    """Head size 16: unwatched, attention runs on the AVX2 kernel. A trace on the probs points makes the layers
    write the attention out (the output within float32 rounding of the kernel's); alone on a point it keeps the
    probabilities as the layer made them, beside another hook it copies them."""
    from bertviz_lab.model.layers import BERTSelfAttention

    torch.manual_seed(0)
    model = BERT(trace_config(hidden_size=64, num_attention_heads=4, intermediate_size=128)).eval()
    assert all(layer.attention.self.attention_backend.name == "avx2" for layer in model.encoder.layer)
    ids, mask, types = padded_batch()
    handed = []
    softmax = BERTSelfAttention._softmax

    def spy(self, *args):
        result = softmax(self, *args)
        handed.append(result.data_ptr())
        return result

    monkeypatch.setattr(BERTSelfAttention, "_softmax", spy)
    with torch.inference_mode():
        plain = model(ids, mask, types).last_hidden_state
        with trace(model) as alone:
            traced = model(ids, mask, types).last_hidden_state
        seen = []
        other = probs_points(model)[0].register_forward_hook(lambda module, args, output: seen.append(output))
        with trace(model, layers=0) as beside:
            model(ids, mask, types)
        other.remove()
        with trace(model, layers=0) as outer, trace(model, layers=0) as inner:  # two observers: each its own copy
            model(ids, mask, types)
        with trace(model, layers=0, batch_index=[0, 1]) as rows:  # a slice of the maps: copied
            model(ids, mask, types)
        explicit = []
        handles = [p.register_forward_hook(lambda m, a, output: explicit.append(output.clone()))
                   for p in probs_points(model)]
        model(ids, mask, types)
        for handle in handles:
            handle.remove()
    torch.testing.assert_close(traced, plain, rtol=0, atol=1e-5)
    assert [a.data_ptr() for a in alone.attentions] == handed[:3]  # no copies
    assert beside.attentions[0].data_ptr() != seen[0].data_ptr()  # shared with another hook: a copy
    assert outer.attentions[0].data_ptr() != inner.attentions[0].data_ptr()
    assert torch.equal(outer.attentions[0], inner.attentions[0])
    kept = rows.attentions[0]
    assert kept.shape[0] == 2 and kept.untyped_storage().nbytes() == kept.numel() * kept.element_size()
    for kept, reference in zip([*alone.attentions, beside.attentions[0]], [*explicit, explicit[0]]):
        torch.testing.assert_close(kept, reference, atol=1e-6, rtol=0)
