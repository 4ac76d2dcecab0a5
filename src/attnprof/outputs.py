"""The files a command writes: never one of its inputs, always whole.

Every writer (report, results, the policy, a bundle, run.json, analyze --html) goes through
`write_atomic` or `atomic_path`: the bytes go to a temporary file in the target's own folder,
which is renamed over the target only once it is complete. A full disk, a kill or Ctrl-C half
way leaves the old file as it was (and no temporary file behind). The rename is in one folder,
so one file system: rename(2) replaces the target in one step. No fsync: the promise is about
a failing or killed command, not about a power cut, and fsync costs a run.json write each time.

`refuse_inputs` stops a command writing over a file it reads (`report RUN --format md -o
RUN/run.json`, `recommend --policy-out STORE.db`): the same file by inode, so another spelling
of the path, a hard link or a symlink are caught too.

OS errors on an output path become one line (`path_error`): the path, what the system said,
and what to do about it (exit 2): the user chose the path, the system said no.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from attnprof.errors import UserError

__all__ = [
    "PATH_ERRNOS",
    "atomic_path",
    "os_error_line",
    "path_error",
    "refuse_inputs",
    "run_inputs",
    "write_atomic",
]

# kernel file systems: nothing a report or a policy can be written into
_VIRTUAL = (Path("/proc"), Path("/sys"))

# what to do about an errno on a path the user chose
_FIXES = {
    errno.ENOSPC: "the disk is full: free some space or choose a path on another disk",
    errno.EDQUOT: "the disk quota is used up: free some space or choose a path on another disk",
    errno.ENAMETOOLONG: "the name is too long for the file system: choose a shorter name",
    errno.EROFS: "the file system is read-only: choose a path on a writable disk",
    errno.EACCES: "choose another path or fix its permissions",
    errno.EPERM: "choose another path or fix its permissions",
    errno.ENOENT: "check the path (its folder must exist)",
    errno.ENOTDIR: "a part of the path is a file, not a folder: choose another path",
    errno.EISDIR: "it is a folder: give a file name",
    errno.ELOOP: "it is a loop of symbolic links: choose another path",
    errno.EXDEV: "choose a path on a local disk",
}

# the errnos that say the path or the system refused, not that attnprof has a bug
PATH_ERRNOS = frozenset(_FIXES)


def path_error(path: str | os.PathLike[str], exc: OSError, *, option: str | None = None) -> UserError:
    """One line for an OS error on a path the user gave: the path, the system's words, the fix."""
    said = (exc.strerror or str(exc)).lower()
    fix = _FIXES.get(exc.errno or 0, "choose another path")
    where = f"{option} {path}" if option else str(path)
    return UserError(f"{where}: cannot write it ({said}); {fix}")


def os_error_line(exc: OSError) -> str:
    """The one line for an OS error that carries the path it was about (read or write)."""
    said = (exc.strerror or str(exc)).lower()
    return f"{exc.filename}: {said}; {_FIXES.get(exc.errno or 0, 'choose another path')}"


def _check_writable_place(target: Path, option: str | None) -> None:
    real = Path(os.path.realpath(target))
    for root in _VIRTUAL:
        if real == root or root in real.parents:
            where = f"{option} {target}" if option else str(target)
            raise UserError(
                f"{where} is under {root}, a kernel file system that holds no files of ours: "
                "choose a path on a disk"
            )


def _mode_for(real: Path) -> int:
    """The new file's permissions: the old file's, else what open() would give under the umask."""
    try:
        return stat.S_IMODE(real.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str], *, option: str | None = None) -> Iterator[Path]:
    """A temporary path beside `target` to write to; renamed over `target` when the block ends
    without an error, removed when it raises. A target that exists and is not a regular file
    (/dev/stdout, /dev/null, a FIFO) is written in place: it cannot be renamed over, and it holds
    nothing to lose. A symlink's target is replaced, not the link. OS errors become one line."""
    path = Path(target)
    _check_writable_place(path, option)
    real = Path(os.path.realpath(path))
    try:
        mode = real.stat().st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        try:
            yield real
        except OSError as exc:
            raise path_error(path, exc, option=option) from None
        return
    if mode is not None and stat.S_ISDIR(mode):
        raise path_error(path, IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)), option=option)
    try:
        fd, tmp_name = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name[:200]}.", suffix=".tmp")
    except OSError as exc:
        raise path_error(path, exc, option=option) from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, _mode_for(real))
        os.replace(tmp, real)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise path_error(path, exc, option=option) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(target: str | os.PathLike[str], data: str | bytes, *, option: str | None = None) -> None:
    """Write `data` (text as UTF-8) to `target` whole or not at all (see atomic_path)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_path(target, option=option) as tmp, open(tmp, "wb") as fh:
        fh.write(raw)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


# what the reading commands read inside a run directory (or a folder of runs): the run records,
# the traces and the tables; a report or an archive written there before is an output
_READ_SUFFIXES = (".json", ".json.gz", ".txt", ".db")


def run_inputs(path: str | os.PathLike[str]) -> list[Path]:
    """The files a command reads from `path`: the file itself, or in a folder every run record,
    trace and table under it."""
    p = Path(path)
    if not p.is_dir():
        return [p]
    return [f for f in p.rglob("*") if f.name.endswith(_READ_SUFFIXES) and f.is_file()]


def refuse_inputs(
    output: str | os.PathLike[str] | None, inputs: Iterable[str | os.PathLike[str]], *, option: str
) -> None:
    """Refuse, in one line, an output that is one of the inputs (by inode: any spelling, hard
    link or symlink of it). `inputs` are files; a folder stands for what run_inputs finds in it."""
    if output is None or str(output) == "-":
        return
    out = _identity(Path(output))
    if out is None:
        return
    for given in inputs:
        for f in run_inputs(given):
            if _identity(f) == out:
                same = "" if Path(output) == f else f"{f}, "
                raise UserError(
                    f"{option} {output} is {same}one of this command's inputs: writing there would "
                    f"destroy it; choose another {option} path (nothing was written)"
                )
