// A live panel's invisible link (views/panel_link.py) to the static copy of itself in the notebook and to its kernel.
//
// - While its view is on screen it hides the static copy with its id (the output just above the live view), so a
//   notebook shows one figure: the static copy where no kernel or widget state is there to draw the live one.
// - In every front end attached (the first page, a reloaded one, a second tab, Notebook 7) it writes the copy's
//   current HTML into that front end's notebook model, so a save there stores the figure on screen: the kernel's
//   display-id updates reach only the page that ran the cell. The HTML arrives in messages (copyMessage).
// - While the panel has no kernel to talk to, it says so in one line at the top of the panel and disables the
//   controls that need one (those inside a `data-bvl-local` element work without a kernel and stay enabled).
// - It names the panel's controls that ipywidgets leaves nameless to assistive technology (nameControls).
// Where a front end lacks what this needs (no notebook model, no session), that part does nothing and never throws.

export const CONTROLS = "select, input, button, textarea";
export const NOTICES = {
  none: "The kernel is not running: figures show their last state; run the cell again to change them.",
  restarted: "The kernel restarted: figures show their last state; run the cell again to change them.",
};

// The id as it appears in the copy's data-bvl-static attribute (a UUID: hex digits and dashes only).
export function staticId(value) {
  return String(value || "").replace(/[^0-9a-f-]/gi, "");
}

// The text/html of an output model, or null (nbformat may hold it as a list of lines).
function htmlOf(output) {
  const html = output && output.data ? output.data["text/html"] : undefined;
  if (Array.isArray(html)) return html.join("");
  return typeof html === "string" ? html : null;
}

function isList(list) {
  return !!list && typeof list.get === "function" && typeof list.length === "number";
}

// Replace, in a notebook model's cells, every output holding the static copy `id` by the same output holding `html`
// (only where it differs); returns how many outputs were replaced.
export function writeStaticCopy(cells, id, html) {
  if (!isList(cells) || !id || !html) return 0;
  const marker = `data-bvl-static="${id}"`;
  let replaced = 0;
  for (let i = 0; i < cells.length; i++) {
    const outputs = cells.get(i) && cells.get(i).outputs;
    if (!isList(outputs) || typeof outputs.set !== "function") continue;
    for (let j = 0; j < outputs.length; j++) {
      const output = outputs.get(j);
      const current = htmlOf(output);
      if (current === null || !current.includes(marker) || current === html) continue;
      if (typeof output.toJSON !== "function") continue;
      const json = output.toJSON();
      outputs.set(j, { ...json, data: { ...json.data, "text/html": html } });
      replaced++;
    }
  }
  return replaced;
}

// The notebook model's cells of the front end that owns `manager` (JupyterLab, Notebook 7), or null.
function notebookCells(manager) {
  const cells = manager && manager.context && manager.context.model && manager.context.model.cells;
  return isList(cells) ? cells : null;
}

// Why the panel cannot reach its kernel: "none" (shut down, dead, another kernel, not connected), "restarted" (its
// widgets are gone from the kernel), or "" while it can. `drawnWith` is the id of the kernel the view first saw.
export function kernelProblem(sessionContext, drawnWith, disconnected) {
  if (disconnected) return "restarted";
  if (!sessionContext) return "";
  const session = sessionContext.session;
  const kernel = session && session.kernel;
  if (sessionContext.isDisposed || !kernel) return "none";
  if (kernel.status === "dead" || kernel.connectionStatus === "disconnected") return "none";
  if (drawnWith && kernel.id && kernel.id !== drawnWith) return "none";
  return "";
}

// Disable the controls in `panel` that need the kernel; returns the ones this disabled, to enable again later.
export function disableControls(panel) {
  const disabled = [];
  for (const control of panel.querySelectorAll(CONTROLS)) {
    if (control.disabled || control.closest("[data-bvl-local]")) continue;
    control.disabled = true;
    disabled.push(control);
  }
  return disabled;
}

// Show (problem "none" or "restarted") or remove (problem "") the one-line notice and the panel's state class.
export function showNotice(panel, problem) {
  let notice = [...panel.children].find((child) => child.classList.contains("bvl-kernel-notice"));
  panel.classList.toggle("bvl-kernel-gone", !!problem);
  if (!problem) {
    if (notice) notice.remove();
    return;
  }
  if (!notice) {
    notice = document.createElement("div");
    notice.className = "bvl-kernel-notice";
    notice.setAttribute("role", "status");
    panel.prepend(notice);
  }
  notice.textContent = NOTICES[problem];
}

// ipywidgets gives a slider's handle (role slider) no name, and a control labelled beside it (panels/controls.py:
// labelled) only a hidden label of its own: each takes the text the page shows as its label, as aria-label. Returns
// how many controls were named.
export function nameControls(panel) {
  let named = 0;
  const name = (control, label) => {
    const text = label ? label.textContent.trim() : "";
    if (!text) return;
    control.setAttribute("aria-label", text);
    named++;
  };
  for (const handle of panel.querySelectorAll('[role="slider"]:not([aria-label])')) {
    const slider = handle.closest(".widget-slider");
    name(handle, slider && slider.querySelector(":scope > .widget-label"));
  }
  for (const control of panel.querySelectorAll("select:not([aria-label]), input:not([aria-label])")) {
    const widget = control.closest(".jupyter-widgets");
    const own = widget && widget.querySelector(":scope > label.widget-label");
    if (!widget || (own && own.textContent.trim())) continue;
    const beside = widget.previousElementSibling;
    if (beside && beside.classList.contains("widget-label")) name(control, beside);
  }
  return named;
}

