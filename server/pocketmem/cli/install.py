"""`pocketmem client-config`: the JSON a host (Claude Desktop, Cursor, VS Code, Claude Code) needs to start this
installed pocketmem, with absolute paths, so a user copies it instead of writing it."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from pocketmem.base.config import Settings

HOSTS = {
    "claude-desktop": "Claude Desktop: Settings > Developer > Edit Config (claude_desktop_config.json)",
    "cursor": "Cursor: ~/.cursor/mcp.json (or .cursor/mcp.json in a project)",
    "vscode": "VS Code: .vscode/mcp.json in the workspace (or `MCP: Open User Configuration`)",
    "claude-code": "Claude Code: run this command",
}


def server_command() -> list[str]:
    """How to start this installation: the `pocketmem` script next to this Python, else `python -m pocketmem`."""
    scripts = Path(sys.executable).parent
    for name in ("pocketmem", "pocketmem.exe"):
        if (scripts / name).is_file():
            return [str(scripts / name), "serve"]
    found = shutil.which("pocketmem")
    if found:
        return [str(Path(found).resolve()), "serve"]
    return [sys.executable, "-m", "pocketmem", "serve"]


def machine_zone() -> str | None:
    """This machine's IANA time zone (TZ, /etc/timezone or the /etc/localtime link), or None if it cannot tell.
    A host starts the server with a minimal environment, so the entry names the zone the person lives in."""
    named = os.environ.get("TZ", "").lstrip(":")
    if "/" in named or named == "UTC":
        return named
    try:
        named = Path("/etc/timezone").read_text(encoding="utf-8").strip()
    except OSError:
        named = ""
    if named:
        return named
    target = str(Path("/etc/localtime").resolve())
    return target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else None


def client_config(host: str, settings: Settings) -> str:
    command, *args = server_command()
    env = {"POCKETMEM_HOME": str(settings.home)}
    zone = settings.tz or machine_zone()
    if zone:
        env["POCKETMEM_TZ"] = zone
    if settings.user != "global":
        env["POCKETMEM_USER"] = settings.user
    if host == "claude-code":
        flags = [part for k, v in env.items() for part in ("-e", f"{k}={v}")]
        return shlex.join(["claude", "mcp", "add", "pocketmem", *flags, "--", command, *args])
    entry: dict[str, Any] = {"command": command, "args": args, "env": env}
    if host == "vscode":
        return json.dumps({"servers": {"pocketmem": {"type": "stdio", **entry}}}, indent=2, ensure_ascii=False)
    return json.dumps({"mcpServers": {"pocketmem": entry}}, indent=2, ensure_ascii=False)


async def _client_config(settings: Settings, args: argparse.Namespace) -> int:
    print(client_config(args.host, settings))
    print(f"# {HOSTS[args.host]}; then restart the host. Check with `pocketmem doctor`.", file=sys.stderr)
    if not settings.tz and not machine_zone():
        print("# note: set POCKETMEM_TZ (e.g. Asia/Shanghai) in the entry: this machine's time zone is not known",
              file=sys.stderr)
    if os.name != "nt" and not shutil.which("pocketmem"):
        print("# note: `pocketmem` is not on PATH here; the config above uses the full path, which is all hosts need",
              file=sys.stderr)
    return 0


def add_install_commands(sub: Any) -> None:
    parser = sub.add_parser(
        "client-config",
        help="print the config that registers this pocketmem with Claude Desktop, Cursor, VS Code or Claude Code",
        description="Print the MCP server entry for a host, with the absolute path of this installation and "
        "the current POCKETMEM_HOME / POCKETMEM_TZ / POCKETMEM_USER, ready to paste into the host's config.",
        epilog="examples:\n  pocketmem client-config\n  pocketmem client-config --host vscode > .vscode/mcp.json\n"
        "  POCKETMEM_TZ=Asia/Shanghai pocketmem client-config --host claude-code",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", choices=tuple(HOSTS), default="claude-desktop",
                        help="which host's format (default claude-desktop; cursor uses the same)")
    parser.set_defaults(handler=_client_config)
