"""Pending memories and the write path around them, through the SDK's own client in process, on both backends:
`supersedes` is checked when an item is made, the user's yes stores it even when its target changed since, a
rejected memory is not asked again, storing content settles the item asking it, and a duplicate still closes
the memory it supersedes."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.models import PendingStatus
from pocketmem.service.writing.add_request import AddRequest

from .asgi import make_browser
from .helpers import SHANGHAI, call, error

pytestmark = [pytest.mark.anyio, pytest.mark.backends]


async def memory(client: Client, memory_id: str) -> dict:
    return json.loads((await client.read_resource(f"memory://memories/{memory_id}")).contents[0].text)


async def listed(client: Client, status: str) -> list[str]:
    return [i["content"] for i in (await call(client, "list_memories", {"status": status, "limit": 500}))["items"]]


async def asked(client: Client) -> list[str]:
    recalled = await call(client, "recall_memories", {"query": "你好"})
    return [p["content"] for p in recalled["pending_confirmations"]]


async def test_a_pending_add_checks_supersedes_as_a_stored_one_does(app: PocketMem, client: Client):
    core = await call(client, "add_memory", {"content": "用户对花生过敏", "scores": {"persistence": 1}})
    others = await app.writing.add("alice", AddRequest(content="alice 每天跑步5公里"))
    for target, pattern in [
        (core["memory_id"], rf"supersedes: memory {core['memory_id']} is a core memory; change it with "
                            r"patch_core_memory"),
        ("no-such-id", r"supersedes: no memory with id 'no-such-id'"),
        (others.memory_id, rf"supersedes: no memory with id '{others.memory_id}'"),  # another user's memory
    ]:
        args = {"content": "用户对花生不再过敏", "supersedes": target}
        stored = await error(client, "add_memory", {**args, "confidence": 1})
        pending = await error(client, "add_memory", {**args, "confidence": 0.7})
        assert re.search(pattern, pending), pending
        assert pending == stored  # one rule, one message
    assert await listed(client, "pending") == [] and await asked(client) == []


async def test_the_users_yes_stores_it_even_when_its_target_changed_since(client: Client):
    run5 = await call(client, "add_memory", {"content": "用户每天跑步5公里"})
    tea = await call(client, "add_memory", {"content": "用户喜欢喝绿茶"})
    run10 = await call(client, "add_memory", {"content": "用户每天跑步10公里", "supersedes": run5["memory_id"],
                                              "confidence": 0.7})
    black = await call(client, "add_memory", {"content": "用户改喝红茶了", "supersedes": tea["memory_id"],
                                               "confidence": 0.7})
    assert run10["status"] == black["status"] == "pending"
    run8 = await call(client, "add_memory", {"content": "用户每天跑步8公里", "supersedes": run5["memory_id"]})
    await call(client, "forget_memory", {"memory_id": tea["memory_id"]})

    for item, target in [(run10, run5), (black, tea)]:
        confirmed = await call(client, "confirm_pending", {"pending_id": item["pending_id"], "action": "confirm"})
        assert confirmed["status"] == "confirmed" and confirmed["memory_id"]
        assert "Nothing was superseded, as the memory it was to replace changed after it was proposed" in (
            confirmed["message"]
        ), confirmed["message"]
        assert target["memory_id"] in confirmed["message"]
        stored = await memory(client, confirmed["memory_id"])
        assert stored["status"] == "active" and stored["supersedes"] is None
    assert (await memory(client, run5["memory_id"]))["status"] == "superseded"  # still by the 8 km memory
    assert (await memory(client, run8["memory_id"]))["supersedes"] == run5["memory_id"]
    assert (await memory(client, tea["memory_id"]))["status"] == "trashed"
    assert await asked(client) == [] and await listed(client, "pending") == []


async def test_a_rejected_memory_is_not_asked_again(client: Client):
    first = await call(client, "add_memory", {"content": "用户也许在学吉他", "confidence": 0.7})
    rejected = await call(client, "confirm_pending", {"pending_id": first["pending_id"], "action": "reject"})
    assert rejected["message"] == "Rejected; it will not be asked again."

    again = await call(client, "add_memory", {"content": "用户也许在学吉他。", "confidence": 0.7})
    assert (again["status"], again["reason"], again["pending_id"]) == ("discarded", "rejected", None)
    assert "the user rejected this memory when asked" in again["message"] and first["pending_id"] in again["message"]
    assert await asked(client) == [] and await listed(client, "pending") == []

    said = await call(client, "add_memory", {"content": "用户也许在学吉他", "confidence": 0.9})  # not a question
    assert said["status"] == "stored"
    assert await listed(client, "active") == ["用户也许在学吉他"]


async def test_storing_content_settles_the_pending_item_asking_it(app: PocketMem, client: Client):
    beijing = await call(client, "add_memory", {"content": "用户住在北京", "confidence": 0.7})
    cat = await call(client, "add_memory", {"content": "用户养了一只猫", "confidence": 0.7})
    await call(client, "confirm_pending", {"pending_id": cat["pending_id"], "action": "snooze", "snooze_hours": 1})
    assert await asked(client) == ["用户住在北京"]

    stored = await call(client, "add_memory", {"content": "用户住在北京"})
    known = await call(client, "add_memory", {"content": "用户住在北京。"})  # a duplicate settles nothing new
    restated = await call(client, "add_memory", {"content": "用户养了一只猫"})
    assert (stored["status"], known["status"], restated["status"]) == ("stored", "duplicate", "stored")
    assert f"It also settles pending {beijing['pending_id']}" in stored["message"]
    assert "settles" not in known["message"]
    assert f"It also settles pending {cat['pending_id']}" in restated["message"]

    assert await asked(client) == [] and await listed(client, "pending") == []
    async with app.store.read() as r:
        items = {i.id: i for i in await r.all_pending("global")}
    assert (items[beijing["pending_id"]].status, items[beijing["pending_id"]].memory_id) == (
        PendingStatus.confirmed, stored["memory_id"],
    )
    assert (items[cat["pending_id"]].status, items[cat["pending_id"]].memory_id) == (
        PendingStatus.confirmed, restated["memory_id"],
    )
    late = await error(client, "confirm_pending", {"pending_id": beijing["pending_id"], "action": "confirm"})
    assert f"was already confirmed as memory {stored['memory_id']}" in late
    assert await listed(client, "active") == ["用户养了一只猫", "用户住在北京"]


async def test_supersedes_closes_the_old_memory_when_the_new_content_is_already_remembered(client: Client):
    green = await call(client, "add_memory", {"content": "用户喜欢喝绿茶"})
    black = await call(client, "add_memory", {"content": "用户改喝红茶了"})
    back = await call(client, "add_memory", {"content": "用户喜欢喝绿茶", "supersedes": black["memory_id"]})
    assert (back["status"], back["memory_id"], back["superseded"]) == (
        "duplicate", green["memory_id"], black["memory_id"],
    )
    assert f"It replaces {black['memory_id']}" in back["message"]
    old = await memory(client, black["memory_id"])
    assert old["status"] == "superseded" and old["valid_until"]
    assert (await memory(client, green["memory_id"]))["supersedes"] == black["memory_id"]
    assert await listed(client, "active") == ["用户喜欢喝绿茶"]

    # At pending confidence it is a question like any other; the user's yes closes the old memory the same way.
    oolong = await call(client, "add_memory", {"content": "用户最近只喝乌龙茶"})
    asked_back = await call(client, "add_memory", {"content": "用户喜欢喝绿茶", "supersedes": oolong["memory_id"],
                                                   "confidence": 0.7})
    assert asked_back["status"] == "pending"
    yes = await call(client, "confirm_pending", {"pending_id": asked_back["pending_id"], "action": "confirm"})
    assert yes["memory_id"] == green["memory_id"] and f"It replaces {oolong['memory_id']}" in yes["message"]
    assert (await memory(client, oolong["memory_id"]))["status"] == "superseded"
    assert await listed(client, "active") == ["用户喜欢喝绿茶"]

    # A near-duplicate (it says less than what is known) closes the old memory the same way.
    known = await call(client, "add_memory", {"content": "用户不喜欢香菜，吃到会很反感"})
    eats = await call(client, "add_memory", {"content": "用户开始吃香菜了"})
    again = await call(client, "add_memory", {"content": "用户不喜欢香菜", "supersedes": eats["memory_id"]})
    assert (again["status"], again["memory_id"], again["superseded"]) == (
        "duplicate", known["memory_id"], eats["memory_id"],
    )
    assert (await memory(client, eats["memory_id"]))["status"] == "superseded"
    # ... but the memory being replaced is no duplicate of its own new version: that one is stored.
    shorter = await call(client, "add_memory", {"content": "用户不喜欢香菜", "supersedes": known["memory_id"]})
    assert shorter["status"] == "stored" and shorter["superseded"] == known["memory_id"]

    # The same content as the memory it supersedes is that memory: nothing is closed.
    same = await call(client, "add_memory", {"content": "用户喜欢喝绿茶", "supersedes": green["memory_id"]})
    assert (same["status"], same["memory_id"], same["superseded"]) == ("duplicate", green["memory_id"], None)
    assert (await memory(client, green["memory_id"]))["status"] == "active"


async def test_a_confirmed_memory_is_dated_when_the_user_said_it(client: Client, clock):
    """Said on 2027-02-01, confirmed on 2028-03-01: stored as said then (its age, an episode's expiry); an episode
    that expired before the user's yes is refused as add_memory refuses it, and stays pending."""
    clock.set(datetime(2027, 2, 1, 10, 0, tzinfo=SHANGHAI))
    trip = await call(client, "add_memory", {"content": "我下个月可能要去日本出差", "category": "event",
                                             "confidence": 0.7})
    talk = await call(client, "add_memory", {"content": "聊了装修预算，想控制在二十万以内", "category": "episode",
                                             "confidence": 0.7})
    late = await call(client, "add_memory", {"content": "聊了周末去哪家餐厅", "category": "episode",
                                             "confidence": 0.7})
    clock.set(datetime(2027, 2, 10, 10, 0, tzinfo=SHANGHAI))
    stored = await call(client, "confirm_pending", {"pending_id": talk["pending_id"], "action": "confirm"})
    episode = await memory(client, stored["memory_id"])
    assert episode["created_at"].startswith("2027-02-01") and episode["expires_at"].startswith("2027-02-15")

    clock.set(datetime(2028, 3, 1, 11, 30, tzinfo=SHANGHAI))
    confirmed = await call(client, "confirm_pending", {"pending_id": trip["pending_id"], "action": "confirm"})
    assert (await memory(client, confirmed["memory_id"]))["created_at"].startswith("2027-02-01")
    recalled = await call(client, "recall_memories", {"query": "我要去日本出差吗"})
    assert "今天的对话摘要" not in recalled["injection"] and "我下个月可能要去日本出差" in recalled["injection"]

    refused = await error(client, "confirm_pending", {"pending_id": late["pending_id"], "action": "confirm"})
    assert refused.endswith(
        f"pending {late['pending_id']} is an episode said on 2027-02-01 10:00 +08:00; it expired on 2027-02-15 "
        "10:00 +08:00 (14 days, POCKETMEM_EPISODE_DAYS) before it was confirmed, so it is not stored and stays "
        "pending: reject it, or add it again as another category (fact, event) if it still matters"
    )
    assert await listed(client, "pending") == ["聊了周末去哪家餐厅"]


async def test_a_pending_item_is_listed_as_said_when_the_caller_dated_it(app: PocketMem, client: Client, clock):
    """created_at passed with a pending add is when it was said: recall's pending_confirmations, list_memories and
    the page show it, and the memory confirm stores is dated the same; one left out is when it was proposed."""
    dated = await call(client, "add_memory", {"content": "用户周五晚上跟老同学吃了火锅", "category": "event",
                                              "confidence": 0.7, "created_at": "2026-11-20T21:00"})
    undated = await call(client, "add_memory", {"content": "用户可能在学日语", "confidence": 0.7})
    said, proposed = "2026-11-20T21:00:00+08:00", "2026-11-26T10:00:00+08:00"
    clock.advance(hours=2)

    recalled = await call(client, "recall_memories", {"query": "你好"})
    shown = {p["pending_id"]: p["created_at"] for p in recalled["pending_confirmations"]}
    assert shown == {dated["pending_id"]: said, undated["pending_id"]: proposed}
    listing = await call(client, "list_memories", {"status": "pending"})
    assert {i["pending_id"]: i["created_at"] for i in listing["items"]} == shown
    # newest first by the date shown, not by when each was proposed
    later = await call(client, "add_memory", {"content": "用户上周三去了一趟苏州", "category": "event",
                                              "confidence": 0.7, "created_at": "2026-11-25T09:00"})
    listing = await call(client, "list_memories", {"status": "pending"})
    assert [i["pending_id"] for i in listing["items"]] == [p["pending_id"] for p in (undated, later, dated)]
    async with make_browser(app) as page:
        html = (await page.get("/ui/pending")).text
    row = html[html.index(f'data-id="{dated["pending_id"]}"'):]
    assert '<time datetime="2026-11-20T13:00:00+00:00"' in row[: row.index("</tr>")]

    confirmed = await call(client, "confirm_pending", {"pending_id": dated["pending_id"], "action": "confirm"})
    assert (await memory(client, confirmed["memory_id"]))["created_at"] == said
