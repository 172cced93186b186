"""The seven task models, listed once: what each adds to the backbone and returns, and how its factories build it.

Everything that enumerates the task models reads this registry: the package's public names, the classes and the 14
`bert_for_<task>_<size>` factories (factory.py), the memory estimate's heads (footprint.py), the classifier lookup
of `load` (auto.py) and the names of each forward's outputs (trace/saliency.py). An entry names its model by the
transformers class name the model declares in `hf_architecture` (heads.py): the estimate reads this registry
while the models are built, so it imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class TaskModel:
    """One task model: its class's transformers name, its factories' name, its heads, its outputs and its factories'
    defaults."""

    architecture: str  # the transformers class name our class declares in hf_architecture
    task: str  # bert_for_<task>_base / _large
    heads: tuple[str, ...]  # what the memory estimate counts: mlm, nsp, classifier, token_classifier, qa
    outputs: tuple[str, ...]  # forward's outputs, named in order (a lone tensor is a one-name tuple)
    description: str  # "with an MLM head": the factories' docstrings
    config: Mapping[str, Any] = field(default_factory=dict)  # BERTConfig values its factories start from


TASK_MODELS: tuple[TaskModel, ...] = (
    TaskModel("BertForPreTraining", "pre_training", ("mlm", "nsp"), ("mlm_logits", "nsp_logits"),
              "with MLM + NSP heads"),
    TaskModel("BertForMaskedLM", "masked_lm", ("mlm",), ("mlm_logits",), "with an MLM head"),
    TaskModel("BertLMHeadModel", "causal_lm", ("mlm",), ("mlm_logits",), "as a causal decoder with an LM head",
              config={"is_decoder": True}),
    TaskModel("BertForNextSentencePrediction", "next_sentence_prediction", ("nsp",), ("nsp_logits",),
              "with an NSP head"),
    TaskModel("BertForSequenceClassification", "sequence_classification", ("classifier",), ("class_logits",),
              "with a sequence classifier (num_labels=2 unless given)"),
    TaskModel("BertForTokenClassification", "token_classification", ("token_classifier",), ("token_logits",),
              "with a token classifier (num_labels=2 unless given)"),
    TaskModel("BertForQuestionAnswering", "question_answering", ("qa",), ("start_logits", "end_logits"),
              "with a span-extraction head"),
)
BY_ARCHITECTURE = {task.architecture: task for task in TASK_MODELS}  # "BertForMaskedLM" -> its entry
