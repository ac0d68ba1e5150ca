"""Which attribute of whom a memory states: the slot rule that lets the newer fact win without `supersedes`.

A fact changes when the same attribute (slot) of the same person gets a new value: 用户住在北京 then
我上个月搬到杭州了 (where the user lives), 用户用的手机是 iPhone 13 then 用户现在用小米 14 (the user's
phone). No neural model tells these apart here, so the rule is a small lexicon of general cue words per
slot, in Chinese and English (`SLOTS`), plus who the slot belongs to and, for slots that hold many values
at once (what someone likes, a weekly schedule, a plan), a distinctive word both memories share.

    slot      a cue word of SLOTS found in the text (住/搬/live/moved: home; 手机/iPhone/phone: phone …)
    subject   the last party named before the cue: 用户/我/I/we -> the user; a relation word (妹妹, mom) or
              a name (jieba's person names where a subject stands, capitalised English words) -> that
              person; a name right after a relation word (妹妹林悦, sister Lily) is the same person, also in
              other memories (`alias_map`); nothing named -> the user
    things    the values the text names: jieba's proper nouns and rare common nouns, English words written
              with capitals or rare, numbers
    changed   a change word (搬到, 换成, 不再, moved, switched, no longer …), or a present-tense word (现在,
              now) with a thing the older text does not name

A newer text is a version of an older one (`same_slot`) when they share a slot with the same subject, a
thing if the slot is keyed, and the newer says it changed. Pure: text in, descriptions out.
"""

from __future__ import annotations

import importlib
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pocketmem.core import termstats
from pocketmem.core.text import (
    EN_QUERY_FILLER,
    EN_STOP_TERMS,
    ZH_STOP_TERMS,
    guess_language,
    has_cjk,
    segmenter,
    stem_word,
)

USER = "user"
OTHER = "other"  # he / she / they: someone, not the user
THING_SHARE = 0.002  # a Chinese common noun rarer than this in ordinary text is distinctive (咖啡, 羽毛球)
RARE_SHARE = 0.0002  # an English word in lower case rarer than this is distinctive (stipend, kubectl)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Slot:
    name: str
    zh: tuple[str, ...]
    en: tuple[str, ...]
    keyed: bool = False  # holds several values at once: versions must also share a thing
    unless: tuple[str, ...] = ()  # words that say the cue is about something else (住 on a trip: 出差)
    broad: bool = False  # its cues also name the topic, not only the attribute: a version must say it changed
    needs: tuple[str, ...] = ()  # the slot applies only to texts that also hold one of these (猫 for a name)
    pattern: re.Pattern[str] | None = None  # cue phrases a word list cannot say (在…工作, work at)


def _slot(
    name: str,
    zh: str,
    en: str,
    *,
    keyed: bool = False,
    broad: bool = False,
    unless: str = "",
    needs: str = "",
    pattern: str = "",
) -> Slot:
    compiled = re.compile(pattern, re.IGNORECASE) if pattern else None
    return Slot(
        name, tuple(zh.split()), tuple(en.split()), keyed, tuple(unless.split()), broad, tuple(needs.split()), compiled
    )


