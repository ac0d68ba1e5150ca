"""Privacy: secrets are redacted or refused (never stored silently), and temporary mode stores and recalls nothing."""

from __future__ import annotations

import json

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.errors import InvalidInput
from pocketmem.base.models import EventKind
from pocketmem.core.privacy import cn_id_ok, find_secrets, luhn_ok, screen
from pocketmem.mcp.server import build_server
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest

from .helpers import call, error

pytestmark = [pytest.mark.anyio]
USER = "global"

SECRETS = [
    (
        "my OpenAI key is sk-proj-abcdefghijklmnopqrstuvwxyz123456",
        "api_key",
        "sk-proj-abcdefghijklmnopqrstuvwxyz123456",
    ),
    (
        "anthropic: sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123",
        "api_key",
        "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123",
    ),
    ("AWS key AKIAIOSFODNN7EXAMPLE for the backup bucket", "api_key", "AKIAIOSFODNN7EXAMPLE"),
    ("I changed my wifi password to Tr0ub4dor&3 yesterday", "password", "Tr0ub4dor&3"),
    ("Reset the router PIN to 4455 last week", "password", "4455"),
    ("阿里云 OSS 用的 LTAI5tQb7XvK2mN9pR4sW8yZ 这个 AccessKey", "api_key", "LTAI5tQb7XvK2mN9pR4sW8yZ"),
    ("腾讯云 AKIDz8krbsJ5yKBZQpn74WFkmLPx3gnPhESA 放在 CI 里", "api_key", "AKIDz8krbsJ5yKBZQpn74WFkmLPx3gnPhESA"),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "api_key",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    ("deploy token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "api_key", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "api_key",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    ),
    ("slack bot xoxb-123456789012-abcdefghijKL", "api_key", "xoxb-123456789012-abcdefghijKL"),
    ("password: hunter2", "password", "hunter2"),
    ("my password is Tr0ub4dor&3", "password", "Tr0ub4dor&3"),
    ("用户的服务器密码是Hunter2!记得改", "password", "Hunter2"),
    ("银行卡密码：886622", "password", "886622"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
     "private_key", "b3BlbnNzaC1rZXktdjEAAAAA"),
    ("卡号 4111 1111 1111 1111，有效期 12/28", "card_number", "4111 1111 1111 1111"),
    ("card 5500-0000-0000-0004 expires soon", "card_number", "5500-0000-0000-0004"),
    ("身份证号11010519491231002X", "id_number", "11010519491231002X"),
    ("SSN 123-45-6789", "id_number", "123-45-6789"),
    # a few words between the name and the value
    ("我的 gmail 密码换成了 Tr0ub4dor&3 以后登录用它", "password", "Tr0ub4dor&3"),
    ("The password for my work laptop is Tr0ub4dor&3, changed monthly", "password", "Tr0ub4dor&3"),
    ("家里 WiFi 的密码叫 sunshine123，客人来了告诉他们", "password", "sunshine123"),
    ("服务器密码改成了 Zz!2024corp", "password", "Zz!2024corp"),
    ("路由器密码设成 qwe!@#123 了", "password", "qwe!@#123"),
    ("密码现在是 Abc12345", "password", "Abc12345"),
    ("路由器密码叫 88888888，贴在背面", "password", "88888888"),
    ("the wifi password is now Sunshine2024, tell guests", "password", "Sunshine2024"),
    ("my password was changed to Hunter22x last week", "password", "Hunter22x"),
    # a login pair, a command line, token prefixes
    ("Login for the NAS: admin / Passw0rd!2024, web UI on port 5000", "password", "Passw0rd!2024"),
    ("NAS 登录 admin / Passw0rd!2024", "password", "Passw0rd!2024"),
    ("连接命令 mysql -uroot -pS3cretPass9 -h 10.0.0.5", "password", "S3cretPass9"),
    ("sshpass -p 'S3cr3t pass' ssh root@host", "password", "S3cr3t pass"),
    ("Hugging Face 下载用 hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345 这个令牌", "api_key",
     "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"),
    ("GitLab 的 glpat-AbCdEfGhIjKlMnOpQrSt 用于 CI 部署", "api_key", "glpat-AbCdEfGhIjKlMnOpQrSt"),
    # environment variables, command-line credentials, headers
    ("连数据库用 PGPASSWORD=Secr3t!x psql -h db -U app，每次部署都要", "password", "Secr3t!x"),
    ("MYSQL_PWD='my pass 9' mysql -u root shop", "password", "my pass 9"),
    ("REDIS_PASSWORD=r3dis! in the compose file", "password", "r3dis!"),
    ("export JWT_SECRET=abcdef12345 before starting the app", "api_key", "abcdef12345"),
    ("CI_DEPLOY_TOKEN=Zx81kLmq92 in the pipeline", "api_key", "Zx81kLmq92"),
    ("Deploy with curl -u admin:Passw0rd!9 https://ci.example.com/job/build every Friday", "password",
     "Passw0rd!9"),
    ("curl -s --user bot:s3cr3tv4lue https://api.example.com/v1", "password", "s3cr3tv4lue"),
    ("docker login -u sam -p Dock3rPass! registry.example.com before pushing images", "password", "Dock3rPass!"),
    ("podman login --password=Pod9man! quay.io", "password", "Pod9man!"),
    ("redis-cli -a R3disPass! -h cache.local is how Sam checks the cache", "password", "R3disPass!"),
    ("Authorization: Basic YWRtaW46cGFzc3dvcmQxMjM= is the header for the legacy API", "password",
     "YWRtaW46cGFzc3dvcmQxMjM="),
    # webhooks: only the secret part of the URL
    ("Slack webhook https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX posts to #alerts",
     "api_key", "XXXXXXXXXXXXXXXXXXXXXXXX"),
    ("Discord https://discord.com/api/webhooks/123456789012345678/AbCdEfGhIjKlMnOpQrStUvWxYz-0123456789 通知",
     "api_key", "AbCdEfGhIjKlMnOpQrStUvWxYz-0123456789"),
    ("飞书机器人 https://open.feishu.cn/open-apis/bot/v2/hook/a1b2c3d4-e5f6-7890-abcd-ef1234567890发日报",
     "api_key", "a1b2c3d4-e5f6-7890-abcd-ef1234567890"),
    ("钉钉告警 https://oapi.dingtalk.com/robot/send?access_token=9f8e7d6c5b4a39281706f5e4d3c2b1a0 发到群里",
     "api_key", "9f8e7d6c5b4a39281706f5e4d3c2b1a0"),
    ("钉钉加签 SEC9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0 放配置里", "api_key",
     "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0"),
    ("企业微信机器人 https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=693a91f6-7a2b-4bc4-97a0-0ec2d1fa5aaa",
     "api_key", "693a91f6-7a2b-4bc4-97a0-0ec2d1fa5aaa"),
    ("用户身份证 110105 19491231 002X 办护照用过", "id_number", "110105 19491231 002X"),
    ("身份证号 110105-19491231-002X", "id_number", "19491231-002X"),
    # pasted configuration: the name's closing quote stands before the separator (JSON), or the value is an
    # attribute beside it (XML)
    ('The ftp deploy config.json has "password": "Winter2024!deploy"', "password", "Winter2024"),
    ('{"password":"hunter2x"}', "password", "hunter2x"),
    ('"db_password": "s3cr3tpw"', "password", "s3cr3tpw"),
    ('"apiKey": "abcd1234efgh5678"', "api_key", "abcd1234efgh5678"),
    ('<add key="Password" value="P@ssw0rd99"/>', "password", "P@ssw0rd99"),
    ("Password for the staging admin panel: admin / Adm1n!2024", "password", "Adm1n!2024"),
    # a password's last character is its own, not the sentence's
    ("psql 'host=db.internal user=app password=Sup3rS3cret! dbname=app'", "password", "Sup3rS3cret!"),
    ("ssh root@10.0.0.5 with password Hunter2024!", "password", "Hunter2024!"),
    # a Chinese name followed straight by its value, the commonest way to write it
    ("密码Aa123456，别忘了", "password", "Aa123456"),
    ("wifi密码Aa123456", "password", "Aa123456"),
    ("口令Aa123456", "password", "Aa123456"),
    ("门禁密码#8866#", "password", "8866"),
    ("银行卡PIN码4455，别告诉别人", "password", "4455"),
    ("部署用的密钥8f3kLmN0pQrStUvWxYz", "api_key", "8f3kLmN0pQrStUvWxYz"),
    ("密码还是Aa123456", "password", "Aa123456"),
    # a six-digit payment PIN, attached or after a separator
    ("支付密码520131", "password", "520131"),
    ("取款密码520131，在柜台用", "password", "520131"),
    ("银行卡密码 520131", "password", "520131"),
    ("支付密码：520131", "password", "520131"),
    ("支付密码为520131", "password", "520131"),
    # a card's security code, a passport number
    ("信用卡有效期 08/27，CVV 123，招行的", "security_code", "123"),
    ("card ending 4242, CVC2: 1234", "security_code", "1234"),
    ("安全码是 456，别告诉别人", "security_code", "456"),
    ("卡背后三位 789", "security_code", "789"),
    ("护照号 E12345678", "passport_number", "E12345678"),
    ("护照号码：EA1234567，明年到期", "passport_number", "EA1234567"),
    ("我的护照G12345678下个月到期", "passport_number", "G12345678"),
    ("Passport no. X1234567 expires in 2030", "passport_number", "X1234567"),
    ("passport number is 123456789", "passport_number", "123456789"),
    # a phrase between a Chinese name and its value: 跟…一样, 原来那个
    ("我的微信支付密码跟银行卡一样都是 123789 ，千万别忘了。", "password", "123789"),
    ("银行卡密码跟支付宝一样，都是 520131，每天都要用。", "password", "520131"),
    ("密码还是原来那个 Lx@2024，每天都要用。", "password", "Lx@2024"),
    ("支付密码和以前的一样是123789", "password", "123789"),
    ("密码还是之前的 Lx@2024", "password", "Lx@2024"),
    # a PIN spelled in Chinese numerals
    ("我的银行卡密码是六个八，每次取钱都用。", "password", "六个八"),
    ("取款密码是三个六三个八，别告诉别人", "password", "三个六三个八"),
    ("支付密码一二三四五六", "password", "一二三四五六"),
    ("PIN码是幺三五七", "password", "幺三五七"),
    # cloud keys: the AWS secret key beside its id, Azure connection strings, a key as a URL's user part
    ("AWS creds: AKIAIOSFODNN7EXAMPLE / wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "api_key",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ('{"AccessKeyId": "ASIAIOSFODNN7EXAMPLE", "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}',
     "api_key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("DefaultEndpointsProtocol=https;AccountName=myacct;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFi+/AB==;"
     "EndpointSuffix=core.windows.net", "api_key", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFi+/AB=="),
    ("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
     "SharedAccessKey=abc123DEF456ghi789JKL=", "api_key", "abc123DEF456ghi789JKL="),
    ("SENTRY_DSN=https://4f3a9b2c1d0e4f5a6b7c8d9e0f1a2b3c@o123456.ingest.sentry.io/789", "api_key",
     "4f3a9b2c1d0e4f5a6b7c8d9e0f1a2b3c"),
    ("git remote https://ghx1234567890abcdefXYZ@github.com/me/repo.git", "api_key", "ghx1234567890abcdefXYZ"),
    # ID and card numbers in groups of four, or with middle dots
    ("身份证号码：330106 1995 0612 1231，填表用。", "id_number", "1995 0612"),
    ("身份证 330106-1995-0612-1231", "id_number", "1995-0612"),
    ("卡号：6228·4800·1234·5678·11，招行的。", "card_number", "1234·5678"),
    ("卡号 6228•4800•1234•5678•11", "card_number", "1234•5678"),
]

NOT_SECRETS = [
    "I forgot my password again",
    "my password is in 1Password",
    "密码是生日",
    "用户不喜欢香菜，吃到会很反感。",
    "Docker 构建要用 proxy-env",
    "订单号 4111111111111112",  # fails the Luhn check
    "实验结果是 0.08578109844893689",  # the digits of a fraction, Luhn-valid as a run of their own
    "喜欢蓝色的杯子0.08578109844893689",
    "身份证 110105194912310021",  # wrong checksum
    "手机号 13800138000",
    "the meeting is on 2026-11-28 at 10:00",
    "My secret: chocolate",
    "I like shopping: books",
    "the API key lives in the vault",
    # passwords mentioned, none given
    "用户忘了 gmail 密码",
    "I changed my password yesterday",
    "密码要求至少8位",
    "the password policy is strict",
    "the password for the wifi is on the fridge",
    "the password for github is stored in 1Password",
    "The password for the router is written on the back",
    "the password was changed to something stronger",
    "I moved my password to 1Password",
    "I changed my password to something stronger",
    "we set the password policy to 12 characters minimum",
    "密码长度为 128 位",
    "密码改成了 12 位以上",
    "the token for CI is refreshed every 10 minutes",
    "Login options: email / mobile.",
    "login success rate: clicks / 1000",
    "sign in with Google / GitHub",
    "mysql -u root -p mydb",  # a lone -p: mysql asks for the password
    "mysql -h db -P3306",
    "use curl -u to send a user name and password",
    "curl -u user:password is the syntax",
    'curl -u "$API_USER:$API_PASS" https://api.example.com',
    "run docker login before pushing images",
    "docker login --password-stdin < token.txt",
    "docker login -p flag is insecure",
    "connect with redis-cli -a and the password",
    "redis-cli -a",
    "PGPASSWORD is an env var",
    "set PGPASSWORD=$DB_PASS in CI",
    "Basic auth is deprecated, send Authorization: Basic",
    "the basic plan has 8GB/16GB RAM options",
    "Slack webhooks start with https://hooks.slack.com/services/",
    "飞书机器人的地址是 https://open.feishu.cn/open-apis/bot/v2/hook/ 加上机器人的 id",
    "身份证 110105 19491231 0021",  # grouped, wrong checksum
    "身份证 110105-19491331-0021",  # grouped, checksum right, month 13
    # a Chinese name followed by words, a count or an algorithm, not by a value
    "密码错误",
    "密码学是一门有意思的课",
    "密码箱放在衣柜里",
    "密码还是生日",
    "密码要求8-16位，字母加数字",
    "密码 8-16 位",
    "密码：6-20位字母数字组合",
    "密码128位加密",
    "密码2024年改过",
    "密码sha256加密后存库",
    "密码 md5 加密",
    "password hashing uses scram-sha-256",
    "密码+2FA登录",
    "密码>=12位",
    "密码：12",
    "口令红包",
    "password123 is the worst password",  # a Latin name runs on: one word
    "银行卡密码，记不清了",
    # security codes and passports talked about
    "CVV 是三位数",
    "CVV 3位，在卡背面",
    "护照号码有9位",
    "护照2024年到期",
    "the passport number is in the drawer",
    "手机号 138 0013 8000",
    # a comparison or 原来那个 with no value after it, or a count
    "密码跟生日一样",
    "密码跟以前一样是8位",
    "密码跟以前一样都是 8 位",
    "密码还是原来那个",
    "密码还是原来那个，没改",
    "密码跟用户名一样都是小写字母",
    "密码跟账号一样都是手机号",
    "我的密码跟你的一样长",
    "忘了密码",
    "密码要8位以上",
    # Chinese numerals that are no PIN
    "密码是六位数",
    "密码是一个八位数",
    "密码三个月换一次",
    "密码两个人知道",
    "密码一定要记住",
    "密码一二年就设了",
    "密码是一九九五年设的",
    "密码二次确认",
    "一二三四五六七八",
    # URLs, cloud key names and groups of digits that hold no secret
    "https://x-access-token@github.com/owner/repo",
    "app 的 git remote 是 https://zhangsan_2019_work@bitbucket.org/team/app.git",
    "Our repo is cloned from https://contoso2024engineering@dev.azure.com/contoso2024engineering/app/_git/app",
    "我的密码是三个一样的字母加两位数字，别的不记得了",
    "这本书的 ISBN 978 7 111 21382 6，图书馆能借到",
    "ISBN: 9787111213826",
    "SharedAccessKeyName=RootManageSharedAccessKey",
    "the account key is in the vault",
    "AccessKey rotation every 90 days",
    "身份证 330106 1995 0612 1232",  # grouped by four, wrong checksum
    "手机号 138·0013·8000",
    "2024·06·12 见面",
    "订单 6228·4800·1234·5678·12",  # fails the Luhn check
]


@pytest.mark.parametrize(("text", "kind", "secret"), SECRETS)
def test_each_kind_of_secret_is_found_and_redacted(text, kind, secret):
    screened = screen(text)
    assert screened.kinds == [kind]
    assert secret not in screened.text
    assert ("【已隐去的" in screened.text) or ("[redacted " in screened.text)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("psql 'user=app password=Sup3rS3cret! dbname=app'", "psql 'user=app password=[redacted password] dbname=app'"),
        ("ssh root@10.0.0.5 with password Hunter2024!", "ssh root@10.0.0.5 with password [redacted password]"),
        ("my password is hunter2.", "my password is [redacted password]."),
    ],
)
def test_a_passwords_last_character_is_redacted_with_it(text, shown):
    assert screen(text).text == shown


