"""How similar two vectors must be for their texts to state the same fact, per embedder and language.

Relevance (calibration.py) asks "is this about the same thing?"; a near-duplicate needs "is this the same
fact?", a much higher bar: different facts about one person on one theme can be very close in a neural
model's space. So, once per embedder (cached in store_meta), pocketmem embeds two reference sets per language:

    SAME_PERSON  different facts about one person, several on the same theme
                 -> distinct = the highest similarity of any two of them
    RESTATED     the same fact said again in other words (same names and numbers)
                 -> lowest = the lowest similarity of the pairs, restated = their median

    threshold = max(distinct + MARGIN, lowest - MARGIN): as close to a restatement as the reference's
                restatements are (a different fact on the same theme can come closer than the reference's
                own distinct facts do), and never within MARGIN of a known different fact. It is used only
                when restated >= threshold: the model tells a restated fact from a different fact about
                the same person in this language. Otherwise (a lexical embedder,
                or a model that cannot read the language: all-MiniLM on Chinese) there is no similarity rule
                for the language, and only the word-level rules of duplicates.near_duplicate apply.

The reference sentences are not the benchmark's (bench/data/distinct_facts.jsonl), so the benchmark measures it.

For the default embedder the thresholds are fitted instead (FITTED, from `python bench/fit_duplicates.py`): per
language, the closest two distinct facts of bench/data/distinct_facts.jsonl that agree on facts, plus 0.02. The
reference sets above would put English at 0.815, below a pair of distinct facts (0.834), and a false duplicate
loses a fact.
"""

from __future__ import annotations

import itertools
import json
import statistics
from collections.abc import Sequence

from pocketmem.providers.embeddings import Embedder
from pocketmem.store.base import MetaStore

MARGIN = 0.05
LANGUAGES = ("zh", "en")
FITTED: dict[str, dict[str, float | None]] = {
    "use:universal-sentence-encoder-multilingual-3": {"zh": 0.812, "en": 0.854},
}

SAME_PERSON = {
    "en": (
        "Priya joined a queer book club at the community centre.",
        "Priya spoke at a pride event at her old high school.",
        "Priya volunteers on a helpline for LGBTQ teenagers.",
        "Priya is training to become a family therapist.",
        "Priya plays football for a women's league on Sundays.",
        "Priya tore a ligament in her knee during a football match.",
        "Priya's football team won the regional cup last spring.",
        "Priya is saving up to adopt a child.",
        "Priya's father runs a spice shop in Leicester.",
        "Priya moved to Manchester for her master's degree.",
        "Priya painted a mural of a tiger in her bedroom.",
        "Priya sold one of her paintings at a local art fair.",
        "Priya is learning to cook her grandmother's curry recipes.",
        "Priya went hiking in the Lake District with her cousins.",
    ),
    "zh": (
        "阿杰参加了公司组织的羽毛球比赛。",
        "阿杰在羽毛球比赛里扭伤了手腕。",
        "阿杰每周三晚上去体育馆打羽毛球。",
        "阿杰去年从杭州调到了深圳的分公司。",
        "阿杰在深圳租了一间靠近地铁的公寓。",
        "阿杰的女儿今年上小学一年级。",
        "阿杰给女儿报了一个钢琴班。",
        "阿杰的父亲退休后在老家种菜。",
        "阿杰正在备考注册会计师。",
        "阿杰负责公司的年度审计项目。",
        "阿杰喜欢拍城市夜景的照片。",
        "阿杰的照片在摄影比赛里拿了三等奖。",
        "阿杰最近在学做广东早茶点心。",
        "阿杰国庆节带家人去桂林旅游。",
    ),
}

RESTATED = {
    "en": (
        ("Priya's father runs a spice shop in Leicester.", "Priya's dad owns a spice shop in Leicester."),
        ("Priya moved to Manchester for her master's degree.", "Priya relocated to Manchester to do a master's."),
        (
            "Priya plays football for a women's league on Sundays.",
            "On Sundays Priya plays in a women's football league.",
        ),
        ("Priya is training to become a family therapist.", "Priya is studying to be a family therapist."),
        ("The user is allergic to peanuts.", "The user has a peanut allergy."),
        ("The user's cat is called Snowball.", "The user has a cat named Snowball."),
        ("Tom drinks two cups of coffee every morning.", "Every morning Tom has two cups of coffee."),
        ("Anna works as a nurse at the city hospital.", "Anna is a nurse at the city hospital."),
    ),
    "zh": (
        ("阿杰的父亲退休后在老家种菜。", "阿杰的爸爸退休以后回老家种菜了。"),
        ("阿杰去年从杭州调到了深圳的分公司。", "去年阿杰从杭州被调去深圳分公司。"),
        ("阿杰正在备考注册会计师。", "阿杰在准备注册会计师考试。"),
        ("阿杰每周三晚上去体育馆打羽毛球。", "每周三晚上阿杰都去体育馆打羽毛球。"),
        ("用户对花生过敏。", "用户吃花生会过敏。"),
        ("用户的猫叫小白。", "用户养的猫名叫小白。"),
        ("小王每天早上喝两杯咖啡。", "小王每天早上都要喝两杯咖啡。"),
        ("安娜是市医院的护士。", "安娜在市医院当护士。"),
    ),
}


def _dot(u: Sequence[float], v: Sequence[float]) -> float:
    return sum(a * b for a, b in zip(u, v, strict=True))


async def measure(embedder: Embedder) -> dict[str, float | None]:
    """Per language: the similarity at or above which two texts (that agree on facts) are the same fact."""
    out: dict[str, float | None] = {}
    for lang in LANGUAGES:
        facts = await embedder.embed_many(list(SAME_PERSON[lang]))
        distinct = max(_dot(u, v) for u, v in itertools.combinations(facts, 2))
        flat = [text for pair in RESTATED[lang] for text in pair]
        vectors = await embedder.embed_many(flat)
        pairs = [_dot(vectors[i], vectors[i + 1]) for i in range(0, len(vectors), 2)]
        restated = statistics.median(pairs)
        threshold = max(distinct + MARGIN, min(pairs) - MARGIN)
        out[lang] = threshold if restated >= threshold and threshold < 1.0 else None
    return out


class Sameness:
    """The store's cached same-fact thresholds for its embedder (measured once, kept in store_meta)."""

    def __init__(self, store: MetaStore, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._thresholds: dict[str, float | None] | None = None

    @property
    def key(self) -> str:
        # Under calibration: so reindexing (which forgets every calibration:* key) measures it again.
        return f"calibration:sameness:{self.embedder.tag}"

    async def thresholds(self) -> dict[str, float | None]:
        if self._thresholds is None:
            if self.embedder.lexical:
                self._thresholds = dict.fromkeys(LANGUAGES)
                return self._thresholds
            if self.embedder.tag in FITTED:
                self._thresholds = dict(FITTED[self.embedder.tag])
                return self._thresholds
            cached = await self.store.get_meta(self.key)
            if cached is not None:
                self._thresholds = json.loads(cached)
            else:
                self._thresholds = await measure(self.embedder)
                await self.store.set_meta(self.key, json.dumps(self._thresholds))
        return self._thresholds

    def known(self, lang: str) -> float | None:
        """The threshold if already measured (None: no similarity rule); never touches the store."""
        return self._thresholds.get(lang) if self._thresholds is not None else None

    def reset(self) -> None:
        self._thresholds = None
