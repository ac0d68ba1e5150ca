"""Do two texts state the same fact? The pure half of add_memory's near-duplicate rule.

A duplicate is the same fact, not the same topic: `Caroline gave a talk at a school event about her
transgender journey` and `Caroline attended an LGBTQ support group` are two facts about one person and one
theme, and merging them would lose one. So before any similarity is consulted, the two texts must agree on
what can be checked without a model:

    numbers     digits, number words (two, 两, 三, twice...) and days of the week (周一, 星期天, Monday) —
                两次 / 三次 and 周一 / 周日 never match
    negations   the same count of 不/没/not/never... — 喜欢 / 不喜欢 never match
    relatives   when both name family members (core/data/kinship.tsv), the same ones — 妈妈 / 爸爸, sister /
                brother never match (a text that names none may say it another way: 一儿一女, three children)
    entities    every name-like word of either text appears in the other: capitalised words that do not
                start a sentence (Caroline, LGBTQ, Sweden), or that start one before another capitalised word
                and are rare in ordinary English (Zoe in Zoe Lowe; not Last in Last Tuesday), titles in 《》 or
                quotes, Latin words in Chinese, a person a Chinese sentence opens with (a common surname
                and the character after it: 罗欣 of 罗欣然周三在长沙…), and name tokens (text.name_tokens:
                users-api, pytest -x, repoA, svcA1, src/app.py, v2.1) — users-api / orders-api never match
    things      every rare Chinese noun of either text (jieba's tags) shares a character with the other:
                微信支付密码 / 我的支付密码 and 开机密码 / 登录密码 name other accounts, even when redaction
                has left their secrets alike (旅行 / 旅游 share one)

Before either rule, the two texts must say the same thing the same way in time (aspects_agree):

    intent      both or neither a plan, wish or possibility (打算, 考虑, want, will, might, should):
                我打算辞职 / 我已经辞职了 and I plan to run a marathon / I ran a marathon never match
    past        both or neither set in the past (以前, 曾经, used, formerly)
    verb tense  not one in the past and the other in the present by their auxiliaries (was, had / is, has):
                I am married / I was married
    frequency   when both say how often (每天, 偶尔, always, every), the same: 我每天跑步 / 我偶尔跑步
    tense       a word both use in one form and a past form (visit / visited, run / ran)
These words are core/data/aspect_words.tsv. And the numbers and names both texts state must keep their order
(orders_agree): when only they moved, the other words in their places, it is another fact — 会议从3点改到5点 /
会议从5点改到3点, Alice owes Bob 100 dollars / Bob owes Alice 100 dollars. Numbers of two units may swap (two
cats and three dogs), and a sentence rebuilt around them is a rewording (Becoming Nicole is Caroline's
favourite book).

The similarity half (service/shared/sameness.py) is calibrated per embedder and language on reference sets.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from typing import NamedTuple

from pocketmem.core import wordlists
from pocketmem.core.termstats import background_share
from pocketmem.core.text import (
    IRREGULAR,
    has_cjk,
    name_tokens,
    numbers_and_negations,
    pos_tags,
    runs,
    stem_word,
    strip_subject,
)

# 一 is left out: in Chinese it is mostly an article (养了一只猫) and a paraphrase may drop it.
_ZH_NUMERALS = {"二": "2", "两": "2", "俩": "2", "三": "3", "四": "4", "五": "5", "六": "6", "七": "7", "八": "8",
                "九": "9", "十": "10", "百": "100", "千": "1000", "万": "10000", "半": "0.5"}
_EN_NUMBERS = {
    "two": "2", "twice": "2", "three": "3", "thrice": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "twenty": "20", "thirty": "30",
    "hundred": "100", "thousand": "1000", "million": "1000000", "half": "0.5", "dozen": "12", "first": "1st",
    "second": "2nd", "third": "3rd",
}
_WEEKDAY_ZH = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "日": 7, "天": 7}
_WEEKDAYS_EN = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# A sentence's capitalised first word before another capitalised one is a first name when ordinary English
# uses it in less than this share of memories (termstats' background: Zoe 0.0001, Emma 0.0003, Grace 0.0009;
# John 0.005, Every 0.012, Last 0.015, New 0.036). Chosen by hand: the common openers stay out, and with them
# the commonest first names.
FIRST_NAME_SHARE = 0.004
# A noun rarer than this in ordinary text names a particular thing (微信 2e-6, 开机 3.5e-5, 豆浆 3.8e-5), one as
# common as 电脑 (0.0011), 客户 (0.0013) or 工作 (0.022) names a general one a rewording adds or leaves out
# (我在杭州工作 / 我在杭州上班, 我用 Mac 写代码 / 我用 Mac 电脑写代码); the same bound as a distinctive English
# word in core/slots.py (RARE_SHARE)
THING_SHARE = 0.0002
_KIN = {word: relative for relative, words in wordlists.words("kinship.tsv", "kin").items() for word in words}
_SURNAMES = "".join(wordlists.words("surnames.tsv", "common")["-"])
_ASPECTS = {group: words["-"] for group in ("intent", "past", "past_verb", "present_verb", "frequency")
            for words in [wordlists.words("aspect_words.tsv", group)]}
# Chinese numerals: a run holding more than 一, or any run before a unit (一楼, 一点: 一 alone is mostly an article).
_ZH_NUMERAL = "〇零一二两俩三四五六七八九十百千万半"
_MONTHS_EN = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
              "november", "december")


class Patterns(NamedTuple):
    weekdays_zh: re.Pattern[str]
    word: re.Pattern[str]
    sentence_start: re.Pattern[str]
    title: re.Pattern[str]
    latin_in_cjk: re.Pattern[str]
    kin_zh: re.Pattern[str]
    zh_person: re.Pattern[str]  # a common surname opening a sentence or clause, and the Han character after it
    aspect_zh: dict[str, re.Pattern[str]]
    order_mark: re.Pattern[str]  # a number (digits, Chinese numerals, number words) or a Latin word
    unit: re.Pattern[str]


@cache
def patterns() -> Patterns:
    """Every pattern of this module, compiled once: on the first comparison, or by the server's warm-up after its
    handshake (compiling them takes a few milliseconds, which a server would otherwise pay before it)."""
    return Patterns(
        weekdays_zh=re.compile(r"(?:周|星期|礼拜)([一二三四五六日天])"),
        word=re.compile(r"[A-Za-z][A-Za-z'’]*|\d+(?:\.\d+)?"),
        sentence_start=re.compile(r"(?:^|[.!?。！？]\s*)$"),
        title=re.compile(r"《([^》]+)》|“([^”]+)”|\"([^\"]+)\""),
        latin_in_cjk=re.compile(r"[A-Za-z][A-Za-z0-9]+"),
        kin_zh=re.compile("|".join(sorted((re.escape(w) for w in _KIN if has_cjk(w)), key=len, reverse=True))),
        zh_person=re.compile(rf"(?:^|(?<=[\s，。；：！？、,.;:!?]))([{_SURNAMES}][\u4e00-\u9fff])"),
        aspect_zh={group: re.compile("|".join(sorted(han, key=len, reverse=True)))
                   for group, words in _ASPECTS.items() if (han := [w for w in words if has_cjk(w)])},
        order_mark=re.compile(
            rf"\d+(?:\.\d+)?|[{_ZH_NUMERAL}]*[〇零二两俩三四五六七八九十百千万半][{_ZH_NUMERAL}]*"
            rf"|[{_ZH_NUMERAL}]+(?=[点楼层号次个岁年月天日周元块斤里米分秒])|[A-Za-z][A-Za-z'’]*"
        ),
        unit=re.compile(r"\s*([\u4e00-\u9fff]|[A-Za-z]+)"),
    )


def aspect_words(text: str, group: str) -> frozenset[str]:
    """The words of an aspect group (intent, past, frequency: core/data/aspect_words.tsv) a text holds."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    latin = set(re.findall(r"[a-z]+", folded)) & set(_ASPECTS[group])
    han = patterns().aspect_zh.get(group)
    return frozenset(latin | set(han.findall(folded) if han else ()))


