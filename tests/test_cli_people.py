"""The command line as people use it, run as real processes: the people commands, help, safety prompts,
doctor on a fresh install, warnings and logs."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from pocketmem.cli import build_parser

pytestmark = pytest.mark.slow

# util-linux `script` gives a command a real terminal (for prompts and progress bars); `sh` runs the stdio server.
needs_terminal = pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("script") is None,
    reason="needs util-linux `script` to give the command a terminal (Linux)",
)
needs_sh = pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell to capture the server's stderr")

SECRET_TEXT = "my locker code is under the blue vase in Hangzhou"


def run(home: Path, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    full = {"PATH": os.environ.get("PATH", ""), "POCKETMEM_HOME": str(home), "POCKETMEM_TZ": "UTC",
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""), **env}
    return subprocess.run([sys.executable, "-m", "pocketmem", *args], env=full, capture_output=True, text=True,
                          timeout=120, input=stdin if stdin is not None else "")


def ok(out: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert out.returncode == 0, out.stderr
    return out


def test_people_commands_share_the_service_layer(tmp_path):
    added = json.loads(ok(run(tmp_path, "add", "我不吃香菜", "--category", "preference", "--core", "--json")).stdout)
    assert added["status"] == "stored" and added["core"]
    other = ok(run(tmp_path, "add", "Project Kestrel ships on Friday", "--category", "event", "-k", "kestrel"))
    other_id = other.stdout.split()[1]
    assert other.stdout.startswith("stored ") and "Stored as an event memory" in other.stderr

    table = ok(run(tmp_path, "list")).stdout
    assert "我不吃香菜" in table and "Kestrel" in table and added["memory_id"] in table and "★" in table
    listed = json.loads(ok(run(tmp_path, "list", "--json", "--category", "preference")).stdout)
    assert [m["id"] for m in listed["items"]] == [added["memory_id"]]

    found = json.loads(ok(run(tmp_path, "search", "晚饭放香菜吗", "--json")).stdout)
    assert found["memories"][0]["id"] == added["memory_id"]
    shown = json.loads(ok(run(tmp_path, "show", added["memory_id"], "--json")).stdout)
    assert shown["use_count"] == 0  # search does not count as use
    assert "E 0.5" in ok(run(tmp_path, "show", added["memory_id"])).stdout

    forgotten = ok(run(tmp_path, "forget", other_id))
    assert forgotten.stdout.strip() == f"trashed {other_id}" and f"pocketmem restore {other_id}" in forgotten.stderr
    assert other_id not in ok(run(tmp_path, "list")).stdout
    trash = json.loads(ok(run(tmp_path, "trash", "--json")).stdout)
    assert [t["id"] for t in trash["items"]] == [other_id] and trash["items"][0]["reason"] == "user_delete"
    ok(run(tmp_path, "restore", other_id))
    assert other_id in ok(run(tmp_path, "list")).stdout
    assert "is empty" in ok(run(tmp_path, "trash")).stderr

    missing = run(tmp_path, "show", "nope")
    assert missing.returncode == 2 and "no memory with id 'nope'" in missing.stderr


def test_pending_confirm_and_reject(tmp_path):
    code = (
        "import asyncio, sys\n"
        "from pocketmem.app import PocketMem\nfrom pocketmem.base.config import load_settings\n"
        "from pocketmem.service.writing.add_request import AddRequest\n"
        "async def main():\n"
        "    async with PocketMem(load_settings()) as app:\n"
        "        for text in ('用户可能喜欢爵士乐', '用户好像养了一只猫'):\n"
        "            r = await app.writing.add('alice', AddRequest(content=text, confidence=0.7))\n"
        "            print(r.pending_id)\n"
        "asyncio.run(main())\n"
    )
    env = {"PATH": os.environ.get("PATH", ""), "POCKETMEM_HOME": str(tmp_path),
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    made = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    jazz, cat = made.stdout.split()
    assert "爵士乐" in ok(run(tmp_path, "pending", "--user", "alice")).stdout
    hint = ok(run(tmp_path, "pending")).stderr
    assert "no pending memories for user 'global'" in hint and "alice" in hint and "--user" in hint
    confirmed = json.loads(ok(run(tmp_path, "pending", "--user", "alice", "confirm", jazz, "--json")).stdout)
    assert confirmed["status"] == "confirmed" and confirmed["memory_id"]
    ok(run(tmp_path, "pending", "reject", cat, "--user", "alice"))
    assert json.loads(ok(run(tmp_path, "pending", "--user", "alice", "--json")).stdout)["items"] == []
    active = json.loads(ok(run(tmp_path, "list", "--user", "alice", "--json")).stdout)["items"]
    assert [m["content"] for m in active] == ["用户可能喜欢爵士乐"]
    again = run(tmp_path, "pending", "--user", "alice", "reject", cat)
    assert again.returncode == 2 and "already rejected" in again.stderr


def _parsers():
    parser = build_parser()

    def walk(p, name):
        yield name, p
        for action in p._actions:  # noqa: SLF001 - argparse lists options nowhere else
            if action.__class__.__name__ == "_SubParsersAction":
                for sub_name, sub in action.choices.items():
                    yield from walk(sub, f"{name} {sub_name}".strip())

    return list(walk(parser, ""))[1:]


def test_every_subcommand_has_a_description_option_help_and_an_example():
    parsers = _parsers()
    names = {name for name, _ in parsers}
    assert {"serve", "stats", "doctor", "sync", "reindex", "maintain", "export", "import", "list", "search",
            "show", "add", "forget", "restore", "trash", "pending", "pending confirm", "token create"} <= names
    for name, parser in parsers:
        assert parser.description and len(parser.description) > 20, name
        assert parser.epilog and "pocketmem " + name.split()[0] in parser.epilog, name
        for action in parser._actions:  # noqa: SLF001
            if action.__class__.__name__ in ("_HelpAction", "_SubParsersAction"):
                continue
            assert action.help, (name, action.dest)
        assert "--log-level" in parser.format_help(), name


def test_help_of_commands_without_options_says_more_than_usage(tmp_path):
    for command in ("stats", "doctor", "sync", "reindex"):
        out = ok(run(tmp_path, command, "--help")).stdout
        assert "example" in out and len(out.splitlines()) > 5, command


def test_verbose_after_the_subcommand_and_libraries_stay_quiet(tmp_path):
    out = ok(run(tmp_path, "list", "-vv"))
    assert "aiosqlite" not in out.stderr
    assert ok(run(tmp_path, "stats", "--log-level", "info")).returncode == 0
    bad = run(tmp_path, "stats", "--log-level", "loud")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_unknown_variable_is_a_warning_naming_the_closest_setting(tmp_path):
    out = ok(run(tmp_path, "stats", POCKETMEM_EMBEDER="local"))
    assert "POCKETMEM_EMBEDER is not a pocketmem setting" in out.stderr and "POCKETMEM_EMBEDDER" in out.stderr
    assert json.loads(out.stdout)["embedder"].startswith("use:")  # the default: the misspelt variable was ignored


def test_doctor_on_a_fresh_install_has_no_false_alarm(tmp_path):
    out = run(tmp_path / "fresh", "doctor")  # no store yet: said so, no alarm, none made (a diagnostic creates nothing)
    report = json.loads(out.stdout)
    assert out.returncode == 0 and report["ok"] and report["problems"] == [], report
    assert report["note"].startswith(f"no store at {tmp_path / 'fresh' / 'memory.db'}")
    assert not (tmp_path / "fresh").exists()
    ok(run(tmp_path / "fresh", "add", "用户住在杭州"))
    out = run(tmp_path / "fresh", "doctor")
    report = json.loads(out.stdout)
    assert out.returncode == 0 and report["ok"] and report["problems"] == [], report
    assert report["store"]["vector_extension"] is True and report["store"]["memories"] == 1


def _trash_one(home: Path) -> str:
    added = json.loads(ok(run(home, "add", "旧的停车位是B2-117", "--json")).stdout)
    ok(run(home, "forget", added["memory_id"]))
    return added["memory_id"]


def test_maintain_in_the_future_shows_the_purge_and_refuses_without_yes(tmp_path):
    memory_id = _trash_one(tmp_path)
    dry = ok(run(tmp_path, "maintain", "--now", "2099-01-01T00:00", "--dry-run"))
    assert "would purge 1 trashed memory for good" in dry.stderr and memory_id in dry.stderr and dry.stdout == ""
    refused = run(tmp_path, "maintain", "--now", "2099-01-01T00:00")
    assert refused.returncode == 2 and "--yes" in refused.stderr and "nothing was changed" in refused.stderr
    assert memory_id in ok(run(tmp_path, "trash")).stdout
    done = ok(run(tmp_path, "maintain", "--now", "2099-01-01T00:00", "--yes"))
    assert json.loads(done.stdout)["users"][0]["purged"] == [memory_id]
    assert memory_id not in ok(run(tmp_path, "trash")).stdout


def test_maintain_now_without_a_jump_runs_without_asking(tmp_path):
    memory_id = _trash_one(tmp_path)
    out = ok(run(tmp_path, "maintain"))
    assert json.loads(out.stdout)["users"][0]["purged"] == []
    assert memory_id in ok(run(tmp_path, "trash")).stdout


@needs_terminal
def test_maintain_in_the_future_asks_on_a_terminal(tmp_path):
    memory_id = _trash_one(tmp_path)
    env = (
        f"POCKETMEM_HOME={shlex.quote(str(tmp_path))} POCKETMEM_TZ=UTC "
        f"PYTHONPATH={shlex.quote(os.environ.get('PYTHONPATH', ''))}"
    )
    command = f"{env} {shlex.quote(sys.executable)} -m pocketmem maintain --now 2099-01-01T00:00"
    # `script` gives the command a real terminal; "n" declines.
    answered = subprocess.run(["script", "-qec", command, "/dev/null"], input="n\n", capture_output=True, text=True,
                              timeout=120)
    assert "Purge this memory for good" in answered.stdout, answered.stdout + answered.stderr
    assert "nothing was changed" in answered.stdout
    assert memory_id in ok(run(tmp_path, "trash")).stdout


def test_import_over_the_cap_refuses_unless_allow_evict(tmp_path):
    source, target = tmp_path / "a", tmp_path / "b"
    for i in range(4):
        ok(run(source, "add", f"第{i}条记忆：用户喜欢第{i}种茶"))
    ok(run(source, "export", "-o", str(tmp_path / "dump.jsonl")))
    ok(run(target, "add", "目标库里已有的一条"))
    refused = run(target, "import", str(tmp_path / "dump.jsonl"), POCKETMEM_MAX_ACTIVE="3")
    assert refused.returncode == 2 and "nothing was changed" in refused.stderr and "--allow-evict" in refused.stderr
    assert "has 1 active, the file adds 4, the cap is 3: 2 would move" in refused.stderr
    assert len(json.loads(ok(run(target, "list", "--json")).stdout)["items"]) == 1
    allowed = ok(run(target, "import", str(tmp_path / "dump.jsonl"), "--allow-evict", POCKETMEM_MAX_ACTIVE="3"))
    assert "imported 4 memories" in allowed.stderr and "2 memories moved to the trash by the cap" in allowed.stderr
    assert len(json.loads(allowed.stdout)["evicted"]) == 2
    again = ok(run(target, "import", str(tmp_path / "dump.jsonl"), POCKETMEM_MAX_ACTIVE="3"))
    assert "imported 0 memories" in again.stderr and "skipped" in again.stderr


@needs_sh
@pytest.mark.anyio
async def test_debug_log_of_a_stdio_server_holds_no_memory_text(tmp_path):
    log_file = tmp_path / "server.log"
    env = {"PATH": os.environ.get("PATH", ""), "POCKETMEM_HOME": str(tmp_path / "home"),
           "POCKETMEM_LOG_LEVEL": "DEBUG", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    command = f"exec {shlex.quote(sys.executable)} -m pocketmem serve -vvv 2>{shlex.quote(str(log_file))}"
    async with Client(StdioServerParameters(command="sh", args=["-c", command], env=env)) as client:
        added = await client.call_tool("add_memory", {"content": SECRET_TEXT, "category": "fact"})
        assert added.structured_content["status"] == "stored"
        await client.call_tool("recall_memories", {"query": "where is the locker code"})
    text = log_file.read_text()
    assert "ready: database" in text and "transport stdio" in text
    assert "tool add_memory user=global outcome=ok" in text and "tool recall_memories user=global" in text
    assert "blue vase" not in text and "locker" not in text


def _in_terminal(home: Path, *args: str) -> str:
    env = f"POCKETMEM_HOME={shlex.quote(str(home))} PYTHONPATH={shlex.quote(os.environ.get('PYTHONPATH', ''))}"
    command = f"{env} {shlex.quote(sys.executable)} -m pocketmem " + " ".join(shlex.quote(a) for a in args)
    out = subprocess.run(["script", "-qec", command, "/dev/null"], capture_output=True, text=True, timeout=120,
                         check=False, input="")
    return out.stdout


@needs_terminal
@pytest.mark.parametrize(
    ("args", "bar", "summary"),
    [
        (("reindex",), "re-embedding", "re-embedded 3 memories"),
        (("maintain",), "maintenance", "maintenance at "),
        (("export", "-o", "OUT"), "exporting", "exported 3 memories of 1 user"),
        (("import", "IN"), "importing", "imported 0 memories"),
    ],
)
def test_progress_bar_on_a_terminal_only_and_a_summary_always(tmp_path, args, bar, summary):
    for i in range(3):
        ok(run(tmp_path, "add", f"第{i}件事"))
    ok(run(tmp_path, "export", "-o", str(tmp_path / "in.jsonl")))
    args = tuple(str(tmp_path / "out.jsonl") if a == "OUT" else str(tmp_path / "in.jsonl") if a == "IN" else a
                 for a in args)
    terminal = _in_terminal(tmp_path, *args)
    assert bar in terminal and "\x1b[" in terminal and summary in terminal, terminal
    piped = ok(run(tmp_path, *args))
    assert bar not in piped.stderr.replace(summary, "") and "\x1b[" not in piped.stderr and summary in piped.stderr


@pytest.mark.parametrize(("host", "key"), [("claude-desktop", "mcpServers"), ("cursor", "mcpServers"),
                                           ("vscode", "servers")])
def test_client_config_prints_a_working_host_entry(tmp_path, host, key):
    out = ok(run(tmp_path, "client-config", "--host", host, POCKETMEM_TZ="Asia/Shanghai"))
    entry = json.loads(out.stdout)[key]["pocketmem"]
    assert Path(entry["command"]).is_absolute() and entry["args"][-1] == "serve"
    assert entry["env"] == {"POCKETMEM_HOME": str(tmp_path), "POCKETMEM_TZ": "Asia/Shanghai"}
    assert "restart the host" in out.stderr
    code = ok(run(tmp_path, "client-config", "--host", "claude-code")).stdout
    assert code.startswith("claude mcp add pocketmem -e POCKETMEM_HOME=") and code.rstrip().endswith("serve")


def test_a_bad_user_id_is_refused_before_anything_opens(tmp_path):
    out = run(tmp_path / "home", "add", "x", "--user", "a b")
    assert out.returncode == 2 and "--user: 'a b' is not a user id" in out.stderr
    assert not (tmp_path / "home").exists()


@pytest.mark.anyio
async def test_show_lists_earlier_revisions(tmp_path):
    from mcp import Client as McpClient

    added = json.loads(ok(run(tmp_path, "add", "用户很爱吃辣", "--core", "--json")).stdout)
    env = {"PATH": os.environ.get("PATH", ""), "POCKETMEM_HOME": str(tmp_path),
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "pocketmem", "serve"], env=env)
    async with McpClient(params) as client:
        patched = await client.call_tool(
            "patch_core_memory",
            {"memory_id": added["memory_id"], "patch": "最近胃炎，暂时不吃辣", "reason": "doctor's advice"},
        )
        assert not patched.is_error, patched.content
    shown = ok(run(tmp_path, "show", added["memory_id"]))
    assert "最近胃炎" in shown.stdout
    assert "append: was “用户很爱吃辣”" in shown.stdout and "doctor's advice" in shown.stdout  # a result
    assert "用户很爱吃辣”" not in shown.stderr
