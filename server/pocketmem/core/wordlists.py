"""The word lists and sentences shipped as data in core/data/ (each file's source: core/data/NOTICE.md).

    slot_words.tsv       group, name, words   the slot lexicon of core/slots.py
    stop_words.tsv       group, language, words   stop words and question filler of core/text.py
    irregular_forms.tsv  base, forms          English forms the Snowball stemmer does not fold
    time_words.tsv       group, language, phrases (|)   the time cues of core/timeexpr.py
    surnames.tsv         group, -, surnames   common Chinese surnames, for core/sameness.py
    kinship.tsv          kin, relative, words   family words, for core/sameness.py
    aspect_words.tsv     group, -, words      time and mode words (plan, past, frequency), for core/sameness.py
    calibration.json     the reference sentences of service/shared/calibration.py

Rows are tab-separated; `#` starts a comment line. Files are read once, on first use.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("data")


@cache
def rows(name: str) -> tuple[tuple[str, ...], ...]:
    """The tab-separated rows of a data file, comments and blank lines left out."""
    with (DATA / name).open(encoding="utf-8") as lines:
        return tuple(tuple(line.rstrip("\n").split("\t")) for line in lines if line.strip() and line[0] != "#")


def words(name: str, group: str) -> dict[str, tuple[str, ...]]:
    """The rows of `group` in a group<TAB>key<TAB>words file: key -> its words, in file order."""
    return {row[1]: tuple(row[2].split()) for row in rows(name) if row[0] == group}


def phrases(name: str, group: str) -> dict[str, tuple[str, ...]]:
    """The rows of `group` in a group<TAB>key<TAB>phrases file, phrases separated by |: key -> its phrases."""
    return {row[1]: tuple(p.strip() for p in row[2].split("|")) for row in rows(name) if row[0] == group}


@cache
def document(name: str) -> Any:
    """A JSON data file."""
    with (DATA / name).open(encoding="utf-8") as text:
        return json.load(text)
