"""Log lines while the progress bar is shown: each on a line of its own above the bar, the handlers put back after."""

from __future__ import annotations

import contextlib
import io
import logging
import sys
from typing import Iterator

from tqdm import tqdm

from bertviz_lab.train.progress import log_above


@contextlib.contextmanager
def console_logger() -> Iterator[tuple[logging.Logger, logging.Handler]]:
    """A logger of its own with one console handler on sys.stderr as it is now (capsys's), removed afterwards.

    It propagates again afterwards: pytest (9.1 on) gives every logger that does not propagate its own capture
    handlers when a test starts, which the next test would find among the handlers."""
    logger = logging.getLogger("bertviz_lab.tests.progress")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("LOG %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield logger, handler
    finally:
        logger.removeHandler(handler)
        logger.propagate = True


def test_a_log_line_lands_above_the_bar_not_on_its_line(capsys):
    with console_logger() as (logger, handler):
        bar = tqdm(total=4, desc="pretraining", file=sys.stderr, ascii=True)
        with log_above(bar, logger):
            bar.update(1)
            logger.info("step 1: loss=7.5")
            assert handler not in logger.handlers  # tqdm's handler writes instead
        bar.close()
        assert logger.handlers == [handler]
    lines = capsys.readouterr().err.replace("\r", "\n").splitlines()
    assert "LOG step 1: loss=7.5" in lines  # a line of its own, formatted by the caller's formatter


def test_the_console_handlers_level_is_kept_and_files_are_left_alone(capsys):
    kept = io.StringIO()
    file_like = logging.StreamHandler(kept)
    with console_logger() as (logger, handler):
        handler.setLevel(logging.WARNING)
        logger.addHandler(file_like)
        bar = tqdm(total=2, file=sys.stderr)
        with log_above(bar, logger):
            assert file_like in logger.handlers
            logger.info("quiet")
            logger.warning("loud")
        bar.close()
        logger.removeHandler(file_like)
    err = capsys.readouterr().err
    assert "LOG loud" in err and "quiet" not in err
    assert kept.getvalue() == "quiet\nloud\n"


def test_a_disabled_bar_changes_nothing():
    with console_logger() as (logger, handler), log_above(tqdm(total=1, disable=True), logger):
        assert logger.handlers == [handler]
