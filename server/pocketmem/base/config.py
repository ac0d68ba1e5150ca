"""Settings: environment variables with the POCKETMEM_ prefix, optionally a TOML file with the same keys.

Built once at the edge (CLI / server start) and passed down; nothing else reads the environment.
A malformed value is a start-up error naming the variable, never a silent default.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from datetime import datetime, tzinfo
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from urllib.parse import unquote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from pocketmem.base.errors import ConfigError
from pocketmem.base.files import in_place_of

ENV_PREFIX = "POCKETMEM_"
DEFAULT_HOME = Path("~/.pocketmem")
SYNC_SCOPES = ("memory", "memory.trash")
USER_ID_PATTERN = r"^[A-Za-z0-9_.@:-]{1,64}$"

MAX_CONTENT_CHARS_CEILING = 100_000  # the most POCKETMEM_MAX_CONTENT_CHARS may be


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        validate_default=True,
        frozen=True,
        populate_by_name=True,
    )

    # -- where things live -------------------------------------------------------------------
    home: Path = Field(
        DEFAULT_HOME, description="Folder for the database and exports; empty or blank means the default."
    )
    db: Path | None = Field(None, description="SQLite file; default $POCKETMEM_HOME/memory.db.")
    config: Path | None = Field(None, description="TOML file with the same keys (lower case, no prefix).")
    user: str = Field("global", pattern=USER_ID_PATTERN, description="User id for stdio connections.")

    # -- store shape ---------------------------------------------------------------------------
    max_active: int = Field(
        800, gt=0, description="Cap on active memories; the least important non-core ones go to the trash."
    )
    candidate_limit: int = Field(
        300, gt=0, le=100_000, description="Top memories by importance always considered by recall."
    )
    top_k: int = Field(3, ge=1, le=50, description="Memories returned by recall when the call does not say.")
    trash_days: int = Field(7, gt=0, le=3650, description="Days a trashed memory can be restored before it is purged.")
    episode_days: int = Field(
        14, gt=0, le=3650, description="Days after which an episode (conversation summary) expires."
    )
    max_content_chars: int = Field(
        2000, ge=50, le=MAX_CONTENT_CHARS_CEILING, description="Longest memory content accepted."
    )
    max_request_bytes: int = Field(
        1_048_576,
        ge=16_384,
        le=67_108_864,
        description="Largest HTTP request body (http/sse transports); larger gets 413.",
    )

    # -- write routing ---------------------------------------------------------------------------
    store_threshold: float = Field(0.85, ge=0, le=1, description="Confidence at or above which add_memory stores.")
    pending_threshold: float = Field(
        0.60, ge=0, le=1, description="Confidence at or above which a memory waits for confirmation."
    )
    confirm_all: bool = Field(
        False,
        description="Confirm everything: every write from the agent waits for the user's confirmation (pending).",
    )

    # -- time and privacy ------------------------------------------------------------------------
    maintain_interval: float = Field(
        3600.0, ge=0, le=7 * 86400,
        description="Seconds between maintenance runs (decay, expiry, purge) while the server runs; 0 turns it off.",
    )
    temporary: bool = Field(False, description="Temporary mode: add_memory stores nothing and recall returns nothing.")
    secrets: Literal["redact", "refuse"] = Field(
        "redact", description="What add_memory does with API keys, passwords, private keys, card and ID numbers.",
    )

    # -- recall and injection --------------------------------------------------------------------
    locale: Literal["auto", "zh", "en"] = Field(
        "auto", description="Language of the injection text; auto follows the query."
    )
    tz: str | None = Field(None, description="IANA time zone for calendar days (default: the machine's).")
    injection_budget: int = Field(500, ge=40, le=20_000, description="Character budget of the injection block.")
    relevance_threshold: float = Field(0.40, ge=0, le=1, description="Minimum relevance for a memory to be recalled.")
    weight_semantic: float = Field(0.55, ge=0, le=1)
    weight_keyword: float = Field(0.80, ge=0, le=1)
    weight_freshness: float = Field(0.15, ge=0, le=1)
    weight_importance: float = Field(0.0, ge=0, le=1)

    # -- embeddings ------------------------------------------------------------------------------
    embedder: Literal["use", "hash", "openai", "local"] = Field(
        "use",
        description="use (multilingual sentence encoder shipped with pocketmem), hash (lexical), openai, or local.",
    )
    embed_model: str | None = Field(None, description="Model name (openai/local) or a local folder (local).")
    embed_base_url: str | None = Field(None, description="Base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:11434/v1.")
    embed_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("POCKETMEM_EMBED_API_KEY", "OPENAI_API_KEY", "embed_api_key"),
        description="API key for the embedding endpoint; falls back to OPENAI_API_KEY.",
    )
    embed_dimensions: int | None = Field(None, gt=0, le=8192, description="Vector size to ask the endpoint for.")
    embed_timeout: float = Field(30.0, gt=0, le=600, description="Seconds before an embedding request fails.")
    embed_batch_size: int = Field(64, ge=1, le=2048, description="Texts per embedding request.")

    # -- server-side extraction (remember_conversation) ---------------------------------------------
    llm_base_url: str | None = Field(None, description="OpenAI-compatible chat endpoint for remember_conversation.")
    llm_model: str | None = Field(
        None, description="Chat model for remember_conversation when the client cannot sample."
    )
    llm_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("POCKETMEM_LLM_API_KEY", "OPENAI_API_KEY", "llm_api_key"),
        description="API key for the chat endpoint; falls back to OPENAI_API_KEY.",
    )
    llm_timeout: float = Field(
        60.0, gt=0, le=3600, description="Seconds an extraction may wait for the LLM (both attempts)."
    )
    extract_max_messages: int = Field(
        10, ge=1, le=100, description="Most messages remember_conversation accepts in one call."
    )

    # -- PostgreSQL: the server's own store, or the cloud library a local notebook syncs with ------------
    database_url: SecretStr | None = Field(
        None, description="postgresql://... : run the whole server on PostgreSQL + pgvector instead of the SQLite file."
    )
    cloud_url: SecretStr | None = Field(
        None, description="postgresql://... : the cloud library this SQLite notebook syncs with and recalls from."
    )
    sync_scopes: Annotated[tuple[str, ...], NoDecode] = Field(
        ("memory",), description="What sync carries, comma separated: memory (default) and memory.trash."
    )
    sync_interval: float = Field(
        300.0, ge=0, le=7 * 86400, description="Seconds between syncs while the server runs; 0 turns the timer off."
    )
    cloud_timeout: float = Field(
        10.0, gt=0, le=600, description="Seconds sync waits for a connection to the cloud library before it fails."
    )
    library_timeout: float = Field(
        0.3, ge=0, le=30,
        description="Seconds recall waits for the cloud library's answer once the question is encoded; 0 asks only "
        "the notebook.",
    )
    pg_pool_size: int = Field(10, ge=1, le=500, description="Most PostgreSQL connections this process opens.")
    use_flush_interval: float = Field(
        1.0, ge=0, le=3600,
        description="Seconds the server lets recall bookkeeping (use counts, recalled events) wait before writing "
        "it in one transaction, after answering; 0 writes it with each recall. A clean shutdown writes what waits.",
    )

    # -- the profile layer (persona, identity, Markdown files, the context package) --------------
    onboarding: bool = Field(True, description="Ask a new user who they are (and who the assistant should be), once.")
    profile_files: Literal["auto", "on", "off"] = Field(
        "auto", description="Persona.md, User.md, Project.md, Insights.md under $POCKETMEM_HOME/<user>/; auto: on "
        "with the SQLite file, off on a PostgreSQL server.",
    )
    project_lines: int = Field(100, ge=1, le=10_000, description="Lines of Project.md before older entries roll up.")
    context_tokens: int = Field(
        4000, ge=400, le=1_000_000, description="Token budget of the memory_context package (system memory, recent "
        "context, long-term evidence, reserve).",
    )

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("WARNING")
    log_content: bool = Field(
        False, description="Log tool arguments and memory text at DEBUG (off: logs name tools, users and timings only)."
    )

    # -- derived ---------------------------------------------------------------------------------
    @field_validator("home", mode="before")
    @classmethod
    def _blank_home(cls, value: Any) -> Any:
        return home_path(value) if isinstance(value, str) else value

    @field_validator("home", "db", "config", mode="after")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return expand_user(value) if value is not None else None

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        """`max_active = true` in config.toml is no number: pydantic would read it as 1 (a cap of one memory)."""
        if isinstance(value, bool) and info.field_name in NUMBER_FIELDS:
            raise ValueError(f"must be a number, not {str(value).lower()}")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_any_case(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("tz")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown IANA time zone {value!r} (try Asia/Shanghai or UTC)") from exc
        return value

    @field_validator("embed_base_url", "llm_base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if not re.match(r"^https?://[^\s/]+", value):
            raise ValueError("must be an http(s) URL: http://host:port/v1 or https://host/v1")
        return value.rstrip("/")

    @field_validator("database_url", "cloud_url", mode="after")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        text = value.get_secret_value().strip()
        if not re.match(r"^postgres(ql)?://", text):
            raise ValueError("must be a PostgreSQL URL: postgresql://user:password@host:5432/dbname")
        return SecretStr(text)

    @field_validator("sync_scopes", mode="before")
    @classmethod
    def _scopes(cls, value: Any) -> tuple[str, ...]:
        items = value.split(",") if isinstance(value, str) else list(value)
        scopes = tuple(dict.fromkeys(str(item).strip() for item in items if str(item).strip()))
        unknown = [s for s in scopes if s not in SYNC_SCOPES]
        if unknown:
            raise ValueError(f"unknown scope {unknown[0]!r}; use memory, or memory,memory.trash")
        if "memory" not in scopes:
            raise ValueError("must include memory (memory.trash uploads the trash on top of syncing memories)")
        return scopes

    @model_validator(mode="after")
    def _coherent(self) -> Settings:
        if self.pending_threshold > self.store_threshold:
            raise ValueError(
                f"POCKETMEM_PENDING_THRESHOLD ({self.pending_threshold}) must not be above POCKETMEM_STORE_THRESHOLD "
                f"({self.store_threshold})"
            )
        if self.weight_semantic + self.weight_keyword == 0:
            raise ValueError("POCKETMEM_WEIGHT_SEMANTIC and POCKETMEM_WEIGHT_KEYWORD cannot both be 0")
        if self.embedder == "openai" and not self.embed_model:
            raise ValueError("POCKETMEM_EMBEDDER=openai needs POCKETMEM_EMBED_MODEL (e.g. text-embedding-3-small)")
        if self.embedder == "local" and not self.embed_model:
            raise ValueError("POCKETMEM_EMBEDDER=local needs POCKETMEM_EMBED_MODEL (a model name or a local folder)")
        if self.llm_base_url and not self.llm_model:
            raise ValueError(
                "POCKETMEM_LLM_BASE_URL needs POCKETMEM_LLM_MODEL (the chat model to ask, e.g. qwen2.5:7b)"
            )
        if self.database_url is not None and self.cloud_url is not None:
            raise ValueError(
                "POCKETMEM_CLOUD_URL syncs a local SQLite notebook; with POCKETMEM_DATABASE_URL the store is "
                "already on PostgreSQL, so set only one of them"
            )
        return self

    @property
    def db_path(self) -> Path:
        return self.db if self.db is not None else self.home / "memory.db"

    def db_setting(self) -> str | None:
        """What names the SQLite file, for a message that says what to change: POCKETMEM_DB, `db (in …/config.toml)`,
        or None when the file is in its default place, $POCKETMEM_HOME/memory.db."""
        return None if self.db is None else setting_name("db")

    @property
    def database_label(self) -> str:
        """Where the store lives, for stats and doctor: the SQLite path, or the PostgreSQL URL without its password."""
        if self.database_url is not None:
            return mask_url(self.database_url.get_secret_value())
        return str(self.db_path)

    @property
    def files_on(self) -> bool:
        """Whether the profile's Markdown files are kept on disk."""
        if self.profile_files == "auto":
            return self.database_url is None
        return self.profile_files == "on"

    @property
    def sync_trash(self) -> bool:
        return "memory.trash" in self.sync_scopes

    @property
    def zone(self) -> tzinfo:
        if self.tz:
            return ZoneInfo(self.tz)
        local = datetime.now().astimezone().tzinfo
        assert local is not None
        return local

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = _toml_path()
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml_file is not None:
            try:  # the source reads the file here
                sources.append(_TomlFile(settings_cls, toml_file=toml_file))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{toml_file} is not a valid TOML file: {exc}; fix it or move it away") from None
            except OSError as exc:
                raise ConfigError(
                    f"{toml_file} cannot be read ({exc.strerror}): make it readable by the user who runs pocketmem "
                    f"(chmod u+r {toml_file}), or move it away"
                ) from None
        return tuple(sources)


