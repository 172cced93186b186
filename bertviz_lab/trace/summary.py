"""A torchinfo-style table of one traced forward pass: module, class, output shape, parameters, trainable."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bertviz_lab.trace.shapes import format_specs

if TYPE_CHECKING:
    from bertviz_lab.trace.hooks import Trace
    from bertviz_lab.trace.records import Call

HEADERS = ("Module", "Class", "Output shape", "Parameters", "Trainable")


@dataclass
class SummaryRow:
    """One module call."""

    depth: int
    module: str
    class_name: str
    output_shape: str
    num_params: int
    trainable: str  # "yes", "no", "partial", or "-" without parameters
    tied: bool  # shares a parameter with a module outside it

    def cells(self) -> tuple[str, str, str, str, str]:
        """The row as text cells, the module indented by its call depth."""
        params = f"{self.num_params:,}" + (" (tied)" if self.tied else "")
        return ("  " * self.depth + self.module, self.class_name, self.output_shape, params, self.trainable)


class Summary:
    """Rows plus totals (tied weights counted once); str() is a text table, notebooks show an HTML table."""

    def __init__(self, model_class: str, rows: list[SummaryRow], total_params: int, trainable_params: int) -> None:
        self.model_class, self.rows = model_class, rows
        self.total_params, self.trainable_params = total_params, trainable_params

    @property
    def non_trainable_params(self) -> int:
        return self.total_params - self.trainable_params

    def _totals(self) -> list[str]:
        return [f"Total params: {self.total_params:,} (tied weights counted once)",
                f"Trainable params: {self.trainable_params:,}",
                f"Non-trainable params: {self.non_trainable_params:,}"]

    def __str__(self) -> str:
        table = [HEADERS, *(row.cells() for row in self.rows)]
        widths = [max(len(r[i]) for r in table) for i in range(len(HEADERS))]
        right = {3}  # numbers align right

        def line(cells: tuple[str, ...]) -> str:
            padded = (c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
            return "  ".join(padded).rstrip()

        rule = "=" * max(len(line(r)) for r in table)
        return "\n".join([rule, line(HEADERS), rule, *(line(r) for r in table[1:]), rule, *self._totals(), rule])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th>{esc(h)}</th>" for h in HEADERS)
        body = []
        for row in self.rows:
            module, *rest = row.cells()
            cells = [f'<td style="padding-left:{0.3 + row.depth}em;text-align:left">{esc(module.strip())}</td>']
            cells += [f'<td style="text-align:{"right" if i == 2 else "left"}">{esc(c)}</td>'
                      for i, c in enumerate(rest)]
            body.append("<tr>" + "".join(cells) + "</tr>")
        foot = "<br/>".join(esc(t) for t in self._totals())
        return (f'<table class="bertviz-summary"><caption>{esc(self.model_class)}</caption>'
                f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody>"
                f'<tfoot><tr><td colspan="{len(HEADERS)}" style="text-align:left">{foot}</td></tr></tfoot></table>')


    def collapsible_html(self, open_depth: int = 0) -> str:
        """The table as rows that fold: each module with submodules is a <details> (works without scripts), open
        down to `open_depth`; the model and its top-level modules show, the rest one click away."""
        esc = html.escape

        def cells(values: tuple[str, ...], depth: int, bold: bool = False) -> str:
            weight = " bvl-pb" if bold else ""
            first = f'<span class="bvl-pc bvl-pc0{weight}" style="padding-left:{0.4 + depth}em">{esc(values[0])}</span>'
            return first + "".join(f'<span class="bvl-pc bvl-pc{i}{weight}">{esc(value)}</span>'
                                   for i, value in enumerate(values[1:], start=1))

        def block(start: int, end: int) -> list[str]:
            """Rows start..end-1 (siblings and their descendants, in call order) as HTML."""
            out, i = [], start
            while i < end:
                row, j = self.rows[i], i + 1
                while j < end and self.rows[j].depth > row.depth:
                    j += 1
                module, *rest = row.cells()
                line = cells((module.strip(), *rest), row.depth)
                if j > i + 1:
                    opened = ' open=""' if row.depth < open_depth else ""
                    out.append(f'<details class="bvl-param-group" data-depth="{row.depth}"{opened}>'
                               f'<summary class="bvl-param-row">{line}</summary>{"".join(block(i + 1, j))}</details>')
                else:
                    out.append(f'<div class="bvl-param-row">{line}</div>')
                i = j
            return out

        roots, i = [], 0
        while i < len(self.rows):  # the model's own row stays visible, its top-level modules fold
            row, j = self.rows[i], i + 1
            while j < len(self.rows) and self.rows[j].depth > row.depth:
                j += 1
            module, *rest = row.cells()
            roots.append(f'<div class="bvl-param-row bvl-param-root">{cells((module.strip(), *rest), row.depth, True)}'
                         "</div>")
            roots.extend(block(i + 1, j))
            i = j
        head = f'<div class="bvl-param-head">{cells(HEADERS, 0, bold=True)}</div>'
        foot = "<br/>".join(esc(t) for t in self._totals())
        return (f'<div class="bvl-param-table"><style>{PARAM_TABLE_STYLE}</style>'
                f'<div class="bvl-param-title">{esc(self.model_class)}</div>{head}{"".join(roots)}'
                f'<div class="bvl-param-totals">{foot}</div></div>')


# The table's look, once per table instead of on every cell: it travels with the HTML wherever that is shown.
PARAM_TABLE_STYLE = (
    ".bvl-param-table{font-size:13px;overflow-x:auto}"
    ".bvl-param-title{font-weight:bold;margin:2px 0}"
    ".bvl-param-row,.bvl-param-head{white-space:nowrap}"
    "div.bvl-param-row,.bvl-param-head{padding-left:1.1em}"
    "summary.bvl-param-row{cursor:pointer}"
    ".bvl-param-head{border-bottom:1px solid var(--jp-border-color2,#ccc)}"
    ".bvl-param-totals{border-top:1px solid var(--jp-border-color2,#ccc);margin-top:2px;padding:2px 6px}"
    ".bvl-pc{display:inline-block;box-sizing:border-box;padding:1px 6px;vertical-align:top}"
    ".bvl-pc0{width:24em;overflow:hidden;text-overflow:ellipsis}.bvl-pc1{width:17em}.bvl-pc2{width:15em}"
    ".bvl-pc3{width:12em;text-align:right}.bvl-pc4{width:6em}.bvl-pb{font-weight:bold}"
)


def _trainable(call: "Call") -> str:
    if not call.num_params:
        return "-"
    if call.trainable_params == call.num_params:
        return "yes"
    return "no" if call.trainable_params == 0 else "partial"


def summarize(trace: "Trace", depth: int | None = None, pass_index: int = 0) -> Summary:
    """The summary of one forward pass (the first by default); depth limits the call nesting shown."""
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
        raise ValueError(f"depth must be a non-negative int or None (everything), got {depth!r}.")
    calls = [c for c in trace.calls if c.pass_index == pass_index]
    if not calls:
        raise ValueError("the trace holds no module calls: trace with shapes=True and run a forward pass inside it.")
    by_index = {c.index: c for c in calls}
    rows = []
    for call in calls:
        if depth is not None and call.depth > depth:
            continue
        parent = by_index.get(call.parent) if call.parent is not None else None
        base = parent.path if parent is not None else ""
        inside = base and call.path.startswith(base + ".")
        name = call.path[len(base) + 1:] if inside else (call.path or call.class_name)
        rows.append(SummaryRow(call.depth, name, call.class_name, format_specs(call.outputs) if call.outputs is not None
                               else "?", call.num_params, _trainable(call), call.shares_params))
    tops = [c for c in calls if c.parent is None]
    return Summary(trace.model_class, rows, sum(c.num_params for c in tops), sum(c.trainable_params for c in tops))
