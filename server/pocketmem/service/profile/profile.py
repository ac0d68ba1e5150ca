"""The profile layer (docs/profile.md): the assistant's persona and the user's identity, onboarding once, and the
Markdown views (persona, project, insights) the resources and files show.

Writes route like every write: values are screened for secrets (core/privacy, per POCKETMEM_SECRETS), each
change keeps the previous fields as a profile revision and logs a `profile_updated` event, all in one
transaction. While `identity_confirmed` is false the agent saves directly (onboarding: the user is looking
at the summary); once confirmed, a change the agent proposes waits as a pending confirmation that
confirm_pending settles, like an uncertain memory.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import Conflict, InvalidInput
from pocketmem.base.models import OPEN_PENDING, Category, EventKind, PendingItem, PendingStatus, ProfileRevision
from pocketmem.base.results import ConfirmResult
from pocketmem.core import privacy
from pocketmem.core.formatting import one_line
from pocketmem.core.profile_text import (
    MAX_FIELD_CHARS,
    SECTIONS,
    md_text,
    onboarding_instruction,
    profile_summary,
    render,
    render_view,
)
from pocketmem.core.text import clean_text, visible
from pocketmem.service.shared.rows import new_id
from pocketmem.service.shared.usercard import user_language
from pocketmem.store.base import Transactions
from pocketmem.store.roles import StoreWriter
from pocketmem.store.types import MemoryFilter

INSIGHTS_LIMIT = 10  # Insights.md keeps the hot lessons only; the rest stays in the database


@dataclass
class ProfileState:
    persona: dict[str, str] = field(default_factory=dict)
    identity: dict[str, str] = field(default_factory=dict)
    confirmed: bool = False
    display_name: str | None = None

    def section(self, name: str) -> dict[str, str]:
        return self.persona if name == "persona" else self.identity


class ProfileView(BaseModel):
    persona: dict[str, str]
    identity: dict[str, str]
    identity_confirmed: bool


class ProfileResult(BaseModel):
    status: Literal["saved", "pending", "unchanged", "rejected"] = Field(
        description="rejected: the user rejected the same change when asked, so it is not proposed again"
    )
    profile: ProfileView
    pending_id: str | None = None
    changed: list[str] = Field(default_factory=list, description="section.field names that changed")
    redacted: list[str] = Field(default_factory=list, description="kinds of secrets removed from the values")
    message: str


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class Profile:
    def __init__(self, settings: Settings, store: Transactions, clock: Clock) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock

    # -- reading --------------------------------------------------------------------------------
    async def state(self, user_id: str) -> ProfileState:
        async with self.store.read() as reader:
            sections = await reader.get_profile(user_id)
            user = await reader.get_user(user_id)
        return ProfileState(
            persona={k: str(v) for k, v in sections.get("persona", {}).items()},
            identity={k: str(v) for k, v in sections.get("identity", {}).items()},
            confirmed=bool(user and user.get("identity_confirmed")),
            display_name=(user or {}).get("display_name"),
        )

    async def view(self, user_id: str) -> ProfileView:
        state = await self.state(user_id)
        return ProfileView(persona=state.persona, identity=state.identity, identity_confirmed=state.confirmed)

    async def onboarding(self, user_id: str, lang: str) -> str | None:
        """The instruction for the agent while the user has not confirmed their profile; None after."""
        if not self.settings.onboarding or self.settings.temporary:
            return None
        state = await self.state(user_id)
        if state.confirmed:
            return None
        return onboarding_instruction(
            lang, not any(state.persona.values()), not any(state.identity.values())
        )

    # -- writing ----------------------------------------------------------------------------------
    def clean_fields(self, section: str, values: Mapping[str, str | None] | None) -> tuple[dict[str, str], list[str]]:
        """Known keys only, one line each, within length, secrets redacted (or refused: InvalidInput)."""
        known = {fd.key for fd in SECTIONS[section]}
        out: dict[str, str] = {}
        kinds: list[str] = []
        for key, value in (values or {}).items():
            name = f"{section}.{key}"
            if key not in known:
                raise InvalidInput(name, f"unknown field; {section} has {', '.join(sorted(known))}")
            if value is None:
                continue
            text = one_line(clean_text(value, name, max_chars=MAX_FIELD_CHARS, allow_empty=True))
            text = text if visible(text) else ""  # only invisible characters: the field is cleared, as by ""
            screened = privacy.screen(text)
            if screened.findings:
                if self.settings.secrets == "refuse" or not privacy.meaningful(screened.text):
                    raise InvalidInput(name, f"contains {privacy.named(screened.kinds)}; never save secrets")
                text = screened.text
                kinds += screened.kinds
            out[key] = text
        return out, list(dict.fromkeys(kinds))

    async def update(
        self,
        user_id: str,
        persona: Mapping[str, str | None] | None,
        identity: Mapping[str, str | None] | None,
        *,
        confirmed: bool = False,
        by_person: bool = False,
    ) -> ProfileResult:
        """update_profile: during onboarding saved at once; afterwards a pending confirmation. `by_person`: the
        person's own edit (the web page), proposed even if they rejected the same change before."""
        if self.settings.temporary:
            raise InvalidInput("update_profile", "temporary mode is on: nothing is saved")
        new_persona, kinds_p = self.clean_fields("persona", persona)
        new_identity, kinds_i = self.clean_fields("identity", identity)
        kinds = list(dict.fromkeys(kinds_p + kinds_i))
        state = await self.state(user_id)
        changes = {"persona": new_persona, "identity": new_identity}
        differ = _differ(state, changes)
        changed = [f"{section}.{key}" for section, values in differ.items() for key in values]
        now = self.clock.now()
        if not changed and (state.confirmed or not confirmed):  # confirming an unconfirmed profile is a change
            return ProfileResult(status="unchanged", profile=await self.view(user_id), redacted=kinds,
                                 message="Nothing new: the profile already says this.")
        if state.confirmed:
            return await self._propose(user_id, differ, changed, kinds, now, by_person)
        async with self.store.write(user_id=user_id) as tx:
            await self.apply_in(tx, user_id, changes, "tool", now)
            if confirmed:
                await tx.set_identity_confirmed(user_id, True, now)
                await tx.add_event(user_id, EventKind.profile_updated, now, payload={"identity_confirmed": True})
        done = "Saved and confirmed: onboarding is over." if confirmed else (
            "Saved as a draft; show the user a summary and call update_profile(confirmed=true) when they agree."
        )
        return ProfileResult(status="saved", profile=await self.view(user_id), changed=changed, redacted=kinds,
                             message=done)

    async def apply_in(
        self, tx: StoreWriter, user_id: str, changes: Mapping[str, Mapping[str, str]], source: str, now: datetime
    ) -> list[str]:
        """Inside a transaction: merge the changed fields into each section, with a revision and an event."""
        sections = await tx.get_profile(user_id)
        changed: list[str] = []
        await tx.ensure_user(user_id, now)
        for section, values in changes.items():
            before = {k: str(v) for k, v in sections.get(section, {}).items()}
            after = {**before, **values}
            after = {k: v for k, v in after.items() if v}
            if after == before:
                continue
            keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            changed += [f"{section}.{k}" for k in keys]
            await tx.put_profile(user_id, section, after, now)
            await tx.insert_profile_revision(
                ProfileRevision(id=new_id(), user_id=user_id, section=section, previous=before, new=after,
                                source=source, created_at=now)
            )
            await tx.add_event(user_id, EventKind.profile_updated, now,
                               payload={"section": section, "fields": keys, "source": source})
        return changed

    async def _propose(
        self, user_id: str, changes: dict[str, dict[str, str]], changed: list[str], kinds: list[str], now: datetime,
        by_person: bool,
    ) -> ProfileResult:
        """A pending confirmation of the changed fields: one item per proposal, and none for a proposal the user
        rejected when asked (as pending memories: writing.pending_in) unless the person makes it themselves."""
        said = "\n".join(v for values in changes.values() for v in values.values())
        # as recall and the user card
        lang = await user_language(self.store, user_id, self.settings, said, self.clock.now())
        lines = [
            line for section, fields in changes.items() for line in profile_summary(section, fields, lang, cleared=True)
        ]
        content = "更新个人资料：" + "；".join(lines) if lang == "zh" else "Profile update: " + "; ".join(lines)
        digest = _digest(changes)
        candidate = {"content": content, "category": Category.fact.value, "profile": changes, "content_hash": digest}
        async with self.store.write(user_id=user_id) as tx:
            waiting = await tx.find_pending_by_hash(user_id, digest)
            declined = None if waiting or by_person else await tx.find_pending_by_hash(
                user_id, digest, (PendingStatus.rejected,)
            )
            if declined is not None:
                await tx.add_event(user_id, EventKind.discarded, now,
                                   payload={"content": content, "profile": True, "rejected": declined.id})
            elif waiting is None:
                waiting = PendingItem(id=new_id(), user_id=user_id, candidate=candidate, confidence=1.0,
                                      status=PendingStatus.pending, created_at=now, updated_at=now)
                await tx.insert_pending(waiting)
                await tx.add_event(user_id, EventKind.pending, now,
                                   payload={"pending_id": waiting.id, "content": content, "profile": True})
        view = await self.view(user_id)
        if declined is not None:
            return ProfileResult(
                status="rejected", pending_id=declined.id, profile=view, changed=changed, redacted=kinds,
                message=f"Not proposed: the user rejected this change when asked (pending {declined.id}), so it is "
                "not asked again. If the user now wants it, they can make it themselves: in the profile's Markdown "
                "files or on the web page.",
            )
        assert waiting is not None
        return ProfileResult(
            status="pending", pending_id=waiting.id, profile=view, changed=changed, redacted=kinds,
            message="The profile is confirmed already, so this change waits for the user: show it, then call "
            "confirm_pending with confirm, reject or snooze.",
        )

    async def confirm_change(self, user_id: str, pending_id: str) -> ConfirmResult:
        """Apply a proposed profile change the user confirmed (confirm_pending, pending.py, hands it here)."""
        now = self.clock.now()
        async with self.store.write(user_id=user_id) as tx:
            item = await tx.get_pending(user_id, pending_id)
            if item is None or item.status not in OPEN_PENDING:
                raise Conflict(f"pending {pending_id} was settled meanwhile; see list_memories(status='pending')")
            changes = {
                s: {k: str(v) for k, v in f.items()} for s, f in item.candidate["profile"].items() if s in SECTIONS
            }
            changed = await self.apply_in(tx, user_id, changes, "confirmed", now)
            await tx.update_pending(user_id, pending_id, status=PendingStatus.confirmed, updated_at=now)
            await tx.add_event(user_id, EventKind.confirmed, now, payload={"pending_id": pending_id, "profile": True})
        return ConfirmResult(
            status=PendingStatus.confirmed, pending_id=pending_id,
            message="Profile updated: " + (", ".join(changed) if changed else "it already said this") + ".",
        )

    # -- Markdown views -----------------------------------------------------------------------------
    async def view_language(self, user_id: str) -> str:
        """The language the resources speak: the user card's (POCKETMEM_LOCALE, else the user's own content)."""
        return await user_language(self.store, user_id, self.settings, "", self.clock.now())

    async def render_persona(self, user_id: str, *, for_file: bool = False) -> str:
        """Persona.md for a person to edit (`for_file`), else the resource's view, in the card's language."""
        persona = {"persona": (await self.state(user_id)).persona}
        if for_file:
            return render("Persona.md", fields=persona)
        return render_view("Persona.md", await self.view_language(user_id), fields=persona)

    async def project_entries(self, user_id: str) -> tuple[list[tuple[str, str]], int]:
        """The newest project memories that fit Project.md (oldest first), and how many older ones there are."""
        limit = self.settings.project_lines
        async with self.store.read() as reader:
            items, total = await reader.list_memories(user_id, MemoryFilter(category=Category.project, limit=limit))
        return [(m.id, m.content) for m in reversed(items)], max(0, total - len(items))

    async def render_project(self, user_id: str, *, for_file: bool = False) -> str:
        """Project.md (its "Earlier" note in both languages, as its headings) or the resource's view."""
        lang = None if for_file else await self.view_language(user_id)
        entries, older = await self.project_entries(user_id)
        earlier: list[str] = []
        if older:
            async with self.store.read() as reader:
                summary = (await reader.get_profile(user_id)).get("project_summary", {})
            # by the LLM, at maintenance (project_summary.py), from user text: literal, as every memory line
            earlier += [md_text(line) for line in str(summary.get("text", "")).splitlines() if line.strip()]
            en = f"{older} earlier entries are archived in the database"
            zh = f"{older} 条更早的记录已归档在数据库中"
            call = 'list_memories(category="project")'
            earlier.append({None: f"- {en}: {call} ({zh})", "en": f"- {en}: {call}", "zh": f"- {zh}：{call}"}[lang])
        if lang is None:
            return render("Project.md", memories={"project": entries}, views={"earlier": earlier})
        return render_view("Project.md", lang, memories={"project": [text for _, text in entries]},
                           views={"earlier": earlier})

    async def render_insights(self, user_id: str, *, for_file: bool = False) -> str:
        async with self.store.read() as reader:
            hot = await reader.most_used(user_id, (Category.lesson,), INSIGHTS_LIMIT)
        if for_file:
            return render("Insights.md", memories={"insights": [(m.id, m.content) for m in hot]})
        lessons = [m.content for m in hot]
        return render_view("Insights.md", await self.view_language(user_id), memories={"insights": lessons})


def _differ(state: ProfileState, changes: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """The fields of each section whose value is not the profile's already (every section stays, maybe empty)."""
    return {
        section: {k: v for k, v in values.items() if state.section(section).get(k, "") != v}
        for section, values in changes.items()
    }
