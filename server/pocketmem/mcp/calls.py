"""Every tool call, as the server sees it: one INFO log line (tool, user, outcome, milliseconds), argument
errors in plain words ("category must be one of: …"), never the validation library's text, an argument the tool
does not take refused by name (`refuse_unknown_arguments`), and a structured result's text block as compact
JSON (`compact_text`).

Tool arguments and memory text reach the log only with POCKETMEM_LOG_CONTENT=1 (at DEBUG).
"""

from __future__ import annotations

import difflib
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

from pocketmem.base.errors import choices_of

log = logging.getLogger("pocketmem.calls")


def plain_errors(exc: ValidationError) -> str:
    """One sentence per bad argument: the field, then the rule it broke."""
    lines = []
    for err in exc.errors(include_url=False):
        field = ".".join(str(part) for part in err["loc"]) or "arguments"
        lines.append(f"{field} {_rule(err)}")
    return "invalid arguments: " + "; ".join(dict.fromkeys(lines))


def _rule(err: Any) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind in ("enum", "literal_error"):
        choices = choices_of(ctx.get("expected", ""))
        return "must be one of: " + ", ".join(choices) if choices else "has a value that is not allowed"
    limit = next((ctx[k] for k in ("ge", "gt", "le", "lt", "min_length", "max_length") if k in ctx), None)
    rules = {
        "missing": "is required",
        "missing_argument": "is required",
        "unexpected_keyword_argument": "is not an argument of this tool",
        "extra_forbidden": "is not an argument of this tool",
        "string_too_short": "must not be empty" if limit == 1 else f"must be at least {limit} characters",
        "string_too_long": f"must be at most {limit} characters",
        "too_short": f"needs at least {limit} items",
        "too_long": f"takes at most {limit} items",
        "greater_than_equal": f"must be at least {limit}",
        "greater_than": f"must be more than {limit}",
        "less_than_equal": f"must be at most {limit}",
        "less_than": f"must be less than {limit}",
        "int_parsing": "must be a whole number",
        "int_type": "must be a whole number",
        "int_from_float": "must be a whole number",
        "float_parsing": "must be a number",
        "float_type": "must be a number",
        "finite_number": "must be a finite number",
        "bool_parsing": "must be true or false",
        "bool_type": "must be true or false",
        "string_type": "must be text",
        "list_type": "must be a list",
        "dict_type": "must be an object",
        "model_type": "must be an object",
        "model_attributes_type": "must be an object",
        "datetime_parsing": "must be an ISO 8601 date or time, e.g. 2026-11-28 or 2026-11-28T18:00+08:00",
        "datetime_from_date_parsing": "must be an ISO 8601 date or time, e.g. 2026-11-28 or 2026-11-28T18:00+08:00",
        "datetime_type": "must be an ISO 8601 date or time, e.g. 2026-11-28 or 2026-11-28T18:00+08:00",
    }
    return rules.get(kind) or str(err.get("msg", "is not valid")).rstrip(".").lower()


class PocketMCPServer(MCPServer):
    """MCPServer that logs each tool call and words argument errors plainly."""

    def __init__(self, *args: Any, current_user: Callable[[], str], log_content: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._current_user = current_user
        self._log_content = log_content

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        started = time.perf_counter()
        outcome = "invalid"
        if self._log_content:
            log.debug("tool %s arguments: %r", name, arguments)
        try:
            refuse_unknown_arguments(arguments, self._tool_input_schema(name))
            outcome = "error"
            result = await super().call_tool(name, arguments, context)
            outcome = "error" if getattr(result, "is_error", False) else "ok"
            return compact_text(result)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                outcome = "invalid"
                raise ToolError(plain_errors(exc.__cause__)) from exc.__cause__
            raise
        finally:
            ms = (time.perf_counter() - started) * 1000
            log.info("tool %s user=%s outcome=%s ms=%.1f", name, self._user(), outcome, ms)

    def _user(self) -> str:
        try:
            return self._current_user()
        except Exception:  # noqa: BLE001 - a log line never fails a call
            return "?"

    async def list_tools(self) -> list[Any]:
        """The tools with lean schemas: hosts send them with every model request (bench/tool_sizes.py)."""
        return [
            tool.model_copy(update={
                "input_schema": inline_definitions(lean_schema(tool.input_schema, optional=True)),
                "output_schema": lean_schema(tool.output_schema) if tool.output_schema else None,
            })
            for tool in await super().list_tools()
        ]


def refuse_unknown_arguments(arguments: dict[str, Any], schema: dict[str, Any] | None) -> None:
    """A name the tool does not take is an error naming it, with the closest one it does take: a misspelled
    `temporay: true` must not store what was meant to stay off the record."""
    known = list((schema or {}).get("properties", {}))
    unknown = [name for name in arguments if name not in known]
    if schema is None or not unknown:
        return
    lines = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        lines.append(f"{name} is not an argument of this tool" + (f" (did you mean {close[0]}?)" if close else ""))
    raise ToolError("invalid arguments: " + "; ".join(lines))


def compact_text(result: Any) -> Any:
    """A structured result's text block as the same JSON without indentation. Most hosts give the model the
    text block, not `structuredContent`, on every turn; the SDK writes it indented, a quarter of its
    characters spaces and line breaks (bench/tool_sizes.py, *Results*)."""
    if not isinstance(result, CallToolResult) or result.structured_content is None or result.is_error:
        return result
    text = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
    return result.model_copy(update={"content": [TextContent(type="text", text=text)]})


def inline_definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """Each `$defs` entry used once written in place of its `$ref` (pydantic names every model and enum)."""
    definitions = schema.get("$defs", {})
    refs = [f"#/$defs/{name}" for name in definitions]
    uses = {ref: json.dumps(schema).count(f'"{ref}"') for ref in refs}

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if ref in uses and uses[ref] == 1:
            rest = {key: value for key, value in node.items() if key != "$ref"}
            return {**inline(definitions[ref.rsplit("/", 1)[1]]), **rest}
        return {key: inline(value) for key, value in node.items() if key != "$defs"}

    kept = {name: inline(value) for name, value in definitions.items() if uses[f"#/$defs/{name}"] > 1}
    out = inline(schema)
    return {**out, "$defs": kept} if kept else out


def lean_schema(node: Any, optional: bool = False) -> Any:
    """A JSON schema without what tells a client nothing: pydantic's generated titles ("Created At") and, for
    arguments (`optional`), the `anyOf [..., null]` + `default: null` of an argument one simply leaves out.
    Validation is pydantic's on the server side and accepts null as before."""
    if isinstance(node, list):
        return [lean_schema(item, optional) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: {name: lean_schema(sub, optional) for name, sub in value.items()}
        if key in ("properties", "$defs") else lean_schema(value, optional)
        for key, value in node.items() if key != "title"
    }
    options = out.get("anyOf")
    if optional and "default" in out and out["default"] is None and isinstance(options, list) and len(options) == 2:
        rest = [option for option in options if option != {"type": "null"}]
        if len(rest) == 1:
            del out["anyOf"], out["default"]
            out = {**rest[0], **out}
    return out
