"""Pretraining maths as plain functions: 80/10/10 masking, losses, predictions, accuracies, span decoding."""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple

import torch
import torch.nn.functional as F

from bertviz_lab.model.bert import check_tensor, value_range

IGNORE_INDEX = -100
# BERT's masking (Devlin et al. 2019): select this share of the eligible tokens, then replace a selected one by [MASK]
# with MASK_REPLACE_PROBABILITY, by a random token with RANDOM_REPLACE_PROBABILITY, else keep it. Every default
# of the package (heads, run config schema, synthetic batches, masking panel) reads these.
MASK_PROBABILITY = 0.15
MASK_REPLACE_PROBABILITY = 0.8
RANDOM_REPLACE_PROBABILITY = 0.1


def masking_split_label(mask_token: str = "[MASK]") -> str:
    """'80% [MASK], 10% random, 10% kept': the replacement split in words, from the constants above."""
    kept = 1.0 - MASK_REPLACE_PROBABILITY - RANDOM_REPLACE_PROBABILITY
    return (f"{MASK_REPLACE_PROBABILITY:.0%} {mask_token}, {RANDOM_REPLACE_PROBABILITY:.0%} random, "
            f"{kept:.0%} kept")


class MaskingPlan(NamedTuple):
    """What masking decided for each position (all (B, T) tensors): selected, and how each selected one changes."""

    selected: torch.Tensor  # bool: predicted by MLM (label = original id)
    to_mask: torch.Tensor  # bool: replaced by [MASK]
    to_random: torch.Tensor  # bool: replaced by a random non-special token
    random_ids: torch.Tensor  # long: the random token used where to_random
    eligible: torch.Tensor  # bool: could have been selected (not special, not padding)

    @property
    def kept(self) -> torch.Tensor:
        """Selected but left unchanged (still predicted)."""
        return self.selected & ~self.to_mask & ~self.to_random


def check_masking_probabilities(mlm_probability: float, mask_replace_prob: float, random_replace_prob: float) -> None:
    """BERT's masking shares, each a number in [0, 1], the two replacements at most 1 together; else one line naming
    the one that is not (a value out of range is an error, never clamped)."""
    for name, value in (("mlm_probability", mlm_probability), ("mask_replace_prob", mask_replace_prob),
                        ("random_replace_prob", random_replace_prob)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number in [0, 1], got {type(value).__name__} {value!r}.")
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value!r}.")
    if mask_replace_prob + random_replace_prob > 1.0 + 1e-9:
        raise ValueError(f"mask_replace_prob + random_replace_prob must be <= 1, got "
                         f"{mask_replace_prob} + {random_replace_prob}.")


def sample_masking(input_ids: torch.Tensor, *, vocab_size: int, special_token_ids: Iterable[int] = (),
                   attention_mask: torch.Tensor | None = None, special_tokens_mask: torch.Tensor | None = None,
                   mlm_probability: float = MASK_PROBABILITY,
                   mask_replace_prob: float = MASK_REPLACE_PROBABILITY,
                   random_replace_prob: float = RANDOM_REPLACE_PROBABILITY,
                   generator: torch.Generator | None = None, seed: int | None = None) -> MaskingPlan:
    """Decide BERT's masking: each eligible token is selected with p, then [MASK], random or kept (80/10/10 by
    default).

    Randomness is drawn on the CPU from `generator` (or a new one seeded with `seed`) so a seed gives the
    same plan on every device. Special ids, special_tokens_mask positions and padding are never eligible.
    """
    check_masking_probabilities(mlm_probability, mask_replace_prob, random_replace_prob)
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be 2D (batch, seq_len), got shape {tuple(input_ids.shape)}.")
    if generator is None:
        generator = torch.Generator()
        if seed is not None:
            generator.manual_seed(seed)
        else:
            generator.seed()
    device, shape = input_ids.device, input_ids.shape
    special = sorted({int(i) for i in special_token_ids})
    eligible = torch.ones(shape, dtype=torch.bool, device=device)
    if attention_mask is not None:
        if attention_mask.shape != shape:
            raise ValueError(f"attention_mask has shape {tuple(attention_mask.shape)}, expected {tuple(shape)}.")
        eligible &= attention_mask.bool()
    if special_tokens_mask is not None:
        if special_tokens_mask.shape != shape:
            raise ValueError(f"special_tokens_mask has shape {tuple(special_tokens_mask.shape)}, "
                             f"expected {tuple(shape)}.")
        eligible &= ~special_tokens_mask.bool()
    if special:
        eligible &= ~torch.isin(input_ids, torch.tensor(special, device=device))

    draws = torch.rand((2, *shape), generator=generator).to(device)
    selected = (draws[0] < mlm_probability) & eligible
    to_mask = selected & (draws[1] < mask_replace_prob)
    to_random = selected & (draws[1] >= mask_replace_prob) & (draws[1] < mask_replace_prob + random_replace_prob)
    candidates = torch.ones(vocab_size, dtype=torch.bool)
    candidates[[i for i in special if 0 <= i < vocab_size]] = False
    candidate_ids = candidates.nonzero().squeeze(1)
    random_ids = candidate_ids[torch.randint(len(candidate_ids), shape, generator=generator)].to(device)
    return MaskingPlan(selected, to_mask, to_random, random_ids, eligible)


