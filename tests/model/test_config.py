"""BERTConfig: bert-base defaults, presets, validation messages, and HF config.json compatibility both ways."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

from bertviz_lab.model.config import BERTConfig
from bertviz_lab.model.weights import BERT_Weights

# Fields whose meaning is the same in transformers.BertConfig and ours.
SHARED_FIELDS = (
    "vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size", "hidden_act",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
    "initializer_range", "layer_norm_eps", "pad_token_id", "is_decoder", "add_cross_attention",
    "chunk_size_feed_forward", "use_cache", "classifier_dropout",
)


# defaults and presets --------------------------------------------------------------------------------
def test_defaults_equal_transformers_bert_base():
    ours, theirs = BERTConfig(), transformers.BertConfig()
    for name in SHARED_FIELDS:
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.tie_word_embedding == theirs.tie_word_embeddings
    assert ours.position_embedding_type == "absolute"
    assert ours.head_size == 64


def test_base_is_the_default_and_takes_overrides():
    assert BERTConfig.base() == BERTConfig()
    assert BERTConfig.base(num_hidden_layers=3).num_hidden_layers == 3


def test_large_sizes():
    config = BERTConfig.large()
    assert (config.hidden_size, config.num_attention_heads, config.num_hidden_layers, config.intermediate_size) == \
        (1024, 16, 24, 4096)
    assert config.head_size == 64
    assert BERTConfig.large(vocab_size=100).vocab_size == 100


def test_tiny_sizes_and_overrides_win():
    config = BERTConfig.tiny()
    assert (config.hidden_size, config.num_attention_heads, config.num_hidden_layers, config.intermediate_size,
            config.max_position_embeddings) == (128, 2, 2, 512, 128)
    assert BERTConfig.tiny(hidden_size=64).hidden_size == 64


def test_activation_resolves_names_and_callables():
    x = torch.linspace(-3, 3, 11)
    torch.testing.assert_close(BERTConfig(hidden_act="relu").activation()(x), torch.relu(x))
    torch.testing.assert_close(BERTConfig(hidden_act="gelu").activation()(x), torch.nn.functional.gelu(x))
    assert BERTConfig(hidden_act=torch.tanh).activation() is torch.tanh


# validation (bad values are in the matrix of test_bad_inputs.py) ----------------------------------
def test_cross_attention_with_decoder_is_valid():
    config = BERTConfig.tiny(is_decoder=True, add_cross_attention=True)
    assert config.is_decoder and config.add_cross_attention


def test_pad_token_none_is_valid():
    assert BERTConfig.tiny(pad_token_id=None).pad_token_id is None


def test_callable_hidden_act_is_accepted_but_not_serialisable(tmp_path):
    config = BERTConfig.tiny(hidden_act=lambda x: x * 2)
    assert torch.equal(config.activation()(torch.ones(2)), torch.full((2,), 2.0))
    with pytest.raises(ValueError, match="hidden_act is a callable"):
        config.to_dict()
    with pytest.raises(ValueError, match="hidden_act is a callable"):
        config.save_pretrained(tmp_path)


# config.json -----------------------------------------------------------------------------------------
def test_save_and_load_round_trip(tmp_path):
    config = BERTConfig.tiny(vocab_size=321, hidden_act="relu", is_decoder=True, add_cross_attention=True,
                             chunk_size_feed_forward=4, position_embedding_type="sinusoidal",
                             tie_word_embedding=False, classifier_dropout=0.2, num_labels=5, pad_token_id=3)
    out = config.save_pretrained(tmp_path / "nested" / "dir")
    assert out == tmp_path / "nested" / "dir" / "config.json"
    data = json.loads(out.read_text())
    assert data["model_type"] == "bert"
    assert data["tie_word_embeddings"] is False and "tie_word_embedding" not in data
    loaded = BERTConfig.from_pretrained(tmp_path / "nested" / "dir")
    assert loaded == config
    assert BERTConfig.from_pretrained(out) == config  # a file path works as well as a folder


def test_to_dict_from_dict_round_trip():
    config = BERTConfig.large(hidden_dropout_prob=0.0)
    assert BERTConfig.from_dict(config.to_dict()) == config


def test_reads_minilm_config_json():
    path = BERT_Weights.DEFAULT.path
    config = BERTConfig.from_pretrained(path)
    assert (config.vocab_size, config.hidden_size, config.num_attention_heads, config.num_hidden_layers,
            config.intermediate_size, config.max_position_embeddings) == (30522, 384, 12, 6, 1536, 512)
    assert config.hidden_act == "gelu" and config.pad_token_id == 0
    # file-describing keys (architectures, transformers_version, _name_or_path, ...) are not kept
    assert "architectures" not in config.extra and "_name_or_path" not in config.extra
    theirs = transformers.BertConfig.from_pretrained(str(path))
    for name in ("vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
                 "max_position_embeddings", "type_vocab_size", "layer_norm_eps", "hidden_act"):
        assert getattr(config, name) == getattr(theirs, name), name


def test_transformers_reads_our_config(tmp_path):
    config = BERTConfig.tiny(vocab_size=321, hidden_act="gelu_new", type_vocab_size=3, is_decoder=True,
                             add_cross_attention=True, layer_norm_eps=1e-7)
    config.save_pretrained(tmp_path)
    theirs = transformers.BertConfig.from_pretrained(str(tmp_path))
    for name in SHARED_FIELDS:
        assert getattr(theirs, name) == getattr(config, name), name
    assert theirs.model_type == "bert"


def test_hf_written_config_reads_back(tmp_path):
    theirs = transformers.BertConfig(vocab_size=99, hidden_size=48, num_attention_heads=3, num_hidden_layers=1,
                                     intermediate_size=96, hidden_act="relu", tie_word_embeddings=False)
    theirs.save_pretrained(str(tmp_path))
    config = BERTConfig.from_pretrained(tmp_path)
    for name in ("vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
                 "hidden_act"):
        assert getattr(config, name) == getattr(theirs, name), name
    assert config.tie_word_embedding is False


def test_unknown_keys_are_preserved_in_extra(tmp_path):
    data = BERTConfig.tiny().to_dict()
    data.update({"my_custom_setting": {"a": 1}, "sentence_pooling": "mean", "architectures": ["BertModel"]})
    (tmp_path / "config.json").write_text(json.dumps(data))
    config = BERTConfig.from_pretrained(tmp_path)
    assert config.extra == {"my_custom_setting": {"a": 1}, "sentence_pooling": "mean"}
    written = json.loads(config.save_pretrained(tmp_path / "again").read_text())
    assert written["my_custom_setting"] == {"a": 1} and written["sentence_pooling"] == "mean"
    # known fields win over a stale copy in extra
    assert BERTConfig(hidden_size=64, num_attention_heads=4, extra={"hidden_size": 1}).to_dict()["hidden_size"] == 64


def test_id2label_sets_num_labels():
    data = {k: v for k, v in BERTConfig.tiny().to_dict().items() if k != "num_labels"}
    config = BERTConfig.from_dict({**data, "id2label": {"0": "a", "1": "b", "2": "c"}})
    assert config.num_labels == 3
    assert "id2label" not in config.extra


def test_foreign_model_type_is_rejected(tmp_path):
    with pytest.raises(ValueError, match=r"model_type is 'gpt2', expected 'bert'"):
        BERTConfig.from_dict({"model_type": "gpt2", "n_embd": 768})
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5", "hidden_size": 64}))
    with pytest.raises(ValueError, match="'t5'"):
        BERTConfig.from_pretrained(tmp_path)


def test_missing_config_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="No config.json"):
        BERTConfig.from_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="No config.json"):
        BERTConfig.from_pretrained(tmp_path / "does-not-exist")


def test_invalid_json_names_the_file(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json is not valid JSON"):
        BERTConfig.from_pretrained(tmp_path)


def test_invalid_values_in_file_are_rejected(tmp_path):
    data = BERTConfig.tiny().to_dict() | {"hidden_size": 129}
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="must be divisible by num_attention_heads"):
        BERTConfig.from_pretrained(tmp_path)


def test_gelu_form_tells_the_kernels_which_gelu_the_activation_is():
    assert BERTConfig(hidden_act="gelu").gelu_form == "erf"
    assert BERTConfig(hidden_act="gelu_new").gelu_form == BERTConfig(hidden_act="gelu_pytorch_tanh").gelu_form == "tanh"
    assert BERTConfig(hidden_act="relu").gelu_form is None
    assert BERTConfig(hidden_act=torch.nn.functional.gelu).gelu_form is None  # a callable: computed as given
