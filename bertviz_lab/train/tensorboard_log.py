"""TensorBoard for a training run (TrainConfig(log_to="tensorboard"), `bertviz-lab train --log tensorboard`): the
scalars the live curves draw, one per metric under the metrics file's names, and at each evaluation an image of the
last layer's attention (averaged over heads) on one fixed held-out sentence, so a run's attention can be watched
changing in TensorBoard's image slider as in the workbench.

A Trainer callback on rank 0; torch.utils.tensorboard writes the event files (the `tensorboard` package, from the
`tensorboard` extra). A resumed run purges the events after its checkpoint's step, so the curves do not fork."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import torch

if TYPE_CHECKING:
    from bertviz_lab.model.heads import BERTForPreTraining

# the metrics written as scalars: the live curves' series and the gradient norm, named as in the metrics file
SCALARS = ("train_mlm_loss", "train_nsp_loss", "train_mlm_accuracy", "train_nsp_accuracy", "eval_mlm_loss",
           "eval_nsp_loss", "eval_mlm_accuracy", "eval_nsp_accuracy", "lr", "grad_norm")
ATTENTION_TAG = "attention/last_layer_mean"
CELL_PIXELS = 8  # each query-key cell of the image is this many pixels square
LOW, HIGH = np.array([247, 251, 255]), np.array([8, 48, 107])  # the ends of the Blues ramp the heatmap view uses


def require_tensorboard() -> Any:
    """torch.utils.tensorboard's SummaryWriter, or one line naming the install."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ImportError("log_to='tensorboard' needs the tensorboard package: pip install 'bertviz_lab[tensorboard]'"
                          ) from None
    return SummaryWriter


def attention_image(weights: np.ndarray) -> np.ndarray:
    """(T * CELL_PIXELS, T * CELL_PIXELS, 3) uint8: a (T, T) attention map (rows: queries, columns: keys) coloured
    from white (0) to dark blue (its largest weight), each cell a square of CELL_PIXELS. Scaled to the largest
    weight, as the heatmap view is: over 64 keys an even spread is 1/64 each, which on a 0-1 scale is all white."""
    weights = np.clip(np.asarray(weights, dtype=np.float64), 0.0, 1.0)
    share = (weights / max(float(weights.max(initial=0.0)), np.finfo(np.float64).tiny))[..., None]
    colours = np.rint(LOW + (HIGH - LOW) * share).astype(np.uint8)
    return colours.repeat(CELL_PIXELS, axis=0).repeat(CELL_PIXELS, axis=1)


class TensorBoardLog:
    """Trainer callback: every record's scalars, and the attention image at each evaluation. `probe()` gives the
    (input_ids, token_type_ids, attention_mask) of the one sentence drawn, each (1, T), or None for no image."""

    def __init__(self, log_dir: str | None, model: BERTForPreTraining,
                 probe: Callable[[], tuple[torch.Tensor, ...] | None]) -> None:
        self._writer_class = require_tensorboard()  # before the first step: a missing package stops nothing midway
        self.log_dir, self.model, self._probe_source = log_dir, model, probe
        self.writer: Any = None
        self._probe: tuple[torch.Tensor, ...] | None = None

    def __call__(self, record: Any) -> None:
        if self.writer is None:  # at the run's first new step: a resumed run drops what a killed one wrote after it
            self.writer = self._writer_class(log_dir=self.log_dir, purge_step=record.step)
            self.log_dir = self.writer.log_dir
        for name in SCALARS:
            value = getattr(record, name, None)
            if isinstance(value, (int, float)):
                self.writer.add_scalar(name, value, record.step)
        if record.evaluated:
            if self._probe is None:
                self._probe = self._probe_source()
            if self._probe is not None:
                self.writer.add_image(ATTENTION_TAG, attention_image(self.last_layer_attention()), record.step,
                                      dataformats="HWC")
            self.writer.flush()

    @torch.no_grad()
    def last_layer_attention(self) -> np.ndarray:
        """The probe's (T, T) attention of the last layer, the mean over its heads, in eval mode (no dropout)."""
        if self._probe is None:  # asked before the first evaluation drew it
            self._probe = self._probe_source()
        if self._probe is None:
            raise ValueError("this run has no probe sentence to draw the attention of (its data gave none).")
        input_ids, token_type_ids, attention_mask = (t.to(self.model.device) for t in self._probe)
        last = self.model.config.num_hidden_layers - 1
        was_training = self.model.training
        self.model.eval()
        try:
            _, cache = self.model.run_with_cache(input_ids=input_ids, attention_mask=attention_mask,
                                                 token_type_ids=token_type_ids,
                                                 names_filter=f"bert.encoder.layer.{last}.attention.self.probs")
        finally:
            self.model.train(was_training)
        probs = next(iter(cache.values()))  # (1, heads, T, T)
        return probs[0].float().mean(0).cpu().numpy()

    def on_train_end(self, trainer: Any) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
