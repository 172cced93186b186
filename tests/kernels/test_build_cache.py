"""The AVX2 kernels' cache: only a private folder's files of this user are loaded, and only once they match the record
of their build; what fails the checks is rebuilt once or refused with a warning, and a build without a compiler
still runs. Whatever could run foreign code or kill the process runs in a subprocess."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from system_programs import require_avx2_kernels
from tiny_models import tiny_config

from bertviz_lab import kernels
from bertviz_lab.kernels import build as kernel_build
from bertviz_lab.kernels import choice
from bertviz_lab.kernels import linear as kernel_linear
from bertviz_lab.model import BERT

needs_kernel = pytest.mark.usefixtures("avx2_kernels")
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the planted libraries")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give files to another user")

PROBE = """
import torch
from bertviz_lab.kernels import avx2, build
lib = build.library()
if lib is not None:
    x, w = torch.randn(7, 64), torch.randn(48, 64)
    assert torch.allclose(avx2.linear(x, avx2.pack(w), None, 48), x @ w.T, atol=1e-4)
print("kernel" if lib is not None else "fallback")
"""

PLANTED_C = """
#include <stdio.h>
__attribute__((constructor)) static void plant(void) {
    FILE *marker = fopen(MARKER, "w");
    if (marker) fclose(marker);
}
"""


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A cache folder of this test's own (not created yet), with `library()` and the backend choice answered
    afresh for it; the process's own come back afterwards, so the other tests keep theirs."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("BERTVIZ_LAB_CACHE", str(folder))
    monkeypatch.delenv("BERTVIZ_LAB_CPU_GEMM", raising=False)
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(kernel_build, "library", functools.cache(kernel_build.library.__wrapped__))
    monkeypatch.setattr(choice, "_cpu_backend", choice._UNSET)
    return folder


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> Path:
    """A folder holding one verified build (library and record), built once for the module's tests to copy."""
    require_avx2_kernels()
    folder = tmp_path_factory.mktemp("build")
    before = os.environ.pop("CC", None)
    try:
        kernel_build.load(folder)
    finally:
        if before is not None:
            os.environ["CC"] = before
    return folder


def _copy_build(build: Path, cache: Path) -> tuple[Path, Path]:
    """Copy the module's build into a new private `cache`; answer its (library, record)."""
    cache.mkdir(mode=0o700)
    for file in build.iterdir():
        shutil.copy2(file, cache)
    (record,) = cache.glob("*.json")
    return record.with_suffix(".so"), record


def _write_record(record: Path, library: bytes) -> None:
    """A record that `library` matches, as anyone who can write the folder could forge it."""
    record.write_text(json.dumps({"size": len(library), "sha256": hashlib.sha256(library).hexdigest()}))


