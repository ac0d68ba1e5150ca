"""A saved profile file against the versions pocketmem wrote: which one the person started from, which lines
without an id comment are lines written, and whether the file is a save cut short (docs/profile.md)."""

from __future__ import annotations

from pocketmem.core.profile_text import MemoryLine, Parsed


def distance(a: Parsed, b: Parsed) -> int:
    """How many fields and lines differ between two parsed versions of a file."""
    total = 0
    for key, sa in a.sections.items():
        sb = b.sections[key]
        total += sum(1 for k in set(sa.fields) | set(sb.fields) if sa.fields.get(k) != sb.fields.get(k))
        total += len(set(sa.lines) ^ set(sb.lines)) if sa.kind != "fields" else 0
    return total


def held(parsed: Parsed, keys: set[str]) -> set[tuple[str, str]]:
    """The memory lines a version holds in the sections `keys`, by section and id."""
    return {(key, line.memory_id) for key in keys for line in parsed.sections[key].memories if line.memory_id}


def closest_base(theirs: Parsed, versions: list[Parsed]) -> Parsed:
    """The version pocketmem wrote that the person most likely started from (`versions`: the last few written,
    newest first). An editor left open across a write saves the version it opened with the person's edit: the
    same memory lines (text changed, lines added, none deleted), fields changed. So an older version counts only
    when the file holds exactly its memory lines; of those and the newest, the one nearest to the file (the newest
    on a tie). A file that drops lines is judged against the newest version: its deletions are what the person
    saw and removed."""
    keys = {key for key, s in theirs.sections.items() if s.kind == "memories" and s.present}
    lines = held(theirs, keys)
    stale = [v for v in versions[1:] if held(v, keys) == lines]
    return min([versions[0], *stale], key=lambda v: distance(v, theirs))


def restore_ids(theirs: Parsed, versions: list[Parsed]) -> None:
    """A line without an id comment whose text is a line pocketmem wrote (newest version first) is that memory,
    once: some Markdown editors drop comments, which must not read as deleting and re-adding every line."""
    for key, section in theirs.sections.items():
        if section.kind != "memories":
            continue
        known: dict[str, list[str]] = {}
        taken = {line.memory_id for line in section.memories if line.memory_id}
        for version in versions:
            for line in version.sections[key].memories:
                if line.memory_id and line.memory_id not in taken:
                    known.setdefault(line.text, []).append(line.memory_id)
                    taken.add(line.memory_id)
        section.memories = [
            MemoryLine(line.text, known[line.text].pop(0)) if not line.memory_id and known.get(line.text) else line
            for line in section.memories
        ]


def cut_short(text: str, written: list[str]) -> bool:
    """The file is the start of a text pocketmem wrote, ending inside one of its lines: a save an editor or a sync
    client broke off, not a person's edit."""
    return bool(text) and not text.endswith("\n") and any(
        len(w) > len(text) and w.startswith(text) and w[len(text)] != "\n" for w in written
    )
