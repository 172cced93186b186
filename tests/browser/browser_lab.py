"""Drive JupyterLab in Debian's headless Chromium: a private Lab server, and page helpers for the notebook tests.

Everything the browser may reach is this machine's 127.0.0.1: Chromium gets a dead proxy for every other host
(loopback is never proxied), and the tests record every request and websocket to prove it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

from playwright.sync_api import Error as PlaywrightError

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "screenshots"
# Set to a folder (e.g. docs/images) to also write the README's pictures there; tools/screenshots.py does.
README_IMAGES_ENV = "BERTVIZ_LAB_SCREENSHOTS"

CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage",
    # Offline by construction: every non-loopback request goes to a closed local port and fails.
    "--proxy-server=http://127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]

# Lab settings for a test run: no autosave (it would save widget outputs without their state into the copy)
# and no news or update checks; every cell attached to the DOM so outputs of off-screen cells are really drawn.
SETTINGS_OVERRIDES = {
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class LabServer:
    """One JupyterLab on 127.0.0.1 with private config/data/runtime dirs, serving a copy of notebooks/ and configs/."""

    base: Path
    port: int = field(default_factory=free_port)
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    process: subprocess.Popen | None = None

    @property
    def root(self) -> Path:
        return self.base / "root"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.base / "jupyterlab.log"

    def prepare(self) -> None:
        for folder in ("notebooks", "configs"):
            if not (REPO / folder).is_dir():  # configs/ is optional: the presets may live in the package
                continue
            shutil.copytree(REPO / folder, self.root / folder,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        settings = self.base / "data" / "lab" / "settings"
        settings.mkdir(parents=True)
        (settings / "overrides.json").write_text(json.dumps(SETTINGS_OVERRIDES, indent=2))
        for name in ("config", "runtime", "ipython"):
            (self.base / name).mkdir()

    def start(self, timeout: float = 120.0) -> None:
        self.prepare()
        env = dict(os.environ, JUPYTER_CONFIG_DIR=str(self.base / "config"), JUPYTER_DATA_DIR=str(self.base / "data"),
                   JUPYTER_RUNTIME_DIR=str(self.base / "runtime"), IPYTHONDIR=str(self.base / "ipython"))
        env.pop("JUPYTERLAB_DIR", None)
        env.pop("JUPYTERLAB_SETTINGS_DIR", None)
        env.pop("JUPYTERLAB_WORKSPACES_DIR", None)
        command = [
            sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
            "--ServerApp.terminals_enabled=False", "--LabApp.expose_app_in_browser=True",
            "--JupyterNotebookApp.expose_app_in_browser=True",  # Notebook 7 pages on the same server
            # The overrides live in the private data dir, not in the installed Lab's settings folder.
            f"--LabApp.app_settings_dir={self.base / 'data' / 'lab' / 'settings'}",
            f"--JupyterNotebookApp.app_settings_dir={self.base / 'data' / 'lab' / 'settings'}",
        ]
        log = open(self.log_path, "wb")
        try:
            self.process = subprocess.Popen(command, env=env, cwd=self.root, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                status = self.api("GET", "/api/status")
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                status = {}
            if "started" in status:
                self.check_overrides()
                return
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer on {self.url} within {timeout:.0f} s:\n{self.log_tail()}")

    def check_overrides(self) -> None:
        """The settings overrides are in force (they are the schema defaults Lab serves)."""
        for plugin, values in SETTINGS_OVERRIDES.items():
            schema = self.api("GET", f"/lab/api/settings/{plugin}")["schema"]["properties"]
            for key, value in values.items():
                if schema[key].get("default") != value:
                    self.stop()
                    raise RuntimeError(f"JupyterLab ignored the override {plugin} {key}={value!r} "
                                       f"(default {schema[key].get('default')!r}); log:\n{self.log_tail()}")

    def api(self, method: str, path: str) -> Any:
        """A REST call from the test process, authenticated by the token header."""
        request = urllib.request.Request(self.url + path, method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM to the server's own PID (it shuts its kernels down), then wait; SIGKILL only if it hangs."""
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        return process.returncode

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"


# ------------------------------------------------------------------------------------------------------------
# The page side. Each helper runs a small script in JupyterLab (window.jupyterapp exists because the server
# was started with expose_app_in_browser).

