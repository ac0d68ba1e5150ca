"""Misspelled settings are named with the closest real one; log levels in any case."""

from __future__ import annotations

import pytest

from pocketmem.base.config import load_settings, unknown_variables
from pocketmem.base.errors import ConfigError


def test_unknown_variables_name_the_closest_setting():
    found = unknown_variables({"POCKETMEM_EMBEDER": "local", "POCKETMEM_MAXACTIVE": "5", "POCKETMEM_USER": "a",
                               "OPENAI_API_KEY": "k", "POCKETMEM_XYZZY": "1", "HOME": "/root"})
    assert found == [
        "POCKETMEM_EMBEDER is not a pocketmem setting and is ignored; did you mean POCKETMEM_EMBEDDER?",
        "POCKETMEM_MAXACTIVE is not a pocketmem setting and is ignored; did you mean POCKETMEM_MAX_ACTIVE?",
        "POCKETMEM_XYZZY is not a pocketmem setting and is ignored; see docs/cli.md for the settings",
    ]


def test_every_setting_and_alias_is_known():
    assert unknown_variables({"POCKETMEM_EMBED_API_KEY": "k", "POCKETMEM_LOG_CONTENT": "1", "POCKETMEM_CONFIG": "x",
                              "POCKETMEM_DATABASE_URL": "postgresql://x/y"}) == []


def test_a_misspelled_key_in_the_toml_file_names_the_closest(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text('embeder = "hash"\n')
    monkeypatch.setenv("POCKETMEM_CONFIG", str(config))
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert f"embeder (in {config}): not a pocketmem setting; did you mean embedder?" in str(caught.value)


@pytest.mark.parametrize("given", ["info", "Info", " INFO "])
def test_log_level_in_any_case(monkeypatch, tmp_path, given):
    monkeypatch.setenv("POCKETMEM_HOME", str(tmp_path))
    monkeypatch.setenv("POCKETMEM_LOG_LEVEL", given)
    assert load_settings().log_level == "INFO"


def test_a_bad_value_in_the_toml_file_is_named_by_its_key_there_not_by_a_variable(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text('max_active = "lots"\nembed_api_key = 5\ntop_k = 0\n')
    monkeypatch.setenv("POCKETMEM_CONFIG", str(config))
    monkeypatch.setenv("POCKETMEM_TOP_K", "99")  # the environment wins: its value is the one named
    with pytest.raises(ConfigError) as caught:
        load_settings()
    lines = str(caught.value).splitlines()[1:]
    assert lines == [
        f"  max_active (in {config}): Input should be a valid integer, unable to parse string as an integer "
        "(got 'lots')",
        "  POCKETMEM_TOP_K: Input should be less than or equal to 50 (got '99')",
        f"  embed_api_key (in {config}): Input should be a valid string",  # a key's value is never shown
    ]
