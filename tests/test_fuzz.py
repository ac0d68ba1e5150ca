"""Property-based input tests: every tool, hostile arguments, through the real MCP client.

For any arguments — very long strings, control characters, lone surrogates, NaN / infinity,
negative and huge numbers, FTS5 syntax, SQL-looking text, wrong types, unknown keys, other users'
ids — a call either succeeds or comes back as a tool error with a message, never as a crash (an
"internal error" or a protocol error). A rejected call leaves every table exactly as it was, and no
call, accepted or not, touches another user's rows.

Deterministic for CI: derandomized, a bounded number of examples, no example database.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.models import Category
from pocketmem.mcp.server import build_server
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.store.sqlite.driver import connect as sqlite_connect

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

FUZZ = settings(
    max_examples=40,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
OTHER_USER = "someone-else"
OTHER_MARK = "（别人的）"  # in every memory of the other user, so a leak is visible in any answer
TABLES = {
    "memories": "select * from memories order by rowid",
    "memories_fts": "select rowid, terms, keywords from memories_fts order by rowid",
    "memory_vectors": "select rowid, user_id, status from memory_vectors order by rowid",
    "memory_tombstones": "select * from memory_tombstones order by tombstone_id",
    "memory_revisions": "select * from memory_revisions order by id",
    "memory_pending": "select * from memory_pending order by id",
    "memory_events": "select * from memory_events order by id",
    "memory_operations": "select * from memory_operations order by user_id, operation_id",
    "users": "select * from users order by user_id",
}

# -- strategies ---------------------------------------------------------------------------------
FTS_AND_SQL = st.sampled_from([
    '"', '""', "*", "NEAR(", "NEAR(a b, 2)", " OR ", "OR", " AND ", "NOT", "-", "^", ":", "(", ")", "{a b}", "terms:",
    "香菜*", "'", "' OR '1'='1", "'; DROP TABLE memories; --", "%", "_", "\\", "/*", "*/", "union select * from users",
    "memories_fts", "rowid", "\u3000", "\ufeff", "\u202e", "🙂", "ﬁ", "Ａ",
])
CONTROL = st.characters(min_codepoint=0, max_codepoint=0x1F) | st.just("\x7f")
SURROGATE = st.characters(categories=["Cs"])
SCORE_NAMES = ("emotion", "info", "persistence", "judge")
FRIENDLY = st.sampled_from(["用户不喜欢香菜", "The user prefers tea", "用户下周二面试", "小白是用户的猫"])
# Valid strings with hostile content: what gets past the schema into pocketmem's own code.
hostile_text = st.one_of(
    FRIENDLY,
    st.text(max_size=40),
    st.text(alphabet=CONTROL | st.characters(exclude_categories=["Cs"]), max_size=30),
    st.lists(
        FTS_AND_SQL | st.sampled_from(["香菜", "用户", "coriander", " ", "的"]) | st.text(max_size=4), max_size=8
    ).map("".join),
)
# Around the length limits (2000 for content, 4000 for a query).
long_text = st.builds(
    operator.mul, st.sampled_from(["a", "香", " ", "\x00", '"', "NEAR( ", "\u200b"]), st.integers(0, 4100)
)
# Anything at all: lone surrogates, megabyte-scale strings, numbers out of every range, wrong types.
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, 1, -1, 0.5, 0.7, 50, 51, 500, 501, 1_000_001]),
)
wild_value = st.one_of(
    st.text(alphabet=CONTROL | SURROGATE | st.characters(), max_size=30),
    st.builds(operator.mul, st.sampled_from(["a", "香", "\ud800", "NEAR( "]), st.integers(0, 300_000)),
    numbers,
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.just({"a": 1}),
)
iso_dates = st.one_of(
    st.datetimes().map(lambda d: d.isoformat()),
    st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()),
    st.sampled_from([
        "9999-12-31T23:59:59+00:00", "0001-01-01T00:00:00+00:00", "0001-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59-12:00", "2026-11-26T10:00:00+14:00", "2026-11-27T10:00:00+08:00", "2026-11-26",
    ]),
)
# ("pool", n) stands for the n-th known id (this user's, then the other user's), resolved at run time.
memory_ref = st.integers(0, 11).map(lambda n: ("pool", n)) | hostile_text.filter(lambda t: 0 < len(t) <= 64)
pending_ref = st.integers(0, 3).map(lambda n: ("pending", n)) | hostile_text.filter(lambda t: 0 < len(t) <= 64)
CATEGORIES = st.sampled_from([c.value for c in Category])


def tool_args(tool: str, wild: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Well-typed hostile arguments, or (wild) each field sometimes replaced by anything at all."""

    def v(typed: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(typed, wild_value) if wild else typed

    text, texts = v(hostile_text), v(st.lists(hostile_text, max_size=12))
    body = v(hostile_text | long_text)
    limit, offset = v(st.integers(1, 500)), v(st.integers(0, 1_000_000))
    fields: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        "recall_memories": (
            {"query": body},
            {"context": v(st.lists(hostile_text, max_size=3)), "keywords": texts, "top_k": v(st.integers(1, 50)),
             "categories": v(st.lists(CATEGORIES, max_size=3)), "include_history": v(st.booleans()),
             "explain": v(st.booleans()), "used": v(st.lists(memory_ref, max_size=4)),
             "temporary": v(st.booleans())},
        ),
        "add_memory": (
            {"content": body},
            {"category": v(CATEGORIES), "keywords": texts,
             "scores": v(st.fixed_dictionaries({}, optional={k: v(st.floats(0, 1)) for k in SCORE_NAMES})),
             "confidence": v(st.floats(0, 1)), "supersedes": v(memory_ref), "created_at": v(iso_dates),
             "valid_from": v(iso_dates), "due_at": v(iso_dates), "remind_at": v(iso_dates),
             "expires_at": v(iso_dates), "source": text, "source_ref": text,
             "operation_id": v(hostile_text.filter(lambda t: len(t) <= 200) | st.sampled_from(["op-1", "op-2"])),
             "temporary": v(st.booleans())},
        ),
        "patch_core_memory": (
            {"memory_id": v(memory_ref), "patch": body},
            {
                "mode": v(st.sampled_from(["append", "replace"])),
                "reason": v(hostile_text.filter(lambda t: len(t) <= 500)),
            },
        ),
        "confirm_pending": (
            {"pending_id": v(pending_ref), "action": v(st.sampled_from(["confirm", "reject", "snooze"]))},
            {"snooze_hours": v(st.floats(0.001, 2160))},
        ),
        "list_trash": ({}, {"limit": limit, "offset": offset}),
        "restore": ({"memory_id": v(memory_ref)}, {}),
        "forget_memory": ({"memory_id": v(memory_ref)}, {"reason": v(hostile_text.filter(lambda t: len(t) <= 500))}),
        "mark_memory": (
            {
                "memory_id": v(memory_ref),
                "action": v(st.sampled_from(["complete", "reopen", "promote", "keep", "forget"])),
            },
            {"reason": v(hostile_text.filter(lambda t: len(t) <= 500))},
        ),
        # No sampling client and no model configured here: every call must end in a clear error, changing nothing.
        "remember_conversation": (
            {"messages": v(st.lists(
                st.fixed_dictionaries({"role": v(st.sampled_from(["user", "assistant"])), "content": body}),
                max_size=12,
            ))},
            {"hints": v(st.fixed_dictionaries({}, optional={
                "note": text, "keywords": texts, "memory_ids": v(st.lists(memory_ref, max_size=3))}))},
        ),
        "list_memories": (
            {},
            {"category": v(CATEGORIES), "status": v(st.sampled_from(["active", "superseded", "pending", "trashed"])),
             "text": v(hostile_text.filter(lambda t: len(t) <= 200)), "limit": limit, "offset": offset,
             "since": v(iso_dates), "until": v(iso_dates)},
        ),
        "update_profile": (
            {},
            {"persona": v(st.fixed_dictionaries({}, optional={
                k: text for k in ("role", "tone", "boundaries", "taboos", "priorities")})),
             "identity": v(st.fixed_dictionaries({}, optional={
                 k: text for k in ("name", "background", "tech", "collaboration")})),
             "confirmed": v(st.booleans())},
        ),
    }
    required, optional = fields[tool]
    base = st.fixed_dictionaries(required, optional=optional)
    if not wild:
        return base
    extra = st.dictionaries(st.sampled_from(["user_id", "user", "__proto__", "x"]), wild_value, max_size=2)
    return st.builds(lambda a, e: {**a, **e}, base, extra)


