"""What the fault checks cost on a filled store: doctor's scan of every stored time (and --repair of 1% poisoned
rows), and the structural check (`pragma quick_check`) that maintenance runs once per process.

    python bench/faults.py                  # 10,000 memories
    python bench/faults.py --sizes 100000
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

from common import machine  # noqa: E402
from speed import fill  # noqa: E402

from pocketmem.app import PocketMem  # noqa: E402
from pocketmem.base.config import Settings  # noqa: E402


async def measure(size: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        await fill(home, size, cap=size * 2)
        with sqlite3.connect(home / "memory.db") as db:  # 1% of the rows as an older version wrote them
            db.execute("update memories set created_at = '999-12-31T15:54:17.000Z' where rowid % 100 = 0")
        out: dict[str, float] = {"memories": size}
        async with PocketMem(Settings(home=home, max_active=size * 2)) as app:
            for name, call in (
                ("scan_s", lambda: app.store.check_instants()),
                ("repair_s", lambda: app.store.check_instants(repair=True)),
                ("rescan_s", lambda: app.store.check_instants()),
                ("quick_check_s", lambda: app.store.quick_check()),
            ):
                started = time.perf_counter()
                found = await call()
                out[name] = round(time.perf_counter() - started, 3)
                if name == "scan_s":
                    out["found"] = len(found)
        return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    args = parser.parse_args()
    print(machine())
    for size in args.sizes:
        print(asyncio.run(measure(size)))


if __name__ == "__main__":
    main()
