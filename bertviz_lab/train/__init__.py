"""Pretraining you can watch: data (corpus -> NSP pairs -> masked batches), the Trainer, checkpoints, the runner/CLI."""

from bertviz_lab.train.checkpoint import CheckpointError, CheckpointWriteError
from bertviz_lab.train.data import (
    BUILTIN_CORPUS,
    FixedBatches,
    MaskingCollator,
    PairBatches,
    PretrainingExample,
    SentencePairDataset,
    builtin_documents,
    load_documents,
    split_documents,
    split_sentences,
)
from bertviz_lab.train.metrics import MetricsRecord
from bertviz_lab.train.runner import BertRunner, ConfigError
from bertviz_lab.train.synthetic import (
    SyntheticBatch,
    create_mlm_batch,
    create_nsp_pair_batch,
    generate_synthetic_bert_batches,
    synthetic_to_training_batch,
)
from bertviz_lab.train.trainer import NonFiniteLossError, TrainConfig, Trainer, TrainingInterrupted

__all__ = [
    "BUILTIN_CORPUS", "BertRunner", "CheckpointError", "CheckpointWriteError", "ConfigError", "FixedBatches",
    "MaskingCollator", "MetricsRecord", "NonFiniteLossError", "PairBatches", "PretrainingExample",
    "SentencePairDataset", "SyntheticBatch", "TrainConfig", "Trainer", "TrainingInterrupted", "builtin_documents",
    "create_mlm_batch", "create_nsp_pair_batch", "generate_synthetic_bert_batches", "load_documents",
    "split_documents", "split_sentences", "synthetic_to_training_batch",
]
