"""The Workbench says which model it shows, and the Training tab what it does, in JupyterLab in headless Chromium:
the header names the model, its size and its heads; Start is disabled while a run trains, then Resume and Restart
are offered, and Restart begins the curves again from step 1. Screenshots (light and dark) go to screenshots/."""

from __future__ import annotations

import re
from typing import Any

import pytest
from browser_lab import (
    CONTENT_BOX,
    SCREENSHOTS,
    allowed_url,
    open_and_run,
    set_theme,
)

pytestmark = [pytest.mark.browser, pytest.mark.needs_program("chromium")]

RUN = {"data": {"corpus": "synthetic", "vocab_size": 1000, "sequence_length": 64, "batch_size": 16,
                "num_train_batches": 8, "num_test_batches": 1},
       "model": {"preset": "tiny", "dim_model": 128, "num_heads": 4, "dim_ff": 512, "num_layers": 2},
       "training": {"steps": 400, "eval_interval": 50, "device": "cpu"},
       "logging": {"progress": False, "log_interval": 0}}
STEPS = 30  # per Start / Resume / Restart: a few seconds of training
CELLS = [
    "from bertviz_lab.widgets import TrainingPanel, Workbench\n"
    "bench = Workbench(text='The cat sat on the mat.')\n"
    f"bench.training.run_config = {RUN!r}\n"
    f"bench.training.steps = {STEPS}\n"
    "bench",
]

# The Training tab's buttons: which show, which are enabled; the curves' status line.
BUTTONS = """(panel) => {
  const state = {};
  for (const button of panel.querySelectorAll('button')) {
    const name = button.textContent.trim();
    if (['Start', 'Resume', 'Restart', 'Stop'].includes(name)) {
      state[name] = {shown: button.offsetParent !== null, enabled: !button.disabled};
    }
  }
  const status = panel.querySelector('.bvl-curves-status');
  state.status = status ? status.textContent : '';
  return state;
}"""


def button(tab: Any, name: str) -> Any:
    """The button named exactly `name` ("Start" is also in "Restart")."""
    return tab.locator("button", has_text=re.compile(rf"^\s*{name}\s*$"))


def buttons(tab: Any) -> dict:
    return tab.evaluate(BUTTONS)


def wait_buttons(page: Any, tab: Any, condition: str, timeout_ms: int = 120_000) -> dict:
    page.wait_for_function(f"(panel) => {{ const b = ({BUTTONS})(panel); return {condition}; }}",
                           arg=tab.element_handle(), timeout=timeout_ms, polling=100)
    return buttons(tab)


def test_the_header_names_the_model_and_training_offers_resume_and_restart(page, lab_server, lab_context):
    first_request = len(lab_context.requested)
    open_and_run(page, lab_server, "training_actions.ipynb", CELLS)
    output = page.locator(".jp-OutputArea-output").filter(has=page.locator(".lm-TabBar-tab")).first  # the live one
    header = output.locator(".bvl-model-header").first
    assert header.inner_text().strip() == "model: all-MiniLM-L6-v2 · 22.7 M parameters · 6 layers × 12 heads"
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "workbench_header.png"), clip=output.evaluate(CONTENT_BOX))

    output.locator(".lm-TabBar-tab", has_text="Training").click()
    # the innermost panel with the run's buttons: the Training tab (the workbench holds it, its curves are inside)
    tab = output.locator(".bvl-panel").filter(has=page.locator("button", has_text="Restart")).last
    state = wait_buttons(page, tab, "b.Start && b.Start.shown && b.Start.enabled")
    assert not state["Resume"]["shown"] and not state["Restart"]["shown"]
    button(tab, "Start").click()
    wait_buttons(page, tab, "b.Start.shown && !b.Start.enabled")  # no second Start while it trains
    page.screenshot(path=str(SCREENSHOTS / "training_running.png"), clip=tab.evaluate(CONTENT_BOX))
    state = wait_buttons(page, tab, "!b.Start.shown && b.Resume.shown && b.Resume.enabled && b.Restart.shown "
                                    "&& b.Restart.enabled && /finished/.test(b.status)")
    assert state["status"].startswith(f"step {STEPS} of 400 · finished"), state["status"]
    page.screenshot(path=str(SCREENSHOTS / "training_actions.png"), clip=tab.evaluate(CONTENT_BOX))

    set_theme(page, "dark")
    tab.wait_for(state="visible")  # laid out again in the new theme (a box of no width while it is restyled)
    page.screenshot(path=str(SCREENSHOTS / "training_actions_dark.png"), clip=tab.evaluate(CONTENT_BOX))
    output.locator(".lm-TabBar-tab", has_text="Attention").click()
    page.screenshot(path=str(SCREENSHOTS / "workbench_header_dark.png"), clip=output.evaluate(CONTENT_BOX))
    output.locator(".lm-TabBar-tab", has_text="Training").click()
    set_theme(page, "light")

    # Resume continues the run; Restart begins a fresh one, whose curves start from step 1 again
    button(tab, "Resume").click()
    wait_buttons(page, tab, f"b.Resume.enabled && /^step {2 * STEPS} of 400 · finished/.test(b.status)")
    button(tab, "Restart").click()
    wait_buttons(page, tab, f"b.Resume.enabled && /^step {STEPS} of 400 · finished/.test(b.status)")

    assert not page.errors, page.errors
    foreign = [url for url in lab_context.requested[first_request:] if not allowed_url(url)]
    assert not foreign, f"requests left the machine: {foreign}"
