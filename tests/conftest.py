"""Shared by every test: one torch thread per test (tiny models are fastest that way, and the 2-core CI is shared),
the system programs some tests need (skipped with the install command where missing, an error in CI), and the one
tiny BERT config (tests/tiny_models.py; a fixture here, a plain import where module-level code needs it)."""

from __future__ import annotations

import os
from typing import Callable, Iterator

# Tests never reach the network: every checkpoint is a local folder or a Hub cache a test lays out. Set for the whole
# session before anything imports huggingface_hub, so no test depends on which file happened to be imported first.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from system_programs import PROGRAMS, REQUIRE_ENV, require_avx2_kernels, required  # noqa: E402
from tiny_models import tiny_config as build_tiny_config  # noqa: E402

from bertviz_lab.model import BERTConfig  # noqa: E402

# Tests that read the built documentation site run on one pytest-xdist worker (`--dist loadgroup`), so the site
# (mkdocs, executing a notebook) is built once per run, not once per worker.
SITE_FIXTURE, SITE_GROUP = "site", "docs-site"


def xdist_group(item: pytest.Item) -> str | None:
    """The pytest-xdist group an item runs in: the site's readers together; a test using a module-scoped fixture
    (a JupyterLab server of its own, a corpus, a trained tokenizer) with the rest of its module, so that fixture is
    made once and not again on every worker the module's tests land on; any other test alone."""
    if SITE_FIXTURE in getattr(item, "fixturenames", ()):
        return SITE_GROUP
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if any(d.scope == "module" for defs in definitions.values() for d in defs):
        return item.nodeid.split("::", 1)[0]
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook turns xdist_group marks into the group's name
def pytest_collection_modifyitems(config, items):
    missing: dict[str, list[str]] = {}
    for item in items:
        group = xdist_group(item)
        if group and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(group))
        for mark in item.iter_markers("needs_program"):
            program = PROGRAMS[mark.args[0]]
            if program.path() is None:
                missing.setdefault(program.name, []).append(item.nodeid)
                item.add_marker(pytest.mark.skip(reason=program.missing_reason()))
    if missing and required():
        lines = [f"{PROGRAMS[name].missing_reason()}: {len(ids)} test(s) need it" for name, ids in missing.items()]
        raise pytest.UsageError(f"{REQUIRE_ENV} is set and a system program is missing:\n" + "\n".join(lines))


@pytest.fixture(autouse=True)
def one_thread():
    """Run each test on one thread, then restore the setting."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def avx2_kernels() -> None:
    """Skip where the AVX2 kernels cannot run here (another CPU or OS, no C compiler); fail in CI where they do not
    build."""
    require_avx2_kernels()


@pytest.fixture
def avx2_forced(avx2_kernels) -> Iterator[None]:
    """The AVX2 kernels for every layer during the test, as `BERTVIZ_LAB_CPU_GEMM=avx2` asks, whatever this CPU gets
    by default (PyTorch's own kernels where they use AVX-512): a test of the kernels runs on every AVX2 CPU."""
    from bertviz_lab import kernels

    with kernels.override(cpu_gemm="avx2"):
        yield


@pytest.fixture(name="tiny_config", scope="session")
def tiny_config_factory() -> Callable[..., BERTConfig]:
    """tiny_config(**overrides): the shared tiny BERTConfig, built afresh for each call."""
    return build_tiny_config


@pytest.fixture(scope="session")
def minilm_tokenizer():
    """The real all-MiniLM-L6-v2 WordPiece tokenizer (uncased, 30522 tokens), loaded once per session."""
    from bertviz_lab.model import BERT_Weights, BERTTokenizerFast

    return BERTTokenizerFast.from_pretrained(BERT_Weights.DEFAULT.path)


@pytest.fixture(scope="session")
def ipython_shell():
    """The process's IPython shell (IPython's testing shell starts once per process, whichever test asks first)."""
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    start_ipython()
    return get_ipython()


def pytest_terminal_summary(terminalreporter, config) -> None:
    """Name the shuffled order's seed at the end, also under -q (whose header leaves it out), so a failing order can
    be run again with --random-order-seed."""
    if not hasattr(config.option, "random_order_enabled"):  # pytest-random-order not installed or not loaded
        return
    from random_order.config import Config as RandomOrder

    order = RandomOrder(config)
    if order.is_enabled:
        terminalreporter.write_line(f"random order: --random-order-seed={order.seed} "
                                    f"(bucket {order.bucket_type}) repeats it")
