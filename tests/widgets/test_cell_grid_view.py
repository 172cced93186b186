"""The causal figures' widget: what it holds is what to_svg() returns, the front end's "open" messages reach the
callbacks (and nothing else does), and a cell's attributes are escaped."""

from __future__ import annotations

from bertviz_lab.widgets.figures.cell_grid import cell_attributes, cell_title
from bertviz_lab.widgets.views.cell_grid import CellGridView

SVG = ('<svg xmlns="http://www.w3.org/2000/svg"><rect class="bvl-cell"' + cell_attributes(1, 2, "layer 1 · 0.5")
       + f">{cell_title('layer 1 · 0.5')}</rect></svg>")


def test_show_keeps_the_drawing_and_clear_replaces_it_with_one_line():
    view = CellGridView(label="activation patching")
    view.show(SVG, "patching · hidden", selected=(1, 2))
    assert view.to_svg() == view.svg == SVG
    assert (view.title, view.selected, view.message) == ("patching · hidden", [1, 2], "")
    view.clear("this model has no masked-LM head")
    assert (view.svg, view.title, view.selected, view.message) == ("", "", [], "this model has no masked-LM head")
    view.show(SVG, "again")
    assert view.message == "" and view.selected == []


def test_an_open_message_from_the_front_end_reaches_every_callback_and_selects_the_cell():
    view, opened = CellGridView(), []
    view.on_open(lambda row, col: opened.append(("a", row, col)))
    view.on_open(lambda row, col: opened.append(("b", row, col)))
    view._front_end_message(view, {"type": "open", "row": 3, "col": 4}, [])
    assert opened == [("a", 3, 4), ("b", 3, 4)] and view.selected == [3, 4]
    for junk in ({"type": "open", "row": "3", "col": 4}, {"type": "close", "row": 1, "col": 1}, [1, 2], None,
                 {"type": "open", "row": 1}):
        view._front_end_message(view, junk, [])
    assert opened == [("a", 3, 4), ("b", 3, 4)]


def test_a_cells_attributes_and_title_are_escaped():
    hostile = '<img src=x onerror="alert(1)">'
    attributes, title = cell_attributes(0, 1, hostile, opens=False), cell_title(hostile)
    assert "<img" not in attributes and "<img" not in title and '"alert' not in attributes
    assert attributes.startswith(' data-row="0" data-col="1" data-tip="&lt;img') and 'data-opens="false"' in attributes
    assert title == "<title>&lt;img src=x onerror=&quot;alert(1)&quot;&gt;</title>"
