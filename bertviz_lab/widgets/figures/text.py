"""Text in figures: escaping (tokens and texts are user data), widths for layout, labels cut to fit."""

from __future__ import annotations

import html
import unicodedata
from typing import Any

MAX_LABEL_CHARS = 16


def escape(text: Any) -> str:
    """HTML-escape anything shown to a user (tokens and texts are user data)."""
    return html.escape(str(text), quote=True)


def text_width(text: str, size: float = 12, monospace: bool = False) -> float:
    """About how wide `text` draws, in pixels: wide (East Asian) characters count double; for layout, not exact."""
    per_char = 0.6 if monospace else 0.56
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in str(text)) * per_char * size


def short_token(token: str) -> str:
    """A token as an axis label: long ones cut with an ellipsis (hover and tooltips keep them whole)."""
    return token if len(token) <= MAX_LABEL_CHARS else token[: MAX_LABEL_CHARS - 1] + "…"
