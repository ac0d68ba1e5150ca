"""Text helpers: cleaning input, the duplicate hash, CJK-aware terms for the keyword index, language guess.

SQLite's FTS5 tokenizers cannot split Chinese into words (unicode61 keeps a whole run of Han
characters as one token; trigram needs three characters). We therefore index our own terms:
every Han character, every pair of neighbouring Han characters, the words of three or more
characters that the jieba segmenter finds (its bundled dictionary, held as a word table: core/dictionary.py),
and Snowball-stemmed Latin words. A two-character word such as 香菜 is then one exact term whatever the
segmenter does with it.

A query is split into words by the same segmenter (so 一天要 gives 一天, never the pair 天要 that
spans two words), each two-character word also brings its characters at half weight (我的猫叫 is
segmented 猫叫; the character 猫 still meets 猫，叫小白), and English words are stemmed so `sold`
meets `sell` (irregular forms first become their base word) and `cats` meets `cat`.
"""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from collections.abc import Iterable, Iterator
from datetime import datetime, tzinfo
from functools import cache, lru_cache
from typing import Any

from pocketmem.base.errors import InvalidInput, InvalidReason
from pocketmem.core import wordlists
from pocketmem.core.dictionary import segmenter, tagger

# Han, kana and Hangul are written without spaces between words.
_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_CHAR = re.compile(rf"[{_CJK}]")
_LATIN_LETTER = re.compile(r"[A-Za-z]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# Words that say nothing about what a memory is about (data/stop_words.tsv). Memories are often written as
# "用户喜欢…" / "The user prefers…", so the subject itself is noise for matching.
_STOP = wordlists.words("stop_words.tsv", "stop")
ZH_STOP_TERMS = frozenset(_STOP["zh"])
EN_STOP_TERMS = frozenset(_STOP["en"])
# Words a question is made of whatever it asks (for query terms only; the index keeps every word). Asking for
# the past (还记得, 上次, earlier) says when to look, not what about (core/timeexpr.py widens the search instead).
_FILLER = wordlists.words("stop_words.tsv", "filler")
ZH_QUERY_FILLER = frozenset(_FILLER["zh"])
EN_QUERY_FILLER = frozenset(_FILLER["en"])


# What a text holding half of a UTF-16 pair (a string cut mid-emoji) is told; stdio says it of a request too.
UNPAIRED_SURROGATE = "contains an unpaired surrogate; send valid UTF-8 text"


def clean_text(value: str, field: str, *, max_chars: int, allow_empty: bool = False) -> str:
    """Strip control characters and outer whitespace; reject lone surrogates, text with nothing visible (empty,
    whitespace, or only format characters such as U+200B and U+202E) and excess length."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(field, UNPAIRED_SURROGATE) from None
    cleaned = _CONTROL.sub("", value).strip()
    if not allow_empty and not visible(cleaned):
        raise InvalidInput(field, "must not be empty, or only whitespace or invisible characters", InvalidReason.empty)
    if len(cleaned) > max_chars:
        hint = " — store one fact per memory" if field == "content" else ""
        raise InvalidInput(
            field, f"is {len(cleaned)} characters; the limit is {max_chars}{hint}", InvalidReason.too_long,
            length=len(cleaned), limit=max_chars,
        )
    return cleaned


def visible(text: str) -> bool:
    """Whether anything in `text` shows: whitespace and format characters (U+200B, U+202E) alone do not."""
    return any(unicodedata.category(ch)[0] not in "ZC" for ch in text)


def normalise(text: str) -> str:
    """Case- and width-folded text with whitespace and punctuation removed: the duplicate key."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in folded if unicodedata.category(ch)[0] not in "PZC")


def content_hash(text: str) -> str:
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()[:32]


def is_cjk_char(ch: str) -> bool:
    return bool(_CJK_CHAR.match(ch))


@cache
def runs_pattern() -> re.Pattern[str]:
    """A run of CJK characters or of Latin letters and digits, compiled once: on first use, or by the server's
    warm-up after its handshake (its two classes of those ranges take a few milliseconds to compile)."""
    return re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)


