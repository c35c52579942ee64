"""A simulated host's sandbox: its own root folder, ``HOME``, environment and ``PATH``.

The boot script runs with bash exactly as the cloud delivered it, except that absolute
paths under the folders a node writes (:data:`SYSTEM_DIRS`: ``/etc``, ``/var``, ``/opt``,
``/root``, ``/home``...) are rewritten to lie below the host's root (``/etc/x`` becomes
``ROOT/etc/x``), so nothing is ever written to this machine's own ``/etc``. Text inside
quoted here-documents (``<<'EOF'``: data such as the cluster YAML the head keeps) is left as
written. ``HOME`` is ``ROOT/root`` (boot scripts run as root), and the host's root is also
``AUTOSCALE_HOST_ROOT``, where its simulated devices are laid out.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from providers.local.standins.standin import INSTALLERS, NAMES

SYSTEM_DIRS = ("etc", "var", "opt", "srv", "root", "home", "mnt", "run", "usr/local")
_ABSOLUTE = re.compile(r"(?<![\w./~$-])/(?:" + "|".join(SYSTEM_DIRS) + r")(?=/|\b)")
_QUOTED_HEREDOC = re.compile(r"""<<-?\s*(['"])(\w+)\1""")
STANDIN = Path(__file__).parent / "standins" / "standin.py"


def rewrite_paths(script: str, root: Path) -> str:
    """``script`` with absolute system paths moved below ``root`` (see the module doc)."""
    out, closing = [], None
    for line in script.splitlines(keepends=True):
        if closing is not None:
            out.append(line)
            if line.strip() == closing:
                closing = None
            continue
        out.append(_ABSOLUTE.sub(lambda m: f"{root}{m.group(0)}", line))
        heredoc = _QUOTED_HEREDOC.search(line)
        if heredoc:
            closing = heredoc.group(2)
    return "".join(out)


SKELETON = (
    "etc/systemd/system",
    "var/log",
    "var/lib",
    "var/tmp",
    "opt",
    "root",
    "home",
    "run",
    "usr/local/bin",
    "srv",
    "mnt",
)
"""What every fresh VM has below ``/`` (the folders boot scripts write into)."""


def make_root(root: Path) -> Path:
    """The host's root folder, laid out like a fresh VM's."""
    for folder in SKELETON:
        (root / folder).mkdir(parents=True, exist_ok=True)
    return root


def write_standins(folder: Path) -> Path:
    """The stand-in commands, as executables in ``folder`` (first on the host's PATH)."""
    folder.mkdir(parents=True, exist_ok=True)
    run = 'exec "$AUTOSCALE_SIM_PYTHON" "$AUTOSCALE_SIM_STANDIN"'
    for name in NAMES:
        body = f'{run} {name} "$@"\n'
        if name.startswith("python"):  # every other python3 call stays fast
            body = f'if [ "${{1:-}}" = -m ] && [ "${{2:-}}" = pip ]; then {body}fi\n'
            body += 'exec "$AUTOSCALE_SIM_PYTHON" "$@"\n'
        path = folder / name
        path.write_text("#!/bin/bash\n" + body)
        path.chmod(0o755)
    assert set(INSTALLERS) <= set(NAMES)
    return folder


def host_environment(base: Path, root: Path, bin_dir: Path, path: str) -> dict[str, str]:
    """The stand-ins' settings and the host's ``HOME`` and ``PATH``: the stand-ins, then this
    control plane's commands (``autoscale``, ``ray``), then ``path``."""
    return {
        "HOME": str(root / "root"),
        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{path}",
        "AUTOSCALE_SIM_ROOT": str(root),
        "AUTOSCALE_SIM_BIN": str(bin_dir),
        "AUTOSCALE_SIM_PYTHON": sys.executable,
        "AUTOSCALE_SIM_STANDIN": str(STANDIN),
        "AUTOSCALE_SIM_RECORD": str(base / "recorded.log"),
        "AUTOSCALE_SIM_METADATA": str(base / "metadata.json"),
    }