SLOTS: tuple[Slot, ...] = (
    _slot(
        "home",
        "住 搬 搬家 租房",
        "live lives living lived move moved moving relocated",
        broad=True,
        unless="出差 旅行 旅游 酒店 民宿 度假 住院 trip hotel vacation travel traveling",
    ),
    _slot("commute", "通勤 地铁 公交 骑车 上班路上", "commute commuting subway", broad=True),
    _slot(
        "work",
        "入职 跳槽 辞职 离职 职位 岗位 调到 升职 实习",
        "job employer joined quit hired role position promoted intern",
        broad=True,
        pattern=(
            r"在[^，。,.；;]{1,12}?(?:工作|上班)|工作是|的工作|\bwork(?:s|ed|ing)? (?:at|as|for|in)\b"
            r"|(?:是|当|做)(?:一名|一个)?(?:工程师|程序员|产品经理|设计师|老师|医生|护士|律师|会计)"
            r"|\b(?:am|is|as) an? (?:\w+ )?(?:engineer|developer|designer|teacher|doctor|nurse|lawyer|accountant)\b"
        ),
    ),
    _slot("duty", "负责", "responsible charge", keyed=True, broad=True),
    _slot("manager", "领导 上司 老板 经理 主管", "boss manager supervisor"),
    _slot(
        "partner",
        "男朋友 女朋友 男友 女友 老公 老婆 丈夫 妻子 对象 伴侣",
        "boyfriend girlfriend husband wife partner fiance fiancee",
    ),
    _slot(
        "study",
        "读书 读研 读博 上学 学校 毕业 研究生 大学 本科 专业 在读",
        "school university college graduated graduate studying student degree phd",
        broad=True,
    ),
    _slot("exam", "认证 考证 备考 考试 证书", "certification certificate certified exam"),
    _slot("phone", "手机 iPhone 安卓", "phone smartphone iphone android"),
    _slot("computer", "电脑 笔记本 台式机 MacBook ThinkPad", "laptop computer macbook thinkpad"),
    _slot("car", "汽车 买车 卖车 车子 新车 电车 有车 的车 开一辆 特斯拉", "car vehicle tesla", broad=True),
    _slot("weight", "体重 斤 公斤 减肥 增重", "weight weigh weighs kg kilos pounds lbs"),
    _slot("salary", "工资 薪水 月薪 年薪 收入 补助 津贴", "salary pay income stipend wage"),
    _slot("cat", "叫 名字 改名 取名", "name named called renamed", broad=True, needs="猫 cat kitten"),
    _slot("dog", "叫 名字 改名 取名", "name named called renamed", broad=True, needs="狗 dog puppy"),
    _slot("blog", "博客", "blog"),
    _slot("editor", "编辑器 Neovim Vim Emacs VSCode", "editor ide neovim vim emacs vscode", pattern=r"\bvs ?code\b"),
    _slot(
        "likes",
        "喜欢 讨厌 偏好 爱吃 爱喝 最爱 习惯 戒 改喝 改吃",
        "like likes prefer prefers love hate enjoy favorite favourite",
        keyed=True,
        broad=True,
    ),
    _slot("drink", "喝 咖啡 茶", "drink drinks coffee tea", keyed=True, broad=True),
    _slot(
        "schedule",
        "每天 每周 每月 周一 周二 周三 周四 周五 周六 周日 周末 早上 晚上 改到",
        "every daily weekly monday tuesday wednesday thursday friday saturday sunday weekend morning evening",
        keyed=True,
        broad=True,
    ),
    _slot("plan", "计划 打算 行程 安排", "plan plans planning trip", keyed=True, broad=True),
    _slot(
        "stack",
        "框架 部署 搭建 技术栈",
        "framework stack deployed hosted built switched migrated",
        keyed=True,
        broad=True,
    ),
)

# 住 that is not about a home: 记住, 忍不住, 住院, 住宿 …
_ZH_NOT_HOME_BEFORE = frozenset("记忍挡抓停愣拦接守保止顶稳扛卡绊憋")
_ZH_NOT_HOME_AFTER = frozenset("院宿嘴手口")

# Words that say a value changed (strong) and words that only place a statement in the present (weak: 现在,
# now): a weak one counts when the newer text also names something the older does not (a new value).
CHANGE_ZH = (
    "搬到 搬去 搬家 换成 换到 换了 改成 改到 改用 改喝 改吃 调到 跳槽 辞职 离职 入职 毕业 不再 戒 "
    "降到 涨到 升到 变成 分手 结婚 离婚 改名 新买 买了 卖了 转到 新养"
).split()
CHANGE_EN = frozenset(
    "moved move relocated switched switch changed change anymore quit left joined "
    "became become graduated married divorced renamed sold bought".split()
)
PRESENT_ZH = ("现在", "如今", "已经", "目前")
PRESENT_EN = frozenset("now currently new newly".split())