def runs(text: str) -> Iterator[tuple[str, bool]]:
    """Yield (run, is_cjk) for each run of CJK characters or of Latin letters/digits."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    for match in runs_pattern().finditer(folded):
        run = match.group()
        yield run, bool(_CJK_CHAR.match(run[0]))


_per_thread = threading.local()


def _english_stemmer() -> Any:
    """This thread's Snowball stemmer. A stemmer keeps the word it works on in itself, so one shared by threads (the
    server's warm-up worker and a request's) stems one thread's word with another's letters, or fails."""
    stemmer = getattr(_per_thread, "stemmer", None)
    if stemmer is None:
        import snowballstemmer

        stemmer = _per_thread.stemmer = snowballstemmer.stemmer("english")
    return stemmer


# Irregular English forms Snowball leaves alone (it strips suffixes, it does not know `sold` is `sell`):
# data/irregular_forms.tsv, one base word and its forms a row.
IRREGULAR = {form: row[0] for row in wordlists.rows("irregular_forms.tsv") for form in row[1].split()}


@lru_cache(maxsize=65536)
def stem_word(word: str) -> str:
    """The Snowball (Porter 2) stem the keyword index and queries use: preferences, preferred -> prefer;
    irregular forms first become their base word (sold -> sell, bought -> buy, children -> child)."""
    if not word.isascii() or not word.isalpha():
        return word
    return _english_stemmer().stemWord(IRREGULAR.get(word, word))


@lru_cache(maxsize=4096)
def pos_tags(text: str) -> tuple[tuple[str, str], ...]:
    """(word, part-of-speech flag) pairs of `text` by jieba's tagger over the segmenter's dictionary (nr person
    name, ns place, n noun ...): the one place the tagger is called, so another tagger replaces it here. A tag
    is a hint, never a verdict (朵朵 is tagged a measure word)."""
    return tuple((pair.word, pair.flag) for pair in tagger().cut(text))


def is_dictionary_word(word: str) -> bool:
    """Is `word` in jieba's dictionary? A word it lacks was guessed by its HMM from characters it could not
    place (车该 in 车该保养了, 点辣锅): its characters are the words the user wrote."""
    return bool(segmenter().FREQ.get(word))


def word_share(word: str) -> float:
    """How often `word` stands as a word of its own in ordinary Chinese text (jieba's dictionary counts):
    for a character, less than how often it occurs inside other words (车 in 车站, 火车)."""
    dictionary = segmenter()
    return dictionary.FREQ.get(word, 0) / dictionary.total


def single_nouns(text: str, weighted: dict[str, float]) -> frozenset[str]:
    """The Chinese characters `text` uses as nouns of their own (车 in 车该保养了, 酒 in 一瓶酒): weight 1 in
    `weighted` (weighted_query_terms), tagged a noun, and not a verb by jieba's dictionary: the tagger guesses the
    tags of single characters it cannot join into a word (说的办 in 好的就按你说的办 reads 办 as a noun), and a verb
    (办, 做, 吃) names no thing. The tagger runs only when there is such a character."""
    single = {t for t, w in weighted.items() if len(t) == 1 and w >= 1.0 and is_cjk_char(t)}
    if not single:
        return frozenset()
    listed = tagger().word_tag_tab
    return frozenset(
        word
        for word, flag in pos_tags(text)
        if word in single and flag == "n" and not listed.get(word, "x").startswith("v")
    )


@lru_cache(maxsize=16384)
def cjk_words(run: str) -> tuple[str, ...]:
    """The words of a run of Han characters, with the dictionary words inside longer ones (search mode)."""
    if len(run) == 1:
        return (run,)
    return tuple(w for w in segmenter().cut_for_search(run) if w.strip())


def index_terms(text: str) -> list[str]:
    """Terms written to the keyword index: Han unigrams and bigrams, segmenter words of 3+ characters,
    Snowball-stemmed Latin words."""
    terms: list[str] = []
    for run, cjk in runs(text):
        if cjk:
            terms.extend(run)
            terms.extend(run[i : i + 2] for i in range(len(run) - 1))
            terms.extend(w for w in cjk_words(run) if len(w) > 2)
        else:
            terms.append(stem_word(run))
    return terms


def indexed_text(content: str, keywords: Iterable[str]) -> tuple[str, str]:
    """The two columns of a memory's keyword index row: its content's terms and its keywords' terms."""
    terms = " ".join(index_terms(content))
    keyword_terms = " ".join(dict.fromkeys(term for keyword in keywords for term in index_terms(keyword)))
    return terms, keyword_terms


CHAR_WEIGHT = 0.5  # a character of a two-character query word, relative to the word


def weighted_query_terms(text: str) -> dict[str, float]:
    """Distinct meaningful terms of a query with their weight: segmenter words (1.0), the characters of
    two-character words (CHAR_WEIGHT), stemmed Latin words (1.0); filler words left out."""
    seen: dict[str, float] = {}
    names = named_words(text)
    for run, cjk in runs(text):
        if not cjk:
            word = stem_word(run)
            filler = run in EN_STOP_TERMS or word in EN_STOP_TERMS or (run in EN_QUERY_FILLER and run not in names)
            if not filler and (len(run) > 1 or run.isdigit()):
                seen[word] = 1.0
            continue
        for word in cjk_words(run):
            if word in ZH_STOP_TERMS or word in ZH_QUERY_FILLER or not all(is_cjk_char(ch) for ch in word):
                continue
            seen[word] = 1.0
            if len(word) == 2 or (len(word) > 2 and not is_dictionary_word(word)):
                weight = CHAR_WEIGHT if is_dictionary_word(word) else 1.0
                for ch in word:
                    if ch not in ZH_STOP_TERMS:
                        seen[ch] = max(seen.get(ch, 0.0), weight)
    return seen


_LATIN_WORD = re.compile(r"[^\W\d_]+")
_SENTENCE_START = re.compile(r"(?:^|[.!?。！？]\s*)$")


def named_words(text: str) -> frozenset[str]:
    """Latin words the text writes as names, folded: every Latin word of a text Chinese carries (Go 的泛型, 用
    Nuxt: products and acronyms), and in other text a word with a capital inside a sentence (I write Go).
    Such a word is never question filler (go, make, way), whatever its spelling means in plain English."""
    folded = unicodedata.normalize("NFKC", text)
    chinese = guess_language(folded) == "zh"
    return frozenset(
        match.group().casefold()
        for match in _LATIN_WORD.finditer(folded)
        if chinese or (match.group()[0].isupper() and not _SENTENCE_START.search(folded[: match.start()]))
    )


def query_terms(text: str) -> list[str]:
    """Distinct meaningful terms of a query (weighted_query_terms without the weights)."""
    return list(weighted_query_terms(text))


def keyword_terms(keywords: Iterable[str]) -> list[str]:
    """Terms of agent-written keywords: each keyword's own query terms."""
    out: dict[str, None] = {}
    for keyword in keywords:
        for term in query_terms(keyword):
            out.setdefault(term, None)
    return list(out)


def fts_match_expression(terms: Iterable[str], *, all_terms: bool = False) -> str | None:
    """An FTS5 MATCH string that ORs (or ANDs) quoted terms; quoting makes user text inert (no NEAR, *, -, OR)."""
    quoted = ['"' + term.replace('"', '""') + '"' for term in terms if term]
    return (" AND " if all_terms else " OR ").join(quoted) if quoted else None


def guess_language(text: str) -> str:
    """'zh' when Chinese/Japanese/Korean characters carry the text, else 'en'."""
    cjk = len(_CJK_CHAR.findall(text))
    latin = len(_LATIN_LETTER.findall(text))
    return "zh" if cjk and cjk * 4 >= latin else "en"


def patched_text(
    content: str, patch: str, mode: str, now: datetime, zone: tzinfo, *, field: str = "patch", max_chars: int
) -> str:
    """The text a core memory's patch makes: the patch itself (replace), or the content with the patch appended
    with its day in `zone` (你很爱吃辣。（2026-11-26：最近胃炎）). Longer than `max_chars`: InvalidInput on `field`."""
    day = now.astimezone(zone).date().isoformat()
    if mode == "replace":
        text = patch
    elif has_cjk(content) or has_cjk(patch):
        text = f"{content.rstrip()}（{day}：{patch}）"
    else:
        text = f"{content.rstrip()} ({day}: {patch})"
    if len(text) > max_chars:
        raise InvalidInput(
            field,
            f"would make the memory {len(text)} characters (limit {max_chars}); "
            "use mode 'replace' with a rewritten, shorter memory",
        )
    return text


# A reply of at most two Latin words and this many letters in all (ok, OK!, lol, thx, yes, hmm, okay) is an
# acknowledgement a Chinese user types as readily as an English one: it does not say which language to speak.
ACK_LETTERS = 4
_LETTERS = re.compile(rf"[^\W\d_{_CJK}]+")


def own_language(text: str) -> str | None:
    """The language `text` is written in, or None when it has none of its own: no letters (👍, ？？, 2333, 😂😂)
    or only a short Latin acknowledgement (ACK_LETTERS). Chinese, Japanese or Korean characters always decide
    (哈哈 is Chinese), as guess_language weighs them against the Latin letters."""
    if _CJK_CHAR.search(text):
        return guess_language(text)
    words = _LETTERS.findall(text)
    return "en" if len(words) > 2 or sum(map(len, words)) > ACK_LETTERS else None


def stated_language(locale: str, text: str) -> str | None:
    """The language of what a person or the model reads, when the locale or `text` decides it: POCKETMEM_LOCALE,
    or with `auto` the language `text` has of its own; None when the user's own content must decide."""
    return locale if locale != "auto" else own_language(text)


def shown_language(locale: str, text: str, content: str = "") -> str:
    """The language of what a person or the model reads: stated_language, else that of the user's `content`
    (the user card's words: service/shared/usercard.content_language), else English."""
    return stated_language(locale, text) or guess_language(content)


def has_cjk(text: str) -> bool:
    return bool(_CJK_CHAR.search(text))


# A Latin token written as one, with its joints: a flag (-x, --dry-run), or letters and digits joined by - _ . / :
# @ + # (users-api, app.py, src/main.py, localhost:8000).
_TOKEN = re.compile(r"(?<![\w./:@+#-])-{1,2}[A-Za-z][A-Za-z0-9-]*|[A-Za-z0-9]+(?:[-_./:@+#]+[A-Za-z0-9]+)*")
_PIECE = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"[a-z][A-Z]")


