"""The pocketmem command line, run as a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .servers import checkout_env

pytestmark = pytest.mark.slow


def run(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**checkout_env(), "POCKETMEM_HOME": str(home), **env}
    return subprocess.run(
        [sys.executable, "-m", "pocketmem", *args], env=full, capture_output=True, text=True, timeout=120
    )


def test_help_lists_every_command(tmp_path):
    out = run(tmp_path, "--help")
    assert out.returncode == 0
    for command in ("serve", "token", "stats", "doctor", "reindex"):
        assert command in out.stdout


def test_stats_and_doctor_on_a_fresh_store(tmp_path):
    stats = run(tmp_path, "stats")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["active"] == 0
    doctor = run(tmp_path, "doctor")
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 0, report
    assert report["ok"] and report["store"]["integrity"] == "ok" and report["store"]["vector_extension"]
    assert report["embedder"]["ok"] and report["store"]["schema_current"]
    # Commands that read create nothing: the vector index and the store's embedder come with the first memory.
    assert not report["store"]["vectors_available"] and report["embedder"]["store_embedder"] is None


def test_doctor_and_serve_name_reindex_after_an_embedder_change(tmp_path):
    assert run(tmp_path, "add", "用户不吃香菜").returncode == 0  # the store's vectors are the hash embedder's
    env = {"POCKETMEM_EMBEDDER": "openai", "POCKETMEM_EMBED_MODEL": "text-embedding-3-small",
           "POCKETMEM_EMBED_BASE_URL": "http://127.0.0.1:9/v1"}
    stats = run(tmp_path, "stats", **env)  # a command that only reads works, changing nothing
    assert stats.returncode == 0, stats.stderr  # (serve refuses it: tests/test_faults_storage.py)
    doctor = run(tmp_path, "doctor", **env)
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 1
    assert any("reindex" in p for p in report["problems"])
    assert any("cannot reach" in p for p in report["problems"])


@pytest.mark.parametrize(
    ("name", "value", "expect"),
    [
        ("POCKETMEM_TOP_K", "0", "greater than or equal to 1"),
        ("POCKETMEM_LOCALE", "fr", "'auto', 'zh' or 'en'"),
        ("POCKETMEM_TZ", "Mars/Base", "unknown IANA time zone"),
        ("POCKETMEM_EMBEDDER", "openai", "needs POCKETMEM_EMBED_MODEL"),
        ("POCKETMEM_STORE_THRESHOLD", "high", "valid number"),
    ],
)
def test_bad_settings_are_named(tmp_path, name, value, expect):
    out = run(tmp_path, "stats", **{name: value})
    assert out.returncode == 2
    assert expect in out.stderr
    assert out.stdout == ""


def test_doctor_names_a_broken_config_file_instead_of_failing(tmp_path):
    (tmp_path / "config.toml").write_text("max_active = [\n")
    out = run(tmp_path, "doctor")
    assert out.returncode == 2 and "unexpected" not in out.stderr, out.stderr
    assert f"{tmp_path / 'config.toml'} is not a valid TOML file" in out.stderr
