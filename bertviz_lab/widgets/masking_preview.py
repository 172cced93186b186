"""MaskingPreview: watch BERT's 80/10/10 masking happen to a text, and what an MLM model predicts there."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import torch

from bertviz_lab.model.pretraining import MaskingPlan, apply_masking, sample_masking
from bertviz_lab.widgets.common import COLORS, Panel, chip, escape, evaluating, legend, table


def predicts_masked_tokens(model: torch.nn.Module) -> bool:
    """True for models with a masked-LM head (a causal decoder's head predicts the next token instead)."""
    predictions = getattr(getattr(model, "cls", None), "predictions", None)
    return predictions is not None and not getattr(getattr(model, "config", None), "is_decoder", False)


def mlm_scores(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """Vocabulary scores (B, T, V) from a model with an MLM head, or None for models without one."""
    if not predicts_masked_tokens(model):
        return None
    with evaluating(model), torch.inference_mode():
        out = model(**inputs)
    return out[0] if isinstance(out, tuple) else out


class MaskingPreview(Panel):
    """Sliders for p and the mask/random/keep split, a seed and a resample button; tokens coloured by fate."""

    def __init__(self, tokenizer: Any, text: str, model: torch.nn.Module | None = None, text_b: str | None = None,
                 mlm_probability: float = 0.15, mask_replace_prob: float = 0.8, random_replace_prob: float = 0.1,
                 seed: int = 0, top_k: int = 5) -> None:
        self.tokenizer, self.model, self.top_k = tokenizer, model, top_k
        self.probability = widgets.FloatSlider(value=mlm_probability, min=0.0, max=1.0, step=0.01,
                                               description="select p", readout_format=".2f")
        self.mask_share = widgets.FloatSlider(value=mask_replace_prob, min=0.0, max=1.0, step=0.05,
                                              description="→ [MASK]", readout_format=".2f")
        self.random_share = widgets.FloatSlider(value=random_replace_prob, min=0.0, max=1.0, step=0.05,
                                                description="→ random", readout_format=".2f")
        self.seed = widgets.IntText(value=seed, description="seed", layout=widgets.Layout(width="160px"))
        self.resample = widgets.Button(description="resample", icon="refresh")
        self.view = widgets.HTML()
        self.resample.on_click(lambda _: setattr(self.seed, "value", self.seed.value + 1))
        self.mask_share.observe(self._keep_split_valid, names="value")
        self.random_share.observe(self._keep_split_valid, names="value")
        for control in (self.probability, self.mask_share, self.random_share, self.seed):
            control.observe(lambda _: self.update(), names="value")
        controls = widgets.VBox([widgets.HBox([self.probability, self.seed, self.resample]),
                                 widgets.HBox([self.mask_share, self.random_share])])
        super().__init__([controls, self.view])
        self.set_text(text, text_b)

    def set_text(self, text: str, text_b: str | None = None) -> None:
        """Tokenize a new text (pair) and redraw."""
        encoded = self.tokenizer.encode_pretraining_inputs(text, text_b)
        self.inputs = {k: v.cpu() for k, v in encoded.items()}
        self.update()

    def _keep_split_valid(self, change: dict) -> None:
        """[MASK] share + random share may not exceed 1: lower the other slider."""
        if self.mask_share.value + self.random_share.value > 1.0:
            other = self.random_share if change["owner"] is self.mask_share else self.mask_share
            other.value = round(1.0 - change["new"], 2)

    @property
    def vocab_size(self) -> int:
        return self.model.config.vocab_size if self.model is not None else self.tokenizer.vocab_size

    def update(self) -> None:
        """Resample the masking with the current settings and redraw."""
        ids = self.inputs["input_ids"]
        self.plan: MaskingPlan = sample_masking(
            ids, vocab_size=self.vocab_size, special_token_ids=self.tokenizer.all_special_ids,
            attention_mask=self.inputs["attention_mask"], special_tokens_mask=self.inputs["special_tokens_mask"],
            mlm_probability=self.probability.value, mask_replace_prob=self.mask_share.value,
            random_replace_prob=min(self.random_share.value, 1.0 - self.mask_share.value), seed=self.seed.value)
        self.masked_ids, self.labels = apply_masking(ids, self.plan, self.tokenizer.mask_token_id)
        self.predictions = self._predict()
        self.view.value = self.static_html()

    @property
    def counts(self) -> dict[str, int]:
        """How many tokens were eligible, selected, and turned into [MASK] / random / kept."""
        plan = self.plan
        return {"tokens": int(plan.eligible.numel()), "eligible": int(plan.eligible.sum()),
                "selected": int(plan.selected.sum()), "mask": int(plan.to_mask.sum()),
                "random": int(plan.to_random.sum()), "kept": int(plan.kept.sum())}

    def _predict(self) -> list[tuple[int, list[tuple[str, float]]]]:
        """Top-k (token, probability) at each selected position, when the model has an MLM head."""
        if self.model is None:
            return []
        device = next(self.model.parameters()).device
        inputs = {"input_ids": self.masked_ids.to(device), "attention_mask": self.inputs["attention_mask"].to(device),
                  "token_type_ids": self.inputs["token_type_ids"].to(device)}
        scores = mlm_scores(self.model, inputs)
        if scores is None:
            return []
        positions = self.plan.selected[0].nonzero().squeeze(1).tolist()
        probs = torch.softmax(scores[0, positions].float(), dim=-1).cpu()
        top = probs.topk(min(self.top_k, probs.shape[-1]), dim=-1)
        return [(pos, [(self.tokenizer.convert_ids_to_tokens([int(i)])[0], float(p))
                       for p, i in zip(values, indices)]) for pos, values, indices in zip(positions, top.values, top.indices)]

    def _fate(self, position: int) -> tuple[str, str]:
        plan = self.plan
        if not plan.eligible[0, position]:
            return "special", "special or padding: never selected"
        if plan.to_mask[0, position]:
            return "mask", "selected → [MASK]"
        if plan.to_random[0, position]:
            return "random", "selected → random token"
        if plan.selected[0, position]:
            return "kept", "selected, kept as is (still predicted)"
        return "untouched", "not selected"

    def static_html(self) -> str:
        original = self.tokenizer.convert_ids_to_tokens(self.inputs["input_ids"][0].tolist())
        shown = self.tokenizer.convert_ids_to_tokens(self.masked_ids[0].tolist())
        cells = []
        for position, (before, after) in enumerate(zip(original, shown)):
            fate, title = self._fate(position)
            text = f"{before} → {after}" if fate == "random" else after
            label = before if self.plan.selected[0, position] else ""
            foreground = "#111" if fate in ("untouched", "kept") else "#fff"
            cells.append("<span style='display:inline-flex;flex-direction:column;align-items:center'>"
                         + chip(text, COLORS[fate], f"{title}; position {position}", foreground)
                         + f"<span style='font-size:10px;color:#555;font-family:monospace'>{escape(label) or '&nbsp;'}</span></span>")
        counts = self.counts
        summary = (f"{counts['selected']} of {counts['eligible']} eligible tokens selected: {counts['mask']} → [MASK], "
                   f"{counts['random']} → random, {counts['kept']} kept")
        parts = [legend([("[MASK]", COLORS["mask"]), ("random", COLORS["random"]), ("kept", COLORS["kept"]),
                         ("untouched", COLORS["untouched"]), ("special / padding", COLORS["special"])]),
                 f"<div style='margin:6px 0'>{''.join(cells)}</div>", f"<div>{escape(summary)}</div>"]
        if self.predictions:
            rows = [(pos, original[pos], ", ".join(f"{token} {p:.2f}" for token, p in top))
                    for pos, top in self.predictions]
            parts.append(table(["position", "original", f"top-{self.top_k} predictions"], rows))
        elif self.model is not None and not predicts_masked_tokens(self.model):
            parts.append(f"<div style='margin-top:6px;color:#555'>No predictions: {escape(type(self.model).__name__)} "
                         "has no masked-LM head (a BERTForMaskedLM or BERTForPreTraining predicts the masked "
                         "tokens).</div>")
        return "<div class='bvl-masking'>" + "".join(parts) + "</div>"