@pytest.mark.parametrize(("text", "kind", "secret"), SECRETS)
def test_screening_screened_text_changes_nothing(text, kind, secret):
    once = screen(text).text
    assert screen(once).text == once  # an import of an export, a patch of a redacted memory


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_talk_about_secrets_is_not_a_secret(text):
    assert find_secrets(text) == []
    assert screen(text).text == text


def test_checksums():
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")
    assert cn_id_ok("11010519491231002X") and not cn_id_ok("110105194912310021")
    assert not cn_id_ok("110105194913310029")  # month 13: checksum aside, not a birth date


async def _events(app: PocketMem) -> list:
    async with app.store.read() as r:
        return await r.list_events(USER, 1000)


@pytest.mark.backends
async def test_add_memory_redacts_and_says_so(app):
    result = await app.writing.add(
        USER, AddRequest(
            content="用户的服务器密码是Hunter2!，部署时要用", keywords=["服务器", "sk-abcdefghijklmnopqrstuvwx12"]
        )
    )
    assert result.status == "stored" and result.redacted == ["password", "api_key"]
    assert "password" in result.message and "API key" in result.message
    async with app.store.read() as r:
        memory = await r.get_memory(USER, result.memory_id)
    assert memory.content == "用户的服务器密码是【已隐去的密码】，部署时要用"  # its "!" is its own
    assert memory.keywords == ["服务器"]
    everything = json.dumps([e.model_dump(mode="json") for e in await _events(app)], ensure_ascii=False)
    assert "Hunter2" not in everything and "sk-abcdef" not in everything