def allowed_url(url: str) -> bool:
    """Only this machine's loopback; inline data and blobs are not network requests."""
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob"):
        return True
    return parts.scheme in ("http", "https", "ws", "wss") and parts.hostname == "127.0.0.1"


def delete_sessions(context: Any, server: LabServer) -> list[str]:
    """Shut down every kernel session through the REST API, as the browser would (cookie login + XSRF header)."""
    response = context.request.get(f"{server.url}/lab?token={server.token}")
    assert response.ok, f"GET /lab answered {response.status}"
    xsrf = next((c["value"] for c in context.cookies(server.url) if c["name"] == "_xsrf"), None)
    assert xsrf, "JupyterLab set no _xsrf cookie"
    headers = {"X-XSRFToken": xsrf}
    sessions = context.request.get(f"{server.url}/api/sessions", headers=headers).json()
    deleted = []
    for session in sessions:
        answer = context.request.delete(f"{server.url}/api/sessions/{session['id']}", headers=headers)
        assert answer.status == 204, f"DELETE /api/sessions/{session['id']} answered {answer.status}: {answer.text()}"
        deleted.append(session["path"])
    return deleted


@contextlib.contextmanager
def recording_context(browser: Any, server: LabServer) -> Iterator[Any]:
    """A browser context that keeps every request it makes in `.requested` (the offline checks read it); its kernel
    sessions are shut down when it closes."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, device_scale_factor=1)
    context.requested = []
    context.on("request", lambda request: context.requested.append(request.url))
    try:
        yield context
    finally:
        try:
            delete_sessions(context, server)
        finally:
            context.close()


KERNEL_READY = """(path) => {
  const app = window.jupyterapp;
  const w = app && app.shell && app.shell.currentWidget;
  if (!w || !w.context || w.context.path !== path || !w.context.isReady || !w.content) return false;
  const s = w.sessionContext;
  const k = s && s.isReady && s.session && s.session.kernel;
  return !!k && k.status === 'idle' && k.connectionStatus === 'connected';
}"""

RUN_ALL = """() => {
  window.__bvl = {done: false};
  window.jupyterapp.commands.execute('notebook:run-all-cells').then(
    (result) => { window.__bvl = {done: true, result: result}; },
    (error) => { window.__bvl = {done: true, error: String(error && error.message || error)}; });
  return true;
}"""

# 'done' when the run-all promise settled, the kernel is idle and every code cell shows [n]; 'error' as soon as
# the run settled with an error output (the kernel skips the cells after it, so they never get a count).
RUN_STATE = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const cells = w.content.widgets.filter((c) => c.model.type === 'code');
  if (!window.__bvl || !window.__bvl.done) return false;
  const failed = cells.some((c) => {
    const outputs = c.model.outputs;
    for (let i = 0; i < outputs.length; i++) if (outputs.get(i).type === 'error') return true;
    return false;
  });
  if (failed) return 'error';
  const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
  if (!kernel || kernel.status !== 'idle') return false;
  const counted = cells.every((c) => {
    const prompt = c.node.querySelector('.jp-InputPrompt');
    return c.model.executionCount !== null && prompt && /\\[\\d+\\]/.test(prompt.textContent);
  });
  return counted ? 'done' : false;
}"""

