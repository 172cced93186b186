"""Reading the files a checkpoint or tokenizer is made of, safely: only regular files (links followed) of bounded size
are read, so a named pipe cannot hang a load and a link to /dev/zero cannot fill memory; text must be UTF-8 and JSON
must parse, or one line names the file and what is wrong with it. Paths and values echoed in errors are clipped.

The size limit for text files (config.json, tokenizer.json, vocab.txt, ...) is MAX_TEXT_MB megabytes, or what the
environment variable BERTVIZ_LAB_MAX_TEXT_FILE_MB says when it is set. Weights (safetensors) are not read here:
safetensors maps them itself; `regular_file` checks them first.

`write_atomically` writes a file whole or not at all: a reader (a file watcher, a browser, a resumed run) never sees
half of one. `one_writer` keeps a folder (a corpus, a checkpoint_dir) to one run at a time.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import reprlib
import secrets
import socket
import stat
import threading
from pathlib import Path
from typing import Any, Iterator

ECHO_LIMIT = 200  # characters of a value or path shown in an error message
MAX_TEXT_MB = 64  # the largest config or tokenizer file read, in MB (real ones: a few kB to ~20 MB)
MAX_TEXT_MB_VARIABLE = "BERTVIZ_LAB_MAX_TEXT_FILE_MB"
MAX_INT_DIGITS = 4300  # Python's own limit on int("..."), refused here with a short message instead of its long one

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
_JSON_KINDS = {dict: "object", list: "list", str: "string", int: "number", float: "number", bool: "boolean",
               type(None): "null"}


# echoing values and paths ------------------------------------------------------------------------------------------
def clip(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text` cut to `limit` characters ("..." marks the cut), so one huge value cannot flood an error message."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _echo_repr() -> reprlib.Repr:
    shortened = reprlib.Repr()
    shortened.maxlevel, shortened.maxstring, shortened.maxother = 3, ECHO_LIMIT, ECHO_LIMIT
    return shortened


_ECHO = _echo_repr()


def shown(value: Any) -> str:
    """repr(value) in at most ECHO_LIMIT characters, without walking all of a huge or deeply nested value."""
    try:
        text = _ECHO.repr(value)
    except ValueError:  # an int too long to print
        text = f"<{type(value).__name__} too long to show>"
    return clip(text)


def named(path: str | os.PathLike) -> str:
    """A path for an error message: control characters escaped, and a long one cut in the middle so the file's own
    name stays readable ("/tmp/abc...xyz/config.json")."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in os.fspath(path))
    if len(text) <= ECHO_LIMIT:
        return text
    head = ECHO_LIMIT // 3
    return text[:head] + "..." + text[-(ECHO_LIMIT - head - 3):]


def first_line(error: BaseException) -> str:
    """An error's message cut to its first line and clipped, for one-line messages that quote it."""
    return clip((str(error).strip().splitlines() or [""])[0])


def json_kind(value: Any) -> str:
    """What JSON calls the type of a parsed value ("object", "list", "string", ...)."""
    return _JSON_KINDS.get(type(value), type(value).__name__)


# paths the user gives -------------------------------------------------------------------------------------------
def as_path(value: Any, expected: str) -> Path:
    """A path the user gave: a str or os.PathLike that is not empty ("" would silently mean the current folder)."""
    text = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(text, str):
        raise TypeError(f"expected {expected}, got {type(value).__name__} {shown(value)}.")
    if not text:
        raise ValueError(f"expected {expected}, got an empty string (which would mean the current folder).")
    return Path(text)


