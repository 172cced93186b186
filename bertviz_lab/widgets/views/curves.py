"""The loss curves' browser view: the kernel's drawing of the four charts, and the series hover reads from."""

from __future__ import annotations

import anywidget
import traitlets

from bertviz_lab.widgets.views.front_end import css, esm

KEYS = ("train_mlm_loss", "eval_mlm_loss", "train_nsp_loss", "eval_nsp_loss", "eval_mlm_accuracy", "eval_nsp_accuracy",
        "lr")


class CurvesView(anywidget.AnyWidget):
    """Shows `svg` (the figure the static copy and exports hold too); hover maps the pointer to a step and reads the
    values there from the synced series, so it needs no kernel."""

    _esm = esm("loss_curves.js")
    _css = css("loss_curves")
    svg = traitlets.Unicode("").tag(sync=True)
    names = traitlets.Dict().tag(sync=True)  # legend name by series key, for the hover box
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
