"""User text is text (issue 22 item 7): memory text that looks like markup prints literally on every surface that
renders markup: the CLI's rich tables, the page's HTML, the profile's Markdown files."""

from __future__ import annotations

import json
import re

import anyio
import httpx2
import pytest

from pocketmem.app import PocketMem
from pocketmem.base.models import Category
from pocketmem.core.profile_text import parse
from pocketmem.service.shared.folder_owner import folder_name
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.web.server import standalone

from .servers import run_cli

USER = "global"
LINK = "[link=https://evil.example]https://bank.example[/link]"
HOSTILE = f"用户的网银地址是 {LINK} [bold]紧急[/bold]"
HTML = "用户的备注 <script>alert(1)</script> <img src=x onerror=alert(2)> [银行](https://evil.example) `code` &amp;"


def test_the_cli_prints_memory_text_literally(tmp_path, capsys):
    home = tmp_path / "home"
    added = run_cli(capsys, home, "add", HOSTILE, "--category", "fact", "--json")
    memory_id = json.loads(added.stdout)["memory_id"]
    for args in (("list",), ("search", "网银地址"), ("show", memory_id), ("trash",)):
        if args == ("trash",):
            assert run_cli(capsys, home, "forget", memory_id).returncode == 0
        out = run_cli(capsys, home, *args)
        assert out.returncode == 0, out.stderr
        flat = "".join(out.stdout.split())  # a table folds long cells over lines
        assert "".join(LINK.split()) in flat and "[bold]紧急[/bold]" in flat, (args, out.stdout)
        assert "\x1b" not in out.stdout


@pytest.mark.anyio
async def test_the_page_escapes_memory_text(app: PocketMem):
    added = await app.writing.add(USER, AddRequest(content=HTML, category=Category.fact))
    memory_id = added.memory_id
    asgi, _ = await standalone(app, "127.0.0.1")
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=asgi), base_url="http://127.0.0.1:8000") as http:
        for path in ("/ui/memories", f"/ui/memories/{memory_id}", "/ui/memories?q=备注", "/ui/insights"):
            page = await http.get(path)
            assert page.status_code == 200, path
            assert "<script>alert" not in page.text and "<img src=x" not in page.text, path
            if path != "/ui/insights":
                assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text, path
                assert "&amp;amp;" in page.text, path  # the user's own "&amp;" shows as typed


@pytest.mark.anyio
async def test_markdown_files_hold_memory_text_literally_and_read_it_back(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, profile_files="on")
    async with PocketMem(settings, clock=clock) as app:
        added = await app.writing.add(USER, AddRequest(content=HTML, category=Category.fact,
                                                         scores={"persistence": 1.0}))
        await app.profile.update(USER, None, {"name": "[小王](https://evil.example)"}, confirmed=True)
        await app.profile_files.sync(USER)
        path = settings.home / folder_name(USER) / "User.md"
        text = await anyio.Path(path).read_text(encoding="utf-8")
        assert "\\<script\\>" in text and "\\[银行\\](https://evil.example)" in text and "\\`code\\`" in text
        assert "\\&amp;" in text and "\\[小王\\](https://evil.example)" in text
        assert not re.search(r"(?<!\\)<(?!!--)", text)  # no `<` that starts HTML, only pocketmem's comments
        parsed = parse("User.md", text)
        assert [m.text for m in parsed.sections["core"].memories] == [HTML] and not parsed.problems
        assert parsed.sections["identity"].fields["name"] == "[小王](https://evil.example)"
        report = await app.profile_files.sync(USER)  # read back: nothing changed, nothing taken in
        memory = await app.get_memory(USER, added.memory_id or "")
        assert memory["content"] == HTML and memory["status"] == "active"
        assert report.taken_in == [] and report.problems == []
