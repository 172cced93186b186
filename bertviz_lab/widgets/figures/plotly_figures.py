"""The numeric figures as plotly figures, for users who compose plotly dashboards: `to_plotly()` on a panel gives a
`plotly.graph_objects.Figure` holding the values its drawing shows (the whole matrix, every step, every token), with
the same colour scale, titles and hover text. The SVG drawing stays the one picture of the workbench; plotly is an
optional extra (`pip install 'bertviz_lab[plotly]'`), loaded only here.

Token axes are drawn at the tokens' positions and labelled with the tokens, because plotly merges equal category
names (a sentence with "the" twice would lose a row)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from bertviz_lab.widgets.figures.attention_data import _BLUES, _RDBU


def require_plotly() -> Any:
    """plotly.graph_objects, or one line naming the install."""
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise ImportError("to_plotly() needs plotly: pip install 'bertviz_lab[plotly]' (or pip install plotly)."
                          ) from None
    return go


def colorscale(stops: Sequence[str]) -> list[list[Any]]:
    """The drawing's colour stops, evenly spaced, as a plotly colorscale."""
    return [[i / (len(stops) - 1), color] for i, color in enumerate(stops)]


def _token_axis(positions: Sequence[int], tokens: Sequence[str], title: str) -> dict[str, Any]:
    return {"title": {"text": title}, "tickmode": "array", "tickvals": list(positions), "ticktext": list(tokens)}


def heatmap_figure(matrix: np.ndarray, row_tokens: Sequence[str], col_tokens: Sequence[str],
                   row_positions: Sequence[int], col_positions: Sequence[int], title: str, note: str = "",
                   ignore_rows: np.ndarray | None = None, ignore_cols: np.ndarray | None = None) -> Any:
    """One attention map: rows the queries (top to bottom), columns the keys, white to dark blue on the linear
    scale the heatmap draws: up to the largest weight, or, where [CLS]/[SEP] are clipped (`ignore_rows`,
    `ignore_cols`), the largest of the others, their cells above it in the top colour. Hover names the query, the key
    and the weight."""
    from bertviz_lab.widgets.figures.attention_data import TOP_CODE, encode_heatmap

    go = require_plotly()
    weights = np.asarray(matrix, dtype=np.float64)
    tokens = np.empty(weights.shape + (2,), dtype=object)
    tokens[..., 0] = np.asarray(list(row_tokens), dtype=object)[:, None]
    tokens[..., 1] = np.asarray(list(col_tokens), dtype=object)[None, :]
    top = encode_heatmap(weights, "linear", ignore_rows, ignore_cols).scale * TOP_CODE or 1.0
    figure = go.Figure(go.Heatmap(
        z=weights, x=list(col_positions), y=list(row_positions), customdata=tokens, zmin=0.0, zmax=top,
        colorscale=colorscale(_BLUES), colorbar={"title": {"text": "attention weight"}},
        hovertemplate="query %{y}·%{customdata[0]}<br>key %{x}·%{customdata[1]}<br>weight %{z:.4f}<extra></extra>"))
    figure.update_layout(title={"text": title + (f"<br><sup>{note}</sup>" if note else "")},
                         xaxis=_token_axis(col_positions, col_tokens, "key"),
                         yaxis={**_token_axis(row_positions, row_tokens, "query"), "autorange": "reversed"})
    return figure


def _dash(pattern: str) -> str:
    """An SVG stroke-dasharray ("5,3") as plotly's dash ("5px,3px"); solid where there is none."""
    return ",".join(f"{part.strip()}px" for part in pattern.split(",")) if pattern else "solid"


