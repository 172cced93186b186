"""The places a run writes: early checks, so a bad path stops it before the first step instead of after the last, and
one-line errors when a write fails later (a full disk).

`folder_problem(path)` and `file_problem(path)` say why a folder (checkpoint_dir, tokenizer_dir) or a file
(metrics_file, the log file, --output) could not be written, or return None. They leave nothing behind:
  - a missing path: its nearest existing ancestor must be a folder that takes a file (a one-byte anonymous temporary
    file is written, flushed and closed there; on Linux it never has a name), so the folders can be created later;
  - an existing folder: the same probe inside it;
  - an existing regular file: opened for appending, which changes nothing;
  - an existing device, pipe or socket (`/dev/full`, `/dev/stdout`): opened without blocking, then written with zero
    bytes. Linux hands a zero-length write to the device, so /dev/full answers ENOSPC, while a terminal or a pipe
    receives nothing (a probe byte would end up in their output).

`WriteError` is an OSError whose message names the file or folder and says why in words ("no space left on device"),
also when the failing library raised something else (torch.save raises RuntimeError on a full disk).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from bertviz_lab.util.files import clip

TEMP_PREFIX = ".tmp-"
_OS_ERROR_CODE = re.compile(r"os error (\d+)|\[Errno (\d+)\]")  # how Rust and Python libraries quote errno
_NEARLY_FULL = 1 << 20  # bytes: less free space than this after a failed write reads as a full disk


def _reason(error: OSError) -> str:
    return error.strerror or type(error).__name__


class WriteError(OSError):
    """A file or folder of the run could not be written; the message names it and says why, on one line."""

    def __init__(self, code: int | None, message: str) -> None:
        super().__init__(code, message)

    def __str__(self) -> str:
        return str(self.strerror)


def _free_bytes(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(_nearest_existing(folder)).free
    except OSError:
        return None


def write_failure(error: BaseException, folder: str | os.PathLike) -> tuple[int | None, str]:
    """(errno or None, why in words) for a failed write into `folder`, whatever type the writing library raised.

    OSError: its errno. torch.save and safetensors raise RuntimeError / SafetensorError with the OS error inside the
    text ("os error 28") or with none at all ("unexpected pos"); then a folder with (almost) no free space left means
    the disk is full."""
    code = error.errno if isinstance(error, OSError) else None
    if code is None:
        match = _OS_ERROR_CODE.search(str(error))
        code = int(match.group(1) or match.group(2)) if match else None
    if code is None:
        free = _free_bytes(Path(folder))
        if free is not None and free < _NEARLY_FULL:
            code = errno.ENOSPC
    if code == errno.ENOSPC:
        return code, "no space left on device"
    if code is not None:
        return code, os.strerror(code)
    return None, clip(" ".join(str(error).split()) or type(error).__name__)


_CANNOT_SYNC = (errno.EINVAL, errno.ENOTSUP, errno.EBADF)  # a file system without fsync, not a failed write


def fsync_path(path: Path) -> None:
    """Flush a file to disk, raising its OSError when the data may not be there (a full disk, an I/O error);
    a folder entry where the OS allows it."""
    folder = path.is_dir()
    try:
        fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if folder else 0))
    except OSError:
        if folder:
            return
        raise
    try:
        os.fsync(fd)
    except OSError as error:
        if not folder and error.errno not in _CANNOT_SYNC:
            raise
    finally:
        os.close(fd)


def _nearest_existing(path: Path) -> Path:
    """`path` or its closest ancestor that exists (a regular file in the middle of a path counts)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _probe_folder(folder: Path) -> OSError | None:
    """Write and flush one byte into an anonymous temporary file in `folder`; the error when that fails."""
    try:
        with tempfile.TemporaryFile(dir=folder) as handle:
            handle.write(b"\0")
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as error:
        return error
    return None


def _creation_problem(path: Path) -> str | None:
    """Why the missing `path` could not be created along with its missing parent folders, or None."""
    existing = _nearest_existing(path.parent)
    if not existing.is_dir():
        return f"cannot be created: {clip(str(existing))} is not a directory"
    error = _probe_folder(existing)
    if error is not None:
        return f"cannot be created: nothing can be written in {clip(str(existing))} ({_reason(error)})"
    return None


def _stream_problem(path: Path, mode: int) -> str | None:
    """Why a device, pipe or socket refuses writing: open it without blocking and write zero bytes."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ENXIO and stat.S_ISFIFO(mode):
            return None  # a pipe that nobody reads yet: the run's own write will wait for its reader
        return f"cannot be written: {_reason(error)}"
    try:
        os.write(fd, b"")
    except OSError as error:
        return f"cannot be written: {_reason(error)}"
    finally:
        os.close(fd)
    return None


def folder_problem(path: str | os.PathLike) -> str | None:
    """Why files could not be written into the folder `path` (created when missing), or None when they can."""
    path = Path(path)
    try:
        if not path.exists():
            return _creation_problem(path)
        if not path.is_dir():
            return "is not a directory"
        failure = _probe_folder(path)
    except OSError as error:  # e.g. an ancestor that cannot be searched
        return f"cannot be checked: {_reason(error)}"
    return None if failure is None else f"cannot be written: {_reason(failure)}"


def file_problem(path: str | os.PathLike) -> str | None:
    """Why the file `path` could not be written (created, appended to or replaced), or None when it can."""
    path = Path(path)
    try:
        try:
            mode = path.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            return _creation_problem(path)
        if stat.S_ISDIR(mode):
            return "is a directory"
        if not stat.S_ISREG(mode):
            return _stream_problem(path, mode)
        with open(path, "ab"):
            pass
    except OSError as error:
        return f"cannot be written: {_reason(error)}"
    return None
