"""patch(): the batched grid equals one forward per cell with a hand-made overwriting hook; normalized is exactly 1
where the patched cell is all the metric reads and 0 where it reads nothing of it; one forward per layer (and per
chunk); each bad input is one clear line."""

from __future__ import annotations

import math

import pytest
import torch
from hub_cache import perturbed
from trace_testlib import padded_batch, trace_config

from bertviz_lab.model import BERT, BERTForMaskedLM
from bertviz_lab.model.hook_points import hook_points, hooks
from bertviz_lab.trace import PatchResult, patch
from bertviz_lab.trace.patching import POINTS

TOLERANCE = 1e-5
MASKED = 5  # the position the single-row metric reads


def mlm_model(**config) -> BERTForMaskedLM:
    torch.manual_seed(0)
    return perturbed(BERTForMaskedLM(trace_config(**config)), seed=1)


def backbone() -> BERT:
    torch.manual_seed(0)
    return perturbed(BERT(trace_config()), seed=2)


def pair(lengths=(8, 5), corrupt_at: int = 2) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """A padded batch and the same batch with one token of every row replaced."""
    ids, mask, types = padded_batch(lengths)
    corrupted = ids.clone()
    corrupted[:, corrupt_at] = 4
    return ({"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
            {"input_ids": corrupted, "attention_mask": mask, "token_type_ids": types})


def hand_patched(model, clean, corrupted, metric, point: str) -> torch.Tensor:
    """The reference grid: per layer and cell (axis 1 of the point's tensor: a position, or a head) one forward of
    the corrupted batch with that cell overwritten by the clean run's value."""
    points = hook_points(model)
    names = []
    while (name := next((n for n in points if n.endswith(POINTS[point].format(layer=len(names)))), None)):
        names.append(name)
    _, cache = model.run_with_cache(**clean, names_filter=names)
    cells = cache[names[0]].shape[1]
    effect = torch.empty(len(names), cells)
    for layer, name in enumerate(names):
        for cell in range(cells):
            def overwrite(activation, hook_point, cell=cell, clean_value=cache[name]):
                activation = activation.clone()
                activation[:, cell] = clean_value[:, cell]
                return activation

            with torch.no_grad(), hooks(model, [(name, overwrite)]):
                effect[layer, cell] = float(metric(model(**corrupted)))
    return effect


CASES = {  # model, metric over the whole (two-row) batch's output
    "mlm": (mlm_model, lambda logits: logits[0, MASKED, 7] - logits[1, 3, 9]),
    "backbone": (backbone, lambda out: out.pooler_output[:, 0].sum() + out.last_hidden_state[1, 2, 3]),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("point", ["hidden", "attn_out", "mlp_out", "head_out"])
def test_batched_grid_equals_one_forward_per_cell(point, case):
    make, metric = CASES[case]
    model = make()
    clean, corrupted = pair()
    result = patch(model, clean, corrupted, metric, point=point)
    expected = hand_patched(model, clean, corrupted, metric, point)
    assert isinstance(result, PatchResult) and result.point == point
    assert result.effect.shape == expected.shape
    assert (result.effect - expected).abs().max() <= TOLERANCE
    with torch.no_grad():
        assert result.clean == pytest.approx(float(metric(model(**clean))), abs=TOLERANCE)
        assert result.corrupted == pytest.approx(float(metric(model(**corrupted))), abs=TOLERANCE)
    assert result.forwards == model.config.num_hidden_layers  # the whole row of cells in one forward per layer


def test_normalized_is_one_where_the_metric_reads_and_zero_where_it_does_not():
    model = mlm_model(initializer_range=0.5)  # weights large enough that the corruption moves the logits
    clean, corrupted = pair(lengths=(8,))
    result = patch(model, clean, corrupted, lambda logits: logits[0, MASKED, 7] - logits[0, MASKED, 11])
    assert abs(result.clean - result.corrupted) > 0.5  # so the ratio means something
    last = result.normalized[-1]
    # the MLM head reads position MASKED alone: its last-layer state is the whole clean answer, any other is nothing
    assert last[MASKED].item() == pytest.approx(1.0, abs=1e-4)
    others = [p for p in range(8) if p != MASKED]
    assert last[others].abs().max() <= 1e-4
    # before the last layer the other positions still reach MASKED through attention: the corrupted one matters
    assert result.normalized[0, 2].abs() > 1e-3


def test_chunks_and_positions_change_the_forwards_not_the_effect():
    model = mlm_model()
    clean, corrupted = pair()
    metric = CASES["mlm"][1]
    whole = patch(model, clean, corrupted, metric)
    chunked = patch(model, clean, corrupted, metric, chunk_size=3)
    assert chunked.forwards == 3 * math.ceil(8 / 3)
    assert (chunked.effect - whole.effect).abs().max() <= TOLERANCE
    some = patch(model, clean, corrupted, metric, positions=[MASKED, -6])
    assert some.forwards == 3 and some.effect.shape == (3, 8)
    assert (some.effect[:, [MASKED, 2]] - whole.effect[:, [MASKED, 2]]).abs().max() <= TOLERANCE
    assert torch.isnan(some.effect[:, [0, 1, 3, 4, 6, 7]]).all()


def test_bad_inputs_are_one_clear_line():
    model = mlm_model()
    clean, corrupted = pair()
    metric = CASES["mlm"][1]
    shorter = {key: value[:, :6] for key, value in corrupted.items()}
    with pytest.raises(ValueError, match="clean has 8 tokens, corrupted 6"):
        patch(model, clean, shorter, metric)
    with pytest.raises(ValueError, match=r"must return a scalar tensor, got a tensor of shape \(2, 8, 100\)"):
        patch(model, clean, corrupted, lambda logits: logits)
    with pytest.raises(ValueError, match="known points: hidden, attn_out, mlp_out, head_out"):
        patch(model, clean, corrupted, metric, point="resid_post")
    with pytest.raises(ValueError, match=r"positions must be ints in 0\.\.7"):
        patch(model, clean, corrupted, metric, positions=[8])
    with pytest.raises(ValueError, match="Sequential has no 'encoder.layer.{l}.hidden' hook points"):
        patch(torch.nn.Sequential(), clean, corrupted, metric)
    with pytest.raises(ValueError, match=r"call model\.eval\(\) first"):
        patch(model.train(), clean, corrupted, metric)
