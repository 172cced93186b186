"""A panel's static copy: an output of its own, just above the live view, that holds the figure as plain HTML/SVG.

Front ends disagree on what to show where no kernel draws a widget: JupyterLab and Notebook 7 prefer the widget view
of a bundle even when its model is gone ("Error displaying widget"), and `nbconvert --execute` keeps only the widget
view. So the figure does not travel inside the widget's bundle but as a display of its own, which every front end,
converter and viewer shows. While the live view is on screen its link (views/panel_link.py) hides that copy, so a
notebook shows one figure.

When the figure changes, at most twice a second (and at the end of the cell that changed it), the copy's new HTML
goes out two ways: through its display id (what
nbclient, `nbconvert --execute` and Voila follow, and the page that ran the cell) and as the link's synced `html`,
which the link writes into the notebook model of every front end attached (a reloaded page, a second tab, Notebook 7:
JupyterLab forgets display ids on reload), so whichever saves the notebook stores the figure on screen.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Callable

from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.panels.controls import lean
from bertviz_lab.widgets.views.front_end import all_css
from bertviz_lab.widgets.views.panel_link import PanelLink

MIN_INTERVAL_S = 0.5  # at most two updates of a copy a second, the last one always sent


class StaticCopy:
    """The static copies of one panel: its HTML (cached until the figure changes) and the outputs that show it."""

    def __init__(self, panel: Any) -> None:
        self.panel = panel
        self.id = str(uuid.uuid4())
        self.handles: list[Any] = []
        self.link: PanelLink | None = None
        self.listeners: list[Callable[[], None]] = []
        self._html: str | None = None
        self._lock = threading.Lock()
        self._sent_at = 0.0
        self._timer: threading.Timer | None = None
        self._flush_after_cell = False  # a post_execute callback is registered to send a pending update

    def html(self) -> str:
        """The panel's static HTML, computed once per change of its figure; a failure is shown, not raised."""
        if self._html is None:
            try:
                self._html = self.panel.static_html()
            except Exception as error:  # a copy that cannot be drawn must not break the live panel
                self._html = (f"<p class='bvl-static-error'>{escape(type(self.panel).__name__)}: the static copy "
                              f"could not be drawn ({escape(error)})</p>")
        return self._html

    def bundle(self) -> dict[str, str]:
        """The mimebundle of the copy: the HTML inside an element the live view can find, and a style that hides
        the widget output after it while that one is empty or says its model is gone (JupyterLab, Notebook 7)."""
        after_me = f'.jp-OutputArea-child:has([data-bvl-static="{self.id}"]) + .jp-OutputArea-child'
        style = (f"<style>{after_me} > .jp-OutputArea-output:not(:has(*)) {{ display: none; }}\n"
                 f"{all_css()}</style>")
        return {"text/html": f'<div class="bvl-static" data-bvl-static="{self.id}">{style}{self.html()}</div>',
                "text/plain": f"{type(self.panel).__name__} (static copy)"}

    def show(self) -> None:
        """Display the copy, then the live panel with its link."""
        from IPython.display import display

        bundle = self.bundle()
        if self.link is None:
            self.link = lean(PanelLink, static_id=self.id, html=bundle["text/html"])
            self.panel.children = (*self.panel.children, self.link)
        self.handles.append(display(bundle, raw=True, display_id=True))
        display(self.panel.widget_bundle(), raw=True)

    def changed(self) -> None:
        """The figure changed: forget the cached HTML, tell listeners, and update the copies on show."""
        self._html = None
        for listener in self.listeners:
            listener()
        if self.handles or self.link is not None:
            self._schedule()

    def close(self) -> None:
        """Stop updating: cancel a pending update, close the link and let go of the outputs and listeners."""
        with self._lock:
            self._cancel_timer()
        link, self.link = self.link, None
        if link is not None:
            link.close()
        self.handles.clear()
        self.listeners.clear()

    def _schedule(self) -> None:
        with self._lock:
            wait = self._sent_at + MIN_INTERVAL_S - time.monotonic()
            if wait <= 0:
                self._sent_at = time.monotonic()
            elif self._timer is None:
                self._timer = threading.Timer(wait, self.flush)
                self._timer.daemon = True
                self._timer.start()
                self._flush_when_the_cell_ends()
                return
            else:
                return
        self._send()

    def flush(self) -> None:
        """Send the current copy to every front end and output that shows it, now."""
        with self._lock:
            self._cancel_timer()
            self._sent_at = time.monotonic()
        self._send()

    def _flush_when_the_cell_ends(self) -> None:
        """Send a pending update when the running cell ends rather than half a second later: it then belongs to
        that cell (an executed notebook keeps each cell's figure, nbconvert waits for nothing after a cell)."""
        try:
            from IPython import get_ipython
        except ImportError:
            return
        shell = get_ipython()
        if shell is None or self._flush_after_cell:  # one callback a copy, however many changes wait
            return

        def flush_once(*_: Any) -> None:
            shell.events.unregister("post_execute", flush_once)
            self._flush_after_cell = False
            if self._timer is not None:
                self.flush()

        self._flush_after_cell = True
        shell.events.register("post_execute", flush_once)

    def _cancel_timer(self) -> None:
        """Forget the pending update (the caller holds the lock)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _send(self) -> None:
        bundle = self.bundle()
        link = self.link
        if link is not None:
            link.html = bundle["text/html"]
        for handle in self.handles:
            handle.update(bundle, raw=True)
