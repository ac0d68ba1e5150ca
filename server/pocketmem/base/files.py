"""Files: writing one whole or not at all (a reader, or a crash, never sees half of it), only where a file may be
written (a new path or a regular file, never a device, a directory, a pipe or a symbolic link), what stands where a
file or a folder of pocketmem's should be, and where the cache folder is."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import platformdirs

from pocketmem.base.errors import FileNotWritten, InvalidInput


def write_atomically(path: Path, data: bytes | memoryview, *, unless: Callable[[], bool] | None = None) -> bool:
    """Write `data` into a temporary file in the same folder, flush it to disk, then rename it over `path`.
    `unless`, asked right before the rename (after the slow flush): when it answers True, `path` is left as it
    is and nothing is written. Whether `path` was replaced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if unless is not None and unless():
            Path(temporary).unlink()
            return False
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return True


def cache_file(name: str) -> Path:
    """A file in the user's cache folder (`platformdirs`; on Linux ~/.cache/pocketmem/): what can be made
    again from the package's own data, kept so that a start reads it instead of making it."""
    return Path(platformdirs.user_cache_dir("pocketmem")) / name


def atomic_write(path: Path, text: str, unless: Callable[[], bool] | None = None) -> bool:
    """Write via a temporary file in the same folder and rename, so a reader never sees half a file; `unless` as
    in write_atomically. Whether the file was replaced."""
    check_target(path)
    try:
        return write_atomically(path, text.encode("utf-8"), unless=unless)
    except OSError as exc:
        kept = "the file there is kept as it was" if path.exists() else "no file was made"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise FileNotWritten(f"the disk holding {path} is full: {kept}; free some space and try again") from None
        raise FileNotWritten(f"cannot write {path} ({exc.strerror or exc}): {kept}") from None


def _mode(path: Path, field: str) -> int | None:
    """What `path` itself is (a symbolic link not followed), or None when nothing is there yet."""
    try:
        return path.lstat().st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidInput(field, f"cannot check {path}: {exc.strerror}") from None


def in_place_of(path: Path | str, wanted: Literal["file", "folder"]) -> str | None:
    """What stands at `path` instead of a `wanted` (a regular file, or a folder), links followed, in words for a
    message: `a folder`, `a file`, `a named pipe`, `a socket`, `a device`, `a symbolic link that leads back to itself
    (a loop)`, `a symbolic link to X, which does not exist`; a link's target named (`a device (a link to /dev/null)`).
    None when nothing is there, or a `wanted` is."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link that leads back to itself (a loop)"
        if os.path.islink(path):
            return f"a symbolic link to {os.readlink(path)}, which does not exist"
        return None
    if (stat.S_ISDIR(mode) if wanted == "folder" else stat.S_ISREG(mode)):
        return None
    what = ("a folder" if stat.S_ISDIR(mode) else "a file" if stat.S_ISREG(mode) else "a named pipe"
            if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device")
    return f"{what} (a link to {os.readlink(path)})" if os.path.islink(path) else what


def check_target(path: Path, field: str = "output") -> None:
    """An export goes only to a new path or over an existing regular file: never a device, a directory,
    a pipe or a symbolic link (the rename would replace whatever is there)."""
    mode = _mode(path, field)
    if mode is None or stat.S_ISREG(mode):
        return
    kind = (
        "directory" if stat.S_ISDIR(mode) else "symbolic link" if stat.S_ISLNK(mode)
        else "device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "pipe" if stat.S_ISFIFO(mode)
        else "socket" if stat.S_ISSOCK(mode) else "special file"
    )
    raise InvalidInput(field, f"{path} is a {kind}; give a new file name or an existing regular file")


def check_directory(path: Path, field: str) -> None:
    """An export folder is a new path or an existing directory: never a symbolic link (dangling or not), a file
    or a device, as `check_target` refuses them for a file."""
    mode = _mode(path, field)
    if mode is not None and not stat.S_ISDIR(mode):
        kind = "symbolic link" if stat.S_ISLNK(mode) else "file" if stat.S_ISREG(mode) else "special file"
        raise InvalidInput(field, f"{path} is a {kind}; give a new folder name or an existing folder")
