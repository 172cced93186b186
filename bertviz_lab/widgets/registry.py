"""The views, each described once: the workbench's tabs, the attention panel's switcher and toolbars,
`%bert_inspect --view`, the bertviz-style API (`bertviz_lab.views`) and the documentation's tables all read
`REGISTRY`, so a view's name, label, controls and keys are written in one place.

This module imports nothing heavy: the magic reads it when `%load_ext bertviz_lab` registers it.
"""

from __future__ import annotations

from dataclasses import dataclass

# where a view lives: the attention panel's switcher, a workbench tab, or the Causal tab's switcher of tools
ATTENTION, TAB, CAUSAL = "attention", "tab", "causal"
# the attention panel's views, by name (code refers to a view through these)
HEATMAP, HEAD_VIEW, MODEL_VIEW, NEURON_VIEW, SALIENCY = "heatmap", "head view", "model view", "neuron view", "saliency"
# the Causal tab's tools, by name
PATCHING, LOGIT_LENS, FFN_NEURONS = "patching", "logit lens", "ffn neurons"
CELL_KEYS = ("arrows move between cells (Home/End: a row's ends, PageUp/PageDown: the first/last row), hover or focus "
             "shows a cell's exact value · **Enter**/**Space** opens it")


@dataclass(frozen=True)
class View:
    """One view: its name in code (`AttentionPanel(view=...)`, `Workbench(tab=...)`), what the switcher or the tab
    shows, what it draws (one line, for the docs), where it lives, its `%bert_inspect --view` name (None where the
    magic does not open it alone), the attention panel's controls its toolbar shows (in order), its keys (the front
    end implements them; the docs table reads them here), whether `bertviz_lab.views` draws it from attentions alone
    (`AttentionMapsPanel`), and for a tab whether it is there only on request (the Corpus tab, with a corpus)."""

    name: str
    label: str
    summary: str
    place: str
    magic: str | None = None
    controls: tuple[str, ...] = ()
    keys: str = ""
    bertviz: bool = False
    on_request: bool = False

    @property
    def attribute(self) -> str:
        """The attention panel's (and the workbench's) attribute holding the view's widget or panel."""
        return self.name.replace(" ", "_")


