"""jieba's dictionary as a word table (core/dictionary.py, base/wordtable.py): every segmentation, tag and count
is jieba's own, and the table comes from the cache folder, built again when its file is missing or damaged."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import jieba
import jieba.posseg
import pytest

from pocketmem.base import wordtable
from pocketmem.core import dictionary
from pocketmem.core.text import cjk_words, is_dictionary_word, pos_tags, runs, word_share

from .servers import checkout_env

ROOT = Path(__file__).resolve().parents[1]
# jieba's dictionary format, with what its rules must decide: a word listed twice (the later line wins, the total
# counts both), a word of count 0, prefixes that are no words (中华人, 中华人民...), a word that is a prefix of another.
SMALL = "B超 3 n\n中华 10 nz\n中华人民共和国 5 ns\n了 0 ul\nB超 4 n\n人民 7 n\n"


def eval_texts() -> list[str]:
    """The memories and questions of every eval set (bench/data/eval_*.json)."""
    out: list[str] = []
    for path in sorted((ROOT / "bench" / "data").glob("eval_*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        out += [memory["content"] for memory in data["memories"]] + [query["query"] for query in data["queries"]]
    return list(dict.fromkeys(out))


@pytest.fixture(scope="module")
def stock():
    """jieba's own segmenter and tagger over their dicts, built from the same dict.txt."""
    dictionary.segmenter()  # sets jieba's log level
    tokenizer = jieba.Tokenizer()
    tokenizer.check_initialized()
    return tokenizer, jieba.posseg.POSTokenizer(tokenizer)


def test_every_key_count_and_tag_is_the_one_jiebas_dicts_hold(stock):
    tokenizer, tagger = stock
    counts, tags = dictionary.segmenter().FREQ, dictionary.tagger().word_tag_tab
    assert dictionary.segmenter().total == tokenizer.total
    assert len(dictionary.table().trie) == len(tokenizer.FREQ) == 498113
    assert [key for key, count in tokenizer.FREQ.items() if not (key in counts and counts[key] == count)] == []
    assert [key for key, count in tokenizer.FREQ.items() if counts.get(key) != count] == []
    assert [key for key in tokenizer.FREQ if tags.get(key, "x") != tagger.word_tag_tab.get(key, "x")] == []
    for absent in ("车该", "点辣锅", "zz", "中华人民共和国万岁", "中华\0", "人民\0银行"):  # marisa stops at a NUL
        assert absent not in counts and counts.get(absent) is None and counts.get(absent, 0) == 0
        assert tags.get(absent, "x") == "x"
        with pytest.raises(KeyError):
            counts[absent]


def test_segmentation_tags_and_word_counts_are_jiebas_on_every_eval_text(stock):
    tokenizer, tagger = stock
    texts = eval_texts()
    assert len(texts) > 4000
    words: set[str] = set()
    cut_apart, runs_apart, tagged_apart = [], [], []
    for text in texts:
        if list(dictionary.segmenter().cut_for_search(text)) != list(tokenizer.cut_for_search(text)):
            cut_apart.append(text)
        for run in (run for run, cjk in runs(text) if cjk):
            expected = tuple(w for w in tokenizer.cut_for_search(run) if w.strip())
            if cjk_words(run) != expected:
                runs_apart.append(run)
            words.update(expected, run)
        tagged = tuple((pair.word, pair.flag) for pair in tagger.cut(text))
        if pos_tags(text) != tagged:
            tagged_apart.append(text)
        words.update(word for word, _ in tagged)
    assert (cut_apart, runs_apart, tagged_apart) == ([], [], [])
    words.update(ch for word in list(words) for ch in word)
    assert len(words) > 5000
    assert [w for w in words if is_dictionary_word(w) != bool(tokenizer.FREQ.get(w))] == []
    assert [w for w in words if word_share(w) != tokenizer.FREQ.get(w, 0) / tokenizer.total] == []