def present(path: Path) -> bool:
    """Whether anything (a file, folder, link, pipe) has this name; a path the system cannot look up (too long, a
    NUL byte, no permission) is a one-line ValueError naming it rather than an OSError echoing it whole."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as error:
        raise ValueError(f"the path {named(path)} ({len(os.fspath(path))} characters) cannot be looked up: "
                         f"{error.strerror or type(error).__name__}.") from None
    except ValueError:  # an embedded NUL byte
        raise ValueError(f"the path {named(path)} contains a NUL byte, which no file name can hold.") from None
    return True


def kind(mode: int) -> str:
    """What a stat mode describes, in words ("a named pipe (FIFO)", "a folder", ...)."""
    return next((word for test, word in _KINDS if test(mode)), "a regular file" if stat.S_ISREG(mode) else
                "a special file")


def _not_regular(path: Path, mode: int) -> ValueError:
    return ValueError(f"{named(path)} is {kind(mode)}, not a regular file; only regular files (or links to them) "
                      f"are read.")


def _missing(path: Path) -> FileNotFoundError:
    link = " (a link to a file that does not exist)" if os.path.islink(path) else ""
    return FileNotFoundError(f"{named(path)} does not exist{link}.")


def regular_file(path: Path) -> Path:
    """`path` when it is (or links to) a regular file; FileNotFoundError or ValueError naming it otherwise."""
    present(path)  # refuses paths that cannot be looked up, in one line
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise _missing(path) from None
    except OSError as error:
        raise ValueError(f"{named(path)} cannot be read: {error.strerror or type(error).__name__}.") from None
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode)
    return path


# reading ------------------------------------------------------------------------------------------------------------
def text_limit() -> int:
    """The most bytes a text file may have: BERTVIZ_LAB_MAX_TEXT_FILE_MB (read now) or MAX_TEXT_MB, in MB."""
    setting = os.environ.get(MAX_TEXT_MB_VARIABLE, "").strip()
    if not setting:
        return MAX_TEXT_MB << 20
    try:
        megabytes = float(setting)
    except ValueError:
        megabytes = -1.0
    if not 0 < megabytes < 2 ** 40:
        raise ValueError(f"{MAX_TEXT_MB_VARIABLE}={clip(setting)} is not a size; expected a positive number of MB.")
    return int(megabytes * (1 << 20))


def read_bytes(path: Path, limit: int | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (text_limit() by default).

    The file is opened without blocking and checked on the open descriptor, so a pipe or device swapped in after a
    check is still refused, and at most limit + 1 bytes are ever read (a file that grows while read is refused too).
    """
    limit = text_limit() if limit is None else limit
    present(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise _missing(path) from None
    except OSError as error:
        raise ValueError(f"{named(path)} cannot be read: {error.strerror or type(error).__name__}.") from None
    with os.fdopen(descriptor, "rb", buffering=0) as handle:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(path, info.st_mode)
        if info.st_size > limit:
            raise _too_big(path, info.st_size, limit)
        chunks, total = [], 0
        while total <= limit:
            chunk = handle.read(min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    if total > limit:
        raise _too_big(path, total, limit)
    return b"".join(chunks)


def _too_big(path: Path, size: int, limit: int) -> ValueError:
    return ValueError(f"{named(path)} has {size} bytes, more than the {limit / (1 << 20):g} MB a config or tokenizer "
                      f"file may have; set {MAX_TEXT_MB_VARIABLE} to a larger number of MB to read it anyway.")


def read_text(path: Path) -> str:
    """A regular UTF-8 text file of bounded size, decoded."""
    data = read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{named(path)} is not UTF-8 text: byte 0x{data[error.start]:02x} at offset {error.start} "
                         f"cannot be decoded.") from None


def read_lines(path: Path) -> list[str]:
    """The lines of a text file as open(..., encoding="utf-8") gives them (any newline), without their newline."""
    return [line.rstrip("\n") for line in io.StringIO(read_text(path), newline=None)]


class _LongInteger(ValueError):
    """An integer literal longer than MAX_INT_DIGITS digits."""


def _parse_int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INT_DIGITS:
        raise _LongInteger(literal)
    return int(literal)


def read_json(path: Path) -> Any:
    """A regular UTF-8 JSON file of bounded size, parsed; any problem is a ValueError naming the file."""
    text = read_text(path)
    try:
        return json.loads(text, parse_int=_parse_int)
    except _LongInteger as error:
        literal = str(error)
        raise ValueError(f"{named(path)} holds an integer of {len(literal.lstrip('-'))} digits "
                         f"({clip(literal, 24)}); no setting takes more than {MAX_INT_DIGITS}.") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{named(path)} is not valid JSON: {first_line(error)}") from None
    except RecursionError:
        raise ValueError(f"{named(path)} nests lists or objects too deeply to be read (deeper than Python's "
                         f"recursion limit); a config or tokenizer file is a few levels deep.") from None


def read_json_object(path: Path) -> dict[str, Any]:
    """read_json() of a file that must hold a JSON object (as config.json and tokenizer files do)."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{named(path)} holds a JSON {json_kind(data)}, expected a JSON object.")
    return data


def write_atomically(path: str | os.PathLike, data: str | bytes, *, sync: bool = False) -> Path:
    """Replace `path` with `data` (text as UTF-8) in one rename, keeping an existing file's mode (a new one gets what
    the umask gives); `sync` flushes it to disk first, for files a crash must not lose."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the kernel applies the umask
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data.encode("utf-8") if isinstance(data, str) else data)
            if sync:
                file.flush()
                os.fsync(file.fileno())
        if path.exists():
            os.chmod(temporary, stat.S_IMODE(path.stat().st_mode))
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