def _past_form(word: str) -> bool:
    return word.endswith("ed") or IRREGULAR.get(word, word) != word


def tenses_agree(a: str, b: str) -> bool:
    """No word of one text stands in the other in a past form of it and not in this one (visit / visited)."""
    forms_a = set(re.findall(r"[a-z]+", unicodedata.normalize("NFKC", a).casefold()))
    forms_b = set(re.findall(r"[a-z]+", unicodedata.normalize("NFKC", b).casefold()))
    stems_a = {stem_word(w): w for w in forms_a - forms_b}
    for word in forms_b - forms_a:
        other = stems_a.get(stem_word(word))
        if other is not None and (_past_form(word) or _past_form(other)):
            return False
    return True


def _verb_tense(text: str) -> str | None:
    """past or present, by the auxiliaries a text holds (was / is); None when it has none, or both kinds."""
    past, present = aspect_words(text, "past_verb"), aspect_words(text, "present_verb")
    return None if bool(past) == bool(present) else "past" if past else "present"


def aspects_agree(a: str, b: str) -> bool:
    """Both or neither a plan or wish, both or neither in the past, not one past and one present by their
    auxiliaries, the same frequency when both state one, and the same tense of every word both use."""
    for group in ("intent", "past"):
        if bool(aspect_words(a, group)) != bool(aspect_words(b, group)):
            return False
    tense_a, tense_b = _verb_tense(a), _verb_tense(b)
    if tense_a and tense_b and tense_a != tense_b:
        return False
    often_a, often_b = aspect_words(a, "frequency"), aspect_words(b, "frequency")
    if often_a and often_b and often_a != often_b:
        return False
    return tenses_agree(a, b)