def test_a_small_dictionary_follows_jiebas_rules(tmp_path):
    source = tmp_path / "dict.txt"
    source.write_text(SMALL, encoding="utf-8")
    table = dictionary.build(source)
    tokenizer = jieba.Tokenizer(str(source))
    tokenizer.check_initialized()
    tags = jieba.posseg.POSTokenizer(tokenizer).word_tag_tab
    counts, ours = wordtable.Column(table, "count"), dictionary.Tags(table)
    assert table.meta["total"] == tokenizer.total == 29
    assert sorted(table.trie.keys()) == sorted(tokenizer.FREQ)
    assert {key: counts[key] for key in tokenizer.FREQ} == tokenizer.FREQ
    assert counts["B超"] == 4 and counts["中华人"] == 0 and counts["了"] == 0
    assert {key: ours.get(key, "x") for key in tokenizer.FREQ} == {key: tags.get(key, "x") for key in tokenizer.FREQ}


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "pocketmem"


def small_table(tmp_path: Path, builds: list[Path]) -> wordtable.WordTable:
    source = tmp_path / "dict.txt"
    if not source.exists():
        source.write_text(SMALL, encoding="utf-8")

    def build() -> wordtable.WordTable:
        builds.append(source)
        return dictionary.build(source)

    return wordtable.cached("small", source, build)


def answers(table: wordtable.WordTable) -> dict[str, tuple[int, str | None]]:
    counts, tags = wordtable.Column(table, "count"), dictionary.Tags(table)
    return {key: (counts[key], tags.get(key)) for key in table.trie.keys()}


@pytest.mark.parametrize("damage", ["removed", "cut short", "one byte changed", "another file"])
def test_a_missing_or_damaged_cache_file_is_built_again(tmp_path, cache_home, damage, caplog):
    builds: list[Path] = []
    first = small_table(tmp_path, builds)
    (path,) = cache_home.glob("small-*.bin")
    assert answers(small_table(tmp_path, builds)) == answers(first) and len(builds) == 1  # read from the file
    written = path.read_bytes()
    data = bytearray(written)
    if damage == "removed":
        path.unlink()
    elif damage == "cut short":
        path.write_bytes(data[:-3])
    elif damage == "one byte changed":
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
    else:
        path.write_text("not a word table")
    with caplog.at_level(logging.WARNING, logger="pocketmem.text"):
        again = small_table(tmp_path, builds)
    assert len(builds) == 2 and answers(again) == answers(first)
    assert path.read_bytes() == written
    assert ("built again" in caplog.text) == (damage != "removed")


def test_another_source_gets_a_file_of_its_own(tmp_path, cache_home):
    builds: list[Path] = []
    small_table(tmp_path, builds)
    (tmp_path / "dict.txt").write_text(SMALL + "人民币 9 n\n", encoding="utf-8")
    changed = small_table(tmp_path, builds)
    assert len(builds) == 2 and len(list(cache_home.glob("small-*.bin"))) == 2
    assert answers(changed)["人民币"] == (9, "n") and answers(changed)["人民"] == (7, "n")


def test_a_cache_folder_that_cannot_be_written_keeps_the_table_in_memory(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    builds: list[Path] = []
    with caplog.at_level(logging.WARNING, logger="pocketmem.text"):
        table = small_table(tmp_path, builds)
    assert answers(table)["B超"] == (4, "n") and "stays in memory" in caplog.text
    assert blocker.read_text() == "a file where the cache folder would be"


def test_the_servers_warm_up_builds_none_of_jiebas_dicts(tmp_path):
    """In a fresh process, on a first start and on a later one: jieba.dt never loads its dictionary, jieba.posseg
    builds no word-to-tag dict when imported (it would read dict.txt), and a later start reads dict.txt only for the
    digest that names its table file."""
    script = (
        "import sys\n"
        "opened = []\n"
        "sys.addaudithook(lambda event, args: event == 'open' and str(args[0]).endswith('dict.txt')"
        " and opened.append(args[0]))\n"
        "import jieba\n"
        "from pocketmem.service.recall.retrieval import warm_up\n"
        "warm_up()\n"
        "import jieba.posseg\n"
        "print(jieba.dt.initialized, len(jieba.dt.FREQ), type(jieba.posseg.dt.word_tag_tab).__name__, len(opened))\n"
    )
    env = {**checkout_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for start in ("first start", "later start"):
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr
        initialized, freq, tags, reads = out.stdout.split()
        assert (initialized, freq, tags) == ("False", "0", "Tags")
        # a later start reads dict.txt once, for the digest that names its table file (base/wordtable.cached)
        assert int(reads) > 1 if start == "first start" else reads == "1", (start, reads)
        written = sorted(path.name.split("-")[0] for path in (tmp_path / "cache" / "pocketmem").glob("*.bin"))
        assert written == ["background", "jieba"]