def _is_number(annotation: Any) -> bool:
    """int, float, or either of them or None."""
    kinds = set(get_args(annotation)) - {type(None)} if get_origin(annotation) in (Union, UnionType) else {annotation}
    return bool(kinds) and kinds <= {int, float}


NUMBER_FIELDS = frozenset(name for name, info in Settings.model_fields.items() if _is_number(info.annotation))


class _TomlFile(TomlConfigSettingsSource):
    """The TOML file's settings, read as UTF-8 with or without a byte-order mark (Notepad writes one; the profile's
    Markdown files are read so too)."""

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        return read_toml(Path(file_path))


def read_toml(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text(encoding="utf-8-sig"))


def home_path(value: str | None) -> Path:
    """POCKETMEM_HOME as given; unset, empty or blank (shells often export empty variables) is the default home,
    never the current folder or a folder named by spaces."""
    return Path(value) if value is not None and value.strip() else DEFAULT_HOME


# A parameter whose value is a credential, in a URL's query or a key=value connection string: password=,
# sslpassword=, pass=, pwd=, passwd=, secret=, access_token=, api_key=, ... (a quoted value whole).
SECRET_PARAM = re.compile(
    r"(?i)((?<![\w.-])[\w.-]*(?:pass|pwd|secret|token|api_?key|access_?key)[\w.-]*\s*=\s*)"
    r"('(?:[^'\\]|\\.)*'?|\"[^\"]*\"?|[^\s&;#]*)"
)
SHORT_SECRET = 4  # a credential shorter than this is hidden only where it stands alone, not inside other words


