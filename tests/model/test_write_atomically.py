"""write_atomically: a reader sees the old file or the new one, never half, and the file keeps its mode."""

from __future__ import annotations

import os
import stat

import pytest

from bertviz_lab.util import files


def test_text_and_bytes_replace_the_file_and_leave_nothing_beside_it(tmp_path):
    target = tmp_path / "figure.svg"
    assert files.write_atomically(target, "<svg>é</svg>") == target
    assert target.read_bytes() == "<svg>é</svg>".encode()
    files.write_atomically(target, b"\x89PNG", sync=True)
    assert target.read_bytes() == b"\x89PNG" and os.listdir(tmp_path) == ["figure.svg"]


def test_an_existing_file_keeps_its_mode_and_a_new_one_follows_the_umask(tmp_path):
    kept = tmp_path / "kept.txt"
    kept.write_text("old")
    kept.chmod(0o640)
    files.write_atomically(kept, "new")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    previous = os.umask(0o027)
    try:
        files.write_atomically(tmp_path / "new.txt", "new")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary_one(tmp_path, monkeypatch):
    target = tmp_path / "latest"
    target.write_text("old\n")

    def refuse(source, destination):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        files.write_atomically(target, "new\n")
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["latest"]
