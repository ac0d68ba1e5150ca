"""Does the user's message call for long-term memory (docs/profile.md, "The context package")? Pure.

Triggers: a reference to the past (之前、还记得、上次、历史、以前、那次; before, remember, last time,
history), a date (2026-03-05, 3月5日, 昨天, 上周, last month, ...) or a file name (report.pdf, main.py).
File names are returned too: they make good recall keywords.

Every pattern is linear in the text's length: a run a pattern could start inside (digits before 天前, a path
before .py) may only be matched from its first character (the look-behinds), so a long unbroken run (a pasted
log, 60,000 × "a") is read once, not once per position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PAST = re.compile(
    r"之前|还记得|记不记得|记得吗|上次|上回|历史|以前|那次|当时|曾经|"
    r"\b(?:remember|last time|earlier|before|history|previously|back then|we talked|you said)\b",
    re.IGNORECASE,
)
_DATE = re.compile(
    r"\d{4}[-/.年]\d{1,2}(?:[-/.月]\d{1,2}[日号]?)?|\d{1,2}月\d{1,2}[日号]|昨天|前天|上周|上星期|上个月|去年|前年|"
    r"(?<!\d)\d+\s*(?:天|周|个月|年)前|"
    r"\b(?:yesterday|last (?:week|month|year)|\d+ (?:days?|weeks?|months?|years?) ago)\b|"
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2}\b",
    re.IGNORECASE,
)
_FILE = re.compile(
    r"(?<![\w\-./\u4e00-\u9fff])[\w\-./\u4e00-\u9fff]*[\w\u4e00-\u9fff]\."
    r"(?:py|md|txt|js|ts|tsx|jsx|json|ya?ml|toml|pdf|docx?|xlsx?|pptx?|csv|"
    r"go|rs|java|kt|c|cc|cpp|h|hpp|sql|html|css|sh|ipynb|png|jpe?g)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Trigger:
    long_term: bool
    reasons: tuple[str, ...]
    files: tuple[str, ...]


def refers_to_past(text: str) -> bool:
    """The message refers to the past (之前, 上次, 还记得, last time, remember ...): it presumes a memory."""
    return _PAST.search(text) is not None


def long_term_trigger(text: str) -> Trigger:
    reasons = []
    if refers_to_past(text):
        reasons.append("past")
    if _DATE.search(text):
        reasons.append("date")
    files = tuple(dict.fromkeys(m.group(0) for m in _FILE.finditer(text)))
    if files:
        reasons.append("file")
    return Trigger(bool(reasons), tuple(reasons), files)