TOOLS = (
    "recall_memories", "add_memory", "patch_core_memory", "confirm_pending",
    "list_trash", "restore", "forget_memory", "list_memories", "mark_memory", "remember_conversation",
    "update_profile",
)
TOOL_ARGS = {tool: st.one_of(tool_args(tool, wild=False), tool_args(tool, wild=True)) for tool in TOOLS}
EXAMPLES = {"recall_memories": 60, "add_memory": 80, "patch_core_memory": 40, "confirm_pending": 30}


# -- the world each test runs in ----------------------------------------------------------------
class World:
    def __init__(self, app: PocketMem, client: Client) -> None:
        self.app = app
        self.client = client
        self.db = sqlite_connect(str(app.settings.db_path), load_vectors=True)
        self.memory_ids: list[str] = []
        self.pending_ids: list[str] = []

    async def seed(self) -> None:
        me = self.app.settings.user
        for user in (me, OTHER_USER):
            mark = OTHER_MARK if user == OTHER_USER else ""
            ids = []
            for content, extra in (
                ("用户不喜欢香菜", {"keywords": ["香菜"]}),
                ("用户的名字叫林晓", {"scores": {"persistence": 1.0}, "category": Category.person}),
                ("用户住在上海", {}),
                ("用户在学吉他", {}),
            ):
                ids.append((await self.app.writing.add(user, AddRequest(content=mark + content, **extra))).memory_id)
            await self.app.writing.add(user, AddRequest(content=mark + "用户住在杭州", supersedes=ids[2]))
            await self.app.trash.forget(user, ids[3], None)
            ids.append((await self.app.writing.add(user, AddRequest(content=mark + "用户爱喝茶"))).memory_id)
            ids.append("0" * 32)
            self.memory_ids += ids
            for content in ("用户可能养了狗", "用户好像在减肥"):
                pending = await self.app.writing.add(user, AddRequest(content=mark + content, confidence=0.7))
                self.pending_ids.append(pending.pending_id)

    def resolve(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if isinstance(value, tuple) and value[0] == "pool":
            return self.memory_ids[value[1] % len(self.memory_ids)]
        if isinstance(value, tuple) and value[0] == "pending":
            return self.pending_ids[value[1] % len(self.pending_ids)]
        return value

    def fingerprint(self, user: str | None = None) -> str:
        digest = hashlib.sha256()
        for name, sql in TABLES.items():
            for row in self.db.execute(sql):
                if user is None or user in row:
                    digest.update(repr((name, row)).encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    async def settled(self) -> None:
        """Write the server's deferred recall bookkeeping now, so an earlier accepted recall's use counts
        cannot land between two fingerprints (the timer finds nothing left to write)."""
        await self.app.retrieval.uses.flush()

    async def check(self, tool: str, drawn: dict[str, Any]) -> None:
        args = self.resolve(drawn)
        await self.settled()
        whole, others = self.fingerprint(), self.fingerprint(OTHER_USER)
        result = await self.client.call_tool(tool, args)  # a protocol error raises here and fails the test
        text = " ".join(getattr(c, "text", "") for c in result.content)
        if result.is_error:
            assert text.strip(), (tool, args)
            assert "internal error" not in text, (tool, args, text)
            assert self.fingerprint() == whole, f"rejected {tool} changed the store: {text}"
        else:
            assert result.structured_content is not None, (tool, args)
        assert OTHER_MARK not in text, f"{tool} showed another user's memory: {text}"
        assert self.fingerprint(OTHER_USER) == others, f"{tool} touched another user's rows"


@pytest.fixture(params=["legacy", "auto"])
async def world(request: pytest.FixtureRequest, app: PocketMem, settings) -> AsyncIterator[World]:
    async with Client(build_server(settings, app=app), mode=request.param) as client:
        w = World(app, client)
        await w.seed()
        try:
            yield w
        finally:
            w.db.close()


def fuzz_tool(tool: str):  # builds one test per tool
    @settings(FUZZ, max_examples=EXAMPLES.get(tool, 25))
    @given(drawn=TOOL_ARGS[tool])
    async def test(world: World, drawn: dict[str, Any]) -> None:
        await world.check(tool, drawn)

    test.__name__ = f"test_fuzz_{tool}"
    return test


test_fuzz_recall_memories = fuzz_tool("recall_memories")
test_fuzz_add_memory = fuzz_tool("add_memory")
test_fuzz_patch_core_memory = fuzz_tool("patch_core_memory")
test_fuzz_confirm_pending = fuzz_tool("confirm_pending")
test_fuzz_list_trash = fuzz_tool("list_trash")
test_fuzz_restore = fuzz_tool("restore")
test_fuzz_forget_memory = fuzz_tool("forget_memory")
test_fuzz_list_memories = fuzz_tool("list_memories")
test_fuzz_mark_memory = fuzz_tool("mark_memory")
test_fuzz_remember_conversation = fuzz_tool("remember_conversation")
test_fuzz_update_profile = fuzz_tool("update_profile")


async def test_the_fuzzer_covers_every_tool(world: World) -> None:
    tools = {t.name for t in (await world.client.list_tools()).tools}
    assert tools == set(TOOL_ARGS)


@settings(FUZZ, max_examples=40)
@given(memory_id=st.one_of(hostile_text, st.integers(0, 11).map(lambda n: ("pool", n))))
async def test_fuzz_memory_resource(world: World, memory_id: Any) -> None:
    """Any id in memory://memories/{id}: the memory (only this user's) or a clear error, never a crash."""
    from mcp.shared.exceptions import MCPError

    resolved = world.resolve(memory_id)
    await world.settled()
    before = world.fingerprint()
    try:
        result = await world.client.read_resource(f"memory://memories/{resolved}")
    except MCPError as exc:
        assert "no memory with id" in exc.message or "Unknown resource" in exc.message, exc.message
        assert OTHER_MARK not in exc.message
    else:
        assert resolved in world.memory_ids[: len(world.memory_ids) // 2]  # only the caller's own
        assert resolved in result.contents[0].text
    assert world.fingerprint() == before


@settings(FUZZ, max_examples=30)
@given(message=hostile_text | long_text, context=st.one_of(st.none(), hostile_text))
async def test_fuzz_memory_context_prompt(world: World, message: str, context: str | None) -> None:
    from mcp.shared.exceptions import MCPError

    args = {"message": message} if context is None else {"message": message, "context": context}
    try:
        prompt = await world.client.get_prompt("memory_context", args)
    except MCPError as exc:
        assert exc.message.startswith("invalid argument "), exc.message
    else:
        assert OTHER_MARK not in prompt.messages[0].content.text
