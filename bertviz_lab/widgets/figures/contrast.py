"""Ink for text drawn on a data colour: the WCAG contrast ratio, and black or white, whichever reads better."""

from __future__ import annotations

import re

_HEX = re.compile(r"#([0-9a-fA-F]{6})")
INKS = ("#000000", "#ffffff")  # against any fill one of them reaches at least √21 ≈ 4.58:1


def luminance(color: str) -> float:
    """WCAG relative luminance of a #rrggbb colour (0: black, 1: white)."""
    found = _HEX.fullmatch(color.strip())
    if found is None:
        raise ValueError(f"colour must be written #rrggbb, got {color!r}")
    channels = [int(found.group(1)[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast_ratio(first: str, second: str) -> float:
    """WCAG contrast ratio of two #rrggbb colours, 1 to 21."""
    light, dark = sorted((luminance(first), luminance(second)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def ink_class(ink: str) -> str:
    """The class that gives a text `ink` ahead of figure.css's theme colour for text (head_view.css,
    model_view.css): bvl-ink-black or bvl-ink-white."""
    if ink not in INKS:
        raise ValueError(f"ink must be one of {INKS}, got {ink!r}")
    return "bvl-ink-black" if ink == INKS[0] else "bvl-ink-white"


def ink_on(fill: str) -> str:
    """Black or white, whichever contrasts more with `fill`: text on a data colour stays readable in every theme."""
    return max(INKS, key=lambda ink: contrast_ratio(ink, fill))