CELL_REPORT = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  return w.content.widgets.map((c, index) => {
    const count = c.model.executionCount === undefined ? null : c.model.executionCount;
    const item = {index: index, type: c.model.type, count: count, errors: [], stderr: [],
                  source: c.model.sharedModel.getSource().slice(0, 80)};
    if (c.model.type !== 'code') return item;
    const outputs = c.model.outputs;
    for (let i = 0; i < outputs.length; i++) {
      const o = outputs.get(i).toJSON();
      const text = Array.isArray(o.text) ? o.text.join('') : o.text;
      const trace = (o.traceback || []).join('\\n');
      if (o.output_type === 'error') item.errors.push(o.ename + ': ' + o.evalue + '\\n' + trace);
      if (o.output_type === 'stream' && o.name === 'stderr') item.stderr.push(text);
    }
    return item;
  });
}"""

# What the rendered page shows as errors, whatever the model says: tracebacks on stderr, error mime outputs,
# and widgets that failed to render (ipywidgets' error view, "Error displaying widget: model not found").
DOM_ERRORS = """() => {
  const found = [];
  const all = (selector) => document.querySelectorAll(selector);
  for (const el of all('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')) {
    const text = el.textContent;
    if (/Traceback \\(most recent call last\\)|^\\w*Error:/m.test(text)) found.push('stderr: ' + text.slice(0, 2000));
  }
  for (const el of all('.jp-RenderedText[data-mime-type*="error"]')) {
    found.push('error output: ' + el.textContent.slice(0, 2000));
  }
  for (const el of all('.jp-OutputArea-output .jupyter-widgets-error-widget')) {
    found.push('widget error: ' + el.textContent.slice(0, 500));
  }
  for (const el of all('.jp-OutputArea-output')) {
    if (/Error displaying widget/.test(el.textContent) && !el.querySelector('.jp-RenderedText')) {
      found.push('widget: ' + el.textContent.slice(0, 500));
    }
  }
  return found;
}"""

# The live heatmap (div.bvl-heatmap-view) says what it drew (heatmap.js's header lists its data- attributes): the
# title, size and count of drawings shown, whether its figure has a cell area, and the cell read by hover or keys.
HEATMAP_DRAWN = """(el) => {
  const d = el.dataset;
  return {title: d.title || '', rows: Number(d.rows || 0), cols: Number(d.cols || 0), draws: Number(d.draws || 0),
          cells: !!el.querySelector('svg.bvl-heatmap .bvl-cells'),
          cell: d.cellRow === undefined ? null : [Number(d.cellRow), Number(d.cellCol)], weight: d.weight || '',
          tip: (el.querySelector('.bvl-tooltip') || {}).textContent || ''};
}"""

CANVAS_INK = """(root) => {
  let drawn = 0;
  const canvases = root.querySelectorAll('canvas.bvl-thumb');
  for (const c of canvases) {
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    for (let i = 0; i < data.length; i += 4) if (data[i] < 250 || data[i + 1] < 250) { drawn++; break; }
  }
  return {canvases: canvases.length, drawn: drawn};
}"""

MASK_CHIPS = """() => {
  const chips = [...document.querySelectorAll(
    '.jp-OutputArea-output .jupyter-widgets .bvl-figure-view svg.bvl-masking g.bvl-chip')];  // live, not a copy
  const masked = chips.filter((c) => c.classList.contains('bvl-mask'));
  const fill = (c) => { const r = c.querySelector('rect'); return r ? getComputedStyle(r).fill : ''; };
  return {chips: chips.length, mask: masked.length, fills: [...new Set(masked.map(fill))],
          maskTokens: masked.filter((c) => (c.querySelector('title') || {}).textContent).length};
}"""

# Lab shows an SVG output and a mermaid diagram as <img src="data:image/svg+xml,...">: loaded? what is in it?
SVG_IMAGE = """(img) => {
  const src = img.getAttribute('src') || '';
  const comma = src.indexOf(',');
  const head = src.slice(0, comma);
  const body = head.endsWith(';base64') ? atob(src.slice(comma + 1)) : decodeURIComponent(src.slice(comma + 1));
  const shown = img.getBoundingClientRect();
  return {loaded: img.complete && img.naturalWidth > 0, width: Math.round(shown.width),
          height: Math.round(shown.height), svg: body.includes('<svg'),
          nodes: (body.match(/class="node/g) || []).length, text: body};
}"""


# The part of an output that holds something: widgets stretch to the notebook's width, their content often doesn't.
CONTENT_BOX = """(el) => {
  const box = el.getBoundingClientRect();
  let right = box.left + 40;
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (!node.textContent.trim() || node.parentElement.closest('svg svg')) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const rect of range.getClientRects()) if (rect.width) right = Math.max(right, rect.right);
  }
  const solid = ':not(svg) > svg, img, canvas, button, select, input, textarea, .lm-TabBar-tab';
  for (const e of el.querySelectorAll(solid)) {
    const rect = e.getBoundingClientRect();
    if (rect.width && rect.height) right = Math.max(right, rect.right);
  }
  right = Math.min(box.right, right + 16);
  return {x: box.left, y: box.top, width: right - box.left, height: box.height};
}"""


# Lab 4 scrolls the notebook inside .jp-WindowedPanel-outer: scroll it to the top (first cell active) and say how
# much taller than the view its cells are, so the viewport can be stretched to show the whole notebook.
NOTEBOOK_TO_TOP = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (panel && panel.content) panel.content.activeCellIndex = 0;
  const outer = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
  if (!outer) return 0;
  outer.scrollTop = 0;
  const cells = outer.querySelectorAll('.jp-Cell');
  if (!cells.length) return 0;
  const bottom = cells[cells.length - 1].getBoundingClientRect().bottom - outer.getBoundingClientRect().top;
  return Math.max(0, Math.ceil(bottom + 16 - outer.clientHeight));
}"""


def copy_to_readme(pictures: list[Path]) -> None:
    """Copy pictures of a run that passed into the README's folder, where BERTVIZ_LAB_SCREENSHOTS names one."""
    folder = os.environ.get(README_IMAGES_ENV)
    if not folder:
        return
    destination = Path(folder) if Path(folder).is_absolute() else REPO / folder
    destination.mkdir(parents=True, exist_ok=True)
    for picture in pictures:
        shutil.copyfile(picture, destination / picture.name)


def strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)


