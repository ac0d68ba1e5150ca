"""The command line speaks to a person: hints name pocketmem commands, short ids work as in git, `serve` on a
terminal says what it waits for, `export` ends with one line, client-config names the time zone, and a
proposed profile change shows as one."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import run_cli

HOME_ENV = {"POCKETMEM_TZ": "Asia/Shanghai"}


def ok(out: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert out.returncode == 0, out.stderr
    return out


def add(capsys, home: Path, text: str) -> str:
    return json.loads(ok(run_cli(capsys, home, "add", text, "--json")).stdout)["memory_id"]


def test_hints_name_commands_not_tools(capsys, tmp_path):
    missing = run_cli(capsys, tmp_path, "forget", "nosuchid")
    assert missing.returncode == 2
    assert "`pocketmem list`" in missing.stderr and "list_memories" not in missing.stderr
    memory_id = add(capsys, tmp_path, "用户在学吉他")
    forgotten = ok(run_cli(capsys, tmp_path, "forget", memory_id))
    assert f"`pocketmem restore {memory_id}` brings it back" in forgotten.stderr
    assert "restore(memory_id)" not in forgotten.stderr
    no_pending = run_cli(capsys, tmp_path, "pending", "confirm", "nosuchpending")
    assert "`pocketmem pending`" in no_pending.stderr and "list_memories" not in no_pending.stderr
    not_in_trash = run_cli(capsys, tmp_path, "restore", "abcdefgh")
    assert not_in_trash.returncode == 2 and "`pocketmem trash`" in not_in_trash.stderr, not_in_trash.stderr
    assert "list_trash" not in not_in_trash.stderr


def test_a_unique_prefix_of_8_characters_is_an_id(capsys, tmp_path):
    ids = [add(capsys, tmp_path, f"用户第{i}次提到的一件事：{'甲乙丙丁戊己庚辛'[i]}") for i in range(8)]
    memory_id = ids[0]
    shown = json.loads(ok(run_cli(capsys, tmp_path, "show", memory_id[:8], "--json")).stdout)
    assert shown["id"] == memory_id
    short = run_cli(capsys, tmp_path, "show", memory_id[:7])  # under 8 characters: taken as typed
    assert short.returncode == 2 and "no memory with id" in short.stderr
    ok(run_cli(capsys, tmp_path, "forget", memory_id[:12]))
    ok(run_cli(capsys, tmp_path, "restore", memory_id[:10]))
    assert json.loads(ok(run_cli(capsys, tmp_path, "show", memory_id, "--json")).stdout)["status"] == "active"


def test_an_ambiguous_prefix_is_refused_and_changes_nothing(capsys, tmp_path, monkeypatch):
    from pocketmem.cli import people

    monkeypatch.setattr(people, "SHORT_ID", 1)  # two random ids share their first character often enough
    ids = [add(capsys, tmp_path, f"第{i}条：用户喜欢的颜色是{'红橙黄绿青蓝紫黑白灰'[i % 10]}色{i}") for i in range(40)]
    first = next(i for i in ids if sum(j[0] == i[0] for j in ids) > 1)
    refused = run_cli(capsys, tmp_path, "forget", first[0])
    assert refused.returncode == 2
    assert f"ID: {first[0]!r} starts more than one id; type more of it" in refused.stderr
    assert "the trash of user" in ok(run_cli(capsys, tmp_path, "trash")).stderr  # empty: nothing was forgotten


def test_an_offset_past_the_end_says_so_and_how_many_there_are(capsys, tmp_path):
    for text in ("用户喜欢手冲咖啡", "用户住在杭州"):
        forgotten = add(capsys, tmp_path, text)
    ok(run_cli(capsys, tmp_path, "forget", forgotten))
    listed = ok(run_cli(capsys, tmp_path, "list", "--offset", "100000"))
    assert listed.stdout == ""
    assert "--offset 100000 is past the end: user 'global' has 1 active memory (offsets 0-0)" in listed.stderr
    assert "add one" not in listed.stderr
    trash = ok(run_cli(capsys, tmp_path, "trash", "--offset", "5"))
    assert "--offset 5 is past the end: user 'global' has 1 trashed memory" in trash.stderr
    assert "no active memories" in ok(run_cli(capsys, tmp_path / "empty", "list", "--offset", "3")).stderr


def test_export_ends_with_one_line_for_people(capsys, tmp_path):
    add(capsys, tmp_path, "用户喜欢手冲咖啡")
    out = ok(run_cli(capsys, tmp_path, "export"))
    assert "memory" in {json.loads(line)["type"] for line in out.stdout.splitlines()}
    assert out.stderr.strip().splitlines()[-1] == (
        "exported 1 memory of 1 user (0 tombstones, 0 revisions, 0 pending, 0 profiles, 0 events) to stdout"
    )
    (tmp_path / "md").mkdir()
    (tmp_path / "md" / "User.md").write_text("mine\n", encoding="utf-8")
    for extra in ((), ("--markdown", str(tmp_path / "md"))):
        mistyped = run_cli(capsys, tmp_path, "export", "--user", "Global", *extra)
        assert mistyped.returncode == 2 and mistyped.stdout == "", mistyped.stderr
        assert "--user: no user 'Global' in this store; it holds global" in mistyped.stderr
    assert (tmp_path / "md" / "User.md").read_text(encoding="utf-8") == "mine\n"


def test_a_markdown_export_of_a_store_with_several_users_needs_one_named(capsys, tmp_path):
    add(capsys, tmp_path, "用户喜欢手冲咖啡")
    ok(run_cli(capsys, tmp_path, "add", "Alice hates cilantro", "--core", "--category", "preference",
               "--user", "alice"))
    target = tmp_path / "md"
    refused = run_cli(capsys, tmp_path, "export", "--markdown", str(target))
    assert refused.returncode == 2 and refused.stdout == ""
    assert "--user: --markdown writes one user's files and this store holds alice, global; name one" in refused.stderr
    assert not target.exists() or not any(target.iterdir())
    ok(run_cli(capsys, tmp_path, "export", "--markdown", str(target), "--user", "alice"))
    card = (target / "User.md").read_text(encoding="utf-8")
    assert "id: alice" in card and "cilantro" in card and "咖啡" not in card


def test_client_config_names_the_time_zone(capsys, tmp_path, monkeypatch):
    from pocketmem.cli import install

    monkeypatch.delenv("POCKETMEM_TZ", raising=False)
    monkeypatch.setenv("TZ", "Europe/Berlin")
    assert install.machine_zone() == "Europe/Berlin"
    out = ok(run_cli(capsys, tmp_path, "client-config", POCKETMEM_TZ=""))
    assert json.loads(out.stdout)["mcpServers"]["pocketmem"]["env"]["POCKETMEM_TZ"] == "Europe/Berlin"


def test_client_config_carries_where_the_store_is_and_how_it_is_read_but_no_secret(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = {"POCKETMEM_DB": "rel/notes.db", "POCKETMEM_EMBEDDER": "hash", "POCKETMEM_LLM_MODEL": "qwen2.5:7b",
                "POCKETMEM_LLM_BASE_URL": "http://127.0.0.1:11434/v1"}
    memory_id = json.loads(ok(run_cli(capsys, tmp_path / "home", "add", "用户喜欢手冲咖啡", "--json",
                                      **settings)).stdout)["memory_id"]
    secrets = {"POCKETMEM_DATABASE_URL": "postgresql://me:hunter2@db.example/mem", "POCKETMEM_LLM_API_KEY": "sk-x1"}
    out = ok(run_cli(capsys, tmp_path / "home", "client-config", **settings, **secrets))
    env = json.loads(out.stdout)["mcpServers"]["pocketmem"]["env"]
    assert env == {**settings, "POCKETMEM_DB": str(tmp_path / "rel" / "notes.db"),
                   "POCKETMEM_HOME": str(tmp_path / "home"), "POCKETMEM_TZ": "Asia/Shanghai"}
    for name in secrets:
        assert f"# note: {name} is set here but left out because it holds a secret" in out.stderr
    assert "hunter2" not in out.stdout + out.stderr and "sk-x1" not in out.stdout + out.stderr
    monkeypatch.chdir(tmp_path / "home")  # the host starts the server elsewhere: the entry finds the same store
    listed = json.loads(ok(run_cli(capsys, tmp_path / "home", "list", "--json", **env)).stdout)
    assert [m["id"] for m in listed["items"]] == [memory_id]


def test_client_config_carries_every_setting_set_here_that_is_not_its_default(capsys, tmp_path):
    """The host starts the server with the entry's env alone: a setting of this shell left out would run it
    otherwise (POCKETMEM_SECRETS=refuse would be redact there)."""
    chosen = {"POCKETMEM_SECRETS": "refuse", "POCKETMEM_LOCALE": "en", "POCKETMEM_TOP_K": "5",
              "POCKETMEM_CLOUD_URL": "postgresql://me@db.example/mem"}
    out = ok(run_cli(capsys, tmp_path, "client-config", **chosen, POCKETMEM_LOG_LEVEL="WARNING",
                     POCKETMEM_EMBED_API_KEY="sk-secret-1"))
    env = json.loads(out.stdout)["mcpServers"]["pocketmem"]["env"]
    assert env == {**chosen, "POCKETMEM_EMBEDDER": "hash", "POCKETMEM_HOME": str(tmp_path),
                   "POCKETMEM_TZ": "Asia/Shanghai"}  # the log level is the default's: nothing to carry
    assert "# note: POCKETMEM_EMBED_API_KEY is set here but left out because it holds a secret" in out.stderr
    assert "sk-secret-1" not in out.stdout + out.stderr


@pytest.mark.parametrize("url", ["postgresql://me:pa/ss1@db.example/mem", "postgresql://me:pa#ss1@db.example/mem",
                                 "postgresql://me@db.example/mem?password=ss1"])
def test_client_config_leaves_out_a_url_whose_password_holds_a_slash_or_hash(capsys, tmp_path, url):
    out = ok(run_cli(capsys, tmp_path, "client-config", POCKETMEM_CLOUD_URL=url))
    assert "POCKETMEM_CLOUD_URL" not in json.loads(out.stdout)["mcpServers"]["pocketmem"]["env"]
    assert "# note: POCKETMEM_CLOUD_URL is set here but left out because it holds a secret" in out.stderr
    assert "ss1" not in out.stdout + out.stderr


@pytest.mark.parametrize(("host", "key"), [("claude-desktop", "mcpServers"), ("vscode", "servers")])
def test_client_config_write_merges_the_entry_and_keeps_the_other_servers(capsys, tmp_path, host, key):
    config = tmp_path / "host" / "config.json"
    config.parent.mkdir()
    before = {key: {"other": {"command": "/bin/other", "args": []}, "pocketmem": {"command": "/old"}},
              "preferences": {"theme": "dark"}}
    config.write_text(json.dumps(before), encoding="utf-8")
    config.chmod(0o640)
    out = ok(run_cli(capsys, tmp_path, "client-config", "--host", host, "--write", str(config)))
    assert out.stdout == "" and f"wrote the pocketmem entry into {config}, 1 other server kept" in out.stderr
    after = json.loads(config.read_text(encoding="utf-8"))
    printed = json.loads(ok(run_cli(capsys, tmp_path, "client-config", "--host", host)).stdout)
    assert after == {key: {"other": before[key]["other"], **printed[key]}, "preferences": {"theme": "dark"}}
    assert config.stat().st_mode & 0o777 == 0o640 and [p.name for p in config.parent.iterdir()] == ["config.json"]
    # A new file, in a folder that is not there yet, holds the entry alone.
    fresh = tmp_path / "project" / ".vscode" / "mcp.json"
    ok(run_cli(capsys, tmp_path, "client-config", "--host", host, "--write", str(fresh)))
    assert json.loads(fresh.read_text(encoding="utf-8")) == printed


@pytest.mark.parametrize("text", ['{"servers": {"a": {}}, // mine\n}', "[]", '{"mcpServers": []}', '{"mcpS'])
def test_client_config_write_refuses_a_file_it_cannot_merge_into_and_leaves_it(capsys, tmp_path, text):
    config = tmp_path / "mcp.json"
    config.write_text(text, encoding="utf-8")
    out = run_cli(capsys, tmp_path, "client-config", "--write", str(config))
    assert out.returncode == 2 and out.stdout == "" and f"pocketmem: --write: {config}" in out.stderr
    assert "left as it was" in out.stderr and config.read_text(encoding="utf-8") == text
    claude_code = run_cli(capsys, tmp_path, "client-config", "--host", "claude-code", "--write", str(config))
    assert claude_code.returncode == 2 and "claude mcp add" in claude_code.stderr


def test_a_pending_profile_change_shows_as_one(capsys, tmp_path, make_settings):
    import asyncio

    from pocketmem.app import PocketMem

    async def propose() -> None:
        async with PocketMem(make_settings(tmp_path, home=tmp_path)) as app:
            await app.profile.update("global", None, {"name": "小王"}, confirmed=True)
            await app.profile.update("global", None, {"tech": "Rust"})

    asyncio.run(propose())
    listed = ok(run_cli(capsys, tmp_path, "pending")).stdout
    row = next(line for line in listed.splitlines() if "Rust" in line)
    assert "profile change" in row and "1.00" not in row and " fact " not in row
    as_json = json.loads(ok(run_cli(capsys, tmp_path, "pending", "--json")).stdout)
    assert [item["kind"] for item in as_json["items"]] == ["profile"]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("script") is None,
                    reason="needs util-linux `script` to give the command a terminal (Linux)")
def test_serve_on_a_terminal_says_it_waits_for_a_client(tmp_path):
    env = f"POCKETMEM_HOME={shlex.quote(str(tmp_path))} PYTHONPATH={shlex.quote(os.environ.get('PYTHONPATH', ''))}"
    command = f"{env} {shlex.quote(sys.executable)} -m pocketmem serve"
    # `script` gives the server a real terminal; end of input (Ctrl-D) then ends it.
    out = subprocess.run(["script", "-qec", command, "/dev/null"], input="\x04", capture_output=True, text=True,
                         timeout=120)
    lines = [line for line in out.stdout.splitlines() if "waiting for an MCP client on stdin" in line]
    assert len(lines) == 1, out.stdout + out.stderr


@pytest.mark.backends
@pytest.mark.anyio
async def test_the_store_finds_ids_by_their_first_characters(app):
    from pocketmem.service.writing.add_request import AddRequest

    stored = await app.writing.add("global", AddRequest(content="用户在学吉他"))
    pending = await app.writing.add("global", AddRequest(content="用户可能养了狗", confidence=0.7))
    async with app.store.read() as reader:
        assert await reader.ids_starting("global", stored.memory_id[:8]) == [stored.memory_id]
        assert await reader.ids_starting("global", pending.pending_id[:9], "memory_pending") == [pending.pending_id]
        assert await reader.ids_starting("someone-else", stored.memory_id[:8]) == []


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("script") is None,
                    reason="needs util-linux `script` to give the command a terminal (Linux)")
def test_tables_fit_an_80_column_terminal_with_the_content_shown(capsys, tmp_path):
    memory_id = add(capsys, tmp_path, "用户周末喜欢去西湖边骑自行车")
    ok(run_cli(capsys, tmp_path, "forget", memory_id))
    add(capsys, tmp_path, "用户的女儿叫朵朵")
    env = (f"POCKETMEM_HOME={shlex.quote(str(tmp_path))} POCKETMEM_EMBEDDER=hash POCKETMEM_TZ=Asia/Shanghai "
           f"PYTHONPATH={shlex.quote(os.environ.get('PYTHONPATH', ''))}")
    for command, content in (("list", "朵朵"), ("search 朵朵", "朵朵"), ("trash", "西湖")):
        shell = f"stty cols 80 rows 40; {env} {shlex.quote(sys.executable)} -m pocketmem {command}"
        out = subprocess.run(["script", "-qec", shell, "/dev/null"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        table = [line for line in out.stdout.splitlines() if "│" in line]
        assert any(content in line for line in table), out.stdout  # the content column is not squeezed out
        assert all(len(line.rstrip()) <= 80 for line in table), out.stdout
        shown = next(line for line in table if line.strip("│ ") and "│" in line).split("│")[1].strip()
        assert len(shown) == 8, out.stdout  # a terminal shows ids as the short prefix `show`/`restore` take
    ok(run_cli(capsys, tmp_path, "restore", memory_id[:8]))
