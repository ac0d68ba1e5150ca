"""The store interface is its roles (store/roles.py inside a transaction, store/base.py on the store) composed:
every method in exactly one role, nothing declared outside them, and both backends implement all of it."""

from __future__ import annotations

import inspect

from pocketmem.store import base, roles, transfer_roles
from pocketmem.store.base import Store
from pocketmem.store.postgres.store import PostgresStore
from pocketmem.store.postgres.tx import PostgresTx
from pocketmem.store.profile_base import ProfileReader, ProfileWriter
from pocketmem.store.roles import StoreReader, StoreWriter
from pocketmem.store.sqlite.store import SQLiteStore
from pocketmem.store.sqlite.tx import SQLiteTx


def _roles() -> list[type]:
    return [
        cls for module in (roles, transfer_roles, base) for _, cls in inspect.getmembers(module, inspect.isclass)
        if cls.__module__ == module.__name__ and getattr(cls, "_is_protocol", False)
    ]


def _own_methods(cls: type) -> set[str]:
    return {name for name, value in vars(cls).items() if callable(value) and not name.startswith("__")}


def test_every_method_of_the_interface_belongs_to_exactly_one_role() -> None:
    where: dict[str, list[str]] = {}
    for role in _roles():
        for name in _own_methods(role):
            where.setdefault(name, []).append(role.__name__)
    assert {name: places for name, places in where.items() if len(places) > 1} == {}
    profile = _own_methods(ProfileReader) | _own_methods(ProfileWriter)
    for composed in (StoreReader, StoreWriter):
        assert _own_methods(composed) == set()  # composed of roles only
        public = {n for n in dir(composed) if not n.startswith("_") and callable(getattr(composed, n))}
        assert public - profile <= set(where), public - profile - set(where)
    assert {n for n in _own_methods(Store) if not n.startswith("_")} == {"on_commit", "open", "close"}


def test_both_backends_implement_every_role() -> None:
    for cls in (SQLiteTx, PostgresTx, SQLiteStore, PostgresStore):
        assert not getattr(cls, "__abstractmethods__", frozenset()), (cls.__name__, cls.__abstractmethods__)


def test_the_roles_that_go_together_add_nothing_of_their_own() -> None:
    for combined in (roles.MemoryTx, roles.SearchTx, roles.TrashTx, roles.WriteTx, base.VectorStore,
                     base.MetaStore, base.UpkeepStore):
        assert _own_methods(combined) == set()