def apply_masking(input_ids: torch.Tensor, plan: MaskingPlan, mask_token_id: int,
                  ignore_index: int = IGNORE_INDEX) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked input ids and MLM labels (original id where selected, ignore_index elsewhere)."""
    labels = torch.where(plan.selected, input_ids, torch.full_like(input_ids, ignore_index))
    masked = torch.where(plan.to_mask, torch.full_like(input_ids, mask_token_id), input_ids)
    masked = torch.where(plan.to_random, plan.random_ids, masked)
    return masked, labels


def create_masked_lm_inputs(input_ids: torch.Tensor, *, vocab_size: int, mask_token_id: int,
                            special_token_ids: Iterable[int] = (), attention_mask: torch.Tensor | None = None,
                            special_tokens_mask: torch.Tensor | None = None,
                            mlm_probability: float = MASK_PROBABILITY,
                            mask_replace_prob: float = MASK_REPLACE_PROBABILITY,
                            random_replace_prob: float = RANDOM_REPLACE_PROBABILITY,
                            ignore_index: int = IGNORE_INDEX, generator: torch.Generator | None = None,
                            seed: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's dynamic masking in one call: (masked_input_ids, labels)."""
    special = {int(mask_token_id), *special_token_ids}
    plan = sample_masking(input_ids, vocab_size=vocab_size, special_token_ids=special, attention_mask=attention_mask,
                          special_tokens_mask=special_tokens_mask, mlm_probability=mlm_probability,
                          mask_replace_prob=mask_replace_prob, random_replace_prob=random_replace_prob,
                          generator=generator, seed=seed)
    return apply_masking(input_ids, plan, mask_token_id, ignore_index)


# losses ----------------------------------------------------------------------------------------------
def check_class_ids(name: str, labels: Any, classes: int | None, ignore_index: int | None = None) -> None:
    """Integer ids in [0, classes) or ignore_index: else torch truncates floats, or asserts (on a GPU) on a bad id."""
    check_tensor(name, labels, "class ids")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor, got {labels.dtype}.")
    if classes is None or torch.compiler.is_compiling():  # the range check reads the labels back: eager only
        return
    kept = labels if ignore_index is None else labels.masked_fill(labels == ignore_index, 0)
    low, high = value_range(kept)
    if low < 0 or high >= classes:
        ignored = f" or {ignore_index} (ignored)" if ignore_index is not None else ""
        raise ValueError(f"{name} must hold class ids in [0, {classes}){ignored}, got {low if low < 0 else high}.")


def check_span_positions(name: str, positions: Any, batch: int) -> None:
    """One integer position per example (positions outside the sequence are clamped and ignored, as in HF)."""
    check_class_ids(name, positions, None)
    if positions.numel() != batch:
        raise ValueError(f"{name} has {positions.numel()} entries for a batch of {batch}.")


def token_loss(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = IGNORE_INDEX,
               reduction: str = "mean", name: str = "labels") -> torch.Tensor:
    """Cross-entropy over every labelled token of (B, T, V) logits (the MLM / token-classification loss)."""
    check_tensor(name, labels, "class ids")
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"{name} have shape {tuple(labels.shape)}, expected {tuple(logits.shape[:-1])} "
                         f"to match the logits.")
    check_class_ids(name, labels, logits.shape[-1], ignore_index)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1).long(),
                           ignore_index=ignore_index, reduction=reduction)


