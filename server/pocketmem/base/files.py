"""Files: writing one whole or not at all (a reader, or a crash, never sees half of it), and where the cache
folder is."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import platformdirs


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
