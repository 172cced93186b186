"""The pretraining objective as one module, so DDP and torch.compile wrap exactly what a training step runs.

It returns loss *sums* and correct counts rather than means: the Trainer divides by the number of predictions in
the whole global batch (all processes, all accumulation steps), which makes N processes compute the same update
as one process with an N-times larger batch. MLM logits are computed only at the masked positions (about 15% of
the tokens), which saves most of the vocabulary projection.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertviz_lab.model.heads import BERTForPreTraining
from bertviz_lab.model.pretraining import IGNORE_INDEX

MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask", "mlm_positions", "mlm_targets", "nsp_labels")


def prediction_targets(mlm_labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat indices of the labelled positions of (B, T) labels and the labels there: ((N,), (N,))."""
    flat = mlm_labels.reshape(-1)
    positions = (flat != IGNORE_INDEX).nonzero().squeeze(1)
    return positions, flat[positions]


class PretrainingObjective(nn.Module):
    """BERTForPreTraining -> (MLM loss sum, NSP loss sum, MLM correct, NSP correct) for one batch."""

    def __init__(self, model: BERTForPreTraining) -> None:
        super().__init__()
        if not isinstance(model, BERTForPreTraining):
            raise TypeError(f"the pretraining objective needs a BERTForPreTraining, got {type(model).__name__}.")
        self.model = model

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attention_mask: torch.Tensor,
                mlm_positions: torch.Tensor, mlm_targets: torch.Tensor,
                nsp_labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        out = self.model.bert(input_ids, attention_mask, token_type_ids)
        hidden = out.last_hidden_state  # (B, T, C)
        masked_hidden = hidden.reshape(-1, hidden.shape[-1]).index_select(0, mlm_positions)  # (N, C)
        mlm_logits = self.model.cls.predictions(masked_hidden).float()  # (N, V)
        nsp_logits = self.model.cls.seq_relationship(out.pooler_output).float()  # (B, 2)
        mlm_loss = F.cross_entropy(mlm_logits, mlm_targets, reduction="sum")
        nsp_loss = F.cross_entropy(nsp_logits, nsp_labels, reduction="sum")
        mlm_correct = (mlm_logits.detach().argmax(-1) == mlm_targets).sum()
        nsp_correct = (nsp_logits.detach().argmax(-1) == nsp_labels).sum()
        return mlm_loss, nsp_loss, mlm_correct, nsp_correct
