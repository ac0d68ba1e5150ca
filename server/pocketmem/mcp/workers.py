"""`pocketmem serve --transport http --workers N`: N server processes answering on one listening socket.

The parent checks the configuration (the same access policy a single server applies), binds the
address once, announces the URL, and starts N workers that inherit the listening socket; the kernel
hands each new connection to whichever worker accepts first. Every worker runs streamable HTTP
stateless (no server-side MCP session, JSON responses), so any worker can answer any request.
Timers (maintenance, sync) run in worker 0 only; recall bookkeeping is written by each worker and adds up.

The parent restarts a worker that dies, unless it dies within WORKER_MIN_LIFETIME seconds of starting
(a configuration or database problem a restart cannot fix: the parent then stops them all).
SIGTERM / SIGINT to the parent stop every worker cleanly (each writes its waiting bookkeeping).

Databases: PostgreSQL serves any number of workers. One SQLite file serves them too: writers of all
processes take turns on the per-file lock (base/filelock.py) and WAL lets readers run
beside the writer, so it is safe; recalls scale with workers, writes do not (one writer at a time).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from socket import socket

log = logging.getLogger(__name__)

WORKER_MIN_LIFETIME = 5.0
STOP_TIMEOUT = 15.0
MAX_WORKERS = 64


def worker_command(argv: Sequence[str], fd: int, index: int) -> list[str]:
    """The worker's command line: the parent's own `serve` arguments, plus the inherited socket."""
    return [sys.executable, "-m", "pocketmem", *argv, "--listen-fd", str(fd), "--worker-index", str(index)]


class Supervisor:
    def __init__(self, sock: socket, argv: Sequence[str], workers: int) -> None:
        self.sock = sock
        self.argv = list(argv)
        self.count = workers
        self.procs: dict[int, tuple[subprocess.Popen[bytes], float]] = {}
        self.stopping = False

    def _start(self, index: int) -> None:
        fd = self.sock.fileno()
        proc = subprocess.Popen(worker_command(self.argv, fd, index), pass_fds=(fd,), stdin=subprocess.DEVNULL)
        self.procs[index] = (proc, time.monotonic())

    def _stop(self, *_: object) -> None:
        self.stopping = True

    def run(self) -> int:
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            for index in range(self.count):
                self._start(index)
            code = self._watch()
        finally:
            self._shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return code

    def _watch(self) -> int:
        while not self.stopping:
            for index, (proc, started) in list(self.procs.items()):
                code = proc.poll()
                if code is None:
                    continue
                if time.monotonic() - started < WORKER_MIN_LIFETIME:
                    log.error("worker %d exited with %d right after starting; stopping", index, code)
                    return code or 1
                log.warning("worker %d exited with %d; starting it again", index, code)
                self._start(index)
            time.sleep(0.2)
        return 0

    def _shutdown(self) -> None:
        for proc, _ in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for proc, _ in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("worker %d did not stop in time; killing it", proc.pid)
                proc.kill()
                proc.wait()
        self.sock.close()


def adopt_socket(fd: int) -> socket:
    """A worker's listening socket, inherited from the parent."""
    sock = socket(fileno=fd)
    os.set_inheritable(fd, False)
    return sock
