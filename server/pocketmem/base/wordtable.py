"""Words in a marisa trie with their values in flat arrays, kept in the user's cache folder.

A Python dict of a few hundred thousand words costs about a hundred bytes a word (the string, the value and
the slot): jieba's dictionary as its two dicts is about 100 MB resident (core/dictionary.py). A marisa trie
(`marisa-trie`: a static, compressed trie in C++) holds the 498,113 keys of that dictionary in 1.3 MB and
numbers them 0 to n - 1; a key's values sit at its number in `array` columns (4 bytes a count, 1 a tag, 8 a
float). A lookup walks the trie: a fraction of a microsecond, a few times a dict's.

Building a trie takes a second or two, and its working memory stays in the process's heap after it is freed
(about 38 MB for jieba's dictionary), so a table is built once and written to the cache folder
(base/files.py) under a name that carries a digest of its source file: later starts read it in milliseconds,
with only the table's own size resident, and another source (another jieba) gets a file of its own. The file
carries a digest of its contents; one that is missing, cut short or changed is built and written again.
Where the folder cannot be written or read, the table built stays in memory, with a warning in the log.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import marisa_trie

from pocketmem.base.files import cache_file, write_atomically

log = logging.getLogger("pocketmem.text")
MAGIC = b"pocketmem word table 1\n"
_DIGEST = hashlib.sha256().digest_size


@dataclass(frozen=True)
class WordTable:
    """Keys in a trie and, per column, one value a key at the key's number; `meta` holds what else the table
    needs (JSON: jieba's total count, its tags' names)."""

    trie: marisa_trie.Trie
    columns: dict[str, array[Any]]
    meta: dict[str, Any] = field(default_factory=dict)

    def number(self, key: str) -> int | None:
        """The key's number, None for a key the table lacks. marisa-trie's lookups stop at a NUL character
        (`get("ab\\0")` answers for "ab"), and no table holds one: a key with it is absent."""
        return None if "\0" in key else self.trie.get(key)


class Column:
    """One column of a table read by key as a read-only dict is: `key in column`, `column[key]` (KeyError for
    a key the table lacks) and `column.get(key, default)`."""

    __slots__ = ("_number", "_values")

    def __init__(self, table: WordTable, name: str) -> None:
        self._number = table.number
        self._values = table.columns[name]

    def __contains__(self, key: str) -> bool:
        return self._number(key) is not None

    def __getitem__(self, key: str) -> Any:
        number = self._number(key)
        if number is None:
            raise KeyError(key)
        return self._values[number]

    def get(self, key: str, default: Any = None) -> Any:
        number = self._number(key)
        return default if number is None else self._values[number]


def zeros(typecode: str, length: int) -> array[Any]:
    """A column of `length` zeros."""
    return array(typecode, bytes(array(typecode).itemsize * length))


def cached(name: str, source: Path, build: Callable[[], WordTable]) -> WordTable:
    """The table `build` makes from `source`: read from its file in the cache folder, or built and written
    there (module doc)."""
    with source.open("rb") as data:
        digest = hashlib.file_digest(data, "sha256").hexdigest()[:16]
    path = cache_file(f"{name}-{digest}.bin")
    try:
        return decode(path.read_bytes())
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        log.warning("the word table %s is built again (%s)", name, exc)
    table = build()
    try:
        write_atomically(path, encode(table))
    except OSError as exc:
        log.warning("the word table %s stays in memory (%s: %s)", name, path.parent, exc.strerror or exc)
    return table


def encode(table: WordTable) -> bytes:
    """The file of a table: MAGIC, the digest of the rest, a JSON header line, the trie, the columns."""
    trie = table.trie.tobytes()
    header = {
        "byteorder": sys.byteorder,
        "trie": len(trie),
        "columns": [[name, column.typecode, len(column)] for name, column in table.columns.items()],
        "meta": table.meta,
    }
    body = b"".join([json.dumps(header).encode(), b"\n", trie, *(c.tobytes() for c in table.columns.values())])
    return MAGIC + hashlib.sha256(body).digest() + body


def decode(data: bytes) -> WordTable:
    """The table a file holds; ValueError when it is not one whole table of this machine's byte order."""
    body = memoryview(data)[len(MAGIC) + _DIGEST :]
    if not data.startswith(MAGIC) or hashlib.sha256(body).digest() != data[len(MAGIC) : len(MAGIC) + _DIGEST]:
        raise ValueError("the file is cut short or changed")
    start = data.index(b"\n", len(MAGIC) + _DIGEST) + 1
    try:
        header = json.loads(data[len(MAGIC) + _DIGEST : start])
        if header["byteorder"] != sys.byteorder:
            raise ValueError("the file was written on a machine of another byte order")
        end = start + header["trie"]
        trie = marisa_trie.Trie().frombytes(data[start:end])
        columns: dict[str, array[Any]] = {}
        for name, typecode, length in header["columns"]:
            column = columns[name] = array(typecode)
            start, end = end, end + column.itemsize * length
            column.frombytes(data[start:end])
            if len(column) != len(trie):
                raise ValueError(f"its column {name} does not hold a value for each key")
    except (KeyError, TypeError) as exc:
        raise ValueError(f"its header is not a word table's ({exc!r})") from None
    if end != len(data):
        raise ValueError("the file holds more than its header says")
    return WordTable(trie, columns, header["meta"])
