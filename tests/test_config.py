import os
import subprocess
import sys

import pytest

from pocketmem.base.config import load_settings, mask_url
from pocketmem.base.errors import ConfigError


def test_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("POCKETMEM_HOME", str(tmp_path))
    s = load_settings()
    assert (s.user, s.max_active, s.candidate_limit, s.top_k, s.trash_days, s.locale, s.embedder) == (
        "global", 800, 300, 3, 7, "auto", "use",
    )
    assert s.db_path == tmp_path / "memory.db"
    assert (s.store_threshold, s.pending_threshold, s.injection_budget) == (0.85, 0.60, 500)


def test_environment_overrides(tmp_path, monkeypatch):
    monkeypatch.setenv("POCKETMEM_HOME", str(tmp_path))
    monkeypatch.setenv("POCKETMEM_MAX_ACTIVE", "5")
    monkeypatch.setenv("POCKETMEM_DB", str(tmp_path / "x.db"))
    monkeypatch.setenv("POCKETMEM_TZ", "Asia/Shanghai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback")
    s = load_settings()
    assert s.max_active == 5 and s.db_path == tmp_path / "x.db" and s.tz == "Asia/Shanghai"
    assert s.embed_api_key is not None and s.embed_api_key.get_secret_value() == "sk-fallback"
    monkeypatch.setenv("POCKETMEM_EMBED_API_KEY", "sk-own")
    assert load_settings().embed_api_key.get_secret_value() == "sk-own"
    assert load_settings().llm_api_key.get_secret_value() == "sk-fallback"
    monkeypatch.setenv("POCKETMEM_LLM_API_KEY", "sk-chat")
    assert load_settings().llm_api_key.get_secret_value() == "sk-chat"


def test_toml_file_adds_keys_and_the_environment_wins(tmp_path, monkeypatch):
    (tmp_path / "config.toml").write_text('top_k = 5\nlocale = "en"\n')
    monkeypatch.setenv("POCKETMEM_HOME", str(tmp_path))
    monkeypatch.setenv("POCKETMEM_LOCALE", "zh")
    s = load_settings()
    assert s.top_k == 5 and s.locale == "zh"


def test_a_config_file_with_a_byte_order_mark_is_read(tmp_path, monkeypatch):
    (tmp_path / "config.toml").write_bytes("\ufefftop_k = 5\nlocale = \"en\"\n".encode())  # as Notepad saves it
    monkeypatch.setenv("POCKETMEM_HOME", str(tmp_path))
    s = load_settings()
    assert s.top_k == 5 and s.locale == "en"


@pytest.mark.parametrize("explicit", [False, True])
def test_a_folder_in_place_of_the_config_file_is_named(tmp_path, monkeypatch, explicit):
    (tmp_path / "config.toml").mkdir()
    monkeypatch.setenv("POCKETMEM_HOME", str(tmp_path))
    if explicit:
        monkeypatch.setenv("POCKETMEM_CONFIG", str(tmp_path / "config.toml"))
    with pytest.raises(ConfigError) as raised:
        load_settings()
    said = "POCKETMEM_CONFIG: {} is a folder, not a TOML file" if explicit else "{} is a folder, not a TOML file of"
    assert str(raised.value).startswith(said.format(tmp_path / "config.toml")), raised.value


