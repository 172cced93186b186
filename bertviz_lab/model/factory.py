"""Ready-made models: the 14 base/large factories and create_bert_model with dictionary outputs."""

from __future__ import annotations

from typing import Any

import torch

from bertviz_lab.model.bert import BERT
from bertviz_lab.model.config import BERTConfig
from bertviz_lab.model.heads import (
    BERTForCausalLM,
    BERTForMaskedLM,
    BERTForNextSentencePrediction,
    BERTForPreTraining,
    BERTForQuestionAnswering,
    BERTForSequenceClassification,
    BERTForTokenClassification,
)


def _config(size: str, overrides: dict[str, Any], **defaults: Any) -> BERTConfig:
    preset = BERTConfig.base if size == "base" else BERTConfig.large
    return preset(**{**defaults, **overrides})


def bert_for_pre_training_base(**config: Any) -> BERTForPreTraining:
    """BERT-base with MLM + NSP heads (randomly initialised)."""
    return BERTForPreTraining(_config("base", config))


def bert_for_pre_training_large(**config: Any) -> BERTForPreTraining:
    """BERT-large with MLM + NSP heads."""
    return BERTForPreTraining(_config("large", config))


def bert_for_masked_lm_base(**config: Any) -> BERTForMaskedLM:
    """BERT-base with an MLM head."""
    return BERTForMaskedLM(_config("base", config))


def bert_for_masked_lm_large(**config: Any) -> BERTForMaskedLM:
    """BERT-large with an MLM head."""
    return BERTForMaskedLM(_config("large", config))


def bert_for_causal_lm_base(**config: Any) -> BERTForCausalLM:
    """BERT-base as a causal decoder with an LM head."""
    return BERTForCausalLM(_config("base", config, is_decoder=True))


def bert_for_causal_lm_large(**config: Any) -> BERTForCausalLM:
    """BERT-large as a causal decoder with an LM head."""
    return BERTForCausalLM(_config("large", config, is_decoder=True))


def bert_for_next_sentence_prediction_base(**config: Any) -> BERTForNextSentencePrediction:
    """BERT-base with an NSP head."""
    return BERTForNextSentencePrediction(_config("base", config))


def bert_for_next_sentence_prediction_large(**config: Any) -> BERTForNextSentencePrediction:
    """BERT-large with an NSP head."""
    return BERTForNextSentencePrediction(_config("large", config))


def bert_for_sequence_classification_base(**config: Any) -> BERTForSequenceClassification:
    """BERT-base with a sequence classifier (num_labels=2 unless given)."""
    return BERTForSequenceClassification(_config("base", config))


def bert_for_sequence_classification_large(**config: Any) -> BERTForSequenceClassification:
    """BERT-large with a sequence classifier."""
    return BERTForSequenceClassification(_config("large", config))


def bert_for_token_classification_base(**config: Any) -> BERTForTokenClassification:
    """BERT-base with a token classifier."""
    return BERTForTokenClassification(_config("base", config))


def bert_for_token_classification_large(**config: Any) -> BERTForTokenClassification:
    """BERT-large with a token classifier."""
    return BERTForTokenClassification(_config("large", config))


def bert_for_question_answering_base(**config: Any) -> BERTForQuestionAnswering:
    """BERT-base with a span-extraction head."""
    return BERTForQuestionAnswering(_config("base", config))


def bert_for_question_answering_large(**config: Any) -> BERTForQuestionAnswering:
    """BERT-large with a span-extraction head."""
    return BERTForQuestionAnswering(_config("large", config))


class BERTWithDictOutput(torch.nn.Module):
    """A BERT (with pretraining heads when asked) whose forward returns a dictionary of named outputs."""

    def __init__(self, config: BERTConfig, for_pretraining: bool = True) -> None:
        super().__init__()
        self.config = config
        self.model = BERTForPreTraining(config) if for_pretraining else BERT(config)

    def forward(self, input_ids: torch.Tensor, segment_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None,
                ) -> dict[str, torch.Tensor]:
        """`sequence_output` (B, T, C), `pooled_output` (B, C), heads' `mlm_logits` (B, T, V), `nsp_logits` (B, 2)."""
        segments = segment_ids if segment_ids is not None else token_type_ids
        if isinstance(self.model, BERTForPreTraining):
            out = self.model.bert(input_ids, attention_mask, segments)
            mlm, nsp = self.model.cls(out.last_hidden_state, out.pooler_output)
            return {"mlm_logits": mlm, "nsp_logits": nsp, "sequence_output": out.last_hidden_state,
                    "pooled_output": out.pooler_output}
        out = self.model(input_ids, attention_mask, segments)
        return {"sequence_output": out.last_hidden_state, "pooled_output": out.pooler_output}


def create_bert_model(vocab_size: int = 30522, max_seq_length: int = 512, d_model: int = 768, num_heads: int = 12,
                      d_ff: int = 3072, num_layers: int = 12, for_pretraining: bool = True, dropout: float = 0.1,
                      position_embedding_type: str = "sinusoidal") -> BERTWithDictOutput:
    """A BERT sized by the classic transformer names; sinusoidal positions by default, dictionary outputs."""
    config = BERTConfig(vocab_size=vocab_size, max_position_embeddings=max_seq_length, hidden_size=d_model,
                        num_attention_heads=num_heads, intermediate_size=d_ff, num_hidden_layers=num_layers,
                        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                        position_embedding_type=position_embedding_type)
    return BERTWithDictOutput(config, for_pretraining)
