"""The README: short, its set-up lines and two commands as CI runs them, and every link and picture in it resolving."""

from __future__ import annotations

import re

from markdown_blocks import REPO

README = REPO / "README.md"
SET_UP = ["python -m venv .venv && . .venv/bin/activate",  # step 1, indented in its list item
          "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"]
OPEN_THE_WORKBENCH = 'pip install -e ".[lab,models]" && jupyter lab notebooks/00_workbench.ipynb'
RUN_THE_TESTS = 'pip install -e ".[test]" && python -m pytest -q -n auto --dist loadgroup'
CI = REPO / ".ci" / "run"


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; the guides under docs/ take the rest"


def test_the_set_up_lines_and_the_two_commands_are_there_and_ci_runs_each_verbatim():
    text = README.read_text(encoding="utf-8")
    assert "   ```bash\n" + "".join(f"   {line}\n" for line in SET_UP) + "   ```" in text
    assert f"```bash\n{OPEN_THE_WORKBENCH}\n```" in text
    assert f"```bash\n{RUN_THE_TESTS}\n```" in text
    ci = CI.read_text(encoding="utf-8")
    lines = ci.splitlines()
    assert all(line in lines for line in SET_UP), "CI makes its venv and installs PyTorch as the README does"
    assert lines.index(SET_UP[0]) < lines.index(SET_UP[1]) < lines.index(RUN_THE_TESTS)
    assert f"'{OPEN_THE_WORKBENCH}'" in ci, "CI runs the workbench command as printed"


def test_every_link_in_the_readme_resolves():
    text = README.read_text(encoding="utf-8")
    anchors = {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
               for heading in re.findall(r"^#+ (.+)$", text, re.M)}
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    assert len(targets) > 20
    for target in targets:
        if re.match(r"^[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        if not path:
            assert anchor in anchors, f"README.md links to #{anchor}, which is no heading of it"
            continue
        assert (REPO / path).exists(), f"README.md links to {path}, which does not exist"
        if path.startswith("docs/") and path.endswith(".md"):
            page = re.escape(path.removeprefix("docs/"))
            assert re.search(rf"^\s*- (?:[^:\n]+: )?{page}\s*$", (REPO / "mkdocs.yml").read_text(encoding="utf-8"),
                             re.M), f"{path} is not a page of the site's nav"