# ------------------------------------------------------------------------------------------------------------
# Static copies and the kernel, as the page holds them.

# The static copies (text/html holding data-bvl-static) in the current notebook's model: what a save writes.
MODEL_STATIC_COPIES = """() => {
  const cells = window.jupyterapp.shell.currentWidget.context.model.cells;
  const found = [];
  for (let i = 0; i < cells.length; i++) {
    const outputs = cells.get(i).outputs;
    if (!outputs) continue;
    for (let j = 0; j < outputs.length; j++) {
      const data = outputs.get(j).data || {};
      const html = Array.isArray(data['text/html']) ? data['text/html'].join('') : data['text/html'];
      if (typeof html === 'string' && html.includes('data-bvl-static=')) found.push(html);
    }
  }
  return found;
}"""

# True once the current notebook has no unsaved change (after docmanager:save, the file holds the model).
NOTEBOOK_SAVED = "() => { const w = window.jupyterapp.shell.currentWidget; return !!w && !w.context.model.dirty; }"

# Run `code` in the current notebook's kernel, outside any cell, and return what it printed.
KERNEL_PRINTS = """async (code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const future = kernel.requestExecute({code: code, silent: false, store_history: false});
  let text = '';
  future.onIOPub = (msg) => { if (msg.header.msg_type === 'stream') text += msg.content.text; };
  await future.done;
  return text;
}"""

# The live heatmap as its view describes it (data-title) and the text of the figure it shows, for every live one.
LIVE_HEATMAPS = """() => [...document.querySelectorAll('.jp-OutputArea-output .bvl-heatmap-view')]
  .filter((view) => view.offsetParent !== null)
  .map((view) => {
    const svg = view.querySelector('svg');
    return {title: view.dataset.title || '', text: svg ? svg.textContent.replace(/\\s+/g, ' ').trim() : ''};
  })"""

# What a live panel shows about its kernel: the notice line, and its controls (disabled or not).
KERNEL_NOTICE = """() => {
  const panel = [...document.querySelectorAll('.jp-OutputArea-output .bvl-panel')]
    .find((p) => p.offsetParent !== null && !p.parentElement.closest('.bvl-panel'));
  if (!panel) return null;
  const notices = [...panel.querySelectorAll(':scope > .bvl-kernel-notice')];
  const controls = [...panel.querySelectorAll('select, input, button, textarea')];
  return {notices: notices.map((n) => ({text: n.textContent, role: n.getAttribute('role'),
                                        visible: n.offsetParent !== null && n.getBoundingClientRect().height > 0})),
          gone: panel.classList.contains('bvl-kernel-gone'), controls: controls.length,
          disabled: controls.filter((c) => c.disabled).length,
          enabled: controls.filter((c) => !c.disabled && !c.closest('[data-bvl-local]'))
            .map((c) => c.outerHTML.slice(0, 120))};
}"""


def live_heatmap_shows(page: Any, title_part: str, text_part: str = "", timeout_ms: int = 120_000) -> dict:
    """Wait until a live heatmap's title names `title_part` and its figure holds `text_part`; return what it shows."""
    handle = page.wait_for_function(
        """([title, text]) => {
          const views = (""" + LIVE_HEATMAPS + """)();
          return views.find((v) => v.title.includes(title) && v.text.includes(text)) || false;
        }""", arg=[title_part, text_part], timeout=timeout_ms, polling=250)
    return handle.json_value()


THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}


def set_theme(page: Any, theme: str, timeout_ms: int = 30_000) -> None:
    """Switch JupyterLab to the "light" or "dark" theme and wait until the page says it is in force."""
    page.evaluate("(name) => window.jupyterapp.commands.execute('apputils:change-theme', {theme: name})",
                  THEMES[theme])
    page.wait_for_function("(light) => document.body.dataset.jpThemeLight === light",
                           arg="true" if theme == "light" else "false", timeout=timeout_ms, polling=200)
    # JupyterLab covers the page with its splash while it swaps the stylesheets: a screenshot waits until it is gone
    page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=timeout_ms)


def kernel_prints(page: Any, code: str) -> str:
    """What `code` prints when the page's kernel runs it (no cell, no history)."""
    return page.evaluate(KERNEL_PRINTS, code)


# Save the current notebook and wait for the save to finish (at most 10 s, so that a dialog cannot hang the test).
SAVE = """async () => {
  const saved = window.jupyterapp.commands.execute('docmanager:save');
  await Promise.race([saved, new Promise((resolve) => setTimeout(resolve, 10000))]);
}"""


def save_notebook(page: Any, timeout_ms: int = 30_000) -> None:
    """Save the current notebook until the model holds no unsaved change: an output that arrives while a save is
    under way (a static copy following the last draw) makes the model dirty again, and then it is saved again, as a
    person would press Ctrl+S again."""
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        page.evaluate(SAVE)
        if page.evaluate(NOTEBOOK_SAVED):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the notebook still had unsaved changes {timeout_ms / 1000:g} s after its first save")


def saved_static_copies(notebook: Path) -> list[str]:
    """The text/html of every static copy in a notebook file, in order."""
    import nbformat

    node = nbformat.read(notebook, as_version=4)
    return [output["data"]["text/html"] for cell in node.cells if cell.cell_type == "code"
            for output in cell.get("outputs", []) if "data-bvl-static=" in output.get("data", {}).get("text/html", "")]


# ------------------------------------------------------------------------------------------------------------
# A notebook of the tests' own, opened and run as a person would.
OPEN_TIMEOUT_MS = 120_000


def write_notebook(server: LabServer, name: str, cells: list[str]) -> str:
    """A notebook of code cells in the server's notebooks/ folder; its path as Lab names it."""
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, server.root / "notebooks" / name)
    return f"notebooks/{name}"


def open_notebook(page: Any, server: LabServer, path: str, app: str = "lab", timeout_ms: int = OPEN_TIMEOUT_MS) -> None:
    """Open the notebook in JupyterLab (a fresh workspace) or in Notebook 7 and wait for an idle kernel."""
    where = f"lab/tree/{path}?reset&" if app == "lab" else f"notebooks/{path}?"
    page.goto(f"{server.url}/{where}token={server.token}", wait_until="domcontentloaded")
    page.wait_for_function(KERNEL_READY, arg=path, timeout=timeout_ms, polling=250)


def reload_notebook(page: Any, path: str, timeout_ms: int = OPEN_TIMEOUT_MS) -> None:
    """Reload the page (the kernel lives on) and wait until the notebook is back on its idle kernel."""
    page.reload(wait_until="domcontentloaded")
    page.wait_for_function(KERNEL_READY, arg=path, timeout=timeout_ms, polling=250)


def run_all(page: Any, timeout_ms: int = OPEN_TIMEOUT_MS) -> list[dict]:
    """Run every cell and wait until each shows its count; a cell that failed, or one that never finished, is named
    with its error. The cells as CELL_REPORT gives them."""
    page.evaluate(RUN_ALL)
    try:
        state = page.wait_for_function(RUN_STATE, timeout=timeout_ms, polling=500).json_value()
    except PlaywrightError as error:  # a timeout: say which cells never finished
        waiting = [f"[{c['index']}] {c['source']!r}" for c in page.evaluate(CELL_REPORT)
                   if c["type"] == "code" and c["count"] is None]
        raise AssertionError(f"run-all did not finish in {timeout_ms / 1000:.0f} s; cells without a count: "
                             f"{waiting}\n{error}") from None
    cells = page.evaluate(CELL_REPORT)
    errors = [f"cell [{c['index']}] {c['source']!r}:\n{strip_ansi(e)}" for c in cells for e in c["errors"]]
    assert state == "done" and not errors, "a cell failed in the kernel:\n" + "\n\n".join(errors)
    return cells