def curves_figure(points: Mapping[str, tuple[np.ndarray, np.ndarray]], series: Sequence[tuple],
                  charts: Sequence[tuple[str, str]], title: str, status: str, x_title: str) -> Any:
    """The loss curves' charts, two a row: `series` as the curves name them (chart, key, name, colour, dash,
    marker), each with its points."""
    go = require_plotly()
    from plotly.subplots import make_subplots

    rows = (len(charts) + 1) // 2
    figure = make_subplots(rows=rows, cols=2, subplot_titles=[name for name, _ in charts])
    for chart, key, name, color, dash, marker in series:
        x, y = points[key]
        figure.add_trace(go.Scatter(
            x=np.asarray(x, dtype=np.float64), y=np.asarray(y, dtype=np.float64), name=name,
            mode="lines+markers" if marker else "lines",
            line={"color": color, "dash": _dash(dash)}, marker={"symbol": marker or "circle", "color": color},
            hovertemplate=f"{x_title} %{{x}}<br>{name}: %{{y:.4g}}<extra></extra>"),
            row=chart // 2 + 1, col=chart % 2 + 1)
    for index, (_, y_title) in enumerate(charts):
        figure.update_xaxes(title_text=x_title, row=index // 2 + 1, col=index % 2 + 1)
        figure.update_yaxes(title_text=y_title, row=index // 2 + 1, col=index % 2 + 1)
    figure.update_layout(title={"text": title + (f"<br><sup>{status}</sup>" if status else "")})
    return figure


def saliency_figure(tokens: Sequence[str], scores: np.ndarray, title: str, subtitle: str) -> Any:
    """A token's score as a bar at its position, coloured on the saliency figure's diverging scale (blue below zero,
    white at it, red above, symmetric about it up to the largest |score|)."""
    go = require_plotly()
    values = np.asarray(scores, dtype=np.float64)
    finite = values[np.isfinite(values)]
    limit = float(np.abs(finite).max(initial=0.0)) or 1.0
    positions = list(range(len(tokens)))
    figure = go.Figure(go.Bar(
        x=positions, y=values, customdata=list(tokens),
        marker={"color": values, "colorscale": colorscale(_RDBU), "cmin": -limit, "cmax": limit,
                "colorbar": {"title": {"text": "score"}}},
        hovertemplate="token %{x}·%{customdata}<br>score %{y:.4g}<extra></extra>"))
    figure.update_layout(title={"text": title + (f"<br><sup>{subtitle}</sup>" if subtitle else "")},
                         xaxis=_token_axis(positions, tokens, "token"), yaxis={"title": {"text": "score"}})
    return figure


def atlas_figure(values: np.ndarray, layers: Sequence[int], heads: Sequence[int], queries: np.ndarray, stat_name: str,
                 unit: str, top: float, title: str) -> Any:
    """The head atlas: one cell per layer (rows, top to bottom) and head, white to dark blue on the atlas' scale
    0..top; hover gives the value with its unit and how many queries it averages."""
    go = require_plotly()
    figure = go.Figure(go.Heatmap(
        z=np.asarray(values, dtype=np.float64), x=list(heads), y=list(layers), customdata=np.asarray(queries),
        zmin=0.0, zmax=top, colorscale=colorscale(_BLUES), colorbar={"title": {"text": f"{stat_name} ({unit})"}},
        hovertemplate=(f"layer %{{y}} · head %{{x}}<br>{stat_name}: %{{z:.4g}} {unit}"
                       "<br>over %{customdata:,} queries<extra></extra>")))
    figure.update_layout(title={"text": title}, xaxis={"title": {"text": "head"}, "dtick": 1},
                         yaxis={"title": {"text": "layer"}, "dtick": 1, "autorange": "reversed"})
    return figure


def qk_map_figure(xs: np.ndarray, ys: np.ndarray, is_key: np.ndarray, hover: Sequence[str], colors: Sequence[str],
                  names: Sequence[str], axis: str, title: str) -> Any:
    """The query-key map: the queries as dots and the keys as squares, in the figure's colours (`colors`, one per
    point: by kind or by position bin), hover the token in its context."""
    go = require_plotly()
    figure = go.Figure()
    keys = np.asarray(is_key, dtype=bool)
    for name, chosen, symbol in ((names[0], ~keys, "circle"), (names[1], keys, "square")):
        index = np.flatnonzero(chosen)
        figure.add_trace(go.Scatter(
            x=np.asarray(xs, dtype=np.float64)[index], y=np.asarray(ys, dtype=np.float64)[index], mode="markers",
            name=name, customdata=[hover[i] for i in index.tolist()], opacity=0.8,
            marker={"symbol": symbol, "color": [colors[i] for i in index.tolist()], "size": 7},
            hovertemplate="%{customdata}<br>(%{x:.3g}, %{y:.3g})<extra>" + name + "</extra>"))
    figure.update_layout(title={"text": title}, xaxis={"title": {"text": f"{axis} 1"}},
                         yaxis={"title": {"text": f"{axis} 2"}})
    return figure


def model_view_figure(values: np.ndarray, layers: Sequence[int], heads: Sequence[int], diverging: bool, top: float,
                      title: str, hint: str, bar_title: str) -> Any:
    """The model view: one small heatmap per layer (rows) and head (columns), the thumbnails' values under one
    colour scale (white to dark blue up to `top`, or, for changes, blue below zero and red above, symmetric)."""
    go = require_plotly()
    from plotly.subplots import make_subplots

    L, H = values.shape[:2]
    figure = make_subplots(rows=L, cols=H, horizontal_spacing=0.01, vertical_spacing=0.02,
                           row_titles=[f"layer {layer}" for layer in layers],
                           column_titles=[f"head {head}" for head in heads])
    for row, layer in enumerate(layers):
        for col, head in enumerate(heads):
            figure.add_trace(go.Heatmap(
                z=np.asarray(values[row, col], dtype=np.float64), coloraxis="coloraxis",
                hovertemplate=f"layer {layer} · head {head}<br>row %{{y}}, column %{{x}}: %{{z:.4g}}<extra></extra>"),
                row=row + 1, col=col + 1)
    figure.update_xaxes(showticklabels=False)
    figure.update_yaxes(showticklabels=False, autorange="reversed")
    scale = ({"colorscale": colorscale(_RDBU), "cmin": -top, "cmax": top} if diverging
             else {"colorscale": colorscale(_BLUES), "cmin": 0.0, "cmax": top})
    figure.update_layout(title={"text": title + (f"<br><sup>{hint}</sup>" if hint else "")},
                         coloraxis={**scale, "colorbar": {"title": {"text": bar_title}}})
    return figure


OPACITY_LEVELS = 10  # plotly sets opacity per trace: the lines of a head are grouped into this many levels


def head_view_figure(query_tokens: Sequence[str], key_tokens: Sequence[str], indices: np.ndarray,
                     weights: np.ndarray, heads: Sequence[int], colors: Sequence[str], title: str, note: str,
                     min_opacity: float) -> Any:
    """The head view: query tokens on the left, key tokens on the right, a line per head and drawn (query, key) in
    the head's colour, its opacity the weight over the strongest shown (in OPACITY_LEVELS steps), lines fainter
    than `min_opacity` left out as the drawing leaves them; hover on a line's middle gives head, query, key and
    weight."""
    go = require_plotly()
    shown = [h for h in heads if 0 <= h < indices.shape[0]]
    top = float(max((weights[h].max(initial=0.0) for h in shown), default=0.0)) or 1.0
    figure = go.Figure()
    for head in shown:
        q, slot = np.nonzero(weights[head] / top >= min_opacity)
        k, w = indices[head][q, slot].astype(np.int64), weights[head][q, slot].astype(np.float64)
        level = np.clip(np.ceil(w / top * OPACITY_LEVELS), 1, OPACITY_LEVELS).astype(int)
        for step in np.unique(level):
            chosen = level == step
            xs = np.tile([0.0, 1.0, np.nan], int(chosen.sum()))
            ys = np.column_stack([q[chosen], k[chosen], np.full(int(chosen.sum()), np.nan)]).ravel()
            figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": colors[head], "width": 2},
                                        opacity=step / OPACITY_LEVELS, hoverinfo="skip", showlegend=False,
                                        legendgroup=f"head {head}"))
        figure.add_trace(go.Scatter(
            x=np.full(len(q), 0.5), y=(q + k) / 2, mode="markers", marker={"color": colors[head], "size": 4,
                                                                             "opacity": 0.0},
            name=f"head {head}", legendgroup=f"head {head}", customdata=np.column_stack([q, k, w]),
            text=[f"{query_tokens[a]} → {key_tokens[b]}" for a, b in zip(q.tolist(), k.tolist())],
            hovertemplate=(f"head {head}<br>query %{{customdata[0]}} → key %{{customdata[1]}}: %{{text}}"
                           "<br>weight %{customdata[2]:.4f}<extra></extra>")))
    rows = max(len(query_tokens), len(key_tokens), 1)
    figure.update_layout(
        title={"text": title + (f"<br><sup>{note}</sup>" if note else "")}, height=max(400, 22 * rows + 160),
        legend={"orientation": "h", "y": -0.05},  # under the plot: beside it, it would cover the key tokens
        xaxis={"visible": False, "range": [-0.05, 1.05]},
        yaxis={**_token_axis(range(len(query_tokens)), query_tokens, "query"), "autorange": "reversed"},
        yaxis2={**_token_axis(range(len(key_tokens)), key_tokens, "key"), "overlaying": "y", "side": "right",
                "autorange": "reversed", "matches": "y"})
    figure.add_trace(go.Scatter(x=[1.0] * len(key_tokens), y=list(range(len(key_tokens))), yaxis="y2",
                                mode="markers", marker={"opacity": 0.0}, hoverinfo="skip", showlegend=False))
    return figure