RELATIONS: dict[str, str] = {
    **{w: "mother" for w in "妈妈 母亲 老妈 妈 mom mother mum".split()},
    **{w: "father" for w in "爸爸 父亲 老爸 爸 dad father".split()},
    **{w: "parents" for w in "爸妈 父母 parents".split()},
    **{w: "sister" for w in "妹妹 姐姐 妹 姐 sister".split()},
    **{w: "brother" for w in "哥哥 弟弟 哥 弟 brother".split()},
    **{w: "child" for w in "儿子 女儿 孩子 son daughter kid child".split()},
    **{w: "partner" for w in "老公 老婆 丈夫 妻子 男朋友 女朋友 男友 女友 对象 "
        "husband wife boyfriend girlfriend".split()},
    **{w: "friend" for w in "朋友 同学 室友 friend roommate classmate".split()},
    **{w: "colleague" for w in "同事 colleague coworker".split()},
    **{w: "grandparent" for w in "爷爷 奶奶 外公 外婆 姥姥 姥爷 grandma grandpa grandmother grandfather".split()},
}
USER_WORDS = frozenset("用户 我 我们 咱们 咱 主人 i me my we our us user".split())
OTHER_WORDS = frozenset("他 她 他们 她们 he she they his her their".split())
_CLAUSE_END = frozenset("，。；：！？,.;:!?、和跟与同“\"（(")
_KNOWN_PARTIES = frozenset({USER, OTHER, *RELATIONS.values()})
_JOINERS = frozenset({"和", "跟", "与", "同", "、", "and", "with", "&"})
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z']*")
_ZH_PARTY = re.compile("|".join(sorted((re.escape(w) for w in [*RELATIONS, *USER_WORDS, *OTHER_WORDS] if has_cjk(w)),
                                       key=len, reverse=True)))
_NAME_FLAGS = frozenset({"nr", "nrt", "nrfg"})
_PROPER_FLAGS = frozenset({"nr", "nrt", "nrfg", "ns", "nt", "nz"})  # names of people, places, bodies, things
_NOUN_FLAGS = frozenset({"n", "vn"})


@lru_cache(maxsize=1)
def _tagger() -> Any:
    """jieba's part-of-speech tagger (person names, nouns), over the segmenter's loaded dictionary."""
    segmenter()
    return importlib.import_module("jieba.posseg")


@lru_cache(maxsize=4096)
def _tags(text: str) -> tuple[Any, ...]:
    """(word, flag) pairs of `text`, tagged once."""
    return tuple(_tagger().cut(text))


@dataclass(frozen=True)
class Fact:
    slots: dict[str, frozenset[str]]  # slot name -> its subject (one person, possibly under two names)
    things: frozenset[str]
    change: bool  # says a value changed (搬到, switched)
    present: bool = False  # places the statement in the present (现在, now)
    aliases: frozenset[frozenset[str]] = frozenset()  # a relation and the name written right after it


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def _cue_positions(text: str, slot: Slot) -> Iterator[int]:
    """Where the slot's cues occur in `text` (Chinese by substring, English by stemmed word)."""
    lowered = text.casefold()
    for cue in slot.zh:
        start = lowered.find(cue.casefold())
        while start >= 0:
            if not (cue == "住" and _not_home(text, start)):
                yield start
            start = lowered.find(cue.casefold(), start + 1)
    if slot.pattern is not None:
        yield from (match.start() for match in slot.pattern.finditer(text))
    stems = _stems(slot.en)
    for match in _LATIN_WORD.finditer(text):
        if stem_word(match.group().casefold()) in stems:
            yield match.start()


def _not_home(text: str, at: int) -> bool:
    before = text[at - 1] if at > 0 else ""
    after = text[at + 1] if at + 1 < len(text) else ""
    return before in _ZH_NOT_HOME_BEFORE or after in _ZH_NOT_HOME_AFTER or text[max(0, at - 2) : at] == "不住"


@lru_cache(maxsize=64)
def _stems(words: tuple[str, ...]) -> frozenset[str]:
    return frozenset(stem_word(w.casefold()) for w in words)


def _parties(text: str) -> list[tuple[int, int, frozenset[str]]]:
    """(start, end, who) for each party named in `text`, in order."""
    found: list[tuple[int, int, frozenset[str]]] = []
    for match in _ZH_PARTY.finditer(text):
        found.append((match.start(), match.end(), _who(match.group())))
    if has_cjk(text):
        at = 0
        for pair in _tags(text):
            start = text.find(pair.word, at)
            at = start + len(pair.word) if start >= 0 else at
            if pair.flag in _NAME_FLAGS and has_cjk(pair.word) and len(pair.word) >= 2 and _subject_place(text, start):
                found.append((start, start + len(pair.word), frozenset({pair.word})))
    english = guess_language(text) == "en"  # in Chinese text, Latin words are products and acronyms
    for match in _LATIN_WORD.finditer(text):
        word = match.group().removesuffix("'s")
        low = word.casefold()
        if low in RELATIONS or low in USER_WORDS or low in OTHER_WORDS:
            found.append((match.start(), match.start() + len(word), _who(low)))
        elif english and word.istitle() and not _is_common(low):
            found.append((match.start(), match.start() + len(word), frozenset({low})))
    return sorted(found, key=lambda p: p[0])


