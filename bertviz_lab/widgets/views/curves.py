"""The loss curves' browser view: four charts drawn from synced float32 series."""

from __future__ import annotations

import anywidget
import traitlets

from bertviz_lab.widgets.views.front_end import css, esm

KEYS = ("train_mlm_loss", "eval_mlm_loss", "train_nsp_loss", "eval_nsp_loss", "eval_mlm_accuracy", "eval_nsp_accuracy",
        "lr")


class CurvesView(anywidget.AnyWidget):
    """The four charts in the browser, drawn from these synced traits whenever a view attaches."""

    _esm = esm("loss_curves.js")
    _css = css("loss_curves")
    title = traitlets.Unicode("").tag(sync=True)
    total = traitlets.Int(0).tag(sync=True)  # the run's last step (the x axes reach it); 0 when unknown
    panels = traitlets.List().tag(sync=True)
    # one trait per series, pack(x, y): a redraw sends only the series that grew
    train_mlm_loss = traitlets.Bytes(b"").tag(sync=True)
    eval_mlm_loss = traitlets.Bytes(b"").tag(sync=True)
    train_nsp_loss = traitlets.Bytes(b"").tag(sync=True)
    eval_nsp_loss = traitlets.Bytes(b"").tag(sync=True)
    eval_mlm_accuracy = traitlets.Bytes(b"").tag(sync=True)
    eval_nsp_accuracy = traitlets.Bytes(b"").tag(sync=True)
    lr = traitlets.Bytes(b"").tag(sync=True)

    @property
    def curves(self) -> dict[str, bytes]:
        """Every series' packed points by metric key."""
        return {key: getattr(self, key) for key in KEYS}
