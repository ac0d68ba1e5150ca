"""The keyword index's English stemmer is used from several threads at once (the server's warm-up worker, request
threads, the query encoder's): a word one thread is stemming is never stemmed with another thread's letters.

Deterministic, no timing: a trace hook stops one thread right after it handed its word to the stemmer, another
thread stems a word meanwhile, then the first goes on."""

from __future__ import annotations

import sys
import threading

import pytest

from pocketmem.core import text


def test_a_word_stemmed_while_another_thread_stems_keeps_its_own_stem():
    text.stem_word.cache_clear()
    handed_over, go_on = threading.Event(), threading.Event()
    result: list[str] = []

    def tracer(frame, event, arg):
        if (event == "call" and frame.f_code.co_name == "_stem"
                and frame.f_globals.get("__name__", "").startswith("snowballstemmer") and not handed_over.is_set()):
            handed_over.set()  # the stemmer holds "running" now
            go_on.wait()
        return None

    def first() -> None:
        sys.settrace(tracer)
        try:
            result.append(text.stem_word("running"))
        finally:
            sys.settrace(None)

    worker = threading.Thread(target=first)
    worker.start()
    if not handed_over.wait(60):  # a stemmer written in C (PyStemmer) has no Python frame to stop in
        go_on.set()
        worker.join()
        pytest.skip("the stemmer in use has no Python frames to trace")
    other = threading.Thread(target=lambda: result.append(text.stem_word("arguments")))
    other.start()
    other.join()
    go_on.set()
    worker.join()
    assert sorted(result) == ["argument", "run"], result
    text.stem_word.cache_clear()
