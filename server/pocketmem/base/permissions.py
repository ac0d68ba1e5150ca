"""What to run so that the user who runs pocketmem may use a path, by who owns it, and whether a disk can be
written at all.

Only a file's owner (or root) may change its mode: `chmod u+rw` on a file another user owns fails with "Operation
not permitted". So the advice is `chmod` for a path this user owns and `chown` (run as root) for one another user
owns, or to run pocketmem as that user.
"""

from __future__ import annotations

import os
from pathlib import Path


def _name(uid: int) -> str:
    try:
        import pwd  # not on Windows, where files carry no Unix owner

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def grant(path: Path | str, mode: str, what: str) -> str:
    """The change that makes `path` `what` ("readable and writable") for this user: `make it … (chmod u+MODE …)`
    when the path is this user's, `make it this user's (sudo chown USER …) or run pocketmem as OWNER` when another
    user owns it (`chown -R` for a folder)."""
    try:
        owner = os.stat(path).st_uid
        me = os.geteuid()
    except (OSError, AttributeError):  # nothing to stat, or no Unix owners (Windows)
        return f"make it {what} (chmod u+{mode} {path})"
    if owner == me:
        return f"make it {what} (chmod u+{mode} {path})"
    who = "root" if owner == 0 else f"{_name(owner)} or root"
    whole = " -R" if os.path.isdir(path) else ""  # a folder with what is in it: files made there are the owner's
    return (f"it belongs to {_name(owner)}, so only {who} may change that: make it this user's "
            f"(sudo chown{whole} {_name(me)} {path}) or run pocketmem as {_name(owner)}")


def read_only_mount(path: Path | str) -> bool:
    """Whether `path` lies on a file system mounted read-only: no chmod or chown makes it writable."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs on Windows
        return False
