"""The vector side at scale: exact float search against quantised indexes in sqlite-vec, speed and answers.

    python bench/vector_index.py                        # 100,000 memories, 200 questions
    python bench/vector_index.py --size 20000 --write   # ... and update docs/benchmarks.md

The memories and questions of bench/scale.py, embedded with the default encoder (cached under bench/.cache/),
one user. Each option is a vec0 table in one SQLite file, partitioned by user as the store's is:

    float         float[dims], cosine: exact
    int8 x F      int8[dims] (vec_quantize_int8, unit scale), the best F x k by L2, rescored in full precision
    binary x F    bit[dims] (vec_quantize_binary), the best F x k by Hamming distance, rescored in full precision
                  (the store runs binary x store/sqlite/tx.py VECTOR_RESCORE)

k is what recall asks for: service/recall/candidates.py VECTOR_NEIGHBOURS nearest memories. Per option: the
search's p50 and p95 (in process, the statement alone), how many of the exact 10 and exact k nearest it
returns, and the target's top-10 rate of the vector side alone (the target memory among the 10 nearest;
recall's keyword side is not in this figure).
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

from common import machine, percentile, write_section  # noqa: E402
from scale import memories, questions  # noqa: E402

from pocketmem.providers.embeddings.universal import shared_model  # noqa: E402
from pocketmem.service.recall.candidates import VECTOR_NEIGHBOURS  # noqa: E402
from pocketmem.store.sqlite.driver import sqlite_module, vec_extension  # noqa: E402

CACHE = ROOT / "bench" / ".cache"
K = VECTOR_NEIGHBOURS
TOP = 10
# (label, search, shortlist factor): the exact search, then the quantised ones at several shortlist sizes
OPTIONS = [("float", "float", 1), ("int8 x 2", "int8", 2), ("binary x 8", "binary", 8), ("binary x 4", "binary", 4),
           ("binary x 3", "binary", 3), ("binary x 2", "binary", 2), ("binary x 1", "binary", 1)]


def pack(vector: list[float]) -> bytes:
    return struct.pack(f"{len(vector)}f", *vector)


def encoded(texts: list[str], name: str) -> list[list[float]]:
    path = CACHE / f"vectors-{name}.bin"
    model = shared_model()
    if path.exists():
        raw = path.read_bytes()
        dims = len(model.encode(["x"])[0])
        return [list(struct.unpack_from(f"{dims}f", raw, i * 4 * dims)) for i in range(len(raw) // (4 * dims))]
    out: list[list[float]] = []
    for start in range(0, len(texts), 256):
        out += [list(map(float, v)) for v in model.encode(texts[start : start + 256])]
        print(f"encoded {len(out)} of {len(texts)}", file=sys.stderr)
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(pack(v) for v in out))
    return out


def build(vectors: list[list[float]]) -> object:
    module, _ = sqlite_module()
    db = module.connect(":memory:")
    db.enable_load_extension(True)
    db.load_extension(vec_extension())
    dims = len(vectors[0])
    db.execute(f"create virtual table exact using vec0 (user_id text partition key, embedding float[{dims}] "
               "distance_metric=cosine)")
    db.execute(f"create virtual table q8 using vec0 (user_id text partition key, embedding int8[{dims}])")
    db.execute(f"create virtual table bits using vec0 (user_id text partition key, embedding bit[{dims}])")
    db.execute("create table full (rowid integer primary key, embedding blob)")
    rows = [(i + 1, "u", pack(v)) for i, v in enumerate(vectors)]
    db.executemany("insert into exact (rowid, user_id, embedding) values (?, ?, ?)", rows)
    db.executemany("insert into q8 (rowid, user_id, embedding) values (?, ?, vec_quantize_int8(?, 'unit'))", rows)
    db.executemany("insert into bits (rowid, user_id, embedding) values (?, ?, vec_quantize_binary(?))", rows)
    db.executemany("insert into full (rowid, embedding) values (?, ?)", [(r[0], r[2]) for r in rows])
    return db


SEARCHES = {
    "float": "select rowid from exact where embedding match ? and k = ? and user_id = 'u' order by distance",
    "int8": ("select c.rowid from (select rowid from q8 where embedding match vec_quantize_int8(?, 'unit') "
             f"and k = ? and user_id = 'u') c join full f on f.rowid = c.rowid "
             f"order by vec_distance_cosine(f.embedding, ?1) limit {K}"),
    "binary": ("select c.rowid from (select rowid from bits where embedding match vec_quantize_binary(?) "
               f"and k = ? and user_id = 'u') c join full f on f.rowid = c.rowid "
               f"order by vec_distance_cosine(f.embedding, ?1) limit {K}"),
}


def measure(db: object, asked: list[tuple[list[float], int]]) -> dict[str, dict[str, float]]:
    exact: dict[int, list[int]] = {}
    out = {}
    for label, name, factor in OPTIONS:
        times, top, kept, hits = [], 0, 0, 0
        for n, (vector, target) in enumerate(asked):
            started = time.perf_counter()
            found = [r[0] for r in db.execute(SEARCHES[name], (pack(vector), K * factor)).fetchall()][:K]  # type: ignore[attr-defined]
            times.append((time.perf_counter() - started) * 1000)
            if name == "float":
                exact[n] = found
            top += len(set(exact[n][:TOP]) & set(found[:TOP]))
            kept += len(set(exact[n]) & set(found))
            hits += (target + 1) in found[:TOP]
        times.sort()
        out[label] = {"p50": statistics.median(times), "p95": percentile(times, 0.95),
                      "top": top / (TOP * len(asked)), "kept": kept / (K * len(asked)), "top10": hits / len(asked)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100000)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    items = memories(args.size)
    asked = questions(items, args.questions)
    vectors = encoded([c for c, _, _ in items], f"scale-{args.size}")
    query_vectors = encoded([q for q, _ in asked], f"questions-{args.size}-{args.questions}")
    result = measure(build(vectors), list(zip(query_vectors, (t for _, t in asked), strict=True)))
    lines = [
        f"Generated by `python bench/vector_index.py --size {args.size} --write` on {machine()} (2-core sandbox,",
        f"shared with other work). {args.size:,} memories of bench/scale.py, {len(asked)} questions, the default",
        "encoder;",
        f"the vector search alone, in process, asking for the {K} nearest as recall does; x F: the best F x {K} by the",
        "quantised index, rescored exactly.",
        "",
        f"| index | search p50 | search p95 | exact top 10 kept | exact top {K} kept | target in the vector top 10 |",
        "|---|---|---|---|---|---|",
        *(f"| {name} | {r['p50']:.1f} ms | {r['p95']:.1f} ms | {r['top']:.1%} | {r['kept']:.1%} | {r['top10']:.2f} |"
          for name, r in result.items()),
    ]
    print("\n".join(lines))
    if args.write:
        write_section("\n".join(lines), "vector-index")


if __name__ == "__main__":
    main()