@pytest.mark.backends
@pytest.mark.parametrize("content", ["password: hunter2", "密码：886622", "api_key=sk-abcdefghijklmnopqrstuvwx12"])
async def test_a_labelled_secret_alone_is_refused(app, content):
    result = await app.writing.add(USER, AddRequest(content=content))
    assert (result.status, result.reason) == ("discarded", "secret")


@pytest.mark.backends
async def test_a_memory_that_is_only_a_secret_is_refused(app):
    result = await app.writing.add(USER, AddRequest(content="sk-proj-abcdefghijklmnopqrstuvwxyz123456"))
    assert (result.status, result.reason, result.redacted) == ("discarded", "secret", ["api_key"])
    assert result.memory_id is None and "Never save secrets" in result.message
    assert "contains an API key" in result.message, result.message
    events = await _events(app)
    assert [(e.kind, e.payload) for e in events] == [(EventKind.discarded, {"reason": "secret", "kinds": ["api_key"]})]


@pytest.mark.backends
async def test_refuse_mode_refuses_instead_of_redacting(tmp_path, clock, make_settings):
    async with PocketMem(make_settings(tmp_path, secrets="refuse"), clock=clock) as app:
        result = await app.writing.add(USER, AddRequest(content="my password is Tr0ub4dor&3, remember it for me"))
        assert (result.status, result.reason) == ("discarded", "secret")
        assert (await app.stats(USER))["active"] == 0
        core = await app.writing.add(USER, AddRequest(content="用户叫小林", scores={"persistence": 1}))
        with pytest.raises(InvalidInput, match="patch: contains a password"):
            await app.patching.patch_core(USER, core.memory_id, "密码：hunter2", "append", None)


