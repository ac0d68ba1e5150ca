"""An export file's lines, as `pocketmem import` and the page's upload read them: one at a time, in chunks of at
most CHUNK bytes, so a file is never read whole before it is known to be an export.

What is refused whole, before any row is stored: a SQLite database (a store's memory.db, which is used by pointing
POCKETMEM_HOME at its folder, not imported), bytes that are mostly NUL, UTF-16 or UTF-32 text (with how to convert
it), and a line longer
than MAX_LINE_BYTES (a stream with no line ends was read into memory until the machine ran out).
Bytes that are not UTF-8 stay in their line, which exporting.parse then refuses alone."""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from typing import BinaryIO

from pocketmem.base.config import MAX_CONTENT_CHARS_CEILING
from pocketmem.base.errors import InvalidInput

CHUNK = 1 << 16
# The longest line an export writes: a revision's or a set-aside event's texts, each a memory's content of up to the
# most characters POCKETMEM_MAX_CONTENT_CHARS may allow, at up to 12 bytes a character (a character outside the
# BMP written as two \uXXXX escapes), with room to spare: 64 bytes a character, 6,400,000 bytes.
MAX_LINE_BYTES = 64 * MAX_CONTENT_CHARS_CEILING
SQLITE_HEADER = b"SQLite format 3\x00"
_UTF16_32 = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def file_lines(file: BinaryIO, field: str = "FILE") -> Iterator[str]:
    """An export file's lines, read as they are used (an upload stays on disk). Lines split as str.splitlines splits
    the whole text. InvalidInput, naming `field`, for a file refused whole (see above)."""
    start = file.read(4096)
    if start.startswith(SQLITE_HEADER):
        raise InvalidInput(field, "is a SQLite database (a pocketmem store's memory.db?), not an export: to use that "
                                  "store, set POCKETMEM_HOME to its folder (or POCKETMEM_DB to the file); to copy its "
                                  "memories into this store, run `pocketmem export -o FILE` with POCKETMEM_HOME set "
                                  "to its folder, then import FILE")
    if start.count(0) > 0.75 * len(start):  # more than UTF-32 text of ASCII letters has: /dev/zero, a disk image
        raise InvalidInput(field, "is not text (it is mostly NUL bytes): not a pocketmem export, nothing was imported")
    if start.startswith(_UTF16_32) or b"\x00" in start:
        raise InvalidInput(field, "is UTF-16 or UTF-32 text; pocketmem exports are UTF-8 JSON lines: convert it "
                                  "(e.g. iconv -f UTF-16 -t UTF-8) and import again")
    return _decoded(_raw_lines(start, file, field))


def _raw_lines(start: bytes, file: BinaryIO, field: str) -> Iterator[bytes]:
    """The file's lines split at b"\\n" (which no UTF-8 character holds inside it), `start` being its first bytes,
    already read; InvalidInput for a line longer than MAX_LINE_BYTES."""
    buffer, searched, number = bytearray(start), 0, 1
    while True:
        cut = buffer.find(b"\n", searched)
        if cut >= 0:
            yield bytes(buffer[:cut + 1])
            del buffer[:cut + 1]
            searched, number = 0, number + 1
            continue
        if len(buffer) > MAX_LINE_BYTES:
            raise InvalidInput(field, f"line {number} is longer than {MAX_LINE_BYTES:,} bytes, the most an export "
                                      "writes: this is not a pocketmem export (nothing was imported)")
        searched = len(buffer)
        chunk = file.read(CHUNK)
        if not chunk:
            if buffer:
                yield bytes(buffer)
            return
        buffer += chunk


def _decoded(raws: Iterator[bytes]) -> Iterator[str]:
    for number, raw in enumerate(raws):
        text = (raw.removeprefix(codecs.BOM_UTF8) if number == 0 else raw).decode("utf-8", errors="surrogateescape")
        yield from text.splitlines()
