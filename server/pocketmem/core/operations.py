"""The operations an LLM may answer with, their JSON schema, and the checks an answer must pass.

    ADD     a new memory (category, E/I/P/J, confidence, keywords, optional due date)
    UPDATE  a new memory that supersedes an ordinary one (the old one stays as history)
    PATCH   a dated note on a core memory, or its replacement (docs/extraction.md)
    BOOST   an existing memory shaped the reply: reinforce it
    FORGET  an existing memory to the trash (restorable)
    SKIP    nothing to do

An answer is checked as a whole — JSON, schema, and every memory it names against the
memories the LLM was shown — before anything is written. `InvalidAnswer` carries a short
list of problems phrased for the LLM, so one retry can fix them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pocketmem.base.errors import InvalidInput
from pocketmem.base.models import REMINDER_RULE, Category, Memory, unreminded_field
from pocketmem.core import instants
from pocketmem.core.instants import Due
from pocketmem.core.text import clean_text, patched_text

MAX_OPERATIONS = 20
MAX_REASON_CHARS = 500
MAX_ERRORS_SHOWN = 8

Unit = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


# The models are built on first use (defer_build), not when the server starts: only remember_conversation reads them.
class ScoresOut(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    emotion: Unit | None = None
    info: Unit | None = None
    persistence: Unit | None = None
    judge: Unit | None = None


class _Op(BaseModel):
    # Extra fields (an echoed id, a comment) are ignored: only missing or wrong ones cost a retry.
    model_config = ConfigDict(extra="ignore", defer_build=True)

    reason: str | None = Field(None, max_length=MAX_REASON_CHARS)


class AddOp(_Op):
    op: Literal["ADD"]
    content: str = Field(min_length=1)
    category: Category
    scores: ScoresOut | None = None
    confidence: Unit
    keywords: list[str] = Field(default_factory=list)
    due_at: Due | None = None


class UpdateOp(_Op):
    op: Literal["UPDATE"]
    memory_id: str
    content: str = Field(min_length=1)
    category: Category | None = None
    scores: ScoresOut | None = None
    confidence: Unit
    keywords: list[str] | None = None
    due_at: Due | None = None


class PatchOp(_Op):
    op: Literal["PATCH"]
    memory_id: str
    patch: str = Field(min_length=1)
    mode: Literal["append", "replace"] = "append"
    confidence: Unit


class BoostOp(_Op):
    op: Literal["BOOST"]
    memory_id: str


class ForgetOp(_Op):
    op: Literal["FORGET"]
    memory_id: str
    confidence: Unit


class SkipOp(_Op):
    op: Literal["SKIP"]


class ProfileOp(_Op):
    """A change of the user's identity or the assistant's persona (profile_text.py fields); it is never applied
    by the extractor: once the profile is confirmed it waits for the user's confirmation."""

    op: Literal["PROFILE"]
    persona: dict[str, str] | None = None
    identity: dict[str, str] | None = None
    confidence: Unit


Operation = Annotated[
    AddOp | UpdateOp | PatchOp | BoostOp | ForgetOp | SkipOp | ProfileOp, Field(discriminator="op")
]
Targeted = UpdateOp | PatchOp | BoostOp | ForgetOp


class OperationList(BaseModel):
    model_config = ConfigDict(defer_build=True)

    operations: list[Operation] = Field(max_length=MAX_OPERATIONS)


@cache
def operations_schema() -> dict[str, Any]:
    """The JSON schema the LLM's answer is asked to follow (built on first use)."""
    return OperationList.model_json_schema()


@dataclass(frozen=True)
class Checked:
    """One valid operation, with the memory it names (None for ADD and SKIP)."""

    op: AddOp | UpdateOp | PatchOp | BoostOp | ForgetOp | SkipOp | ProfileOp
    target: Memory | None = None


