"""The programs some tests need from the operating system, how to find them and how to install them.

A test that needs one carries `@pytest.mark.needs_program("dot")`: where the program is missing it is skipped with
the install command, so a newcomer without it still gets a green suite. CI sets BERTVIZ_LAB_REQUIRE_PROGRAMS=1,
and then a missing program stops the run instead: CI runs everything.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

REQUIRE_ENV = "BERTVIZ_LAB_REQUIRE_PROGRAMS"


@dataclass(frozen=True)
class SystemProgram:
    name: str
    package: str
    purpose: str
    debian: str
    macos: str

    def path(self) -> str | None:
        """Where the program is, or None."""
        if self.name == "chromium":
            return str(CHROMIUM) if CHROMIUM.exists() else None
        return shutil.which(self.name)

    def missing_reason(self) -> str:
        return (f"{self.name} is missing ({self.package}, for {self.purpose}); install it with "
                f"`{self.debian}` (Debian/Ubuntu) or `{self.macos}` (macOS)")


# The browser tests launch this Chromium (Debian's); BERTVIZ_LAB_CHROMIUM names another one.
CHROMIUM = Path(os.environ.get("BERTVIZ_LAB_CHROMIUM", "/usr/bin/chromium"))

PROGRAMS = {
    "dot": SystemProgram("dot", "Graphviz", "the graphviz architecture view",
                         "sudo apt-get install graphviz", "brew install graphviz"),
    "chromium": SystemProgram("chromium", "Chromium", "the browser tests of the notebooks",
                              "sudo apt-get install chromium",
                              "brew install --cask chromium, then set BERTVIZ_LAB_CHROMIUM to its binary"),
}


def required() -> bool:
    """Whether a missing program is an error (CI) rather than a skip."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def require_avx2_kernels() -> None:
    """Skip where the AVX2 kernels cannot run on this machine (another CPU or OS, no C compiler); in CI, fail: a
    kernel that does not build there must not pass as a skipped file."""
    import pytest

    from bertviz_lab.kernels import build

    if build.library() is not None:
        return
    reason = build.unsupported_reason() or build.failure() or "no C compiler to build them and no verified build"
    if required():
        pytest.fail(f"the AVX2 kernels did not build or load: {reason} ({REQUIRE_ENV}=1: CI runs every test)",
                    pytrace=False)
    pytest.skip(f"the AVX2 kernels cannot run here: {reason}")
