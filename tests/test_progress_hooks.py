"""The progress hooks the CLI's bars draw from: each long run reports its work as it goes, ending at its total."""

from __future__ import annotations

import io

import pytest

from pocketmem.app import PocketMem
from pocketmem.service.writing.add_request import AddRequest

from .helpers import MakeSettings
from .pg import PgTestServer

pytestmark = pytest.mark.anyio


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int | None]] = []

    def __call__(self, done: int, total: int | None) -> None:
        self.calls.append((done, total))

    @property
    def dones(self) -> list[int]:
        return [done for done, _ in self.calls]


async def _fill(app: PocketMem, users: dict[str, int]) -> None:
    for user, n in users.items():
        for i in range(n):
            result = await app.writing.add(user, AddRequest(content=f"{user} 的第{i}条记忆：喜欢第{i}种花"))
            assert result.status == "stored"


async def test_reindex_export_import_and_maintenance_report_progress(app, tmp_path, clock, make_settings):
    await _fill(app, {"alice": 3, "bob": 2})

    reindexed = Recorder()
    assert await app.reindex(reindexed) == 5
    assert reindexed.calls[-1] == (5, 5)

    exported = Recorder()
    out = io.StringIO()
    await app.exporter.export(out, progress=exported)
    assert exported.calls == [(1, 2), (2, 2)]

    maintained = Recorder()
    await app.maintenance.run(progress=maintained)
    assert maintained.calls == [(1, 2), (2, 2)]

    target = PocketMem(make_settings(tmp_path / "target"), clock=clock)
    async with target:
        imported = Recorder()
        report = await target.exporter.import_lines(out.getvalue().splitlines(), imported)
        assert report.imported.memory == 5
        assert imported.dones == sorted(imported.dones) and imported.calls[-1] == (5, 5)


async def test_sync_reports_each_user(tmp_path, clock, postgres: PgTestServer, make_settings: MakeSettings):
    name = postgres.database()
    try:
        settings = make_settings(tmp_path, db=tmp_path / "device.db", cloud_url=postgres.url(name), sync_interval=0)
        async with PocketMem(settings, clock=clock) as device:
            await _fill(device, {"alice": 1, "global": 1})
            synced = Recorder()
            report = await device.sync.run(synced)
            assert report.ok, report.error
            assert synced.calls == [(1, 2), (2, 2)]
    finally:
        postgres.drop(name)