REGISTRY: tuple[View, ...] = (
    View(HEATMAP, "heatmap", "one head, the mean of heads or rollout as a query × key matrix", ATTENTION,
         controls=("layer", "head", "aggregation", "direction", "scale", "special"),
         keys="arrows move the cell (the window follows) · **+**/**-** zoom around it · **Enter**/**Space** select "
              "it · **Esc** shows every token", bertviz=True),
    View(HEAD_VIEW, "head view", "lines from each query to its keys, one colour per head", ATTENTION,
         magic="head", controls=("layer", "direction", "hide_special"),
         keys="↑/↓ (Home, End, PageUp/PageDown) select the query above or below; the window follows", bertviz=True),
    View(MODEL_VIEW, "model view", "every layer × head under one colour scale; heads can be switched off",
         ATTENTION, magic="model", controls=("special",),
         keys="arrows move between heads (Home/End: a layer's first/last head, PageUp/PageDown: first/last layer) · "
              "**Enter** opens the head as the heatmap, the focus following into its cells · **Space** (or "
              "Shift+Enter) switches it off or on again · **Esc** switches every head on", bertviz=True),
    View(NEURON_VIEW, "neuron view", "q against every key's k inside one head", ATTENTION, magic="neuron",
         controls=("layer", "head", "query", "hide_special"),
         keys="↑/↓ move along the keys (PageUp/PageDown ten, Home/End to the ends; a long text's window of 48 keys "
              "follows), ←/→ along a key's dimensions (q, k and q ⊙ k read out where hover shows them) · **Enter** "
              "makes the key the query · **Esc** goes back to the query"),
    View(SALIENCY, "saliency", "each token's share of a prediction (integrated gradients, gradient × input)",
         ATTENTION, magic="saliency"),
    View("attention", "Attention", "the attention panel, on its heatmap", TAB, magic="attention"),
    View("masking", "Masking", "what the MLM objective masks, and the model's predictions for it", TAB,
         magic="masking",
         keys="Tab to the chips, arrows/Home/End move between them, **Space**/**Enter** masks or unmasks a token"),
    View("architecture", "Architecture",
         "the model as a diagram (mermaid or graphviz) with the shapes of one run, and its parameters", TAB,
         magic="architecture"),
    View("training", "Training", "a training run with live MLM/NSP loss curves", TAB, magic="training",
         keys="(loss curves) ←/→ move a step cursor (Home/End, PageUp/PageDown ten steps), ↑/↓ change chart; the "
              "values show as on hover · **Esc** hides them"),
    View("device", "Device", "where the model runs: CPU, CUDA or MPS", TAB, magic="device"),
    View("causal", "Causal", "activation patching, the logit lens and FFN neurons on a clean and a corrupted text",
         TAB, magic="causal"),
    View("corpus", "Corpus", "an analysed corpus: head atlas, nearest contexts, query-key maps", TAB,
         on_request=True),
    View(PATCHING, "Patching", "the metric with one layer's state (or one head) at one position patched from the "
         "clean run into the corrupted one: ROME's layer × token map, and a layer × head grid", CAUSAL,
         keys=CELL_KEYS + " in the attention panel below (its layer and head)"),
    View(LOGIT_LENS, "Logit lens", "what the masked-LM head reads after every layer at one position: top-k tokens "
         "and their probabilities", CAUSAL, keys=CELL_KEYS + ": follows that token through the layers"),
    View(FFN_NEURONS, "FFN neurons", "the feed-forward neurons most active at a token, one neuron over the text, and "
         "the corpus's texts that activate it most", CAUSAL, keys=CELL_KEYS + ": a neuron becomes the one shown"),
)

ALL = "all"  # %bert_inspect --view all: the whole workbench


def views(place: str) -> tuple[View, ...]:
    """The views of one place, in their order on screen."""
    return tuple(view for view in REGISTRY if view.place == place)


def view(name: str, place: str) -> View:
    """The view called `name` in `place`; an unknown name is a one-line error listing the known ones."""
    for candidate in views(place):
        if candidate.name == name:
            return candidate
    known = ", ".join(repr(v.name) for v in views(place))
    what = {ATTENTION: "view", TAB: "tab", CAUSAL: "tool"}[place]
    raise ValueError(f"{what} must be one of {known}; got {name!r}.")


def magic_names() -> tuple[str, ...]:
    """What `%bert_inspect --view` accepts: the tabs, the attention panel's views, and "all"."""
    return (*(v.magic for place in (TAB, ATTENTION) for v in views(place) if v.magic is not None), ALL)


def by_magic_name(name: str) -> View | None:
    """The view `%bert_inspect --view name` opens (None for "all"); an unknown name is a one-line error."""
    if name == ALL:
        return None
    for candidate in REGISTRY:
        if candidate.magic == name:
            return candidate
    raise ValueError(f"view must be one of {', '.join(magic_names())}; got {name!r}.")


def keys_table() -> str:
    """The docs' keyboard table (Markdown): every view with keys, in registry order."""
    rows = [f"| {v.label} | {v.keys} |" for v in REGISTRY if v.keys]
    return "\n".join(["| view | keys |", "| --- | --- |", *rows])


PLACES = {ATTENTION: "attention panel", TAB: "workbench tab", CAUSAL: "Causal tab"}


def views_table() -> str:
    """The docs' table of views (Markdown): where each lives, its `--view` name, what it draws, its controls."""
    rows = [f"| {v.label} | {PLACES[v.place]} | "
            f"{f'`--view {v.magic}`' if v.magic else '—'} | {v.summary} | {', '.join(v.controls) or '—'} |"
            for v in REGISTRY]
    return "\n".join(["| view | where | `%bert_inspect` | shows | controls |", "| --- | --- | --- | --- | --- |",
                      *rows])
