"""The page's views and actions. Each calls one service (through PocketMem) and renders or redirects."""

from __future__ import annotations

import io
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal, cast

from markupsafe import Markup
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from pocketmem.base.errors import Conflict, InvalidInput, InvalidReason, StoreUnavailable, invalid_from
from pocketmem.base.models import Category
from pocketmem.core.profile_text import SECTIONS
from pocketmem.service.manage.browse import BrowseQuery
from pocketmem.service.manage.curation import SCORE_NAMES
from pocketmem.service.transfer.import_file import file_lines
from pocketmem.web import charts
from pocketmem.web.access import COOKIE, SESSION_DAYS, Visitor
from pocketmem.web.app import POLL_SECONDS, Page, WebUI
from pocketmem.web.forms import form_of
from pocketmem.web.i18n import MESSAGES
from pocketmem.web.present import History, discarded, refused_text

PAGE_SIZES = (20, 50, 100, 200)
TRASH_PAGE = 100
PENDING_PAGE = 100
BROWSE_FIELDS = tuple(BrowseQuery.model_fields)
PROFILE_FIELDS = {section: tuple(fd.key for fd in fields) for section, fields in SECTIONS.items()}


# -- helpers ----------------------------------------------------------------------------------------
def browse_query(params: dict[str, str]) -> BrowseQuery:
    values = {k: v for k, v in params.items() if k in BROWSE_FIELDS and v != ""}
    try:
        return BrowseQuery.model_validate(values)
    except ValidationError as exc:
        raise invalid_from(exc) from None


def _text(form: dict[str, str | UploadFile], name: str) -> str | None:
    value = form.get(name)
    if isinstance(value, UploadFile):
        raise InvalidInput(name, "must be text, not a file")
    return value


async def _field(request: Request, name: str, *, required: bool = True) -> str | None:
    value = _text(await form_of(request), name)
    if (value is None or value == "") and required:
        raise InvalidInput(name, "is required", InvalidReason.missing)
    return value or None


def _unit(value: str | None, name: str) -> float | None:
    if value is None or value.strip() == "":
        return None
    try:
        number = float(value)
    except ValueError:
        raise InvalidInput(f"scores.{name}", "must be a number between 0 and 1", InvalidReason.number) from None
    return number


def _offset(request: Request, size: int) -> tuple[int, int]:
    raw = request.query_params.get("page", "1")
    if not raw.isdigit() or int(raw) < 1:
        raise InvalidInput("page", "must be a whole number from 1")
    page = int(raw)
    return page, (page - 1) * size


# -- public: sign in / out ----------------------------------------------------------------------------
async def login(request: Request, page: Page) -> Response:
    if request.method == "GET":
        return page.render("login.html")
    token = await _field(request, "token", required=False) or ""
    try:
        visitor = await page.web.access.sign_in(token)
    except StoreUnavailable:
        return page.store_down("login.html")
    if visitor is None:
        return page.render("login.html", status_code=401, error=page.t("sign_in.bad"))
    response = RedirectResponse(f"{page.base}/memories", status_code=303)
    response.set_cookie(
        COOKIE, visitor.session_id or "", max_age=SESSION_DAYS * 86400, path=page.base or "/", httponly=True,
        samesite="strict", secure=page.web.access.cookie_secure(request.url.scheme, request.headers.get("host")),
    )
    return response


async def logout(request: Request, page: Page) -> Response:
    """Ends the session on the server (a copy of the cookie held elsewhere is refused from now on), then deletes it."""
    try:
        await page.web.access.sign_out(request.cookies.get(COOKIE))
    except StoreUnavailable:
        return page.store_down()
    response = RedirectResponse(f"{page.base}/login", status_code=303)
    response.delete_cookie(COOKIE, path=page.base or "/")
    return response


PUBLIC = {login, logout}


