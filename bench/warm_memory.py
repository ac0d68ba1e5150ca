"""Resident memory of the server's warm-up, in one process: what `pocketmem serve` loads after its handshake.

    python bench/warm_memory.py                        # this checkout's code
    python bench/warm_memory.py --server ../main/server  # another checkout's, for a before/after

A fresh process imports the app (pocketmem.app, as `serve` does), runs the text tools' warm-up
(service/recall/retrieval.py `warm_up`: jieba's segmenter and tagger, the background frequencies) and loads
the default encoder (`shared_model`), and prints VmRSS after each step and VmHWM (the peak) at the end. It
runs twice on an empty cache folder (XDG_CACHE_HOME): the first start, which builds what the cache folder
keeps (the encoder's table, the word tables of base/wordtable.py), and a later start, which reads it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from common import machine  # noqa: E402

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
def status():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024
out = {}
import pocketmem.app
out["imported"] = status()[0]
from pocketmem.service.recall.retrieval import warm_up
started = time.perf_counter()
warm_up()
out["text_s"] = time.perf_counter() - started
out["text"] = status()[0]
from pocketmem.providers.embeddings.universal import shared_model
shared_model()
out["encoder"], out["peak"] = status()
print(json.dumps(out))
"""


def run(server: Path, cache: Path) -> dict[str, float]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(server)], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", type=Path, default=ROOT / "server", help="the server folder to measure")
    args = parser.parse_args()
    print(f"{args.server.resolve()} on {machine()}")
    print("| start | after import | after the text tools (time) | after the encoder | peak |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as cache:
        for start in ("first (empty cache folder)", "later"):
            m = run(args.server, Path(cache))
            print(f"| {start} | {m['imported']:.0f} MB | {m['text']:.0f} MB ({m['text_s']:.2f} s) | "
                  f"{m['encoder']:.0f} MB | {m['peak']:.0f} MB |")


if __name__ == "__main__":
    main()
