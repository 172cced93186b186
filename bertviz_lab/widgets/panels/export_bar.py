"""The export toolbar every panel carries: a format, a scale (1×, 2×, 4×), an optional caption line naming the model
and the text, and a button that saves the figure on screen."""

from __future__ import annotations

import time
from pathlib import Path

import ipywidgets as widgets

from bertviz_lab.widgets.figures.export import FORMATS
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.panels.controls import LABEL_STYLE, lean, look

EXPORT_DIR = Path("bertviz_figures")  # where a panel's export button writes, relative to the notebook
SCALES = (("1×", 1), ("2×", 2), ("4×", 4))  # a PNG at 2× or 4× is sharp in print


class ExportBar(widgets.HBox):
    """Format, scale and caption choices and an export button that saves the panel's current figure under
    bertviz_figures/."""

    def __init__(self, panel, name: str) -> None:
        self.panel, self.name = panel, name
        self.format = lean(widgets.Dropdown, options=FORMATS, value="svg", description="export as",
                           style=LABEL_STYLE, layout={"width": "140px"})
        self.scale = lean(widgets.Dropdown, options=SCALES, value=1, description="scale", style=LABEL_STYLE,
                          layout={"width": "100px"})
        self.caption = lean(widgets.Checkbox, value=False, description="caption", indent=False,
                            tooltip="add a line naming the model and the text under the figure",
                            layout={"width": "auto"})
        self.button = lean(widgets.Button, description="export", icon="download", tooltip="save the figure on screen",
                           layout={"width": "90px"})
        self.status = lean(widgets.HTML)
        self.button.on_click(lambda _: self.export())
        super().__init__([self.format, self.scale, self.caption, self.button, self.status],
                         layout=look(align_items="center"))

    def export(self) -> Path | None:
        """Save the figure on screen; the status line names the file, or says why it could not be saved."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        try:
            path = self.panel.save(EXPORT_DIR / f"{self.name}-{stamp}.{self.format.value}", scale=self.scale.value,
                                   caption=self.caption.value)
        except (OSError, ValueError) as error:  # no Graphviz, an unwritable folder, a full disk: say so in place
            self.status.value = f"<span class='bvl-export-status bvl-error'>not saved: {escape(error)}</span>"
            return None
        self.status.value = f"<span class='bvl-export-status'>saved {escape(path)}</span>"
        return path
