"""The doctor's advice fits the cause: a write lock another process holds (an exclusive lock included) is named with
that process, within a few seconds; permission bits, a read-only file, a lock file that is a folder, a
POCKETMEM_HOME that cannot be a folder, a POCKETMEM_DB that is one and a full disk name the path and what to change,
never a backup; a store without `api_tokens` or `store_meta` opens and `--repair` recreates them; a memory.db
emptied beside the user's profile files is reported, nothing deleted; a memory.db moved away from the WAL that
holds its last writes is never replaced by a new one.

Permission cases run the command line in a child process: as root, under `setpriv` without the capabilities that
let root ignore file modes (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER), as an unprivileged user would."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.base.config import load_settings
from pocketmem.base.errors import PocketmemError
from pocketmem.base.models import Status
from pocketmem.cli import build_parser
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.shared.folder_owner import OWNER_FILE, STORE_ID_KEY
from pocketmem.service.upkeep.doctor import REPAIR_BLOCKED
from pocketmem.store.sqlite import access

from .helpers import START, STORE_FACTS, Backend, a_store, doctor
from .servers import server_env

pytestmark = [pytest.mark.anyio]

FACTS = STORE_FACTS
CAPS = "-dac_override,-dac_read_search,-fowner"




def no_backup(problems: list[str]) -> None:
    for line in problems:
        assert "backup" not in line and "restore" not in line and "unexpected" not in line, line


HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("begin exclusive")
conn.execute("update users set updated_at = updated_at")
print("held", flush=True)
time.sleep(600)
"""