def _subject_place(text: str, start: int) -> bool:
    """A Chinese name counts as a party where a subject stands: at the start of a clause, after 和/跟, or
    right after a relation word (妹妹林悦). jieba also tags some places as names (余杭), found mid-clause."""
    if start < 0:
        return False
    before = text[:start].rstrip()
    return not before or before[-1] in _CLAUSE_END or before.endswith(tuple(w for w in RELATIONS if has_cjk(w)))


def _who(word: str) -> frozenset[str]:
    word = word.casefold()
    if word in USER_WORDS:
        return frozenset({USER})
    if word in OTHER_WORDS:
        return frozenset({OTHER})
    return frozenset({RELATIONS[word]})


@lru_cache(maxsize=1)
def _all_cue_stems() -> frozenset[str]:
    return frozenset(s for slot in SLOTS for s in _stems(slot.en))


def _is_common(word: str) -> bool:
    """A capitalised word that is no name: a stop word, question filler or slot cue (Where, My, Moved)."""
    return word in EN_STOP_TERMS or word in EN_QUERY_FILLER or _is_cue(word)


def _is_cue(word: str) -> bool:
    return stem_word(word) in _all_cue_stems()


def subject_before(parties: list[tuple[int, int, frozenset[str]]], text: str, at: int) -> frozenset[str]:
    """Who the slot at `at` belongs to: the last party named before it, with a name written right after a
    relation word (妹妹林悦) or joined by 和/and taken as the same group; nobody named -> the user."""
    group: frozenset[str] = frozenset()
    end = -1
    for start, stop, who in parties:
        if stop > at:
            break
        gap = text[end:start].strip() if end >= 0 else None
        if gap in _JOINERS or (gap in ("", "'s") and _is_name(who) and not _is_name(group)):
            group = group | who  # 用户和女朋友; 妹妹林悦, sister Lily
        else:
            group = who  # 用户的妹妹, my sister: the relation is the subject
        end = stop
    return group or frozenset({USER})


def _is_name(who: frozenset[str]) -> bool:
    return bool(who) and not who & _KNOWN_PARTIES


def things_of(text: str) -> frozenset[str]:
    """Distinctive words: jieba's proper nouns and its common nouns rarer than THING_SHARE (2+ characters);
    English words written with a capital (names, products) or rarer than RARE_SHARE; numbers."""
    out: set[str] = set()
    if has_cjk(text):
        for pair in _tags(text):
            word = pair.word.strip()
            if len(word) < 2 or not has_cjk(word) or word in ZH_STOP_TERMS or word in USER_WORDS:
                continue
            rare = pair.flag in _NOUN_FLAGS and termstats.background_share(word) < THING_SHARE
            if pair.flag in _PROPER_FLAGS or rare:
                out.add(word)
    for match in _LATIN_WORD.finditer(text):
        word = match.group().removesuffix("'s")
        low = word.casefold()
        if low in USER_WORDS or len(low) < 2 or _is_common(low):
            continue
        named = word != low  # Denver, MacBook, iPhone: names and products are written with capitals
        if named or termstats.background_share(stem_word(low)) < RARE_SHARE:
            out.add(stem_word(low))
    out.update(_NUMBER.findall(text))  # 80 公斤 / 74 公斤, iPhone 13 / 小米 14: numbers are values
    return frozenset(out)


def says_change(text: str) -> tuple[bool, bool]:
    """(says a value changed, places the statement in the present)."""
    lowered = text.casefold()
    words = {w.casefold() for w in _LATIN_WORD.findall(text)}
    change = any(cue in lowered for cue in CHANGE_ZH) or bool(words & CHANGE_EN) or "no longer" in lowered
    return change, any(cue in lowered for cue in PRESENT_ZH) or bool(words & PRESENT_EN)


def changed(older: Fact, newer: Fact) -> bool:
    """Does `newer` say the value changed: a change word, or a present-tense word with a new thing named?"""
    return newer.change or (newer.present and bool(newer.things - older.things))


