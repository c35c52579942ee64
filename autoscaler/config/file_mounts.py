"""``file_mounts``: the user's local files and folders, packed (gzip-compressed tar, base64)
into a node's boot data, so every node has them at their remote paths before its setup
commands run, with no SSH. Member ``<n>`` of the archive is the n-th mount, in YAML order.

Local paths are read as Ray reads them (``~`` expanded, relative to the working directory).
"""

from __future__ import annotations

import base64
import io
import tarfile
from collections.abc import Mapping
from pathlib import Path

from autoscaler.config.errors import ConfigProblem


def local_path(local: str) -> Path:
    return Path(local).expanduser()


def check_mounts(mounts: Mapping[str, str]) -> None:
    """Raise :class:`ConfigProblem` for a mount whose local path is missing."""
    for remote, local in mounts.items():
        if not local_path(str(local)).exists():
            raise ConfigProblem(
                f"file_mounts.{remote}", f"local path {local!r} does not exist (REMOTE: LOCAL)"
            )


def pack(mounts: Mapping[str, str]) -> str:
    """The mounts as base64 text of a gzip-compressed tar (empty for none)."""
    if not mounts:
        return ""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=9) as archive:
        for index, local in enumerate(mounts.values()):
            archive.add(str(local_path(str(local))), arcname=str(index), filter=_plain)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _plain(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """No owner names or ids from this machine (the node's root owns the files)."""
    member.uid = member.gid = 0
    member.uname = member.gname = ""
    return member


def head_mounts(mounts: Mapping[str, str]) -> dict[str, str]:
    """The head's own cluster YAML: each mount read from its remote path on the head (where
    the head's boot data put it), as Ray's launcher rewrites the head's config."""
    return {remote: remote for remote in mounts}
