"""Writing files whole or not at all (temporary name, fsync, rename) and one-line messages for failed writes."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


class SweepStoreError(ValueError):
    """A sweep directory that cannot be read or written as asked: one line naming the file and what to do.

    ``path``: the file or directory concerned; ``resumable``: the finished chunks are kept and running
    the same sweep again resumes (the CLI then prints the command).
    """

    def __init__(self, message: str, path: str | os.PathLike[str] | None = None, resumable: bool = False):
        super().__init__(message)
        self.path = path
        self.resumable = resumable


def tmp_name(path: Path) -> Path:
    """The temporary name of an atomic write of ``path`` (in the same directory)."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _write_synced(tmp: Path, data: bytes) -> None:
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _errno(exc: OSError) -> int | None:
    if exc.errno is not None:
        return exc.errno
    return exc.args[0] if exc.args and isinstance(exc.args[0], int) else None


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (temporary file, fsync, rename).

    On failure (a full disk, a read-only directory) the temporary file is removed and an OSError
    naming ``path`` itself (its ``filename``) is raised; an existing ``path`` is left as it was.
    """
    path = Path(path)
    tmp = tmp_name(path)
    try:
        _write_synced(tmp, data)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            tmp.unlink(missing_ok=True)  # our own temporary file, created just above
        except OSError:
            pass
        if isinstance(exc, OSError) and exc.filename != str(path):
            code = _errno(exc)
            raise OSError(code, exc.strerror or (os.strerror(code) if code else str(exc)), str(path)) from exc
        raise
    fsync_dir(path.parent)


def write_error(exc: OSError, what: str) -> str:
    """One line for a failed write: the file, the reason and what to do (``what``: how to resume)."""
    code = _errno(exc)
    name = errno.errorcode.get(code, "") if code is not None else ""
    reason = (exc.strerror or (os.strerror(code) if code else str(exc))) + (f" ({name})" if name else "")
    path = exc.filename or "?"
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        todo = "free disk space (or use another --out)"
    elif code in (errno.EROFS, errno.EACCES, errno.EPERM):
        todo = f"make {Path(path).parent} writable (or use another --out)"
    else:
        todo = "fix the cause"
    return f"cannot write {path}: {reason}; {todo}, then {what}"
