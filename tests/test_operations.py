"""The operations schema and the checks an LLM's answer must pass before anything is written."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from pocketmem.base.models import Category, Memory, Scores, Status
from pocketmem.core.operations import (
    AddOp,
    BoostOp,
    InvalidAnswer,
    PatchOp,
    SkipOp,
    UpdateOp,
    check_answer,
    operations_schema,
)
from pocketmem.core.rubric import EXAMPLE_ANSWER_EN, EXAMPLE_ANSWER_ZH, agent_rubric, server_rubric

from .scripted_llm import ops

SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 11, 26, 2, 0, tzinfo=UTC)


def memory(id_: str, content: str, persistence: float = 0.7, category: Category = Category.fact) -> Memory:
    return Memory(
        id=id_, user_id="global", content=content, category=category,
        scores=Scores(emotion=0.3, info=0.8, persistence=persistence, judge=0.8),
        info_importance=0.7, time_coef=1.0, importance=0.7, confidence=1.0,
        created_at=NOW, updated_at=NOW, valid_from=NOW, status=Status.active, content_hash=id_, embed_model="hash",
    )


KNOWN = {
    "m1": memory("core-1", "你很爱吃辣。", persistence=1.0, category=Category.preference),
    "m2": memory("fact-2", "用户住在北京"),
}


def check(text: str, known=KNOWN, max_chars: int = 2000):
    return check_answer(text, known, max_content_chars=max_chars, zone=SHANGHAI, now=NOW)


def problems(text: str, known=KNOWN, max_chars: int = 2000) -> list[str]:
    with pytest.raises(InvalidAnswer) as info:
        check(text, known, max_chars)
    return info.value.problems


def test_a_good_answer_is_parsed_with_its_targets():
    checked = check(ops(
        {"op": "ADD", "content": "用户不吃香菜", "category": "preference", "confidence": 0.95, "keywords": ["香菜"]},
        {"op": "UPDATE", "memory_id": "m2", "content": "用户搬到杭州了", "confidence": 0.9},
        {"op": "PATCH", "memory_id": "m1", "patch": "最近胃炎", "confidence": 0.9},
        {"op": "SKIP", "reason": "寒暄"},
    ))
    assert [type(c.op) for c in checked] == [AddOp, UpdateOp, PatchOp, SkipOp]
    assert [c.target.id if c.target else None for c in checked] == [None, "fact-2", "core-1", None]
    assert checked[0].op.content == "用户不吃香菜" and checked[2].op.mode == "append"


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"operations": [{"op": "BOOST", "memory_id": "m2"}]}\n```',
        'Here you go:\n{"operations": [{"op": "BOOST", "memory_id": "m2"}]}\nHope that helps.',
        '[{"op": "boost", "memory_id": "m2"}]',
        '{"op": "Boost", "memory_id": "m2", "comment": "extra fields are ignored"}',
        '{"operations": [{"op": "BOOST", "memory_id": "fact-2"}]}',  # the real id works too
    ],
)
def test_common_shape_slips_are_forgiven(text):
    [checked] = check(text)
    assert isinstance(checked.op, BoostOp) and checked.target.id == "fact-2"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I think the user likes tea.", "holds no JSON"),
        ('{"operations": [{"op": "ADD", "content": "x", "category": "preference", ', "not valid JSON"),
        (ops({"op": "ADD", "content": "用户喜欢猫", "category": "hobby", "confidence": 0.9}),
         "operations[0].category: Input should be 'preference'"),
        (ops({"op": "ADD", "content": "用户喜欢猫", "category": "fact"}), "operations[0].confidence: Field required"),
        (ops({"op": "ADD", "content": "用户喜欢猫", "category": "fact", "confidence": 1.5}),
         "operations[0].confidence: Input should be less than or equal to 1"),
        (ops({"op": "MERGE", "memory_id": "m1"}), "operations[0]: op must be one of ADD, UPDATE"),
        (ops({"memory_id": "m1"}), "every operation needs an op"),
        (
            ops({"op": "BOOST", "memory_id": "m9"}),
            "operations[0].memory_id: 'm9' is not one of the listed memories (m1, m2)",
        ),
        (ops({"op": "UPDATE", "memory_id": "m1", "content": "用户不吃辣", "confidence": 0.9}),
         "m1 is a core memory; use PATCH"),
        (
            ops({"op": "PATCH", "memory_id": "m2", "patch": "搬家了", "confidence": 0.9}),
            "m2 is not a core memory; use UPDATE",
        ),
        (ops({"op": "BOOST", "memory_id": "m2"}, {"op": "FORGET", "memory_id": "m2", "confidence": 0.9}),
         "operations[1].memory_id: 'm2' is already the target of operations[0]"),
        (ops({"op": "ADD", "content": "长" * 51, "category": "fact", "confidence": 0.9}),
         "operations[0].content: is 51 characters; the limit is 50"),
        (ops({"op": "PATCH", "memory_id": "m1", "patch": "胃" * 32, "confidence": 0.9}),  # 6 + 13 + 32 > 50
         "operations[0].patch: would make the memory 51 characters (limit 50)"),
        (ops({"op": "ADD", "content": "   ", "category": "fact", "confidence": 0.9}),
         "operations[0].content: must not be empty, or only whitespace or invisible characters"),
        (ops({"op": "ADD", "content": "交报告", "category": "todo", "confidence": 0.9, "due_at": -1}),
         "operations[0].due_at: Value error, must be an ISO 8601 date or time such as 2026-05-01T09:00+08:00, not a"),
        (ops({"op": "ADD", "content": "交报告", "category": "todo", "confidence": 0.9, "due_at": "0999-01-01T00:00"}),
         "operations[0].due_at: must be between the years 1000 and 9000 in UTC"),
        (json.dumps({"operations": [{"op": "SKIP"}] * 21}), "operations: List should have at most 20 items"),
    ],
)
def test_problems_are_named_for_the_retry(text, expected):
    found = problems(text, max_chars=50)
    assert any(expected in p for p in found), found


def test_every_problem_is_reported_at_once():
    found = problems(ops(
        {"op": "BOOST", "memory_id": "m7"},
        {"op": "UPDATE", "memory_id": "m1", "content": "x", "confidence": 0.9},
    ))
    assert len(found) == 2


def test_a_date_without_zone_is_the_users_local_time():
    [checked] = check(ops({"op": "ADD", "content": "面试", "category": "todo", "confidence": 0.9,
                           "due_at": "2026-12-01T10:00:00"}))
    assert checked.op.due_at == datetime(2026, 12, 1, 10, 0, tzinfo=SHANGHAI)
    add = {"op": "ADD", "content": "面试", "category": "todo", "confidence": 0.9, "due_at": "2026-12-01"}
    [dated] = check(ops(add))  # a date alone, as the rubric has the model write dates: due by the end of that day
    assert dated.op.due_at == datetime(2026, 12, 1, 23, 59, 59, 999000, tzinfo=SHANGHAI)


def test_a_due_date_on_a_memory_that_is_no_todo_is_sent_back():
    """The write would refuse it (only a todo is reminded): the model is asked again, told the field and the rule;
    an UPDATE is judged by the category it leaves the memory in."""
    found = problems(ops(
        {"op": "ADD", "content": "周一体检", "category": "event", "confidence": 0.9, "due_at": "2026-11-30T08:00"},
        {"op": "UPDATE", "memory_id": "m2", "content": "用户搬到杭州了", "confidence": 0.9, "due_at": "2026-12-01"},
    ))
    assert [p.split(":")[0] for p in found] == ["operations[0].due_at", "operations[1].due_at"], found
    assert all('only a todo has a due time and is reminded; add what the user should be reminded of' in p
               for p in found)


@pytest.mark.parametrize("example", [EXAMPLE_ANSWER_ZH, EXAMPLE_ANSWER_EN])
def test_the_example_in_the_prompt_passes_the_real_checks(example):
    checked = check(json.dumps(example, ensure_ascii=False))
    assert [c.op.op for c in checked] == ["UPDATE", "PATCH", "ADD"]


@pytest.mark.parametrize("language", ["zh", "en"])
def test_the_example_teaches_a_reminded_interview_at_the_users_own_clock(language, make_settings, tmp_path):
    """The dated interview is a todo (the category that is reminded), its time written without an offset, as the
    rubric writes every time: it is 10:00 wherever POCKETMEM_TZ puts the user, never 10:00 in Shanghai."""
    settings = make_settings(tmp_path, tz="America/Los_Angeles")
    rubric = server_rubric(language, settings)
    assert "+08:00" not in rubric and '"due_at": "2026-12-01T10:00:00"' in rubric
    answer = rubric[rubric.rindex('{"operations"'):].strip()
    zone = ZoneInfo("America/Los_Angeles")
    *_, add = check_answer(answer, KNOWN, max_content_chars=2000, zone=zone, now=NOW)
    assert isinstance(add.op, AddOp) and add.op.category == Category.todo
    assert add.op.due_at == datetime(2026, 12, 1, 10, 0, tzinfo=zone)


def test_the_schema_describes_every_operation():
    text = json.dumps(operations_schema())
    for name in ("ADD", "UPDATE", "PATCH", "BOOST", "FORGET", "SKIP"):
        assert f'"{name}"' in text
    assert operations_schema()["required"] == ["operations"]


@pytest.mark.parametrize("language", ["zh", "en"])
def test_one_rubric_for_the_prompt_and_the_server(language, settings):
    agent, server = agent_rubric(language, settings), server_rubric(language, settings)
    shared = os.path.commonprefix([agent, server])
    # The whole rubric — categories, E/I/P/J with examples, confidence, when to update — is the same text;
    # only the closing part differs (tool calls for the agent, the JSON format for the server's LLM).
    for word in ("preference", "persistence", "confidence", "keywords", "UPDATE", "PATCH", "BOOST", "FORGET", "SKIP"):
        assert word in shared, word
    assert ("不要翻译" if language == "zh" else "never translate") in shared
    assert "supersedes" in agent[len(shared):] and '"operations"' in server[len(shared):]
