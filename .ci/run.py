"""The test command, on Linux, macOS and Windows: `python .ci/run.py [pytest args]` (.ci/run calls it).

It makes a test environment apart from the quick start's .venv (default .venv-test; TEST_VENV changes it),
installs torch's CPU build where one can be had without GPU packages (TORCH=cpu, the default; TORCH=none
skips it and the local-embedder tests say why), builds the sdist and wheel (the packaging test installs
that wheel into a fresh environment), and runs pytest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"
# An extra index with torch's CPU builds, for machines whose package index resolves torch to a GPU build:
# e.g. TORCH_INDEX=https://download.pytorch.org/whl/cpu (docs/development.md). Nothing is probed otherwise.
TORCH_INDEX = os.environ.get("TORCH_INDEX", "")


def sh(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(args), flush=True)
    return subprocess.run(args, check=True, text=True, **kwargs)


def python_of(env_dir: Path) -> str:
    return str(env_dir / ("Scripts" if os.name == "nt" else "bin") / ("python.exe" if os.name == "nt" else "python"))


def torch_plan(py: str) -> list[str] | None:
    """pip arguments that install a CPU-only torch, or None when none can be had here."""
    if os.environ.get("TORCH", "cpu") == "none":
        return None
    if TORCH_INDEX:
        return [TORCH, "--index-url", TORCH_INDEX]
    # No PyTorch index: accept what the configured index offers only if it brings no GPU packages.
    report = subprocess.run([py, "-m", "pip", "install", "--dry-run", "-q", "--report", "-", TORCH],
                            capture_output=True, text=True)
    if report.returncode != 0:
        return None
    names = [item["metadata"]["name"].lower() for item in json.loads(report.stdout)["install"]]
    versions = [item["metadata"]["version"] for item in json.loads(report.stdout)["install"]
                if item["metadata"]["name"].lower() == "torch"]
    gpu = [n for n in names if n.startswith(("nvidia-", "triton"))]
    if gpu and not any("+cpu" in v for v in versions):
        return None
    return [TORCH]


def main() -> int:
    env_dir = ROOT / os.environ.get("TEST_VENV", ".venv-test")
    if not Path(python_of(env_dir)).exists():
        venv.create(env_dir, with_pip=True)
    py = python_of(env_dir)
    sh(py, "-m", "pip", "install", "-q", "--upgrade", "pip")
    plan = torch_plan(py)
    extras = "test,examples,dev"
    if plan is None:
        print("torch's CPU build is not available here (or TORCH=none): the local-embedder tests will be skipped",
              flush=True)
    else:
        sh(py, "-m", "pip", "install", "-q", *plan)
        extras += ",local-test"
    sh(py, "-m", "pip", "install", "-q", "-e", f".[{extras}]", cwd=ROOT)
    dist = env_dir / "dist"
    sh(py, "-m", "build", "--outdir", str(dist), ".", cwd=ROOT, stdout=subprocess.DEVNULL)
    env = {**os.environ, "TEST_DIST_DIR": str(dist)}
    env.pop("PYTHONPATH", None)
    bin_dir = str(Path(py).parent)
    # The static checks gate the tests: lint, the layer contracts, types (.ci/checks; the same three commands).
    for check in (["ruff", "check", "server", "tests", "bench"], ["lint-imports", "--no-cache"], ["mypy"]):
        print("==", " ".join(check), flush=True)
        tool = str(Path(bin_dir) / check[0])
        done = subprocess.run([tool, *check[1:]], cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT / "server")})
        if done.returncode != 0:
            return done.returncode
    return subprocess.run([py, "-m", "pytest", *sys.argv[1:]], cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
