"""A supersedes chain through forget and restore (service/writing/chains.py), and the flows around it, through the
MCP client on both backends and both protocol eras: whatever order versions leave and come back in, one of them
is current; forgetting a wrong correction makes the original current again; only lasting memories are promoted
and a completed todo leaves the card; a text listing matches keyword values, not their JSON; confirming a
pending memory names what the cap evicted."""

from __future__ import annotations

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.mcp.server import build_server

from .helpers import call, error

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"
COFFEE = ["咖啡", "饮品"]


async def memory(client: Client, memory_id: str) -> dict:
    for status in ("active", "superseded", "trashed"):
        found = await call(client, "list_memories", {"status": status, "limit": 100})
        for item in found["items"]:
            if item["id"] == memory_id:
                return item
    raise AssertionError(f"no memory {memory_id}")


async def recall(client: Client, query: str, keywords: list[str], **extra) -> list[dict]:
    return (await call(client, "recall_memories", {"query": query, "keywords": keywords, **extra}))["memories"]


async def coffee_chain(client: Client, clock) -> tuple[str, str]:
    old = await call(
        client, "add_memory", {"content": "我喜欢喝美式咖啡。", "category": "preference", "keywords": COFFEE}
    )
    clock.advance(days=10)
    new = await call(
        client, "add_memory",
        {"content": "我现在改喝拿铁了。", "category": "preference", "keywords": COFFEE, "supersedes": old["memory_id"]},
    )
    clock.advance(days=1)
    return old["memory_id"], new["memory_id"]


@pytest.mark.parametrize("older_first", [True, False])
async def test_restoring_a_chain_in_either_order_leaves_the_newest_current(client: Client, clock, older_first):
    old, new = await coffee_chain(client, clock)
    closed_at = (await memory(client, old))["valid_until"]
    await call(client, "forget_memory", {"memory_id": old})
    await call(client, "forget_memory", {"memory_id": new})
    if older_first:
        back = await call(client, "restore", {"memory_id": old})
        assert back["memory"]["status"] == "active" and back["memory"]["valid_until"] is None
        assert "current version" in back["message"] and "in the trash" in back["message"]
        again = await call(client, "restore", {"memory_id": new})
        assert again["superseded"] == old and f"replaces {old} again" in again["message"]
    else:
        await call(client, "restore", {"memory_id": new})
        back = await call(client, "restore", {"memory_id": old})
        assert back["memory"]["status"] == "superseded" and back["superseded"] is None
    assert (await memory(client, new))["status"] == "active"
    earlier = await memory(client, old)
    assert earlier["status"] == "superseded" and earlier["valid_until"] == closed_at
    assert [m["id"] for m in await recall(client, "我平时喝什么咖啡？", COFFEE)] == [new]
    history = await recall(client, "我平时喝什么咖啡？", COFFEE, include_history=True)
    assert [(m["id"], m["outdated"]) for m in history] == [(new, False), (old, True)]


@pytest.mark.parametrize("order", [("v3", "v2"), ("v2", "v3")])
async def test_a_three_version_chain_restored_in_any_order_has_one_current_version(client: Client, clock, order):
    """v1 ← v2 ← v3; v3 and v2 forgotten (v1 current again), then both restored: v3 is current, v1 and v2 history."""
    ids: dict[str, str] = {}
    texts = {"v1": "我的车是红色丰田。", "v2": "我换了车，现在开蓝色本田。", "v3": "我又换车了，现在开白色特斯拉。"}
    for name, text in texts.items():
        extra = {"supersedes": ids[f"v{int(name[1]) - 1}"]} if name != "v1" else {}
        ids[name] = (await call(client, "add_memory", {"content": text, "category": "fact", "keywords": ["车"],
                                                        **extra}))["memory_id"]
        clock.advance(days=10)
    await call(client, "forget_memory", {"memory_id": ids["v3"]})
    await call(client, "forget_memory", {"memory_id": ids["v2"]})
    assert (await memory(client, ids["v1"]))["status"] == "active"
    for name in order:
        await call(client, "restore", {"memory_id": ids[name]})
    assert [(await memory(client, ids[n]))["status"] for n in ("v1", "v2", "v3")] == ["superseded", "superseded",
                                                                                    "active"]
    assert [m["id"] for m in await recall(client, "我现在开什么车？", ["车"])] == [ids["v3"]]


