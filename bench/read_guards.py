"""What reading around damaged rows costs a recall, against the same store read without it, in one process.

Three guards keep one damaged row from failing every read of a store (docs/faults.md, *Rows the reads cannot
decode*, and the vectors there):

- every text column is decoded by pocketmem's own function (store/sqlite/driver.py, `stored_text`), so bytes that
  are not UTF-8 come back as an UndecodedText instead of an error for the whole statement;
- each row mapper first looks for such a value (store/sql/records.py, `undecoded`);
- the vector side reads only vectors sqlite-vec can read (store/sqlite/records.py, `readable_vector`).

"before" turns the three back to what they replaced on the same open store: sqlite3's own decoding
(`text_factory = str`), no look, and `embedding is not null`. Each recall (the queries of bench/speed.py, in process
as bench/breakdown.py runs them) and each read of 300 whole memory rows by id (`get_memories`) is done in both modes
back to back, the first alternating, so a busy machine weighs on both alike; the medians of each mode and of the
pairs' differences are reported. Opening a connection is timed the same way, before and with the checks of whose
database the file is (store/sqlite/driver.py: its tables, and what a -wal beside it makes of it).

    python bench/read_guards.py                          # 1,000 and 10,000 memories
    python bench/read_guards.py --sizes 10000 --write    # ... and update docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

from common import machine, write_section  # noqa: E402
from speed import fill, synthetic_queries  # noqa: E402

from pocketmem.app import PocketMem  # noqa: E402
from pocketmem.base.config import Settings  # noqa: E402
from pocketmem.service.recall.retrieval import RecallRequest  # noqa: E402
from pocketmem.store.sql import records  # noqa: E402
from pocketmem.store.sqlite import driver  # noqa: E402
from pocketmem.store.sqlite import tx as sqlite_tx  # noqa: E402
from pocketmem.store.sqlite.driver import stored_text  # noqa: E402


@contextmanager
def guards_off(app: PocketMem) -> Iterator[None]:
    """The store read as it was before the guards: sqlite3's decoding, no look for undecoded text, any vector."""
    store: Any = app.store
    connections = [c._conn for c in (store._reader, store._writer, store._bookkeeper)]  # noqa: SLF001
    undecoded, readable = records.undecoded, sqlite_tx.readable_vector
    for conn in connections:
        conn.text_factory = str
    records.undecoded = lambda row, columns: {}  # type: ignore[assignment]
    sqlite_tx.readable_vector = lambda column: f"({column} is not null)"
    try:
        yield
    finally:
        for conn in connections:
            conn.text_factory = stored_text
        records.undecoded, sqlite_tx.readable_vector = undecoded, readable


async def timed(work: Callable[[], Awaitable[object]], app: PocketMem, guarded: bool) -> float:
    with nullcontext() if guarded else guards_off(app):
        started = time.perf_counter()
        await work()
        return (time.perf_counter() - started) * 1000


async def paired(work: Callable[[], Awaitable[object]], app: PocketMem, turn: int) -> tuple[float, float]:
    """(ms before, ms with the guards) of the same work done once each, back to back, the first alternating."""
    if turn % 2:
        after = await timed(work, app, True)
        return await timed(work, app, False), after
    before = await timed(work, app, False)
    return before, await timed(work, app, True)


async def measure(home: Path, cap: int, rounds: int, per_round: int) -> dict[str, list[tuple[float, float]]]:
    settings = Settings(home=home, max_active=cap, maintain_interval=0)
    found: dict[str, list[tuple[float, float]]] = {"recall": [], "rows": []}
    async with PocketMem(settings) as app:
        app.retrieval.uses.deferred = True  # as the server runs it
        async with app.store.read() as reader:
            ids = [r[0] for r in await reader.fetch_all("select id from memories")]
        pool = synthetic_queries(per_round + 20)
        for q in pool[:20]:  # warm caches the way a running server is warm
            await app.retrieval.recall("global", RecallRequest(query=q["query"], keywords=q["keywords"]))
        rnd = random.Random(5)

        async def rows(picked: list[str]) -> None:
            async with app.store.read() as reader:
                await reader.get_memories("global", picked)

        turn = 0
        for _ in range(rounds):
            for q in pool[20:]:
                request = RecallRequest(query=q["query"], keywords=q["keywords"])
                found["recall"].append(await paired(partial(app.retrieval.recall, "global", request), app, turn))
                picked = rnd.sample(ids, min(300, len(ids)))
                found["rows"].append(await paired(partial(rows, picked), app, turn))
                turn += 1
    return found


