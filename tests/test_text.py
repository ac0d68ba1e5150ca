import pytest

from pocketmem.base.errors import InvalidInput
from pocketmem.core.text import (
    clean_text,
    content_hash,
    fts_match_expression,
    guess_language,
    index_terms,
    own_language,
    query_terms,
    weighted_query_terms,
)


def test_two_character_chinese_words_are_single_terms():
    terms = index_terms("我不喜欢香菜")
    assert "香菜" in terms and "小白" not in terms
    assert "小白" in index_terms("用户养了一只叫小白的猫")


def test_query_terms_drop_filler_and_keep_mixed_words():
    assert query_terms("Docker 代理")[:2] == ["docker", "代理"]
    assert query_terms("Nuxt 4") == ["nuxt", "4"]
    assert "用户" not in query_terms("用户喜欢什么")
    assert query_terms("猫") == ["猫"]


def test_plurals_meet_singulars():
    assert index_terms("preferences") == query_terms("preference")


def test_english_words_are_stemmed_alike():
    assert query_terms("running cats") == index_terms("run cat")
    assert set(query_terms("allergies")) <= set(index_terms("allergy"))


def test_query_words_come_from_the_segmenter_not_pairs_across_words():
    terms = weighted_query_terms("一天要喝几杯咖啡")
    assert "天要" not in terms and terms["咖啡"] == 1.0 and terms["一天"] == 1.0
    # a two-character word brings its characters at half weight: 猫叫 (one segmenter word) still finds 猫
    assert weighted_query_terms("我的猫叫什么名字")["猫"] == 0.5


def test_long_words_are_indexed_whole_and_in_pairs():
    terms = index_terms("清明想去普陀山")
    assert {"普陀山", "普陀", "陀山", "普"} <= set(terms)


def test_fts_expression_quotes_everything():
    expr = fts_match_expression(['a"b', "NEAR(", "OR", "-x", "*"])
    assert expr == '"a""b" OR "NEAR(" OR "OR" OR "-x" OR "*"'
    assert fts_match_expression([]) is None


@pytest.mark.parametrize(
    ("text", "lang"),
    [("我能吃香菜吗", "zh"), ("Docker 代理", "zh"), ("What did we talk about?", "en"), ("I love 火锅 so much", "en")],
)
def test_language_guess(text, lang):
    assert guess_language(text) == lang


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("👍", None), ("？？", None), ("2333", None), ("😂😂", None), ("", None),
        ("ok", None), ("OK!", None), ("lol", None), ("okay", None), ("I see", None), ("ｏｋ", None),
        ("哈哈", "zh"), ("ok 好的", "zh"), ("what did I say about my cat?", "en"), ("yes please", "en"),
        ("thanks", "en"), ("ok ok ok", "en"),
    ],
)
def test_a_text_has_a_language_of_its_own_only_with_words(text, lang):
    assert own_language(text) == lang


def test_clean_text_rules():
    assert clean_text("  hi\x00 there \x07 ", "content", max_chars=50) == "hi there"
    with pytest.raises(InvalidInput, match="content: must not be empty"):
        clean_text(" \n\t ", "content", max_chars=50)
    with pytest.raises(InvalidInput, match="content: is 51 characters; the limit is 50"):
        clean_text("x" * 51, "content", max_chars=50)
    with pytest.raises(InvalidInput, match="unpaired surrogate"):
        clean_text("bad \ud800 text", "content", max_chars=50)


def test_duplicate_key_ignores_case_width_spacing_and_punctuation():
    assert content_hash("用户不喜欢香菜。") == content_hash("用户不喜欢香菜")
    assert content_hash("Likes  TypeScript!") == content_hash("likes typescript")
    assert content_hash("ＡＢＣ") == content_hash("abc")
    assert content_hash("喜欢香菜") != content_hash("不喜欢香菜")
