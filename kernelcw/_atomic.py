"""Writing a file atomically: under a temporary name beside it, flushed to disk, then
renamed onto it, so an error, a crash or a full disk part-way leaves any file that was
there as it was (:func:`kernelcw.save`)."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable

__all__ = ["write_atomically"]


def write_atomically(target: str, write: Callable) -> None:
    """``write(fh)`` into a temporary file beside ``target``, then rename it onto
    ``target`` with the old file's permissions (else 0o666 minus the umask); the
    temporary file is removed on any error or interrupt. A symbolic link is followed:
    the file it points to is replaced, the link stays a link."""
    given, target = target, os.path.realpath(target)
    directory = os.path.dirname(target)
    if os.path.isdir(target):  # (else the rename's error, naming the temporary file)
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file to write", given)
    mode = _file_mode(target)
    try:
        tmp = tempfile.NamedTemporaryFile(
            dir=directory, prefix="." + os.path.basename(target) + ".", suffix=".tmp",
            delete=False,
        )  # fmt: skip
    except OSError as e:  # (a missing folder, no permission: named as the caller gave it)
        raise _named(e, given) from None
    try:
        with tmp:
            write(tmp)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.chmod(tmp.name, mode)
        os.replace(tmp.name, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp.name)
        if isinstance(e, OSError) and e.filename == tmp.name:  # (a full disk, ...)
            raise _named(e, given) from None
        raise
    _sync_directory(directory)


def _named(err: OSError, path: str) -> OSError:
    """``err`` of the same kind and errno, naming ``path`` (the file the caller asked
    for) instead of the temporary file it was about."""
    if err.errno is None:
        return err
    return type(err)(err.errno, err.strerror, path)


def _file_mode(target: str) -> int:
    """The permissions the saved file gets: the old file's, else 0o666 minus the umask."""
    try:
        return os.stat(target).st_mode & 0o7777
    except OSError:
        pass
    return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read from /proc where it can be (setting and resetting it
    would change it for other threads for a moment)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    umask = os.umask(0o022)  # pragma: no cover - not Linux
    os.umask(umask)  # pragma: no cover
    return umask  # pragma: no cover


def _sync_directory(directory: str) -> None:
    """Flush the rename to disk where the platform allows it (POSIX)."""
    with contextlib.suppress(OSError):  # Windows cannot open a directory
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
