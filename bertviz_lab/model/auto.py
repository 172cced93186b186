"""load(name): any BERT checkpoint (folder, BERT_Weights entry or Hub repo id) as the model class its heads call for.

config.json's model_type picks the family (BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA: families.py), whose
parameter names are read as BERT's. The weights decide which heads exist (an MLM head, an NSP head, ELECTRA's
discriminator, a classifier, QA outputs); `architectures` in config.json only settles what the weights cannot tell
apart (a classifier per text or per token).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Iterable

import torch

from bertviz_lab.model.bert import BERT, BERTPreTrainedModel
from bertviz_lab.model.config import BERTConfig
from bertviz_lab.model.factory import TASK_CLASSES
from bertviz_lab.model.families import family_of
from bertviz_lab.model.family_tokenizer import load_tokenizer
from bertviz_lab.model.heads import (
    BERTForCausalLM,
    BERTForMaskedLM,
    BERTForNextSentencePrediction,
    BERTForPreTraining,
    BERTForQuestionAnswering,
    BERTForReplacedTokenDetection,
    BERTForSequenceClassification,
    BERTForTokenClassification,
)
from bertviz_lab.model.tasks import TASK_MODELS
from bertviz_lab.model.tokenizer import BERTTokenizerFast
from bertviz_lab.model.weights import (
    CONFIG_NAME,
    BERT_Weights,
    HubOptions,
    WeightsEntry,
    build_model,
    checkpoint_folder,
    is_hub_name,
    read_state_dict,
)
from bertviz_lab.util.files import read_json_object

# the classifier models (one label per text or per token), by transformers class name: those only `architectures`
# tells apart, as their weights are alike
CLASSIFIERS = {task.architecture: TASK_CLASSES[task.task] for task in TASK_MODELS
               if set(task.heads) & {"classifier", "token_classifier"}}


def _has(keys: set[str], part: str) -> bool:
    """A tensor name under `part` (with or without the `bert.` prefix of head models)."""
    return any(key.startswith(part) or key.startswith(f"bert.{part}") for key in keys)


def head_class(config: BERTConfig, architectures: Iterable[str], keys: Iterable[str]) -> type[BERTPreTrainedModel]:
    """The class with every head the checkpoint's tensors hold: pretraining > masked (or causal) LM > NSP >
    replaced-token detection > classifier > QA > the backbone. `keys` and `architectures` in the family's spelling
    (config.model_type) are read as BERT's."""
    family = family_of(config)
    keys = {family.to_bert(key) for key in keys}
    architectures = [_as_bert_name(name, family.class_prefix) for name in architectures or ()]
    mlm, nsp = _has(keys, "cls.predictions."), _has(keys, "cls.seq_relationship.")
    if mlm and nsp:
        return BERTForPreTraining
    if mlm:
        return BERTForCausalLM if config.is_decoder else BERTForMaskedLM
    if nsp:
        return BERTForNextSentencePrediction
    if _has(keys, "discriminator_predictions."):
        return BERTForReplacedTokenDetection
    if _has(keys, "classifier.") and family.model_type != "bert" and "BertForTokenClassification" not in architectures:
        return BERT  # the relatives' text classifiers are shaped otherwise: the backbone, the head reported unused
    if _has(keys, "classifier."):
        named = [CLASSIFIERS[name] for name in architectures if name in CLASSIFIERS]
        if named:
            return named[0]
        if any(name.startswith("Bert") for name in architectures):
            return BERT  # a head we do not have (e.g. BertForMultipleChoice): the backbone, the head reported unused
        return BERTForSequenceClassification if _has(keys, "pooler.") else BERTForTokenClassification
    if _has(keys, "qa_outputs."):
        return BERTForQuestionAnswering
    return BERT


def _as_bert_name(architecture: str, prefix: str) -> str:
    """A family's transformers class name as BERT's ("RobertaForMaskedLM" -> "BertForMaskedLM")."""
    return "Bert" + architecture[len(prefix):] if architecture.startswith(prefix) else architecture


def load(name_or_path: str | os.PathLike[str] | WeightsEntry, *, revision: str | None = None,
         cache_dir: str | os.PathLike[str] | None = None, local_files_only: bool = False,
         token: str | bool | None = None,
         device: str | torch.device | None = None) -> tuple[BERTPreTrainedModel, BERTTokenizerFast]:
    """(model, tokenizer) of any BERT checkpoint or a relative's (RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA, by
    config.json's model_type), with every head it has ("bert-base-uncased" -> BERTForPreTraining)."""
    if name_or_path is None:
        raise TypeError("load needs a checkpoint folder, a Hub repo id or a BERT_Weights entry, got None; "
                        "load_default() opens the default pretrained model.")
    hub = HubOptions(revision=revision, cache_dir=cache_dir, local_files_only=local_files_only, token=token)
    folder = checkpoint_folder(name_or_path, hub)
    config = BERTConfig.from_pretrained(folder)
    architectures = _architectures(folder / CONFIG_NAME)
    state = read_state_dict(folder)
    cls = head_class(config, architectures, state)
    if cls is BERT and config.model_type != "bert" and not any(".pooler." in f".{key}" for key in state):
        config = dataclasses.replace(config, add_pooling_layer=False)  # e.g. RoBERTa's classifiers have none
    label = f"BERT_Weights.{name_or_path.name}" if isinstance(name_or_path, WeightsEntry) else str(name_or_path)
    model = build_model(cls, config, state, device=device, name=label)
    if isinstance(name_or_path, WeightsEntry):
        return model, BERTTokenizerFast.from_pretrained(folder)
    if not is_hub_name(name_or_path):  # the folder the weights came from (a checkpoint_dir's newest one)
        return model, load_tokenizer(folder)
    revision = folder.name  # the snapshot the weights came from (a commit hash): the tokenizer comes from it too
    tokenizer = load_tokenizer(name_or_path, revision=revision, cache_dir=cache_dir,
                               local_files_only=local_files_only, token=token)
    return model, tokenizer


def _architectures(config_file: Path) -> list[str]:
    """config.json's `architectures` (transformers class names; BERTConfig.from_pretrained checked them), or []."""
    return list(read_json_object(config_file).get("architectures") or [])


def load_default(device: torch.device | str | None = None) -> tuple[BERT, BERTTokenizerFast]:
    """The real pretrained BERT and its tokenizer the workbench opens with (all-MiniLM-L6-v2)."""
    entry = BERT_Weights.DEFAULT
    model = BERT.from_pretrained(entry, device=device)
    tokenizer = BERTTokenizerFast.from_pretrained(entry.path)
    return model, tokenizer
