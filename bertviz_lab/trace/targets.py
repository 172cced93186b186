"""What a model can be asked about: which heads it has, what they returned, and the saliency targets that fit them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from bertviz_lab.trace.saliency import named_outputs

TOP_PREDICTIONS = 3  # predicted tokens offered per [MASK]
MAX_MASKS = 8  # [MASK] positions offered as targets
MAX_POSITIONS = 64  # token positions offered (token classification, MLM without a [MASK])
MAX_LABELS = 50  # classes offered


def _head_owner(model: torch.nn.Module) -> torch.nn.Module:
    """The module holding the heads (`cls`): the model, or the model a dictionary-output wrapper holds."""
    inner = getattr(model, "model", None)
    return inner if not hasattr(model, "cls") and isinstance(inner, torch.nn.Module) else model


def _is_decoder(model: torch.nn.Module) -> bool:
    return bool(getattr(getattr(model, "config", None), "is_decoder", False))


def predicts_masked_tokens(model: torch.nn.Module) -> bool:
    """True for models with a masked-LM head (a causal decoder's head predicts the next token instead)."""
    predictions = getattr(getattr(_head_owner(model), "cls", None), "predictions", None)
    return predictions is not None and not _is_decoder(model)


def predicts_next_sentence(model: torch.nn.Module) -> bool:
    """True for models with a next-sentence head (BERTForPreTraining, BERTForNextSentencePrediction)."""
    return getattr(getattr(_head_owner(model), "cls", None), "seq_relationship", None) is not None


def split_heads(model: torch.nn.Module, out: Any) -> tuple[Any, Any]:
    """(MLM scores or None, NSP scores or None) from what the model's forward returned, whoever ran it."""
    mlm, nsp = predicts_masked_tokens(model), predicts_next_sentence(model)
    if not (mlm or nsp):
        return None, None
    if isinstance(out, dict):
        return out.get("mlm_logits"), out.get("nsp_logits")
    if isinstance(out, tuple):
        return (out[0] if mlm else None), (out[1] if nsp and len(out) > 1 else None)
    return (out, None) if mlm else (None, out)


# targets ---------------------------------------------------------------------------------------------------------
def sequence_output(output: Any) -> torch.Tensor:
    """The last layer's token vectors (B, T, C) from a backbone's output (named tuple, dict or plain tuple)."""
    if isinstance(output, Mapping):
        for name in ("last_hidden_state", "sequence_output"):
            value = output.get(name)
            if isinstance(value, torch.Tensor):
                return value
    hidden = getattr(output, "last_hidden_state", None)
    if isinstance(hidden, torch.Tensor):
        return hidden
    if isinstance(output, tuple) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise ValueError(f"the model's output ({type(output).__name__}) holds no token vectors to score.")


def cls_norm(output: Any) -> torch.Tensor:
    """The length of the last layer's [CLS] vector, one score per row."""
    score: torch.Tensor = sequence_output(output)[:, 0].norm(dim=-1)
    return score


def mean_norm(output: Any) -> torch.Tensor:
    """The length of the mean of the last layer's token vectors: a sentence embedding, pooled as MiniLM's is."""
    score: torch.Tensor = sequence_output(output).mean(dim=1).norm(dim=-1)
    return score


@dataclasses.dataclass(frozen=True)
class HiddenUnit:
    """One unit of the last layer's [CLS] vector as the target."""

    unit: int

    def __call__(self, output: Any) -> torch.Tensor:
        hidden = sequence_output(output)
        if not 0 <= self.unit < hidden.shape[-1]:
            raise ValueError(f"hidden unit {self.unit} does not exist; the model's vectors have units "
                             f"0..{hidden.shape[-1] - 1}.")
        return hidden[:, 0, self.unit]


@dataclasses.dataclass(frozen=True)
class OutputLogit:
    """One logit of a tuple output, e.g. the question-answering start logit at a position."""

    index: int
    position: int

    def __call__(self, output: Any) -> torch.Tensor:
        logits: torch.Tensor = output[self.index]
        return logits[:, self.position]


@dataclasses.dataclass(frozen=True)
class TargetChoice:
    """One target the toolbar offers: its key, its label in the chooser, its name in the figure, and what saliency
    receives (a shorthand or a callable); `unit` marks the [CLS] hidden-unit target, whose unit is picked beside."""

    key: str
    label: str
    title: str
    target: Any
    unit: bool = False

    @property
    def reads_head(self) -> bool:
        """Whether the target is an output of a head (MLM, NSP, a classifier, ...), not of the backbone alone."""
        return self.key not in ("cls-norm", "mean-norm", "cls-unit") and not self.key.startswith("custom")


def _quoted(token: str) -> str:
    return f"“{token}”"


def _label_names(model: torch.nn.Module, count: int) -> list[str]:
    config = getattr(model, "config", None)
    label_names = getattr(config, "label_names", None)
    names = label_names() if callable(label_names) else []
    return [names[i] if i < len(names) else f"LABEL_{i}" for i in range(count)]


def target_choices(model: torch.nn.Module, tokenizer: Any, encoding: Mapping[str, torch.Tensor],
                   output: Any) -> tuple[list[TargetChoice], str, str]:
    """The targets that fit the model's heads and the text, the default one's key, and a note on the default.

    `output` is what the model's forward returned on `encoding`: its predictions name the offered tokens and labels.
    The default: the top prediction at the first [MASK], else NSP for a pair, else the predicted class (or token
    label, or answer start), else the length of the backbone's [CLS] vector.
    """
    named = {k: v for k, v in named_outputs(model, output).items() if isinstance(v, torch.Tensor)}
    ids = encoding["input_ids"][0].tolist()
    tokens = tokenizer.convert_ids_to_tokens(ids)
    special = encoding["special_tokens_mask"][0].tolist() if "special_tokens_mask" in encoding else [0] * len(ids)
    types = encoding["token_type_ids"][0].tolist() if "token_type_ids" in encoding else [0] * len(ids)
    plain = [p for p, s in enumerate(special) if not s]
    ordinary = plain[:MAX_POSITIONS]
    choices: list[TargetChoice] = []
    ranked: dict[str, str] = {}  # kind of default -> the key of its choice
    note = ""

    def name(token_id: int) -> str:
        token: str = tokenizer.convert_ids_to_tokens([token_id])[0]
        return token

    mlm = named.get("mlm_logits")
    if mlm is not None and mlm.dim() == 3 and _is_decoder(model):
        last = plain[-1] if plain else len(ids) - 1  # the text's last word, not the [SEP] after it
        for rank, token_id in enumerate(mlm[0, last].float().topk(TOP_PREDICTIONS).indices.tolist(), start=1):
            choices.append(TargetChoice(
                f"next:{last}:{token_id}", f"next token after {tokens[last]} → {name(token_id)} (top {rank})",
                f"logit of {_quoted(name(token_id))} as the token after {_quoted(tokens[last])} (top {rank})",
                ("mlm", last, token_id)))
        ranked["next"] = choices[0].key
    elif mlm is not None and mlm.dim() == 3:
        masks = [p for p, i in enumerate(ids) if i == tokenizer.mask_token_id][:MAX_MASKS]
        for position in masks:
            top = mlm[0, position].float().topk(TOP_PREDICTIONS).indices.tolist()
            for rank, token_id in enumerate(top, start=1):
                choices.append(TargetChoice(
                    f"mlm:{position}:{token_id}", f"[MASK] at {position} → {name(token_id)} (top {rank})",
                    f"MLM logit of {_quoted(name(token_id))} at position {position} ([MASK], top {rank})",
                    ("mlm", position, token_id)))
        if masks:
            ranked["mask"] = choices[0].key
        else:
            for position in ordinary:
                choices.append(TargetChoice(
                    f"mlm:{position}:{ids[position]}", f"MLM: {tokens[position]} at {position} (the word itself)",
                    f"MLM logit of {_quoted(tokens[position])} at position {position} (the word itself)",
                    ("mlm", position, ids[position])))
            if ordinary:
                ranked["word"] = f"mlm:{ordinary[0]}:{ids[ordinary[0]]}"
                note = "no [MASK] in the text: put one in to see what the model predicts there"
    nsp = named.get("nsp_logits")
    if nsp is not None and nsp.dim() == 2:
        choices.append(TargetChoice("nsp", "NSP: IsNext logit", "NSP logit of IsNext (B follows A)", "nsp"))
        ranked["pair" if any(types) else "nsp"] = "nsp"
    classes = named.get("class_logits")
    if classes is not None and classes.dim() == 2:
        count, predicted = classes.shape[1], int(classes[0].argmax())
        if count == 1:
            choices.append(TargetChoice("class:0", "score (regression)", "the regression score", ("class", 0)))
        for label, label_name in enumerate(_label_names(model, count)[:MAX_LABELS] if count > 1 else []):
            mark = " (predicted)" if label == predicted else ""
            choices.append(TargetChoice(f"class:{label}", f"class: {label_name}{mark}",
                                        f"logit of class {_quoted(label_name)}{mark}", ("class", label)))
        ranked["class"] = f"class:{predicted if count > 1 else 0}"
    per_token = named.get("token_logits")
    if per_token is not None and per_token.dim() == 3:
        names = _label_names(model, per_token.shape[-1])
        for position in ordinary:
            label = int(per_token[0, position].argmax())
            choices.append(TargetChoice(
                f"token:{position}:{label}", f"token {position} {tokens[position]} → {names[label]} (predicted)",
                f"logit of {_quoted(names[label])} for {_quoted(tokens[position])} at position {position} (predicted)",
                ("token", position, label)))
            ranked.setdefault("token", choices[-1].key)
    for index, which in enumerate(("start", "end")):
        logits = named.get(f"{which}_logits")
        if logits is not None and logits.dim() == 2 and isinstance(output, tuple):
            position = int(logits[0].argmax())
            choices.append(TargetChoice(
                f"{which}:{position}", f"answer {which} at {position} {tokens[position]} (predicted)",
                f"answer-{which} logit at position {position} {_quoted(tokens[position])} (predicted)",
                OutputLogit(index, position)))
            ranked.setdefault("answer", choices[-1].key)
    if "last_hidden_state" in named or "sequence_output" in named:
        choices += [
            TargetChoice("cls-norm", "length of the [CLS] output vector",
                         "length of the last layer's [CLS] vector", cls_norm),
            TargetChoice("mean-norm", "length of the mean output vector",
                         "length of the mean of the last layer's token vectors (sentence embedding)", mean_norm),
            TargetChoice("cls-unit", "one unit of the [CLS] output vector", "one unit of the [CLS] vector", None,
                         unit=True),
        ]
        ranked["backbone"] = "cls-norm"
    order = ("mask", "pair", "class", "token", "answer", "next", "word", "nsp", "backbone")
    kind = next((kind for kind in order if kind in ranked), "")
    if kind == "backbone":
        note = "no task head: the target is a function of the backbone's output"
    return choices, ranked.get(kind, ""), note if kind in ("word", "backbone") else ""