def expand_user(path: Path) -> Path:
    """`~` as this user's home folder. An empty or blank HOME (a service manager's or a script's `HOME=`) counts as
    unset, so the home comes from the user database: Path.expanduser took it as `/` (a store in /.pocketmem)."""
    if path.parts[:1] == ("~",) and not os.environ.get("HOME", "x").strip() and os.name == "posix":
        import pwd

        return Path(pwd.getpwuid(os.getuid()).pw_dir, *path.parts[1:])
    return path.expanduser()


def mask_url(url: str) -> str:
    """A URL (or connection string) as it may be shown: postgresql://user:secret@host/db ->
    postgresql://user:***@host/db. The userinfo is everything between `//` and the last `@`, so a password holding
    an unencoded / ? # or @ is hidden whole; the value of every credential parameter (password=..., pwd=...) too."""
    return SECRET_PARAM.sub(r"\1***", _hide_userinfo(url))


def _userinfo(url: str) -> tuple[int, int]:
    """Where a URL's userinfo lies: from after `//` (or the start) to its last `@`; (0, -1) when it has none."""
    slashes = url.find("//")
    start = slashes + 2 if slashes >= 0 else 0
    at = url.rfind("@")
    return (start, at) if at >= start else (0, -1)


def url_password(url: str) -> str:
    """The password of a URL's userinfo, as written (empty when there is none)."""
    start, at = _userinfo(url)
    return url[start:at].partition(":")[2] if at >= 0 else ""


