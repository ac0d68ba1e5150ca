"""Recall latency on PostgreSQL + pgvector with a large library: 100,000 and 1,000,000 memories across 100 users.

    python bench/postgres.py                              # both sizes, on a local PostgreSQL from pgserver
    python bench/postgres.py --sizes 100000 --queries 200
    python bench/postgres.py --url postgresql://...       # an existing server (a database per size is created)
    python bench/postgres.py --write                      # ... and update docs/benchmarks.md

For each size a fresh database is filled with COPY (memories as pocketmem writes them: content, scores,
pre-split terms and user-prefixed lexemes, built-in `hash` vectors), the keyword counters are computed in
one statement, the HNSW index is built, and recall runs through the service (`Retrieval.recall`, as the
`recall_memories` tool calls it, without touching hits) for a random user per query, one at a time:

    keyword path   the built-in lexical embedder: term counts, keyword hits (GIN), similarities of the shortlist
    vector path    the same vectors declared non-lexical, as with a neural embedder: also the top-by-importance
                   similarities and the nearest-neighbour search (HNSW or the user's rows, as the planner picks)
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
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

from common import percentile, write_section  # noqa: E402
from speed import synthetic_memories, synthetic_queries  # noqa: E402

from pocketmem.app import PocketMem  # noqa: E402
from pocketmem.base.config import Settings  # noqa: E402
from pocketmem.core.scoring import fill_scores, importance  # noqa: E402
from pocketmem.core.text import content_hash  # noqa: E402
from pocketmem.providers.embeddings.hashing import HashEmbedder  # noqa: E402
from pocketmem.service.recall.retrieval import RecallRequest  # noqa: E402
from pocketmem.service.shared.rows import embedding_text, indexed_text  # noqa: E402
from pocketmem.store.postgres.records import lexemes  # noqa: E402

CHUNK = 5_000
RESULTS = ROOT / "bench" / "postgres-results.json"
NOW = datetime(2026, 11, 26, 2, 0, tzinfo=UTC)
COLUMNS = (
    "id, user_id, content, category, keywords, emotion, info, persistence, judge, info_importance, time_coef, "
    "importance, confidence, source, created_at, updated_at, valid_from, status, content_hash, embed_model, "
    "embedding, terms, keyword_terms, lexemes"
)


class VectorSearchingEmbedder(HashEmbedder):
    """The built-in vectors, declared non-lexical so recall runs the vector search a neural embedder gets."""

    kind = "hash"
    lexical = False


def _copy_text(value: Any) -> str:
    if value is None:
        return "\\N"
    text = str(value)
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def rows(size: int, users: int, seed: int) -> str:
    """COPY text for `size` memories spread over `users` users, created over the past two years."""
    embedder = HashEmbedder()
    rnd = random.Random(seed)
    lines = []
    for req in synthetic_memories(size, seed=seed):
        user = f"user{rnd.randrange(users):03d}"
        scores = fill_scores(req.category, None)
        created = NOW - timedelta(minutes=rnd.randrange(2 * 365 * 24 * 60))
        info, coef, imp = importance(scores, created, NOW)
        vector = embedder.vector(embedding_text(req.content, req.keywords))
        text = indexed_text(req.content, req.keywords)
        lexeme_text = " ".join(
            "'" + lx.replace("'", "''") + "'" for lx in lexemes(user, text.terms, text.keyword_terms)
        )
        values = [
            uuid.UUID(int=rnd.getrandbits(128)).hex, user, req.content, req.category.value,
            json.dumps(req.keywords, ensure_ascii=False), scores.emotion, scores.info, scores.persistence,
            scores.judge, info, coef, imp, 1.0, "bench", created.isoformat(), created.isoformat(),
            created.isoformat(), "active", content_hash(req.content), embedder.tag,
            "[" + ",".join("0" if x == 0.0 else f"{x:.6g}" for x in vector) + "]",
            text.terms, text.keyword_terms, lexeme_text,
        ]
        lines.append("\t".join(_copy_text(v) for v in values) + "\n")
    return "".join(lines)


async def fill(url: str, size: int, users: int) -> dict[str, float]:
    from concurrent.futures import ProcessPoolExecutor

    import psycopg

    settings = Settings(database_url=url, home=ROOT / "bench", maintain_interval=0)
    async with PocketMem(settings, embedder=HashEmbedder()):
        pass  # migrates and sizes the vector column for the embedder
    timings: dict[str, float] = {}
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("drop index if exists memories_embedding_hnsw")
        await conn.execute("alter table memories disable trigger user")
        started = time.perf_counter()
        # One process builds the rows (embedding, terms) while this one copies the previous chunks in.
        loop = asyncio.get_running_loop()
        starts = list(range(0, size, CHUNK))
        with ProcessPoolExecutor(max_workers=1) as pool:
            pending = [loop.run_in_executor(pool, rows, min(CHUNK, size - s), users, s + 1) for s in starts[:2]]
            for i, start in enumerate(starts):
                text = await pending[i]
                if i + 2 < len(starts):
                    nxt = starts[i + 2]
                    pending.append(loop.run_in_executor(pool, rows, min(CHUNK, size - nxt), users, nxt + 1))
                async with conn.cursor() as cur, cur.copy(f"copy memories ({COLUMNS}) from stdin") as copy:
                    await copy.write(text)
                done = start + min(CHUNK, size - start)
                if done % 100_000 == 0:
                    print(f"  {done:,} memories ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        timings["fill_s"] = time.perf_counter() - started
        await conn.execute("alter table memories enable trigger user")
        started = time.perf_counter()
        await conn.execute(
            "insert into memory_term_counts (term, delta) select t, count(*) from memories, "
            "unnest(pm_term_set(terms, keyword_terms)) t group by t"
        )
        await conn.execute("insert into memory_term_counts (term, delta) select '', count(*) from memories")
        await conn.execute(
            "insert into users (user_id, created_at, updated_at) select distinct user_id, now(), now() from memories"
        )
        timings["counts_s"] = time.perf_counter() - started
        started = time.perf_counter()
        await conn.execute("set maintenance_work_mem = '8GB'")
        await conn.execute("set max_parallel_maintenance_workers = 1")
        await conn.execute(
            "create index memories_embedding_hnsw on memories using hnsw (embedding vector_cosine_ops)"
        )
        timings["hnsw_s"] = time.perf_counter() - started
        await conn.execute("vacuum analyze memories")
        cur = await conn.execute(
            "select pg_total_relation_size('memories'), pg_relation_size('memories_embedding_hnsw'), "
            "pg_relation_size('memories_lexemes')"
        )
        total, hnsw, gin = await cur.fetchone()
        timings.update(total_mb=total / 1e6, hnsw_mb=hnsw / 1e6, gin_mb=gin / 1e6)
    return timings


async def measure(url: str, embedder: HashEmbedder, queries: int, users: int) -> dict[str, float]:
    settings = Settings(database_url=url, home=ROOT / "bench", maintain_interval=0)
    rnd = random.Random(5)
    pool = synthetic_queries(queries + 30, seed=13)
    latencies: list[float] = []
    hits = 0
    async with PocketMem(settings, embedder=embedder) as app:
        for i, q in enumerate(pool):
            user = f"user{rnd.randrange(users):03d}"
            started = time.perf_counter()
            result = await app.retrieval.recall(
                user, RecallRequest(query=q["query"], keywords=q["keywords"], record=False)
            )
            elapsed = (time.perf_counter() - started) * 1000
            if i >= 30:  # the first ones warm caches, as a running server is warm
                latencies.append(elapsed)
                hits += bool(result.memories)
    latencies.sort()
    return {
        "p50": statistics.median(latencies),
        "p95": percentile(latencies, 0.95),
        "hits": hits / len(latencies),
    }


def local_server() -> tuple[Any, str]:
    sys.path.insert(0, str(ROOT))
    from tests.pg import PgTestServer

    server = PgTestServer()
    return server, ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--layouts", default="100000:100,1000000:100,100000:1", help="memories:users, comma separated"
    )
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--url", help="a PostgreSQL server to use (postgresql://.../postgres); default: pgserver")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()

    import psycopg

    server = None
    if args.url:
        admin_url = args.url
    else:
        server, _ = local_server()
        admin_url = server.url("postgres")
    results = []
    try:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            version = admin.execute("select current_setting('server_version')").fetchone()[0]
            found = admin.execute("select default_version from pg_available_extensions where name = 'vector'")
            pgvector_version = found.fetchone()[0]
        for layout in args.layouts.split(","):
            size, users = (int(x) for x in layout.split(":"))
            name = f"pm_bench_{size}_{users}"
            with psycopg.connect(admin_url, autocommit=True) as admin:
                admin.execute(f"drop database if exists {name} with (force)")
                admin.execute(f"create database {name}")
            url = server.url(name) if server else admin_url.rsplit("/", 1)[0] + f"/{name}"
            print(f"{size:,} memories across {users} users: filling", file=sys.stderr)
            timings = asyncio.run(fill(url, size, users))
            print(f"  {timings}", file=sys.stderr)
            keyword = asyncio.run(measure(url, HashEmbedder(), args.queries, users))
            vector = asyncio.run(measure(url, VectorSearchingEmbedder(), args.queries, users))
            row = {"size": size, "users": users, **timings, "keyword": keyword, "vector": vector}
            print(f"  {row}", file=sys.stderr)
            results.append(row)
            # Written after every layout: the large ones take many minutes, and a finished row is kept.
            if args.write:
                kept = remember(row)
                write_section(report(kept, version, pgvector_version, args.queries), "postgres")
            with psycopg.connect(admin_url, autocommit=True) as admin:
                admin.execute(f"drop database if exists {name} with (force)")
    finally:
        if server is not None:
            server.stop()


def remember(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Keep each layout's latest row in RESULTS (so layouts can be measured in separate runs); all rows."""
    rows = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.exists() else []
    rows = [r for r in rows if (r["size"], r["users"]) != (row["size"], row["users"])]
    rows.append({**row, "measured_on": datetime.now(UTC).date().isoformat()})
    rows.sort(key=lambda r: (r["size"], -r["users"]))
    RESULTS.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return rows


