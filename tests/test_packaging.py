"""The package as a user installs it: sdist and wheel build, the wheel goes into a fresh environment (no
repository on the path), and the installed `pocketmem` answers doctor and one MCP round trip over stdio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

ROOT = Path(__file__).resolve().parents[1]


def _clean_env(**extra: str) -> dict[str, str]:
    # No PYTHONPATH: only what the wheel installed may be imported.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("POCKETMEM_")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("package")
    dist = Path(os.environ.get("TEST_DIST_DIR") or work / "dist")  # .ci/run builds it once, as a CI step
    if not any(dist.glob("pocketmem-*.whl")):
        subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], check=True,
                       capture_output=True, timeout=600, env=_clean_env())
    wheel = max(dist.glob("pocketmem-*.whl"), key=lambda p: p.stat().st_mtime)
    sdist = max(dist.glob("pocketmem-*.tar.gz"), key=lambda p: p.stat().st_mtime)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert "pocketmem/cli/__init__.py" in names and any(n.endswith("licenses/LICENSE") for n in names)
    # the word lists, tables and sentences recall reads at run time (core/data, sources in its NOTICE.md)
    shipped = {f"pocketmem/core/data/{f.name}" for f in (ROOT / "server/pocketmem/core/data").iterdir()}
    assert shipped <= set(names), shipped - set(names)
    assert not any(n.startswith(("tests/", "server/")) for n in names)
    with tarfile.open(sdist) as tf:
        members = {m.name.split("/", 1)[1] for m in tf.getmembers() if "/" in m.name}
    assert {"LICENSE", "pyproject.toml", "README.md", "server/pocketmem/cli/__init__.py"} <= members
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    subprocess.run([str(bindir / "python"), "-m", "pip", "install", "-q", str(wheel)], check=True,
                   capture_output=True, timeout=900, env=_clean_env())
    return bindir


def test_the_installed_command_answers_doctor(installed, tmp_path):
    exe = installed / "pocketmem"
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, env=_clean_env(), timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("pocketmem ")
    where = subprocess.run([str(installed / "python"), "-c", "import pocketmem; print(pocketmem.__file__)"],
                           capture_output=True, text=True, env=_clean_env(), timeout=60, cwd=tmp_path)
    assert str(installed.parent) in where.stdout, where.stdout  # the wheel's copy, not the repository's
    doctor = subprocess.run([str(exe), "doctor"], capture_output=True, text=True, timeout=120,
                            env=_clean_env(POCKETMEM_HOME=str(tmp_path / "home")))
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 0 and report["ok"], report


@pytest.fixture
def printed_entry(installed, tmp_path) -> dict:
    """What `pocketmem client-config` tells a user to paste into Claude Desktop."""
    printed = subprocess.run([str(installed / "pocketmem"), "client-config"], capture_output=True, text=True,
                             timeout=60, env=_clean_env(POCKETMEM_HOME=str(tmp_path / "home")))
    return json.loads(printed.stdout)["mcpServers"]["pocketmem"]


async def test_the_printed_host_config_starts_the_installed_server(installed, printed_entry):
    entry = printed_entry
    assert entry["command"] == str(installed / "pocketmem") and entry["args"] == ["serve"]
    # A host starts exactly that, with little more than the config's env.
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={"PATH": "/usr/bin:/bin", **entry["env"]}
    )
    async with Client(params) as client:
        added = await client.call_tool("add_memory", {"content": "用户不喜欢香菜", "category": "preference"})
        assert added.structured_content["status"] == "stored"
        recalled = await client.call_tool("recall_memories", {"query": "晚饭能放香菜吗"})
        assert recalled.structured_content["memories"][0]["id"] == added.structured_content["memory_id"]
