"""What cosine similarity means for the embedder in use, so one relevance threshold fits every model.

Cosine similarity has no common scale. For the built-in hash embedder unrelated texts score about
0; for small neural models 0.05–0.3; for some hosted models 0.7 and more; and a model that cannot
read a language (English-only models on Chinese) puts all of that language's texts close together.
So, once per embedder and per language (Chinese, English), pocketmem embeds two fixed reference sets:

    unrelated sentences -> baseline = the 95th percentile of their pairwise similarities
    paraphrase pairs    -> related  = the lower quartile of the similarities of pairs that mean the same
                           in other words (a modest paraphrase, not the easiest)

and rescales every similarity so that the baseline maps to 0 and a typical paraphrase to
PARAPHRASE_SCORE (core/similarity.py). When paraphrases do not stand out from unrelated texts
(related - baseline < similarity.MIN_SPAN: a lexical embedder, or a model that cannot read the language), the
scale falls back to baseline -> 0, identical -> 1, so no meaning is read into noise.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict

from pocketmem.core.similarity import NEUTRAL, Scale, dot, fit
from pocketmem.providers.embeddings import Embedder
from pocketmem.store.base import MetaStore

LANGUAGES = ("zh", "en")

# Pairwise unrelated on purpose: different topics, short and long.
UNRELATED = {
    "zh": (
        "用户不喜欢香菜，吃到会很反感。",
        "明天上午十点要去银行办信用卡。",
        "她家的猫叫小白，今年三岁了。",
        "季度报告周五前要交给王经理。",
        "最近胃炎，医生让暂时不要吃辣。",
        "周末喜欢去公园跑步，一般跑五公里。",
        "上次聊到想换工作，去一家做游戏的公司。",
        "家里的洗衣机坏了，需要找人来修。",
        "对花生过敏，吃了会起疹子。",
        "喜欢看科幻小说，最近在读三体。",
        "下个月要搬家到浦东，离公司近一些。",
        "服务器上的数据库备份每天凌晨三点跑。",
    ),
    "en": (
        "The Docker build needs the corporate proxy to reach the registry.",
        "I am planning a hiking trip to the Alps next summer.",
        "Prefers TypeScript strict mode and functional composition over inheritance.",
        "Our wedding anniversary is on the fourteenth of March.",
        "The PostgreSQL migration failed because of a missing index on orders.",
        "My daughter starts kindergarten in September.",
        "Learning to play the piano, practicing scales every evening.",
        "The quarterly budget meeting was moved to Thursday afternoon.",
        "Allergic to cats, so visits to friends with pets are hard.",
        "The car needs new winter tyres before December.",
        "She reads a chapter of a mystery novel before bed.",
        "The garden tomatoes were ruined by the late frost.",
    ),
}

# Same meaning, mostly different words.
PARAPHRASES = {
    "zh": (
        ("用户不吃香菜", "香菜是他的忌口"),
        ("他每天早上喝两杯咖啡", "早餐时他总要来点含咖啡因的饮品"),
        ("她的猫叫小白", "小白是她养的宠物猫"),
        ("下周二要去面试", "过几天有一场求职面谈"),
        ("最近胃不舒服，不能吃辣", "肠胃出了问题，辛辣食物暂时得忌口"),
        ("周末常去跑步", "休息日他喜欢慢跑锻炼"),
        ("准备搬到浦东住", "打算把家迁到浦东新区"),
        ("对花生过敏", "吃花生会引起过敏反应"),
    ),
    "en": (
        ("The user never eats coriander", "Cilantro is something he refuses to eat"),
        ("He drinks two cups of coffee every morning", "His breakfast always includes a caffeinated drink"),
        ("Her cat is called Snowball", "Snowball is the name of her pet cat"),
        ("There is a job interview next Tuesday", "A hiring conversation is scheduled for early next week"),
        ("Spicy food upsets his stomach lately", "Recently hot dishes have been giving him indigestion"),
        ("She goes running on weekends", "On days off she likes to jog"),
        ("They are moving to a new apartment downtown", "Their family will relocate to a flat in the city centre"),
        ("He is allergic to peanuts", "Eating peanuts gives him an allergic reaction"),
    ),
}


async def measure(embedder: Embedder) -> dict[str, Scale]:
    scales: dict[str, Scale] = {}
    for lang in LANGUAGES:
        unrelated = await embedder.embed_many(list(UNRELATED[lang]))
        flat = [text for pair in PARAPHRASES[lang] for text in pair]
        vectors = await embedder.embed_many(flat)
        scales[lang] = fit(
            [dot(u, v) for u, v in itertools.combinations(unrelated, 2)],
            [dot(vectors[i], vectors[i + 1]) for i in range(0, len(vectors), 2)],
        )
    return scales


class Calibration:
    """The store's cached scales for its embedder (measured once, kept in store_meta)."""

    def __init__(self, store: MetaStore, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._scales: dict[str, Scale] | None = None

    @property
    def key(self) -> str:
        return f"calibration:{self.embedder.tag}"

    async def scales(self) -> dict[str, Scale]:
        if self._scales is None:
            cached = await self.store.get_meta(self.key)
            if cached is not None:
                self._scales = {lang: Scale(**value) for lang, value in json.loads(cached).items()}
            else:
                self._scales = await measure(self.embedder)
                await self.store.set_meta(self.key, json.dumps({k: asdict(v) for k, v in self._scales.items()}))
        return self._scales

    async def scale(self, lang: str) -> Scale:
        return (await self.scales()).get(lang, NEUTRAL)

    def known(self, lang: str) -> Scale | None:
        """The scale if already measured; never touches the store (safe inside a write transaction)."""
        return self._scales.get(lang) if self._scales is not None else None

    def reset(self) -> None:
        self._scales = None