async def test_forgetting_a_wrong_correction_makes_the_original_current_again(client: Client, app: PocketMem, clock):
    first = await call(client, "add_memory", {"content": "我住在上海。", "category": "fact", "keywords": ["住址"]})
    old = first["memory_id"]
    clock.advance(days=3)
    moved = await call(
        client, "add_memory",
        {"content": "我搬到杭州了。", "category": "fact", "keywords": ["住址"], "supersedes": old},
    )
    new = moved["memory_id"]
    clock.advance(hours=2)
    async with app.store.read() as reader:
        marker = await reader.change_marker()
    forgotten = await call(client, "forget_memory", {"memory_id": new, "reason": "记错了，用户没搬家"})
    assert forgotten["current_again"] == old and f"{old} (我住在上海。), is current again" in forgotten["message"]
    current = await memory(client, old)
    assert current["status"] == "active" and current["valid_until"] is None
    memories = await recall(client, "我住在哪？", ["住址", "上海"])
    assert [(m["id"], m["outdated"]) for m in memories] == [(old, False)]
    # Sync carries both: the correction's tombstone and the original, current again, as an ordinary change.
    async with app.store.read() as reader:
        changed = [m for _, m in await reader.changed_memories(USER, marker, None, 100)]
        tombstones = [t for _, t in await reader.changed_tombstones(USER, marker, None, 100)]
    assert {(m.id, m.status.value, m.updated_at) for m in changed} == {
        (old, "active", clock.now()), (new, "trashed", clock.now())
    }
    assert [t.memory_id for t in tombstones] == [new]
    # Nothing is lost: the correction restored closes the original again.
    clock.advance(hours=1)
    back = await call(client, "restore", {"memory_id": new})
    assert back["memory"]["status"] == "active" and back["superseded"] == old
    assert (await memory(client, old))["status"] == "superseded"


async def test_forgetting_history_or_a_lone_memory_reopens_nothing(client: Client, clock):
    old, new = await coffee_chain(client, clock)
    forgotten = await call(client, "forget_memory", {"memory_id": old})
    assert forgotten["current_again"] is None and "current again" not in forgotten["message"]
    assert (await memory(client, new))["status"] == "active"
    alone = await call(client, "add_memory", {"content": "用户养了一只猫。", "category": "fact"})
    assert (await call(client, "forget_memory", {"memory_id": alone["memory_id"]}))["current_again"] is None


@pytest.mark.parametrize("category", ["todo", "episode", "context"])
async def test_short_lived_memories_are_never_promoted(client: Client, category):
    added = await call(client, "add_memory", {"content": "今天聊了去云南旅游的计划。", "category": category})
    text = await error(client, "mark_memory", {"memory_id": added["memory_id"], "action": "promote"})
    assert f"action: memory {added['memory_id']} is a {category}" in text and "never promoted" in text, text
    assert (await memory(client, added["memory_id"]))["core"] is False
    kept = await call(client, "mark_memory", {"memory_id": added["memory_id"], "action": "keep"})
    assert kept["action"] == "keep"


@pytest.mark.parametrize("category", ["todo", "episode", "context"])
async def test_a_short_lived_memory_is_never_made_core(tmp_path, clock, make_settings, category):
    """A core todo was listed twice on the card (a core memory and an open todo), and a core episode kept on the
    card after its expiry hid it from recall: persistence 1 on a todo, episode or context is refused, naming the
    field and the rule, and nothing is stored (core/scoring.py may_be_core, the rule review and the page follow)."""
    settings = make_settings(tmp_path, locale="zh")
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        refused = await error(
            client, "add_memory", {"content": "每年体检", "category": category, "scores": {"persistence": 1}},
        )
        assert "scores.persistence" in refused and "never core" in refused, refused
        assert (await call(client, "list_memories", {}))["total"] == 0
        kept = await call(client, "add_memory", {"content": "每年体检", "category": category,
                                                  "scores": {"persistence": 0.9}})
        assert kept["status"] == "stored" and kept["core"] is False


async def test_a_text_listing_matches_keyword_values_not_their_json(client: Client):
    coriander = await call(
        client, "add_memory", {"content": "我不吃香菜。", "category": "preference", "keywords": ["香菜", "忌口"]}
    )
    python = await call(
        client, "add_memory", {"content": "I love Python.", "category": "preference", "keywords": ["Programming"]}
    )
    for text in ('"', "[", "]", ",", '", "'):
        listed = await call(client, "list_memories", {"text": text})
        assert listed["total"] == 0 and listed["items"] == [], (text, listed)
    for text, wanted in (("忌口", coriander), ("PROGRAM", python), ("python", python)):
        listed = await call(client, "list_memories", {"text": text})
        assert [m["id"] for m in listed["items"]] == [wanted["memory_id"]], (text, listed)


async def test_confirming_a_pending_memory_names_what_the_cap_evicted(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, max_active=2)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        tired = {"content": "用户今天有点累。", "scores": {"info": 0.1, "persistence": 0.1}}
        low = await call(client, "add_memory", tired)
        await call(client, "add_memory", {"content": "用户对花生过敏。", "scores": {"persistence": 1}})
        asked = await call(client, "add_memory", {"content": "用户在学日语。", "confidence": 0.7})
        assert asked["status"] == "pending"
        confirmed = await call(client, "confirm_pending", {"pending_id": asked["pending_id"], "action": "confirm"})
    assert [e["id"] for e in confirmed["evicted"]] == [low["memory_id"]]
    assert confirmed["evicted"][0]["content"] == "用户今天有点累。"
    assert "1 low-importance memory moved to the trash" in confirmed["message"]
