"""One clear error per bad input: forward arguments, config fields, config.json files, devices, checkpoints and
labels. Each case asserts the exception type and that the message names the bad value or argument and what was
expected; the few inputs that are accepted on purpose (NaN embeddings, integer buffers in HF files) are pinned too."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
from safetensors.torch import load_file, save_file
from tiny_models import tiny_config, tiny_fields

from bertviz_lab.model import (
    BERT,
    BERTConfig,
    BERTForPreTraining,
    BERTForQuestionAnswering,
    BERTForSequenceClassification,
    BERTForTokenClassification,
    DynamicCache,
)

NO_SUCH_GPU = max(3, torch.cuda.device_count())  # a CUDA index that is not here, whatever the machine


@dataclass
class Models:
    """Tiny models every case can call, and a folder for the files some cases write."""

    bert: BERT
    decoder: BERT  # with cross-attention
    pretraining: BERTForPreTraining
    tokens: BERTForTokenClassification  # 3 labels
    sequence: BERTForSequenceClassification  # 3 labels
    qa: BERTForQuestionAnswering
    folder: Path


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Models:
    torch.manual_seed(0)
    return Models(
        bert=BERT(tiny_config()).eval(),
        decoder=BERT(tiny_config(is_decoder=True, add_cross_attention=True)).eval(),
        pretraining=BERTForPreTraining(tiny_config()).eval(),
        tokens=BERTForTokenClassification(tiny_config(num_labels=3)).eval(),
        sequence=BERTForSequenceClassification(tiny_config(num_labels=3)).eval(),
        qa=BERTForQuestionAnswering(tiny_config()).eval(),
        folder=tmp_path_factory.mktemp("bad_inputs"),
    )


def ids(batch: int = 2, length: int = 4) -> torch.Tensor:
    return torch.ones(batch, length, dtype=torch.long)


def forward(**inputs: Any) -> Callable[[Models], Any]:
    """A case that calls the backbone with these keyword arguments."""
    return lambda m: m.bert(**inputs)


def config(**fields: Any) -> Callable[[Models], Any]:
    """A case that builds a BERTConfig with these fields."""
    return lambda m: BERTConfig(**fields)


def config_json(text: str) -> Callable[[Models], Any]:
    """A case that loads a model from a folder whose config.json holds `text`."""
    def load(m: Models) -> Any:
        folder = Path(tempfile.mkdtemp(dir=m.folder))
        (folder / "config.json").write_text(text)
        return BERT.from_pretrained(folder)
    return load


def checkpoint_with(key: str, tensor: torch.Tensor) -> Callable[[Models], Any]:
    """A case that saves the tiny backbone, replaces one tensor in the file, and loads it back."""
    def load(m: Models) -> Any:
        folder = m.folder / f"checkpoint-{key}"
        m.bert.save_pretrained(folder)
        state = load_file(str(folder / "model.safetensors"))
        save_file({**state, key: tensor}, str(folder / "model.safetensors"))
        return BERT.from_pretrained(folder)
    return load


def labels(value: int, shape=(2, 4)) -> torch.Tensor:
    return torch.full(shape, value, dtype=torch.long)


NO_MLM = labels(-100)
NSP = torch.zeros(2, dtype=torch.long)

CASES = [
    # forward: what the ids are ------------------------------------------------------------------------
    pytest.param(forward(input_ids=[[1, 2, 3]]), TypeError,
                 r"input_ids must be a torch.Tensor of token ids, got list; convert it with torch.tensor",
                 id="ids-list"),
    pytest.param(forward(input_ids=ids().numpy()), TypeError, r"input_ids must be a torch.Tensor .*got ndarray",
                 id="ids-numpy"),
    pytest.param(forward(input_ids=torch.ones(1, 4)), TypeError,
                 r"input_ids must be an integer tensor \(torch.int64 or torch.int32\), got torch.float32",
                 id="ids-float"),
    pytest.param(forward(input_ids=torch.ones(1, 4, dtype=torch.bool)), TypeError,
                 r"input_ids must be an integer tensor .*got torch.bool", id="ids-bool"),
    pytest.param(forward(input_ids=torch.ones(4, dtype=torch.long)), ValueError,
                 r"input_ids must be 2D \(batch, seq_len\), got shape \(4,\)", id="ids-1d"),
    pytest.param(forward(input_ids=torch.ones(1, 2, 4, dtype=torch.long)), ValueError,
                 r"input_ids must be 2D \(batch, seq_len\), got shape \(1, 2, 4\)", id="ids-3d"),
    pytest.param(forward(input_ids=torch.zeros(0, 8, dtype=torch.long)), ValueError,
                 r"input_ids has 0 rows: a batch needs at least one sequence", id="ids-empty-batch"),
    pytest.param(forward(input_ids=torch.zeros(2, 0, dtype=torch.long)), ValueError,
                 r"input_ids has 0 tokens per row \(shape \(2, 0\)\): pass at least one token",
                 id="ids-empty-sequence"),
    pytest.param(forward(input_ids=torch.tensor([[1, 100]])), ValueError,
                 r"token id 100, outside the vocabulary \[0, 100\)", id="ids-too-large"),
    pytest.param(forward(input_ids=torch.tensor([[1, -1]])), ValueError, r"token id -1, outside the vocabulary",
                 id="ids-negative"),
    pytest.param(forward(input_ids=ids(1, 33)), ValueError,
                 r"33 positions is longer than .*max_position_embeddings=32", id="ids-too-long"),
    pytest.param(forward(input_ids=torch.ones(2, 4, dtype=torch.long, device="meta")), ValueError,
                 r"input_ids is on meta but the model is on cpu; move it with input_ids.to\(model.device\)",
                 id="ids-other-device"),
    pytest.param(forward(input_ids=ids(), inputs_embeds=torch.zeros(2, 4, 64)), ValueError,
                 r"exactly one of input_ids or inputs_embeds", id="ids-and-embeds"),
    pytest.param(forward(), ValueError, r"exactly one of input_ids or inputs_embeds", id="no-inputs"),
    # forward: inputs_embeds ---------------------------------------------------------------------------
    pytest.param(forward(inputs_embeds=[[[0.0] * 64]]), TypeError,
                 r"inputs_embeds must be a torch.Tensor of embeddings, got list", id="embeds-list"),
    pytest.param(forward(inputs_embeds=torch.zeros(1, 4, 65)), ValueError,
                 r"inputs_embeds must be \(batch, seq_len, 64\), got \(1, 4, 65\)", id="embeds-width"),
    pytest.param(forward(inputs_embeds=torch.zeros(0, 8, 64)), ValueError,
                 r"inputs_embeds has 0 rows: a batch needs at least one sequence", id="embeds-empty-batch"),
    pytest.param(forward(inputs_embeds=torch.zeros(1, 4, 64, dtype=torch.float64)), TypeError,
                 r"inputs_embeds is torch.float64 but the model is torch.float32", id="embeds-float64"),
    pytest.param(forward(inputs_embeds=torch.zeros(1, 4, 64, dtype=torch.long)), TypeError,
                 r"inputs_embeds is torch.int64 but the model is torch.float32", id="embeds-int"),
    # forward: attention_mask --------------------------------------------------------------------------
    pytest.param(forward(input_ids=ids(), attention_mask=[[1] * 4] * 2), TypeError,
                 r"attention_mask must be a torch.Tensor of mask values .*got list", id="mask-list"),
    pytest.param(forward(input_ids=ids(), attention_mask="1111"), TypeError,
                 r"attention_mask must be a torch.Tensor .*got str", id="mask-str"),
    pytest.param(forward(input_ids=ids(), attention_mask=torch.ones(2, 4, dtype=torch.complex64)), TypeError,
                 r"attention_mask must be a bool, integer or float tensor, got torch.complex64", id="mask-complex"),
    pytest.param(forward(input_ids=ids(), attention_mask=torch.ones(2, 5)), ValueError,
                 r"attention_mask has shape \(2, 5\)", id="mask-key-len"),
    pytest.param(forward(input_ids=ids(), attention_mask=torch.ones(3, 4)), ValueError,
                 r"attention_mask has shape \(3, 4\)", id="mask-batch"),
    pytest.param(forward(input_ids=ids(), attention_mask=torch.ones(4)), ValueError,
                 r"attention_mask must be 2D, 3D or 4D", id="mask-1d"),
    pytest.param(forward(input_ids=ids(1), attention_mask=torch.tensor([[1, 2, 1, 0]])), ValueError,
                 r"attention_mask must hold 0/1 .*got values in \[0, 2\]", id="mask-value-2"),
    pytest.param(forward(input_ids=ids(1), attention_mask=torch.tensor([[1.0, 0.5, 1.0, 0.0]])), ValueError,
                 r"attention_mask must hold 0/1", id="mask-value-half"),
    pytest.param(forward(input_ids=ids(1), attention_mask=torch.full((1, 4), float("nan"))), ValueError,
                 r"attention_mask must hold 0/1 .*got values in \[nan, nan\]", id="mask-nan"),
    # forward: token_type_ids and position_ids ---------------------------------------------------------
    pytest.param(forward(input_ids=ids(), token_type_ids=[[0] * 4] * 2), TypeError,
                 r"token_type_ids must be a torch.Tensor of segment ids, got list", id="token-type-list"),
    pytest.param(forward(input_ids=ids(), token_type_ids=torch.zeros(2, 4)), TypeError,
                 r"token_type_ids must be an integer tensor .*got torch.float32", id="token-type-float"),
    pytest.param(forward(input_ids=ids(1), token_type_ids=torch.tensor([[0, 1, 2, 0]])), ValueError,
                 r"token_type_ids must lie in \[0, 2\), got values in \[0, 2\]", id="token-type-too-large"),
    pytest.param(forward(input_ids=ids(1), token_type_ids=torch.tensor([[0, -1, 0, 0]])), ValueError,
                 r"token_type_ids must lie in \[0, 2\), got values in \[-1, 0\]", id="token-type-negative"),
    pytest.param(forward(input_ids=ids(1), token_type_ids=torch.zeros(1, 3, dtype=torch.long)), ValueError,
                 r"token_type_ids has shape \(1, 3\)", id="token-type-length"),
    pytest.param(forward(input_ids=ids(), token_type_ids=torch.zeros(3, 4, dtype=torch.long)), ValueError,
                 r"token_type_ids has shape \(3, 4\), expected \(2, 4\)", id="token-type-batch"),
    pytest.param(forward(input_ids=ids(), position_ids=torch.arange(4.0)[None]), TypeError,
                 r"position_ids must be an integer tensor .*got torch.float32", id="position-ids-float"),
    pytest.param(forward(input_ids=ids(1), position_ids=torch.tensor([[0, 1, 2, 32]])), ValueError,
                 r"position_ids reach 32, but max_position_embeddings is 32", id="position-ids-too-large"),
    pytest.param(forward(input_ids=ids(1), position_ids=torch.tensor([[0, 1, -1, 2]])), ValueError,
                 r"position_ids must be >= 0, got -1", id="position-ids-negative"),
    pytest.param(forward(input_ids=ids(), position_ids=torch.zeros(3, 4, dtype=torch.long)), ValueError,
                 r"position_ids has shape \(3, 4\), expected \(2, 4\) or \(1, 4\)", id="position-ids-batch"),
    pytest.param(forward(input_ids=ids(), position_ids=torch.arange(5).unsqueeze(0)), ValueError,
                 r"position_ids has shape \(1, 5\)", id="position-ids-length"),
    # forward: decoding and cross-attention ------------------------------------------------------------
    pytest.param(forward(input_ids=ids(1), encoder_hidden_states=torch.zeros(1, 3, 64)), ValueError,
                 r"encoder_hidden_states were given but this model has no cross-attention", id="encoder-states"),
    pytest.param(forward(input_ids=ids(1), past_key_values=DynamicCache()), ValueError,
                 r"past_key_values needs a decoder", id="past-to-encoder"),
    pytest.param(lambda m: m.decoder(ids(), encoder_hidden_states=[[0.0] * 64]), TypeError,
                 r"encoder_hidden_states must be a torch.Tensor of encoder states, got list",
                 id="encoder-states-list"),
    pytest.param(lambda m: m.decoder(ids(), encoder_hidden_states=torch.zeros(2, 3, 32)), ValueError,
                 r"encoder_hidden_states has shape \(2, 3, 32\), expected \(batch=2, enc_len >= 1, 64\)",
                 id="encoder-states-width"),
    pytest.param(lambda m: m.decoder(ids(), encoder_hidden_states=torch.zeros(2, 3, 64, dtype=torch.float64)),
                 TypeError, r"encoder_hidden_states is torch.float64 but the model is torch.float32",
                 id="encoder-states-float64"),
    # config fields ------------------------------------------------------------------------------------
    pytest.param(config(hidden_dropout_prob="0.1"), TypeError,
                 r"BERTConfig.hidden_dropout_prob must be a float in \[0, 1\), got str '0.1'", id="config-dropout-str"),
    pytest.param(config(hidden_dropout_prob=1.0), ValueError,
                 r"BERTConfig.hidden_dropout_prob must be a float in \[0, 1\), got 1.0", id="config-dropout-one"),
    pytest.param(config(attention_probs_dropout_prob=-0.1), ValueError,
                 r"attention_probs_dropout_prob must be a float in \[0, 1\), got -0.1", id="config-attn-dropout"),
    pytest.param(config(attention_probs_dropout_prob=None), TypeError,
                 r"attention_probs_dropout_prob must be a float in \[0, 1\), got NoneType None",
                 id="config-attn-dropout-none"),
    pytest.param(config(classifier_dropout=1.5), ValueError,
                 r"classifier_dropout must be None or a float in \[0, 1\), got 1.5", id="config-classifier-dropout"),
    pytest.param(lambda m: BERTConfig.tiny(chunk_size_feed_forward=2.5), TypeError,
                 r"chunk_size_feed_forward must be a non-negative int, got float 2.5", id="config-chunk-float"),
    pytest.param(config(chunk_size_feed_forward=-1), ValueError,
                 r"chunk_size_feed_forward must be a non-negative int, got -1", id="config-chunk-negative"),
    pytest.param(config(num_attention_heads=0), ValueError,
                 r"BERTConfig.num_attention_heads must be a positive int, got 0", id="config-heads-zero"),
    pytest.param(config(vocab_size=-1), ValueError, r"BERTConfig.vocab_size must be a positive int, got -1",
                 id="config-vocab-negative"),
    pytest.param(config(hidden_size="768"), TypeError, r"BERTConfig.hidden_size must be a positive int, got str '768'",
                 id="config-hidden-str"),
    pytest.param(config(num_hidden_layers=2.5), TypeError,
                 r"num_hidden_layers must be a positive int, got float 2.5", id="config-layers-float"),
    pytest.param(config(num_hidden_layers=True), TypeError,
                 r"num_hidden_layers must be a positive int, got bool True", id="config-layers-bool"),
    pytest.param(config(hidden_size=100, num_attention_heads=12), ValueError,
                 r"hidden_size \(100\) must be divisible by num_attention_heads \(12\)", id="config-heads-divide"),
    pytest.param(config(hidden_act="gelu_fast_unknown"), ValueError,
                 r"hidden_act must be a callable or one of .*got 'gelu_fast_unknown'", id="config-act-unknown"),
    pytest.param(config(hidden_act=3), TypeError, r"hidden_act must be a callable or one of .*got int 3",
                 id="config-act-int"),
    pytest.param(config(position_embedding_type="relative_key"), ValueError,
                 r"position_embedding_type must be one of .*got 'relative_key'", id="config-position-type"),
    pytest.param(config(initializer_range=0.0), ValueError,
                 r"initializer_range must be a positive finite float, got 0.0", id="config-init-zero"),
    pytest.param(config(layer_norm_eps=float("nan")), ValueError,
                 r"layer_norm_eps must be a positive finite float, got nan", id="config-eps-nan"),
    pytest.param(config(layer_norm_eps="1e-12"), TypeError,
                 r"layer_norm_eps must be a positive finite float, got str '1e-12'", id="config-eps-str"),
    pytest.param(config(is_decoder="yes"), TypeError, r"BERTConfig.is_decoder must be True or False, got str 'yes'",
                 id="config-flag-str"),
    pytest.param(config(add_cross_attention=True), ValueError, r"add_cross_attention=True needs is_decoder=True",
                 id="config-cross-without-decoder"),
    pytest.param(config(vocab_size=10, pad_token_id=10), ValueError,
                 r"pad_token_id \(10\) must lie in \[0, vocab_size=10\)", id="config-pad-range"),
    pytest.param(config(pad_token_id="0"), TypeError, r"pad_token_id must be None or a non-negative int, got str '0'",
                 id="config-pad-str"),
    pytest.param(config(extra=[1]), TypeError, r"BERTConfig.extra must be a dict .*got list \[1\]",
                 id="config-extra-list"),
    pytest.param(lambda m: BERTConfig.from_dict([1, 2]), TypeError,
                 r"from_dict needs a dict \(a config.json object\), got list", id="config-from-dict-list"),
    # config.json files --------------------------------------------------------------------------------
    pytest.param(config_json("[1, 2]"), ValueError, r"config.json in .* holds a list, expected a JSON object",
                 id="config-json-list"),
    pytest.param(config_json('"bert"'), ValueError, r"config.json in .* holds a string, expected a JSON object",
                 id="config-json-string"),
    pytest.param(config_json(json.dumps(tiny_fields(hidden_dropout_prob="0.1"))), TypeError,
                 r"BERTConfig.hidden_dropout_prob must be a float in \[0, 1\), got str '0.1'", id="config-json-field"),
    # devices ------------------------------------------------------------------------------------------
    pytest.param(lambda m: m.bert.to(NO_SUCH_GPU), ValueError,
                 rf"device {NO_SUCH_GPU} \(cuda:{NO_SUCH_GPU}\) is not available here; available devices: .*cpu",
                 id="to-int"),
    pytest.param(lambda m: m.bert.to(device=NO_SUCH_GPU), ValueError,
                 rf"device {NO_SUCH_GPU} \(cuda:{NO_SUCH_GPU}\) is not available here", id="to-int-keyword"),
    pytest.param(lambda m: m.bert.to(-1), ValueError, r"device -1 is not a valid CUDA index", id="to-negative-int"),
    pytest.param(lambda m: m.bert.to(["cpu"]), TypeError,
                 r"device must be a string, an int \(a CUDA index\) or a torch.device, got list", id="to-list"),
    # checkpoints --------------------------------------------------------------------------------------
    pytest.param(checkpoint_with("embeddings.LayerNorm.weight", torch.ones(64, dtype=torch.long)), ValueError,
                 r"checkpoint tensor embeddings.LayerNorm.weight is torch.int64, but the model's tensor is "
                 r"torch.float32", id="checkpoint-int64"),
    pytest.param(checkpoint_with("pooler.dense.bias", torch.ones(64, dtype=torch.bool)), ValueError,
                 r"checkpoint tensor pooler.dense.bias is torch.bool, but the model's tensor is torch.float32",
                 id="checkpoint-bool"),
    pytest.param(checkpoint_with("encoder.layer.0.attention.self.query.weight", torch.ones(64, 64, dtype=torch.long)),
                 ValueError, r"checkpoint tensor encoder.layer.0.attention.self.query.weight is torch.int64, but the "
                 r"model's tensor is floating point", id="checkpoint-fused-int64"),
    pytest.param(checkpoint_with("encoder.layer.1.attention.self.value.bias", torch.ones(64, dtype=torch.bool)),
                 ValueError, r"checkpoint tensor encoder.layer.1.attention.self.value.bias is torch.bool",
                 id="checkpoint-fused-bool"),
    pytest.param(checkpoint_with("encoder.layer.0.attention.self.key.weight", torch.ones(32, 64)), ValueError,
                 r"checkpoint tensor encoder.layer.0.attention.self.key.weight has shape \(32, 64\), but "
                 r"encoder.layer.0.attention.self.query.weight has \(64, 64\)", id="checkpoint-fused-shape"),
    pytest.param(checkpoint_with("encoder.layer.0.attention.self.query.bias", torch.ones(2, 2, 16)), ValueError,
                 r"checkpoint tensor encoder.layer.0.attention.self.query.bias has shape \(2, 2, 16\), but",
                 id="checkpoint-fused-dims"),
    # labels of the heads ------------------------------------------------------------------------------
    pytest.param(lambda m: m.pretraining.get_loss(labels(0, (2, 3)), NSP, ids()), ValueError,
                 r"mlm_labels have shape \(2, 3\), expected \(2, 4\)", id="mlm-labels-shape"),
    pytest.param(lambda m: m.pretraining.get_loss(labels(100), NSP, ids()), ValueError,
                 r"mlm_labels must hold class ids in \[0, 100\) or -100 \(ignored\), got 100", id="mlm-labels-range"),
    pytest.param(lambda m: m.pretraining.get_loss(labels(-5), NSP, ids()), ValueError,
                 r"mlm_labels must hold class ids in \[0, 100\) or -100 \(ignored\), got -5",
                 id="mlm-labels-negative"),
    pytest.param(lambda m: m.pretraining.get_loss(torch.zeros(2, 4), NSP, ids()), TypeError,
                 r"mlm_labels must be an integer tensor, got torch.float32", id="mlm-labels-float"),
    pytest.param(lambda m: m.pretraining.get_loss([[1] * 4] * 2, NSP, ids()), TypeError,
                 r"mlm_labels must be a torch.Tensor of class ids, got list", id="mlm-labels-list"),
    pytest.param(lambda m: m.pretraining.get_loss(NO_MLM, torch.full((2,), 2), ids()), ValueError,
                 r"nsp_labels must hold class ids in \[0, 2\), got 2", id="nsp-labels-range"),
    pytest.param(lambda m: m.pretraining.get_loss(NO_MLM, torch.zeros(3, dtype=torch.long), ids()), ValueError,
                 r"got 3 nsp_labels for a batch of 2", id="nsp-labels-count"),
    pytest.param(lambda m: m.pretraining.get_mlm_accuracy(labels(0, (2, 3)), ids()), ValueError,
                 r"mlm_labels have shape \(2, 3\), expected \(2, 4\) to match the predictions",
                 id="mlm-accuracy-shape"),
    pytest.param(lambda m: m.pretraining.get_nsp_accuracy(torch.zeros(1, dtype=torch.long), ids()), ValueError,
                 r"got 1 nsp_labels for 2 predictions", id="nsp-accuracy-count"),
    pytest.param(lambda m: m.tokens.get_loss(labels(3), ids()), ValueError,
                 r"labels must hold class ids in \[0, 3\) or -100 \(ignored\), got 3", id="token-labels-range"),
    pytest.param(lambda m: m.tokens.get_loss(labels(0, (2, 5)), ids()), ValueError,
                 r"labels have shape \(2, 5\), expected \(2, 4\)", id="token-labels-shape"),
    pytest.param(lambda m: m.sequence.get_loss(torch.full((2,), 0.5), ids()), TypeError,
                 r"labels must be an integer tensor, got torch.float32", id="sequence-labels-float"),
    pytest.param(lambda m: m.sequence.get_loss(torch.full((2,), 3), ids()), ValueError,
                 r"labels must hold class ids in \[0, 3\), got 3", id="sequence-labels-range"),
    pytest.param(lambda m: m.qa.get_loss(torch.zeros(3, dtype=torch.long), torch.zeros(2, dtype=torch.long), ids()),
                 ValueError, r"start_positions has 3 entries for a batch of 2", id="qa-positions-count"),
    pytest.param(lambda m: m.qa.get_loss(torch.zeros(2, dtype=torch.long), torch.zeros(2), ids()), TypeError,
                 r"end_positions must be an integer tensor, got torch.float32", id="qa-positions-float"),
]


@pytest.mark.parametrize("call, error, match", CASES)
def test_bad_input_raises_one_clear_error(models, call, error, match):
    with pytest.raises(error, match=match), torch.no_grad():
        call(models)


def test_case_ids_are_unique():
    assert len({case.id for case in CASES}) == len(CASES)


def test_model_is_unchanged_after_a_refused_move(models):
    with pytest.raises(ValueError):
        models.bert.to(NO_SUCH_GPU)
    assert models.bert.device == torch.device("cpu")
    assert models.bert.to(torch.float32) is models.bert  # dtype and tensor forms still reach nn.Module.to
    assert models.bert.to(torch.zeros(1)).device == torch.device("cpu")


def test_non_finite_inputs_embeds_pass_through(models):
    """Documented choice: NaN/Inf in inputs_embeds are not looked for (that would cost a device sync per call);
    they reach the outputs of their own sequence only, and the call does not raise."""
    clean = torch.randn(2, 4, 64, generator=torch.Generator().manual_seed(0))
    for bad in (float("nan"), float("inf")):
        embeds = clean.clone()
        embeds[0, 1, 3] = bad
        with torch.no_grad():
            out = models.bert(inputs_embeds=embeds).last_hidden_state
            alone = models.bert(inputs_embeds=clean[1:]).last_hidden_state
        assert out[0].isnan().any()
        assert torch.isfinite(out[1]).all()
        torch.testing.assert_close(out[1], alone[0])


def test_valid_labels_with_ignored_positions_still_pass(models):
    mlm = labels(-100)
    mlm[0, 1] = 99
    with torch.no_grad():
        loss = models.pretraining.get_loss(mlm, NSP, ids())
        token_loss = models.tokens.get_loss(torch.tensor([[0, 2, -100, 1], [-100] * 4]), ids())
    assert torch.isfinite(loss) and torch.isfinite(token_loss)


def test_int32_ids_and_bool_masks_are_accepted(models):
    with torch.no_grad():
        a = models.bert(ids().int(), attention_mask=torch.ones(2, 4, dtype=torch.bool),
                        token_type_ids=torch.zeros(2, 4, dtype=torch.int32)).last_hidden_state
        b = models.bert(ids()).last_hidden_state
    torch.testing.assert_close(a, b)


def test_integer_buffers_in_hf_checkpoints_are_still_skipped(models):
    """HF files may carry int64 embeddings.position_ids / token_type_ids buffers: not weights, so not an error."""
    folder = models.folder / "hf-buffers"
    models.bert.save_pretrained(folder)
    state = load_file(str(folder / "model.safetensors"))
    save_file({**state, "embeddings.position_ids": torch.arange(32)[None],
               "embeddings.token_type_ids": torch.zeros(1, 32, dtype=torch.long)}, str(folder / "model.safetensors"))
    loaded = BERT.from_pretrained(folder, strict=True)
    assert not loaded.load_report.missing and not loaded.load_report.unexpected