def assert_no_error_outputs(page: Any, cells: list[dict], what: str = "the notebook") -> None:
    """Every code cell ran and the page shows no error (traceback, error output, widget that failed to render)."""
    missing = [c["index"] for c in cells if c["type"] == "code" and c["count"] is None]
    assert not missing, f"{what}: code cells without an execution count: {missing}"
    shown = page.evaluate(DOM_ERRORS)
    assert not shown, f"{what}: the page shows errors:\n" + "\n".join(strip_ansi(s) for s in shown)


@dataclass
class Opened:
    """A notebook opened and run: its path as Lab names it, its cells (CELL_REPORT) and how long each part took."""

    path: str
    cells: list[dict]
    timings: dict[str, float]


def open_and_run(page: Any, server: LabServer, name: str, cells: list[str] | None = None, app: str = "lab",
                 timeout_ms: int = OPEN_TIMEOUT_MS, theme: str | None = None) -> Opened:
    """Write `cells` as notebooks/NAME (None: the server's copy of the project's notebook NAME), open it in
    JupyterLab or Notebook 7 ("notebook7"), in `theme` if one is named, run every cell and check that none failed
    and the page shows no error; what a cell printed on stderr is shown under -s."""
    path = write_notebook(server, name, cells) if cells is not None else f"notebooks/{name}"
    started = time.monotonic()
    open_notebook(page, server, path, app, timeout_ms)
    if theme is not None:
        set_theme(page, theme, timeout_ms)
    opened = time.monotonic()
    report = run_all(page, timeout_ms)
    timings = {"open": opened - started, "run": time.monotonic() - opened}
    assert_no_error_outputs(page, report, name)
    for cell in report:  # warnings are allowed, but shown
        for text in cell["stderr"]:
            print(f"\n{name} cell [{cell['index']}] stderr: {strip_ansi(text)[:500]}")
    return Opened(path, report, timings)


# ------------------------------------------------------------------------------------------------------------
# A notebook checked step by step: every failed check is kept, so one run reports everything broken.
DRAW_TIMEOUT_MS = 30_000

# Console errors that are not ours. Each entry: (regex on the message text, why it is harmless). None seen so far
# with JupyterLab 4.6 / ipywidgets 8.1 / anywidget 0.11: every console error fails the test.
KNOWN_CONSOLE_NOISE: list[tuple[re.Pattern[str], str]] = []


class Run:
    """One opened notebook: its page, what its console said, failed checks, and pictures to keep."""

    def __init__(self, page: Any, name: str) -> None:
        self.page, self.name = page, name
        self.console: list[str] = []
        self.sockets: list[str] = []
        self.failures: list[str] = []
        self.pictures: dict[str, Any] = {}  # README picture name -> locator of the output to photograph
        self.timings: dict[str, float] = {}
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.console.append(f"pageerror: {error}"))
        page.on("websocket", lambda socket: self.sockets.append(socket.url))

    def _console(self, message: Any) -> None:
        if message.type != "error":
            return
        text = message.text
        if any(pattern.search(text) for pattern, _ in KNOWN_CONSOLE_NOISE):
            return
        location = message.location or {}
        self.console.append(f"console.error: {text} ({location.get('url', '')}:{location.get('lineNumber', '')})")

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[None]:
        """One check; a failure is kept and the next checks still run, so one run reports everything broken."""
        try:
            yield
        except (AssertionError, PlaywrightError) as error:
            message = str(error).strip().splitlines()
            self.failures.append(f"{what}: " + "\n    ".join(message[:6]))

    def outputs(self, selector: str) -> Any:
        """Output areas (one per output) that contain `selector`."""
        return self.page.locator(".jp-OutputArea-output").filter(has=self.page.locator(selector))


def wait_for(run: Run, what: str, condition: Callable[[], Any], timeout_s: float = DRAW_TIMEOUT_MS / 1000) -> Any:
    """Poll a Python-side condition over the page (for conditions across several evaluate calls)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} (waited {timeout_s:.0f} s)")
        run.page.wait_for_timeout(250)