def test_missing_explicit_config_file(tmp_path, monkeypatch):
    monkeypatch.setenv("POCKETMEM_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="POCKETMEM_CONFIG: no such file"):
        load_settings()


@pytest.mark.parametrize(
    ("data", "why"), [(b"max_active = [\n", "Invalid value"), (b'locale = "\xff\xfe"\n', "can't decode byte 0xff")]
)
def test_a_broken_config_file_is_named_with_what_is_wrong(tmp_path, monkeypatch, data, why):
    (tmp_path / "config.toml").write_bytes(data)
    monkeypatch.setenv("POCKETMEM_HOME", str(tmp_path))
    with pytest.raises(ConfigError) as raised:
        load_settings()
    assert str(raised.value).startswith(f"{tmp_path / 'config.toml'} is not a valid TOML file: ")
    assert why in str(raised.value)


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("POCKETMEM_MAX_ACTIVE", "0", "POCKETMEM_MAX_ACTIVE: Input should be greater than 0 (got '0')"),
        ("POCKETMEM_USER", "bad user!", "POCKETMEM_USER"),
        ("POCKETMEM_PENDING_THRESHOLD", "0.9",
         "POCKETMEM_PENDING_THRESHOLD (0.9) must not be above POCKETMEM_STORE_THRESHOLD (0.85)"),
        ("POCKETMEM_STORE_THRESHOLD", "0",
         "POCKETMEM_PENDING_THRESHOLD (0.6) must not be above POCKETMEM_STORE_THRESHOLD (0.0)"),
        ("POCKETMEM_EMBED_BASE_URL", "localhost:11434", "must be an http(s) URL"),
        ("POCKETMEM_LLM_BASE_URL", "http://127.0.0.1:11434/v1", "POCKETMEM_LLM_BASE_URL needs POCKETMEM_LLM_MODEL"),
        ("POCKETMEM_LLM_TIMEOUT", "0", "POCKETMEM_LLM_TIMEOUT: Input should be greater than 0"),
        ("POCKETMEM_EXTRACT_MAX_MESSAGES", "0", "POCKETMEM_EXTRACT_MAX_MESSAGES"),
        ("POCKETMEM_DATABASE_URL", "mysql://u@h/db", "POCKETMEM_DATABASE_URL: Value error, must be a PostgreSQL URL"),
        ("POCKETMEM_CLOUD_URL", "https://example.com", "POCKETMEM_CLOUD_URL: Value error, must be a PostgreSQL URL"),
        ("POCKETMEM_SYNC_SCOPES", "memory,photos", "unknown scope 'photos'"),
        ("POCKETMEM_SYNC_SCOPES", "memory.trash", "must include memory"),
        ("POCKETMEM_SYNC_INTERVAL", "-1", "POCKETMEM_SYNC_INTERVAL"),
        ("POCKETMEM_LIBRARY_TIMEOUT", "60", "POCKETMEM_LIBRARY_TIMEOUT"),
        ("POCKETMEM_UNKNOWN_THING", "1", None),
    ],
)
def test_bad_values_fail_loudly(tmp_path, monkeypatch, name, value, fragment):
    monkeypatch.setenv("POCKETMEM_HOME", str(tmp_path))
    monkeypatch.setenv(name, value)
    if fragment is None:
        load_settings()  # unknown variables in the environment are not ours to judge
        return
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert fragment in str(info.value)


def test_postgres_and_sync_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("POCKETMEM_HOME", str(tmp_path))
    s = load_settings()
    assert (s.database_url, s.cloud_url, s.sync_scopes, s.sync_trash, s.sync_interval) == (
        None, None, ("memory",), False, 300.0,
    )
    assert s.database_label == str(tmp_path / "memory.db")
    monkeypatch.setenv("POCKETMEM_CLOUD_URL", "postgresql://me:s3cret@db.example.com:5432/mem?sslmode=require")
    monkeypatch.setenv("POCKETMEM_SYNC_SCOPES", " memory.trash , memory ")
    s = load_settings()
    assert s.sync_scopes == ("memory.trash", "memory") and s.sync_trash
    assert "s3cret" not in repr(s)
    monkeypatch.setenv("POCKETMEM_DATABASE_URL", "postgresql://me:s3cret@db.example.com/mem")
    with pytest.raises(ConfigError, match="set only one of them") as info:
        load_settings()
    assert "s3cret" not in str(info.value)
    monkeypatch.delenv("POCKETMEM_CLOUD_URL")
    assert load_settings().database_label == "postgresql://me:***@db.example.com/mem"


