"""axe-core (its axe.min.js, as the test extra's `axe-playwright-python` ships it: no npm step) on the workbench in
JupyterLab, in headless Chromium, offline: every tab of the Workbench, and each of the attention tab's views, in
JupyterLab Light and Dark, has no violation of impact serious or critical. axe judges HTML (names, roles, ARIA, HTML
text contrast); SVG text contrast, canvas and keyboard paths are checked by test_themes_in_browser.py and
test_keyboard_in_browser.py.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
from browser_lab import THEMES, open_and_run, set_theme

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

AXE = Path(importlib.util.find_spec("axe_playwright_python").origin).with_name("axe.min.js")
TIMEOUT_MS = 180_000
SERIOUS = ("serious", "critical")
TABS = {  # a workbench tab's title -> what its panel shows once drawn
    "Attention": "div.bvl-view svg.bvl-fig",  # the view last chosen
    "Masking": "svg.bvl-fig",
    "Architecture": "div.bvl-diagram svg",
    "Training": "div.bvl-loss-curves svg.bvl-fig",
    "Device": "button",
    "Causal": "div.bvl-cell-grid-view",  # the default model has no masked-LM head: patching says so in its view
}
ATTENTION_VIEWS = {  # a view's toggle button -> what it draws once shown
    "heatmap": "div.bvl-heatmap-view svg.bvl-heatmap",
    "head view": "div.bvl-head-view svg.bvl-head-view",
    "model view": "div.bvl-model-view svg.bvl-model-view",
    "neuron view": "div.bvl-neuron-view svg.bvl-neuron",
    "saliency": "div.bvl-saliency-view svg.bvl-saliency[data-status='ready']",
}
CELLS = [
    "from bertviz_lab.widgets import Workbench\n"
    "from bertviz_lab.widgets.panels.models import default_model_and_tokenizer\n"
    "model, tokenizer = default_model_and_tokenizer()\n"
    "workbench = Workbench(model, tokenizer, 'The cat sat on the [MASK] because it was warm.')\n"
    "for step in range(1, 41):  # the training tab's curves with every series drawn\n"
    "    workbench.training.curves({'step': step, 'train_mlm_loss': 8 / step ** 0.5,\n"
    "        'train_nsp_loss': 0.7 / step ** 0.3, 'eval_mlm_loss': 9 / step ** 0.5 if step % 10 == 0 else None,\n"
    "        'eval_nsp_loss': 0.8 / step ** 0.3 if step % 10 == 0 else None,\n"
    "        'eval_mlm_accuracy': min(0.9, step / 50) if step % 10 == 0 else None,\n"
    "        'eval_nsp_accuracy': min(0.8, step / 60) if step % 10 == 0 else None, 'lr': 1e-4})\n"
    "workbench.training.curves.flush()\n"
    "workbench",
]

# The workbench's output (the live one: its static copy is hidden while the live view shows).
WORKBENCH = ".jp-OutputArea-output:has(.widget-tab):visible"

SHOWN_TAB = ".widget-tab-contents > .bvl-panel:not(.lm-mod-hidden)"  # the selected tab's panel

# axe-core on one element: the violations of impact serious or critical, each with its rule, impact and some targets.
RUN_AXE = """async ([element, impacts]) => {
  const result = await window.axe.run(element, {resultTypes: ['violations']});
  return result.violations.filter((v) => impacts.includes(v.impact)).map((v) => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ') + ' :: ' + (n.failureSummary || '').slice(0, 200))}));
}"""


def show_tab(output: Any, title: str) -> None:
    """Choose the workbench tab `title` and wait until its content has drawn."""
    output.locator(".lm-TabBar-tab", has_text=re.compile(f"^{title}$")).first.click()
    output.locator(".lm-TabBar-tab.lm-mod-current", has_text=re.compile(f"^{title}$")).wait_for()
    output.locator(f"{SHOWN_TAB} {TABS[title]} >> visible=true").first.wait_for(timeout=TIMEOUT_MS)


def show_view(output: Any, view: str) -> None:
    """Choose the attention panel's view and wait until it has drawn."""
    output.locator(".widget-toggle-button", has_text=re.compile(f"^{re.escape(view)}$")).first.click()
    output.locator(f"{SHOWN_TAB} {ATTENTION_VIEWS[view]} >> visible=true").first.wait_for(timeout=TIMEOUT_MS)


def serious_violations(page: Any, output: Any) -> list[dict]:
    return page.evaluate(RUN_AXE, [output.element_handle(), list(SERIOUS)])


def test_axe_finds_no_serious_violation_in_any_tab_or_theme(page, lab_server):
    assert AXE.is_file(), f"{AXE} is missing: pip install -e '.[test]' installs it (axe-playwright-python)"
    page.set_default_timeout(TIMEOUT_MS)
    try:
        open_and_run(page, lab_server, "accessibility_check.ipynb", CELLS, timeout_ms=TIMEOUT_MS)
        page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
        assert page.evaluate("() => typeof window.axe.run") == "function"
        output = page.locator(WORKBENCH).first
        output.wait_for()
        found: dict[str, list[dict]] = {}
        checked = []
        for theme in THEMES:
            set_theme(page, theme)
            for tab in TABS:
                show_tab(output, tab)
                views = ATTENTION_VIEWS if tab == "Attention" else {"": ""}
                for view in views:
                    if view:
                        show_view(output, view)
                    where = f"{theme} · {tab}" + (f" · {view}" if view else "")
                    checked.append(where)
                    violations = serious_violations(page, output)
                    if violations:
                        found[where] = violations
        assert len(checked) == 2 * (len(TABS) - 1 + len(ATTENTION_VIEWS)), checked
        report = "\n".join(f"{where}: " + "; ".join(f"{v['id']} ({v['impact']}: {v['help']}) at {v['nodes']}"
                                                    for v in violations) for where, violations in found.items())
        rules = sorted({v["id"] for violations in found.values() for v in violations})
        assert not found, f"axe-core found serious or critical violations, rules {rules}:\n{report}"
    finally:
        set_theme(page, "light")  # the theme is a user setting of the shared server: leave it as found
