"""The run configs shipped in the package, by name: `bertviz-lab train --config tiny` works from any folder.

The YAML files live in `bertviz_lab/train/presets/` (the repository's `configs/` links to them), so a wheel carries
them and there is one copy of each.
"""

from __future__ import annotations

import os
from pathlib import Path

PRESETS = Path(__file__).with_name("presets")


def preset_names() -> list[str]:
    """The names `--config` takes besides a path, sorted."""
    return sorted(path.stem for path in PRESETS.glob("*.yaml"))


def config_path(source: str | os.PathLike) -> Path:
    """The file a `--config` value names: an existing path as given, else the shipped preset of that name (a bare
    name such as `tiny`); anything else is returned as given, for the reader to report as missing."""
    path = Path(source)
    if path.exists() or path.suffix or len(path.parts) != 1:
        return path
    preset = PRESETS / f"{path.name}.yaml"
    return preset if preset.is_file() else path