@pytest.mark.backends
async def test_patches_are_redacted_too(app):
    core = await app.writing.add(USER, AddRequest(content="用户在公司用一台 MacBook", scores={"persistence": 1}))
    patched = await app.patching.patch_core(USER, core.memory_id, "换了新电脑，开机密码是 Qwer1234!", "append", None)
    assert patched.redacted == ["password"]
    assert "Qwer1234" not in patched.memory.content and "【已隐去的密码】" in patched.memory.content


@pytest.mark.backends
async def test_temporary_setting_stores_and_recalls_nothing(tmp_path, clock, make_settings):
    path = tmp_path / "shared.db"
    async with PocketMem(make_settings(tmp_path, db=path), clock=clock) as normal:
        kept = await normal.writing.add(USER, AddRequest(content="用户不喜欢香菜", keywords=["香菜"]))
        assert kept.status == "stored"
    async with PocketMem(make_settings(tmp_path, db=path, temporary=True), clock=clock) as temp:
        result = await temp.writing.add(USER, AddRequest(content="用户今天心情很差"))
        assert (result.status, result.reason) == ("discarded", "temporary")
        recalled = await temp.retrieval.recall(USER, RecallRequest(query="晚饭能放香菜吗", keywords=["香菜"]))
        assert recalled.temporary and recalled.memories == [] and recalled.injection == ""
        assert "Temporary mode" in await temp.user_card(USER)
        stats = await temp.stats(USER)
        assert stats["active"] == 1
        async with temp.store.read() as r:
            memory = await r.get_memory(USER, kept.memory_id)
            assert memory.use_count == 0  # not even counted as recalled
            assert [e.kind for e in await r.list_events(USER)] == [EventKind.created]