def public(
    web: WebUI, handler: Callable[[Request, Page], Awaitable[Response]]
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return await web.answer(request, Page(web, request, Visitor(user_id="", csrf="")), handler)

    return endpoint


# -- memories -----------------------------------------------------------------------------------------
async def home(request: Request, page: Page) -> Response:
    return RedirectResponse(f"{page.base}/memories", status_code=303)


async def memories(request: Request, page: Page) -> Response:
    params = dict(request.query_params)
    query = browse_query(params)
    result = await page.pm.browse.page(page.user, query)
    kept = {k: v for k, v in params.items() if k in BROWSE_FIELDS and k != "page" and v != ""}
    template = "_rows.html" if request.headers.get("hx-target") == "rows" else "memories.html"
    return page.render(
        template, query=query, result=result, params=kept, categories=list(Category), sizes=PAGE_SIZES,
        latest=await page.pm.browse.latest_event_id(page.user),
    )


async def _memory_page(
    page: Page, memory_id: str, status_code: int = 200, failed: Markup | str | None = None, draft: str | None = None
) -> Response:
    """One memory; after a refused edit, with `failed` (what was refused, said in the page's language) and `draft`
    (the person's text, put back in the form they sent it from)."""
    detail = await page.pm.browse.detail(page.user, memory_id)
    history = History(page.t, page.ago, page.now, detail, page.base)
    return page.render("memory.html", status_code=status_code, d=detail, categories=list(Category),
                       score_names=SCORE_NAMES, event_sentence=history.sentence, failed=failed, draft=draft)


async def _refused_edit(page: Page, memory_id: str, exc: InvalidInput | Conflict, text: str) -> Response:
    """The memory again, with why the edit or patch was refused and the person's text still in its form (not a
    text refused for the secret in it)."""
    secret = isinstance(exc, InvalidInput) and exc.reason == InvalidReason.secret
    return await _memory_page(page, memory_id, page.status_of(exc), page.say(exc), None if secret else text)


async def memory(request: Request, page: Page) -> Response:
    return await _memory_page(page, request.path_params["memory_id"])


async def revise(request: Request, page: Page) -> Response:
    """A new version; the page says what really happened: saved, nothing to save, already said by another memory,
    waiting for confirmation, or not stored (a secret, temporary mode) and why."""
    memory_id = request.path_params["memory_id"]
    content = ""
    try:
        content = await _field(request, "content") or ""
        result = await page.pm.curation.revise(page.user, memory_id, content)
    except (InvalidInput, Conflict) as exc:
        return await _refused_edit(page, memory_id, exc, content)
    added = result.added
    if added is None:
        return page.back(f"/memories/{memory_id}", "edit_unchanged")
    if added.status == "discarded":  # the text is not kept in the form: it may be the secret it was refused for
        return await _memory_page(page, memory_id, 400, failed=discarded(added, page.t, page.locale))
    if added.status == "pending":
        return page.back("/pending", "edit_pending")
    shown = f"/memories/{added.memory_id or memory_id}"
    if added.status == "duplicate":
        return page.back(shown, "edit_duplicate")
    return page.back(shown, "redacted" if added.redacted else "saved")


async def patch(request: Request, page: Page) -> Response:
    memory_id = request.path_params["memory_id"]
    text = ""
    try:
        text = await _field(request, "patch") or ""
        mode = await _field(request, "mode")
        if mode not in ("append", "replace"):
            raise InvalidInput("mode", "must be append or replace")
        result = await page.pm.patching.patch_core(
            page.user, memory_id, text, cast(Literal["append", "replace"], mode),
            await _field(request, "reason", required=False),
        )
    except (InvalidInput, Conflict) as exc:
        return await _refused_edit(page, memory_id, exc, text)
    if result.status == "unchanged":
        return page.back(f"/memories/{memory_id}", "patch_unchanged")
    return page.back(f"/memories/{memory_id}", "redacted" if result.redacted else "saved")


async def rescore(request: Request, page: Page) -> Response:
    memory_id = request.path_params["memory_id"]
    raw_category = await _field(request, "category", required=False)
    try:
        category = Category(raw_category) if raw_category else None
    except ValueError:
        choices = [c.value for c in Category]
        raise InvalidInput("category", f"must be one of {', '.join(choices)}", InvalidReason.one_of,
                           choices=choices) from None
    scores = {name: _unit(await _field(request, name, required=False), name) for name in SCORE_NAMES}
    await page.pm.curation.rescore(page.user, memory_id, category, scores)
    return page.back(f"/memories/{memory_id}", "saved")


async def todo(request: Request, page: Page) -> Response:
    memory_id = request.path_params["memory_id"]
    done = await _field(request, "done")
    if done not in ("1", "0"):
        raise InvalidInput("done", "must be 1 (complete) or 0 (reopen)")
    await page.pm.todos.set_done(page.user, memory_id, done == "1")
    back = await _field(request, "back", required=False)
    return page.back("/todos" if back == "todos" else f"/memories/{memory_id}", "saved")


async def forget(request: Request, page: Page) -> Response:
    memory_id = request.path_params["memory_id"]
    await page.pm.trash.forget(page.user, memory_id, await _field(request, "reason", required=False))
    return page.back(f"/memories/{memory_id}", "forgotten")


# -- trash, pending, review, todos ---------------------------------------------------------------------
async def trash(request: Request, page: Page) -> Response:
    number, offset = _offset(request, TRASH_PAGE)
    listing = await page.pm.trash.list_trash(page.user, TRASH_PAGE, offset)
    return page.render(
        "trash.html", listing=listing, number=number, pages=max(1, -(-listing.total // TRASH_PAGE)),
        live_view=True, latest=await page.pm.browse.latest_event_id(page.user),
    )


async def restore(request: Request, page: Page) -> Response:
    memory_id = request.path_params["memory_id"]
    await page.pm.trash.restore(page.user, memory_id)
    return page.back("/trash", "restored")


async def pending(request: Request, page: Page) -> Response:
    number, offset = _offset(request, PENDING_PAGE)
    listing = await page.pm.listing.list_memories(
        page.user, category=None, status="pending", text=None, limit=PENDING_PAGE, offset=offset
    )
    return page.render(
        "pending.html", listing=listing, number=number, pages=max(1, -(-listing.total // PENDING_PAGE)),
        live_view=True, latest=await page.pm.browse.latest_event_id(page.user),
    )


async def decide_pending(request: Request, page: Page) -> Response:
    action = await _field(request, "action")
    if action not in ("confirm", "reject", "snooze"):
        raise InvalidInput("action", "must be confirm, reject or snooze")
    await page.pm.pending.confirm_pending(  # a proposed profile change is applied, anything else stored
        page.user, request.path_params["pending_id"], cast(Literal["confirm", "reject", "snooze"], action), None
    )
    return page.back("/pending", {"confirm": "confirmed", "reject": "rejected", "snooze": "snoozed"}[action])


async def review(request: Request, page: Page) -> Response:
    return page.render("review.html", queue=await page.pm.review.queue(page.user))


async def decide_review(request: Request, page: Page) -> Response:
    decision = await _field(request, "decision")
    if decision not in ("promote", "keep", "forget"):
        raise InvalidInput("decision", "must be promote, keep or forget")
    await page.pm.review.decide(
        page.user, request.path_params["memory_id"], cast(Literal["promote", "keep", "forget"], decision), "ui"
    )
    return page.back("/review", "reviewed")


async def todos(request: Request, page: Page) -> Response:
    return page.render(
        "todos.html", overview=await page.pm.browse.todos(page.user),
        live_view=True, latest=await page.pm.browse.latest_event_id(page.user),
    )


# -- insights, profile, transfer, live -----------------------------------------------------------------
async def insights(request: Request, page: Page) -> Response:
    data = await page.pm.browse.insights(page.user)
    today = data.today
    evict_below = max((m.importance for m in data.next_evicted), default=None)
    t = page.t

    def name(key: str) -> str:  # a category or an event kind, in the page's language
        return t(f"category.{key}") if f"category.{key}" in MESSAGES else t(f"chart.{key}")

    pictures = {
        "created": charts.stacked_days(
            [(c.day, c.key, c.count) for c in data.created], charts.day_range(today, 90), t("insights.created"), name
        ),
        "recalls": charts.stacked_days(
            [(c.day, c.key, c.count) for c in data.recalls], charts.day_range(today, 30), t("insights.recalls"), name,
            ("recalled", "used"),
        ),
        "importance": charts.histogram(data.histogram, t("insights.importance"),
                                       (t("chart.evicted_first"), t("chart.kept")), evict_below),
        "cap": charts.gauge(data.active_non_core, data.max_active,
                            t("insights.cap", n=data.active_non_core, cap=data.max_active, core=data.core),
                            (t("chart.used_places"), t("chart.free_places"))),
    }
    stats = await page.pm.stats(page.user)
    return page.render("insights.html", data=data, pictures=pictures, stats=stats)


async def health(request: Request, page: Page) -> Response:
    report = await page.pm.doctor()
    store = report["store"]
    checks = {
        "integrity": store.get("integrity") == "ok",
        "vectors": bool(store.get("vectors_available")),
        "indexes": not (
            store.get("keyword_orphans") or store.get("keyword_gaps") or store.get("vector_mismatches")
            or store.get("count_mismatches")
        ),
        "schema": bool(store.get("schema_current")),
        "embedder": bool(report["embedder"]["ok"]),
    }
    size = None
    settings = page.pm.settings
    if settings.database_url is None and settings.db_path.exists():
        size = sum(p.stat().st_size for p in settings.db_path.parent.glob(settings.db_path.name + "*"))
    return page.render("health.html", checks=checks, size=size, ok=all(checks.values()))


async def profile(request: Request, page: Page) -> Response:
    """The profile layer as the MCP resources show it (mcp/profile_resources.py), plus the edit form."""
    user = page.user
    await page.pm.profile_files.check(user)  # a person's edit of Persona.md / User.md shows at once
    return page.render(
        "profile.html", profile=await page.pm.profile.view(user), fields=PROFILE_FIELDS,
        card=await page.pm.user_card(user), project=await page.pm.profile.render_project(user),
        insights=await page.pm.profile.render_insights(user),
    )


def _profile_section(form: dict[str, str | UploadFile], section: str) -> dict[str, str | None]:
    """A section's fields from the form: a field not sent is kept (None), an emptied one ("") is removed; other
    names are not the profile's and change nothing."""
    return {key: _text(form, f"{section}.{key}") for key in PROFILE_FIELDS[section]}


async def update_profile(request: Request, page: Page) -> Response:
    """The person edits their own profile: while it is unconfirmed it is saved (and confirmed when they tick the
    box); once confirmed, the change waits on the Pending tab like any other change (app.profile.update)."""
    form = await form_of(request)
    result = await page.pm.profile.update(
        page.user, _profile_section(form, "persona"), _profile_section(form, "identity"),
        confirmed=form.get("confirm") == "1", by_person=True,
    )
    if result.status == "pending":
        return page.back("/profile", "profile_pending")
    if result.status == "unchanged":
        return page.back("/profile", "unchanged")
    if result.redacted:
        return page.back("/profile", "redacted")
    return page.back("/profile", "profile_confirmed" if result.profile.identity_confirmed else "saved")


async def transfer(request: Request, page: Page) -> Response:
    return page.render("transfer.html", report=None)


async def export_jsonl(request: Request, page: Page) -> Response:
    buffer = io.StringIO()
    await page.pm.exporter.export(buffer, [page.user])
    return Response(
        buffer.getvalue(), media_type="application/x-ndjson; charset=utf-8",
        headers={"Content-Disposition": 'attachment; filename="pocketmem-export.jsonl"', "Cache-Control": "no-store"},
    )


async def export_markdown(request: Request, page: Page) -> Response:
    with tempfile.TemporaryDirectory(prefix="pocketmem-md-") as folder:
        written = await page.pm.profile_files.export_markdown(page.user, Path(folder))
        text = "\n\n".join(path.read_text(encoding="utf-8") for path in written)
    return Response(
        text, media_type="text/markdown; charset=utf-8",
        headers={"Content-Disposition": 'attachment; filename="User.md"', "Cache-Control": "no-store"},
    )


async def import_file(request: Request, page: Page) -> Response:
    """The upload is read a line at a time from where the form parser put it (a file on disk past 1 MB), by the
    rules of `pocketmem import` (import_file.file_lines)."""
    upload = (await form_of(request)).get("file")
    if not isinstance(upload, UploadFile) or not upload.size:
        raise InvalidInput("file", "choose a pocketmem export file (JSONL)")
    report = await page.pm.exporter.import_lines(file_lines(upload.file, "file"), only_user=page.user)
    refused = [refused_text(item, page.t, page.locale, page.pm.settings.zone) for item in report.refused]
    return page.render("transfer.html", report=report, refused=refused)


async def live(request: Request, page: Page) -> Response:
    """Polled by an open page: 200 with an HX-Trigger when the user's event log moved past `after`."""
    raw = request.query_params.get("after", "0")
    after = int(raw) if raw.isdigit() else 0
    latest = await page.pm.browse.latest_event_id(page.user)
    html = page.web.env.get_template("_live.html").render(
        base=page.base, latest=latest, changed=latest > after, t=page.t, poll=POLL_SECONDS
    )
    headers: dict[str, Any] = {"Cache-Control": "no-store"}
    if latest > after:
        headers["HX-Trigger"] = "pm-changed"
    return HTMLResponse(html, headers=headers)


ROUTES: list[tuple[str, Callable[[Request, Page], Awaitable[Response]], list[str]]] = [
    ("/", home, ["GET"]),
    ("/login", login, ["GET", "POST"]),
    ("/logout", logout, ["POST"]),
    ("/memories", memories, ["GET"]),
    ("/memories/{memory_id}", memory, ["GET"]),
    ("/memories/{memory_id}/revise", revise, ["POST"]),
    ("/memories/{memory_id}/patch", patch, ["POST"]),
    ("/memories/{memory_id}/rescore", rescore, ["POST"]),
    ("/memories/{memory_id}/todo", todo, ["POST"]),
    ("/memories/{memory_id}/forget", forget, ["POST"]),
    ("/trash", trash, ["GET"]),
    ("/trash/{memory_id}/restore", restore, ["POST"]),
    ("/pending", pending, ["GET"]),
    ("/pending/{pending_id}", decide_pending, ["POST"]),
    ("/review", review, ["GET"]),
    ("/review/{memory_id}", decide_review, ["POST"]),
    ("/todos", todos, ["GET"]),
    ("/insights", insights, ["GET"]),
    ("/insights/health", health, ["GET"]),
    ("/profile", profile, ["GET"]),
    ("/profile", update_profile, ["POST"]),
    ("/transfer", transfer, ["GET"]),
    ("/export.jsonl", export_jsonl, ["GET"]),
    ("/export.md", export_markdown, ["GET"]),
    ("/import", import_file, ["POST"]),
    ("/live", live, ["GET"]),
]
