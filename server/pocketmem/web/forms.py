"""Posted forms: size-checked, and read as UTF-8 text strictly.

A field whose bytes are not UTF-8 text (`content=%ED%A0%80…`, `%FF%FE`, raw bytes) is refused naming the field
(InvalidInput, InvalidReason.not_text), as /mcp refuses such a body: Starlette's own parsers would store U+FFFD in
their place (url-encoded) or read them as Latin-1 (raw bytes, a multipart text part), and the page would save text
nobody sent. The url-encoded body (at most MAX_FORM_BYTES) is decoded here; a multipart form goes through
Starlette's parser, which keeps uploaded files on disk past 1 MB, with the text parts checked as they end.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request

from pocketmem.base.errors import InvalidInput, InvalidReason
from pocketmem.web.present import FormTooLarge

MAX_FORM_BYTES = 1_000_000
MAX_IMPORT_BYTES = 50_000_000
MAX_FIELDS = 1000  # Starlette's own limit


def form_limit(path: str) -> int:
    return MAX_IMPORT_BYTES if path.endswith("/import") else MAX_FORM_BYTES


class NotText(MultiPartException):
    """A multipart text part whose bytes are not text in the form's charset."""

    def __init__(self, field: str) -> None:
        super().__init__(f"{field}: is not UTF-8 text")
        self.field = field


class _TextParts(MultiPartParser):
    """Starlette's multipart parser, except that a text part that does not decode is refused (NotText, its files
    closed as for any malformed form) where Starlette would read its bytes as Latin-1."""

    def on_part_end(self) -> None:
        part = self._current_part
        if part.file is None:
            try:
                bytes(part.data).decode(self._charset)
            except (UnicodeDecodeError, LookupError):
                raise NotText(part.field_name) from None
        super().on_part_end()


async def form_of(request: Request) -> dict[str, str | UploadFile]:
    """The posted form, read once per request (kept on `request.state`, closed by `close_form`). A declared length
    over the limit is refused before anything is read, and the page's BodyLimit counts what arrives."""
    form = getattr(request.state, "form", None)
    if form is None:
        limit = form_limit(request.url.path)
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise FormTooLarge(limit)
        form = request.state.form = await _parse(request, limit)
    return dict(form.multi_items())


async def close_form(request: Request) -> None:
    """Close the files of the request's form (an upload kept on disk), once it is answered."""
    form = getattr(request.state, "form", None)
    if form is not None:
        await form.close()


async def _parse(request: Request, limit: int) -> FormData:
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        return FormData(url_fields(await request.body()))
    if kind != "multipart/form-data":
        return FormData()
    try:
        return await _TextParts(request.headers, request.stream(), max_fields=MAX_FIELDS, max_part_size=limit).parse()
    except NotText as exc:
        raise not_text(exc.field) from None
    except MultiPartException as exc:  # malformed multipart, too many fields: said as the page says a bad form
        raise InvalidInput("form", exc.message) from None


def url_fields(body: bytes) -> list[tuple[str, str | UploadFile]]:
    """The fields of an application/x-www-form-urlencoded body (WHATWG: `&`-separated, `+` a space, %XX a byte),
    each name and value UTF-8 text or refused naming its field."""
    pairs = [pair for pair in body.split(b"&") if pair]
    if len(pairs) > MAX_FIELDS:
        raise InvalidInput("form", f"has more than {MAX_FIELDS} fields")
    fields: list[tuple[str, str | UploadFile]] = []
    for pair in pairs:
        name, _, value = pair.partition(b"=")
        field = _decoded(name, "form")
        fields.append((field, _decoded(value, field)))
    return fields


def _decoded(raw: bytes, field: str) -> str:
    try:
        return unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        raise not_text(field) from None


def not_text(field: str) -> InvalidInput:
    return InvalidInput(field, "is not UTF-8 text: it holds bytes that are no character; send the text as UTF-8",
                        InvalidReason.not_text)