@pytest.mark.backends
async def test_temporary_per_call_through_the_client(client: Client):
    stored = await client.call_tool("add_memory", {"content": "用户养了一只叫小白的猫", "keywords": ["猫"]})
    temp = await client.call_tool("add_memory", {"content": "用户刚和女朋友吵架了", "temporary": True})
    assert temp.structured_content["status"] == "discarded" and temp.structured_content["reason"] == "temporary"
    off = await client.call_tool("recall_memories", {"query": "小白今天不吃饭", "keywords": ["猫"], "temporary": True})
    assert off.structured_content["temporary"] is True and off.structured_content["memories"] == []
    on = await client.call_tool("recall_memories", {"query": "小白今天不吃饭", "keywords": ["猫"]})
    assert [m["id"] for m in on.structured_content["memories"]] == [stored.structured_content["memory_id"]]
    listed = await client.call_tool("list_memories", {})
    assert [i["content"] for i in listed.structured_content["items"]] == ["用户养了一只叫小白的猫"]


@pytest.mark.backends
async def test_secret_refusal_through_the_client(tmp_path, clock, make_settings):
    app = PocketMem(make_settings(tmp_path, secrets="refuse"), clock=clock)
    await app.open()
    try:
        async with Client(build_server(app.settings, app=app), mode="legacy") as client:
            result = await client.call_tool("add_memory", {"content": "信用卡 4111 1111 1111 1111 的额度是五万"})
            assert not result.is_error
            assert result.structured_content["status"] == "discarded"
            assert result.structured_content["redacted"] == ["card_number"]
    finally:
        await app.close()