def name_tokens(text: str) -> list[tuple[tuple[int, int], str]]:
    """The Latin tokens of `text` that name a thing rather than say a word, with their spans in its NFKC form:
    a flag (-x, --dry-run), letters with digits (svcA1, py3, v2.1), a capital after a small letter (repoA,
    GitHub), or word parts joined by - _ . / : @ + # (users-api, app.py, src/main.py, night-shift). Numbers
    (8000, 3.11, 2026-11-28) and initials (e.g., U.S.) are not. Each is one word, written as its folded,
    stemmed parts with its joints (users-api -> user-api): the pieces keep their places, so no stop word
    inside it is lost (users of users-api) and the keyword index finds it as a phrase of its terms."""
    folded = unicodedata.normalize("NFKC", text)
    out = []
    for match in _TOKEN.finditer(folded):
        token = match.group()
        pieces = _PIECE.findall(token)
        flag = token.startswith("-")
        joined = len(pieces) > 1 and any(len(p) > 1 for p in pieces)
        mixed = any(p.isalnum() and not p.isalpha() and not p.isdigit() for p in pieces) or bool(_CAMEL.search(token))
        if not any(ch.isalpha() for ch in token) or not (flag or joined or mixed):
            continue
        form = _PIECE.sub(lambda piece: stem_word(piece.group().casefold()), token.casefold())
        out.append((match.span(), form))
    return out


