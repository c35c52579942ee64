"""A fake host: a device tree on disk, an environment, vendor commands and metadata.

Build one per test (the ``fake_host`` fixture), describe the hardware, then call
:meth:`FakeHost.probe` to get the :class:`HostProbe` detection reads through.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accel.probe import CommandResult, HostProbe


class FakeHost:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.env: dict[str, str] = {"PATH": ""}
        self.system = "Linux"
        self.nvml: Any | None = None
        self.metadata: dict[str, str] = {}
        self.metadata_calls: list[str] = []
        self.command_calls: list[list[str]] = []
        self._commands: dict[str, CommandResult | None] = {}

    # Device tree ------------------------------------------------------------------------
    def write(self, host_path: str, text: str | int = "") -> Path:
        """Create a file below the fake root (parents included) holding ``text``."""
        path = self.root / host_path.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{text}\n" if text != "" else "")
        return path

    def write_many(self, host_dir: str, files: dict[str, str | int]) -> None:
        for name, text in files.items():
            self.write(f"{host_dir.rstrip('/')}/{name}", text)

    def mkdir(self, host_path: str) -> Path:
        path = self.root / host_path.lstrip("/")
        path.mkdir(parents=True, exist_ok=True)
        return path

    def symlink(self, host_path: str, target: str) -> None:
        path = self.root / host_path.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)

    # Commands ---------------------------------------------------------------------------
    def command(
        self,
        name: str,
        stdout: str | dict | list = "",
        returncode: int = 0,
        stderr: str = "",
        install_dir: str = "/usr/bin",
        hangs: bool = False,
    ) -> None:
        """Install a vendor command: an executable file in the tree and its canned output.

        ``hangs=True`` makes it behave like a command that ran past its timeout.
        """
        exe = self.write(f"{install_dir.rstrip('/')}/{name}", "#!/bin/sh\nexit 99")
        exe.chmod(0o755)
        bin_dir = str(exe.parent)
        if bin_dir not in self.env["PATH"].split(os.pathsep):
            self.env["PATH"] = os.pathsep.join(p for p in (self.env["PATH"], bin_dir) if p)
        if not isinstance(stdout, str):
            stdout = json.dumps(stdout)
        self._commands[name] = None if hangs else CommandResult(returncode, stdout, stderr)

    def _run(self, argv: Sequence[str], timeout: float) -> CommandResult | None:
        self.command_calls.append(list(argv))
        return self._commands.get(Path(argv[0]).name)

    def _read_metadata(self, path: str, timeout: float) -> str | None:
        self.metadata_calls.append(path)
        return self.metadata.get(path)

    # The probe ---------------------------------------------------------------------------
    def probe(self) -> HostProbe:
        return HostProbe(
            root=self.root,
            env=self.env,
            run_command=self._run,
            nvml_loader=lambda: self.nvml,
            metadata_reader=self._read_metadata,
            system=self.system,
        )