def sequence_loss(logits: torch.Tensor, labels: torch.Tensor, reduction: str = "mean",
                  name: str = "labels") -> torch.Tensor:
    """Cross-entropy of (B, K) logits against (B,) labels; MSE when K == 1 (regression)."""
    check_tensor(name, labels, "class ids (or regression targets)")
    labels = labels.reshape(-1)
    if labels.shape[0] != logits.shape[0]:
        raise ValueError(f"got {labels.shape[0]} {name} for a batch of {logits.shape[0]}.")
    if logits.shape[-1] == 1:
        return F.mse_loss(logits.squeeze(-1).float(), labels.float(), reduction=reduction)
    check_class_ids(name, labels, logits.shape[-1])
    return F.cross_entropy(logits.float(), labels.long(), reduction=reduction)


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = IGNORE_INDEX,
                   reduction: str = "mean", shift_labels: bool = True) -> torch.Tensor:
    """Next-token cross-entropy: position t predicts label t+1 when shift_labels."""
    check_tensor("labels", labels, "class ids")
    if shift_labels:
        if logits.shape[1] < 2:
            raise ValueError(f"next-token loss needs at least 2 tokens, got {logits.shape[1]}.")
        logits, labels = logits[:, :-1], labels[:, 1:]
    return token_loss(logits, labels, ignore_index, reduction)


# predictions and accuracies --------------------------------------------------------------------------
def predict_labels(logits: torch.Tensor) -> torch.Tensor:
    """Arg-max over the last dimension."""
    return logits.argmax(dim=-1)


def masked_accuracy(predictions: torch.Tensor, labels: torch.Tensor, ignore_index: int = IGNORE_INDEX,
                    name: str = "labels") -> torch.Tensor:
    """Share of labelled positions predicted right (0 when nothing is labelled)."""
    check_tensor(name, labels, "class ids")
    if labels.shape != predictions.shape:
        raise ValueError(f"{name} have shape {tuple(labels.shape)}, expected {tuple(predictions.shape)} "
                         f"to match the predictions.")
    valid = labels != ignore_index
    count = valid.sum()
    correct = ((predictions == labels) & valid).sum()
    return torch.where(count > 0, correct.float() / count.clamp_min(1).float(), torch.zeros((), device=labels.device))


def accuracy(predictions: torch.Tensor, labels: torch.Tensor, name: str = "labels") -> torch.Tensor:
    """Share of predictions equal to labels."""
    check_tensor(name, labels, "class ids")
    if labels.numel() != predictions.numel():
        raise ValueError(f"got {labels.numel()} {name} for {predictions.numel()} predictions.")
    return (predictions.reshape(-1) == labels.reshape(-1).to(predictions.device)).float().mean()


def best_spans(start_logits: torch.Tensor, end_logits: torch.Tensor, max_answer_length: int = 30,
               allowed: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per example, the span (start <= end, at most max_answer_length tokens) maximising p_start * p_end.

    `allowed` (B, T) bool limits both ends to e.g. context tokens. Returns (start, end, probability).
    """
    if max_answer_length < 1:
        raise ValueError(f"max_answer_length must be >= 1, got {max_answer_length}.")
    log_start = torch.log_softmax(start_logits.float(), dim=-1)
    log_end = torch.log_softmax(end_logits.float(), dim=-1)
    if allowed is not None:
        log_start = log_start.masked_fill(~allowed.bool(), float("-inf"))
        log_end = log_end.masked_fill(~allowed.bool(), float("-inf"))
    B, T = log_start.shape
    scores = log_start[:, :, None] + log_end[:, None, :]  # (B, T_start, T_end)
    offsets = torch.arange(T, device=scores.device)
    width = offsets[None, :] - offsets[:, None]  # end - start
    valid = (width >= 0) & (width < max_answer_length)
    scores = scores.masked_fill(~valid, float("-inf")).reshape(B, -1)
    best, flat = scores.max(dim=-1)
    return flat // T, flat % T, best.exp()
