"""Import, record by record: what the page exports the page imports again; a malformed record is refused with its
reason in the report, never an unexpected error."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pocketmem.service.writing.add_request import AddRequest

from .asgi import Browser, make_browser
from .servers import cli, server_env

pytestmark = [pytest.mark.anyio]
USER = "global"


async def test_the_page_imports_what_the_page_exported_profile_rows_included(app):
    await app.writing.add(USER, AddRequest(content="用户不喜欢香菜"))
    async with make_browser(app) as client:
        browser = Browser(client)
        await browser.get("/profile")
        saved = await browser.post("/profile", {"identity.name": "Alice", "persona.tone": "warm", "confirm": "1"})
        assert saved.status_code == 303
        exported = await browser.get("/export.jsonl")
        kinds = {json.loads(line).get("type") for line in exported.text.splitlines()}
        assert {"memory", "profile", "profile_revision"} <= kinds, kinds
        done = await browser.post("/import", files={"file": ("x.jsonl", exported.content, "application/x-ndjson")})
        assert done.status_code == 200, done.text[-800:]
        assert 'id="import-report"' in done.text
    assert (await app.profile.view(USER)).identity["name"] == "Alice"


def export_of(backend, home) -> list[dict]:
    """A real export of one memory (header first), made by `pocketmem export`."""
    assert cli(backend, home, "add", "用户住在杭州").returncode == 0
    done = cli(backend, home, "export")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def memory_row(rows: list[dict], **changes) -> str:
    row = dict(next(r for r in rows if r["type"] == "memory"))
    row.update(changes)
    return json.dumps(row, ensure_ascii=False)


BAD_RECORDS = {
    "nan importance": ({"importance": float("nan")}, "importance"),
    "infinite confidence": ({"confidence": float("inf")}, "confidence"),
    "use_count 2**70": ({"use_count": 2**70}, "use_count"),
    "negative use_count": ({"use_count": -1}, "use_count"),
    "score above 1": ({"scores": {"emotion": 7.5, "info": 0.5, "persistence": 0.5, "judge": 0.5}}, "scores.emotion"),
    "10,000-character id": ({"id": "a" * 10_000}, "id"),
    "user id memory.db": ({"user_id": "memory.db"}, "user_id"),
    "user id config.toml": ({"user_id": "config.toml"}, "user_id"),
}


@pytest.mark.slow
def test_malformed_records_are_refused_one_by_one_with_their_reason(tmp_path, backend):
    rows = export_of(backend, tmp_path / "made")
    header = json.dumps(rows[0])
    lines = [header]
    for n, (changes, _) in enumerate(BAD_RECORDS.values()):
        lines.append(memory_row(rows, **{"id": f"{n:032x}", **changes}))
    lines.append('{"type": "event", "user_id": "global", "kind": "added", "payload": ' + "[" * 100_000 + "]" * 100_000
                 + ', "created_at": "2026-11-26T02:00:00Z"}')
    lines.append(memory_row(rows, id="f" * 32, content="用户的猫叫小白"))  # the one good record
    data = "\n".join(lines).encode()
    broken = memory_row(rows, id="e" * 32, content="坏的字节").encode().replace("坏".encode(), b"\xff\xfe")
    target = tmp_path / "in.jsonl"
    target.write_bytes(data + b"\n" + broken + b"\n")
    home = tmp_path / "home"
    done = cli(backend, home, "import", str(target))
    assert done.returncode == 1, done.stderr  # the good record is stored; the refused ones are not
    assert "unexpected" not in done.stderr
    report = json.loads(done.stdout)
    refused = {r["line"]: r for r in report["refused"]}
    for line, (name, (_, field)) in enumerate(BAD_RECORDS.items(), start=2):
        assert refused[line]["field"] == field, (name, refused.get(line))
    assert "nested" in refused[len(BAD_RECORDS) + 2]["why"]
    assert "UTF-8" in refused[len(BAD_RECORDS) + 4]["why"]
    assert report["imported"]["memory"] == 1 and len(report["refused"]) == len(BAD_RECORDS) + 2
    assert not (home / "memory.db" / "..").is_dir() and not (home / "config.toml").exists()


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le"])
def test_a_utf16_file_is_refused_whole_with_a_clear_reason(tmp_path, encoding, backend):
    rows = export_of(backend, tmp_path / "made")
    target = tmp_path / "in.jsonl"
    target.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding=encoding)
    done = cli(backend, tmp_path / "home", "import", str(target))
    assert done.returncode == 2 and "UTF-16" in done.stderr and "unexpected" not in done.stderr, done.stderr


def test_a_refused_id_is_shown_short_and_without_terminal_escapes(capsys, tmp_path):
    from .servers import run_cli

    assert run_cli(capsys, tmp_path / "made", "add", "用户住在杭州").returncode == 0
    rows = [json.loads(line) for line in run_cli(capsys, tmp_path / "made", "export").stdout.splitlines()]
    hostile = "\x1b]8;;https://evil.example\x1b\\" + "a" * 10_000
    target = tmp_path / "in.jsonl"
    target.write_text(json.dumps(rows[0]) + "\n" + memory_row(rows, id=hostile) + "\n", encoding="utf-8")
    done = run_cli(capsys, tmp_path / "home", "import", str(target))
    assert done.returncode == 1, done.stderr  # a refused row makes the answer "no"
    assert done.stderr.rstrip().endswith("; refused 1 row (named above), not imported"), done.stderr
    refused = json.loads(done.stdout)["refused"]
    assert [r["field"] for r in refused] == ["id"] and refused[0]["id"].endswith("…")
    assert len(refused[0]["id"]) <= 65 and "\x1b" not in refused[0]["id"]
    assert "\x1b" not in done.stderr and "a" * 100 not in done.stderr, done.stderr[:300]


@pytest.mark.slow
def test_an_endless_line_is_refused_after_a_bounded_read(tmp_path):
    """A stream with no line end (`tr '\\0' a < /dev/zero | pocketmem import -`) was read whole, into gigabytes of
    memory: it is refused once a line passes the longest an export writes, with the limit named."""
    from .helpers import Backend

    with open("/dev/zero", "rb") as zeros, subprocess.Popen(["tr", "\\0", "a"], stdin=zeros,
                                                             stdout=subprocess.PIPE) as endless:
        try:
            done = subprocess.run(
                ["prlimit", "--as=1500000000", sys.executable, "-m", "pocketmem", "import", "-"],
                env=server_env(Backend(), tmp_path / "home"), stdin=endless.stdout, capture_output=True, text=True,
                timeout=120,
            )
        finally:
            endless.kill()
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == ("pocketmem: FILE: line 1 is longer than 6,400,000 bytes, the most an export writes: "
                                   "this is not a pocketmem export (nothing was imported)")
    done = cli(Backend(), tmp_path / "home", "import", "/dev/zero")
    assert done.returncode == 2 and "is not text (it is mostly NUL bytes)" in done.stderr, done.stderr


@pytest.mark.slow
def test_a_stores_memory_db_is_named_as_a_database_with_what_to_do(tmp_path):
    from .helpers import Backend

    export_of(Backend(), tmp_path / "made")
    done = cli(Backend(), tmp_path / "home", "import", str(tmp_path / "made" / "memory.db"))
    assert done.returncode == 2 and "UTF-16" not in done.stderr, done.stderr
    assert "is a SQLite database (a pocketmem store's memory.db?), not an export" in done.stderr
    assert "set POCKETMEM_HOME to its folder" in done.stderr and "pocketmem export" in done.stderr
