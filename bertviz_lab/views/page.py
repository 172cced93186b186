"""html_action="return": the views as one offline HTML page (an IPython HTML object, as bertviz returns), drawn from
the same figures as the live views: no script, nothing fetched, every token escaped."""

from __future__ import annotations

from typing import Any

from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.figures.theme import background, check_theme, resolve
from bertviz_lab.widgets.views.front_end import all_css

# the page loads nothing: inline styles and the figures' own data: images only
POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def offline_page(drawings: list[str], title: str, theme: str = "light") -> str:
    """A standalone HTML page holding the SVG drawings one under the other, in the light or dark theme."""
    css = resolve(all_css(), check_theme(theme))
    figures = "".join(f"<div class='bvl-figure bvl-attention'>{svg}</div>" for svg in drawings)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{POLICY}\">"
            f"<meta name='generator' content='bertviz-lab views'><title>{escape(title)}</title>"
            f"<style>body {{ background: {background(theme)}; margin: 16px; }}\n{css}</style></head>"
            f"<body>{figures}</body></html>")


def html_object(page: str) -> Any:
    """The page as an IPython HTML object (what bertviz's html_action="return" gives; `.data` is the page)."""
    from IPython.display import HTML

    return HTML(page)