def _gcc(tmp_path: Path, name: str, source: str, *flags: str) -> Path:
    """A shared library built from `source`, for planting."""
    (tmp_path / f"{name}.c").write_text(source)
    subprocess.run(["gcc", "-shared", "-fPIC", *flags, str(tmp_path / f"{name}.c"), "-o", str(tmp_path / f"{name}.so")],
                   check=True, capture_output=True)
    return tmp_path / f"{name}.so"


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    """`script` in a fresh interpreter with this test's environment: a planted constructor runs there, not in
    pytest, and a SIGBUS fails the test instead of killing the run."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow  # builds and runs fresh interpreters
@needs_kernel
@needs_gcc
@pytest.mark.parametrize("how", ["world-writable-folder", "files-of-another-user"])
def test_a_planted_library_never_runs(build, cache, tmp_path, how):
    if how == "files-of-another-user" and os.geteuid() != 0:
        pytest.skip("needs root to give files to another user")
    marker = tmp_path / "planted-code-ran"
    planted = _gcc(tmp_path, "planted", PLANTED_C, f'-DMARKER="{marker}"')
    assert _run("import ctypes, sys; ctypes.CDLL(sys.argv[1])", str(planted)).returncode == 0
    assert marker.exists()  # loaded, the planted library leaves its mark
    marker.unlink()
    library, record = _copy_build(build, cache)
    shutil.copyfile(planted, library)  # under the name a build of this source has, with a matching record
    _write_record(record, planted.read_bytes())
    if how == "world-writable-folder":
        cache.chmod(0o1777)
        refused = f"the cache folder {cache} is writable by group or others (drwxrwxrwt)"
    else:
        os.chown(library, 1, 1)
        os.chown(record, 1, 1)
        refused = f"the file {record} belongs to uid 1, not to this user (uid 0)"
    done = _run(PROBE)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert refused in done.stderr
    if how == "world-writable-folder":  # nothing is built into, or loaded from, a folder others may write
        assert done.stdout.split() == ["fallback"] and library.read_bytes() == planted.read_bytes()
    else:  # this user's own folder: rebuilt over the planted files
        assert done.stdout.split() == ["kernel"] and library.stat().st_uid == record.stat().st_uid == 0


@needs_kernel
@needs_root
def test_a_folder_of_another_user_is_refused_with_a_warning_naming_it(build, cache):
    library, record = _copy_build(build, cache)
    os.chown(cache, 1, 1)
    before = sorted((path.name, path.stat().st_mtime_ns) for path in cache.iterdir())
    with pytest.warns(RuntimeWarning, match=re.escape(f"the cache folder {cache} belongs to uid 1, not to this user")):
        assert kernel_build.library() is None
    assert sorted((path.name, path.stat().st_mtime_ns) for path in cache.iterdir()) == before  # nor built into


@needs_kernel
def test_the_folders_it_creates_are_private_under_umask_000(tmp_path, cache, monkeypatch):
    nested = tmp_path / "new" / "cache"
    monkeypatch.setenv("BERTVIZ_LAB_CACHE", str(nested))
    umask = os.umask(0)
    try:
        assert kernel_build.library() is not None
    finally:
        os.umask(umask)
    assert [stat.S_IMODE(path.stat().st_mode) for path in (nested.parent, nested)] == [0o700, 0o700]
    assert {stat.S_IMODE(path.stat().st_mode) for path in nested.iterdir()} == {0o600}


@pytest.mark.slow  # builds and runs fresh interpreters
@needs_kernel
@pytest.mark.parametrize("damage", ["truncated", "overwritten"])
def test_a_damaged_library_is_rebuilt_and_the_process_lives(build, cache, damage):
    library, record = _copy_build(build, cache)
    data = library.read_bytes()
    if damage == "truncated":
        library.write_bytes(data[:len(data) // 2])
    else:  # same size, other code: half of it reversed
        library.write_bytes(data[:len(data) // 2] + data[len(data) // 2:][::-1])
    done = _run(PROBE)
    assert done.returncode == 0, f"rc {done.returncode}: {done.stderr}"  # a SIGBUS would be rc -7
    assert done.stdout.split() == ["kernel"]
    assert f"{library} " in done.stderr and "changed since it was built" in done.stderr
    assert library.read_bytes() == data


@needs_kernel
@needs_gcc
@pytest.mark.parametrize("record_kind", ["build-record", "record-of-it"])
def test_a_foreign_library_under_the_expected_name_is_rebuilt(build, cache, tmp_path, record_kind):
    """With the build's record it is never loaded; with a record that matches it, it is loaded and its missing
    symbols are found out while binding, and either way it is replaced by a build."""
    library, record = _copy_build(build, cache)
    foreign = _gcc(tmp_path, "foreign", "int unrelated(void) { return 42; }\n").read_bytes()
    library.write_bytes(foreign)
    if record_kind == "record-of-it":
        _write_record(record, foreign)
        why = re.escape(f"{library} is not a build of the AVX2 kernels (") + ".*undefined symbol: bvl_"
    else:
        why = re.escape(f"{library} has {len(foreign)} bytes where its build record says")
    with pytest.warns(RuntimeWarning, match=why):
        lib = kernel_build.library()
    assert lib is not None and lib.bvl_abi_version() == kernel_build.ABI_VERSION
    assert library.read_bytes() == (build / library.name).read_bytes()


@needs_kernel
def test_without_a_compiler_a_verified_build_runs(build, cache, monkeypatch):
    _copy_build(build, cache)
    monkeypatch.setenv("CC", "/nonexistent")
    monkeypatch.setenv("BERTVIZ_LAB_CPU_GEMM", "avx2")  # asked for: an AVX-512 CPU gets oneDNN's by default
    layer, x = torch.nn.Linear(384, 1152), torch.randn(2, 64, 384)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kernel_build.library() is not None and choice.cpu_backend() == "avx2"
        with torch.inference_mode():
            y = kernels.PackedLinear("avx2")(x, layer.weight, layer.bias)
            torch.testing.assert_close(y, F.linear(x, layer.weight, layer.bias), rtol=1e-5, atol=1e-5)
    assert kernel_linear.has_packed_copy(layer.weight) == "avx2"
    assert str(cache) in Path("/proc/self/maps").read_text()  # the very copy in this cache is the one loaded


def test_without_a_compiler_or_a_build_the_layers_fall_back_and_log_why(cache, monkeypatch, caplog):
    monkeypatch.setenv("CC", "/nonexistent")
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, logger="bertviz_lab.kernels.build"):
        warnings.simplefilter("error")  # nobody asked for the kernel: no warning
        assert kernel_build.library() is None
    no_build = f"no C compiler (/nonexistent) to build them, and no verified build of them in {cache}"
    assert (kernel_build.unsupported_reason() or no_build) in caplog.text
    assert not cache.exists()


def test_asking_for_the_avx2_kernels_where_they_cannot_run_warns_once(cache, monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent")
    monkeypatch.setenv("BERTVIZ_LAB_CPU_GEMM", "avx2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = BERT(tiny_config()).eval()  # its attention layers are given their backend: the first ask
        assert choice.cpu_backend() is None and choice.cpu_backend() is None
        monkeypatch.setattr(choice, "_cpu_backend", choice._UNSET)
        assert choice.cpu_backend() is None
        with torch.inference_mode():
            model(input_ids=torch.randint(5, model.config.vocab_size, (1, 8)))
    messages = [str(warning.message) for warning in caught if issubclass(warning.category, RuntimeWarning)]
    assert len(messages) == 1, messages
    assert (kernel_build.unsupported_reason() or "no C compiler (/nonexistent)") in messages[0]


@needs_kernel
def test_another_compiler_version_builds_anew_and_each_build_is_kept(build, cache, tmp_path, monkeypatch):
    _copy_build(build, cache)
    wrapped = tmp_path / "wrapped-cc"  # the system compiler under another version string
    wrapped.write_text('#!/bin/sh\n[ "$1" = --version ] && echo "wrapped-cc 99.0" && exit 0\nexec cc "$@"\n')
    wrapped.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapped))
    assert kernel_build.library() is not None
    records = sorted(cache.glob("*.json"))
    assert len(records) == 2 and {json.loads(r.read_text())["compiler"] for r in records} >= {"wrapped-cc 99.0"}
    monkeypatch.delenv("CC")
    monkeypatch.setattr(kernel_build, "library", functools.cache(kernel_build.library.__wrapped__))
    assert kernel_build.library() is not None and sorted(cache.glob("*.json")) == records