async def test_a_write_lock_another_process_holds_is_named_and_the_store_still_reads(settings, capsys):
    await a_store(settings)
    with subprocess.Popen(  # noqa: ASYNC220 - the other process, started before the test does anything
        [sys.executable, "-c", HOLDER, str(settings.db_path)], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            code, report = await doctor(settings, capsys)
            assert code == 1 and len(report["problems"]) == 1, report["problems"]
            line = report["problems"][0]
            assert line.startswith("the store's write lock has been held for over 3 s by process ")
            assert f"process {holder.pid} (" in line and "Do not restore or remove memory.db" in line
            code, report = await doctor(settings, capsys, repair=True)
            assert code == 1 and report["problems"][1:] == [REPAIR_BLOCKED] and report["repaired"] == []
            async with PocketMem(settings, clock=FixedClock(START)) as app:  # reading needs no write lock
                async with app.store.read() as reader:
                    listed = await reader.scan_memories("global", (Status.active,), None, 10)
            assert sorted(m.content for m in listed) == sorted(FACTS)
        finally:
            holder.kill()
    code, report = await doctor(settings, capsys)
    assert code == 0 and report["ok"], report["problems"]


FLOCK_HOLDER = """
import fcntl, os, sys, time
fcntl.flock(os.open(sys.argv[1], os.O_RDWR), fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


async def test_pocketmems_own_write_turn_held_by_another_process_is_named(settings, capsys):
    """Another process holding memory.db.lock (a writer of pocketmem mid-write, or a stuck one) keeps every save
    waiting: the doctor names it, as it names SQLite's own lock."""
    await a_store(settings)
    lock = Path(f"{settings.db_path}.lock")
    with subprocess.Popen(  # noqa: ASYNC220 - the other process, started before the test does anything
        [sys.executable, "-c", FLOCK_HOLDER, str(lock)], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            code, report = await doctor(settings, capsys)
            assert code == 1 and len(report["problems"]) == 1, report["problems"]
            line = report["problems"][0]
            assert line.startswith("the store's write lock has been held for over 3 s by process ")
            assert f"process {holder.pid} ({sys.executable} -c" in line, line
        finally:
            holder.kill()
    code, report = await doctor(settings, capsys)
    assert code == 0 and report["ok"], report["problems"]


EXCLUSIVE = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("pragma locking_mode = exclusive")  # held from the first statement on, readers kept out too
conn.execute(sys.argv[2])
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("statement", ["update users set updated_at = updated_at", "select count(*) from users"])
async def test_a_process_holding_the_file_exclusively_is_named_within_the_doctors_wait(settings, capsys, statement):
    await a_store(settings)
    with subprocess.Popen(  # noqa: ASYNC220 - the other process, started before the test does anything
        [sys.executable, "-c", EXCLUSIVE, str(settings.db_path), statement], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            with anyio.fail_after(25):  # opening alone used to wait 4 x 10 s
                code, report = await doctor(settings, capsys)
            assert code == 1 and len(report["problems"]) == 1, report["problems"]
            line = report["problems"][0]
            assert line.startswith(f"the store's write lock has been held for over 3 s by process {holder.pid} (")
            assert "Do not restore or remove memory.db" in line
        finally:
            holder.kill()
    code, report = await doctor(settings, capsys)
    assert code == 0 and report["ok"], report["problems"]


def limited(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`pocketmem ARGS` as a user whom file modes bind (root without the capabilities that bypass them)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        prefix = ["setpriv", "--bounding-set", CAPS, "--inh-caps", CAPS, "--"]
    return subprocess.run([*prefix, sys.executable, "-m", "pocketmem", *args], env=server_env(Backend(), home),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd="/")


def made_unusable(home: Path, case: str) -> Path:
    """The change that keeps this user from saving; the path the report must name."""
    db, lock = home / "memory.db", home / "memory.db.lock"
    if case == "read-only file":
        db.chmod(0o444)
        return db
    if case == "read-only folder":
        home.chmod(0o555)
        return home
    if case == "unreadable folder":
        home.chmod(0o000)
        return home
    if case == "lock file without permissions":
        lock.chmod(0o000)
        return lock
    lock.unlink()
    lock.mkdir()
    return lock


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    ["read-only file", "read-only folder", "unreadable folder", "lock file without permissions", "lock folder"],
)
async def test_a_store_this_user_cannot_write_is_reported_with_the_path_to_change(tmp_path, make_settings, case):
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("needs setpriv to run without root's right to ignore file modes")
    settings = make_settings(tmp_path)
    await a_store(settings)
    home = settings.home
    path = made_unusable(home, case)
    try:
        for repair in ([], ["--repair"]):
            done = limited(home, "doctor", *repair)
            report = json.loads(done.stdout)
            assert done.returncode == 1 and report["ok"] is False, done.stderr
            first = report["problems"][0]
            assert str(path) in first and ("chmod" in first or "remove that folder" in first), report["problems"]
            no_backup(report["problems"])
            if repair and case != "unreadable folder":
                assert report["problems"][-1] == REPAIR_BLOCKED and report["repaired"] == [], report["problems"]
        listed = limited(home, "list", "--json")
        if case == "unreadable folder":
            assert listed.returncode == 2 and str(home) in listed.stderr and "unexpected" not in listed.stderr
        else:
            assert listed.returncode == 0, listed.stderr
    finally:
        home.chmod(0o755)
        path.chmod(0o755 if path.is_dir() else 0o644)


@pytest.mark.slow
def test_a_home_that_cannot_be_a_folder_is_named_by_doctor_and_list(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    cases = {
        a_file / "sub": f"{a_file} is a file, not a folder, so {a_file / 'sub'} cannot be made in it",
        Path("/proc/pocketmem-home"): "/proc/pocketmem-home cannot be made: /proc belongs to the system (proc)",
    }
    if Path("/sys/kernel").is_dir():
        cases[Path("/sys/kernel/pm")] = "/sys/kernel/pm cannot be made: /sys/kernel belongs to the system (sysfs)"
    for home, said in cases.items():
        done = limited(home, "doctor")
        report = json.loads(done.stdout)
        assert done.returncode == 1 and report["problems"] == [f"the store cannot be opened: {report['error']}"]
        assert said in report["error"] and "POCKETMEM_HOME" in report["error"]
        no_backup(report["problems"])
        listed = limited(home, "list")
        assert listed.returncode == 2 and listed.stderr.strip() == f"pocketmem: {report['error']}"


@pytest.mark.parametrize("table", ["api_tokens", "store_meta"])
async def test_a_missing_table_of_its_own_data_is_reported_and_recreated_by_repair(settings, capsys, table):
    await a_store(settings)
    with sqlite3.connect(settings.db_path) as db:
        db.execute(f"drop table {table}")
    code, report = await doctor(settings, capsys)
    assert code == 1
    missing = f"table {table} is missing (its rows cannot be rebuilt): run `pocketmem doctor --repair`"
    assert missing in report["problems"]
    no_backup(report["problems"])
    code, report = await doctor(settings, capsys, repair=True)
    assert code == 0 and report["ok"], report["problems"]
    assert f"table {table} was missing: recreated" in report["repaired"]
    code, report = await doctor(settings, capsys)
    assert code == 0 and report["ok"] and report["repaired"] == [], report["problems"]
    async with PocketMem(settings, clock=FixedClock(START)) as app:  # the profile folder is this store's again
        kept = await app.store.get_meta(STORE_ID_KEY)
    assert kept == (settings.home / "global" / OWNER_FILE).read_text().strip()


async def test_an_emptied_memory_db_beside_the_profile_files_is_reported_and_nothing_deleted(settings, capsys):
    await a_store(settings)
    folder = settings.home / "global"
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    os.truncate(settings.db_path, 0)
    for repair in (False, True):
        code, report = await doctor(settings, capsys, repair)
        assert code == 1 and len(report["problems"]) == 1, report["problems"]
        line = report["problems"][0]
        assert line.startswith(f"{folder} keeps the profile files of another pocketmem store")
        assert "This store holds no memories: memory.db was probably emptied or replaced" in line
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == files


async def test_an_upgrade_between_built_in_embedders_is_a_note_another_embedder_a_problem(settings, capsys):
    await a_store(settings)
    with sqlite3.connect(settings.db_path) as db:
        db.execute("update store_meta set value = ? where key = 'embedder'",
                   ("use:universal-sentence-encoder-multilingual-3",))
    code, report = await doctor(settings, capsys)
    assert code == 0 and report["ok"], report["problems"]
    assert report["embedder"]["note"].startswith(
        "the store's vectors were made by use:universal-sentence-encoder-multilingual-3: the next start of "
        "`pocketmem serve` re-embeds every memory with hash"
    )
    with sqlite3.connect(settings.db_path) as db:
        db.execute("update store_meta set value = 'openai:text-embedding-3-small' where key = 'embedder'")
    code, report = await doctor(settings, capsys)
    assert code == 1 and "note" not in report["embedder"]
    assert report["problems"] == [
        "the store's vectors were made by openai:text-embedding-3-small, not by the configured embedder "
        f"{report['embedder']['tag']}: run `pocketmem reindex` to re-embed every memory, or set POCKETMEM_EMBEDDER "
        "and POCKETMEM_EMBED_MODEL back"
    ]


def test_doctor_help_says_what_repair_does():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    text = " ".join(sub.choices["doctor"].format_help().split())
    assert "recreate missing tables" in text and "rebuild the keyword and vector indexes" in text


async def pocketmem(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(120):
        return await anyio.run_process([sys.executable, "-m", "pocketmem", *args], check=False,
                                       env=server_env(Backend(), home, **env), stdin=subprocess.DEVNULL)


LEAVE_WAL = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("pragma wal_autocheckpoint = 0")
conn.execute("update memories set content = 'edited in the WAL only'")
os._exit(0)  # no close: the write stays in memory.db-wal, acknowledged
"""


async def test_a_wal_left_without_its_memory_db_is_named_and_never_deleted(tmp_path, settings, capsys):
    await a_store(settings)
    db, wal = settings.db_path, Path(f"{settings.db_path}-wal")
    await anyio.run_process([sys.executable, "-c", LEAVE_WAL, str(db)])
    kept = await anyio.Path(wal).read_bytes()
    assert len(kept) > 0
    moved = tmp_path / "moved.db"
    db.rename(moved)
    for repair in (False, True):
        code, report = await doctor(settings, capsys, repair)
        assert code == 1 and len(report["problems"]) == 1, report
        line = report["problems"][0]
        assert line.startswith(f"{db} is missing, but {wal} ({len(kept)} bytes) beside it holds writes")
        assert "Put memory.db back beside it" in line and "move memory.db-wal away (keep it)" in line
        no_backup([line.replace("or a backup", "")])  # never "restore": the writes are in that WAL
    done = await pocketmem(settings.home, "list")
    assert done.returncode == 2 and done.stderr.decode().strip() == f"pocketmem: {line}"
    with pytest.raises(PocketmemError, match="is missing, but"):  # serve, the page and every command open so
        await PocketMem(settings).open()
    assert not db.exists() and await anyio.Path(wal).read_bytes() == kept
    moved.rename(db)  # put back: the write the WAL held is there
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        async with app.store.read() as reader:
            listed = await reader.scan_memories("global", (Status.active,), None, 10)
    assert {m.content for m in listed} == {"edited in the WAL only"}


async def test_pocketmem_db_naming_a_folder_is_named_as_a_setting_not_sent_to_a_backup(tmp_path, make_settings, capsys):
    settings = make_settings(tmp_path, db=tmp_path / "home")
    settings.home.mkdir()
    said = (f"{settings.home} is a folder, not the store's SQLite file: set POCKETMEM_DB to a file (such as "
            f"{settings.home / 'memory.db'})")
    code, report = await doctor(settings, capsys)
    assert code == 1 and len(report["problems"]) == 1 and report["problems"][0].startswith(said), report
    no_backup(report["problems"])
    done = await pocketmem(settings.home, "list", POCKETMEM_DB=str(settings.home))
    stderr = done.stderr.decode()
    assert done.returncode == 2 and said in stderr and "unable to open" not in stderr, stderr


FULL_DISK = """
mount -t tmpfs -o size=2m tmpfs {disk} || exit 9
cp -a {store} {disk}/home
dd if=/dev/zero of={disk}/filler bs=4k 2>/dev/null
# room for memory.db-shm and little else: opening works, saving does not
dd if=/dev/zero of={disk}/filler bs=4k count=$(( $(stat -c %s {disk}/filler) / 4096 - {left} )) 2>/dev/null
POCKETMEM_HOME={disk}/home {pocketmem} add 用户养了一只猫叫小白 > /dev/null 2> {out}/add.err; echo $? > {out}/add.code
POCKETMEM_HOME={disk}/home {pocketmem} doctor > {out}/doctor.json; echo $? > {out}/doctor.code
"""


def namespaces() -> bool:
    return shutil.which("unshare") is not None and not subprocess.run(["unshare", "-rm", "true"]).returncode


@pytest.mark.slow
@pytest.mark.parametrize("left", [0, 12])  # 4 KiB blocks left free: none (opening fails too), or room for the -shm
async def test_a_full_disk_is_named_by_the_doctor_never_sent_to_a_backup(tmp_path, settings, left):
    if not namespaces():
        pytest.skip("needs user and mount namespaces (unshare -rm) for a small disk of its own")
    await a_store(settings)
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    script = FULL_DISK.format(disk=disk, store=settings.home, out=out, left=left,
                              pocketmem=shlex.join([sys.executable, "-m", "pocketmem"]))
    with anyio.fail_after(300):
        await anyio.run_process(["unshare", "-rm", "sh", "-c", script], env=server_env(Backend(), settings.home))
    add_code, add_err = int((out / "add.code").read_text()), (out / "add.err").read_text()
    assert add_code == 2 and f"{disk}/home" in add_err and "is full" in add_err, add_err
    code, report = int((out / "doctor.code").read_text()), json.loads((out / "doctor.json").read_text())
    assert code == 1 and report["problems"][0].startswith(f"the disk holding {disk}/home is full ("), report
    no_backup(report["problems"])


def odd_file(home: Path, case: str) -> Path:
    """Something other than a file where SQLite keeps one; the path the report must name."""
    db = home / "memory.db"
    if case in ("-wal a folder", "-shm a folder"):
        path = home / f"memory.db{case[:4]}"
        path.mkdir()
        return path
    db.rename(home / "moved.db")
    if case == "a link to itself":
        db.symlink_to("memory.db")
    elif case == "a link to /dev/null":
        db.symlink_to("/dev/null")
    else:
        os.mkfifo(db)
    return db


ODD = {
    "-wal a folder": "is a folder, not the file SQLite keeps beside memory.db",
    "-shm a folder": "is a folder, not the file SQLite keeps beside memory.db",
    "a link to itself": "is a symbolic link that leads back to itself (a loop), not the store's SQLite file",
    "a link to /dev/null": "is a device (a link to /dev/null), not the store's SQLite file",
    "a named pipe": "is a named pipe, not the store's SQLite file",
}


@pytest.mark.parametrize("case", list(ODD))
async def test_something_else_in_place_of_the_stores_files_is_named_never_sent_to_a_backup(settings, capsys, case):
    await a_store(settings)
    path = odd_file(settings.home, case)
    for repair in (False, True):
        code, report = await doctor(settings, capsys, repair)
        assert code == 1 and report["problems"][0].startswith(f"{path} {ODD[case]}"), report["problems"]
        assert "nothing is damaged" in report["problems"][0]
        no_backup(report["problems"])


@pytest.mark.slow
def test_debug_after_the_subcommand_prints_the_traceback(settings, tmp_path):
    asyncio.run(a_store(settings))
    odd_file(settings.home, "-wal a folder")
    for args in (["list"], ["list", "--debug"], ["--debug", "list"]):
        done = subprocess.run([sys.executable, "-m", "pocketmem", *args], env=server_env(Backend(), settings.home),
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert done.returncode == 2 and "memory.db-wal is a folder" in done.stderr, done.stderr
        assert ("Traceback" in done.stderr) == ("--debug" in args), done.stderr


async def test_db_in_config_toml_naming_a_folder_is_named_as_that_key(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'db = "{home}"\n', encoding="utf-8")
    monkeypatch.setenv("POCKETMEM_HOME", str(home))
    code, report = await doctor(load_settings(embedder="hash"), capsys)
    assert code == 1 and report["problems"] == [
        f"{home} is a folder, not the store's SQLite file: set db (in {home / 'config.toml'}) to a file (such as "
        f"{home / 'memory.db'}), or remove that key to keep the store in $POCKETMEM_HOME/memory.db"
    ], report
    assert home.is_dir() and "POCKETMEM_DB" not in report["problems"][0]


def odd_profile_folder(home: Path, case: str) -> Path:
    folder = home / "global"
    shutil.rmtree(folder)
    if case == "a file":
        folder.write_text("not a folder")
        return folder
    if case == "a link loop":
        folder.symlink_to("global")
        return folder
    folder.mkdir()
    (folder / "User.md").mkdir()
    return folder / "User.md"


@pytest.mark.parametrize(("case", "said"), [
    ("a file", "is a file, not a folder, so its Markdown files are neither updated nor read back"),
    ("a link loop", "is a symbolic link that leads back to itself (a loop), not a folder, so its Markdown files"),
    ("User.md a folder", "is a folder, not a file, so User.md is neither updated nor read back"),
])
async def test_something_else_in_place_of_a_profile_folder_or_file_is_named(settings, capsys, case, said):
    await a_store(settings)
    path = odd_profile_folder(settings.home, case)
    code, report = await doctor(settings, capsys)
    assert code == 1 and report["problems"] == [report["problems"][0]] and report["problems"][0].startswith(
        f"{path} {said}"), report["problems"]
    no_backup(report["problems"])
    if case != "User.md a folder":  # a folder in place of one file is refused once, as a problem of that file
        async with PocketMem(settings, clock=FixedClock(START)) as app:
            answer = await app.retrieval.answer("global", RecallRequest(query="用户住在哪里"))
        assert answer.degraded == f"profile files: {report['problems'][0]}"


def test_a_process_waiting_for_a_lock_is_no_holder_and_breaks_nothing(tmp_path):
    """/proc/locks marks a process waiting for a lock with `->`, which shifts its fields: reading such a line as a
    holder's failed the doctor's whole write check (a ValueError), and `--repair` then went ahead under a held lock.
    Waiters anywhere on the machine are skipped; the holder is found."""
    db = tmp_path / "memory.db"
    db.write_bytes(b"")
    st = os.stat(db)
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    inodes = {(os.major(st.st_dev), os.minor(st.st_dev), st.st_ino): "db"}
    lines = [
        f"1: POSIX  ADVISORY  WRITE 4242 {device} 1073741824 1073742335",
        f"1: -> POSIX  ADVISORY  WRITE 5151 {device} 1073741824 1073742335",
        "2: FLOCK  ADVISORY  WRITE 6161 00:2a:99 0 EOF",
        "3: -> FLOCK  ADVISORY  WRITE 7171 00:2a:99 0 EOF",
    ]
    assert access.holding_pids(lines, inodes) == {4242}


def test_the_doctor_creates_no_store_where_there_is_none(tmp_path):
    """A mistyped POCKETMEM_HOME: the doctor said ok after making an empty store (and the folder) there."""
    home = tmp_path / "no-such-home"
    done = subprocess.run([sys.executable, "-m", "pocketmem", "doctor"], env=server_env(Backend(), home),
                          capture_output=True, text=True, timeout=120)
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["ok"] and report["problems"] == [], report
    assert report["note"] == (
        f"no store at {home / 'memory.db'}: nothing was created. If the store is elsewhere, set POCKETMEM_HOME to "
        "where it is; a new store is made by the first `pocketmem add` or start of `pocketmem serve`"
    ), report
    assert not home.exists()


def test_a_link_to_a_store_on_a_disk_not_mounted_makes_no_new_store_there(tmp_path):
    home, mount = tmp_path / "home", tmp_path / "mnt"
    home.mkdir()
    mount.mkdir()  # the mount point is there, the disk is not
    (home / "memory.db").symlink_to(mount / "memory.db")
    env = server_env(Backend(), home)
    for args in (["doctor"], ["add", "用户住在杭州"], ["list"]):
        done = subprocess.run([sys.executable, "-m", "pocketmem", *args], env=env, capture_output=True, text=True,
                              timeout=120)
        said = done.stdout + done.stderr
        assert done.returncode in (1, 2) and f"a symbolic link to {mount / 'memory.db'}, which does not exist" in said
        assert list(mount.iterdir()) == [], args
