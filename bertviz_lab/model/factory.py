"""Ready-made models: the 14 base/large factories (one per task model of tasks.py and size) and create_bert_model
with dictionary outputs."""

from __future__ import annotations

from typing import Any, Callable

import torch

from bertviz_lab.model import heads
from bertviz_lab.model.bert import BERT
from bertviz_lab.model.config import BERTConfig
from bertviz_lab.model.heads import BERTForPreTraining, BERTTaskModel
from bertviz_lab.model.tasks import TASK_MODELS, TaskModel

SIZES = {"base": BERTConfig.base, "large": BERTConfig.large}
# the task models of heads.py by the transformers name each declares, then by task: "masked_lm" -> BERTForMaskedLM
_DECLARED = {vars(cls)["hf_architecture"]: cls for cls in vars(heads).values()
             if isinstance(cls, type) and issubclass(cls, BERTTaskModel) and "hf_architecture" in vars(cls)}
TASK_CLASSES: dict[str, type[BERTTaskModel]] = {task.task: _DECLARED[task.architecture] for task in TASK_MODELS}


def _factory(task: TaskModel, size: str) -> Callable[..., BERTTaskModel]:
    """bert_for_<task>_<size>(**config): the task model on the size's config (randomly initialised)."""
    def build(**config: Any) -> BERTTaskModel:
        return TASK_CLASSES[task.task](SIZES[size](**{**task.config, **config}))

    build.__name__ = build.__qualname__ = f"bert_for_{task.task}_{size}"
    build.__doc__ = f"BERT-{size} {task.description} (randomly initialised); keyword arguments set BERTConfig fields."
    return build


# bert_for_pre_training_base, bert_for_pre_training_large, ..., bert_for_question_answering_large
FACTORIES: dict[str, Callable[..., BERTTaskModel]] = {
    build.__name__: build for build in (_factory(task, size) for task in TASK_MODELS for size in SIZES)}
globals().update(FACTORIES)
__all__ = ["FACTORIES", "SIZES", "TASK_CLASSES", "BERTWithDictOutput", "create_bert_model", *FACTORIES]


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
