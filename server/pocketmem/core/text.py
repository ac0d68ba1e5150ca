"""Text helpers: cleaning input, the duplicate hash, CJK-aware terms for the keyword index, language guess.

SQLite's FTS5 tokenizers cannot split Chinese into words (unicode61 keeps a whole run of Han
characters as one token; trigram needs three characters). We therefore index our own terms:
every Han character, every pair of neighbouring Han characters, the words of three or more
characters that the jieba segmenter (bundled dictionary) finds, and Snowball-stemmed Latin words.
A two-character word such as 香菜 is then one exact term whatever the segmenter does with it.

A query is split into words by the same segmenter (so 一天要 gives 一天, never the pair 天要 that
spans two words), each two-character word also brings its characters at half weight (我的猫叫 is
segmented 猫叫; the character 猫 still meets 猫，叫小白), and English words are stemmed so `sold`
meets `sell` (irregular forms first become their base word) and `cats` meets `cat`.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator
from functools import cache, lru_cache
from typing import Any

from pocketmem.base.errors import InvalidInput

# Han, kana and Hangul are written without spaces between words.
_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_RUN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)
_CJK_CHAR = re.compile(rf"[{_CJK}]")
_LATIN_LETTER = re.compile(r"[A-Za-z]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# Words that say nothing about what a memory is about. Memories are often written as
# "用户喜欢…" / "The user prefers…", so the subject itself is noise for matching.
ZH_STOP_TERMS = frozenset(
    "的 了 是 在 和 与 也 都 就 又 还 吗 呢 吧 啊 呀 哦 嗯 么 着 过 把 被 给 对 从 向 这 那 我 你 他 她 它 们 "
    "用户 主人 我们 你们 他们 她们 它们 什么 怎么 怎样 一个 一下 一些 这个 那个 这些 那些 就是 还是 可以 "
    "没有 已经 现在 然后 因为 所以 但是 如果 的话 觉得 知道 一直 有点 一点 比较 非常 真的 时候 之前 以后 "
    "我的 你的 他的 她的 的时 时候 我想 想要 要是 不是 有没 没有 一样 这样 那样 怎么样".split()
)
EN_STOP_TERMS = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been being am do does did "
    "i me my mine you your yours he him his she her it its we us our they them their this that these those "
    "what which who whom how when where why there here so not no yes can could would should will shall may "
    "might must have has had just very really also too about into over than then user users please thanks".split()
)
# Words a question is made of whatever it asks (for query terms only; the index keeps every word).
ZH_QUERY_FILLER = frozenset(
    "哪儿 哪里 哪个 哪些 为什么 多少 是不是 能不能 要不要 有没有 来着 帮我 一下 请问 "
    # asking for the past says when to look, not what about (core.triggers widens the search instead)
    "还记得 记得 记不记得 之前 以前 上次 提到 提过 说过 聊过".split()
)
EN_QUERY_FILLER = frozenset(
    "any anything something some all now right still again want need get got getting say said tell know think "
    "make go going let ok okay yeah hi hello hey thank thanks much many lot way thing things maybe "
    "im ive id ill dont doesnt didnt cant wont isnt arent wasnt s t m d ll re ve "
    "remember recall mentioned mention earlier before last time".split()
)


def clean_text(value: str, field: str, *, max_chars: int, allow_empty: bool = False) -> str:
    """Strip control characters and outer whitespace; reject lone surrogates, emptiness and excess length."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(field, "contains an unpaired surrogate; send valid UTF-8 text") from None
    cleaned = _CONTROL.sub("", value).strip()
    if not cleaned and not allow_empty:
        raise InvalidInput(field, "must not be empty or only whitespace")
    if len(cleaned) > max_chars:
        hint = " — store one fact per memory" if field == "content" else ""
        raise InvalidInput(field, f"is {len(cleaned)} characters; the limit is {max_chars}{hint}")
    return cleaned


def normalise(text: str) -> str:
    """Case- and width-folded text with whitespace and punctuation removed: the duplicate key."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in folded if unicodedata.category(ch)[0] not in "PZC")


def content_hash(text: str) -> str:
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()[:32]


def is_cjk_char(ch: str) -> bool:
    return bool(_CJK_CHAR.match(ch))


def runs(text: str) -> Iterator[tuple[str, bool]]:
    """Yield (run, is_cjk) for each run of CJK characters or of Latin letters/digits."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    for match in _RUN.finditer(folded):
        run = match.group()
        yield run, bool(_CJK_CHAR.match(run[0]))


def stem(word: str) -> str:
    """Fold the commonest English plural forms so `preferences` meets `preference`."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@cache
def segmenter() -> Any:
    """jieba, loaded once with its bundled dictionary (its own cache file makes later loads fast)."""
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.dt.check_initialized()
    return jieba


@cache
def _english_stemmer() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("english")


# Irregular English verb forms Snowball leaves alone (it strips suffixes, it does not know `sold` is `sell`).
IRREGULAR = {
    form: base
    for base, forms in {
        "be": "was were been", "buy": "bought", "sell": "sold", "go": "went gone", "run": "ran", "eat": "ate eaten",
        "drink": "drank drunk", "drive": "drove driven", "fly": "flew flown", "give": "gave given",
        "take": "took taken", "get": "got gotten", "make": "made", "see": "saw seen", "meet": "met",
        "leave": "left", "lose": "lost", "find": "found", "feel": "felt", "keep": "kept", "sleep": "slept",
        "teach": "taught", "think": "thought", "bring": "brought", "catch": "caught", "tell": "told",
        "say": "said", "pay": "paid", "send": "sent", "spend": "spent", "build": "built", "begin": "began begun",
        "break": "broke broken", "choose": "chose chosen", "forget": "forgot forgotten", "grow": "grew grown",
        "know": "knew known", "write": "wrote written", "speak": "spoke spoken", "swim": "swam swum",
        "sing": "sang sung", "wear": "wore worn", "win": "won", "hold": "held", "read": "read",
        "hear": "heard", "stand": "stood", "understand": "understood", "fall": "fell fallen", "ride": "rode ridden",
        "rise": "rose risen", "steal": "stole stolen", "throw": "threw thrown", "wake": "woke woken",
        "child": "children", "mouse": "mice", "foot": "feet", "tooth": "teeth", "person": "people",
        "man": "men", "woman": "women",
    }.items()
    for form in forms.split()
}


@lru_cache(maxsize=65536)
def stem_word(word: str) -> str:
    """The Snowball (Porter 2) stem the keyword index and queries use: preferences, preferred -> prefer;
    irregular forms first become their base word (sold -> sell, bought -> buy, children -> child)."""
    if not word.isascii() or not word.isalpha():
        return word
    return _english_stemmer().stemWord(IRREGULAR.get(word, word))


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
            if len(word) == 2:
                for ch in word:
                    if ch not in ZH_STOP_TERMS:
                        seen.setdefault(ch, CHAR_WEIGHT)
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


def has_cjk(text: str) -> bool:
    return bool(_CJK_CHAR.search(text))


def signature(text: str) -> frozenset[str]:
    """The content words of a text: Han characters and Latin stems, filler and punctuation left out.

    Two texts with the same signature say the same thing in other order or with other filler
    (用户不喜欢香菜。/ 香菜，用户不喜欢); negation (不, 没, not), numbers and every content word are kept,
    so 喜欢 / 不喜欢 and 3次 / 5次 never match.
    """
    out: set[str] = set()
    for run, cjk in runs(strip_subject(text)):
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
