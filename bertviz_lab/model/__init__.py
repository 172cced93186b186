"""The BERT model family: config, backbone, task heads, tokenizer, weights and factories."""

from bertviz_lab.model.auto import load, load_default
from bertviz_lab.model.bert import BERT, BERTModelOutput, BERTPreTrainedModel
from bertviz_lab.model.cache import DynamicCache, EncoderDecoderCache, StaticCache
from bertviz_lab.model.config import BERTConfig
from bertviz_lab.model.factory import (
    BERTWithDictOutput,
    bert_for_causal_lm_base,
    bert_for_causal_lm_large,
    bert_for_masked_lm_base,
    bert_for_masked_lm_large,
    bert_for_next_sentence_prediction_base,
    bert_for_next_sentence_prediction_large,
    bert_for_pre_training_base,
    bert_for_pre_training_large,
    bert_for_question_answering_base,
    bert_for_question_answering_large,
    bert_for_sequence_classification_base,
    bert_for_sequence_classification_large,
    bert_for_token_classification_base,
    bert_for_token_classification_large,
    create_bert_model,
)
from bertviz_lab.model.heads import (
    BERTForCausalLM,
    BERTForMaskedLM,
    BERTForNextSentencePrediction,
    BERTForPreTraining,
    BERTForQuestionAnswering,
    BERTForSequenceClassification,
    BERTForTokenClassification,
)
from bertviz_lab.model.tokenizer import BERTTokenizerFast
from bertviz_lab.model.weights import BERT_Weights, LoadReport

__all__ = [
    "BERT",
    "BERTConfig",
    "BERTForCausalLM",
    "BERTForMaskedLM",
    "BERTForNextSentencePrediction",
    "BERTForPreTraining",
    "BERTForQuestionAnswering",
    "BERTForSequenceClassification",
    "BERTForTokenClassification",
    "BERTModelOutput",
    "BERTPreTrainedModel",
    "BERTTokenizerFast",
    "BERTWithDictOutput",
    "BERT_Weights",
    "DynamicCache",
    "EncoderDecoderCache",
    "LoadReport",
    "StaticCache",
    "bert_for_causal_lm_base",
    "bert_for_causal_lm_large",
    "bert_for_masked_lm_base",
    "bert_for_masked_lm_large",
    "bert_for_next_sentence_prediction_base",
    "bert_for_next_sentence_prediction_large",
    "bert_for_pre_training_base",
    "bert_for_pre_training_large",
    "bert_for_question_answering_base",
    "bert_for_question_answering_large",
    "bert_for_sequence_classification_base",
    "bert_for_sequence_classification_large",
    "bert_for_token_classification_base",
    "bert_for_token_classification_large",
    "create_bert_model",
    "load",
    "load_default",
]
