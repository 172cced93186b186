"""Helpers of the widget tests: tiny configs, what a widget would send to the browser, and HTML checks."""

from __future__ import annotations

import html
import time
from html.parser import HTMLParser
from typing import Any, Callable, Iterator

import ipywidgets as widgets
from tiny_models import tiny_config as shared_tiny_config

from bertviz_lab.model import BERTConfig

XSS = "<img src=x onerror=alert(1)>"


# Overrides of the shared tiny config: 3 layers for rollout, 4 heads of 32, 128 positions, no dropout.
WIDGET_SIZES = dict(num_hidden_layers=3, num_attention_heads=4, hidden_size=128, intermediate_size=512,
                    max_position_embeddings=128, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def tiny_config(vocab_size: int, **overrides: Any) -> BERTConfig:
    """The shared tiny config at the widget sizes, for a tokenizer's vocabulary."""
    return shared_tiny_config(**{**WIDGET_SIZES, "vocab_size": vocab_size, **overrides})


def all_widgets(root: widgets.Widget) -> Iterator[widgets.Widget]:
    """The widget and every widget below it (children of boxes and tabs, depth first)."""
    yield root
    for child in getattr(root, "children", ()) or ():
        yield from all_widgets(child)


def html_values(root: widgets.Widget) -> list[str]:
    """The value of every HTML widget under root."""
    return [w.value for w in all_widgets(root) if isinstance(w, (widgets.HTML, widgets.HTMLMath))]


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)
        self.attributes.extend(name for name, _ in attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse_html(markup: str) -> _Tags:
    parser = _Tags()
    parser.feed(markup)
    parser.close()
    return parser


def assert_safe_html(markup: str, must_show: str | None = XSS) -> None:
    """No injected element or handler, no script, no network; `must_show` appears as text (escaped in the source)."""
    assert XSS not in markup, "the raw token reached the HTML"
    parsed = parse_html(markup)
    assert "img" not in parsed.tags and "script" not in parsed.tags
    assert not [name for name in parsed.attributes if name.startswith("on")]
    assert "<script" not in markup.lower()
    if must_show is not None:
        assert html.escape(must_show, quote=False) in markup or html.escape(must_show) in markup
        assert must_show in "".join(parsed.text)  # what the browser shows once it decodes the entities


def wait_until(condition: Callable[[], bool], timeout: float = 10.0, interval: float = 0.01) -> bool:
    """Poll until condition() is true or the timeout passes; returns the last result."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()
