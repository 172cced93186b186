"""The Python blocks of the README and the docs' Markdown pages, as the snippet test runs them.

A block is a fence opened with ```python (indented too, inside a list item); a block whose line before is
`<!-- skip: reason -->` is not run, and the reason is reported.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OPENING = re.compile(r"^(?P<indent>\s*)```(?P<language>[\w+-]*)\s*$")
SKIP = re.compile(r"^\s*<!--\s*skip:\s*(?P<reason>.*?)\s*-->\s*$")
PYTHON = {"python", "py", "python3"}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    source: str
    skip: str | None  # the reason it is not run here, or None

    def where(self) -> str:
        page = self.page.relative_to(REPO) if self.page.is_relative_to(REPO) else self.page
        return f"{page}:{self.line}"


def markdown_pages() -> list[Path]:
    """README.md and every Markdown page under docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def python_blocks(page: Path) -> list[Block]:
    """The page's Python blocks in reading order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opening = OPENING.match(lines[index])
        if not opening or not opening.group("language"):
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if opening.group("language") in PYTHON:
            skip = SKIP.match(lines[index - 1]) if index else None
            source = textwrap.dedent("\n".join(lines[index + 1:end]))
            blocks.append(Block(page, index + 1, source, skip.group("reason") if skip else None))
        index = end + 1
    return blocks
