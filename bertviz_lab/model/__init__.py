"""The BERT model family: config, backbone, task heads, tokenizer, weights and factories; RoBERTa, XLM-RoBERTa,
DistilBERT and ELECTRA load as variants of it (families.py)."""

from bertviz_lab.model.auto import load, load_default
from bertviz_lab.model.bert import BERT, BERTModelOutput, BERTPreTrainedModel
from bertviz_lab.model.cache import DynamicCache, EncoderDecoderCache, StaticCache
from bertviz_lab.model.config import BERTConfig
from bertviz_lab.model.factory import FACTORIES, TASK_CLASSES, BERTWithDictOutput, create_bert_model
from bertviz_lab.model.family_tokenizer import TokenizerFast, load_tokenizer
from bertviz_lab.model.heads import BERTForReplacedTokenDetection
from bertviz_lab.model.tasks import TASK_MODELS
from bertviz_lab.model.tokenizer import BERTTokenizerFast
from bertviz_lab.model.weights import BERT_Weights, LoadReport

# the seven task models and their 14 factories, by name, from the one registry (tasks.py)
MODEL_CLASSES = {cls.__name__: cls for cls in TASK_CLASSES.values()}
globals().update(MODEL_CLASSES)
globals().update(FACTORIES)

__all__ = [
    "BERT",
    "BERTConfig",
    "BERTForReplacedTokenDetection",
    "BERTModelOutput",
    "BERTPreTrainedModel",
    "BERTTokenizerFast",
    "BERTWithDictOutput",
    "BERT_Weights",
    "DynamicCache",
    "EncoderDecoderCache",
    "LoadReport",
    "StaticCache",
    "TASK_MODELS",
    "TokenizerFast",
    "create_bert_model",
    "load",
    "load_default",
    "load_tokenizer",
    *MODEL_CLASSES,
    *FACTORIES,
]
