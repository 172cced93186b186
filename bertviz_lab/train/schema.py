"""The one configuration schema of training: every YAML run config key with its type, default, bounds and meaning;
the Trainer's settings (TrainConfig) and the model keys take their defaults and checks from here and from BERTConfig.

Sections are the BERT-from-scratch seed's (`data`, `model`, `training`, `logging`) with its key names, plus ours.
Keys listed with `alias_of` are alternative spellings (the seed's name and the Hugging Face name) of one setting.
The model keys are BERTConfig's fields under the seed's names: their bounds are BERTConfig's, their default is null
(the preset's value).

`python -m bertviz_lab.train.schema_table` writes the README's table of the keys from this schema.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bertviz_lab.model.config import BERTConfig
from bertviz_lab.model.pretraining import MASK_PROBABILITY, masking_split_label
from bertviz_lab.util.fields import Field, fields_of, setting

Key = Field  # a run config key is a Field: the name the run config's modules have always used

DEFAULT_EPOCHS = 1  # passes over the training pairs when neither training.steps nor training.epochs is set
# model.<key> -> the BERTConfig field it sets; where the names differ, the BERTConfig name is an alias of the key
MODEL_FIELDS = {"dim_model": "hidden_size", "num_heads": "num_attention_heads", "dim_ff": "intermediate_size",
                "num_layers": "num_hidden_layers", "hidden_dropout_prob": "hidden_dropout_prob",
                "attention_probs_dropout_prob": "attention_probs_dropout_prob",
                "max_position_embeddings": "max_position_embeddings"}
_BERT_CHECKS = fields_of(BERTConfig)


def _alias(target: str) -> Key:
    return Key(object, None, f"same as {target}", alias_of=target)


def _model_key(ours: str, meaning: str) -> dict[str, Key]:
    """model.<ours> (and its Hugging Face spelling): BERTConfig's check of the field, null for the preset's value."""
    field = _BERT_CHECKS[MODEL_FIELDS[ours]]
    keys = {ours: dataclasses.replace(field, default=None, nullable=True, help=meaning)}
    if MODEL_FIELDS[ours] != ours:
        keys[MODEL_FIELDS[ours]] = _alias(f"model.{ours}")
    return keys


def _bert_default(name: str) -> Any:
    return _BERT_CHECKS[name].default


SCHEMA: dict[str, dict[str, Key]] = {
    "data": {
        "corpus": Key(str, "builtin", "builtin (the Python docs' topics, no download) | synthetic | a .txt file "
                                      "(documents split at 2+ blank lines) | a folder of .txt files"),
        "tokenizer": Key(str, "train", "train (WordPiece trained on the training documents) | minilm (the uncased "
                                       "vocab of all-MiniLM-L6-v2, needs the `models` extra) | a tokenizer folder"),
        "tokenizer_dir": Key(str, None, "folder where the trained tokenizer is saved and reused on the next run; "
                                        "null: nothing is written", nullable=True),
        "vocab_size": Key(int, 4000, "WordPiece vocabulary size (tokenizer: train), or id range (corpus: synthetic)",
                          ge=16),
        "sequence_length": Key(int, 128, "tokens per pair, [CLS]/[SEP] included", ge=8),
        "max_seq_length": _alias("data.sequence_length"),
        "mask_probability": Key(float, MASK_PROBABILITY, f"share of tokens selected for MLM (then "
                                                         f"{masking_split_label()})", gt=0.0, le=1.0),
        "batch_size": Key(int, 32, "sequences per optimizer step, over all processes and accumulation steps", ge=1),
        "test_fraction": Key(float, 0.1, "share of documents held out for evaluation and the test_* results",
                             ge=0.0, lt=1.0),
        "short_seq_prob": Key(float, 0.1, "share of pairs made shorter than sequence_length (as BERT did)",
                              ge=0.0, le=1.0),
        "random_seed": Key(int, 42, "seeds the held-out split and the NSP pairs (and all else unless training.seed)",
                           ge=0),
        "num_train_batches": Key(int, 100, "corpus: synthetic only: training batches", ge=1),
        "num_test_batches": Key(int, 20, "corpus: synthetic only: test batches", ge=1),
    },
    "model": {
        "preset": Key(str, "tiny", "starting point: tiny (2 layers, 128 wide) | base | large",
                      choices=("tiny", "base", "large")),
        **_model_key("dim_model", "hidden size (default: the preset's)"),
        **_model_key("num_heads", "attention heads (default: the preset's)"),
        **_model_key("dim_ff", "feed-forward width (default: the preset's)"),
        **_model_key("num_layers", "encoder layers (default: the preset's)"),
        **_model_key("hidden_dropout_prob", f"dropout after embeddings and sublayers (default "
                                            f"{_bert_default('hidden_dropout_prob')})"),
        **_model_key("attention_probs_dropout_prob", f"dropout on attention probabilities (default "
                                                     f"{_bert_default('attention_probs_dropout_prob')})"),
        **_model_key("max_position_embeddings", "positions the model knows (default: the preset's, at least "
                                                "data.sequence_length)"),
    },
    "training": {
        "steps": Key(int, None, "optimizer steps (null: epochs x batches per epoch)", nullable=True, ge=1),
        "epochs": Key(int, None, f"passes over the training pairs, used when steps is null (default "
                                 f"{DEFAULT_EPOCHS})", nullable=True, ge=1),
        "learning_rate": Key(float, 1e-3, "peak AdamW learning rate", ge=1e-12),
        "weight_decay": Key(float, 0.01, "AdamW weight decay (not on biases and LayerNorm)", ge=0.0),
        "warmup_steps": Key(int, 0, "linear warmup steps, then linear decay to 0", ge=0),
        "max_grad_norm": Key(float, 1.0, "gradient clipping norm (null: no clipping)", nullable=True, gt=0.0),
        "gradient_accumulation_steps": Key(int, 1, "micro-batches per optimizer step", ge=1),
        "mlm_loss_weight": Key(float, 1.0, "weight of the MLM loss in the total", ge=0.0),
        "nsp_loss_weight": Key(float, 1.0, "weight of the NSP loss in the total", ge=0.0),
        "seed": Key(int, None, "seeds model init, dropout, batch order and masking (default: data.random_seed)",
                    nullable=True, ge=0),
        "device": Key(str, "auto", "auto | cpu | cuda | cuda:N | gpu | mps (under torchrun: each process' GPU)"),
        "precision": Key(str, "auto", "auto (bf16 on CUDA when supported, else fp16; fp32 elsewhere) | fp32 | bf16 "
                                      "(CUDA, or a CPU with native bf16) | fp16 (CUDA)",
                         choices=("auto", "fp32", "bf16", "fp16")),
        "compile": Key(bool, False, "torch.compile the training step"),
        "num_threads": Key(int, None, "CPU threads for torch (null: torch's default; at most 4 x the CPUs); 1 "
                                      "helps on busy machines", nullable=True, ge=1),
        "eval_interval": Key(int, 0, "evaluate on the held-out pairs every N steps (0: only at the end)", ge=0),
        "checkpoint_dir": Key(str, None, "where checkpoints go (null: none)", nullable=True),
        "checkpoint_interval": Key(int, 0, "save every N steps (0: only at the end)", ge=0),
        "keep_checkpoints": Key(int, 2, "newest checkpoints kept", ge=1),
        "resume_from": Key(str, None, "a checkpoint folder, or a checkpoint_dir (its latest), to continue from",
                           nullable=True),
    },
    "logging": {
        "level": Key(str, "INFO", "log level", choices=("DEBUG", "INFO", "WARNING", "ERROR")),
        "file": Key(str, None, "log file (null: no file)", nullable=True),
        "metrics_file": Key(str, None, "JSON lines, one metrics record per step (null: none)", nullable=True),
        "log_interval": Key(int, 50, "a log line every N steps (0: only evaluations)", ge=0),
        "log_to": Key(str, None, "also log to TensorBoard: tensorboard (the scalars of the live curves, and the last "
                                 "layer's attention on a held-out sentence at each evaluation; null: no)",
                      nullable=True, choices=("tensorboard",)),
        "log_dir": Key(str, None, "where log_to writes its event files (null: TensorBoard's runs/<date>_<host>)",
                       nullable=True),
        "progress": Key(bool, True, "tqdm progress bar"),
    },
}


def key(name: str) -> Key:
    """The Key of `section.key`."""
    section, _, field = name.partition(".")
    return SCHEMA[section][field]


def run_setting(name: str, **changes: Any) -> Any:
    """A TrainConfig field set by the run config key `name`: that key's default and check (with `changes`); its
    error messages are translated back to `name` by the runner."""
    return setting(dataclasses.replace(key(name), **changes), key=name)
