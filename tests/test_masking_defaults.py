"""BERT's masking defaults have one source, model/pretraining.py: every function, the run config schema, the
synthetic batches and the masking panel take that very object as their default (`is`, so a retyped 0.15 fails)."""

from __future__ import annotations

import inspect

import pytest

from bertviz_lab.model import heads
from bertviz_lab.model import pretraining as P
from bertviz_lab.train import data, schema, synthetic
from bertviz_lab.widgets.panels.masking import MaskingPreview

DEFAULTS = {"mlm_probability": P.MASK_PROBABILITY, "mask_prob": P.MASK_PROBABILITY,
            "mask_replace_prob": P.MASK_REPLACE_PROBABILITY, "random_replace_prob": P.RANDOM_REPLACE_PROBABILITY}
TAKERS = [P.sample_masking, P.create_masked_lm_inputs, heads.BERTTaskModel._masked,
          heads.BERTTaskModel.create_masked_lm_inputs, heads.BERTForPreTraining.get_loss_from_text,
          heads.BERTForMaskedLM.get_loss_from_text, synthetic.create_mlm_batch,
          synthetic.generate_synthetic_bert_batches, data.MaskingCollator, data.PairBatches, data.evaluation_batches,
          MaskingPreview]


def test_the_constants_are_berts():
    assert (P.MASK_PROBABILITY, P.MASK_REPLACE_PROBABILITY, P.RANDOM_REPLACE_PROBABILITY) == (0.15, 0.8, 0.1)
    assert P.masking_split_label() == "80% [MASK], 10% random, 10% kept"
    assert P.masking_split_label("<mask>") == "80% <mask>, 10% random, 10% kept"


@pytest.mark.parametrize("taker", TAKERS, ids=lambda f: f.__qualname__)
def test_every_default_is_the_one_constant(taker):
    parameters = inspect.signature(taker).parameters
    found = {name: parameters[name].default for name in DEFAULTS if name in parameters}
    assert found, f"{taker.__qualname__} takes none of {sorted(DEFAULTS)}"
    for name, default in found.items():
        assert default is DEFAULTS[name], f"{taker.__qualname__}({name}={default!r}) is not the constant"


def test_the_run_config_default_is_the_constant():
    key = schema.key("data.mask_probability")
    assert key.default is P.MASK_PROBABILITY
    assert P.masking_split_label() in key.help
