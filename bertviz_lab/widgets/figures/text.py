"""Text in figures: escaping (tokens and texts are user data), widths for layout, labels cut to fit."""

from __future__ import annotations

import html
import re
import unicodedata
from typing import Any

MAX_LABEL_CHARS = 16


# Characters XML 1.0 does not allow (C0 controls but tab, line feed and carriage return; surrogates; U+FFFE, U+FFFF):
# in an SVG they make the file ill-formed. A C0 control is drawn as its Control Pictures sign (NUL as U+2400), any
# other as the replacement character.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    return chr(0x2400 + code) if code < 0x20 else "\ufffd"


def escape(text: Any) -> str:
    """HTML-escape anything shown to a user (tokens and texts are user data), with the characters XML forbids
    replaced by visible signs, so a token holding NUL still makes a well-formed SVG."""
    return html.escape(_NOT_XML.sub(_visible, str(text)), quote=True)


def minus(number: str) -> str:
    """A number's text with a true minus sign (U+2212): a hyphen-minus is drawn as a short dash that reads as "-" in
    a figure's ticks and printed values."""
    return number.replace("-", "\u2212")


def text_width(text: str, size: float = 12, monospace: bool = False) -> float:
    """About how wide `text` draws, in pixels: wide (East Asian) characters count double; for layout, not exact."""
    per_char = 0.6 if monospace else 0.56
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in str(text)) * per_char * size


def short_token(token: str) -> str:
    """A token as an axis label: long ones cut with an ellipsis (hover and tooltips keep them whole)."""
    return token if len(token) <= MAX_LABEL_CHARS else token[: MAX_LABEL_CHARS - 1] + "…"
