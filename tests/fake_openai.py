"""A local fake of the OpenAI HTTP API, for tests: stdlib only, no network.

    with FakeOpenAI() as fake:
        embedder = OpenAICompatibleEmbedder("m", base_url=fake.base_url, api_key="sk-test")
        ...
        assert fake.requests[0].headers["authorization"] == "Bearer sk-test"

Endpoints:

* ``POST /v1/embeddings`` answers deterministic vectors (:func:`fake_vector`), ``dimensions`` long
  when the request names it, else ``default_dimensions``. ``encoding_format: "base64"`` (what the
  official client asks for by default) is honoured. ``fail_embeddings`` makes the next requests
  answer a given status and body; ``embedding_delay`` holds every answer back; ``vector_fn``
  replaces the vector maker (e.g. to return the wrong size).
* ``POST /v1/chat/completions`` answers from a queue filled by ``script_chat``: a string is the
  assistant's content, a :class:`Reply` can also fail with a status or wait first. An empty queue
  answers HTTP 500 so a missing script shows up in the test.

Every request is recorded in ``requests`` (path, lower-cased headers, parsed JSON body).
The server listens on 127.0.0.1 on a free port and serves each request in its own thread;
``close`` wakes any delayed answer and waits for all of them. ``start`` after ``close`` serves again on
the same port (an endpoint that went down and came back).
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAI", "RecordedRequest", "Reply", "fake_vector"]


def fake_vector(text: str, dimensions: int) -> list[float]:
    """A deterministic, not normalised vector in [-1, 1] derived from sha256 of `text`."""
    values: list[float] = []
    counter = 0
    while len(values) < dimensions:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values.extend(byte / 127.5 - 1.0 for byte in digest)
        counter += 1
    return values[:dimensions]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    json: Any  # parsed body, or None when the body was empty or not JSON


@dataclass(frozen=True)
class Reply:
    """One scripted chat answer: `content` with HTTP 200, or `status` with `body`; after `delay` seconds."""

    content: str | None = None
    status: int = 200
    body: Any = None
    delay: float = 0.0


def _error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "fake_error", "param": None, "code": str(status)}}


class FakeOpenAI:
    def __init__(self, *, default_dimensions: int = 8) -> None:
        self.default_dimensions = default_dimensions
        self.embedding_delay = 0.0
        self.vector_fn: Callable[[str, int], list[float]] = fake_vector
        self.requests: list[RecordedRequest] = []
        self._failures: deque[tuple[int, Any]] = deque()
        self._chat: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._bind_port = 0  # after the first start: that port again, so a restarted server keeps its URL

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeOpenAI:
        self._closing.clear()
        self._server = _Server(("127.0.0.1", self._bind_port), _Handler)
        self._bind_port = self._server.server_address[1]
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is None:
            return
        self._closing.set()  # wake delayed answers
        self._server.shutdown()
        self._server.server_close()  # joins the request threads
        assert self._thread is not None
        self._thread.join()
        self._server = self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- test controls -----------------------------------------------------------------------
    def fail_embeddings(self, status: int, *, times: int = 1, body: Any = None) -> None:
        """Answer the next `times` embedding requests with `status` and `body` (JSON; an OpenAI-style
        error by default). Status 200 with a custom body serves a malformed success."""
        if body is None:
            body = _error_body(status, f"fake failure with HTTP {status}")
        with self._lock:
            self._failures.extend([(status, body)] * times)

    def script_chat(self, *replies: str | Reply) -> None:
        """Queue chat answers, consumed one per request in order."""
        with self._lock:
            self._chat.extend(r if isinstance(r, Reply) else Reply(content=r) for r in replies)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """Recorded requests whose path ends with `path`, e.g. "/embeddings"."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith(path)]

    # -- answers (called from request threads) -----------------------------------------------
    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._closing.wait(seconds)

    def _answer_embeddings(self, body: Any) -> tuple[int, Any]:
        with self._lock:
            failure = self._failures.popleft() if self._failures else None
        self._sleep(self.embedding_delay)
        if failure is not None:
            return failure
        if not isinstance(body, dict) or "input" not in body or "model" not in body:
            return 400, _error_body(400, "'model' and 'input' are required")
        texts = body["input"]
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return 400, _error_body(400, "'input' must be a string or a list of strings")
        dimensions = body.get("dimensions") or self.default_dimensions
        data = []
        for index, text in enumerate(texts):
            vector: Any = self.vector_fn(text, dimensions)
            if body.get("encoding_format") == "base64":
                vector = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
            data.append({"object": "embedding", "index": index, "embedding": vector})
        usage = {"prompt_tokens": 0, "total_tokens": 0}
        return 200, {"object": "list", "data": data, "model": body["model"], "usage": usage}

    def _answer_chat(self, body: Any) -> tuple[int, Any]:
        with self._lock:
            reply = self._chat.popleft() if self._chat else None
        if reply is None:
            return 500, _error_body(500, "fake chat: no scripted reply left")
        self._sleep(reply.delay)
        if reply.status != 200 or reply.content is None:
            return reply.status, reply.body if reply.body is not None else _error_body(reply.status, "fake")
        model = body.get("model", "fake") if isinstance(body, dict) else "fake"
        message = {"role": "assistant", "content": reply.content}
        return 200, {
            "id": f"chatcmpl-fake-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # so server_close() waits for request threads
    fake: FakeOpenAI

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up (timeouts) are expected; don't print tracebacks


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10  # never let a silent client hold close() forever

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        fake._record(RecordedRequest("POST", path, {k.lower(): v for k, v in self.headers.items()}, body))
        if path == "/v1/embeddings":
            status, answer = fake._answer_embeddings(body)
        elif path == "/v1/chat/completions":
            status, answer = fake._answer_chat(body)
        else:
            status, answer = 404, _error_body(404, f"no route {path}")
        self._send(status, answer)

    def do_GET(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.fake._record(RecordedRequest("GET", self.path, headers, None))
        self._send(404, _error_body(404, f"no route {self.path}"))

    def _send(self, status: int, answer: Any) -> None:
        payload = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            pass  # the client gave up (e.g. it timed out)

    def log_message(self, format: str, *args: Any) -> None:
        pass
