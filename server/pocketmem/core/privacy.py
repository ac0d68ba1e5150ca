"""Secrets that must never be remembered: find them, and redact or refuse (docs/privacy.md).

A small set of patterns, each tuned to fire on the secret itself rather than on talk about it
("I forgot my password" is fine; "my password is hunter2!" is not):

    api_key      OpenAI (sk-, sk-proj-), Anthropic (sk-ant-), AWS access key ids (AKIA/ASIA) and the 40-character
                 secret key written beside one,
                 GitHub (ghp_/gho_/ghu_/ghs_/ghr_, github_pat_), GitLab (glpat-, gldt-, glrt-, ...), Hugging Face
                 (hf_), Slack (xoxb-/xoxp-/...), Stripe (sk_live_), Google (AIza...), Alibaba Cloud (LTAI...),
                 Tencent Cloud (AKID...), JSON web tokens;
                 `api_key = ...`, `secret: ...`, `token=...`, `aws_secret_access_key`, SecretAccessKey, Azure's
                 AccountKey= / SharedAccessKey=, JWT_SECRET=..., CI_TOKEN=...; a key as a URL's user part (a Sentry
                 DSN https://<key>@…); chat-bot webhooks (Slack, Discord, Feishu/Lark, DingTalk and its SEC...
                 signing secret, WeCom)
    password     `password: ...`, `passwd=...`, `pw: ...`, `my password is <value>`, 密码是…, 密碼是…, 口令：…,
                 支付密码…, PIN码是 4455; a bare space also separates when the value has a digit
                 (WiFi密码 Sunshine2024x); a Chinese name may be followed directly by a value with a digit or
                 symbol (密码Aa123456, 支付密码520131, 门禁密码#8866#); a few words may come between when the value
                 has a digit or symbol (the password for my laptop is …, the password is now …, changed to …,
                 I changed my password to …, 密码换成了…, 改成了…, 设成…, 密码叫…, 密码还是(原来那个)…,
                 密码跟支付宝一样(，)都是…); a value spelled in Chinese numerals (六个八, 一二三四五六); never a count
                 (密码 8-16 位) or an algorithm (密码sha256加密); `user / password` after a login word (Login for
                 the NAS: admin / …);
                 `mysql -p<password>` (and mysqldump, mariadb, ...), `sshpass -p <password>`,
                 `curl -u user:<password>`, `docker login -p <password>`, `redis-cli -a <password>`,
                 PGPASSWORD=..., MYSQL_PWD=..., *_PASSWORD=...; `Authorization: Basic <base64>`
    private_key  PEM private key blocks (-----BEGIN ... PRIVATE KEY-----)
    card_number  13-19 digits (spaces, dashes or middle dots allowed) that pass the Luhn check, not an ISBN
    security_code a card's CVV / CVC / CVV2, 安全码, 卡背后三位: 3 or 4 digits after the name
    id_number    Chinese resident ID numbers (18 characters, valid checksum and birth date; whole or in groups of
                 6, 8 and 4 or of 6, 4, 4 and 4); US SSNs (123-45-6789)
    passport_number after 护照号 / 护照号码 / passport no. / passport number: 6-9 letters and digits with a digit;
                 after 护照 alone, a Chinese passport's form (E12345678, EA1234567)

Text is searched after normalising (NFKC, so full-width ｓｋ－ｐｒｏｊ－… reads as sk-proj-…; zero-width
spaces, joiners, soft hyphens and word joiners removed, so a key split by them is still one key). Findings are
mapped back onto the original text, so everything else a user wrote is kept as written.

Pure: text in, findings and redacted text out.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass
from datetime import date
from functools import cache
from typing import NamedTuple

from pocketmem.core.text import clean_text, has_cjk

KIND_LABELS = {
    "api_key": ("API 密钥", "API key"),
    "password": ("密码", "password"),
    "private_key": ("私钥", "private key"),
    "card_number": ("银行卡号", "card number"),
    "security_code": ("安全码", "card security code"),
    "id_number": ("证件号", "ID number"),
    "passport_number": ("护照号", "passport number"),
}
# A number or range followed by a unit is a count, never a secret: 密码 8-16 位, 密码2024年改过, CVV 3位.
_UNIT = (
    r"\s*(?:位|个|個|次|年|岁|歲|种|種|以上|以内|以下"
    r"|(?i:characters?|chars?|digits?|bits?|bytes?|days?|months?|years?|times?)(?![A-Za-z]))"
)
# From a card code's or a passport's name to its value: `CVV 123`, `CVV: 123`, 安全码是 123, passport no. is …
# (the spaces on either side of the word are read once: a long run of them stays linear)
_LINK = r"\s*(?:(?:[:：=]|是|为|為|(?i:is)(?![A-Za-z]))\s*)?"

# A URL's scheme, read from the start of its run (`a.a.a.…` is not tried from each letter)
_SCHEME = r"(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]*+://"
_AWS_KEY_ID = r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])"
# A PIN spelled in Chinese numerals: 六个八 (888888), 三个六两个八, 一二三四五六 (not 六位, 三个月, 一二年)
_ZH_DIGIT = "零〇一二三四五六七八九幺"
_SPELLED = (
    rf"(?:(?:[两二三四五六七八九十]个[{_ZH_DIGIT}])++|[{_ZH_DIGIT}]{{4,}}+)"
    rf"(?![{_ZH_DIGIT}十两个個位年岁歲数數次种種月天号號样樣])"
)
# What separates the groups of a card or ID number: a space, a dash or a middle dot (6228·4800·1234·5678)
_DIGIT_SEP = r"[ \-·•・‧]"

# Each pattern is its source, flags written inline (`(?i)`), compiled on first use by `patterns()`.
_TOKEN_PATTERNS: list[tuple[str, str]] = [
    (
        "private_key",
        r"(?s)-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
        r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    ),
    ("api_key", r"(?<![A-Za-z0-9])sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}"),
    ("api_key", _AWS_KEY_ID),
    # the secret access key written beside its key id (`AKIA… / wJalrXUtnFEMI/K7MDENG/…`): 40 base64 characters
    # with a small and a capital letter and a digit, `/` or `+`, at most 48 characters after the id
    (
        "api_key",
        rf"(?s){_AWS_KEY_ID}.{{0,48}}?(?<![A-Za-z0-9/+=])(?P<secret>(?=[A-Za-z0-9/+]{{0,39}}[a-z])"
        r"(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[0-9/+])[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
    ),
    ("api_key", r"(?<![A-Za-z0-9])LTAI[0-9A-Za-z]{12,28}(?![0-9A-Za-z])"),
    ("api_key", r"(?<![A-Za-z0-9])AKID[0-9A-Za-z]{30,36}(?![0-9A-Za-z])"),
    ("api_key", r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{30,}"),
    ("api_key", r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{22,}"),
    ("api_key", r"(?<![A-Za-z0-9])gl(?:pat|dt|rt|ptt|ft|soat|cbt)-[A-Za-z0-9_\-]{20,}"),
    ("api_key", r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}"),
    ("api_key", r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}"),
    ("api_key", r"(?<![A-Za-z0-9])(?:sk|rk)_live_[A-Za-z0-9]{16,}"),
    ("api_key", r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}"),
    ("api_key", r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"),
    # pocketmem's own bearer tokens (service/manage/tokens.py: pm_<12 hex>_<secret>), bare or in a header
    ("api_key", r"(?<![A-Za-z0-9])pm_[0-9a-f]{12}_[A-Za-z0-9_\-]{20,}"),
    # any bearer credential: `Authorization: Bearer <token>` (a token has a digit: "Bearer tokens are" is talk)
    ("api_key", r"(?ai)(?<![A-Za-z])bearer\s+(?P<secret>(?=[\w.~+/=\-]*\d)[\w.~+/=\-]{16,})"),
    # a password inside a URL: scheme://user:PASSWORD@host, the user may be empty (redis://:PASSWORD@host);
    # only the password is redacted
    ("password", rf"(?i){_SCHEME}[^\s:/@]*:(?P<secret>[^\s/@]+)@"),
    # a key as a URL's whole user part: a Sentry DSN (https://<key>@o1.ingest.sentry.io/2), a token in a git
    # remote (https://<token>@github.com/…); a key looks random: 32+ hex digits, or 20+ letters and digits with
    # a small letter, a capital and a digit (a user name in a clone URL, https://zhangsan_2019_work@bitbucket.org
    # or https://contoso2024engineering@dev.azure.com, is talk, as `https://user@example.com` is)
    (
        "api_key",
        rf"(?i:{_SCHEME})(?P<secret>[0-9a-fA-F]{{32,}}+(?=@)|(?=[\w\-]{{0,200}}?\d)(?=[\w\-]{{0,200}}?[a-z])"
        rf"(?=[\w\-]{{0,200}}?[A-Z])[A-Za-z0-9_\-]{{20,}}+)@",
    ),
    # a password in an environment variable: `PGPASSWORD=S3cret psql`, `export MYSQL_PWD='…'`, REDIS_PASSWORD=…
    # (the name in capitals; a reference such as $DB_PASS or <password> is not a value; PWD alone is the directory)
    (
        "password",
        r"(?<![\w$])(?:[A-Z][A-Z0-9_]*)?(?:PASSWORD|PASSWD|PASSPHRASE|_PWD|_PASS)=(?![$<]|\[redacted |【)"
        r"(?P<secret>'[^'\n]+'|\"[^\"\n]+\"|[^\s'\"`;&|,，。；\u3400-\u9fff]{3,})",
    ),
    # a secret or token in an environment variable when the value looks like one: `JWT_SECRET=…`, `CI_TOKEN=…`
    (
        "api_key",
        r"(?a)(?<![\w$])(?:[A-Z][A-Z0-9_]*)?(?:SECRET|TOKEN)=(?P<secret>['\"]?(?=[\w.~+/=\-]*\d)[\w.~+/=\-]{8,}['\"]?)",
    ),
    # `curl -u user:PASSWORD` / `--user user:PASSWORD`: only the password (`-u user` alone makes curl ask for it;
    # user:password written out is the syntax, not a value)
    (
        "password",
        r"(?<![\w-])curl(?:[ \t]+\S+){0,16}?[ \t]+(?:-u[ \t]*|--user(?:[ \t]+|=))['\"]?[^\s:'\"]*:"
        r"(?![$<]|\[redacted |【|(?:password|passwd|pass|pwd)(?![^\s'\"]))(?P<secret>[^\s'\"]+)",
    ),
    # a registry or redis password on a command line: `docker login -u sam -p S3cret`, `--password=S3cret`
    # (podman, nerdctl), `redis-cli -a S3cret`, `--pass S3cret`; unquoted, the value has a digit or symbol
    # (`docker login -p flag` is talk), and --password-stdin reads it from elsewhere
    (
        "password",
        r"(?<![\w-])(?:(?:docker|podman|nerdctl)[ \t]+login(?:[ \t]+\S+){0,16}?[ \t]+(?:-p|--password)"
        r"|redis-cli(?:[ \t]+\S+){0,16}?[ \t]+(?:-a|--pass))(?:[ \t]+|=)(?!\[redacted |【)"
        r"(?P<secret>'[^'\n]+'|\"[^\"\n]+\"|(?=[^\s'\"`,，。；;【\u3400-\u9fff]*[\d!@#$%^&*?_~+=])"
        r"[^\s\-'\"`,，。；;【\u3400-\u9fff][^\s'\"`,，。；;【\u3400-\u9fff]{2,})",
    ),
    # `Authorization: Basic <base64 of user:password>` (12+ characters with a digit or padding: "basic plan" is talk)
    (
        "password",
        r"(?i)(?<![A-Za-z])basic[ \t]+(?P<secret>(?=[A-Za-z0-9+/]*[0-9=])[A-Za-z0-9+/]{12,}={0,2})(?![A-Za-z0-9+/=])",
    ),
    # a chat bot's webhook, whose URL is its credential: Slack, Discord, Feishu/Lark (飞书), DingTalk (钉钉),
    # WeCom (企业微信); only the secret part; and a DingTalk robot's signing secret (SEC + 64 hex)
    (
        "api_key",
        r"(?i)(?:hooks\.slack\.com/services/[A-Za-z0-9]+/[A-Za-z0-9]+/|discord(?:app)?\.com/api/webhooks/\d+/"
        r"|open\.(?:feishu\.cn|larksuite\.com)/open-apis/bot/v2/hook/"
        r"|oapi\.dingtalk\.com/robot/send\?(?:[^\s#]*?&)?access_token="
        r"|qyapi\.weixin\.qq\.com/cgi-bin/webhook/send\?(?:[^\s#]*?&)?key=)(?P<secret>[A-Za-z0-9_\-]{16,})",
    ),
    ("api_key", r"(?<![A-Za-z0-9])SEC[0-9a-f]{64}(?![0-9A-Za-z])"),
    # a card's security code after its name: `CVV 123`, `CVC2: 1234`, 安全码是 123, 卡背后三位 123 (`CVV 是三位数` and
    # `CVV 3位` give none)
    (
        "security_code",
        r"(?i)(?:(?<![A-Za-z])cv[vc]2?(?![A-Za-z])(?:[码碼]|\s*code(?![A-Za-z]))?|安全[码碼]"
        r"|卡?背[后後面]的?(?:三|3)位(?:数字?|數字?|[码碼])?)"
        rf"{_LINK}(?P<secret>\d{{3,4}})(?!\d|{_UNIT})",
    ),
    # a passport number after its name: 护照号 E12345678, 护照号码：EA1234567, passport no. 123456789 (6 to 9
    # letters and digits with a digit); after 护照 alone, only a Chinese passport's form (E/G/P/S/D and 8 digits,
    # or 2 letters and 7 digits)
    (
        "passport_number",
        r"(?i)(?:(?:护照|護照)(?:号码|號碼|号|號|编号|編號)"
        r"|(?<![A-Za-z])passport\s*(?:(?:no|num|number)(?![A-Za-z])\.?|#))"
        rf"{_LINK}(?P<secret>(?=[A-Za-z]*\d)[A-Za-z0-9]{{6,9}})(?![A-Za-z0-9])",
    ),
    (
        "passport_number",
        rf"(?:护照|護照){_LINK}(?P<secret>[EGPSD]\d{{8}}|[A-Z]{{2}}\d{{7}})(?![A-Za-z0-9])",
    ),
    # the verb before the name: `I changed my wifi password to Tr0ub4dor&3` (the value has a digit or symbol, so
    # `changed my password to something stronger` is talk)
    (
        "password",
        r"(?i)(?<![A-Za-z])(?:changed|set|reset|updated|switched)\s+(?:(?:my|the|our|his|her|their)\s+)?"
        r"(?:[\w-]+\s+){0,2}?(?:password|passwd|passphrase|passcode|pin)\s+to\s+"
        r"(?!\[redacted )(?P<secret>(?=[^\s,;]*[0-9!@#$%^&*?_~+=])[^\s,;]{4,})",
    ),
    # a password on a command line: `mysql -uroot -pS3cret` (-p glued to its value; a lone -p asks for it; at most
    # 16 words between the program and its flag in this and the other command patterns, so a scan of a line of
    # repeated commands stays linear),
    # `sshpass -p S3cret`
    (
        "password",
        r"(?<![\w-])(?:(?:mysql(?:dump|admin|import|sh)?|mariadb(?:-dump|-admin)?)(?:[ \t]+\S+){0,16}?[ \t]+-p"
        r"|sshpass[ \t]+-p[ \t]*)"
        r"(?!\[redacted )(?P<secret>'[^'\n]*'|\"[^\"\n]*\""
        r"|[^\s\-'\"`,，。；;【\u3400-\u9fff][^\s'\"`,，。；;【\u3400-\u9fff]{2,})",
    ),
]

# `name <sep> value`: the value is the secret. For passwords, an explicit ':' or '=' makes any 3+ characters
# count; after a word ("is", 是, 为) the value must look like a secret (a digit or symbol, or 8+ Latin
# letters), so "my password is in 1Password" or 密码是生日 are left alone; after a few words (the password for
# my laptop is, is now, 换成了, 叫, 还是原来那个, 跟支付宝一样都是) or written straight after a Chinese name
# (密码Aa123456) it needs a digit or symbol. Generic names (secret, token, 密钥) need a token-like value: 8+
# characters with a digit.
_LATIN = r"(?i)(?<![A-Za-z])(?:{})(?![A-Za-z])"
_NAMED: list[tuple[str, bool, str]] = [
    ("password", False, _LATIN.format(r"password|passwd|passphrase|passcode|pin|pwd|pw")),
    (
        "password",
        False,
        r"(?i)(?:支付|取款|登录|登入|开机|開機|银行卡|銀行卡)?(?:密码|密碼)|口令|(?<![A-Za-z])pin\s*(?:码|碼)",
    ),
    (
        "api_key",
        True,
        _LATIN.format(
            r"api[ _-]?key|apikey|access[ _-]?token|auth[ _-]?token|secret[ _-]?key|client[ _-]?secret"
            r"|aws_secret_access_key|secret[ _-]?access[ _-]?key|access[ _-]?key[ _-]?secret"
            r"|account[ _-]?key|shared[ _-]?access[ _-]?key|secret|token"
        ),
    ),
    ("api_key", True, r"密钥|秘钥|令牌"),
]
# What leads from a name to its value, tried in this order; each asks its own of the value (_fits).
_EN_LINK = (
    r"(?:(?:is|was|has\s+been|had\s+been|will\s+be|got)\s+)?(?:now\s+)?"
    r"(?:(?:changed|set|reset|updated|switched|rotated)\s+to|is|was|now)"
)
_SEPARATORS: list[tuple[str, str]] = [
    # `password: x`, `"password": "x"` (JSON: the name's closing quote first), `key="Password" value="x"` (XML)
    ("explicit", r"(?i)[\"']?(?:\s*+[:=：]|\s++value\s*=)\s*"),
    ("word", r"(?i)\s*(?:\bis\b|\bwas\b|是|為|为)\s*"),
    # a few words between: `the password for my work laptop is`, `is now`, `changed to`, 换成了, 改为, 设成, 叫
    (
        "words",
        rf"(?i)(?:\s+(?:for|of|on|at|to|in)(?:\s+[^\s:=：,，。;；]+){{1,4}}?)?\s+{_EN_LINK}(?![A-Za-z])\s*[:：]?\s*"
        r"|\s*+(?:(?:跟|和|与|與|同)[^\s，。；;,：:]{1,10}?(?:一样|一樣|相同)[，,\s]*+)?"
        r"(?:现在|已经|已|都|就|也|又|还|還|刚|最近)?\s*+"
        r"(?:(?:换|改|设|設|设置|設置|设定|設定|重置|更新|更改|修改|变|變)(?:成|为|為)了?|叫做?|叫作|是|為|为)"
        r"\s*[:：]?\s*+(?:(?:原来|原來|以前|之前|从前|從前)的?)?(?:那个|那個|这个|這個)?\s*",
    ),
    ("bare", r"\s+"),
    # nothing between, after a Chinese name only (密码Aa123456, 门禁密码#8866#; `password123` is one word): the
    # value starts with a letter, a digit or a password's symbol, not with punctuation (密码：12, 密码+2FA)
    ("attached", rf"(?=[\"'“‘]?[A-Za-z0-9#@$%^&*_~!{_ZH_DIGIT}两十])"),
]
# Removed before searching: they hide a secret from the patterns without changing what a reader sees.
INVISIBLE = frozenset("\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\u00ad\ufeff\u180e\u034f")
# A value never starts at a placeholder (screening text already screened changes nothing), and is never a count
# (密码 8-16 位) or an algorithm's or encoding's name (密码sha256加密, password scram-sha-256).
_ALGORITHM = r"(?i:md5|sha-?\d*|scram-sha-?\d+|base64|aes-?\d*|rsa-?\d*|utf-?8|hmac-?[a-z0-9]*)(?![A-Za-z0-9])"
_VALUE = (
    rf"[\"'“‘]?(?!\[redacted |[\d.~+-]+{_UNIT}|{_ALGORITHM})([^\s\"'“”‘’，。、,；;\u3400-\u9fff]{{3,}}|{_SPELLED})"
)
# `user / password` after a login word: Login for the NAS: admin / Passw0rd!2024, 登录 root / Abc12345,
# Password for the admin panel: admin / Adm1n!2024
_LOGIN_PAIR = (
    r"(?i)(?:(?<![A-Za-z])(?:log[ -]?in|sign[ -]?in|credentials?|creds|account|password|passwd)(?![A-Za-z])"
    r"|登录|登陆|登入|账号|帐号|帳號|密码|密碼)"
    r"[^\n:：，。；;/]{0,40}?[:：\s]\s*(?=[\w.@+\-]*[A-Za-z])[\w.@+\-]{1,64}\s*/\s*"
    r"(?!\[redacted )(?P<secret>[^\s/,，。；;\"'`“”‘’\u3400-\u9fff]{3,})(?!/)"
)
# A run of digits is not a number on its own when it is part of a decimal (0.0857810984489368 is a fraction).
_CARD = rf"(?<![\dA-Za-z.])(?:\d{_DIGIT_SEP}?){{12,18}}\d(?![\dA-Za-z]|\.\d)"
# A book's number, not a card's: `ISBN 978 7 111 21382 6` may pass the Luhn check
_ISBN_BEFORE = re.compile(r"(?i)\bISBN(?:-1[03])?\s*[:：]?\s*$")
# written whole or in groups of 6, 8 and 4 (110105 19491231 002X) or of 6, 4, 4 and 4 (330106 1995 0612 1231)
_CN_ID = (
    rf"(?<![\dA-Za-z.])\d{{6}}{_DIGIT_SEP}?\d{{4}}{_DIGIT_SEP}?\d{{4}}{_DIGIT_SEP}?\d{{3}}[\dXx]"
    r"(?![\dA-Za-z]|\.\d)"
)
_SSN = r"(?<!\d)(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?!\d)"
_PLACEHOLDER = r"【已隐去[^】]*】|\[redacted [^\]]*\]"
_CLAUSE_END = r"[，。；！？、,;!?\n]|\.(?:\s|$)"
# Asking to keep something says nothing once the secret is gone ("remember it for me", 帮我记一下).
_FILLER = r"(?i)帮我|记住|记一下|记下|请|一下|[哦吧啊呢]|\b(?:please|remember|note|keep|save|it|this|that|for|me)\b"


def _scoped(source: str) -> str:
    """One pattern as a part of the first pass: its inline flags scoped to it, its named groups plain (names
    repeat)."""
    flags = re.match(r"\(\?([ais]+)\)", source)
    body = re.sub(r"\(\?P<\w+>", "(?:", source[flags.end():] if flags else source)
    return f"(?{flags.group(1) if flags else ''}:{body})"


class Patterns(NamedTuple):
    tokens: list[tuple[str, re.Pattern[str]]]  # (kind, the secret itself)
    names: list[tuple[str, bool, re.Pattern[str]]]  # (kind, token-like, a secret's name)
    separators: list[tuple[str, re.Pattern[str]]]  # (how, what leads from a name to its value)
    value: re.Pattern[str]
    login_pair: re.Pattern[str]
    card: re.Pattern[str]
    cn_id: re.Pattern[str]
    ssn: re.Pattern[str]
    first_pass: re.Pattern[str]  # where any of them matches: one scan rules out most texts before each runs
    placeholder: re.Pattern[str]
    clause_end: re.Pattern[str]
    filler: re.Pattern[str]


@cache
def patterns() -> Patterns:
    """Every pattern of this module, compiled once: on the first text screened, or by the server's warm-up after
    its handshake (compiling them takes about 50 ms, which a server would otherwise pay before it)."""
    first_pass = [*(s for _, s in _TOKEN_PATTERNS), *(s for _, _, s in _NAMED), _LOGIN_PAIR, _CARD, _CN_ID, _SSN]
    return Patterns(
        tokens=[(kind, re.compile(source)) for kind, source in _TOKEN_PATTERNS],
        names=[(kind, token_like, re.compile(source)) for kind, token_like, source in _NAMED],
        separators=[(how, re.compile(source)) for how, source in _SEPARATORS],
        value=re.compile(_VALUE),
        login_pair=re.compile(_LOGIN_PAIR),
        card=re.compile(_CARD),
        cn_id=re.compile(_CN_ID),
        ssn=re.compile(_SSN),
        first_pass=re.compile("|".join(_scoped(source) for source in first_pass)),
        placeholder=re.compile(_PLACEHOLDER),
        clause_end=re.compile(_CLAUSE_END),
        filler=re.compile(_FILLER),
    )


_CN_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_CN_ID_CHECK = "10X98765432"


@dataclass(frozen=True)
class Finding:
    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class Screened:
    text: str  # with every finding replaced by a placeholder
    findings: tuple[Finding, ...]

    @property
    def kinds(self) -> list[str]:
        return list(dict.fromkeys(f.kind for f in self.findings))


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def cn_id_ok(number: str) -> bool:
    """A mainland resident ID: checksum over the first 17 digits, and a real birth date in 1900..today."""
    body, check = number[:17], number[17].upper()
    if _CN_ID_CHECK[sum(int(d) * w for d, w in zip(body, _CN_ID_WEIGHTS, strict=True)) % 11] != check:
        return False
    try:
        born = date(int(body[6:10]), int(body[10:12]), int(body[12:14]))
    except ValueError:
        return False
    return born.year >= 1900


def _looks_secret(value: str, token_like: bool) -> bool:
    if token_like:
        return len(value) >= 8 and any(c.isdigit() for c in value)
    return bool(re.search(r"[\d\W_]", value)) or (value.isascii() and len(value) >= 8)


def _fits(how: str, value: str, token_like: bool) -> bool:
    """Does `value`, reached from a secret's name by separator `how`, look like the secret itself?

    After ':' or '=' any 3 characters make a password; after a word (is, 是) it must look like one; after a few
    words, a password needs a digit or symbol (`the password for it is written down` is talk); after a bare
    space, 4+ characters with a digit (`password manager`, `token bucket` are talk); straight after a Chinese
    name, 4+ characters with a digit or symbol (密码Aa123456, 门禁密码#8866#). A value spelled in Chinese numerals
    (六个八) is a password's whatever leads to it."""
    if re.fullmatch(_SPELLED, value):  # 六个八, 一二三四五六: a password's, never a token's
        return not token_like
    if len(value) < 3 or (how in ("bare", "attached") and len(value) < 4):
        return False
    if how == "explicit":
        return not token_like or _looks_secret(value, token_like)
    if how == "word" or token_like:
        return _looks_secret(value, token_like)
    if how in ("words", "attached"):  # and a letter or digit: `the password is now ...` gives none
        return re.search(r"[\d\W_]", value) is not None and re.search(r"[^\W_]", value) is not None
    return any(c.isdigit() for c in value)


def _login_password(value: str) -> bool:
    """The value after `user /`: a digit or a symbol in it, and not only a number (`clicks / 1000`, `12.5%`)."""
    return re.search(r"[\d\W_]", value) is not None and re.fullmatch(r"[\d.,%]+", value) is None


def normalised(text: str) -> tuple[str, list[int]]:
    """NFKC text without invisible characters, and for each of its characters the index it came from."""
    out: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        if ch in INVISIBLE:
            continue
        folded = unicodedata.normalize("NFKC", ch) if not ch.isascii() else ch
        for piece in folded:
            if piece not in INVISIBLE:
                out.append(piece)
                origin.append(i)
    return "".join(out), origin


def find_secrets(text: str) -> list[Finding]:
    """Secrets in `text`, searched in its normalised form; spans index the original text."""
    if text.isascii() or (INVISIBLE.isdisjoint(text) and unicodedata.is_normalized("NFKC", text)):
        return _find(text)  # already its normalised form: the spans are the text's own
    folded, origin = normalised(text)
    return [Finding(f.kind, origin[f.start], origin[f.end - 1] + 1) for f in _find(folded)]


def _find(text: str) -> list[Finding]:
    found: list[Finding] = []
    compiled = patterns()
    if compiled.first_pass.search(text) is None:
        return found

    starts: list[int] = []  # found is kept in order and never overlaps: a new finding is checked against its neighbours

    def add(kind: str, start: int, end: int) -> None:
        i = bisect.bisect_right(starts, start)
        if (i == 0 or found[i - 1].end <= start) and (i == len(found) or end <= found[i].start):
            starts.insert(i, start)
            found.insert(i, Finding(kind, start, end))

    for kind, pattern in compiled.tokens:
        for m in pattern.finditer(text):
            add(kind, *m.span("secret" if "secret" in pattern.groupindex else 0))
    for kind, token_like, names in compiled.names:
        for m in names.finditer(text):
            span = _named_value(text, m.end(), token_like)
            if span is not None:
                add(kind, *span)
    for m in compiled.login_pair.finditer(text):
        secret = _without_sentence_end(m.group("secret"))
        if len(secret) >= 4 and _login_password(secret):
            add("password", m.start("secret"), m.start("secret") + len(secret))
    for m in compiled.cn_id.finditer(text):
        if cn_id_ok(re.sub(_DIGIT_SEP, "", m.group())):
            add("id_number", m.start(), m.end())
    for m in compiled.card.finditer(text):
        digits = re.sub(_DIGIT_SEP, "", m.group())
        book = _ISBN_BEFORE.search(text, max(0, m.start() - 12), m.start())
        if 13 <= len(digits) <= 19 and luhn_ok(digits) and book is None:
            add("card_number", m.start(), m.end())
    for m in compiled.ssn.finditer(text):
        add("id_number", m.start(), m.end())
    return found


def _without_sentence_end(value: str) -> str:
    """A value without the full stop or bracket that ends its sentence (`password: hunter2.`); `!` and `?` are
    kept, since passwords end with them (Hunter2024!) and showing one would give part of the secret away."""
    return value.rstrip(".)")


def _named_value(text: str, at: int, token_like: bool) -> tuple[int, int] | None:
    """The span of the value that a secret's name ending at `at` leads to, if there is one."""
    compiled = patterns()
    for how, separator in compiled.separators:
        if how == "attached" and not has_cjk(text[at - 1]):
            continue  # a Latin name runs on into what follows it: `password123` is one word
        sep = separator.match(text, at)
        value = compiled.value.match(text, sep.end()) if sep is not None else None
        if value is None:
            continue
        secret = _without_sentence_end(value.group(1))
        if _fits(how, secret, token_like):
            return value.start(1), value.start(1) + len(secret)
    return None


def placeholder(kind: str, zh: bool) -> str:
    zh_label, en_label = KIND_LABELS[kind]
    return f"【已隐去的{zh_label}】" if zh else f"[redacted {en_label}]"


def screen(text: str) -> Screened:
    findings = find_secrets(text)
    if not findings:
        return Screened(text, ())
    zh = has_cjk(text)
    out: list[str] = []
    last = 0
    for f in findings:
        out.append(text[last : f.start])
        out.append(placeholder(f.kind, zh))
        last = f.end
    out.append(text[last:])
    return Screened("".join(out), tuple(findings))


def describe(kinds: list[str]) -> str:
    return ", ".join(KIND_LABELS[k][1] for k in kinds)


def named(kinds: list[str]) -> str:
    """The kinds as a sentence names them: `an API key, a password`."""
    return ", ".join(("an " if KIND_LABELS[k][1][0] in "AEIOU" else "a ") + KIND_LABELS[k][1] for k in kinds)


def meaningful(redacted: str) -> bool:
    """Is anything worth remembering left once the secrets are gone (docs/privacy.md)?

    In a clause that held a secret, the words before it only name the secret and its owner (我的 OpenAI API key
    是 …, the VPN password is …): they do not count. What follows the secret in its clause, and every clause
    without one, counts (公司 VPN 的密码是 【…】，每季度换一次 keeps 每季度换一次), less secret names and the words
    that ask to remember. Four word characters left are enough."""
    kept: list[str] = []
    compiled = patterns()
    for clause in compiled.clause_end.split(redacted):
        parts = compiled.placeholder.split(clause)
        kept.extend(parts[1:] if len(parts) > 1 else parts)
    rest = " ".join(kept)
    for _, _, names in compiled.names:
        rest = names.sub("", rest)
    return len(re.findall(r"\w", compiled.filler.sub("", rest))) >= 4


def holds_placeholder(content: str) -> bool:
    """Was a secret redacted from this stored text (does it hold a placeholder: 【已隐去的密码】, [redacted …])?"""
    return patterns().placeholder.search(content) is not None


@dataclass(frozen=True)
class ScreenedMemory:
    content: str
    keywords: list[str]
    kinds: list[str]


def screen_memory(content: str, keywords: list[str]) -> ScreenedMemory:
    """Redact a memory's content; drop any keyword that carries a secret (a keyword is too short to redact)."""
    body = screen(content)
    kinds = list(body.kinds)
    kept: list[str] = []
    for keyword in keywords:
        found = find_secrets(keyword)
        if found:
            kinds.extend(f.kind for f in found)
        else:
            kept.append(keyword)
    return ScreenedMemory(body.text, kept, list(dict.fromkeys(kinds)))


@dataclass(frozen=True)
class Scrubbed:
    text: str
    kinds: list[str]


def scrub(text: str) -> Scrubbed:
    """The one screening step for any text a store keeps besides content and keywords (source, source_ref,
    operation_id, reasons, profile text, imported rows): secrets replaced by a placeholder."""
    screened = screen(text)
    return Scrubbed(screened.text, screened.kinds)


def kept_text(value: str, field: str, *, max_chars: int) -> str:
    """A side text a store keeps (source, source_ref, operation_id, a reason): cleaned, checked, secrets redacted."""
    return scrub(clean_text(value, field, max_chars=max_chars)).text
