"""The profile folders in POCKETMEM_HOME: a user's folder's name, which store keeps a folder, and whether this user
can keep the files there.

The first store to write a folder leaves its id there (OWNER_FILE), taken from its store_meta (STORE_ID_KEY);
profile/profile_files.py claims and honours it, upkeep/doctor_files.py checks it. A folder this user may not read
or write (made by another user, a chmod) keeps its files from being updated or read back: profile_files.py reports
it without failing the read or write that got there, the doctor names it with the change (`folder_problem`). An
OWNER_FILE that holds no store id (empty, not UTF-8, a link loop, a folder) is such a problem too, read by one
function for both (`folder_owner`)."""

from __future__ import annotations

import os
import re
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


STORE_ID = re.compile(r"[0-9a-f]{32}")  # what a store writes there: uuid4().hex
MARKER_LIMIT = 4096  # a store id is 33 bytes; reading stops well past that


class UnreadableMarker(OSError):
    """An OWNER_FILE that holds no store id: its folder's files are neither updated nor read back until it is moved
    away. An OSError, so the profile files' read and write report it as they report any folder problem."""

    def __init__(self, marker: Path, why: str) -> None:
        super().__init__(f"{marker} {why}, not the id of the pocketmem store that keeps this folder, so its Markdown "
                         "files are neither updated nor read back (recall still answers from the store): move it away "
                         "(this store then writes its own id there)")


def folder_owner(marker: Path) -> str | None:
    """The id of the store an OWNER_FILE names; None when there is no such file. Raises UnreadableMarker when it
    holds no store id (empty, not UTF-8 text, something other than a file, unreadable)."""
    if (what := in_place_of(marker, "file")) is not None:
        raise UnreadableMarker(marker, f"is {what}")
    try:
        with marker.open("rb") as file:
            data = file.read(MARKER_LIMIT)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnreadableMarker(marker, f"cannot be read ({exc.strerror or exc})") from exc
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise UnreadableMarker(marker, f"is not UTF-8 text (it starts {data[:16]!r})") from None
    if not STORE_ID.fullmatch(text):
        raise UnreadableMarker(marker, "is empty" if not text else f"holds {text[:40]!r}")
    return text


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
    try:
        folder_owner(folder / OWNER_FILE)
    except UnreadableMarker as exc:
        return str(exc)
    return None
