"""The page's words in English and Chinese, chosen by the browser's Accept-Language (or ?lang=)."""

from __future__ import annotations

from collections.abc import Callable

from pocketmem.core.profile_text import SECTIONS

LOCALES = ("en", "zh")

# key: (English, 中文)
MESSAGES: dict[str, tuple[str, str]] = {
    "title": ("pocketmem: memories", "pocketmem：记忆管理"),
    "nav.memories": ("Memories", "记忆"),
    "nav.pending": ("Pending", "待确认"),
    "nav.review": ("Review", "复查"),
    "nav.todos": ("Todos", "待办"),
    "nav.trash": ("Trash", "回收站"),
    "nav.insights": ("Insights", "概览"),
    "nav.profile": ("Profile", "画像"),
    "nav.transfer": ("Export / import", "导出 / 导入"),
    "signed_in_as": ("Signed in as", "当前用户"),
    "local_user": ("Local user", "本机用户"),
    "sign_out": ("Sign out", "退出"),
    "sign_in": ("Sign in", "登录"),
    "sign_in.help": (
        (
            "Paste a pocketmem token (create one with {cmd}). The page then shows that user's memories only."
        ),
        "粘贴一个令牌（用 {cmd} 命令创建）。之后页面只显示该用户的记忆。",
    ),
    "refused.sign_in": ("pocketmem: sign in first", "pocketmem：请先登录"),
    "refused.host": ("pocketmem: this server does not answer to that host name", "pocketmem：本服务器不响应这个主机名"),
    "refused.origin": ("pocketmem: this request came from another site", "pocketmem：这个请求来自其他网站"),
    "sign_in.bad": ("That token is not valid or has been revoked.", "令牌无效或已被吊销。"),
    "token": ("Token", "令牌"),
    "search": ("Search", "搜索"),
    "search.placeholder": ("words or a question", "关键词或一句话"),
    "mode": ("Search by", "搜索方式"),
    "per_page": ("Per page", "每页"),
    "date.placeholder": ("YYYY-MM-DD", "年-月-日"),
    "mode.text": ("plain text", "按文字"),
    "mode.recall": ("recall ranking", "按召回排序"),
    "filter": ("Filter", "筛选"),
    "any": ("any", "全部"),
    "category": ("Category", "类别"),
    "status": ("Status", "状态"),
    "core": ("Core", "核心"),
    "core.yes": ("core only", "仅核心"),
    "core.no": ("not core", "非核心"),
    "source": ("Source", "来源"),
    "since": ("From", "起始日期"),
    "until": ("To", "截止日期"),
    "sort": ("Sort", "排序"),
    "sort.newest": ("newest", "最新"),
    "sort.oldest": ("oldest", "最早"),
    "sort.importance": ("importance", "重要度"),
    "sort.uses": ("uses", "使用次数"),
    "status.active": ("active", "有效"),
    "status.superseded": ("superseded", "已被取代"),
    "status.trashed": ("trashed", "已删除"),
    "status.all": ("all", "全部"),
    "total": ("{n} memories", "共 {n} 条记忆"),
    "page_of": ("page {page} of {pages}", "第 {page} / {pages} 页"),
    "prev": ("Previous", "上一页"),
    "next": ("Next", "下一页"),
    "none": ("Nothing here.", "这里什么都没有。"),
    "content": ("Content", "内容"),
    "importance": ("Importance", "重要度"),
    "created": ("Created", "创建于"),
    "uses": ("Uses", "使用次数"),
    "score": ("Score", "得分"),
    "age": ("Age", "时长"),
    "days": ("{n} days", "{n} 天"),
    "scores": ("Scores", "评分"),
    "emotion": ("Emotion (E)", "情感 E"),
    "info": ("Information (I)", "信息 I"),
    "persistence": ("Persistence (P)", "持久 P"),
    "judge": ("Judgement (J)", "判断 J"),
    "info_importance": ("Information importance", "信息重要度"),
    "time_coef": ("Time coefficient", "时间系数"),
    "confidence": ("Confidence", "置信度"),
    "valid": ("Valid", "有效期"),
    "valid_from": ("from", "自"),
    "valid_until": ("until", "至"),
    "last_active": ("Last used", "最近使用"),
    "keywords": ("Keywords", "关键词"),
    "due": ("Due", "截止"),
    "remind": ("Remind", "提醒"),
    "completed": ("Completed", "已完成"),
    "expires": ("Expires", "过期"),
    "history.older": ("It replaced", "它取代了"),
    "history.newer": ("Replaced by", "已被取代为"),
    "revisions": ("Revisions", "修改记录"),
    "events": ("Events", "事件"),
    "edit.new_version": (
        "Edit (saves a new version, the old one stays as history)", "编辑（保存为新版本，旧版本留作历史）"
    ),
    "edit.save": ("Save new version", "保存新版本"),
    "patch.title": ("Patch this core memory", "修补这条核心记忆"),
    "patch.append": ("append", "追加"),
    "patch.replace": ("replace", "替换"),
    "patch.save": ("Patch", "修补"),
    "rescore.title": ("Category and scores", "类别与评分"),
    "rescore.save": ("Rescore", "重新评分"),
    "todo.complete": ("Mark done", "标记完成"),
    "todo.reopen": ("Reopen", "重新打开"),
    "forget": ("Forget (to the trash)", "遗忘（移入回收站）"),
    "restore": ("Restore", "恢复"),
    "purge_at": ("Purged on", "清除于"),
    "deleted_at": ("Deleted", "删除于"),
    "reason": ("Reason", "原因"),
    "confirm": ("Confirm", "确认"),
    "reject": ("Reject", "拒绝"),
    "snooze": ("Snooze 24 h", "稍后 24 小时"),
    "promote": ("Promote to core", "升为核心"),
    "keep": ("Keep", "保留"),
    "review.promote": ("Used often: make core?", "经常被使用：升为核心？"),
    "review.decay": ("Fading: keep or forget?", "逐渐淡化：保留还是遗忘？"),
    "todos.open": ("Open todos", "未完成的待办"),
    "todos.reminders": ("Reminders due now", "现在需要提醒的"),
    "overdue": ("overdue", "已逾期"),
    "insights.created": ("Memories over time, by category (last 90 days)", "近 90 天的记忆（按类别）"),
    "insights.importance": ("Importance of active non-core memories", "有效非核心记忆的重要度分布"),
    "insights.cap": (
        "{n} of {cap} places used; {core} core memories do not count",
        "已用 {n} / {cap} 个位置；{core} 条核心记忆不计入",
    ),
    "insights.next_evicted": ("Next to be evicted when the cap is reached", "达到上限时最先被淘汰的"),
    "insights.recalls": ("Recalls per day (last 30 days)", "每天的召回次数（近 30 天）"),
    "insights.most_recalled": ("Most recalled", "召回最多的"),
    "insights.health": ("Store size and health", "存储大小与健康"),
    "insights.run_health": ("Run the health check", "运行健康检查"),
    "health.ok": ("healthy", "健康"),
    "health.problem": ("needs attention", "需要处理"),
    "size": ("Size", "大小"),
    "profile.persona": ("Assistant persona", "助手人设"),
    "profile.identity": ("About you", "关于你"),
    "profile.confirmed": ("Confirmed by you", "已由你确认"),
    "profile.unconfirmed": (
        "Not confirmed yet: the assistant still saves changes directly (onboarding).",
        "尚未确认：助手仍会直接保存修改（引导阶段）。",
    ),
    "profile.edit": ("Edit the profile", "编辑画像"),
    "profile.edit.help": (
        "One line per field, at most 300 characters; an emptied field is removed. Secrets are never kept.",
        "每项一行，最多 300 字；清空的项会被删除。不会保存任何密钥。",
    ),
    "profile.edit.pending": (
        "Your profile is confirmed, so a change waits on the Pending tab until you confirm it there.",
        "画像已确认，修改会先放到“待确认”页，在那里确认后生效。",
    ),
    "profile.confirm": ("This is right: confirm my profile", "没问题，确认我的画像"),
    "profile.save": ("Save profile", "保存画像"),
    "profile.project": ("Project.md", "Project.md（项目）"),
    "profile.insights": ("Insights.md", "Insights.md（经验）"),
    "profile.empty": ("not set", "未填写"),
    "user_card": ("User card", "用户卡"),
    "export": ("Export", "导出"),
    "export.jsonl": ("Everything as JSONL (restorable with import)", "全部导出为 JSONL（可再导入）"),
    "export.md": ("User card as Markdown", "用户卡（Markdown）"),
    "import": ("Import", "导入"),
    "import.help": (
        "A pocketmem JSONL export of your own memories; rows already here are skipped.",
        "选择自己记忆的 pocketmem JSONL 导出文件；已有的行会跳过。",
    ),
    "import.done": ("Imported {imported}, skipped {skipped}, refused {refused}.",
                    "导入 {imported} 行，跳过 {skipped} 行，拒绝 {refused} 行。"),
    "import.refused": ("Lines left out, and why", "没有导入的行及原因"),
    "live.changed": ("Memories changed; the list was refreshed.", "记忆有更新，列表已刷新。"),
    "done.forgotten": ("Moved to the trash. It can be restored until it is purged.", "已移入回收站，清除前可以恢复。"),
    "done.restored": ("Restored.", "已恢复。"),
    "done.saved": ("Saved.", "已保存。"),
    "done.confirmed": ("Confirmed and stored.", "已确认并保存。"),
    "done.rejected": ("Rejected.", "已拒绝。"),
    "done.snoozed": ("Snoozed.", "已推迟。"),
    "done.reviewed": ("Done.", "完成。"),
    "done.unchanged": ("Nothing changed: the profile already says this.", "没有变化：画像里已经是这样了。"),
    "done.patch_unchanged": ("Nothing changed: the memory already says this.", "没有变化：这条记忆已经是这样了。"),
    "done.profile_confirmed": ("Saved, and your profile is confirmed.", "已保存，画像已确认。"),
    "done.redacted": (
        "Saved; something that looked like a secret was removed from it.", "已保存；其中看起来像密钥的内容已被移除。"
    ),
    "done.edit_unchanged": (
        "Nothing to save: the text is the same as this memory's, so nothing was changed.",
        "没有需要保存的：内容和这条记忆一样，什么都没有改。",
    ),
    "done.edit_duplicate": (
        "Another memory already says this, so it now replaces the one you edited (kept as history).",
        "另一条记忆已经是这个意思了，现在由它取代你编辑的那条（旧的留作历史）。",
    ),
    "done.edit_pending": (
        "The new version waits on the Pending tab (every change is confirmed first): confirm it there.",
        "新版本已放到“待确认”页（所有修改都要先确认）：在那里确认后生效。",
    ),
    "done.profile_pending": (
        "The change waits on the Pending tab: confirm it there to apply it.", "修改已放到“待确认”页：在那里确认后生效。"
    ),
    "error": ("Error", "出错了"),
    "error.csrf": (
        "This form expired or came from another site; reload the page and try again.",
        "表单已过期或来自其他网站；请刷新页面后重试。",
    ),
    "error.forbidden_host": ("This server does not answer to that host name.", "服务器不接受这个主机名。"),
    "back": ("Back", "返回"),
    "yes": ("yes", "是"),
    "no": ("no", "否"),
    "open": ("Open", "打开"),
    # categories, statuses and reasons as a person reads them
    "category.preference": ("preference", "偏好"),
    "category.fact": ("fact", "事实"),
    "category.lesson": ("lesson", "经验"),
    "category.goal": ("goal", "目标"),
    "category.person": ("person", "人物"),
    "category.todo": ("todo", "待办"),
    "category.event": ("event", "事件"),
    "category.episode": ("conversation summary", "对话摘要"),
    "category.context": ("context", "情境"),
    "category.project": ("project", "项目"),
    "reason.evicted": ("evicted over the cap", "超出上限被淘汰"),
    "reason.replaced": ("replaced", "被替换"),
    "reason.user_delete": ("forgotten by you", "由你遗忘"),
    "reason.conflict_patch": ("replaced by a conflicting edit", "被冲突的修改替换"),
    "reason.expired": ("expired", "已过期"),
    "reason.purged": ("purged", "已清除"),
    "pending.snoozed": ("snoozed until", "推迟到"),
    "pending.profile": ("profile change", "资料修改"),
    "mode.append": ("appended", "追加"),
    "mode.replace": ("replaced", "替换"),
    "mode.supersede": ("new version", "新版本"),
    "stats.active": ("Active", "有效"),
    "stats.core": ("Core", "核心"),
    "stats.superseded": ("Superseded (history)", "已被取代（历史）"),
    "stats.trashed": ("In the trash", "回收站中"),
    "stats.pending": ("Waiting for confirmation", "待确认"),
    "stats.revisions": ("Revisions", "修改记录"),
    "stats.events": ("Events", "事件"),
    "stats.embedder": ("Embedding model", "向量模型"),
    "health.integrity": ("Database integrity", "数据库完整性"),
    "health.vectors": ("Vector search", "向量检索"),
    "health.indexes": ("Indexes", "索引"),
    "health.schema": ("Schema up to date", "数据结构为最新"),
    "health.embedder": ("Embedding model", "向量模型"),
    "chart.recalled": ("recalled", "被召回"),
    "chart.used": ("used in a reply", "被用于回答"),
    "chart.evicted_first": ("evicted first when the cap is reached", "达到上限时先被淘汰"),
    "chart.kept": ("other memories", "其他记忆"),
    "chart.used_places": ("places used", "已用位置"),
    "chart.free_places": ("free places", "空余位置"),
    "todos.all": ("All todos in the list", "在记忆列表中查看全部待办"),
    "id": ("Id", "编号"),
    "file.choose": ("Choose a file", "选择文件"),
    "file.none": ("No file chosen", "未选择文件"),
    "degraded": ("Search ran in a reduced mode; results may be incomplete.", "搜索在降级模式下运行，结果可能不完整。"),
    "review.why.used": ("shaped {n} replies since it was last reviewed", "自上次复查以来用于回答 {n} 次"),
    "review.why.recalled": ("recalled {n} times since it was last reviewed", "自上次复查以来被召回 {n} 次"),
    "review.why.decay": (
        "importance fell to {now} (below {bar}) from {was}", "重要度从 {was} 降到了 {now}（低于 {bar}）"
    ),
    # what happened to a memory, as a sentence
    "event.created": ("Remembered.", "记下了这条记忆。"),
    "event.updated": ("It replaced an older memory ({memory}).", "取代了一条较早的记忆（{memory}）。"),
    "event.superseded": ("A newer memory replaced it ({memory}).", "被一条更新的记忆取代（{memory}）。"),
    "event.current_again": (
        "Current again: the newer version that replaced it ({memory}) was forgotten.",
        "重新成为当前版本：取代它的新版本（{memory}）被遗忘了。",
    ),
    "event.gone": ("no longer kept", "已不再保存"),
    "event.patched": ("Its text was patched.", "内容被修补。"),
    "event.deleted": ("Moved to the trash ({reason}).", "移入回收站（{reason}）。"),
    "event.restored": ("Restored from the trash.", "从回收站恢复。"),
    "event.evicted": ("Evicted to the trash: the notebook was full.", "记忆已满，被淘汰到回收站。"),
    "event.expired": ("Expired and moved to the trash.", "已过期，移入回收站。"),
    "event.purged": ("Purged for good.", "已永久清除。"),
    "event.recalled": ("Recalled for a question.", "在一次提问中被召回。"),
    "event.used": ("Used in a reply.", "被用于回答。"),
    "event.duplicate": ("Mentioned again; the repeat made it stronger.", "又被提到一次，重复让它更牢固。"),
    "event.confirmed": ("Confirmed and stored.", "确认后保存。"),
    "event.completed": ("Marked done.", "标记为完成。"),
    "event.reopened": ("Reopened.", "重新打开。"),
    "event.promoted": ("Made a core memory at review.", "复查时升为核心记忆。"),
    "event.kept": ("Kept as it is at review.", "复查时保持不变。"),
    "event.rescored": ("Scores refreshed.", "评分已更新。"),
    "event.imported": ("Imported from an export file.", "从导出文件导入。"),
    "event.synced": ("Synced with the cloud library.", "与云端同步。"),
    "event.other": ("Something else happened to it.", "发生了其他变化。"),
    "event.note": ("Note:", "备注："),
    "event.purge_due": ("It will be purged {when}.", "将于{when}清除。"),
    "event.purge_waiting": ("It was due to be purged {when}.", "{when}已到清除时间。"),
    # why an edit was not stored (add_memory's reasons)
    "edit.discarded.secret": (
        "Not saved: the text contains {kinds}, and secrets are never stored. If it matters, save that you have "
        "one, without its value.",
        "没有保存：内容里有{kinds}，机密信息从不保存。如果需要，可以只记下有这么一个，不写它的值。",
    ),
    "edit.discarded.temporary": (
        "Not saved: temporary mode is on, so nothing is remembered.", "没有保存：临时模式已开启，什么都不会被记住。"
    ),
    "edit.discarded.rejected": (
        "Not saved: you rejected this memory when you were asked about it.", "没有保存：之前询问时你拒绝过这条记忆。"
    ),
    "edit.discarded.low_confidence": ("Not saved: too uncertain to keep.", "没有保存：太不确定，不予保存。"),
    # the kinds of error the page shows
    "error.not_found": (
        "Not found: it does not exist, or it belongs to another user.", "找不到：它不存在，或属于其他用户。"
    ),
    "error.invalid": ("The value of “{field}” is not valid: {rule}", "“{field}”的值不对：{rule}"),
    "error.conflict": (
        "That cannot be done in its current state (for example, it is already in the trash).",
        "当前状态下不能这样做（例如它已经在回收站里）。",
    ),
    # a conflict whose reason the service names (base/errors.py ConflictReason), with its facts
    "error.conflict.pending_confirmed": ("It was already confirmed.", "这一条已经确认过了。"),
    "error.conflict.pending_rejected": (
        "It was already rejected; it is not asked again.", "这一条已经被拒绝，不会再问。"
    ),
    "error.conflict.episode_expired": (
        "This conversation summary, said on {said}, expired on {expired} ({days} days, POCKETMEM_EPISODE_DAYS) "
        "before it was confirmed, so it is not stored and stays pending: reject it, or add it again as another "
        "category (fact, event) if it still matters.",
        "这条对话摘要说于 {said}，在确认之前已于 {expired} 过期（{days} 天，POCKETMEM_EPISODE_DAYS），所以没有保存，"
        "仍在待确认中：可以拒绝它；如果它仍然重要，可以换一个类别（事实、事件）重新添加。",
    ),
    "error.conflict.never_core": (
        "A {category} is short-lived and never a core memory (persistence 1): give it a persistence below 1, or "
        "another category.",
        "{category}是短期的，不会成为核心记忆（持久 P 为 1）：请把持久度设为小于 1，或换一个类别。",
    ),
    "error.conflict.not_active": (
        "This memory is {status}: only an active memory can be changed.", "这条记忆{status}：只有有效的记忆才能修改。"
    ),
    "error.conflict.core_patched": (
        "This is a core memory: it is changed by a patch (append or replace), not by a new version.",
        "这是一条核心记忆：要用修补（追加或替换）来改，不能保存新版本。",
    ),
    "error.conflict.not_core": (
        "This is not a core memory: edit it to save a new version instead of patching it.",
        "这不是核心记忆：请用编辑保存新版本，而不是修补。",
    ),
    "error.no_page": ("There is no such page here.", "这里没有这个页面。"),
    "error.method": (
        "This address takes a form, not a visit: go back to the page and send the form again.",
        "这个地址只接收表单提交，不能直接打开：请返回原来的页面重新提交。",
    ),
    "error.method_other": (
        "This address does not take that kind of request ({method}).", "这个地址不接受这种请求（{method}）。"
    ),
    "error.line": ("line {line}: ", "第 {line} 行："),
    # a refused value whose rule the service names (base/errors.py InvalidReason), with its facts
    "error.invalid.too_long": (
        "{field}: is {length} characters; the limit is {limit}",
        "“{field}”有 {length} 个字符，超过了 {limit} 个字符的上限",
    ),
    "error.invalid.empty": (
        "{field}: must not be empty, or only whitespace or invisible characters",
        "“{field}”不能为空，也不能只有空白或看不见的字符",
    ),
    "error.invalid.between": ("{field}: must be between {low} and {high}", "“{field}”必须在 {low} 到 {high} 之间"),
    "error.invalid.at_least": ("{field}: must be at least {limit}", "“{field}”不能小于 {limit}"),
    "error.invalid.at_most": ("{field}: must be at most {limit}", "“{field}”不能大于 {limit}"),
    "error.invalid.missing": ("{field}: is required", "缺少“{field}”"),
    "list.and": (", ", "、"),  # between the values a field takes, and before the last
    "list.or": (" or ", " 或 "),
    "error.invalid.one_of": ("{field}: must be one of {choices}", "“{field}”只能是其中之一：{choices}"),
    "error.invalid.number": ("{field}: must be a number", "“{field}”必须是数字"),
    "error.invalid.date": (
        "{field}: must be a date (YYYY-MM-DD) or a date and time", "“{field}”必须是日期（年-月-日）或日期和时间"
    ),
    "error.invalid.years": (
        "{field}: must be between the years {low} and {high} in UTC",
        "“{field}”必须在 {low} 年到 {high} 年之间（按世界标准时间计）",
    ),
    "error.invalid.other_user": (
        "{field}: holds rows of user {found}; only rows of {expected} can be imported here",
        "这个文件里有用户 {found} 的记录；这里只能导入 {expected} 的记录",
    ),
    "error.invalid.not_text": (
        "{field}: is not UTF-8 text: it holds bytes that are no character; nothing was changed",
        "“{field}”不是 UTF-8 文本：里面有无法读成文字的字节；没有做任何更改",
    ),
    "error.invalid.foreign_id": (
        "{field}: is the id of another user's memory in this store, so it cannot be imported for {user}: ids are "
        "unique across users. To copy memories to another user, give each a new id (32 hex digits) in the file and "
        "import it again",
        "“{field}”是这个存储里另一位用户的记忆的编号，所以不能作为 {user} 的记忆导入：编号在所有用户之间是唯一的。"
        "要把记忆复制给另一位用户，请在文件里给每一条换一个新编号（32 位十六进制数字），再导入一次",
    ),
    "error.invalid.secret": (
        "{field}: contains {kinds}; secrets are never stored", "“{field}”里有{kinds}；机密信息从不保存"
    ),
    "error.internal": (
        "Something went wrong inside pocketmem; the server log has the details.",
        "pocketmem 内部出错，详情见服务器日志。",
    ),
    "error.rule": ("check it and try again", "请检查后重试"),
    "error.too_large": ("The form is larger than {limit} bytes.", "提交的内容超过了 {limit} 字节的上限。"),
    "error.store_down": (
        "The memory store cannot be reached or read right now, so pocketmem cannot check who you are; nothing was "
        "changed. This says nothing against your token or sign-in: try again in a moment.",
        "暂时无法连接或读取记忆存储，无法核对你的身份；没有做任何更改。这并不说明你的令牌或登录有问题，请稍后再试。",
    ),
    # the fields an error may name, where the page's own word for them differs or is missing
    "field.unknown": ("a value", "某一项"),
    "field.line": ("the line", "这一行"),
    "field.file": ("File", "文件"),
    "field.page": ("Page number", "页码"),
    "field.per_page": ("Per page", "每页条数"),
    "field.q": ("Search words", "搜索词"),
    "field.mode": ("Mode", "方式"),
    "field.decision": ("Review decision", "复查决定"),
    "field.action": ("Action", "操作"),
    "field.done": ("Done", "完成状态"),
    "field.patch": ("Patch", "修补内容"),
    "field.form": ("Form", "表单"),
    "field.memory_id": ("Memory id", "记忆编号"),
    "field.name": ("Name", "称呼"),
}

# The profile's field labels and hints come from the fields themselves (core/profile_text.py), in both languages.
for _section, _fields in SECTIONS.items():
    for _fd in _fields:
        MESSAGES[f"profile.{_section}.{_fd.key}"] = (_fd.en, _fd.zh)
        MESSAGES[f"profile.{_section}.{_fd.key}.hint"] = (_fd.hint_en, _fd.hint_zh)
del _section, _fields, _fd


def pick_locale(accept_language: str | None, override: str | None = None) -> str:
    """zh when the browser prefers Chinese (or ?lang=zh), else en. Quality values are honoured: q=0 (or a q that is
    not a number) is "not acceptable" (RFC 9110), never a choice."""
    if override in LOCALES:
        return override
    best, best_q = "en", 0.0
    for part in (accept_language or "").split(","):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        lang = tag.strip().lower().split("-")[0]
        if lang in LOCALES and q > best_q:
            best, best_q = lang, q
    return best


def translator(locale: str) -> Callable[..., str]:
    index = LOCALES.index(locale) if locale in LOCALES else 0

    def t(key: str, **values: object) -> str:
        text = MESSAGES[key][index] if key in MESSAGES else key
        return text.format(**values) if values else text

    return t