// Name the controls of the panel around `el` now and whenever its content changes (a view made later, a redraw);
// returns the cleanup.
function watchNames(el) {
  let observer = null, frame = 0, disposed = false;
  const start = () => {
    frame = 0;
    if (disposed) return;
    const panel = el.closest(".bvl-panel");
    if (!panel) {  // the view is drawn before the panel's box attaches it to the page
      frame = requestAnimationFrame(start);
      return;
    }
    nameControls(panel);
    let pending = false;
    observer = new MutationObserver(() => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; nameControls(panel); });
    });
    observer.observe(panel, { childList: true, subtree: true });
  };
  start();
  return () => {
    disposed = true;
    if (frame) cancelAnimationFrame(frame);
    if (observer) observer.disconnect();
  };
}

function connect(signal, slot) {
  if (signal && typeof signal.connect === "function") {
    signal.connect(slot);
    return () => signal.disconnect(slot);
  }
  return () => {};
}

// Follow the kernel of the page's session and mark the panel around `el` while it has none; returns the cleanup.
function watchKernel(model, el) {
  const manager = model.widget_manager;
  const sessionContext = manager && manager.context ? manager.context.sessionContext : null;
  const kernelNow = () => (sessionContext && sessionContext.session && sessionContext.session.kernel) || null;
  const drawnWith = kernelNow() ? kernelNow().id : "";
  let panel = null, disabled = [], problem = "", frame = 0, disposed = false;
  const update = () => {
    frame = 0;
    if (disposed) return;
    panel = panel || el.closest(".bvl-panel");
    if (!panel) {  // the view is drawn before the panel's box attaches it to the page
      frame = requestAnimationFrame(update);
      return;
    }
    const now = kernelProblem(sessionContext, drawnWith, panel.classList.contains("jupyter-widgets-disconnected"));
    if (now === problem) return;
    problem = now;
    showNotice(panel, problem);
    if (problem && !disabled.length) disabled = disableControls(panel);
    if (!problem) {
      for (const control of disabled) control.disabled = false;
      disabled = [];
    }
  };
  const soon = () => { if (!frame && !disposed) frame = requestAnimationFrame(update); };
  const signals = sessionContext
    ? [sessionContext.statusChanged, sessionContext.kernelChanged, sessionContext.sessionChanged,
       sessionContext.connectionStatusChanged].map((signal) => connect(signal, soon))
    : [];
  model.on("comm_live_update", soon);
  update();
  return () => {
    disposed = true;
    if (frame) cancelAnimationFrame(frame);
    for (const release of signals) release();
    model.off("comm_live_update", soon);
    if (panel) showNotice(panel, "");
    for (const control of disabled) control.disabled = false;
  };
}

// How long the notebook model waits after the copy's last change before it takes it: writing the copy re-renders
// its (hidden) output, which must not compete with the figure being drawn. A save takes the copy at once.
export const QUIET_MS = 1000;

// The copy's HTML comes as a message, never as synced state: a notebook that stores its widgets' state (nbconvert
// --execute) would hold every figure twice. A front end asks for it when it attaches; the kernel sends it to every
// front end when the figure changes.
export function copyMessage(message) {
  return message && message.type === "html" && typeof message.html === "string" ? message.html : null;
}

// Once per widget model and front end, whether or not a view is on screen: keep this page's notebook model in step,
// a moment after the figure settles and always at the start of a save.
function initialize({ model }) {
  let html = "";
  const write = () => {
    try {
      writeStaticCopy(notebookCells(model.widget_manager), staticId(model.get("static_id")), html);
    } catch (error) {  // a front end whose notebook model differs: the display-id updates are all there is
      console.debug("bertviz_lab: the static copy was not written into the notebook", error);
    }
  };
  let timer = 0;
  const later = () => {
    clearTimeout(timer);
    timer = setTimeout(write, QUIET_MS);
  };
  const onSave = (_, state) => {
    if (state !== "started") return;
    clearTimeout(timer);
    write();
  };
  const onMessage = (message) => {
    const received = copyMessage(message);
    if (received === null || received === html) return;
    html = received;
    later();
  };
  const context = model.widget_manager && model.widget_manager.context;
  const stopSaving = connect(context && context.saveState, onSave);
  model.on("msg:custom", onMessage);
  model.send({ type: "html?" });
  return () => {
    clearTimeout(timer);
    stopSaving();
    model.off("msg:custom", onMessage);
  };
}

function render({ model, el }) {
  const id = staticId(model.get("static_id"));
  const style = document.createElement("style");
  style.dataset.bvlHides = id;
  style.textContent =
    `.jp-OutputArea-child:has([data-bvl-static="${id}"]), .output_area:has([data-bvl-static="${id}"]),` +
    ` [data-bvl-static="${id}"] { display: none !important; }`;
  document.head.appendChild(style);
  el.classList.add("bvl-panel-link");
  let stopWatching = () => {};
  try {
    stopWatching = watchKernel(model, el);
  } catch (error) {
    console.debug("bertviz_lab: the kernel is not watched here", error);
  }
  const stopNaming = watchNames(el);
  return () => {
    style.remove();
    stopWatching();
    stopNaming();
  };
}

export default { initialize, render };
