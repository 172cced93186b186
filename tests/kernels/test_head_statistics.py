"""The registry of the corpus head statistics (kernels/head_statistics.py) and the check that avx2.c writes them in
its order: the built library agrees, and a disagreement turns the kernel off in one warning line."""

from __future__ import annotations

import functools
import re

import pytest

from bertviz_lab.kernels import build
from bertviz_lab.kernels.head_statistics import NATS, SHARE, STATISTIC_NAMES, STATISTICS, Statistic, statistic

needs_kernel = pytest.mark.usefixtures("avx2_kernels")


def test_the_registry_names_each_statistic_once_with_its_unit():
    assert STATISTIC_NAMES == ("entropy", "cls", "sep", "self", "prev", "next", "punct")
    assert all(isinstance(s, Statistic) and s.label and s.description for s in STATISTICS)
    assert {s.name: s.unit for s in STATISTICS} == {"entropy": NATS} | {name: SHARE for name in STATISTIC_NAMES[1:]}
    with pytest.raises(AttributeError):
        STATISTICS[0].name = "other"  # frozen: the registry cannot be changed in place


def test_an_unknown_statistic_is_one_line_naming_them_all():
    assert statistic("punct").label == "weight on punctuation"
    for bad in ("nope", ["cls"], None):
        with pytest.raises(ValueError, match=re.escape("stat must be one of entropy, cls, sep, self, prev, next, "
                                                       "punct; got")):
            statistic(bad)


def test_the_order_check_accepts_the_registry_and_names_a_disagreement():
    build.check_statistics_order(",".join(STATISTIC_NAMES))
    swapped = ",".join(("cls", "entropy", *STATISTIC_NAMES[2:]))
    with pytest.raises(build.StatisticsOrderError) as raised:
        build.check_statistics_order(swapped)
    assert "\n" not in str(raised.value)
    assert str(raised.value).startswith("avx2.c writes the statistics as cls, entropy, sep")
    with pytest.raises(build.StatisticsOrderError):
        build.check_statistics_order(",".join(STATISTIC_NAMES[:-1]))  # one missing


@needs_kernel
def test_the_built_kernel_exports_the_registry_order(tmp_path):
    lib = build.load(tmp_path)
    assert tuple(lib.bvl_statistics_names().decode().split(",")) == STATISTIC_NAMES


@needs_kernel
def test_a_kernel_in_another_order_is_refused_at_load_in_one_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "STATISTIC_NAMES", tuple(reversed(STATISTIC_NAMES)))
    with pytest.raises(build.StatisticsOrderError, match="avx2.c writes the statistics as entropy, cls"):
        build.load(tmp_path)
    monkeypatch.setenv("BERTVIZ_LAB_CACHE", str(tmp_path))
    monkeypatch.delenv("BERTVIZ_LAB_CPU_GEMM", raising=False)
    # a library() of this test's own: the process's stays loaded for the other tests
    monkeypatch.setattr(build, "library", functools.cache(build.library.__wrapped__))
    monkeypatch.setattr(build, "_failure", None)
    with pytest.warns(RuntimeWarning, match="AVX2 kernels are off.*head_statistics.py names them punct, next"):
        assert build.library() is None
    assert build.failure().startswith("avx2.c writes the statistics")
