"""Export scales are finite numbers from 0.1 to 16 and a PNG has at most 100 megapixels, each refused in one line
naming the value before anything is written or drawn; a panel asked for scale=1e6 fails with that line in a child
under a 2 GB address-space limit instead of dying in the rasteriser."""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

from bertviz_lab.widgets.figures import export
from bertviz_lab.widgets.figures.charts import line_chart

ADDRESS_SPACE = 2 * 1024**3
BAD_VALUE = "scale must be a number from 0.1 to 16, got {}."


def chart() -> str:
    steps = np.arange(1, 30)
    return line_chart({"loss": (steps, 5 / steps, "#1f77b4")}, title="loss", x_title="step", y_title="loss")


def declared(width: int, height: int) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
            f'<rect width="{width}" height="{height}" fill="#123456"/></svg>')


@pytest.mark.parametrize(("scale", "kind", "shown"), [
    (float("inf"), ValueError, "inf"), (float("-inf"), ValueError, "-inf"), (float("nan"), ValueError, "nan"),
    (0, ValueError, "0"), (-1, ValueError, "-1"), (0.05, ValueError, "0.05"), (16.5, ValueError, "16.5"),
    (1e6, ValueError, "1000000.0"), (10**400, ValueError, None),
    ("2", TypeError, "str '2'"), (None, TypeError, "NoneType None"), (True, TypeError, "bool True"),
    ([2], TypeError, "list [2]"),
])
@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_a_bad_scale_is_one_line_naming_it_and_nothing_is_written(scale, kind, shown, suffix, tmp_path):
    with pytest.raises(kind) as refused:
        export.save_figure(chart(), tmp_path / f"figure.{suffix}", scale=scale)
    message = str(refused.value)
    if shown is not None:
        assert message == BAD_VALUE.format(shown)
    assert message.startswith("scale must be a number from 0.1 to 16, got ") and len(message) < 300
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("scale", [0.1, 1, 2.5, 16, np.float32(3.0), np.int64(2)])
def test_scales_within_the_bounds_draw_at_that_size(scale, tmp_path):
    png = export.save_figure(declared(40, 30), tmp_path / "figure.png", scale=scale)
    assert Image.open(io.BytesIO(png.read_bytes())).size == (max(1, round(40 * scale)), max(1, round(30 * scale)))
    svg = export.save_figure(declared(40, 30), tmp_path / "figure.svg", scale=scale).read_text()
    assert f'width="{40 * float(scale):g}"' in svg and "inf" not in svg


def test_a_png_over_100_megapixels_is_refused_before_it_is_drawn(tmp_path):
    big = declared(4000, 3000)  # 12 megapixels at scale 1; 192 at scale 4
    with pytest.raises(ValueError) as refused:
        export.save_figure(big, tmp_path / "big.png", scale=4)
    assert str(refused.value) == ("scale=4 makes a 16000 x 12000 pixel PNG of this 4000 x 3000 figure, over the 100 "
                                  "megapixels allowed; use scale <= 2.89 or save as .svg.")
    assert list(tmp_path.iterdir()) == []
    assert export.png_size(big, 2.88) == (11520, 8640)  # 99.5 megapixels: allowed
    assert 'width="16000"' in export.save_figure(big, tmp_path / "big.svg", scale=4).read_text()  # no pixels


CHILD = textwrap.dedent("""
    import json, sys, time
    from bertviz_lab.widgets import LossCurves
    panel = LossCurves()
    for step in range(1, 20):
        panel({"step": step, "loss": 5.0 / step})
    panel.flush()
    results = {}
    for scale in (1e6, float("inf")):
        started = time.perf_counter()
        try:
            panel.save(sys.argv[1] + f"/curves-{scale}.png", scale=scale)
            results[repr(scale)] = ["saved", "", 0.0]
        except BaseException as error:
            results[repr(scale)] = [type(error).__name__, str(error), time.perf_counter() - started]
    print(json.dumps(results))
""")


def test_a_panel_saved_at_an_absurd_scale_fails_in_one_line_and_the_process_lives(tmp_path):
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], env={**os.environ, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=120, preexec_fn=limit)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results == {"1000000.0": ["ValueError", BAD_VALUE.format("1000000.0"), pytest.approx(0, abs=5)],
                       "inf": ["ValueError", BAD_VALUE.format("inf"), pytest.approx(0, abs=5)]}
    assert list(tmp_path.iterdir()) == []


def test_a_figure_that_cannot_be_written_is_one_line_naming_the_file_of_the_usual_class(tmp_path, monkeypatch):
    (tmp_path / "a_file").write_text("x", encoding="utf-8")
    (tmp_path / "a_folder.svg").mkdir()
    cases = [(tmp_path / "a_folder.svg", IsADirectoryError, "it is a folder"),
             (tmp_path / "a_file" / "deeper" / "figure.png", NotADirectoryError,
              f"{tmp_path / 'a_file'} is a file, not a folder")]
    for path, kind, why in cases:
        with pytest.raises(kind) as raised:
            export.save_figure(declared(40, 30), path)
        assert str(raised.value) == f"[Errno {raised.value.errno}] cannot save the figure to {path}: {why}"
    assert not (tmp_path / "a_file" / "deeper").exists()

    def read_only(*args, **kwargs):  # root writes anywhere: the refusal a read-only folder gives others
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(export, "write_atomically", read_only)
    with pytest.raises(PermissionError) as raised:
        export.save_figure(declared(40, 30), tmp_path / "figure.svg")
    assert str(raised.value) == f"[Errno 13] cannot save the figure to {tmp_path / 'figure.svg'}: Permission denied"
