"""A head the load initialised at random (a backbone-only checkpoint such as all-MiniLM-L6-v2 loaded with MLM and NSP
heads) says so on the saliency and masking figures, where a reader sees its predictions; a checkpoint that holds the
head and a model trained since carry no such note."""

from __future__ import annotations

import warnings

import torch
from widgets_testlib import tiny_config

from bertviz_lab.model import BERT, BERTForPreTraining
from bertviz_lab.train.trainer import TrainConfig, Trainer
from bertviz_lab.widgets import MaskingPreview, SaliencyPanel

UNTRAINED = "was initialised at random, not loaded from the checkpoint, and is untrained"


def loaded(folder, cls=BERTForPreTraining):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the load's own warning lists the initialised tensors
        return cls.from_pretrained(folder).eval()


def test_an_initialised_head_is_named_on_the_saliency_and_masking_figures(minilm_tokenizer, tmp_path):
    torch.manual_seed(0)
    BERT(tiny_config(minilm_tokenizer.vocab_size)).save_pretrained(tmp_path / "backbone")
    model = loaded(tmp_path / "backbone")
    assert model.load_report.initialised_head == ["cls.predictions", "cls.seq_relationship"]

    panel = SaliencyPanel(model, minilm_tokenizer, "The cat sat on the [MASK].")
    assert panel.choice.key.startswith("mlm:")
    assert f"the head (cls.predictions, cls.seq_relationship) {UNTRAINED}" in panel.to_svg()

    preview = MaskingPreview(minilm_tokenizer, "The cat sat on the mat.", model=model)
    assert UNTRAINED in preview.model_note() and UNTRAINED in preview.to_svg()


def test_a_loaded_head_and_a_trained_one_carry_no_note(minilm_tokenizer, tmp_path):
    torch.manual_seed(0)
    BERTForPreTraining(tiny_config(minilm_tokenizer.vocab_size)).save_pretrained(tmp_path / "whole")
    whole = loaded(tmp_path / "whole")
    assert whole.load_report.initialised_head == []
    assert UNTRAINED not in SaliencyPanel(whole, minilm_tokenizer, "The cat sat on the [MASK].").to_svg()

    BERT(tiny_config(minilm_tokenizer.vocab_size)).save_pretrained(tmp_path / "backbone")
    model = loaded(tmp_path / "backbone").train()
    batch = minilm_tokenizer.encode_pretraining_inputs("The cat sat on the mat.", "It was warm.")
    inputs = {key: batch[key].unsqueeze(0) if batch[key].dim() == 1 else batch[key]
              for key in ("input_ids", "token_type_ids", "attention_mask")}
    labels = inputs["input_ids"].clone()
    step = {**inputs, "mlm_labels": labels, "nsp_labels": torch.tensor([0])}
    trainer = Trainer(model, [step], None, TrainConfig(max_steps=2, batch_size=1, progress=False, device="cpu",
                                                       log_interval=0, eval_interval=0))
    trainer.fit(1)
    assert model.load_report.initialised_head == [] and model.load_report.missing  # kept: what the load did
    assert UNTRAINED not in MaskingPreview(minilm_tokenizer, "The cat sat on the mat.", model=model.eval()).to_svg()