def test_a_bad_postgres_url_never_echoes_its_password(tmp_path, monkeypatch):
    monkeypatch.setenv("POCKETMEM_HOME", str(tmp_path))
    monkeypatch.setenv("POCKETMEM_DATABASE_URL", "postgress://me:s3cret@db/mem")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert "POCKETMEM_DATABASE_URL" in str(info.value) and "s3cret" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://pm:pa/ss1@127.0.0.1:55433/lib", "postgresql://pm:***@127.0.0.1:55433/lib"),
        ("postgresql://pm:pa?ss1@db/lib?sslmode=require", "postgresql://pm:***@db/lib?sslmode=require"),
        ("postgres://pm:pa#ss1@db/lib", "postgres://pm:***@db/lib"),
        ("postgresql://pm:p@ss1@db:5432/lib", "postgresql://pm:***@db:5432/lib"),
        ("postgresql://pm:Pw-S3cret%21x@db/lib", "postgresql://pm:***@db/lib"),
        ("postgresql://pm@db/lib?password=ss1&sslpassword='a ss1'", "postgresql://pm@db/lib?password=***&sslpassword=***"),
        ("postgresql://pm@db/lib?user=pm&pwd=ss1&pass=ss1", "postgresql://pm@db/lib?user=pm&pwd=***&pass=***"),
        ("https://me:ss1@llm.example.com/v1", "https://me:***@llm.example.com/v1"),
        ("postgresql://pm@db/lib", "postgresql://pm@db/lib"),
    ],
)
def test_a_url_is_shown_without_its_password_whatever_it_holds(url, shown):
    assert mask_url(url) == shown


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("POCKETMEM_CLOUD_URL", "host=db.example.com user=pm password=ss1 dbname=pm"),
        ("POCKETMEM_CLOUD_URL", "postgressql://db/pm?user=pm&password=ss1"),
        ("POCKETMEM_DATABASE_URL", "postgres//pm:ss1@db/pm"),
        ("POCKETMEM_LLM_BASE_URL", "htps://me:ss1@llm.example.com/v1"),
        ("POCKETMEM_EMBED_BASE_URL", "https//me:ss1@llm.example.com/v1"),
        ("POCKETMEM_EMBED_BASE_URL", "llm.example.com/v1?api_key=ss1"),
    ],
)
def test_a_mistyped_url_is_named_with_its_rule_and_never_echoes_its_password(tmp_path, monkeypatch, name, value):
    monkeypatch.setenv("POCKETMEM_HOME", str(tmp_path))
    monkeypatch.setenv("POCKETMEM_LLM_MODEL", "qwen2.5:7b")
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    (line,) = [line for line in str(info.value).splitlines() if name in line]
    rule = "must be an http(s) URL" if "_BASE_URL" in name else "must be a PostgreSQL URL"
    assert line.startswith(f"  {name}: Value error, {rule}") and line.count("(got ") == 1
    assert "ss1" not in str(info.value)


def test_a_url_in_the_config_file_never_echoes_its_password(tmp_path, monkeypatch):
    (tmp_path / "config.toml").write_text('cloud_url = "host=x password=ss1"\ncloud_uri = "postgresql://a:ss1@h/d"\n')
    monkeypatch.setenv("POCKETMEM_HOME", str(tmp_path))
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert f"cloud_url (in {tmp_path / 'config.toml'}): Value error, must be a PostgreSQL URL" in str(info.value)
    assert "cloud_uri" in str(info.value) and "ss1" not in str(info.value)


def test_true_or_false_for_a_number_in_the_config_file_is_refused_never_read_as_1(tmp_path):
    """`max_active = true` was a cap of one memory: the next add moved every other memory to the trash."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("max_active = true\ntrash_days = false\nstore_threshold = true\n")
    env = {**os.environ, "POCKETMEM_HOME": str(home), "POCKETMEM_EMBEDDER": "hash"}
    done = subprocess.run([sys.executable, "-m", "pocketmem", "add", "用户住在杭州"], env=env, capture_output=True,
                          text=True, timeout=120)
    toml = home / "config.toml"
    assert done.returncode == 2 and not (home / "memory.db").exists(), done.stderr
    for key, value in (("max_active", "true"), ("trash_days", "false"), ("store_threshold", "true")):
        assert f"{key} (in {toml}): Value error, must be a number, not {value}" in done.stderr, done.stderr
