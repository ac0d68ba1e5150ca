"""`pocketmem client-config`: the JSON a host (Claude Desktop, Cursor, VS Code, Claude Code) needs to start this
installed pocketmem, with absolute paths, so a user copies it instead of writing it."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pocketmem.base.config import ENV_PREFIX, Settings, mask_url
from pocketmem.base.errors import InvalidInput
from pocketmem.base.files import atomic_write

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


# A POSIX TZ value with a fixed offset and no summer time: CST-8, <+0530>-5:30, UTC0.
FIXED_OFFSET = re.compile(r"(?:[A-Za-z]{3,}|<[^>]+>)[+-]?\d{1,2}(?::\d{2}){0,2}")


def machine_zone() -> str | None:
    """This machine's IANA time zone (TZ, /etc/timezone or the /etc/localtime link), or None if it cannot tell.
    A host starts the server with a minimal environment, so the entry names the zone the person lives in, as a
    name the server accepts (POCKETMEM_TZ)."""
    named = os.environ.get("TZ", "").strip()
    if named:  # the zone this process runs in, whatever the files say
        return _tz_variable(named.lstrip(":"))
    try:
        named = Path("/etc/timezone").read_text(encoding="utf-8").strip()
    except OSError:
        named = ""
    return _known(named) or _zone_of_file(Path("/etc/localtime"))


def _tz_variable(value: str) -> str | None:
    """TZ as a zone name: a name, a file under a zoneinfo folder (`:/usr/share/zoneinfo/Asia/Shanghai`), or a
    fixed offset (`CST-8` -> Etc/GMT-8, the zone 8 hours ahead of UTC); None for a rule with summer time."""
    if value.startswith("/"):
        return _zone_of_file(Path(value))
    if found := _known(value):
        return found
    if not FIXED_OFFSET.fullmatch(value):
        return None
    offset = datetime.now().astimezone().utcoffset() or timedelta(0)
    hours, rest = divmod(int(offset.total_seconds()), 3600)
    if rest:
        return None  # no Etc zone is a fraction of an hour away from UTC
    return "UTC" if hours == 0 else _known(f"Etc/GMT{-hours:+d}")


def _zone_of_file(path: Path) -> str | None:
    target = str(path.resolve())
    return _known(target.split("zoneinfo/", 1)[1]) if "zoneinfo/" in target else None


def _known(name: str) -> str | None:
    """`name` when the server accepts it as POCKETMEM_TZ (an IANA zone), else None."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None
    return name or None


# Written from the settings themselves (the home made absolute, the zone named), not copied from the shell.
OWN = ("POCKETMEM_HOME", "POCKETMEM_TZ", "POCKETMEM_USER")
PATHS = ("POCKETMEM_DB", "POCKETMEM_CONFIG", "POCKETMEM_EMBED_MODEL")  # EMBED_MODEL when it names a folder
SECRETS = {  # never printed: each set here is named on stderr with where to put it
    "POCKETMEM_LLM_API_KEY": "llm_api_key", "POCKETMEM_EMBED_API_KEY": "embed_api_key",
    "OPENAI_API_KEY": "llm_api_key / embed_api_key",
}


def host_env(settings: Settings) -> tuple[dict[str, str], list[str]]:
    """The entry's env, and the variables set here but left out because they hold a secret (a key, or a URL
    with a password in it). A host starts the server with a minimal environment, so every POCKETMEM_* setting set
    here that differs from its default goes in (paths made absolute): the host's server then runs as this shell's
    would, on the same store, read the same way."""
    env = {"POCKETMEM_HOME": str(settings.home.absolute())}  # the host starts the server in another folder
    zone = settings.tz or machine_zone()
    if zone:
        env["POCKETMEM_TZ"] = zone
    if settings.user != "global":
        env["POCKETMEM_USER"] = settings.user
    left_out = [name for name in SECRETS if os.environ.get(name, "").strip()]
    for key, field in Settings.model_fields.items():
        name = ENV_PREFIX + key.upper()
        value = os.environ.get(name, "").strip()
        if not value or name in OWN or name in SECRETS or getattr(settings, key) == field.default:
            continue
        if mask_url(value) != value:
            left_out.append(name)
        elif name in PATHS and (name != "POCKETMEM_EMBED_MODEL" or Path(value).expanduser().exists()):
            env[name] = str(Path(value).expanduser().absolute())
        else:
            env[name] = value
    for name, value in env.items():
        _utf8(name, value)
    return env, left_out


