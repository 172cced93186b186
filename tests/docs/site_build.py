"""Build the documentation site once per test session (`mkdocs build --strict` into a temporary folder).

The build runs the workbench notebook (the page the browser test reads) and leaves the other notebooks' outputs out
(BERTVIZ_LAB_DOCS_EXECUTE, docs/hooks.py), so the whole build stays near a minute on a 2-core machine; `mkdocs
build` without it runs them all. BERTVIZ_LAB_DOCS_SITE names a site already built that way, to be read instead
(the browser test, run under a lock other browser tests wait on, need not hold it while mkdocs builds).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXECUTED = "00_workbench"
PREBUILT_ENV = "BERTVIZ_LAB_DOCS_SITE"
_BUILT: dict[str, Any] = {}


def build_site(folder: Path) -> tuple[Path, subprocess.CompletedProcess, float]:
    """The built site's folder, the build's process (its log) and its seconds; the first call builds."""
    if "site" not in _BUILT and os.environ.get(PREBUILT_ENV):
        prebuilt = Path(os.environ[PREBUILT_ENV])
        _BUILT["site"] = (prebuilt, subprocess.CompletedProcess([], 0 if (prebuilt / "index.html").is_file() else 1,
                                                                f"{PREBUILT_ENV}={prebuilt}", ""), 0.0)
    if "site" not in _BUILT:
        env = {**os.environ, "BERTVIZ_LAB_DOCS_EXECUTE": EXECUTED, "NO_MKDOCS_2_WARNING": "1", "HF_HUB_OFFLINE": "1"}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
        _BUILT["site"] = (folder, done, time.perf_counter() - started)
    return _BUILT["site"]