def signature(text: str) -> frozenset[str]:
    """The content words of a text: Han characters, Latin stems and name tokens whole (name_tokens), filler and
    punctuation left out.

    Two texts with the same signature say the same thing in other order or with other filler
    (用户不喜欢香菜。/ 香菜，用户不喜欢); negation (不, 没, not), numbers and every content word are kept,
    so 喜欢 / 不喜欢, 3次 / 5次 and users-api / api never match.
    """
    text = unicodedata.normalize("NFKC", strip_subject(text))
    tokens = name_tokens(text)
    out: set[str] = {form for _, form in tokens}
    for (start, end), _ in reversed(tokens):
        text = f"{text[:start]} {text[end:]}"
    for run, cjk in runs(text):
        if cjk:
            out.update(ch for ch in run if ch not in ZH_STOP_TERMS)
        else:
            word = stem_word(run)
            if run not in EN_STOP_TERMS or run in NEGATIONS:
                out.add(word)
    return frozenset(out)


SUBJECT_WORDS = ("用户", "主人")
NEGATIONS = frozenset({"not", "no", "never", "don", "doesn", "didn", "isn", "aren", "won", "can"})
NEGATION_CHARS = frozenset("不没别未无非勿莫")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def strip_subject(text: str) -> str:
    """Without the subject words memories often start with (用户…, 主人…): they carry no content."""
    for subject in SUBJECT_WORDS:
        text = text.replace(subject, "")
    return text


def numbers_and_negations(text: str) -> tuple[tuple[str, ...], int]:
    """The numbers a text states and how many negations it has: two texts that differ here disagree."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    negations = sum(ch in NEGATION_CHARS for ch in folded)
    negations += sum(1 for word in re.findall(r"[a-z']+", folded) if word in NEGATIONS or word.endswith("n't"))
    return tuple(sorted(_NUMBER.findall(folded))), negations
