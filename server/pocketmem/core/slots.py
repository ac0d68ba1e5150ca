"""Which attribute of whom a memory states: the slot rule that lets the newer fact win without `supersedes`.

A fact changes when the same attribute (slot) of the same person gets a new value: 用户住在北京 then
我上个月搬到杭州了 (where the user lives), 用户用的手机是 iPhone 13 then 用户现在用小米 14 (the user's
phone). No neural model tells these apart here, so the rule is a small lexicon of general cue words per slot,
in Chinese and English (`SLOTS`; the words are data, core/data/slot_words.tsv), plus who the slot belongs to
and, for slots that hold many values at once (what someone likes, a weekly schedule, a plan), a distinctive
word both memories share.

    slot      a cue word of SLOTS found in the text (住/搬/live/moved: home; 手机/iPhone/phone: phone …)
    subject   the last party named before the cue: 用户/我/I/we -> the user; a relation word (妹妹, mom) or
              a name (jieba's person names where a subject stands, capitalised English words) -> that
              person; a name right after a relation word (妹妹林悦, sister Lily) is the same person, also in
              other memories (`alias_map`); nothing named -> the user
    things    the values the text names: jieba's proper nouns and rare common nouns, English words written
              with capitals or rare, numbers
    changed   a change word (搬到, 换成, 不再, moved, switched, no longer …), or a present-tense word (现在,
              now) with a thing the older text does not name
    parts     the parts of a keyed slot the text names (the stack's frontend, backend, database, deployment)
    origin    the things a change names as the value it left (from Heroku to Fly.io, 从北京搬到杭州)

A move cue with an object (moved the deployment, 把服务器搬到, 仪表盘部署从阿里云搬到) moves a thing: no home.
A newer text is a version of an older one (`shared_slots`) when they share a slot with the same subject, a
thing and a part (when both name parts) if the slot is keyed, and the newer says it changed; a newer text
that names the value it left is a version only of an older one holding it. Pure: text in, descriptions out.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache

from pocketmem.core import termstats, wordlists
from pocketmem.core.text import (
    EN_QUERY_FILLER,
    EN_STOP_TERMS,
    ZH_STOP_TERMS,
    guess_language,
    has_cjk,
    pos_tags,
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
    zh: tuple[str, ...]  # Han cue words (and product names), found as written
    en: tuple[str, ...]  # Latin cue words, found by their Snowball stem
    keyed: bool = False  # holds several values at once: versions must also share a thing
    unless: tuple[str, ...] = ()  # words that say the cue is about something else (住 on a trip: 出差)
    broad: bool = False  # its cues also name the topic, not only the attribute: a version must say it changed
    needs: tuple[str, ...] = ()  # the slot applies only to texts that also hold one of these (猫 for a name)
    pattern: re.Pattern[str] | None = None  # cue phrases a word list cannot say (在…工作, work at)
    finds: tuple[str, ...] = ()  # index terms that find the texts `pattern` matches (工作 for 在…工作)
    moves: tuple[str, ...] = ()  # cues that name a move: with an object, something else moved (moved the server)
    parts: tuple[tuple[str, tuple[str, ...]], ...] = ()  # a keyed slot's parts (stack: frontend, deploy …)


_WORDS = "slot_words.tsv"  # the lexicon, as data (core/data/NOTICE.md: where each word comes from)


def _slot(name: str, *, keyed: bool = False, broad: bool = False, pattern: str = "") -> Slot:
    """A slot of the lexicon: its cue, unless, needs, finds, moves and aspect words from data/slot_words.tsv,
    its kind from here."""
    cues = wordlists.words(_WORDS, "cue")[name]
    parts = tuple(
        (part.partition(":")[2], words)
        for part, words in wordlists.words(_WORDS, "aspect").items()
        if part.partition(":")[0] == name
    )
    return Slot(
        name,
        tuple(w for w in cues if has_cjk(w)),
        tuple(w for w in cues if not has_cjk(w)),
        keyed,
        wordlists.words(_WORDS, "unless").get(name, ()),
        broad,
        wordlists.words(_WORDS, "needs").get(name, ()),
        re.compile(pattern, re.IGNORECASE) if pattern else None,
        wordlists.words(_WORDS, "finds").get(name, ()),
        wordlists.words(_WORDS, "moves").get(name, ()),
        parts,
    )


SLOTS: tuple[Slot, ...] = (
    _slot("home", broad=True),
    _slot("commute", broad=True),
    _slot(
        "work",
        broad=True,
        pattern=(
            r"在[^，。,.；;]{1,12}?(?:工作|上班)|工作是|的工作|\bwork(?:s|ed|ing)? (?:at|as|for|in)\b"
            r"|(?:是|当|做)(?:一名|一个)?(?:工程师|程序员|产品经理|设计师|老师|医生|护士|律师|会计)"
            r"|\b(?:am|is|as) an? (?:\w+ )?(?:engineer|developer|designer|teacher|doctor|nurse|lawyer|accountant)\b"
            # a trade plied somewhere (在网易做前端开发), and the questions that ask for it (where do I work?)
            r"|在[^，。,.；;]{1,12}?(?:做|当)(?:前端|后端|全栈|客户端|算法|开发|测试|运维|设计|运营|产品|销售|市场|财务|人事|研究)"
            r"|\bwhere (?:do|does|did) (?:\w+ ){1,2}(?P<at>work)\b(?! out)"
        ),
    ),
    _slot("duty", keyed=True, broad=True),
    _slot("manager"),
    _slot("partner"),
    _slot("study", broad=True),
    _slot("exam"),
    _slot("phone"),
    _slot("computer"),
    _slot("car", broad=True),
    _slot("weight"),
    _slot("salary"),
    _slot("cat", broad=True),
    _slot("dog", broad=True),
    _slot("blog"),
    _slot("editor", pattern=r"\bvs ?code\b"),
    _slot("likes", keyed=True, broad=True),
    _slot("drink", keyed=True, broad=True),
    _slot("schedule", keyed=True, broad=True),
    _slot("plan", keyed=True, broad=True),
    _slot("stack", keyed=True, broad=True),
)

# 住 that is not about a home: 记住, 忍不住, 住院, 住宿 …
_ZH_NOT_HOME_BEFORE = frozenset("记忍挡抓停愣拦接守保止顶稳扛卡绊憋")
_ZH_NOT_HOME_AFTER = frozenset("院宿嘴手口")

# Words that say a value changed (strong) and words that only place a statement in the present (weak: 现在,
# now): a weak one counts when the newer text also names something the older does not (a new value).
# Han words are found as written, Latin words as whole words.
_CHANGE = wordlists.words(_WORDS, "change")["-"]
_PRESENT = wordlists.words(_WORDS, "present")["-"]
CHANGE_ZH = tuple(w for w in _CHANGE if has_cjk(w))
CHANGE_EN = frozenset(w for w in _CHANGE if not has_cjk(w))
PRESENT_ZH = tuple(w for w in _PRESENT if has_cjk(w))
PRESENT_EN = frozenset(w for w in _PRESENT if not has_cjk(w))

# A relative named by relation (妹妹, mom -> sister, mother): data/slot_words.tsv's relation rows.
RELATIONS: dict[str, str] = {
    word: relation for relation, words in wordlists.words(_WORDS, "relation").items() for word in words
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
_THING_FLAGS = frozenset({"n", "vn", "nz", "nt"})  # a common noun, a product or a body: a thing, not a person
_OBJECT = frozenset(wordlists.words(_WORDS, "object")["-"])
_CLAUSE_STOP = "，。；：！？,;:!?\n"


@dataclass(frozen=True)
class Fact:
    slots: dict[str, frozenset[str]]  # slot name -> its subject (one person, possibly under two names)
    things: frozenset[str]
    change: bool  # says a value changed (搬到, switched)
    present: bool = False  # places the statement in the present (现在, now)
    aliases: frozenset[frozenset[str]] = frozenset()  # a relation and the name written right after it
    parts: dict[str, frozenset[str]] = field(default_factory=dict)  # keyed slot -> the parts it names
    origin: frozenset[str] = frozenset()  # the things named as the value it changed from (from X to Y)


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def _cue_positions(text: str, slot: Slot) -> Iterator[int]:
    """Where the slot's cues occur in `text` (Chinese by substring, English by stemmed word); a move cue with
    an object moves something else (`_moves_a_thing`) and does not count."""
    lowered = text.casefold()
    for cue in slot.zh:
        start = lowered.find(cue.casefold())
        while start >= 0:
            if not (cue == "住" and _not_home(text, start)) and not (
                cue in slot.moves and _moves_a_thing(text, start, start + len(cue))
            ):
                yield start
            start = lowered.find(cue.casefold(), start + 1)
    if slot.pattern is not None:
        yield from (_cue_start(match) for match in slot.pattern.finditer(text))
    stems, moves = _stems(slot.en), _stems(slot.moves)
    for match in _LATIN_WORD.finditer(text):
        stem = stem_word(match.group().casefold())
        if stem in stems and not (stem in moves and _moves_a_thing(text, match.start(), match.end())):
            yield match.start()


def _cue_start(match: re.Match[str]) -> int:
    """Where a cue phrase stands: its group `at` when the pattern marks one (the party of `where does my sister
    work` is named before `work`, not before `where`), else the whole match."""
    at = match.start("at") if "at" in match.re.groupindex else -1
    return at if at >= 0 else match.start()


def _moves_a_thing(text: str, start: int, end: int) -> bool:
    """Does the move cue at text[start:end] move a thing rather than a person? English: its object follows
    (moved the deployment, moved my desk). Chinese: 把 comes before it in its clause (把服务器搬到), or the
    clause names a thing and no party before it (仪表盘部署从阿里云搬到了腾讯云, 笼子搬到了客厅)."""
    if not has_cjk(text[start:end]):
        after = _LATIN_WORD.match(text, len(text) - len(text[end:].lstrip()))
        return after is not None and after.group().casefold() in _OBJECT
    clause = text[max(text.rfind(c, 0, start) for c in _CLAUSE_STOP) + 1 : start]
    if "把" in clause:
        return True
    subject = clause.partition("从")[0]  # 从… names where from, not who
    if not subject.strip() or _ZH_PARTY.search(subject):
        return False
    return any(flag in _THING_FLAGS and len(word) >= 2 for word, flag in pos_tags(subject))


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
        for word, flag in pos_tags(text):
            start = text.find(word, at)
            at = start + len(word) if start >= 0 else at
            if flag in _NAME_FLAGS and has_cjk(word) and len(word) >= 2 and _subject_place(text, start):
                found.append((start, start + len(word), frozenset({word})))
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
        for tagged, flag in pos_tags(text):
            word = tagged.strip()
            if len(word) < 2 or not has_cjk(word) or word in ZH_STOP_TERMS or word in USER_WORDS:
                continue
            rare = flag in _NOUN_FLAGS and termstats.background_share(word) < THING_SHARE
            if flag in _PROPER_FLAGS or rare:
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


_ORIGIN_EN = re.compile(r"\bfrom\b([^.;!?]{1,60}?)\bto\b", re.IGNORECASE)
_ORIGIN_ZH = re.compile("从([^，。；！？,;!?]{1,16}?)(?:" + "|".join(map(re.escape, CHANGE_ZH)) + ")")


def origin_of(text: str, things: frozenset[str]) -> frozenset[str]:
    """The things a change names as the value it left: from Heroku to Fly.io, 从北京搬到杭州 (a text that says
    it changed; `from 9 to 5` in a plain statement names no old value)."""
    spans = [m.group(1).casefold() for pattern in (_ORIGIN_EN, _ORIGIN_ZH) for m in pattern.finditer(text)]
    return frozenset(thing for thing in things if any(thing in span for span in spans))


def _parts(text: str, names: Iterable[str]) -> dict[str, frozenset[str]]:
    """For each keyed slot among `names` that has parts, the parts `text` names (its frontend, its deploy)."""
    lowered = text.casefold()
    stems = {stem_word(w.casefold()) for w in _LATIN_WORD.findall(text)}
    out = {}
    for slot in SLOTS:
        if slot.name in names and slot.parts:
            out[slot.name] = frozenset(
                part for part, words in slot.parts
                if any(w in lowered if has_cjk(w) else stem_word(w) in stems for w in words)
            )
    return out


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
    things, (change, present) = things_of(text), says_change(text)
    origin = origin_of(text, things) if change else frozenset()
    return Fact(slots, things, change, present, _aliases(parties, text), _parts(text, slots), origin)


def names_a_party(text: str) -> bool:
    """Does `text` name someone (我, my, 妹妹, a name)? A question that names nobody (怎么走, is it smart to pay
    off a mortgage early?) asks about the world, not about a slot of the user's."""
    return bool(_parties(_fold(text)))


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
    """The slots both facts fill for the same subject, keyed ones only when they also share a thing and name
    no different parts of it (the frontend is not the deployment, whatever project both name), and only when
    the newer says it changed (`strict`; otherwise that is asked of broad slots alone). A newer text that
    names the value it left (from Heroku to Fly.io) is a version only of an older one holding that value."""
    if newer.origin and older.things and not newer.origin & older.things:
        return []
    out = []
    for name, subject in older.slots.items():
        other = newer.slots.get(name)
        if other is None or not same_person(subject, other, aliases):
            continue
        if name in KEYED and not older.things & newer.things:
            continue
        mine, theirs = older.parts.get(name), newer.parts.get(name)
        if mine and theirs and not mine & theirs:
            continue
        if (strict or name in BROAD) and not changed(older, newer):
            continue
        out.append(name)
    return out


def cue_terms(names: list[str]) -> list[str]:
    """The cue words of these slots as keyword-index terms (Han words as written, English stems)."""
    out: dict[str, None] = {}
    for slot in SLOTS:
        if slot.name in names:
            for cue in slot.zh:
                out.setdefault(cue if has_cjk(cue) else stem_word(cue.casefold()), None)
            for cue in (*slot.en, *slot.finds):
                out.setdefault(cue if has_cjk(cue) else stem_word(cue.casefold()), None)
    return list(out)
