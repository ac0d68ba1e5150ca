"""The memory management page (`pocketmem ui`, `pocketmem serve --transport http --ui`): a surface beside mcp/,
calling the app's services only."""

from pocketmem.web.access import WebAccess
from pocketmem.web.app import build_web_app

__all__ = ["WebAccess", "build_web_app"]
