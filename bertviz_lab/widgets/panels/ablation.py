"""Head ablation for the model view: the same input run again with some heads switched off (trace.ablate), and what
that changed: every head's attention, the masked-LM predictions at [MASK] positions, P(IsNext) for a pair."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bertviz_lab.trace.hooks import Trace, trace
from bertviz_lab.trace.interventions import ABLATION_MODES, ablate
from bertviz_lab.trace.targets import predicts_next_sentence, split_heads
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.panels.masking import format_probability
from bertviz_lab.widgets.panels.running import evaluating

Heads = tuple[tuple[int, int], ...]
TOP_PREDICTIONS = 3


@dataclass(frozen=True)
class MaskedChange:
    """The top predictions at one [MASK] position, before and after the ablation: (token, probability) each."""

    position: int
    before: list[tuple[str, float]]
    after: list[tuple[str, float]]


@dataclass(frozen=True)
class Ablation:
    """One input run with heads off next to the same input run with all heads: attention maps and head outputs."""

    heads: Heads
    mode: str
    before: Trace
    after: Trace
    before_output: Any
    after_output: Any
    model: torch.nn.Module
    tokenizer: Any
    row: int = 0

    def attention_change(self, keep: np.ndarray) -> np.ndarray:
        """(L, H): how far each head's attention moved, 0 (the same) to 1 (disjoint); see D.attention_change."""
        return D.attention_change(self.before.attentions, self.after.attentions, self.row, keep)

    def masked_changes(self, top: int = TOP_PREDICTIONS) -> list[MaskedChange]:
        """Top predictions at every [MASK] of the input, before → after (empty without an MLM head or a [MASK])."""
        mask_id = getattr(self.tokenizer, "mask_token_id", None)
        ids = self.before.input_ids
        before, after = split_heads(self.model, self.before_output)[0], split_heads(self.model, self.after_output)[0]
        if mask_id is None or ids is None or before is None or after is None:
            return []
        positions = (ids[self.row] == mask_id).nonzero().squeeze(1).tolist()
        names = self.tokenizer.convert_ids_to_tokens

        def ranked(scores: torch.Tensor, position: int) -> list[tuple[str, float]]:
            probs = torch.softmax(scores[self.row, position].float(), dim=-1).cpu()
            best = probs.topk(min(top, probs.shape[-1]))
            return [(names([int(i)])[0], float(p)) for p, i in zip(best.values, best.indices)]

        return [MaskedChange(p, ranked(before, p), ranked(after, p)) for p in positions]

    def is_next(self) -> tuple[float, float] | None:
        """P(IsNext) before and after, for a sentence pair and a model with a next-sentence head; else None."""
        types = self.before.token_type_ids
        if not predicts_next_sentence(self.model) or types is None or not bool((types[self.row] == 1).any()):
            return None
        before, after = split_heads(self.model, self.before_output)[1], split_heads(self.model, self.after_output)[1]
        if before is None or after is None:
            return None
        is_next_before, is_next_after = (float(torch.softmax(s[self.row].float(), dim=-1)[0]) for s in (before, after))
        return is_next_before, is_next_after

    def lines(self) -> list[str]:
        """The changed predictions as plain lines ("[MASK] at 6: mat 0.31 → dog 0.25"), for the view and the SVG."""
        lines = []
        for change in self.masked_changes():
            def top(ranked: list[tuple[str, float]]) -> str:
                return ", ".join(f"{token} {format_probability(p)}" for token, p in ranked)
            lines.append(f"[MASK] at {change.position}: {top(change.before)} → {top(change.after)}")
        nsp = self.is_next()
        if nsp is not None:
            lines.append(f"P(IsNext): {format_probability(nsp[0])} → {format_probability(nsp[1])}")
        return lines


def heads_text(heads: Heads) -> str:
    """'L0 H1, L2 H3' for the heads switched off."""
    return ", ".join(f"L{layer} H{head}" for layer, head in heads)


def run_ablated(model: torch.nn.Module, inputs: dict[str, torch.Tensor], heads: Heads, mode: str) -> tuple[Trace, Any]:
    """The model's forward on `inputs` with `heads` off, attentions traced; the model keeps no hook afterwards."""
    if mode not in ABLATION_MODES:
        raise ValueError(f"mode must be one of {ABLATION_MODES}, got {mode!r}.")
    device = next(model.parameters()).device
    inputs = {key: value.to(device) for key, value in inputs.items()}
    with evaluating(model), torch.inference_mode(), ablate(model, set(heads), mode), \
            trace(model, attentions=True, shapes=False) as recorded:
        output = model(**inputs)
    return recorded, output


def summary_html(ablation: Ablation | None, has_model: bool) -> str:
    """The line under the ablation controls: which heads are off (the model view says what that changed); its look
    is model_view.css's (theme colours)."""
    if not has_model:
        return ("<span class='bvl-ablation-summary bvl-ablation-quiet'>switching heads off needs the model: build the "
                "panel with model= and tokenizer=</span>")
    if ablation is None:
        return ("<span class='bvl-ablation-summary bvl-ablation-quiet'>all heads on · choose “switch it off” and "
                "click thumbnails (or shift-click any time, or press Space on a focused one) to run the text again "
                "without them</span>")
    what = "" if ablation.lines() else (" · no [MASK] in the text and no sentence pair with a next-sentence head: "
                                         "only the attention maps show the change")
    return (f"<div class='bvl-ablation-summary'><b>{len(ablation.heads)} head{'s' if len(ablation.heads) != 1 else ''}"
            f" off ({escape(ablation.mode)})</b>: {escape(heads_text(ablation.heads))}{escape(what)}</div>")
