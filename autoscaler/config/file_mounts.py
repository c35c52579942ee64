"""``file_mounts``: the user's local files and folders, packed (gzip-compressed tar, base64)
into a node's boot data, so every node has them at their remote paths before its setup
commands run, with no SSH. Member ``<n>`` of the archive is the n-th mount, in YAML order.

Local paths are read as Ray reads them (``~`` expanded, relative to the working directory).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tarfile import TarInfo


def local_path(local: str) -> Path:
    return Path(local).expanduser()


def missing_mounts(mounts: Mapping[str, str]) -> list[str]:
    """One line per mount whose local path is missing."""
    return [
        f"file_mounts.{remote}: local path {local!r} does not exist (REMOTE: LOCAL)"
        for remote, local in mounts.items()
        if not local_path(str(local)).exists()
    ]


def raw_size(mounts: Mapping[str, str], stop_at: int) -> int:
    """Bytes of the mounts' files, counted up to just past ``stop_at`` (a folder as big as
    a repository's virtualenv is not walked to its end)."""
    total = 0
    for local in mounts.values():
        path = local_path(str(local))
        files = [path] if path.is_file() else (p for p in path.rglob("*") if p.is_file())
        for file in files:
            total += file.stat().st_size
            if total > stop_at:
                return total
    return total


def pack(mounts: Mapping[str, str]) -> str:
    """The mounts as base64 text of a gzip-compressed tar (empty for none); a missing local
    path is left out (``missing_mounts`` says so before launching)."""
    if not mounts:
        return ""
    import tarfile  # only where there are mounts (every plan loads this module)

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=9) as archive:
        for index, local in enumerate(mounts.values()):
            path = local_path(str(local))
            if path.exists():
                archive.add(str(path), arcname=str(index), filter=_plain)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _plain(member: TarInfo) -> TarInfo:
    """No owner names or ids from this machine (the node's root owns the files)."""
    member.uid = member.gid = 0
    member.uname = member.gname = ""
    return member


def head_mounts(mounts: Mapping[str, str]) -> dict[str, str]:
    """The head's own cluster YAML: each mount read from its remote path on the head (where
    the head's boot data put it), as Ray's launcher rewrites the head's config."""
    return {remote: remote for remote in mounts}