def _hide_userinfo(url: str) -> str:
    start, at = _userinfo(url)
    user, colon, _ = url[start:at].partition(":") if at >= 0 else ("", "", "")
    return f"{url[:start]}{user}:***{url[at:]}" if colon else url


def redact(text: str, url: str | None = None) -> str:
    """Free text (an error, a log line) as it may be shown: every URL in it masked as by `mask_url`, every
    credential parameter, and the credentials of `url` wherever they appear, also percent-decoded or cut in pieces
    (a driver's message may quote a password it could not parse: `unexpected spaces found in "pa ss"`)."""
    text = SECRET_PARAM.sub(r"\1***", re.sub(r"\S*//\S*", lambda m: _hide_userinfo(m.group()), text))
    for secret in _credentials(url) if url else []:
        if len(secret) >= SHORT_SECRET:
            text = text.replace(secret, "***")
        else:
            text = re.sub(rf"(?<!\w){re.escape(secret)}(?!\w)", "***", text)
    # Pieces hidden one by one (`***#***`) would still show the password's shape: one mask for the run.
    return re.sub(r"\*{3}(?:[/?#@:&=\s]+\*{3})+", "***", text)


def _credentials(url: str) -> list[str]:
    """The secrets a URL holds: its userinfo's password and its credential parameters' values, as written and
    percent-decoded, and every one of the password's pieces between the characters a parser stops at, however short
    (a driver quotes the URL from where it stopped: `"w@host/db"` of the password `Zq9/x@Kp#7?w`); the longest
    first."""
    password = url_password(url)
    found = {password, *(m.group(2).strip("'\"") for m in SECRET_PARAM.finditer(url))}
    found |= set(re.split(r"[/?#@:&=\s]+", password))
    found |= {unquote(secret) for secret in found}
    return sorted((s for s in found if s.strip("*")), key=len, reverse=True)


