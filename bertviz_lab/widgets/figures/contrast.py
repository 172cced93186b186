"""Colours as people see them: the WCAG contrast ratio and the ink (black or white) that reads on a data colour, and
how a colour looks to a reader with red-green colour blindness, with the CIELAB distance that says whether two colours
still differ."""

from __future__ import annotations

import re

_HEX = re.compile(r"#([0-9a-fA-F]{6})")
INKS = ("#000000", "#ffffff")  # against any fill one of them reaches at least √21 ≈ 4.58:1


# Machado, Oliveira & Fernandes (2009), "A physiologically-based model for simulation of color vision deficiency",
# IEEE TVCG 15(6): the severity 1.0 matrices, applied to linear RGB.
COLOUR_BLINDNESS = {
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881)),
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
}
_SRGB_TO_XYZ = ((0.4124564, 0.3575761, 0.1804375), (0.2126729, 0.7151522, 0.0721750), (0.0193339, 0.1191920, 0.9503041))
_D65 = (0.95047, 1.0, 1.08883)


def linear_rgb(color: str) -> tuple[float, float, float]:
    """The linear-light red, green and blue (0 to 1) of a #rrggbb colour."""
    found = _HEX.fullmatch(color.strip())
    if found is None:
        raise ValueError(f"colour must be written #rrggbb, got {color!r}")
    channels = [int(found.group(1)[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return r, g, b


def hex_color(linear: tuple[float, float, float]) -> str:
    """#rrggbb of linear-light red, green and blue, each clipped to 0 to 1."""
    encoded = []
    for c in linear:
        c = min(1.0, max(0.0, c))
        encoded.append(round(255 * (12.92 * c if c <= 0.0031308 else 1.055 * c ** (1 / 2.4) - 0.055)))
    return "#%02x%02x%02x" % tuple(encoded)


def luminance(color: str) -> float:
    """WCAG relative luminance of a #rrggbb colour (0: black, 1: white)."""
    r, g, b = linear_rgb(color)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


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


def as_seen_with(color: str, deficiency: str = "deuteranopia") -> str:
    """How a #rrggbb colour looks to a reader with `deficiency` (deuteranopia or protanopia), as #rrggbb."""
    if deficiency not in COLOUR_BLINDNESS:
        raise ValueError(f"deficiency must be one of {tuple(COLOUR_BLINDNESS)}, got {deficiency!r}")
    rgb = linear_rgb(color)
    red, green, blue = (sum(m * c for m, c in zip(row, rgb)) for row in COLOUR_BLINDNESS[deficiency])
    return hex_color((red, green, blue))


def cielab(color: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of a #rrggbb colour."""
    rgb = linear_rgb(color)
    xyz = [sum(m * c for m, c in zip(row, rgb)) / white for row, white in zip(_SRGB_TO_XYZ, _D65)]
    f = [t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29 for t in xyz]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def delta_e(first: str, second: str) -> float:
    """CIE76 colour difference ΔE*ab of two #rrggbb colours: about 2.3 is just noticeable, 20 or more tells two
    lines apart at a glance."""
    return sum((a - b) ** 2 for a, b in zip(cielab(first), cielab(second))) ** 0.5