# one writer per folder ------------------------------------------------------------------------------------------
WRITER_LOCK = ".writer.lock"  # locked (flock / LockFileEx, through filelock) while a run writes the folder; stays
WRITER_NOTE = ".writer.json"  # who holds it: written by the holder once it has the lock, removed when it lets go


class FolderInUse(ValueError):
    """Another run writes this folder now."""


@contextlib.contextmanager
def one_writer(folder: str | os.PathLike, what: str) -> Iterator[None]:
    """Hold `folder`'s writer lock for the block: a second run into the same folder (another process, or another
    thread of this one) is refused at once with one line naming the holder's pid and host; the thread holding it may
    enter again (a command locks the folder before it loads a model, the run inside locks it too). The operating
    system releases the lock of a process that dies, however it dies, so a lock left by a killed run never blocks
    the next one (its note is simply overwritten). `folder` is made where it is missing; `what` names the run in
    the message ("analyze", "training")."""
    from filelock import FileLock, Timeout

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    key, thread = os.path.realpath(folder), threading.get_ident()
    with _HELD_GUARD:
        holder_thread, depth = _HELD.get(key, (thread, 0))
        if depth and holder_thread == thread:  # the run itself, again (the CLI locks before loading, analyze inside)
            _HELD[key] = (thread, depth + 1)
            lock = None
        elif depth:  # another thread of this process holds it
            raise _in_use(folder, what)
        else:
            lock = FileLock(folder / WRITER_LOCK, timeout=0, is_singleton=False, thread_local=False)
            try:
                lock.acquire()
            except Timeout:
                raise _in_use(folder, what) from None
            _HELD[key] = (thread, 1)
    try:
        if lock is not None:
            note = {"pid": os.getpid(), "host": socket.gethostname(), "run": what}
            write_atomically(folder / WRITER_NOTE, json.dumps(note) + "\n")
        yield
    finally:
        with _HELD_GUARD:
            holder_thread, depth = _HELD.pop(key)
            if depth > 1:
                _HELD[key] = (holder_thread, depth - 1)
        if lock is not None:
            (folder / WRITER_NOTE).unlink(missing_ok=True)  # while still held: the next holder writes its own
            lock.release()  # the lock file stays: removing it would let two runs lock two different files


_HELD: dict[str, tuple[int, int]] = {}  # folder -> (the thread holding its lock, how many blocks deep)
_HELD_GUARD = threading.Lock()


def _in_use(folder: Path, what: str) -> FolderInUse:
    """The refusal: who holds `folder` ("pid 4242 on host-a", as the holder wrote it in its note), or that its note
    is not written yet."""
    try:
        found = json.loads((folder / WRITER_NOTE).read_text(encoding="utf-8"))
        holder = f"pid {int(found['pid'])} on {clip(str(found['host']), 80)}"
    except (OSError, ValueError, TypeError, KeyError):
        holder = "its pid is not written yet"
    return FolderInUse(f"{named(folder)} is being written by another {what} run ({holder}); wait for it to end, or "
                       "choose another folder.")

