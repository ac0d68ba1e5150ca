"""The management page as an ASGI app: `build_web_app(pm, access)`, mounted under /ui.

Server-rendered (Jinja2), every view a plain page with links and forms that work without
JavaScript; the vendored htmx (static/htmx.min.js, 0BSD licence beside it) only makes navigation
smoother and refreshes an open list when the event log moves (polling /live every few seconds,
which also sees writes made by another process, e.g. the agent's stdio server on the same file).
Every change is a POST with a CSRF token, answered by a redirect back (post/redirect/get).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pocketmem.app import PocketMem
from pocketmem.base.errors import Conflict, InvalidInput, NotFound, PocketmemError, StoreUnavailable
from pocketmem.core.shown_time import absolute
from pocketmem.service.manage.tokens import RETRY_AFTER_SECONDS
from pocketmem.web.access import COOKIE, Visitor, WebAccess
from pocketmem.web.forms import close_form, form_limit, form_of
from pocketmem.web.i18n import MESSAGES, pick_locale, translator
from pocketmem.web.present import FormTooLarge, error_text, moment, percent, review_why

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
POLL_SECONDS = 3

Handler = Callable[[Request, "Page"], Awaitable[Response]]


def page_locale(request: Request) -> str:
    """The page's language: ?lang= or the browser's Accept-Language (web/i18n.py)."""
    return pick_locale(request.headers.get("accept-language"), request.query_params.get("lang"))


def refusal(request: Request, key: str, status_code: int) -> Response:
    """A refusal given before there is a page to render (a wrong host, a change without a session): one line of
    plain text, in the page's language."""
    locale = page_locale(request)
    return PlainTextResponse(translator(locale)(key), status_code=status_code, headers={"Content-Language": locale})


def page_refusal(scope: Scope, status: int) -> Response:
    """HeaderGuard's answer on the page's paths: 421 for a Host this server does not answer to (DNS rebinding),
    403 for an Origin that is not this server, in the page's language (mcp/http.py, the same checks as /mcp)."""
    return refusal(Request(scope), "refused.host" if status == 421 else "refused.origin", status)


class BodyLimit:
    """Counts a request's body as it is received and stops reading it one byte past the form's limit
    (FormTooLarge, shown as the page's 413), whether or not a Content-Length was sent: a chunked body has none."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = form_limit(scope["path"])
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise FormTooLarge(limit)
            return message

        await self.app(scope, counted, send)


class Page:
    """What a handler gets besides the request: the visitor, the app, and a renderer in their language."""

    def __init__(self, web: WebUI, request: Request, visitor: Visitor) -> None:
        self.web = web
        self.request = request
        self.visitor = visitor
        self.pm = web.pm
        self.user = visitor.user_id
        self.locale = page_locale(request)
        self.t = translator(self.locale)
        self.base = request.scope.get("root_path", "").rstrip("/")
        self.now = self.pm.clock.now()

    def ago(self, value: Any) -> Markup:
        return moment(value, self.now, self.pm.settings.zone, self.locale)

    def due(self, value: Any) -> Markup:
        return moment(value, self.now, self.pm.settings.zone, self.locale, due=True)

    def render(self, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        html = self.web.env.get_template(template).render(
            t=self.t, locale=self.locale, base=self.base, visitor=self.visitor, csrf=self.visitor.csrf,
            request=self.request, zone=self.pm.settings.zone, poll=POLL_SECONDS,
            msg=_known_message(self.request.query_params.get("msg")), ago=self.ago, due=self.due,
            review_why=lambda why: review_why(why, self.t), **context,
        )
        headers = dict(_NO_STORE)
        if self.request.method == "POST":  # a page answering a form is no address to come back to (htmx history)
            headers["HX-Push-Url"] = "false"
        return HTMLResponse(html, status_code=status_code, headers=headers)

    def status_of(self, exc: PocketmemError) -> int:
        """The status for the error's kind (500 for one the page does not expect, logged)."""
        status = next((code for cls, code in _STATUS.items() if isinstance(exc, cls)), 500)
        if status == 500:
            log.warning("web: %s failed", self.request.url.path, exc_info=True)
        return status

    def say(self, exc: PocketmemError) -> Markup:
        """What the page says of a refused request, in its language (web/present.py)."""
        return error_text(exc, self.t, self.locale, self.pm.settings.zone)

    def failed(self, exc: PocketmemError) -> HTMLResponse:
        """The error page for a refused request: the status for the error's kind, the message in the page's language."""
        return self.render("error.html", status_code=self.status_of(exc), message=self.say(exc))

    def store_down(self, template: str = "error.html") -> HTMLResponse:
        """503 with Retry-After: the store cannot say who the visitor is (down, unreadable). Not the sign-in form:
        nothing is known against the session or the token, and asking for it would send the person to fix them."""
        text = self.t("error.store_down")
        response = self.render(template, status_code=503, message=text, error=text)
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response

    def back(self, path: str, msg: str | None = None) -> RedirectResponse:
        url = f"{self.base}{path}"
        if msg:
            url += ("&" if "?" in url else "?") + f"msg={msg}"
        return RedirectResponse(url, status_code=303)