@pytest.mark.backends
async def test_a_secret_with_only_its_name_around_it_is_refused_and_says_why(client: Client):
    key = "sk-proj-abcdefghijklmnopqrstuvwxyz123456"
    refused = await client.call_tool("add_memory", {"content": f"我的 OpenAI API key 是 {key}"})
    assert not refused.is_error
    out = refused.structured_content
    assert (out["status"], out["reason"], out["redacted"]) == ("discarded", "secret", ["api_key"])
    assert "nothing worth remembering is left without it" in out["message"]
    english = await client.call_tool("add_memory", {"content": "my password is Tr0ub4dor&3, remember it for me"})
    assert english.structured_content["reason"] == "secret"
    kept = await client.call_tool("add_memory", {"content": "公司 VPN 的密码是 Qwer1234!x，每季度换一次"})
    assert (kept.structured_content["status"], kept.structured_content["redacted"]) == ("stored", ["password"])
    listed = (await client.call_tool("list_memories", {})).structured_content["items"]
    assert [item["content"] for item in listed] == ["公司 VPN 的密码是 【已隐去的密码】，每季度换一次"]


# (what the user says, its secret, a recall that finds it: query and keywords)
PHRASED = [
    ("我的 gmail 密码换成了 Tr0ub4dor&3 以后登录用它", "Tr0ub4dor&3", "gmail 登录不上了", ["gmail"]),
    ("The password for my work laptop is Hunter22!x, changed monthly", "Hunter22!x",
     "what's my laptop password?", ["laptop"]),
    ("家里 WiFi 的密码叫 sunshine123，客人来了告诉他们", "sunshine123", "WiFi 密码多少", ["WiFi"]),
    ("Login for the NAS: admin / Passw0rd!2024, web UI on port 5000", "Passw0rd!2024",
     "how do I open the NAS web UI", ["NAS"]),
    ("数据库连接命令 mysql -uroot -pS3cretPass9 -h 10.0.0.5", "S3cretPass9", "怎么连数据库", ["mysql"]),
    ("Hugging Face 下载模型用 hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345 这个令牌，放在 CI 变量里",
     "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "怎么下载 Hugging Face 模型", ["Hugging Face"]),
    ("GitLab 的 glpat-AbCdEfGhIjKlMnOpQrSt 用于 CI 部署", "glpat-AbCdEfGhIjKlMnOpQrSt", "CI 部署用什么",
     ["GitLab"]),
]

# command lines, environment variables, headers, webhooks and grouped ID numbers, as users paste them
PASTED = [
    ("连数据库用 PGPASSWORD=Secr3t!x psql -h db -U app，每次部署都要", "Secr3t!x", "怎么连数据库", ["psql"]),
    ("Deploy with curl -u admin:Passw0rd!9 https://ci.example.com/job/build every Friday", "Passw0rd!9",
     "how do I trigger the CI build", ["curl"]),
    ("docker login -u sam -p Dock3rPass! registry.example.com before pushing images", "Dock3rPass!",
     "push the docker image", ["docker"]),
    ("redis-cli -a R3disPass! -h cache.local is how Sam checks the cache", "R3disPass!", "check the redis cache",
     ["redis"]),
    ("Authorization: Basic YWRtaW46cGFzc3dvcmQxMjM= is the header for the legacy API", "YWRtaW46cGFzc3dvcmQxMjM=",
     "legacy API header", ["legacy API"]),
    ("飞书告警机器人 https://open.feishu.cn/open-apis/bot/v2/hook/a1b2c3d4-e5f6-7890-abcd-ef1234567890 每天发日报",
     "a1b2c3d4-e5f6-7890-abcd-ef1234567890", "飞书日报机器人", ["飞书"]),
    ("用户身份证 110105 19491231 002X 办护照用过", "19491231", "办护照要什么", ["护照"]),
]


@pytest.mark.backends
@pytest.mark.parametrize("table", [PHRASED, PASTED], ids=["phrased", "pasted"])
async def test_phrased_secrets_are_stored_redacted_and_never_recalled(client: Client, table):
    ids = []
    for content, _, _, _ in table:
        added = await call(client, "add_memory", {"content": content, "confidence": 0.95})
        assert added["status"] == "stored" and added["redacted"], (content, added)
        ids.append(added["memory_id"])
    secrets = [secret for _, secret, _, _ in table]
    for memory_id, (content, _, query, keywords) in zip(ids, table, strict=True):
        recalled = await call(client, "recall_memories", {"query": query, "keywords": keywords})
        assert memory_id in [m["id"] for m in recalled["memories"]], (content, recalled)
        assert "已隐去的" in recalled["injection"] or "[redacted " in recalled["injection"], (content, recalled)
        shown = json.dumps(recalled, ensure_ascii=False)
        assert [s for s in secrets if s in shown] == []
    listed = json.dumps(await call(client, "list_memories", {"limit": 50}), ensure_ascii=False)
    assert [s for s in secrets if s in listed] == []


@pytest.mark.backends
async def test_phrased_secrets_are_kept_out_of_patches_pending_and_the_profile(client: Client):
    core = await call(client, "add_memory", {"content": "用户的核心偏好：喜欢简洁回答", "confidence": 0.95,
                                              "scores": {"persistence": 1}})
    refused = await error(client, "patch_core_memory", {
        "memory_id": core["memory_id"], "patch": "服务器密码改成了 Zz!2024corp", "mode": "append"})
    assert "patch: contains a password" in refused
    patched = await call(client, "patch_core_memory", {
        "memory_id": core["memory_id"], "patch": "服务器密码改成了 Zz!2024corp，每季度轮换一次", "mode": "append",
        "reason": "用户说新密码是 Zz!2024corp"})
    assert patched["redacted"] == ["password"]
    pending = await call(client, "add_memory", {
        "content": "The password for the staging box is Hunter22!x, rotated weekly", "confidence": 0.7})
    assert (pending["status"], pending["redacted"]) == ("pending", ["password"])
    tech = "Python；家里 WiFi 的密码叫 sunshine123，常在家办公"
    await call(client, "update_profile", {"identity": {"name": "小王", "tech": tech}})
    shown = json.dumps([
        await call(client, "list_memories", {}),
        await call(client, "list_memories", {"status": "pending"}),
        (await client.read_resource(f"memory://memories/{core['memory_id']}")).contents[0].text,
        (await client.read_resource("memory://user-card")).contents[0].text,
    ], ensure_ascii=False)
    assert "每季度轮换一次" in shown and "rotated weekly" in shown and "常在家办公" in shown
    assert "Zz!2024corp" not in shown and "Hunter22!x" not in shown and "sunshine123" not in shown


# written as people write them: the value straight after a Chinese name, a payment PIN, a card's security code,
# a passport number (what the user says, the kind found, what is stored)
WRITTEN = [
    ("我的Apple ID是zhangsan@qq.com，密码Aa123456，别忘了", "password",
     "我的Apple ID是zhangsan@qq.com，密码【已隐去的密码】，别忘了"),
    ("支付宝支付密码520131，转账时要输", "password", "支付宝支付密码【已隐去的密码】，转账时要输"),
    ("小区门禁密码#8866#，快递员问过", "password", "小区门禁密码【已隐去的密码】，快递员问过"),
    ("家里wifi密码还是Aa123456，一直没改过", "password", "家里wifi密码还是【已隐去的密码】，一直没改过"),
    ("信用卡有效期 08/27，CVV 123，招行的", "security_code", "信用卡有效期 08/27，CVV 【已隐去的安全码】，招行的"),
    ("护照号 E12345678，明年三月到期", "passport_number", "护照号 【已隐去的护照号】，明年三月到期"),
    ("Passport no. X1234567, renew it before the trip to Japan", "passport_number",
     "Passport no. [redacted passport number], renew it before the trip to Japan"),
]


@pytest.mark.backends
async def test_written_forms_are_stored_redacted_through_the_client(client: Client):
    for content, kind, _ in WRITTEN:
        added = await call(client, "add_memory", {"content": content, "confidence": 0.95})
        assert (added["status"], added["redacted"]) == ("stored", [kind]), (content, added)
    listed = await call(client, "list_memories", {"limit": 50})
    assert sorted(item["content"] for item in listed["items"]) == sorted(stored for _, _, stored in WRITTEN)


# what outside probes stored verbatim (the user's words, the kind found, what is stored, a message about it)
PROBED = [
    ("我的微信支付密码跟银行卡一样都是 123789 ，千万别忘了。", "password",
     "我的微信支付密码跟银行卡一样都是 【已隐去的密码】 ，千万别忘了。", "微信支付密码忘了怎么办"),
    ("银行卡密码跟支付宝一样，都是 520131，每天都要用。", "password",
     "银行卡密码跟支付宝一样，都是 【已隐去的密码】，每天都要用。", "银行卡密码是多少"),
    ("密码还是原来那个 Lx@2024，每天都要用。", "password", "密码还是原来那个 【已隐去的密码】，每天都要用。",
     "我每天用的密码是哪个"),
    ("我的银行卡密码是六个八，每次取钱都用。", "password", "我的银行卡密码是【已隐去的密码】，每次取钱都用。",
     "取钱用的银行卡密码"),
    ("AWS creds: AKIAIOSFODNN7EXAMPLE / wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY for the backup bucket", "api_key",
     "AWS creds: [redacted API key] / [redacted API key] for the backup bucket", "AWS creds for the backup bucket"),
    ("Azure storage DefaultEndpointsProtocol=https;AccountName=myacct;AccountKey=Zm9vYmFyYmF6cXV4MTIz+/AB==;"
     "EndpointSuffix=core.windows.net for photo backups", "api_key",
     "Azure storage DefaultEndpointsProtocol=https;AccountName=myacct;AccountKey=[redacted API key];"
     "EndpointSuffix=core.windows.net for photo backups", "Azure storage for photo backups"),
    ("SENTRY_DSN=https://4f3a9b2c1d0e4f5a6b7c8d9e0f1a2b3c@o123456.ingest.sentry.io/789 for the web app", "api_key",
     "SENTRY_DSN=https://[redacted API key]@o123456.ingest.sentry.io/789 for the web app", "Sentry for the web app"),
    ("身份证号码：330106 1995 0612 1231，填表报名的时候用。", "id_number",
     "身份证号码：【已隐去的证件号】，填表报名的时候用。", "填表报名要身份证号码"),
    ("卡号：6228·4800·1234·5678·11，招商银行的工资卡。", "card_number",
     "卡号：【已隐去的银行卡号】，招商银行的工资卡。", "招商银行工资卡的卡号"),
]


@pytest.mark.backends
async def test_probed_secrets_are_redacted_in_the_store_and_in_memory_context(client: Client):
    for content in ["身份证号码：330106 1995 0612 1231，填表用。", "卡号：6228·4800·1234·5678·11，招行的。"]:
        refused = await call(client, "add_memory", {"content": content})  # three words left: refused
        assert (refused["status"], refused["reason"]) == ("discarded", "secret"), (content, refused)
    for content, kind, _, _ in PROBED:
        added = await call(client, "add_memory", {"content": content, "confidence": 0.95})
        assert (added["status"], added["redacted"]) == ("stored", [kind]), (content, added)
    listed = await call(client, "list_memories", {"limit": 50})
    assert sorted(item["content"] for item in listed["items"]) == sorted(stored for _, _, stored, _ in PROBED)
    secrets = ["123789", "520131", "Lx@2024", "六个八", "AKIAIOSFODNN7", "wJalrXUtnFEMI", "Zm9vYmFy", "4f3a9b2c",
               "1995 0612", "1234·5678"]
    for _, _, stored, message in PROBED:
        shown = (await client.get_prompt("memory_context", {"message": message})).messages[0].content.text
        assert stored in shown, (message, shown)  # recalled as evidence, redacted
        assert [s for s in secrets if s in shown] == [], (message, shown)
