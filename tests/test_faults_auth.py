"""Faults: the auth state is explicit. Once a token has existed, anonymous loopback requests stay refused until
the operator allows them again; revoking the last token is not that choice. On both backends.
(tests/test_http.py::test_loopback_needs_no_token_until_the_first_one_exists drives the same through HTTP.)"""

from __future__ import annotations

import pytest

from pocketmem.service.tokens import ANONYMOUS_KEY, TokenService

pytestmark = [pytest.mark.anyio, pytest.mark.backends]


async def test_revoking_the_last_token_does_not_reopen_the_server(app):
    tokens = TokenService(app.store, app.clock)
    assert await tokens.anonymous_allowed()  # no token has ever existed
    first = await tokens.create("alice")
    assert not await tokens.anonymous_allowed()
    await tokens.revoke(first.record.id)
    assert not await tokens.anonymous_allowed()  # closed stays closed
    assert await tokens.allow_anonymous() == 0
    assert await tokens.anonymous_allowed()  # the operator's choice
    second = await tokens.create("bob")
    assert not await tokens.anonymous_allowed()  # a new token closes it again
    assert await tokens.allow_anonymous() == 1
    assert not await tokens.anonymous_allowed()  # ... while a token is active
    await tokens.revoke(second.record.id)
    assert await tokens.anonymous_allowed()


async def test_a_store_from_before_the_setting_is_closed_once_any_token_existed(app):
    tokens = TokenService(app.store, app.clock)
    made = await tokens.create("alice")
    await tokens.revoke(made.record.id)
    async with app.store.write() as tx:  # as an older version left it: tokens, no recorded state
        await tx.put_meta(ANONYMOUS_KEY, "")
    assert not await tokens.anonymous_allowed()