def order_marks(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The numbers and names of a text as (kind, value) in the order it states them, and its other words in
    order, each once. A number's kind is its unit, the word or Han character after it (3点, two cats); a
    weekday's is weekday and a month's month. Names as the user wrote them: capitalised Latin words (at the
    start of a sentence only when rare, FIRST_NAME_SHARE: Alice, not In), Latin words among Chinese, a person
    a Chinese sentence opens with."""
    folded = unicodedata.normalize("NFKC", text)
    chinese = has_cjk(folded)
    p = patterns()
    spans = [(m.span(), "weekday", str(_WEEKDAY_ZH[m.group(1)])) for m in p.weekdays_zh.finditer(folded)]
    spans += [(m.span(1), "name", m.group(1)) for m in p.zh_person.finditer(folded)] if chinese else []
    for match in p.order_mark.finditer(folded):
        word, lower = match.group(), match.group().casefold()
        unit = p.unit.match(folded, match.end())
        if lower in _WEEKDAYS_EN or (word[0].isupper() and lower in _MONTHS_EN):
            kind, calendar = ("weekday", _WEEKDAYS_EN) if lower in _WEEKDAYS_EN else ("month", _MONTHS_EN)
            spans.append((match.span(), kind, str(calendar.index(lower) + 1)))
        elif word[0].isdigit() or has_cjk(word) or lower in _EN_NUMBERS:
            spans.append((match.span(), _fold(unit.group(1)) if unit else "", _EN_NUMBERS.get(lower, word)))
        elif chinese or word[0].isupper() and (
            not p.sentence_start.search(folded[: match.start()]) or background_share(_fold(word)) < FIRST_NAME_SHARE
        ):
            spans.append((match.span(), "name", _fold(word)))
    spans.sort()
    marks = [*dict.fromkeys((kind, value) for (start, _), kind, value in spans
                            if not any(s < start < e for (s, e), _, _ in spans))]  # 五 of 周五 is the weekday's
    rest = [_fold(m.group()) for m in re.finditer(r"[\u4e00-\u9fff]|[A-Za-z]+", folded)
            if not any(s <= m.start() < e for (s, e), _, _ in spans)]
    return marks, [*dict.fromkeys(rest)]


def _shared_order(a: list, b: list) -> tuple[list, list]:
    shared = set(a) & set(b)
    return [x for x in a if x in shared], [x for x in b if x in shared]


def orders_agree(a: str, b: str) -> bool:
    """Not two texts whose numbers of one unit, or whose names, come in another order while their other words
    keep theirs (order_marks): 3点 before 5点, Alice before Bob. When the other words move too it is a rewording
    (Caroline's favourite book is Becoming Nicole / Becoming Nicole is Caroline's favourite book)."""
    (marks_a, rest_a), (marks_b, rest_b) = order_marks(a), order_marks(b)
    ours, theirs = _shared_order(marks_a, marks_b)
    moved = any(
        [m for m in ours if m[0] == kind] != [m for m in theirs if m[0] == kind] for kind in {k for k, _ in ours}
    )
    rest_ours, rest_theirs = _shared_order(rest_a, rest_b)
    return not moved or rest_ours != rest_theirs


def number_words(text: str) -> tuple[str, ...]:
    """The numbers a text states in words (English number words, Chinese numerals except 一) and the days of the
    week it names (weekday 1 to 7: 周一, 星期天, Monday), normalised."""
    folded = unicodedata.normalize("NFKC", text)
    found = [_ZH_NUMERALS[ch] for ch in folded if ch in _ZH_NUMERALS]
    words = re.findall(r"[a-z]+", folded.casefold())
    found += [_EN_NUMBERS[w] for w in words if w in _EN_NUMBERS]
    found += [f"weekday {_WEEKDAY_ZH[day]}" for day in patterns().weekdays_zh.findall(folded)]
    found += [f"weekday {_WEEKDAYS_EN.index(w) + 1}" for w in words if w in _WEEKDAYS_EN]
    return tuple(sorted(found))


def _fold(word: str) -> str:
    return stem_word(word.casefold().replace("’", "'").split("'")[0])


def entities(text: str) -> frozenset[str]:
    """Name-like words: capitalised words that do not start a sentence, or that start one before another and
    are rare in ordinary English (Zoe Lowe, FIRST_NAME_SHARE), name tokens (text.name_tokens: users-api, -x,
    repoA, svcA1), titles, Latin words among Chinese."""
    folded = unicodedata.normalize("NFKC", text)
    out: set[str] = {form for _, form in name_tokens(folded)}
    p = patterns()
    words = list(p.word.finditer(folded))
    for i, match in enumerate(words):
        word = match.group()
        if not word[0].isupper():
            continue
        following = words[i + 1].group() if i + 1 < len(words) else ""
        if not p.sentence_start.search(folded[: match.start()]) or (
            following[:1].isupper() and background_share(_fold(word)) < FIRST_NAME_SHARE
        ):
            out.add(_fold(word))
    for groups in p.title.findall(folded):
        out.update(normalise_title(g) for g in groups if g)
    if re.search(r"[\u4e00-\u9fff]", folded):
        out.update(_fold(w) for w in p.latin_in_cjk.findall(folded))
        out.update(p.zh_person.findall(folded))
    return frozenset(out)


def normalise_title(title: str) -> str:
    return "".join(ch for ch in unicodedata.normalize("NFKC", title).casefold() if ch.isalnum())


def _words(text: str) -> tuple[set[str], list[str]]:
    """A text's words as entities are written (folded words and name tokens), and its Latin pieces in order."""
    folded = unicodedata.normalize("NFKC", text)
    words = {_fold(w) for w in patterns().word.findall(folded)} | {form for _, form in name_tokens(folded)}
    return words, [stem_word(run) for run, cjk in runs(folded) if not cjk]


def _mentions(text: str, entity: str, source: str) -> bool:
    """Does `text` name `entity`, an entity of `source`? A word of `source` as that word (never inside another:
    a, b), a name token also as its pieces in a row (night-shift, night shift); a title or a Chinese name as a
    part of the folded text."""
    words, pieces = _words(text)
    if entity in words:
        return True
    parts = [part for part in re.split(r"[^a-z0-9]+", entity) if part]
    if len(parts) > 1 and any(pieces[i : i + len(parts)] == parts for i in range(len(pieces))):
        return True
    return entity not in _words(source)[0] and entity in normalise_title(text)


# jieba's tags (text.pos_tags) of words that name a thing: nouns, proper nouns (nz, nt organisation, ns place, nr
# person), abbreviations (j) and verbal nouns (vn: 微信, 设置).
_THING_TAGS = frozenset({"n", "ng", "nl", "nz", "nt", "ns", "nr", "nrt", "nrfg", "j", "vn"})


def things(text: str) -> frozenset[str]:
    """The Chinese words of two characters or more a text names a particular thing with (_THING_TAGS, rarer
    than THING_SHARE in ordinary text), the subject words (用户) and relatives (compared as relatives) aside."""
    return frozenset(
        word for word, flag in pos_tags(strip_subject(unicodedata.normalize("NFKC", text)))
        if flag in _THING_TAGS and len(word) > 1 and has_cjk(word) and word not in _KIN
        and background_share(word) < THING_SHARE
    )


def _things_agree(a: str, b: str) -> bool:
    """No thing one text names (things) shares a character with the other: 微信支付密码 / 支付密码 and 开机密码 /
    登录密码 name other accounts; 旅行 / 旅游 share one and may be a rewording."""
    return not any(
        not any(ch in other for ch in word)
        for text, other in ((a, b), (b, a))
        for word in things(text)
    )


# Words that contain a negation character without negating anything (非常 = very).
_NOT_NEGATIONS = ("非常", "无论", "莫名", "未来")


def _numbers_and_negations(text: str) -> tuple[tuple[str, ...], int]:
    for word in _NOT_NEGATIONS:
        text = text.replace(word, "")
    return numbers_and_negations(text)


def relatives(text: str) -> frozenset[str]:
    """The family members a text names (妈妈 and mom are one: mother)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    found = {_KIN[word] for word in patterns().kin_zh.findall(folded)}
    return frozenset(found | {_KIN[word] for word in re.findall(r"[a-z][a-z-]*", folded) if word in _KIN})


def facts_agree(a: str, b: str) -> bool:
    """Same numbers, same negations, the same relatives when both name some, every entity of each text named in
    the other, and no thing of one (things) the other does not name."""
    if _numbers_and_negations(a) != _numbers_and_negations(b) or number_words(a) != number_words(b):
        return False
    kin_a, kin_b = relatives(a), relatives(b)
    if kin_a and kin_b and kin_a != kin_b:
        return False
    return (
        all(_mentions(b, e, a) for e in entities(a))
        and all(_mentions(a, e, b) for e in entities(b))
        and _things_agree(a, b)
    )
