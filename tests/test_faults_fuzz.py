"""Faults: a hypothesis fuzz of every writing tool aimed at this issue's defects — instants at the edges of
the accepted years in any offset or zone, numbers where dates go, secrets hidden in side texts and reasons
(split by invisible characters, full-width). Through the real MCP client, on a real SQLite file:

    a refused call changes nothing        (every table's rows hashed before and after)
    an accepted call stores no secret     (the raw file is searched for each secret's tail)
    every stored time reads back          (doctor's scan of every row finds nothing)

test_fuzz.py fuzzes every tool with generally hostile input under the same "refused changes nothing" rule.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from pocketmem.mcp.server import build_server
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.store.sqlite.driver import connect as sqlite_connect

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

FUZZ = settings(
    max_examples=60, derandomize=True, database=None, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
TABLES = ("memories", "memory_tombstones", "memory_revisions", "memory_pending", "memory_events",
          "memory_operations", "users")
TAILS = ("Qwe98765!ab", "Sunshine2024x", "Hunter22secret", "ZZ9plural", "klmnopqrstuvwxyz", "ｋｌｍｎｏｐｑｒｓｔ")

offsets = st.sampled_from(["", "Z", "+00:00", "+01:00", "+08:00", "+14:00", "-12:00", "+05:45", "-00:30"])
years = st.sampled_from([999, 1000, 1001, 2026, 8999, 9000, 9001, 9998, 9999])
instant = st.one_of(
    st.builds(lambda y, m, d, h, off: f"{y:04d}-{m:02d}-{d:02d}T{h:02d}:00:00{off}",
              years, st.integers(1, 12), st.integers(1, 28), st.integers(0, 23), offsets),
    st.builds(lambda y: f"{y:04d}-01-01", years),
    st.sampled_from([-1, 0, 1, 1.5, 1_700_000_000, True, "yesterday", "", "1000-01-01T00:00:00+25:00"]),
)
secret = st.sampled_from([
    "我的密碼是Qwe98765!ab", "WiFi密码 Sunshine2024x", "pw: Hunter22secret", "银行卡PIN码是 ZZ9plural",
    "sk-proj-abcdefghij\u200bklmnopqrstuvwxyz", "sk-proj-abcdefghij\u00adklmnopqrstuvwxyz",
    "ｓｋ－ｐｒｏｊ－ａｂｃｄｅｆｇｈｉｊｋｌｍｎｏｐｑｒｓｔ",
])
plain = st.sampled_from(["用户喜欢香菜", "The user prefers tea", "用户下周二面试", "小白是用户的猫"])
side = st.one_of(st.none(), plain, secret, st.builds(lambda a, b: f"{a} {b}", plain, secret))
DATE_FIELDS = ("created_at", "valid_from", "due_at", "remind_at", "expires_at")

calls = st.one_of(
    st.builds(
        lambda content, dates, src, ref, op, category: ("add_memory", {
            "content": content, "category": category, **dates,
            **{k: v for k, v in (("source", src), ("source_ref", ref), ("operation_id", op)) if v is not None}}),
        st.one_of(plain, secret, st.builds(lambda a, b: f"{a}，{b}", plain, secret)),
        st.fixed_dictionaries({}, optional=dict.fromkeys(DATE_FIELDS, instant)),
        side, side, side, st.sampled_from(["fact", "todo", "episode"]),
    ),
    st.builds(lambda n, reason: ("forget_memory", {"memory_id": n, "reason": reason}), st.integers(0, 3), side),
    st.builds(lambda patch, reason: ("patch_core_memory", {"memory_id": "core", "patch": patch, "reason": reason}),
              st.one_of(plain, secret), side),
    st.builds(lambda n, reason: ("mark_memory", {"memory_id": n, "action": "keep", "reason": reason}),
              st.integers(0, 3), side),
)


class World:
    def __init__(self, app, client: Client) -> None:
        self.app = app
        self.client = client
        self.db = sqlite_connect(str(app.settings.db_path), load_vectors=False)
        self.ids: list[str] = []
        self.core = ""

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for table in TABLES:
            for row in self.db.execute(f"select * from {table} order by rowid"):
                digest.update(repr(row).encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    def raw(self) -> str:
        return "\n".join(repr(row) for table in TABLES for row in self.db.execute(f"select * from {table}"))

    def resolve(self, args: dict[str, Any]) -> dict[str, Any]:
        args = {k: v for k, v in args.items() if v is not None}
        if args.get("memory_id") == "core":
            args["memory_id"] = self.core
        elif isinstance(args.get("memory_id"), int):
            args["memory_id"] = self.ids[args["memory_id"] % len(self.ids)]
        return args


@pytest.fixture
async def world(app, settings):
    async with Client(build_server(settings, app=app)) as client:
        w = World(app, client)
        w.core = (await app.writing.add(
            app.settings.user, AddRequest(content="用户的名字叫林晓", scores={"persistence": 1.0}))).memory_id
        for content in ("用户住在上海", "用户在学吉他", "用户爱喝茶", "用户养了一只猫"):
            w.ids.append((await app.writing.add(app.settings.user, AddRequest(content=content))).memory_id)
        try:
            yield w
        finally:
            w.db.close()


@FUZZ
@given(call=calls)
async def test_fuzz_times_and_secrets_in_every_writing_tool(world: World, call: tuple[str, dict[str, Any]]):
    tool, args = call
    args = world.resolve(args)
    before = world.fingerprint()
    result = await world.client.call_tool(tool, args)
    text = " ".join(getattr(c, "text", "") for c in result.content)
    if result.is_error:
        assert "internal error" not in text, (tool, args, text)
        assert world.fingerprint() == before, f"refused {tool} changed the store: {text}"
    stored = world.raw()
    for tail in TAILS:
        assert tail not in stored, (tool, args)
        assert tail not in text, (tool, args, text)
    assert (await world.app.doctor())["unreadable_times"] == []
