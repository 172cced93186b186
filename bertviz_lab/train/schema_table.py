"""The YAML keys' table on the docs' CLI page, from the schema: `python -m bertviz_lab.train.schema_table`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bertviz_lab.train.schema import SCHEMA


def _shown_default(value: Any) -> str:
    """A default as YAML writes it."""
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def markdown() -> str:
    """The table of the YAML keys: key, type, default, meaning (and the other spelling, if any)."""
    aliases = {k.alias_of: f"{section}.{name}" for section, keys in SCHEMA.items() for name, k in keys.items()
               if k.alias_of}
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for section, keys in SCHEMA.items():
        for name, k in keys.items():
            if k.alias_of:
                continue
            full = f"{section}.{name}"
            meaning = k.help.replace("|", "&#124;") + (f" (alias: `{aliases[full]}`)" if full in aliases else "")
            lines.append(f"| `{full}` | {k.type_name()} | {_shown_default(k.default)} | {meaning} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the YAML keys' table (Markdown), as the docs show it."""
    argparse.ArgumentParser(prog="python -m bertviz_lab.train.schema_table",
                            description="Print the table of the run config's keys (Markdown), from the "
                                        "schema.").parse_args(argv)
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