def _utf8(name: str, value: str) -> None:
    """A host's config is JSON, text that cannot hold a path whose bytes are not UTF-8 (Python keeps such bytes as
    lone surrogates, which JSON would carry as a name of no folder): refused, naming the setting."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(value).decode("ascii", errors="backslashreplace")
        raise InvalidInput(name, f"is not UTF-8 text ({shown}), which a host's config file (JSON) cannot hold: "
                                 "rename that folder to a UTF-8 name, or set it to another") from None


def client_config(host: str, env: dict[str, str]) -> str:
    command, *args = server_command()
    if host == "claude-code":
        flags = [part for k, v in env.items() for part in ("-e", f"{k}={v}")]
        return shlex.join(["claude", "mcp", "add", "pocketmem", *flags, "--", command, *args])
    return json.dumps(host_file(host, env), indent=2, ensure_ascii=False)


def host_file(host: str, env: dict[str, str]) -> dict[str, Any]:
    """The host's config file holding the pocketmem entry alone: {"mcpServers": {...}}, or VS Code's
    {"servers": {...}}."""
    command, *args = server_command()
    entry: dict[str, Any] = {"command": command, "args": args, "env": env}
    if host == "vscode":
        return {"servers": {"pocketmem": {"type": "stdio", **entry}}}
    return {"mcpServers": {"pocketmem": entry}}


def merge_into(path: Path, host: str, env: dict[str, str]) -> tuple[Path, int]:
    """Write the pocketmem entry into the host's config file at `path` (a symbolic link's target), keeping every
    other server and setting there: the file is read, the entry put in its `mcpServers` (VS Code: `servers`) in
    place of any pocketmem entry before, and the whole written anew at once (atomic_write), with the file's mode.
    A file that is not a JSON object (JSON with comments too), or whose servers are not one, is refused and left
    as it was. The file written and how many other servers it keeps."""
    target = path.expanduser().resolve()
    (key, servers), = host_file(host, env).items()
    try:
        text = target.read_text(encoding="utf-8") if target.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput("--write", f"cannot read {target} ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise InvalidInput("--write", f"{target} is not plain JSON ({exc.msg} at line {exc.lineno}, column "
                           f"{exc.colno}); it is left as it was: fix it, or add the entry by hand") from None
    if not isinstance(data, dict) or not isinstance(data.get(key, {}), dict):
        raise InvalidInput("--write", f"{target} does not hold a JSON object with an object under {key!r}; it is "
                           "left as it was: add the entry by hand")
    others = [name for name in data.get(key, {}) if name != "pocketmem"]
    data[key] = {**data.get(key, {}), **servers}
    mode = target.stat().st_mode & 0o777 if target.exists() else None
    atomic_write(target, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    if mode is not None:
        target.chmod(mode)
    return target, len(others)


async def _client_config(settings: Settings, args: argparse.Namespace) -> int:
    env, left_out = host_env(settings)
    if args.write is None:
        print(client_config(args.host, env))
        merge = "" if args.host == "claude-code" else ", or merged into that file by --write FILE"
        print(f"# {HOSTS[args.host]}{merge}; then restart the host. Check with `pocketmem doctor`.", file=sys.stderr)
    elif args.host == "claude-code":
        raise InvalidInput("--write", "Claude Code keeps its servers itself: run the command client-config prints "
                           "without --write (claude mcp add ...)")
    else:
        written, others = merge_into(Path(args.write), args.host, env)
        kept = f", {others} other server{'s' if others != 1 else ''} kept" if others else ""
        print(f"# wrote the pocketmem entry into {written}{kept}; restart the host. Check with `pocketmem doctor`.",
              file=sys.stderr)
    where = "with -e NAME=VALUE in the command" if args.host == "claude-code" else 'in the entry\'s "env"'
    for name in left_out:
        key = SECRETS.get(name, name.removeprefix("POCKETMEM_").lower())
        print(f"# note: {name} is set here but left out because it holds a secret; add it yourself {where}, "
              f"or as {key} in {settings.home.absolute() / 'config.toml'}", file=sys.stderr)
    if not settings.tz and not machine_zone():
        given = f" (TZ={os.environ['TZ']} names no IANA zone)" if os.environ.get("TZ", "").strip() else ""
        print(f"# note: set POCKETMEM_TZ (e.g. Asia/Shanghai) in the entry: this machine's time zone is not known"
              f"{given}", file=sys.stderr)
    if os.name != "nt" and not shutil.which("pocketmem"):
        print("# note: `pocketmem` is not on PATH here; the entry uses the full path, which is all hosts need",
              file=sys.stderr)
    return 0


def add_install_commands(sub: Any) -> None:
    parser = sub.add_parser(
        "client-config",
        help="print the config that registers this pocketmem with Claude Desktop, Cursor, VS Code or Claude Code",
        description="Print the MCP server entry for a host, with the absolute path of this installation and "
        "the current POCKETMEM_HOME / POCKETMEM_TZ / POCKETMEM_USER and every other POCKETMEM_* setting set here "
        "that differs from its default (POCKETMEM_DB, POCKETMEM_EMBEDDER, POCKETMEM_SECRETS, ...; secrets are left "
        "out with a note), ready to paste into the host's config.",
        epilog="examples:\n  pocketmem client-config\n"
        "  pocketmem client-config --host vscode --write .vscode/mcp.json\n"
        "  pocketmem client-config --host cursor --write ~/.cursor/mcp.json\n"
        "  POCKETMEM_TZ=Asia/Shanghai pocketmem client-config --host claude-code",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", choices=tuple(HOSTS), default="claude-desktop",
                        help="which host's format (default claude-desktop; cursor uses the same)")
    parser.add_argument("--write", metavar="PATH",
                        help="merge the entry into the host's config file at PATH instead of printing it: the other "
                        "servers and settings there are kept, a pocketmem entry before is replaced, a file that is "
                        "not plain JSON is left as it was")
    parser.set_defaults(handler=_client_config)