def report(results: list[dict[str, Any]], version: str, pgvector_version: str, queries: int) -> str:
    lines = [
        f"Generated by `python bench/postgres.py --write` on PostgreSQL {version} with pgvector {pgvector_version}",
        "(pgserver, local socket, fsync off — as in the tests; a managed server adds its network round trips:",
        f"a recall is 4–8 of them). Memories spread evenly over the users; {queries} recalls per row, one at a",
        f"time, a random user each, through `Retrieval.recall` in process; machine: {os.cpu_count()} cores. Each row",
        "is the latest run of its layout (kept in `bench/postgres-results.json`, with its date).",
        "",
        "| memories | users | fill (COPY) | keyword counters | HNSW build | table + indexes | recall p50 / p95, "
        "keyword path | recall p50 / p95, vector path | recalls with hits (keyword / vector) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['size']:,} | {r['users']} | {r['fill_s']:.0f} s | {r['counts_s']:.0f} s | {r['hnsw_s']:.0f} s | "
            f"{r['total_mb']:,.0f} MB (HNSW {r['hnsw_mb']:,.0f} MB) | "
            f"{r['keyword']['p50']:.1f} / {r['keyword']['p95']:.1f} ms | "
            f"{r['vector']['p50']:.1f} / {r['vector']['p95']:.1f} ms | "
            f"{r['keyword']['hits']:.0%} / {r['vector']['hits']:.0%} |"
        )
    lines += [
        "",
        "Keyword path: the built-in lexical `hash` embedder (recall asks the term counters, the GIN index over",
        "user-prefixed terms and the vectors of the shortlist). Vector path: the same vectors declared non-lexical,",
        "as a neural embedder runs — recall also scores the user's most important memories and asks for nearest",
        "neighbours: an exact scan of the user's rows up to 20,000 memories, the HNSW index (cosine) above that",
        "(the one-user row).",
    ]
    return "\n".join(lines)

if __name__ == "__main__":
    main()
