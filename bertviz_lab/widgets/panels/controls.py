"""The panels' controls, built lean, and how a panel gives them back.

A page creates every widget model it is sent (a few milliseconds each on a small machine), and ipywidgets gives each
control a Layout model and a style model of its own, so a toolbar cost three models per control. `lean()` builds a
control whose layout and style are shared by every control that looks the same, made once per kernel (an attention
panel went from 142 models to 64 this way). A shared look is never changed; a widget that is shown and hidden
later keeps a Layout of its own.

`close_tree()` closes what a panel made (its children, the views and toolbars it keeps aside, their layouts and
styles) so that nothing stays registered in ipywidgets after `panel.close()`; `forget_widgets()` then lets go of them.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, TypeVar

import ipywidgets as widgets

W = TypeVar("W", bound=widgets.Widget)

_SHARED: dict[tuple, widgets.Widget] = {}  # (kind, settings) -> the one model every control with that look uses
LABEL_STYLE = {"description_width": "initial"}  # a description as wide as its text, beside its control
COMPACT_STYLE = {**LABEL_STYLE, "button_width": "auto"}  # toggle buttons as wide as their labels


def _shared(kind: type[W], settings: dict[str, Any]) -> W:
    key = (kind, tuple(sorted(settings.items())))
    model = _SHARED.get(key)
    if model is None or model.comm is None:  # none yet, or closed (Widget.close_all()): made again
        model = _SHARED[key] = kind(**settings)
    return model


def is_shared(widget: widgets.Widget) -> bool:
    """Whether `widget` is a look shared between panels (closing one panel must leave it open)."""
    return any(widget is model for model in _SHARED.values())


def look(**settings: str) -> widgets.Layout:
    """The Layout every widget with these settings shares (a box that subclasses HBox/VBox passes it on)."""
    return _shared(widgets.Layout, settings)


def lean(kind: type[W], *args: Any, layout: dict[str, Any] | None = None, style: dict[str, Any] | None = None,
         **kwargs: Any) -> W:
    """`kind(*args, **kwargs)` with the shared Layout for `layout`'s settings and, where the kind has a style, the
    shared style for `style`'s."""
    kwargs["layout"] = look(**(layout or {}))
    style_trait = kind.class_traits().get("style")
    if style_trait is not None:
        kwargs["style"] = _shared(style_trait.klass, style or {})
    return kind(*args, **kwargs)


def labelled(text: str, control: W) -> W | widgets.HBox:
    """A label beside its control: toggle buttons carry it as their own description, which ipywidgets 8 draws beside
    the buttons (one model where a Label in a row costs two more); any other control gets a Label in a row."""
    if isinstance(control, widgets.ToggleButtons):
        control.description = text  # given to toggle_buttons() already, nothing is sent again
        return control
    return lean(widgets.HBox, [lean(widgets.Label, text), control], layout={"align_items": "center", "width": "auto"})


def toolbar(*controls: widgets.Widget, gap: str = "4px 16px") -> widgets.HBox:
    """Controls in a row that wraps on a narrow page."""
    return lean(widgets.HBox, list(controls), layout={"flex_flow": "row wrap", "align_items": "center",
                                                      "grid_gap": gap})


def toggle_buttons(options: Any, value: Any, tooltips: list[str] | None = None,
                   label: str = "") -> widgets.ToggleButtons:
    """Buttons as wide as their labels, one of them pressed; `label` drawn beside them (see labelled)."""
    return lean(widgets.ToggleButtons, options=options, value=value, tooltips=tooltips or [], description=label,
                style=COMPACT_STYLE)


def _widgets_in(value: Any) -> Iterator[widgets.Widget]:
    """The widgets a trait or an attribute holds: itself, or those in a list, tuple or dict (one level)."""
    if isinstance(value, widgets.Widget):
        yield value
    elif isinstance(value, (list, tuple)):
        yield from (item for item in value if isinstance(item, widgets.Widget))
    elif isinstance(value, dict):
        yield from (item for item in value.values() if isinstance(item, widgets.Widget))


def owned_widgets(root: widgets.Widget) -> list[widgets.Widget]:
    """Every widget reachable from `root` through its synced traits and its attributes, shared looks left out."""
    found: dict[int, widgets.Widget] = {}
    stack = [root]
    while stack:
        widget = stack.pop()
        if id(widget) in found or is_shared(widget):
            continue
        found[id(widget)] = widget
        for name in widget.keys:
            stack.extend(_widgets_in(getattr(widget, name, None)))
        for value in vars(widget).values():
            stack.extend(_widgets_in(value))
    return list(found.values())


def close_tree(root: widgets.Widget) -> None:
    """Close `root` and every widget it made (views kept aside included), leaving shared looks open."""
    for widget in owned_widgets(root):
        if widget is not root:
            widget.close()


def forget_widgets(owner: widgets.Widget) -> None:
    """Let go of the widgets `owner` holds (its children and attributes), with whatever data they keep: a closed
    panel that a notebook's output history still refers to then holds only its own small state."""
    for name, value in list(vars(owner).items()):
        if not name.startswith("_trait") and next(_widgets_in(value), None) is not None:
            delattr(owner, name)
    if isinstance(owner, widgets.Box):
        owner.children = ()


class Hold:
    """Blocks (`with hold():`, nested as deep as need be) in which a panel sets its own controls: while one is open
    the hold is true, and the controls' observers take the change for no reader's choice (no redraw, no action)."""

    def __init__(self) -> None:
        self.depth = 0

    def __bool__(self) -> bool:
        return self.depth > 0

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