def openings(path: Path, count: int) -> dict[str, list[tuple[float, float]]]:
    """(ms before, ms with the checks) of opening a connection to the store and reading from it (driver.connect), as
    every connection is opened: its look at the file's tables, and with a -wal holding writes (another process
    writing), the read-only looks at what that -wal makes of the file (`foreign_journal`), taken once per -wal a
    process sees ("first look"; later connections only read its header)."""
    found: dict[str, list[tuple[float, float]]] = {"no -wal": [], "a -wal, first look": [], "a -wal, seen before": []}
    checks = driver.foreign_journal, driver.database_kind

    def opened(checked: bool, first: bool) -> float:
        if not checked:
            driver.foreign_journal, driver.database_kind = (lambda path: None), (lambda conn: ("store", []))
        elif first:
            driver._OWN_WALS.clear()  # noqa: SLF001
        try:
            started = time.perf_counter()
            conn = driver.connect(str(path), load_vectors=True)
            conn.execute("select count(*) from memories").fetchone()
            spent = (time.perf_counter() - started) * 1000
            conn.close()
            return spent
        finally:
            driver.foreign_journal, driver.database_kind = checks

    for case, pairs in found.items():
        holder = None
        if case != "no -wal":  # a write left in the -wal, as a running server leaves its last ones
            holder = driver.connect(str(path), load_vectors=False)
            holder.execute("pragma wal_autocheckpoint = 0")
            holder.execute("insert or replace into store_meta (key, value) values ('bench', 'x')")
        for turn in range(count):
            first = opened(turn % 2 == 1, "first" in case)
            second = opened(turn % 2 == 0, "first" in case)
            pairs.append((second, first) if turn % 2 else (first, second))
        if holder is not None:
            holder.close()
    return found


def summary(pairs: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Median before, median with the guards, median of the differences of the pairs (ms)."""
    return (statistics.median(b for b, _ in pairs), statistics.median(a for _, a in pairs),
            statistics.median(a - b for b, a in pairs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--per-round", type=int, default=50)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    lines = [
        f"Generated by `python bench/read_guards.py --write` on {machine()}.",
        f"In process, the stores of speed.py; {args.rounds} rounds of {args.per_round} recalls, each run before and "
        "with the guards back to back (the first alternating), and as many reads of 300 memory rows by id; medians, "
        "and the median of the pairs' differences.",
        "",
        "| memories | recall before | with the guards | difference | 300 rows before | with the guards | difference |",
        "|---|---|---|---|---|---|---|",
    ]
    openings_lines: list[str] = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(dir=ROOT / "bench") as tmp:
            cap = max(800, size + 100)
            asyncio.run(fill(Path(tmp), size, cap))
            found = asyncio.run(measure(Path(tmp), cap, args.rounds, args.per_round))
            opened = openings(Path(tmp) / "memory.db", 200)
        recall, rows = summary(found["recall"]), summary(found["rows"])
        print(f"{size:>7} memories: recall {recall[0]:.2f} -> {recall[1]:.2f} ms ({recall[2]:+.2f}), "
              f"300 rows {rows[0]:.2f} -> {rows[1]:.2f} ms ({rows[2]:+.2f})", file=sys.stderr)
        lines.append(f"| {size:,} | {recall[0]:.2f} ms | {recall[1]:.2f} ms | {recall[2]:+.2f} ms | {rows[0]:.2f} ms "
                     f"| {rows[1]:.2f} ms | {rows[2]:+.2f} ms |")
        for case, pairs in opened.items():
            done = summary(pairs)
            print(f"{size:>7} memories: a connection, {case}: {done[0]:.2f} -> {done[1]:.2f} ms ({done[2]:+.2f})",
                  file=sys.stderr)
            openings_lines.append(f"| {size:,} | {case} | {done[0]:.2f} ms | {done[1]:.2f} ms | {done[2]:+.2f} ms |")
    lines += ["", "Opening a connection and reading from it (`driver.connect`), 200 pairs, before and with the checks "
              "of whose database it is:", "", "| memories | beside memory.db | before | with the checks | difference |",
              "|---|---|---|---|---|", *openings_lines]
    if args.write:
        write_section("\n".join(lines), "read-guards")


if __name__ == "__main__":
    main()
