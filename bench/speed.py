"""Latency, start-up and memory of a real `pocketmem serve` subprocess, driven over stdio by the official MCP client.

    python bench/speed.py                          # 1,000, 10,000 and 100,000 memories
    python bench/speed.py --sizes 1000 --queries 100
    python bench/speed.py --write                  # ... and update docs/benchmarks.md

For each size: a store is filled in process through the bulk write path (timed: the bulk add rate),
then a server subprocess is started on it (timed: spawn to first answered request), and the client
sends `recall_memories` and `add_memory` calls one at a time, timing each round trip. Peak RSS is
the server process's VmHWM. Memories are synthetic but shaped like real ones: short Chinese or
English sentences about food, pets, people, places, work and tools, with agent-style keywords.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

from common import DATA, machine, percentile, write_section  # noqa: E402
from floor import stdio_floor  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

from pocketmem.app import PocketMem  # noqa: E402
from pocketmem.base.config import Settings  # noqa: E402
from pocketmem.base.models import (  # noqa: E402
    Category,  # noqa: E402
    Memory,
    Status,
)
from pocketmem.core.scoring import fill_scores, importance  # noqa: E402
from pocketmem.core.text import content_hash  # noqa: E402
from pocketmem.service.shared.rows import embedding_text, indexed_text, new_id  # noqa: E402
from pocketmem.service.writing.add_request import AddRequest  # noqa: E402

PEOPLE = ["小白", "许晴", "老陈", "王经理", "林悦", "阿杰", "豆豆", "妈妈", "爸爸", "Tom", "Alice", "张老师"]
FOODS = ["香菜", "火锅", "拉面", "寿司", "芒果", "咖啡", "绿茶", "辣椒", "牛排", "饺子", "奶茶", "披萨"]
PLACES = ["杭州", "上海", "北京", "东京", "成都", "西湖", "公司楼下", "健身房", "图书馆", "浦东", "Kyoto", "Berlin"]
TOOLS = [
    "Docker", "Kubernetes", "Nuxt 4", "TypeScript", "Python", "Go", "PostgreSQL", "Redis",
    "Git", "Vim", "Rust", "SQLite",
]
HOBBIES = ["跑步", "吉他", "摄影", "游泳", "爬山", "看电影", "读书", "下棋", "钓鱼", "画画", "滑雪", "做饭"]
FEELINGS = ["很喜欢", "不太喜欢", "最近迷上了", "有点怕", "一直想试试", "已经戒掉了"]
TEMPLATES = [
    ("用户{feel}{food}，上次在{place}吃了{n}次。", Category.preference, lambda v: [v["food"], "饮食", v["place"]]),
    ("{person}下周{n}号要去{place}，用户答应帮忙订票。", Category.event, lambda v: [v["person"], v["place"], "出行"]),
    ("用户用 {tool} 时踩过坑：第{n}次构建失败是因为缓存没清。", Category.lesson, lambda v: [v["tool"], "构建", "缓存"]),
    ("用户每周{n}次去{place}{hobby}。", Category.fact, lambda v: [v["hobby"], v["place"], "习惯"]),
    ("{person}喜欢{food}，生日是{n}月。", Category.person, lambda v: [v["person"], v["food"], "生日"]),
    ("聊了{person}和{hobby}的事，用户打算第{n}周开始。", Category.episode, lambda v: [v["person"], v["hobby"]]),
    ("The user prefers {tool} for side project #{n}.", Category.preference, lambda v: [v["tool"], "project"]),
    (
        "User wants to visit {place} with {person}, budget {n}00 dollars.",
        Category.goal,
        lambda v: [v["place"], "travel"],
    ),
]
QUERIES = [
    ("{food}能吃吗", lambda v: [v["food"], "饮食"]),
    ("{person}最近怎么样", lambda v: [v["person"]]),
    ("{tool} 又报错了", lambda v: [v["tool"], "报错"]),
    ("周末想去{place}{hobby}", lambda v: [v["place"], v["hobby"]]),
    ("What do I think about {tool}?", lambda v: [v["tool"]]),
    ("今天天气不错", lambda v: []),
]


def values(rnd: random.Random, n: int) -> dict[str, Any]:
    return {
        "person": rnd.choice(PEOPLE), "food": rnd.choice(FOODS), "place": rnd.choice(PLACES),
        "tool": rnd.choice(TOOLS), "hobby": rnd.choice(HOBBIES), "feel": rnd.choice(FEELINGS), "n": n,
    }


def synthetic_memories(count: int, seed: int = 7) -> list[AddRequest]:
    rnd = random.Random(seed)
    out = []
    for i in range(count):
        template, category, keywords = TEMPLATES[i % len(TEMPLATES)]
        v = values(rnd, i + 1)
        out.append(AddRequest(content=template.format(**v), category=category, keywords=keywords(v), source="bench"))
    return out


def synthetic_queries(count: int, seed: int = 11) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    out = []
    for _ in range(count):
        template, keywords = rnd.choice(QUERIES)
        v = values(rnd, 0)
        out.append({"query": template.format(**v), "keywords": keywords(v)})
    return out


def rss_mb(home: str) -> tuple[float, float] | None:
    """(VmRSS, VmHWM) of the server process, found by its POCKETMEM_HOME: resident now, and at its peak."""
    needle = f"POCKETMEM_HOME={home}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            if needle not in environ.split(b"\0"):
                continue
            status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
            return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024
        except (FileNotFoundError, PermissionError, ProcessLookupError):
            continue
    return None


FILL_BATCH = 1000


def memory_of(req: AddRequest, user_id: str, now: datetime, tag: str, episode_days: int) -> Memory:
    """The row the write path stores for `req` (Writing.store_in), for a store filled the way an import fills it."""
    scores = fill_scores(req.category, req.scores)
    info, coef, imp = importance(scores, now, now)
    return Memory(
        id=new_id(), user_id=user_id, content=req.content, category=req.category, keywords=req.keywords,
        scores=scores, info_importance=info, time_coef=coef, importance=imp, confidence=req.confidence,
        source=req.source, created_at=now, updated_at=now, valid_from=now, status=Status.active,
        expires_at=now + timedelta(days=episode_days) if req.category == Category.episode else None,
        content_hash=content_hash(req.content), embed_model=tag,
    )


async def fill(home: Path, size: int, cap: int) -> float:
    """The synthetic memories, written as `pocketmem import` writes (batches; bench/import.py times that path)."""
    settings = Settings(home=home, max_active=cap)
    started = time.perf_counter()
    async with PocketMem(settings) as app:
        await write_as_import(app, "global", synthetic_memories(size))
    return size / (time.perf_counter() - started)


async def write_as_import(app: PocketMem, user_id: str, requests: list[AddRequest]) -> list[str]:
    """Write `requests` as `pocketmem import` writes them, in batches of FILL_BATCH: every one is stored (an
    import restores rows; it does not look for near-duplicates). Returns their ids in order."""
    now = app.clock.now()
    async with app.store.write() as tx:
        await tx.ensure_user(user_id, now)
    ids: list[str] = []
    for start in range(0, len(requests), FILL_BATCH):
        batch = requests[start : start + FILL_BATCH]
        vectors = await app.embedder.embed_many([embedding_text(r.content, r.keywords) for r in batch])
        rows = [
            (
                memory_of(r, user_id, now, app.embedder.tag, app.settings.episode_days),
                v,
                indexed_text(r.content, r.keywords),
            )
            for r, v in zip(batch, vectors, strict=True)
        ]
        async with app.store.write() as tx:
            await tx.import_memories(rows)
        ids += [memory.id for memory, _, _ in rows]
    return ids


async def plant_eval(home: Path, cap: int) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """bench/data/eval_a.json's memories among the synthetic ones (key -> id) and its answerable queries.

    Recall over the grown store is then scored on questions whose answers are known: speed bought by
    dropping candidates shows up as a lower hit@3 at the larger sizes.
    """
    data = json.loads((DATA / "eval_a.json").read_text(encoding="utf-8"))
    ids: dict[str, str] = {}
    async with PocketMem(Settings(home=home, max_active=cap, tz="Asia/Shanghai", episode_days=3650)) as app:
        now = app.clock.now()
        for memory in sorted(data["memories"], key=lambda m: -m["days_ago"]):
            result = await app.writing.add("global", AddRequest(
                content=memory["content"], category=Category(memory["category"]),
                keywords=memory.get("keywords", []),
                scores={"persistence": memory["persistence"]} if "persistence" in memory else None,
                created_at=now - timedelta(days=memory["days_ago"]),
                supersedes=ids.get(memory["supersedes"]) if memory.get("supersedes") else None,
            ))
            if result.memory_id:
                ids[memory["key"]] = result.memory_id
    return ids, [q for q in data["queries"] if q["gold"]]


async def drive(
    home: Path, cap: int, queries: int, adds: int, planted: dict[str, str], evals: list[dict[str, Any]]
) -> dict[str, Any]:
    env = {
        "PATH": os.environ.get("PATH", ""), "POCKETMEM_HOME": str(home), "POCKETMEM_MAX_ACTIVE": str(cap),
        "POCKETMEM_TZ": "Asia/Shanghai", "POCKETMEM_EPISODE_DAYS": "3650",
        # The code of this checkout, whatever pocketmem is installed.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "server"), os.environ.get("PYTHONPATH")])),
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "pocketmem", "serve"], env=env)
    started = time.perf_counter()
    async with Client(params, mode="legacy") as client:
        await client.list_tools()
        startup = time.perf_counter() - started
        pool = synthetic_queries(queries + 20)
        for q in pool[:20]:  # warm caches the way a running server is warm
            await client.call_tool("recall_memories", q)
        gold_hits = 0
        for q in evals:
            args = {"query": q["query"], "context": q.get("context", [])[:3], "keywords": q["keywords"][:12]}
            result = await client.call_tool("recall_memories", args)
            top3 = [m["id"] for m in result.structured_content["memories"][:3]]
            gold_hits += any(planted.get(key) in top3 for key in q["gold"])
        recall_ms = []
        hits = 0
        for q in pool[20:]:
            t0 = time.perf_counter()
            result = await client.call_tool("recall_memories", q)
            recall_ms.append((time.perf_counter() - t0) * 1000)
            assert not result.is_error, result.content
            hits += bool(result.structured_content["memories"])
        add_ms = []
        for i, req in enumerate(synthetic_memories(adds, seed=99)):
            args = {"content": f"{req.content}（新{i}）", "category": req.category.value, "keywords": req.keywords}
            t0 = time.perf_counter()
            result = await client.call_tool("add_memory", args)
            add_ms.append((time.perf_counter() - t0) * 1000)
            assert not result.is_error, result.content
        rss, peak = rss_mb(str(home)) or (float("nan"), float("nan"))
    return {
        "startup_s": startup,
        "recall_p50": statistics.median(recall_ms),
        "recall_p95": percentile(sorted(recall_ms), 0.95),
        "add_p50": statistics.median(add_ms),
        "add_p95": percentile(sorted(add_ms), 0.95),
        "recall_nonempty": hits / len(recall_ms),
        "hit3": gold_hits / len(evals) if evals else float("nan"),
        "rss_mb": rss,
        "peak_mb": peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--adds", type=int, default=200)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(dir=ROOT / "bench") as tmp:
            home = Path(tmp)
            cap = max(800, size + args.adds + 100)
            rate = asyncio.run(fill(home, size, cap))
            planted, evals = asyncio.run(plant_eval(home, cap))
            floor = asyncio.run(stdio_floor(args.queries))
            result = asyncio.run(drive(home, cap, args.queries, args.adds, planted, evals))
            db_mb = sum(p.stat().st_size for p in home.glob("memory.db*")) / 1e6
        result.update(size=size, bulk_rate=rate, db_mb=db_mb, floor_p50=floor["p50"], floor_startup=floor["startup_s"],
                      load=os.getloadavg()[0])
        rows.append(result)
        print(
            f"{size:>7} memories: floor p50 {floor['p50']:.1f} ms | hit@3 {result['hit3']:.2f} | "
            f"recall p50 {result['recall_p50']:.1f} ms p95 {result['recall_p95']:.1f} ms | "
            f"add p50 {result['add_p50']:.1f} ms p95 {result['add_p95']:.1f} ms | "
            f"start-up {result['startup_s']:.2f} s (floor {floor['startup_s']:.2f} s) | "
            f"RSS {result['rss_mb']:.0f} MB (peak {result['peak_mb']:.0f}) | bulk {rate:.0f}/s | db {db_mb:.0f} MB | "
            f"recalls with hits {result['recall_nonempty']:.0%}",
            file=sys.stderr,
        )
    if args.write:
        lines = [
            f"Generated by `python bench/speed.py --write` on {machine()}.",
            f"`{Settings().embedder}` embedder (the default); one client over stdio, calls "
            "one at a time, round trips as the client sees them;",
            f"{args.queries} recalls and {args.adds} adds per size. Start-up is spawn to an answered tools/list,",
            "beside the bare SDK server's (floor). Floor: a bare SDK server's no-op tool over stdio (bench/floor.py),",
            "measured just before each size. RSS: the server's VmRSS after the calls (resident after warm-up);",
            "peak: its VmHWM (the encoder loads after the handshake, its table in memory until it is in the cache).",
            "Bulk fill: the synthetic store written in batches as `pocketmem import` writes (memories/s).",
            "hit@3: eval_a's 226 memories live among the synthetic ones; its answerable questions, asked over",
            "the same connection, with a gold memory in the first three (eval_a alone: 0.84).",
            "Measured on a 2-core sandbox shared with other work (load average at each size in the last column).",
            "",
            "| memories | floor p50 | recall p50 | recall p95 | hit@3 | add p50 | add p95 | start-up (floor) "
            "| RSS (peak) | bulk fill | database | load |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['size']:,} | {r['floor_p50']:.1f} ms | {r['recall_p50']:.1f} ms | {r['recall_p95']:.1f} ms | "
                f"{r['hit3']:.2f} | {r['add_p50']:.1f} ms | "
                f"{r['add_p95']:.1f} ms | {r['startup_s']:.2f} s ({r['floor_startup']:.2f} s, "
                f"{r['startup_s'] / r['floor_startup']:.2f}×) | {r['rss_mb']:.0f} MB ({r['peak_mb']:.0f} MB) | "
                f"{r['bulk_rate']:,.0f}/s | "
                f"{r['db_mb']:.0f} MB | {r['load']:.1f} |"
            )
        write_section("\n".join(lines), "speed")


if __name__ == "__main__":
    main()
