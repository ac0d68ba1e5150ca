"""The profile's fields and its Markdown files, rendered and parsed back. Pure.

Seed 004: the assistant's persona (身份定位、语气、边界、禁区、优先行为) and the user's identity (称呼、职业背景、
技术偏好、协作习惯). Each file a person may edit has sections under `## ` headings; a section is either
fields (`- 称呼 (name): 小王`), memory lines (`- 不吃香菜 <!-- 01J... -->`, the comment keeps the memory's id) or
a read-only view. `parse` reads a file back into the same shape so the service can diff two versions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pocketmem.core.formatting import one_line


@dataclass(frozen=True)
class FieldDef:
    key: str
    zh: str
    en: str
    hint_zh: str
    hint_en: str


PERSONA_FIELDS: tuple[FieldDef, ...] = (
    FieldDef(
        "role", "身份定位", "Role", "你希望我是谁（助手、搭档、老师……）",
        "who the assistant is to you (assistant, partner, tutor...)",
    ),
    FieldDef("tone", "语气", "Tone", "说话的语气和风格", "how it speaks"),
    FieldDef(
        "boundaries", "边界", "Boundaries", "做事的边界（例如先问再改）",
        "limits it keeps (e.g. asks before changing things)",
    ),
    FieldDef("taboos", "禁区", "Off-limits", "绝对不要做或不要提的事", "what it must never do or bring up"),
    FieldDef("priorities", "优先行为", "Priorities", "最先要做到的事", "what it does first"),
)
IDENTITY_FIELDS: tuple[FieldDef, ...] = (
    FieldDef("name", "称呼", "Name", "怎么称呼你", "what to call you"),
    FieldDef("background", "职业背景", "Background", "你的职业和背景", "your work and background"),
    FieldDef(
        "tech", "技术偏好", "Tech preferences", "常用的语言、工具、技术偏好", "languages, tools and tech you prefer"
    ),
    FieldDef(
        "collaboration", "协作习惯", "Collaboration", "你喜欢怎样合作（详略、节奏、确认方式）",
        "how you like to work together",
    ),
)
SECTIONS: dict[str, tuple[FieldDef, ...]] = {"persona": PERSONA_FIELDS, "identity": IDENTITY_FIELDS}
MAX_FIELD_CHARS = 300

EDIT_NOTE = (
    "<!-- pocketmem keeps this file. Edit and save it: your changes are taken in at the next read. "
    "Keep the id comment at the end of each memory line; a line without one is a new memory. {where} -->"
)
# Where a person writes in each file (the header comment says so).
WHERE = {
    "Persona.md": "Change a value after its colon.",
    "User.md": "Change a value after its colon, or add a line at the end: it becomes a core memory. "
               "Open todos is read-only.",
    "Project.md": "Add a line at the end for the current state. Earlier is read-only.",
    "Insights.md": "Add a line at the end for a new lesson.",
}

SectionKind = Literal["fields", "memories", "view"]


@dataclass(frozen=True)
class MemoryLine:
    text: str
    memory_id: str | None


@dataclass
class Section:
    kind: SectionKind
    fields: dict[str, str] = field(default_factory=dict)
    memories: list[MemoryLine] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # every non-blank line as written (views compare these)
    present: bool = False  # its heading is in the file (a section missing from a person's file was not edited)


@dataclass
class Parsed:
    sections: dict[str, Section]
    problems: list[str]


# -- layout of each file: heading -> (section key, kind) -------------------------------------------
@dataclass(frozen=True)
class SectionSpec:
    key: str
    en: str
    zh: str
    kind: SectionKind

    @property
    def heading(self) -> str:
        """The file's heading, in both languages (`Persona 人设`), so a saved file reads back whatever the locale."""
        return f"{self.en} {self.zh}"

    def shown(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en


FILES: dict[str, tuple[SectionSpec, ...]] = {
    "Persona.md": (SectionSpec("persona", "Persona", "人设", "fields"),),
    "User.md": (  # the read-only todos before the core memories, so a line added at the end is a core memory
        SectionSpec("identity", "Identity", "身份", "fields"),
        SectionSpec("todos", "Open todos", "待办", "view"),
        SectionSpec("core", "Core memories", "核心记忆", "memories"),
    ),
    "Project.md": (  # oldest first, so a line added at the end of the file lands in the current state
        SectionSpec("earlier", "Earlier", "更早", "view"),
        SectionSpec("project", "Current state", "当前进展", "memories"),
    ),
    "Insights.md": (SectionSpec("insights", "Hot lessons", "常用经验", "memories"),),
}
TITLES = {"Persona.md": "Persona", "User.md": "User", "Project.md": "Project", "Insights.md": "Insights"}
TITLES_ZH = {"Persona.md": "人设", "User.md": "用户", "Project.md": "项目", "Insights.md": "经验"}


def field_label(fd: FieldDef) -> str:
    return f"{fd.zh} ({fd.key})"


# User text is text: the characters that would make Markdown of it (links, images, HTML, entities, code) are
# backslash-escaped when a file is written and unescaped when it is read back, so the text round-trips.
_MARKUP = re.compile(r"([\\`\[\]<>&])")
_ESCAPED = re.compile(r"\\([\\`\[\]<>&])")


def md_text(text: str) -> str:
    """One line of user text as literal Markdown."""
    return _MARKUP.sub(r"\\\1", one_line(text))


def plain_text(written: str) -> str:
    """The text a Markdown line holds (md_text undone)."""
    return one_line(_ESCAPED.sub(r"\1", written))


def memory_line(text: str, memory_id: str | None) -> str:
    body = f"- {md_text(text)}"
    return f"{body} <!-- {memory_id} -->" if memory_id else body


def render(
    name: str,
    *,
    fields: Mapping[str, Mapping[str, str]] | None = None,
    memories: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    views: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """A file in its layout, for a person to edit: fields by section key (every field, set or not), memory lines
    (id, text) with their id comments, view lines (shown as written), under the bilingual headings `parse` reads."""
    out = [f"# {TITLES[name]}", EDIT_NOTE.format(where=WHERE[name])]
    for spec in FILES[name]:
        out.append("")
        out.append(f"## {spec.heading}")
        if spec.kind == "fields":
            values = (fields or {}).get(spec.key, {})
            out += [f"- {field_label(fd)}: {md_text(values.get(fd.key, ''))}".rstrip() for fd in SECTIONS[spec.key]]
        elif spec.kind == "memories":
            out += [memory_line(text, mid) for mid, text in (memories or {}).get(spec.key, ())]
        else:
            out += [line for line in (views or {}).get(spec.key, ())]
    return "\n".join(out) + "\n"


def render_view(
    name: str,
    lang: str,
    *,
    fields: Mapping[str, Mapping[str, str]] | None = None,
    memories: Mapping[str, Sequence[str]] | None = None,
    views: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """What the model reads of a file (the MCP resources, `export --markdown`): its sections in one language, the
    user card's: the title, the sections that hold something under their headings (one named as the file is not
    named twice), the fields that are set, labelled as on the card (`身份定位：…` / `Role: …`); no editing note, no
    id comments."""
    title = TITLES_ZH[name] if lang == "zh" else TITLES[name]
    out = [f"# {title}"]
    for spec in FILES[name]:
        if spec.kind == "fields":
            lines = [f"- {md_text(line)}" for line in profile_summary(spec.key, (fields or {}).get(spec.key, {}), lang)]
        elif spec.kind == "memories":
            lines = [memory_line(text, None) for text in (memories or {}).get(spec.key, ())]
        else:
            lines = list((views or {}).get(spec.key, ()))
        if lines:
            out += ["", *([] if spec.shown(lang) == title else [f"## {spec.shown(lang)}"]), *lines]
    return "\n".join(out) + "\n"


_HEADING = re.compile(r"^##\s+(.*?)\s*$")
_FIELD = re.compile(r"^[-*]\s*(?P<label>[^:：]+?)\s*[:：]\s?(?P<value>.*)$")
_MEMORY = re.compile(r"^[-*]\s+(?P<text>.*?)\s*(?:<!--\s*(?P<id>[A-Za-z0-9_.:-]{1,64})\s*-->)?\s*$")
_COMMENT = re.compile(r"^<!--.*-->$")


def _spec_for(name: str, heading: str) -> SectionSpec | None:
    words = heading.casefold().split()
    for spec in FILES[name]:
        names = spec.heading.casefold().split()
        if words and (words[0] in names or heading.casefold() == spec.heading.casefold()):
            return spec
    return None


def _field_key(section: str, label: str) -> str | None:
    label = label.strip()
    inner = re.search(r"\(([^)]*)\)\s*$", label)
    candidates = {label.casefold(), re.sub(r"\s*\([^)]*\)\s*$", "", label).casefold()}
    if inner:
        candidates.add(inner.group(1).strip().casefold())
    for fd in SECTIONS[section]:
        if {fd.key, fd.zh.casefold(), fd.en.casefold()} & candidates:
            return fd.key
    return None


def parse(name: str, text: str) -> Parsed:
    """Read a file back. Problems (unknown headings or fields, lines that fit no section) are listed, and the
    lines concerned left out: the caller reports them and keeps the file."""
    sections = {spec.key: Section(spec.kind) for spec in FILES[name]}
    problems: list[str] = []
    current: SectionSpec | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or _COMMENT.match(line) or line.startswith("# "):
            continue
        heading = _HEADING.match(line)
        if heading:
            current = _spec_for(name, heading.group(1))
            if current is None:
                problems.append(f"line {number}: unknown section {heading.group(1)!r}")
            else:
                sections[current.key].present = True
            continue
        if current is None:
            problems.append(f"line {number}: text outside a section: {line[:60]!r}")
            continue
        section = sections[current.key]
        section.lines.append(line)
        if current.kind == "fields":
            match = _FIELD.match(line)
            key = _field_key(current.key, match.group("label")) if match else None
            if match is None or key is None:
                problems.append(f"line {number}: not a field of {current.heading} (write `- 称呼 (name): value`)")
                continue
            value = plain_text(match.group("value"))
            if len(value) > MAX_FIELD_CHARS:
                problems.append(f"line {number}: {key} is {len(value)} characters (limit {MAX_FIELD_CHARS})")
                continue
            section.fields[key] = value
        elif current.kind == "memories":
            match = _MEMORY.match(line)
            if match is None or not match.group("text"):
                problems.append(f"line {number}: a memory line starts with `- `: {line[:60]!r}")
                continue
            section.memories.append(MemoryLine(plain_text(match.group("text")), match.group("id")))
    return Parsed(sections, problems)


# -- the onboarding instruction (what the agent asks once, and how it saves) ------------------------
def onboarding_instruction(lang: str, missing_persona: bool, missing_identity: bool) -> str:
    if lang == "zh":
        asks = []
        if missing_persona:
            asks.append("我的人设：" + "、".join(fd.zh for fd in PERSONA_FIELDS))
        if missing_identity:
            asks.append("用户身份：" + "、".join(fd.zh for fd in IDENTITY_FIELDS))
        ask = "；".join(asks) or "人设与身份已填写，只差用户确认"
        return (
            "【首次引导，仅此一次】这位用户还没有确认身份。请在自然的时机用用户的语言简短地问清楚——"
            f"{ask}。然后给出一段确认摘要，请用户“确认”或“修改”。用户确认后调用 "
            "update_profile(persona={...}, identity={...}, confirmed=true)。确认之后不会再出现这条提示。"
        )
    asks = []
    if missing_persona:
        asks.append("your persona: " + ", ".join(fd.en.lower() for fd in PERSONA_FIELDS))
    if missing_identity:
        asks.append("who the user is: " + ", ".join(fd.en.lower() for fd in IDENTITY_FIELDS))
    ask = "; ".join(asks) or "the profile is filled in and only needs the user's confirmation"
    return (
        "[First conversation, once only] This user has not confirmed their profile yet. At a natural moment, in "
        f"the user's language, briefly ask about {ask}. Then show a short summary and ask the user to confirm or "
        "change it. When they confirm, call update_profile(persona={...}, identity={...}, confirmed=true). This "
        "note does not appear again after that."
    )


CLEARED = {"zh": "（清空）", "en": "(cleared)"}


def profile_summary(section: str, values: Mapping[str, str], lang: str, *, cleared: bool = False) -> list[str]:
    """`称呼：小王` lines of the non-empty fields, in field order; with `cleared` (a proposed change), a field
    given as "" too, as `语气：（清空）` / `Tone: (cleared)`."""
    sep = "：" if lang == "zh" else ": "
    out = []
    for fd in SECTIONS[section]:
        value = values.get(fd.key, "")
        if value or (cleared and fd.key in values):
            out.append(f"{fd.zh if lang == 'zh' else fd.en}{sep}{value or CLEARED[lang]}")
    return out
