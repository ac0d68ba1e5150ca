"""The profile folders in POCKETMEM_HOME: a user's folder's name, which store keeps a folder, and whether this user
can keep the files there.

The first store to write a folder leaves its id there (OWNER_FILE), taken from its store_meta (STORE_ID_KEY);
profile/profile_files.py claims and honours it, upkeep/doctor_files.py checks it. A folder this user may not read
or write (made by another user, a chmod) keeps its files from being updated or read back: profile_files.py reports
it without failing the read or write that got there, the doctor names it with the change (`folder_problem`)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

from pocketmem.base.files import in_place_of
from pocketmem.base.permissions import grant, read_only_mount
from pocketmem.core.profile_text import FILES

OWNER_FILE = ".pocketmem-store"  # the id of the store that keeps this folder
KEPT = frozenset({*FILES, OWNER_FILE})  # the files pocketmem keeps in a user's folder
STORE_ID_KEY = "profile_files_store_id"


def folder_name(user_id: str) -> str:
    """A user's folder: the id itself when it is a safe file name, else percent-encoded (never . or ..)."""
    name = quote(user_id, safe="-_.")
    return name.replace(".", "%2E") if set(name) == {"."} else name


def folder_owner(marker: Path) -> str | None:
    """The id an OWNER_FILE holds; None when it cannot be read."""
    try:
        return marker.read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def folder_problem(folder: Path) -> str | None:
    """What keeps the profile files in `folder` from being read and written: something other than a folder in its
    place (a file, a link loop), a profile file that is a folder, or permissions this user lacks; naming the path and
    the change (move it away; chmod or chown, by who owns it). None when nothing does, or the folder is not made yet."""
    if not os.path.lexists(folder):
        return None
    lost = "so its Markdown files are neither updated nor read back (recall still answers from the store)"
    if (what := in_place_of(folder, "folder")) is not None:
        return f"{folder} is {what}, not a folder, {lost}: move it away (pocketmem makes the folder)"
    if read_only_mount(folder):  # nothing is written there: the store's own check names the read-only disk
        return None
    if not os.access(folder, os.R_OK | os.W_OK | os.X_OK):
        return (f"the profile folder {folder} is not readable and writable by this user, {lost}: "
                f"{grant(folder, 'rwx', 'readable and writable')}")
    for path in sorted(folder.iterdir()):
        if path.name in KEPT and path.is_dir() and not path.is_symlink():  # a link is replaced by the file
            return (f"{path} is a folder, not a file, so {path.name} is neither updated nor read back (recall still "
                    "answers from the store): move that folder away (pocketmem writes the file)")
        if path.is_file() and not os.access(path, os.R_OK | os.W_OK):
            return (f"{path} is not readable and writable by this user, {lost}: "
                    f"{grant(path, 'rw', 'readable and writable')}")
    return None
