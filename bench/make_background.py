"""Build server/pocketmem/core/data/background.tsv.gz: how common each term is in ordinary text.

    python bench/make_background.py      # needs wordfreq (a build-time tool only, not a run-time dependency)

Rows are `term<TAB>frequency per word of running text`, for
  - English: the 30,000 commonest words (wordfreq, CC BY-SA 4.0 data), folded by the Snowball stemmer
    the keyword index uses (core.text.stem_word), frequencies of words with the same stem added;
  - Chinese: the words of jieba's bundled dictionary (MIT) seen 20+ times in its corpus, and every Han
    character, counted as the sum over the dictionary words that contain it.
Recall blends these with each user's own term counts (core.termstats), so a word means the same in a
store of 1 memory as in one of 100,000.

It also writes server/pocketmem/core/data/weak_words.txt.gz: the Chinese words and characters that jieba's
dictionary tags as numerals, measure words, time and place words, pronouns, adverbs, prepositions,
conjunctions, particles and interjections (WEAK_TAGS: 一家, 一天, 今天, 最近 ...), seen 20+ times. They say
little about what a memory is about, so the relevance decision counts them at a fraction of their rarity
(core.relevance.WEAK_WORD_FACTOR). Loading jieba's tagged dictionary at run time would cost ~50 MB and a
second; this list is ~20 KiB.
"""

from __future__ import annotations

import gzip
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from pocketmem.core.text import is_cjk_char, stem_word  # noqa: E402

OUT = ROOT / "server" / "pocketmem" / "core" / "data" / "background.tsv.gz"
WEAK_OUT = OUT.with_name("weak_words.txt.gz")
WEAK_TAGS = frozenset("m q mq t tg f r d p c u y e o k".split())


def jieba_dictionary() -> Any:
    """jieba's own segmenter over its dicts, read whole here (the server holds them as a word table)."""
    import jieba

    dictionary = jieba.Tokenizer()
    dictionary.check_initialized()
    return dictionary


def weak_words() -> None:
    import jieba.posseg

    dictionary = jieba_dictionary()
    tags = jieba.posseg.POSTokenizer(dictionary).word_tag_tab
    weak = sorted(
        word
        for word, tag in tags.items()
        if tag in WEAK_TAGS and all(is_cjk_char(ch) for ch in word)
        and (len(word) == 1 or dictionary.FREQ.get(word, 0) >= 20)
    )
    with gzip.open(WEAK_OUT, "wt", encoding="utf-8", compresslevel=9) as out:
        out.write("\n".join(weak) + "\n")
    print(f"{len(weak)} weak words -> {WEAK_OUT} ({WEAK_OUT.stat().st_size // 1024} KiB)")


def main() -> None:
    import wordfreq

    freq: dict[str, float] = defaultdict(float)
    for word in wordfreq.top_n_list("en", 30000):
        if word.isascii() and word.isalnum():
            freq[stem_word(word)] += wordfreq.word_frequency(word, "en")
    dictionary = jieba_dictionary()
    total = dictionary.total
    chars: dict[str, float] = defaultdict(float)
    for word, count in dictionary.FREQ.items():
        if not count or not all(is_cjk_char(ch) for ch in word):
            continue
        for ch in set(word):
            chars[ch] += count / total
        if count >= 20:
            freq[word] = max(freq[word], count / total)
    for ch, f in chars.items():
        freq[ch] = max(freq[ch], f)
    rows = sorted(freq.items(), key=lambda kv: -kv[1])
    with gzip.open(OUT, "wt", encoding="utf-8", compresslevel=9) as out:
        for term, f in rows:
            out.write(f"{term}\t{f:.3g}\n")
    print(f"{len(rows)} terms -> {OUT} ({OUT.stat().st_size // 1024} KiB)")
    weak_words()


if __name__ == "__main__":
    main()
