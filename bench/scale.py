"""Recall at scale: does the one target memory of a question stay in the top 10 as the store grows?

    python bench/scale.py                          # 1,000 / 10,000 / 100,000 memories, 200 questions each
    python bench/scale.py --sizes 1000 10000 --questions 100
    python bench/scale.py --write                  # ... and update docs/benchmarks.md
    python bench/scale.py --sizes 100000 --stdio   # ... and the same questions over stdio, beside the SDK floor

Memories are synthetic short sentences about people and events, half English, half Chinese
("Olivia Park sold a bicycle in Denver on Tuesday." / "陈子涵周三在成都买了一台相机。"). Each question
names a person, an action and a thing of exactly one memory (its target), in other words than the
memory ("Where did Olivia Park sell the bicycle?" / "陈子涵在哪儿买的相机？"), so the person, the verb
and the thing each appear in many memories and only their combination is unique. Beside pocketmem's
recall (top_k 10, the default embedder) the same run ranks the same memories with plain BM25
(bench/bm25.py: FTS5 bm25, no threshold). Stores are written as `pocketmem import` writes (speed.write_as_import:
every sentence is stored; add_memory's near-duplicate rule would merge many of these templated sentences, see
docs/benchmarks.md, *Duplicates*), built once and cached under bench/.cache/ (git-ignored); delete it after
changing tokenisation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

from bm25 import BM25  # noqa: E402
from common import machine, percentile, write_section  # noqa: E402
from floor import stdio_floor  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from speed import write_as_import  # noqa: E402

from pocketmem.app import PocketMem  # noqa: E402
from pocketmem.base.config import Settings  # noqa: E402
from pocketmem.base.models import Category  # noqa: E402
from pocketmem.service.recall.retrieval import RecallRequest  # noqa: E402
from pocketmem.service.writing.add_request import AddRequest  # noqa: E402

CACHE = ROOT / "bench" / ".cache"
USER = "scale"
EN_FIRST = ("Olivia Liam Emma Noah Ava Ethan Mia Lucas Chloe Mason Grace Owen Zoe Caleb Nora Isaac Ruby Leo Hazel "
            "Miles Ivy Felix Clara Jonah Stella Elliot Maya Adrian Lila Simon").split()
EN_LAST = ("Park Chen Miller Novak Reyes Walsh Grant Ortiz Fischer Hayes Brooks Kim Patel Moreau Silva Dunn Kerr "
           "Lowe Baker Quinn").split()
EN_VERBS = [("sold", "sell"), ("bought", "buy"), ("lost", "lose"), ("found", "find"), ("borrowed", "borrow"),
            ("repaired", "repair"), ("painted", "paint"), ("gave away", "give away"), ("rented", "rent"),
            ("broke", "break")]
EN_THINGS = ("bicycle camera guitar laptop sofa telescope kayak piano watch tent drone violin scooter printer "
             "microscope").split()
EN_CITIES = "Denver Austin Boston Seattle Chicago Portland Phoenix Atlanta Miami Dallas".split()
EN_DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
ZH_SURNAMES = list("陈林王张李刘杨黄赵周吴徐孙马朱胡郭何高罗")
ZH_GIVEN = ["子涵", "雨桐", "浩然", "思远", "嘉怡", "俊杰", "欣然", "宇航", "诗琪", "梓萱", "一鸣", "晓彤",
            "天佑", "可欣", "明轩"]
ZH_VERBS = ["买", "卖", "修", "借", "丢", "送", "租", "画", "拍", "换"]
ZH_THINGS = ["相机", "吉他", "自行车", "沙发", "望远镜", "钢琴", "手表", "帐篷", "无人机", "小提琴", "滑板车",
             "打印机", "显微镜", "皮划艇", "笔记本电脑"]
ZH_CITIES = ["成都", "杭州", "南京", "西安", "厦门", "青岛", "长沙", "昆明", "大连", "苏州"]
ZH_DAYS = ["周一", "周二", "周三", "周四", "周五", "周六", "周日"]


def memories(size: int, seed: int = 5) -> list[tuple[str, tuple[str, ...], str]]:
    """(content, the facts a question can name, language) for `size` memories."""
    rnd = random.Random(seed)
    out = []
    for i in range(size):
        if i % 2 == 0:
            first, last = rnd.choice(EN_FIRST), rnd.choice(EN_LAST)
            past, base = rnd.choice(EN_VERBS)
            thing, city, day = rnd.choice(EN_THINGS), rnd.choice(EN_CITIES), rnd.choice(EN_DAYS)
            out.append((f"{first} {last} {past} a {thing} in {city} on {day}.", (f"{first} {last}", base, thing), "en"))
        else:
            name = rnd.choice(ZH_SURNAMES) + rnd.choice(ZH_GIVEN)
            verb, thing = rnd.choice(ZH_VERBS), rnd.choice(ZH_THINGS)
            city, day = rnd.choice(ZH_CITIES), rnd.choice(ZH_DAYS)
            measure = "台" if len(thing) > 2 else "把"
            out.append((f"{name}{day}在{city}{verb}了一{measure}{thing}。", (name, verb, thing), "zh"))
    return out


def questions(items: list[tuple[str, tuple[str, ...], str]], count: int, seed: int = 9) -> list[tuple[str, int]]:
    """(question, index of its one target) for memories whose person + action + thing is unique."""
    combos = Counter(facts for _, facts, _ in items)
    rnd = random.Random(seed)
    candidates = [i for i, (_, facts, _) in enumerate(items) if combos[facts] == 1]
    out = []
    for i in rnd.sample(candidates, min(count, len(candidates))):
        (person, verb, thing), lang = items[i][1], items[i][2]
        text = f"Where did {person} {verb} the {thing}?" if lang == "en" else f"{person}在哪儿{verb}的{thing}？"
        out.append((text, i))
    return out


async def build(size: int) -> tuple[Path, list[str]]:
    home = CACHE / f"scale-{size}"
    ids_file = home / "ids.json"
    if ids_file.exists():
        return home, json.loads(ids_file.read_text())
    home.mkdir(parents=True, exist_ok=True)
    items = memories(size)
    started = time.perf_counter()
    async with PocketMem(Settings(home=home, max_active=size * 2, maintain_interval=0)) as app:
        ids = await write_as_import(app, USER, [AddRequest(content=c, category=Category.event, source="bench")
                                                for c, _, _ in items])
    print(f"built {size} in {time.perf_counter() - started:.0f}s", file=sys.stderr)
    ids_file.write_text(json.dumps(ids))
    BM25(((str(i), c) for i, (c, _, _) in enumerate(items)), path=str(home / "bm25.db"))
    return home, ids


async def measure(size: int, count: int) -> dict[str, float]:
    home, ids = await build(size)
    items = memories(size)
    asked = questions(items, count)
    bm25 = BM25.open(str(home / "bm25.db"))
    ours = ref = 0
    latencies = []
    async with PocketMem(Settings(home=home, max_active=size * 2, maintain_interval=0)) as app:
        for text, _target in asked[:10]:  # warm caches as a running server is warm
            await app.retrieval.recall(USER, RecallRequest(query=text, top_k=10, record=False))
        for text, target in asked:
            t0 = time.perf_counter()
            result = await app.retrieval.recall(USER, RecallRequest(query=text, top_k=10, record=False))
            latencies.append((time.perf_counter() - t0) * 1000)
            ours += ids[target] in {m.id for m in result.memories}
            ref += str(target) in bm25.search([text], 10)
    latencies.sort()
    n = len(asked)
    return {"size": size, "questions": n, "top10": ours / n, "bm25_top10": ref / n,
            "ratio": (ours / ref) if ref else float("nan"), "p50_ms": latencies[n // 2],
            "p95_ms": latencies[int(n * 0.95) - 1]}


async def over_stdio(size: int, count: int) -> dict[str, float]:
    """The same questions through a `pocketmem serve` subprocess, round trips as the MCP client sees them.
    Recall's bookkeeping (use counts) is written into the cached store, as a running server writes it."""
    home, ids = await build(size)
    asked = questions(memories(size), count)
    env = {
        "PATH": os.environ.get("PATH", ""), "POCKETMEM_HOME": str(home), "POCKETMEM_USER": USER,
        "POCKETMEM_MAX_ACTIVE": str(size * 2), "POCKETMEM_MAINTAIN_INTERVAL": "0",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "server"), os.environ.get("PYTHONPATH")])),
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "pocketmem", "serve"], env=env)
    latencies, ours = [], 0
    async with Client(params, mode="legacy") as client:
        for text, _target in asked[:10]:  # warm caches as a running server is warm
            await client.call_tool("recall_memories", {"query": text, "top_k": 10})
        for text, target in asked:
            t0 = time.perf_counter()
            result = await client.call_tool("recall_memories", {"query": text, "top_k": 10})
            latencies.append((time.perf_counter() - t0) * 1000)
            ours += ids[target] in {m["id"] for m in result.structured_content["memories"]}
    latencies.sort()
    floor = await stdio_floor(count)
    return {"size": size, "questions": len(asked), "stdio_top10": ours / len(asked),
            "stdio_p50_ms": statistics.median(latencies), "stdio_p95_ms": percentile(latencies, 0.95),
            "floor_p50_ms": floor["p50"], "load": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--stdio", action="store_true", help="also ask over stdio (printed, not written)")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rows = []
    for size in args.sizes:
        row = asyncio.run(measure(size, args.questions))
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
        if args.stdio:
            print(json.dumps(asyncio.run(over_stdio(size, args.questions))), file=sys.stderr)
    if args.write:
        lines = [
            f"Machine: {machine()} (2-core sandbox, shared with other work). "
            "Generated by `python bench/scale.py --write`.",
            "",
            "| memories | questions | target in top 10 | plain BM25 top 10 | ratio | recall p50 | recall p95 |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(f"| {r['size']:,} | {r['questions']} | {r['top10']:.2f} | {r['bm25_top10']:.2f} | "
                         f"{r['ratio']:.2f} | {r['p50_ms']:.1f} ms | {r['p95_ms']:.1f} ms |")
        write_section("\n".join(lines), "scale")


if __name__ == "__main__":
    main()
