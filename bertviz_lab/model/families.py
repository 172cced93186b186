"""BERT's close relatives as variants of our one model: what each family changes, in one small table.

RoBERTa and XLM-RoBERTa, DistilBERT and ELECTRA are BERT encoders with a few differences: where positions start,
whether token types exist, an embedding projection, their heads and their parameter names. A `Family` states those
differences; the embeddings (layers.py), the heads (heads.py), the config (config.py) and the checkpoint names
(weights.py) read them from here, so every other part of the package (hooks, traces, widgets) sees the same model.

Parameter names: a family's checkpoint names are BERT's Hugging Face names with some dotted parts renamed. `renames`
lists those parts as (BERT part, family part) pairs, each applied at most once per name, in order, in either
direction: `to_family` on the way out (save_pretrained), `to_bert` on the way in (loading).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MODEL_TYPES = ("bert", "roberta", "xlm-roberta", "distilbert", "electra")


@dataclass(frozen=True)
class Family:
    """One BERT relative: its config.json spelling, its embeddings, its heads and its checkpoint names."""

    model_type: str  # config.json's model_type
    class_prefix: str  # transformers class names: <prefix>Model, <prefix>ForMaskedLM
    renames: tuple[tuple[str, str], ...] = ()  # (BERT HF name part, this family's part)
    token_types: bool = True  # a token-type embedding (DistilBERT has none)
    positions_after_padding: bool = False  # RoBERTa: position = padding_idx + 1 + index among the non-pad tokens
    pooler: bool = True  # the backbone's [CLS] pooler exists by default
    head_activation: str | None = None  # the MLM head's activation when fixed by the family (else hidden_act)
    config_keys: dict[str, str] = field(default_factory=dict)  # BERTConfig name -> this family's config.json key
    config_defaults: dict[str, Any] = field(default_factory=dict)  # what a config.json without the key means
    special_tokens: dict[str, str] = field(default_factory=dict)  # the tokenizer's specials, when not BERT's

    def architecture(self, bert_architecture: str) -> str:
        """The transformers class name for ours ("BertForMaskedLM" -> "RobertaForMaskedLM")."""
        if bert_architecture.startswith("Bert"):
            return self.class_prefix + bert_architecture[len("Bert"):]
        return bert_architecture

    def to_family(self, name: str) -> str:
        """A BERT Hugging Face parameter name as this family's checkpoints spell it."""
        for bert_part, family_part in self.renames:
            name = _rename(name, bert_part, family_part)
        return name

    def to_bert(self, name: str) -> str:
        """This family's parameter name as BERT's Hugging Face checkpoints spell it."""
        for bert_part, family_part in self.renames:
            name = _rename(name, family_part, bert_part)
        return name


def _rename(name: str, old: str, new: str) -> str:
    """Replace the dotted run `old` of `name` (a whole run of its parts, first match only) by `new`."""
    if name == old:
        return new
    if name.startswith(f"{old}."):
        return new + name[len(old):]
    if name.endswith(f".{old}"):
        return name[: -len(old)] + new
    return name.replace(f".{old}.", f".{new}.", 1)


_ROBERTA_RENAMES = (
    ("bert", "roberta"),
    ("cls.predictions.transform.dense", "lm_head.dense"),
    ("cls.predictions.transform.LayerNorm", "lm_head.layer_norm"),
    ("cls.predictions.decoder", "lm_head.decoder"),
    ("cls.predictions.bias", "lm_head.bias"),
)
_ROBERTA_SPECIALS = dict(unk_token="<unk>", sep_token="</s>", pad_token="<pad>", cls_token="<s>",
                         mask_token="<mask>")

BERT = Family("bert", "Bert")
ROBERTA = Family("roberta", "Roberta", _ROBERTA_RENAMES, positions_after_padding=True, head_activation="gelu",
                 config_defaults=dict(pad_token_id=1, bos_token_id=0, eos_token_id=2, max_position_embeddings=514,
                                      type_vocab_size=1, layer_norm_eps=1e-5),
                 special_tokens=_ROBERTA_SPECIALS)
XLM_ROBERTA = Family("xlm-roberta", "XLMRoberta", _ROBERTA_RENAMES, positions_after_padding=True,
                     head_activation="gelu", config_defaults=ROBERTA.config_defaults,
                     special_tokens=_ROBERTA_SPECIALS)
DISTILBERT = Family(
    "distilbert", "DistilBert",
    (
        ("bert", "distilbert"),
        ("encoder.layer", "transformer.layer"),
        ("attention.self.query", "attention.q_lin"),
        ("attention.self.key", "attention.k_lin"),
        ("attention.self.value", "attention.v_lin"),
        ("attention.output.dense", "attention.out_lin"),
        ("attention.output.LayerNorm", "sa_layer_norm"),
        ("intermediate.dense", "ffn.lin1"),
        ("output.dense", "ffn.lin2"),
        ("output.LayerNorm", "output_layer_norm"),
        ("cls.predictions.transform.dense", "vocab_transform"),
        ("cls.predictions.transform.LayerNorm", "vocab_layer_norm"),
        ("cls.predictions.bias", "vocab_projector.bias"),
        ("cls.predictions.decoder", "vocab_projector"),
    ),
    token_types=False, pooler=False,
    config_keys=dict(hidden_size="dim", num_hidden_layers="n_layers", num_attention_heads="n_heads",
                     intermediate_size="hidden_dim", hidden_act="activation", hidden_dropout_prob="dropout",
                     attention_probs_dropout_prob="attention_dropout", classifier_dropout="seq_classif_dropout"),
    config_defaults=dict(hidden_size=768, num_hidden_layers=6, num_attention_heads=12, intermediate_size=3072,
                         classifier_dropout=0.2),
)
ELECTRA = Family(
    "electra", "Electra",
    (
        ("bert", "electra"),
        ("embeddings.project", "embeddings_project"),
        ("cls.predictions.transform.dense", "generator_predictions.dense"),
        ("cls.predictions.transform.LayerNorm", "generator_predictions.LayerNorm"),
        ("cls.predictions.bias", "generator_lm_head.bias"),
        ("cls.predictions.decoder", "generator_lm_head"),
    ),
    pooler=False, head_activation="gelu",
)

FAMILIES: dict[str, Family] = {family.model_type: family
                               for family in (BERT, ROBERTA, XLM_ROBERTA, DISTILBERT, ELECTRA)}


def family_of(config_or_type: Any) -> Family:
    """The Family of a BERTConfig (its model_type) or of a model_type string."""
    model_type = config_or_type if isinstance(config_or_type, str) else getattr(config_or_type, "model_type", "bert")
    try:
        return FAMILIES[model_type]
    except KeyError:
        raise ValueError(f"model_type {model_type!r} is not one bertviz_lab loads natively; expected one of "
                         f"{MODEL_TYPES}.") from None
