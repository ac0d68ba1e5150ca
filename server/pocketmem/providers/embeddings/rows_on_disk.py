"""The default encoder's embedding table read from a file, row by row, instead of held in memory.

The multilingual encoder looks each token's row up in a table of 129,010 rows of 512 bytes (65 MB), of which
a user's texts ever touch a few thousand. Held in memory it was the largest part of the server's resident
memory (docs/speed.md, *Memory*). Once loaded, the table is written to the user's cache folder (the same
bytes, checked against the loaded table on every start) and the encoder reads the rows a batch needs with
`os.pread`: the operating system's page cache keeps the hot ones, and they no longer count against the
server. The vectors are the same to the bit (tests/test_neural_default.py).

Where the cache folder cannot be written, the table stays in memory as before. Where the file cannot be read
any more while the server runs (cut short or removed by something else, a disk error), the table is loaded
again from the package (`reload`) and written again; where that write fails, it stays in memory from then on.
Either way the call that met the fault gets the right rows.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from pocketmem.base.files import cache_file, write_atomically

log = logging.getLogger("pocketmem.embeddings")
# Bytes compared at a time when the cache file is checked against the loaded table.
CHUNK = 1 << 20


class RowsOnDisk:
    """Rows of a 2-D uint8 table stored as raw bytes in a file; `rows[ids]` reads those rows, as numpy would.
    `reload` gives the table again when the file fails under it."""

    def __init__(self, path: Path, shape: tuple[int, int], reload: Callable[[], npt.NDArray[np.uint8]]) -> None:
        self.path = path
        self.shape = shape
        self.dtype = np.dtype(np.uint8)
        self._reload = reload
        self._lock = threading.Lock()
        self._held: npt.NDArray[np.uint8] | None = None  # the table, once the file has failed and cannot be mended
        self._fd = os.open(path, os.O_RDONLY)

    def __getitem__(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.uint8]:
        if self._held is None:
            try:
                return self._read(ids)
            except OSError as exc:
                self._mend(exc)
        return self._read(ids) if self._held is None else self._held[ids]

    def _read(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.uint8]:
        width = self.shape[1]
        wanted, back = np.unique(ids, return_inverse=True)
        rows = np.empty((len(wanted), width), dtype=np.uint8)
        for k, row in enumerate(wanted.tolist()):
            data = os.pread(self._fd, width, row * width)
            if len(data) != width:
                raise OSError(f"{self.path} ends before row {row}")
            rows[k] = np.frombuffer(data, dtype=np.uint8)
        return rows[back.reshape(ids.shape)]

    def _mend(self, exc: OSError) -> None:
        """The file failed under a read: load the table again and write the file again, or hold the table."""
        with self._lock:
            if self._held is not None:
                return
            table = self._reload()
            try:
                _write(self.path, table)
                fd = os.open(self.path, os.O_RDONLY)
            except OSError as failed:
                log.warning("the encoder's table file %s failed (%s) and cannot be written again (%s); the table "
                            "stays in memory", self.path, exc, failed.strerror or failed)
                self._held = table
                return
            os.close(self._fd)
            self._fd = fd
            log.warning("the encoder's table file %s failed (%s); it was written again", self.path, exc)


def rows_on_disk(
    table: npt.NDArray[np.uint8], name: str, reload: Callable[[], npt.NDArray[np.uint8]]
) -> RowsOnDisk | None:
    """The table as RowsOnDisk, its file in the cache folder written or checked first; None (keep the table in
    memory) when the folder cannot be written or read. `reload` gives the same table again (RowsOnDisk)."""
    path = cache_file(name)
    try:
        if not _holds(path, table):
            _write(path, table)
        return RowsOnDisk(path, (table.shape[0], table.shape[1]), reload)
    except OSError as exc:
        log.warning("the encoder's table stays in memory (%s: %s)", path.parent, exc.strerror or exc)
        return None


def _holds(path: Path, table: npt.NDArray[np.uint8]) -> bool:
    """Does the file hold exactly the table's bytes? (a file cut short or changed is written again) Read in
    chunks, so the check holds no second copy of the table."""
    try:
        if path.stat().st_size != table.nbytes:
            return False
        wanted = np.ascontiguousarray(table).data.cast("B")
        with path.open("rb") as file:
            for start in range(0, table.nbytes, CHUNK):
                if file.read(CHUNK) != wanted[start : start + CHUNK]:
                    return False
    except FileNotFoundError:
        return False
    return True


def _write(path: Path, table: npt.NDArray[np.uint8]) -> None:
    write_atomically(path, np.ascontiguousarray(table).data.cast("B"))