def _toml_path() -> Path | None:
    """POCKETMEM_CONFIG, else $POCKETMEM_HOME/config.toml when it exists; ConfigError when either is something else
    than a file (a folder, a link to nothing), which would otherwise be passed over without a word."""
    explicit = os.environ.get(ENV_PREFIX + "CONFIG")
    if explicit:
        path = expand_user(Path(explicit))
        if (what := in_place_of(path, "file")) is not None:
            raise ConfigError(f"POCKETMEM_CONFIG: {path} is {what}, not a TOML file")
        if not path.is_file():
            raise ConfigError(f"POCKETMEM_CONFIG: no such file {path}")
        return path
    default = expand_user(home_path(os.environ.get(ENV_PREFIX + "HOME"))) / "config.toml"
    try:
        if (what := in_place_of(default, "file")) is not None:
            raise ConfigError(f"{default} is {what}, not a TOML file of settings, so none are read from it: move it "
                              "away, or put the settings file there")
        return default if default.is_file() else None
    except OSError:  # a home this user may not look into: opening the store there names it and the fix
        return None


def load_settings(**overrides: Any) -> Settings:
    """Read the environment (and TOML file); raise ConfigError with one line per bad variable."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc)) from None


def describe_validation_error(exc: ValidationError, environ: Mapping[str, str] | None = None) -> str:
    """One line per bad value, named where it came from: the variable when it is set (the environment wins), else the
    key of the TOML file that holds it."""
    environ = os.environ if environ is None else environ
    toml_file, toml = _toml_values()
    lines = ["invalid pocketmem settings:"]
    for err in exc.errors():
        loc = [str(part) for part in err["loc"]]
        name, given = _source(loc[0], environ, toml_file, toml) if loc else ("settings", None)
        message = err["msg"]
        if err["type"] == "extra_forbidden" and loc:
            close = difflib.get_close_matches(loc[0].lower(), list(Settings.model_fields), n=1, cutoff=0.6)
            name = f"{loc[0]} (in {toml_file or 'the config file'})"
            message = "not a pocketmem setting" + (f"; did you mean {close[0]}?" if close else "")
            given = None  # a key that is no setting: its value is beside the point, and may be a secret
        lines.append(f"  {name}: {message}{_shown(name, given)}")
    return "\n".join(lines)


def setting_name(key: str) -> str:
    """Where the value of setting `key` came from, for a message: its variable when it is set, else its key in the
    TOML file (`db (in /home/me/.pocketmem/config.toml)`), else its variable."""
    toml_file, toml = _toml_values()
    return _source(key, os.environ, toml_file, toml)[0]


def _shown(name: str, given: Any) -> str:
    """The bad value, as the error may show it: never a key's; a URL-like value (a URL setting, or one that holds
    `//`, `@` or `=`) with its credentials masked (userinfo, password=..., pwd=...)."""
    if given is None or "key" in name.lower():
        return ""
    text = str(given)
    if "url" in name.lower() or any(mark in text for mark in ("//", "@", "=")):
        return f" (got {mask_url(text)!r})"
    return f" (got {given!r})"


def _source(key: str, environ: Mapping[str, str], toml_file: Path | None, toml: dict[str, Any]) -> tuple[str, Any]:
    """Where the value of setting `key` (a field or one of its aliases) came from, and the value: the first of its
    variables that is set, else its key in the TOML file, else (a default) its variable."""
    field, variables = key, [ENV_PREFIX + key.upper()]
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        choices = [str(c) for c in alias.choices] if isinstance(alias, AliasChoices) else []
        if key == name or key in choices:
            field, variables = name, [c for c in choices if c.isupper()] or [ENV_PREFIX + name.upper()]
    for variable in variables:
        if variable in environ:
            return variable, environ[variable]
    if field in toml:
        return f"{field} (in {toml_file})", toml[field]
    return variables[0], None


def _toml_values() -> tuple[Path | None, dict[str, Any]]:
    """The TOML file Settings read and its keys (none when there is no file or it cannot be read again)."""
    try:
        path = _toml_path()
        return path, read_toml(path) if path is not None else {}
    except (ConfigError, OSError, ValueError):
        return None, {}


def known_variables() -> set[str]:
    """Every environment variable Settings reads: POCKETMEM_<FIELD> and the aliases (OPENAI_API_KEY)."""
    names = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    for field in Settings.model_fields.values():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names |= {str(choice) for choice in alias.choices if str(choice).isupper()}
    return names


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """A warning for each POCKETMEM_* variable that is no setting (a typo is otherwise ignored silently)."""
    environ = os.environ if environ is None else environ
    known = known_variables()
    suffixes = {n[len(ENV_PREFIX):]: n for n in known if n.startswith(ENV_PREFIX)}
    warnings = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in known:
            continue
        close = difflib.get_close_matches(name[len(ENV_PREFIX):], sorted(suffixes), n=1, cutoff=0.6)
        hint = f"; did you mean {suffixes[close[0]]}?" if close else "; see docs/cli.md for the settings"
        warnings.append(f"{name} is not a pocketmem setting and is ignored{hint}")
    return warnings