@lru_cache(maxsize=16384)
def describe(text: str) -> Fact:
    """The slots `text` fills, for whom; its distinctive things; whether it says something changed.
    The part-of-speech tagger (the costly part, ~1 ms) runs only for a text that names a slot."""
    text = _fold(text)
    lowered = text.casefold()
    firsts: dict[str, int] = {}
    for slot in SLOTS:
        if any(word in lowered for word in slot.unless):
            continue
        if slot.needs and not any(word in lowered for word in slot.needs):
            continue
        first = min(_cue_positions(text, slot), default=None)
        if first is not None:
            firsts[slot.name] = first
    if not firsts:
        return Fact({}, frozenset(), *says_change(text))
    parties = _parties(text)
    slots = {name: subject_before(parties, text, first) for name, first in firsts.items()}
    return Fact(slots, things_of(text), *says_change(text), _aliases(parties, text))


def _aliases(parties: list[tuple[int, int, frozenset[str]]], text: str) -> frozenset[frozenset[str]]:
    """妹妹林悦, my sister Lily: the relation and the name are one person."""
    out = set()
    for (_, end, first), (start, _, second) in zip(parties, parties[1:], strict=False):
        if text[end:start].strip() in ("", "'s") and not _is_name(first) and _is_name(second):
            if not first & {USER, OTHER}:
                out.add(first | second)
    return frozenset(out)


Aliases = dict[str, frozenset[str]]


def alias_map(facts: Iterable[Fact]) -> Aliases:
    """Each party with every name some memory gives it (用户的妹妹林悦 makes 林悦 and sister one person)."""
    out: dict[str, frozenset[str]] = {}
    for fact in facts:
        for group in fact.aliases:
            merged = frozenset().union(group, *(out.get(p, frozenset()) for p in group))
            for party in merged:
                out[party] = merged
    return out


def _expand(who: frozenset[str], aliases: Aliases | None) -> frozenset[str]:
    if not aliases:
        return who
    return frozenset().union(who, *(aliases.get(p, frozenset()) for p in who))


def same_person(a: frozenset[str], b: frozenset[str], aliases: Aliases | None = None) -> bool:
    return bool(_expand(a, aliases) & _expand(b, aliases))


_QUESTION_ZH = ("吗", "呢", "么", "什么", "哪", "几", "多少", "多久", "怎么", "是否", "有没有", "是不是", "还是")
_QUESTION_EN = frozenset("what where which who whom whose when why how do does did am is are was were can could "
                         "should will would have has any".split())


def is_question(text: str) -> bool:
    """Does the message ask something (？, 吗, 哪, what, where, do I …)? Chat and statements do not."""
    if "?" in text or "？" in text:
        return True
    if any(word in text for word in _QUESTION_ZH):
        return True
    first = _LATIN_WORD.search(text)
    return first is not None and first.group().casefold() in _QUESTION_EN


KEYED = frozenset(slot.name for slot in SLOTS if slot.keyed)
BROAD = frozenset(slot.name for slot in SLOTS if slot.broad)


def shared_slots(older: Fact, newer: Fact, aliases: Aliases | None = None, *, strict: bool = True) -> list[str]:
    """The slots both facts fill for the same subject, keyed ones only when they also share a thing, and
    only when the newer says it changed (`strict`; otherwise that is asked of broad slots alone)."""
    out = []
    for name, subject in older.slots.items():
        other = newer.slots.get(name)
        if other is None or not same_person(subject, other, aliases):
            continue
        if name in KEYED and not older.things & newer.things:
            continue
        if (strict or name in BROAD) and not changed(older, newer):
            continue
        out.append(name)
    return out


def same_slot(older: str, newer: str) -> bool:
    """Is `newer` a later version of the fact `older` states (the same attribute of the same person)?"""
    return bool(shared_slots(describe(older), describe(newer)))


def cue_terms(names: list[str]) -> list[str]:
    """The cue words of these slots as keyword-index terms (Han words as written, English stems)."""
    out: dict[str, None] = {}
    for slot in SLOTS:
        if slot.name in names:
            for cue in slot.zh:
                out.setdefault(cue if has_cjk(cue) else stem_word(cue.casefold()), None)
            for cue in slot.en:
                out.setdefault(stem_word(cue.casefold()), None)
    return list(out)
