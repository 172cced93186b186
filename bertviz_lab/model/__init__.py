"""The BERT model family: config, backbone, task heads, tokenizer, weights and factories."""

from bertviz_lab.model.config import BERTConfig
from bertviz_lab.model.bert import BERT, BERTModelOutput, BERTPreTrainedModel
from bertviz_lab.model.cache import DynamicCache, EncoderDecoderCache, StaticCache

__all__ = ["BERTConfig", "BERT", "BERTModelOutput", "BERTPreTrainedModel", "DynamicCache", "EncoderDecoderCache",
           "StaticCache"]
