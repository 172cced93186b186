"""DevicePicker: choose CUDA, MPS or CPU for a model, see its memory there, and tell other panels."""

from __future__ import annotations

from typing import Callable

import ipywidgets as widgets
import torch

from bertviz_lab.device import DeviceInfo, describe_devices, select_device
from bertviz_lab.widgets.figures.charts import table_svg
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.panels.export_bar import ExportBar
from bertviz_lab.widgets.panels.panel import Panel, table

DeviceCallback = Callable[[torch.device], None]
HEADERS = ("device", "available", "detail")


def model_memory_bytes(model: torch.nn.Module) -> int:
    """Bytes held by the model's parameters and buffers (each shared tensor counted once)."""
    seen: set[int] = set()
    total = 0
    for tensor in (*model.parameters(), *model.buffers()):
        if id(tensor) not in seen:
            seen.add(id(tensor))
            total += tensor.numel() * tensor.element_size()
    return total


def format_bytes(count: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"


class DevicePicker(Panel):
    """One button per device (unavailable ones disabled, with the reason); moving the model notifies callbacks."""

    def __init__(self, model: torch.nn.Module, on_change: DeviceCallback | None = None) -> None:
        self.model = model
        self.devices: list[DeviceInfo] = describe_devices()
        self._callbacks: list[DeviceCallback] = [on_change] if on_change else []
        self.buttons: dict[str, widgets.Button] = {}
        for info in self.devices:
            button = widgets.Button(description=info.label if info.available else f"{info.label} (unavailable)",
                                    disabled=not info.available,
                                    tooltip=info.reason or f"move the model to {info.name}",
                                    layout=widgets.Layout(width="auto"))
            button.on_click(lambda _, name=info.name: self.move_to(name))
            self.buttons[info.name] = button
        self.status = widgets.HTML()
        self.export = ExportBar(self, "device")
        toolbar = widgets.HBox([widgets.Label("move the model to"), *self.buttons.values(), self.export],
                               layout=widgets.Layout(flex_flow="row wrap", align_items="center"))
        toolbar.add_class("bvl-toolbar")
        super().__init__([toolbar, self.status])
        self._refresh()

    @property
    def available(self) -> list[str]:
        """Names of the devices the model can move to (what `available_devices()` returns)."""
        return [info.name for info in self.devices if info.available]

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def on_device_change(self, callback: DeviceCallback) -> None:
        """Call `callback(new_device)` after every move (panels re-run their forward passes there)."""
        self._callbacks.append(callback)

    def move_to(self, name: str) -> torch.device:
        """Move the model; an unavailable device raises ValueError naming the available ones."""
        device = select_device(name)
        self.model.to(device)
        self._refresh()
        for callback in self._callbacks:
            callback(device)
        return device

    def _current_name(self) -> str:
        device = self.device
        return f"cuda:{device.index or 0}" if device.type == "cuda" else device.type

    def _refresh(self) -> None:
        current = self._current_name()
        for name, button in self.buttons.items():
            button.button_style = "primary" if name == current else ""
        self.status.value = self.static_html()
        self.figure_changed()

    def summary(self) -> str:
        """'model on cpu: weights 1.2 MiB' (and the CUDA memory allocated there)."""
        text = f"model on {self._current_name()}: weights {format_bytes(model_memory_bytes(self.model))}"
        if self.device.type == "cuda":
            text += f"; CUDA memory allocated {format_bytes(torch.cuda.memory_allocated(self.device))}"
        return text

    def rows(self) -> list[tuple[str, str, str]]:
        """(device, available, detail) per device this machine knows about."""
        return [(info.name, "yes" if info.available else "no", info.label if info.available else info.reason)
                for info in self.devices]

    def static_html(self) -> str:
        where, _, rest = self.summary().partition(": ")
        return (f"<div class='bvl-devices'><b>{escape(where)}</b>: {escape(rest)}"
                + table(HEADERS, self.rows()) + "</div>")

    def to_svg(self) -> str:
        """The devices table under the summary line, as SVG."""
        return table_svg(HEADERS, self.rows(), title=self.summary())
