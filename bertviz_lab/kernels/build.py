"""Building and loading the AVX2 kernels of avx2.c (GEMM on packed weights with an optional GELU epilogue,
attention): built once with the system C compiler (about a second), cached, and called through ctypes.

MKL's `addmm`, which PyTorch (and so transformers) calls for every linear layer, is least efficient on the
few-row products of short inputs; PyTorch's CPU attention and GELU leave time on the table too (measured on AMD
EPYC, benchmarks/README.md). The kernels run only where they can share PyTorch's OpenMP threads (Linux, x86-64,
AVX2 + FMA, PyTorch on libgomp) and only once they have built; anywhere else `library()` answers None and the
layers keep PyTorch's own paths.

Loading a library runs its code, so the cache is trusted only as far as it is private: the folder (made 0700) and
its files must belong to this user and be writable by nobody else, and a library is loaded only once its size and
sha256 match the record written when it was built. The key names the source, the flags and the compiler
(`$CC --version`); without a compiler, a verified build already in the cache still runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import hashlib
import json
import logging
import os
import platform
import secrets
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path

import torch

from bertviz_lab.kernels.head_statistics import STATISTIC_NAMES

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("avx2.c")
ABI_VERSION = 9
# -falign-loops=64: where the GEMM's inner loop happens to start moves its speed by ~8% (measured on Zen 3)
FLAGS = ["-O3", "-mavx2", "-mfma", "-falign-loops=64", "-fopenmp", "-fPIC", "-shared", "-std=gnu11", "-lm"]
BUILD_TIMEOUT_S = 120
MAX_RECORD_BYTES = 1 << 16  # a build record is a few hundred bytes

_loading = threading.Lock()  # one build at a time in this process
_loaded_fds: list[int] = []  # the open fds that the loaded libraries were loaded through (see _dlopen)
_failure: str | None = None  # why library() answered None


def cache_dir() -> Path:
    """Where the built library is kept: $BERTVIZ_LAB_CACHE, else the user's cache folder."""
    if os.environ.get("BERTVIZ_LAB_CACHE"):
        return Path(os.environ["BERTVIZ_LAB_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "bertviz_lab"


class CacheError(RuntimeError):
    """The cache folder or a library in it that must not be loaded (someone else could have written it, or it
    changed since it was built) or that does not load: said in a warning, never a quiet fallback."""


class StatisticsOrderError(RuntimeError):
    """avx2.c writes its statistics in another order than head_statistics.STATISTICS names them: a mistake in the
    package's own sources, which the kernel must not run with (its columns would carry the wrong names)."""


def check_statistics_order(names: str) -> None:
    """Raise StatisticsOrderError, in one line, unless the kernel's comma-separated statistic names are the
    registry's, in its order."""
    found = tuple(names.split(","))
    if found != STATISTIC_NAMES:
        raise StatisticsOrderError(f"avx2.c writes the statistics as {', '.join(found)} but head_statistics.py "
                                   f"names them {', '.join(STATISTIC_NAMES)}: put them in one order")


def _compiler() -> list[str]:
    """$CC (which may carry flags, as in `gcc -m64`) or `cc`."""
    return shlex.split(os.environ.get("CC", "cc")) or ["cc"]


def _compiler_version() -> str | None:
    """The first line of `$CC --version`, part of the cache key (a new compiler builds anew); None where no
    compiler answers, and then only a build already in the cache can run."""
    compiler = _compiler()
    if shutil.which(compiler[0]) is None:
        return None
    try:
        done = subprocess.run([*compiler, "--version"], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[0] if done.returncode == 0 and lines else None


def _shares_pytorch_openmp() -> bool:
    """Whether PyTorch runs on libgomp, so that the library's OpenMP threads are PyTorch's own (not a rival pool)."""
    try:
        return "/libgomp" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


def unsupported_reason() -> str | None:
    """Why the kernel cannot run in this process whatever the cache holds (OS, CPU, OpenMP), or None when it can."""
    if not sys.platform.startswith("linux") or platform.machine().lower() not in ("x86_64", "amd64"):
        return f"needs Linux on x86-64, not {sys.platform} on {platform.machine()}"
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in ("AVX2", "AVX512"):
        return f"needs a CPU with AVX2 and FMA, PyTorch reports {capability}"
    if not _shares_pytorch_openmp():
        return "needs PyTorch built on GNU OpenMP (libgomp)"
    return None


def _source_key() -> str:
    """What a build of this source with these flags is named by, whichever compiler made it."""
    return hashlib.sha256(SOURCE.read_bytes() + " ".join(FLAGS).encode()).hexdigest()[:16]


def _build_name(compiler_version: str) -> str:
    """The file name (without suffix) of this source's build by this compiler: `avx2-<source>-<compiler>`."""
    compiler = hashlib.sha256(f"{shlex.join(_compiler())}\n{compiler_version}".encode()).hexdigest()[:8]
    return f"avx2-{_source_key()}-{compiler}"


def _refuse_unless_private(st: os.stat_result, path: Path, what: str) -> None:
    """Raise CacheError unless this user owns `path` and nobody else may write it; checked on the owner and mode
    bits themselves, since root passes every access() check."""
    if st.st_uid != os.geteuid():
        raise CacheError(f"{what} {path} belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()}); the "
                         f"AVX2 kernels are only loaded from a folder and files of this user's own")
    if st.st_mode & 0o022:
        raise CacheError(f"{what} {path} is writable by group or others ({stat.filemode(st.st_mode)}); the AVX2 "
                         f"kernels are only loaded from a folder and files nobody else may write (chmod 700 it, or "
                         f"set BERTVIZ_LAB_CACHE to a private folder)")


def _make_private_directories(directory: Path) -> None:
    """Create `directory` and its missing parents with mode 0700 whatever the umask (which mkdir's mode obeys)."""
    for path in reversed([p for p in (directory, *directory.parents) if not p.exists()]):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue  # made meanwhile by someone else: judged when opened
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            if os.fstat(fd).st_uid == os.geteuid():
                os.fchmod(fd, 0o700)
        finally:
            os.close(fd)


def _open_cache_directory(directory: Path, create: bool) -> int:
    """An fd on `directory` (made 0700 where missing and `create`), once it is private: everything after goes
    through this fd, so whatever later happens to the path does not change which files are read and loaded."""
    if create:
        _make_private_directories(directory)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _refuse_unless_private(os.fstat(fd), directory, "the cache folder")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_private_file(dir_fd: int, directory: Path, name: str) -> int:
    """An fd on the regular file `name` in the cache (links not followed), once it is private."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise CacheError(f"{directory / name} is a symbolic link; the AVX2 kernels are not loaded through one")
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CacheError(f"{directory / name} is not a regular file")
        _refuse_unless_private(st, directory / name, "the file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_record(dir_fd: int, directory: Path, name: str) -> tuple[int, str]:
    """The (size, sha256) that `_build` recorded for `name`.so; FileNotFoundError where it was never built."""
    record_name = f"{name}.json"
    with os.fdopen(_open_private_file(dir_fd, directory, record_name), "rb") as file:
        text = file.read(MAX_RECORD_BYTES)
    try:
        record = json.loads(text)
        return int(record["size"]), str(record["sha256"])
    except (ValueError, KeyError, TypeError) as error:
        raise CacheError(f"{directory / record_name} is not a build record of the AVX2 kernels ({error!r})") from None


def _open_verified_library(dir_fd: int, directory: Path, name: str) -> int:
    """An fd on `name`.so once its size and sha256 are those recorded when it was built (truncated, overwritten
    or foreign files are never mapped: mapping one can kill the process or run its code)."""
    size, digest = _read_record(dir_fd, directory, name)
    path = directory / f"{name}.so"
    try:
        fd = _open_private_file(dir_fd, directory, path.name)
    except FileNotFoundError:
        raise CacheError(f"{path} is missing, though its build record is there") from None
    try:
        found = os.fstat(fd).st_size
        if found != size:
            raise CacheError(f"{path} has {found} bytes where its build record says {size}: it changed since it "
                             f"was built")
        sha256 = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            sha256.update(chunk)
        if sha256.hexdigest() != digest:
            raise CacheError(f"{path} does not have the sha256 of its build record: it changed since it was built")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _dlopen(fd: int, path: Path) -> ctypes.CDLL:
    """Load the very file behind `fd`, the one verified, whatever its path names by now. glibc knows a library by
    the name it was loaded under and would answer a later /proc/self/fd/N with this one, so the fd stays open for
    the life of the process and N is never reused."""
    try:
        lib = ctypes.CDLL(f"/proc/self/fd/{fd}")
    except OSError as error:
        os.close(fd)
        raise CacheError(f"{path} does not load: {error}") from None
    _loaded_fds.append(fd)
    return lib


def _bind(lib: ctypes.CDLL, path: Path) -> ctypes.CDLL:
    """Declare the C signatures; CacheError where `lib` is not this version of avx2.c, StatisticsOrderError where
    it writes the statistics in another order than the registry names them."""
    i64, ptr, c_int = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
    for name, restype, argtypes in (
        ("bvl_abi_version", i64, []),
        ("bvl_statistics_names", ctypes.c_char_p, []),
        ("bvl_packed_floats", i64, [i64, i64]),
        ("bvl_pack_weight", None, [ptr, i64, i64, i64, ptr, c_int]),
        ("bvl_linear", c_int, [ptr, i64, i64, i64, ptr, i64, ptr, c_int, ptr, i64, c_int]),
        ("bvl_gelu", None, [ptr, ptr, i64, c_int]),
        ("bvl_add_layer_norm", None, [ptr, ptr, i64, i64, ptr, ptr, ctypes.c_float, ptr, c_int]),
        ("bvl_entropy", None, [ptr, i64, i64, i64, ptr, c_int]),
        ("bvl_attention", c_int, [ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, i64, i64, i64, ctypes.c_float,
                                  ptr, ptr, ptr, ptr, ptr, c_int]),
        ("bvl_attention_statistics", c_int, [ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, i64, i64, ctypes.c_float, ptr,
                                             c_int]),
    ):
        try:
            fn = getattr(lib, name)
        except AttributeError as error:
            raise CacheError(f"{path} is not a build of the AVX2 kernels ({error})") from None
        fn.restype, fn.argtypes = restype, argtypes
    if lib.bvl_abi_version() != ABI_VERSION:
        raise CacheError(f"{path} is another build of the AVX2 kernels (ABI {lib.bvl_abi_version()}, "
                         f"expected {ABI_VERSION})")
    check_statistics_order(lib.bvl_statistics_names().decode())
    return lib


def _load_build(dir_fd: int, directory: Path, name: str) -> ctypes.CDLL:
    """`name`.so from the cache, verified, loaded and bound."""
    path = directory / f"{name}.so"
    return _bind(_dlopen(_open_verified_library(dir_fd, directory, name), path), path)


def _write_atomically(dir_fd: int, name: str, data: bytes) -> None:
    """Write a new private file, then rename it over `name`: readers see the old file or the whole new one."""
    temporary = f".{name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                 dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=dir_fd)
        raise


def _build(dir_fd: int, name: str, compiler_version: str) -> None:
    """Compile in a private temporary folder, then put the library and its record (size, sha256) into the cache:
    what is recorded is exactly what the compiler wrote, and the record comes last."""
    with tempfile.TemporaryDirectory(prefix="bertviz_lab-") as private:
        output = Path(private) / f"{name}.so"
        cmd = [*_compiler(), *FLAGS, str(SOURCE), "-o", str(output)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"building the AVX2 kernels failed ({' '.join(cmd)}):\n{done.stderr.strip()}")
        data = output.read_bytes()
    record = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "compiler": compiler_version,
              "command": cmd[:-2]}
    _write_atomically(dir_fd, f"{name}.so", data)
    _write_atomically(dir_fd, f"{name}.json", json.dumps(record, indent=1).encode())


def _load_or_build(dir_fd: int, directory: Path, compiler_version: str) -> ctypes.CDLL:
    """This compiler's verified build from the cache; built first where there is none, and built once more where
    the one there fails its checks or does not load."""
    name = _build_name(compiler_version)
    try:
        return _load_build(dir_fd, directory, name)
    except FileNotFoundError:
        pass  # not built yet
    except CacheError as error:
        warnings.warn(f"bertviz_lab rebuilds its AVX2 kernels: {error}", RuntimeWarning, stacklevel=4)
    _build(dir_fd, name, compiler_version)
    return _load_build(dir_fd, directory, name)


def _load_any_build(dir_fd: int, directory: Path) -> ctypes.CDLL:
    """With no compiler: the newest verified build of this source and flags, whichever compiler made it."""
    prefix = f"avx2-{_source_key()}-"
    records = [entry for entry in os.listdir(dir_fd) if entry.startswith(prefix) and entry.endswith(".json")]
    records.sort(key=lambda entry: os.stat(entry, dir_fd=dir_fd, follow_symlinks=False).st_mtime, reverse=True)
    for record in records:
        try:
            return _load_build(dir_fd, directory, record[:-len(".json")])
        except CacheError as error:
            warnings.warn(f"bertviz_lab skips a cached build of its AVX2 kernels: {error}", RuntimeWarning,
                          stacklevel=4)
    raise FileNotFoundError(f"no verified build of the AVX2 kernels in {directory}")


def load(directory: Path | None = None) -> ctypes.CDLL:
    """The kernel from `directory` (default `cache_dir()`), verified against the record of its build, built there
    first where needed; without a C compiler, a build already there."""
    reason = unsupported_reason()
    if reason is not None:
        raise RuntimeError(f"the AVX2 kernels cannot run here: {reason}")
    directory = directory or cache_dir()
    compiler_version = _compiler_version()
    try:
        dir_fd = _open_cache_directory(directory, create=compiler_version is not None)
        try:
            if compiler_version is not None:
                return _load_or_build(dir_fd, directory, compiler_version)
            return _load_any_build(dir_fd, directory)
        finally:
            os.close(dir_fd)
    except FileNotFoundError:
        if compiler_version is not None:
            raise
        raise RuntimeError(f"the AVX2 kernels cannot run here: no C compiler ({_compiler()[0]}) to build them, "
                           f"and no verified build of them in {directory}") from None


@functools.cache
def library() -> ctypes.CDLL | None:
    """The kernel for this process, or None where it cannot run or did not build. Said in a warning where the cache
    is unsafe, the kernel disagrees with the statistics' registry or BERTVIZ_LAB_CPU_GEMM=avx2 asked for the kernel,
    else logged at INFO (no AVX2 here is normal)."""
    with _loading:  # %load_ext's warm-up and a first forward may ask at once: one builds, the other then loads
        try:
            return load()
        except (OSError, RuntimeError, subprocess.SubprocessError) as error:
            global _failure
            _failure = str(error)
            message = f"bertviz_lab's AVX2 kernels are off, the layers use PyTorch's: {error}"
            loud = isinstance(error, (CacheError, StatisticsOrderError))
            if loud or os.environ.get("BERTVIZ_LAB_CPU_GEMM") == "avx2":
                warnings.warn(message, RuntimeWarning, stacklevel=2)
            else:
                log.info(message)
            return None


def failure() -> str | None:
    """Why `library()` answered None (the error it met), or None where it loaded or was not asked yet."""
    return _failure
