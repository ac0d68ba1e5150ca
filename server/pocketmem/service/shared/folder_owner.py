"""Which store keeps a profile folder: the first store to write it leaves its id there (OWNER_FILE), taken from its
store_meta (STORE_ID_KEY); profile/profile_files.py claims and honours it, upkeep/doctor_files.py checks it."""

from __future__ import annotations

from pathlib import Path

OWNER_FILE = ".pocketmem-store"  # the id of the store that keeps this folder
STORE_ID_KEY = "profile_files_store_id"


def folder_owner(marker: Path) -> str | None:
    """The id an OWNER_FILE holds; None when it cannot be read."""
    try:
        return marker.read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None