_NO_STORE = {"Cache-Control": "no-store", "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin",
             "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
             "frame-ancestors 'none'; form-action 'self'"}
_STATUS = {FormTooLarge: 413, InvalidInput: 400, NotFound: 404, Conflict: 409}  # the first that fits


class WebUI:
    def __init__(self, pm: PocketMem, access: WebAccess) -> None:
        self.pm = pm
        self.access = access
        self.env = Environment(
            loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
            trim_blocks=True, lstrip_blocks=True,
        )
        self.env.filters["when"] = lambda value, zone: "—" if value is None else Markup(
            '<time datetime="{}">{}</time>'  # a <time> stays on one line (style.css)
        ).format(value.isoformat(), absolute(value, zone))
        self.env.filters["pct"] = percent
        self.env.filters["num"] = lambda v, d=3: f"{v:.{d}f}".rstrip("0").rstrip(".") if v is not None else "—"

    def page(self, handler: Handler, *, change: bool = False) -> Callable[[Request], Awaitable[Response]]:
        """Wrap a handler with the access rules: visitor, CSRF on changes, errors as pages (Host and Origin are
        HeaderGuard's, around the whole page)."""

        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            try:
                visitor = await self.access.visitor(request.cookies.get(COOKIE))
            except StoreUnavailable:
                if request.headers.get("hx-trigger") == "live":  # the background poll: keep the page, poll again
                    return Response(status_code=204, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
                return Page(self, request, Visitor(user_id="", csrf="")).store_down()
            if visitor is None:
                return _to_sign_in(request, change)
            return await self.answer(request, Page(self, request, visitor), handler, change=change)

        return endpoint

    async def answer(self, request: Request, page: Page, handler: Handler, *, change: bool = False) -> Response:
        """The handler's response, a refused change's or an error's page; an uploaded file is closed after it."""
        try:
            if change and not self.access.csrf_ok(page.visitor, await _csrf_sent(request)):
                return page.render("error.html", status_code=403, message=page.t("error.csrf"))
            return await handler(request, page)
        except PocketmemError as exc:
            return page.failed(exc)
        finally:
            await close_form(request)


def _to_sign_in(request: Request, change: bool) -> Response:
    """No session: a change is refused with 401, whoever sends it (htmx follows the HX-Redirect it carries to the
    sign-in form); a view redirects there, a polled fragment sends the whole page there."""
    to_login = {"HX-Redirect": f"{request.scope.get('root_path', '').rstrip('/')}/login"}
    htmx = bool(request.headers.get("hx-request"))
    if change:
        refused = refusal(request, "refused.sign_in", 401)
        refused.headers.update(to_login if htmx else {})
        return refused
    if htmx:
        return Response(status_code=200, headers=to_login)
    return RedirectResponse(to_login["HX-Redirect"], status_code=303)


async def _csrf_sent(request: Request) -> str | None:
    sent = request.headers.get("x-csrf-token")
    if sent is None:
        value = (await form_of(request)).get("csrf")
        sent = value if isinstance(value, str) else None
    return sent


def _known_message(key: str | None) -> str | None:
    return key if key is not None and f"done.{key}" in MESSAGES else None


def build_web_app(pm: PocketMem, access: WebAccess) -> Starlette:
    """The page's ASGI app; `pm` must be open while it serves."""
    from pocketmem.web import views

    web = WebUI(pm, access)
    routes: list[BaseRoute] = [Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static")]
    for path, handler, methods in views.ROUTES:
        if handler in views.PUBLIC:
            routes.append(Route(path, views.public(web, handler), methods=methods))
        else:
            routes.append(Route(path, web.page(handler, change="POST" in methods), methods=methods))

    async def no_route(request: Request, exc: Exception) -> Response:
        """A path the page does not have (404), or a method its path does not take (405: a form's address opened
        as a page): the page's own error page in its language, not Starlette's plain English."""
        assert isinstance(exc, HTTPException)
        page = Page(web, request, Visitor(user_id="", csrf=""))
        allowed = (exc.headers or {}).get("Allow", "")
        if exc.status_code == 404:
            message = page.t("error.no_page")
        elif request.method == "GET" and "POST" in allowed:
            message = page.t("error.method")
        else:
            message = page.t("error.method_other", method=request.method)
        response = page.render("error.html", status_code=exc.status_code, message=message)
        response.headers.update(exc.headers or {})
        return response

    return Starlette(routes=routes, middleware=[Middleware(BodyLimit)],
                     exception_handlers={404: no_route, 405: no_route})
