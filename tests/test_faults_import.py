"""Import, record by record: what the page exports the page imports again; a malformed record is refused with its
reason in the report, never an unexpected error."""

from __future__ import annotations

import json

import pytest

from pocketmem.service.lifecycle import AddRequest

from .test_web import USER, Browser, make_browser

pytestmark = [pytest.mark.anyio]


async def test_the_page_imports_what_the_page_exported_profile_rows_included(app):
    await app.lifecycle.add(USER, AddRequest(content="用户不喜欢香菜"))
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