class InvalidAnswer(Exception):
    """The LLM's answer cannot be applied; `problems` say why, in words the LLM can act on."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems[:MAX_ERRORS_SHOWN]
        more = len(problems) - len(self.problems)
        super().__init__("; ".join(self.problems) + (f"; and {more} more" if more > 0 else ""))


_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def parse_json(text: str) -> Any:
    """The JSON value in an answer, tolerating a code fence or words around it."""
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    starts = [i for i in (body.find("{"), body.find("[")) if i >= 0]
    if not starts:
        raise InvalidAnswer(['the answer holds no JSON; answer with one JSON object {"operations": [...]}'])
    try:
        value, _ = json.JSONDecoder().raw_decode(body, min(starts))
    except json.JSONDecodeError as exc:
        raise InvalidAnswer([f"the answer is not valid JSON ({exc.msg} at character {exc.pos})"]) from None
    return value


def _normalised(value: Any) -> Any:
    """Forgive the shape slips models make often: a bare list, a single operation, lower-case op names."""
    if isinstance(value, list):
        value = {"operations": value}
    elif isinstance(value, dict) and "operations" not in value and "op" in value:
        value = {"operations": [value]}
    if isinstance(value, dict) and isinstance(value.get("operations"), list):
        value = dict(value)
        value["operations"] = [
            {**item, "op": item["op"].strip().upper()} if isinstance(item, dict) and isinstance(item.get("op"), str)
            else item
            for item in value["operations"]
        ]
    return value


def _describe(exc: ValidationError) -> list[str]:
    problems = []
    for err in exc.errors():
        parts: list[str] = []
        for part in err["loc"]:
            if isinstance(part, int):
                parts[-1:] = [f"{parts[-1]}[{part}]" if parts else f"[{part}]"]
            elif part not in ("ADD", "UPDATE", "PATCH", "BOOST", "FORGET", "SKIP", "PROFILE"):
                parts.append(str(part))
        where = ".".join(parts) or "answer"
        message = err["msg"]
        if err["type"] == "union_tag_invalid":
            message = "op must be one of ADD, UPDATE, PATCH, BOOST, FORGET, SKIP, PROFILE"
        elif err["type"] == "union_tag_not_found":
            message = "every operation needs an op: ADD, UPDATE, PATCH, BOOST, FORGET or SKIP"
        elif "input" in err and err["type"] not in ("missing",) and not isinstance(err["input"], dict | list):
            message += f" (got {json.dumps(err['input'], ensure_ascii=False)[:60]})"
        problems.append(f"{where}: {message}")
    return problems


def _unreminded(op: AddOp | UpdateOp, target: Memory | None, where: str) -> str | None:
    """A due_at on a memory that is no todo (base/models.unreminded_field), as the write would refuse it."""
    category = op.category or (target.category if target else Category.fact)
    field = unreminded_field(category, op.due_at, None)
    return None if field is None else f"{where}.{field}: {REMINDER_RULE.format(field=field)}"


def check_answer(
    text: str,
    known: Mapping[str, Memory],
    *,
    max_content_chars: int,
    zone: tzinfo,
    now: datetime,
) -> list[Checked]:
    """Parse and check a whole answer against the memories the LLM was shown (label -> memory).

    Raises InvalidAnswer listing every problem found; returns the operations otherwise.
    Naive dates are taken in the user's time zone.
    """
    try:
        parsed = OperationList.model_validate(_normalised(parse_json(text)))
    except ValidationError as exc:
        raise InvalidAnswer(_describe(exc)) from None
    by_id = {memory.id: memory for memory in known.values()}
    labels = ", ".join(known) or "none"
    problems: list[str] = []
    checked: list[Checked] = []
    targeted: dict[str, int] = {}
    for i, op in enumerate(parsed.operations):
        where = f"operations[{i}]"
        try:  # what the write would refuse, found here so that the model is asked again
            for field in ("content", "patch"):
                if isinstance(value := getattr(op, field, None), str):
                    clean_text(value, f"{where}.{field}", max_chars=max_content_chars)
            if (due := getattr(op, "due_at", None)) is not None:
                op = op.model_copy(update={"due_at": instants.accept(f"{where}.due_at", due, zone)})
        except InvalidInput as exc:
            problems.append(str(exc))
            continue
        if isinstance(op, AddOp) and (problem := _unreminded(op, None, where)):
            problems.append(problem)
            continue
        if not isinstance(op, Targeted):
            checked.append(Checked(op))
            continue
        ref = op.memory_id.strip()
        memory = known.get(ref) or by_id.get(ref)
        if memory is None:
            problems.append(f"{where}.memory_id: {op.memory_id!r} is not one of the listed memories ({labels})")
            continue
        if memory.id in targeted:
            problems.append(
                f"{where}.memory_id: {op.memory_id!r} is already the target of operations[{targeted[memory.id]}]; "
                "one operation per memory"
            )
            continue
        targeted[memory.id] = i
        if isinstance(op, UpdateOp) and (problem := _unreminded(op, memory, where)):
            problems.append(problem)
        elif isinstance(op, UpdateOp) and memory.core:
            problems.append(f"{where}: {op.memory_id} is a core memory; use PATCH to change it, not UPDATE")
        elif isinstance(op, PatchOp) and not memory.core:
            problems.append(f"{where}: {op.memory_id} is not a core memory; use UPDATE to change it, not PATCH")
        elif isinstance(op, PatchOp):
            try:
                patched_text(memory.content, op.patch.strip(), op.mode, now, zone,
                             field=f"{where}.patch", max_chars=max_content_chars)
            except InvalidInput as exc:
                problems.append(str(exc))
        checked.append(Checked(op, memory))
    if problems:
        raise InvalidAnswer(problems)
    return checked
