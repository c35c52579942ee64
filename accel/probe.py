"""One injectable gateway for every host access made by detection.

Detection never touches ``os``, ``subprocess``, NVML or the network directly; it asks a
:class:`HostProbe`. Tests build a probe over a fake device tree, a fake environment, fake
commands and a fake NVML module, so every family is exercised without hardware.

``AUTOSCALE_HOST_ROOT`` makes the default probe read ``/sys``, ``/dev``, ``/opt`` and ``/proc``
below another root (containers that mount the host elsewhere, and tests).
"""

from __future__ import annotations

import logging
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

logger = logging.getLogger(__name__)

HOST_ROOT_ENV_VAR = "AUTOSCALE_HOST_ROOT"
DEFAULT_COMMAND_TIMEOUT_S = 10.0
DEFAULT_METADATA_TIMEOUT_S = 0.5
GCE_METADATA_HOST_ENV_VAR = "GCE_METADATA_HOST"  # same variable google-auth honours
GCE_METADATA_DEFAULT_HOST = "metadata.google.internal"


@dataclass(frozen=True)
class CommandResult:
    """What a finished command printed and returned."""

    returncode: int
    stdout: str
    stderr: str


CommandRunner = Callable[[Sequence[str], float], CommandResult | None]
NvmlLoader = Callable[[], Any]
MetadataReader = Callable[[str, float], str | None]


def natural_key(text: str) -> list[Any]:
    """Sort key that orders ``accel10`` after ``accel2``."""
    # Odd positions of the split are the digit runs; ``str.isdigit`` would also take "²".
    parts = re.split(r"(\d+)", text)
    return [int(part) if position % 2 else part for position, part in enumerate(parts)]


def _run_subprocess(argv: Sequence[str], timeout: float) -> CommandResult | None:
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError) as err:
        logger.debug("command %s failed to run: %s", argv[0], err)
        return None
    return CommandResult(done.returncode, done.stdout, done.stderr)


def _load_pynvml() -> ModuleType | None:
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def _gce_metadata_reader(env: Mapping[str, str]) -> MetadataReader:
    host = env.get(GCE_METADATA_HOST_ENV_VAR, GCE_METADATA_DEFAULT_HOST)

    def read(path: str, timeout: float) -> str | None:
        import urllib.request  # only TPU hosts get here; keeps ssl off the CLI start-up path

        url = f"http://{host}/computeMetadata/v1/{path.lstrip('/')}"
        request = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.read().decode("utf-8")
        except (OSError, ValueError) as err:
            logger.debug("GCE metadata %s unavailable: %s", path, err)
            return None

    return read


class HostProbe:
    """Reads files, environment, commands, NVML and the cloud metadata of one host.

    Every method fails soft: a missing file, command, library or server yields ``None``
    (or an empty list), never an exception, so one broken probe never hides another family.
    """

    def __init__(
        self,
        root: Path | str = "/",
        env: Mapping[str, str] | None = None,
        run_command: CommandRunner | None = None,
        nvml_loader: NvmlLoader | None = None,
        metadata_reader: MetadataReader | None = None,
        command_timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S,
        metadata_timeout_s: float = DEFAULT_METADATA_TIMEOUT_S,
        system: str | None = None,
    ) -> None:
        self.root = Path(root)
        self.system = system or platform.system()
        """The operating system, as ``platform.system()`` names it (``Linux``, ``Darwin``)."""
        self.env: Mapping[str, str] = dict(os.environ if env is None else env)
        self._run_command = run_command or _run_subprocess
        self._nvml_loader = nvml_loader or _load_pynvml
        self._metadata_reader = metadata_reader or _gce_metadata_reader(self.env)
        self.command_timeout_s = command_timeout_s
        self.metadata_timeout_s = metadata_timeout_s

    @classmethod
    def from_host(cls, env: Mapping[str, str] | None = None) -> HostProbe:
        """The probe for this machine, honouring ``AUTOSCALE_HOST_ROOT``."""
        env = dict(os.environ if env is None else env)
        return cls(root=env.get(HOST_ROOT_ENV_VAR) or "/", env=env)

    # Filesystem -----------------------------------------------------------------------
    def path(self, host_path: str) -> Path:
        """The local path of an absolute host path such as ``/sys/class/drm``."""
        return self.root / host_path.lstrip("/")

    def exists(self, host_path: str) -> bool:
        try:
            return self.path(host_path).exists()
        except OSError:
            return False

    def is_dir(self, host_path: str) -> bool:
        try:
            return self.path(host_path).is_dir()
        except OSError:
            return False

    def link_target_name(self, host_path: str) -> str | None:
        """Name of the file a link (chain) ends at, e.g. the PCI address of a ``device`` link."""
        try:
            return self.path(host_path).resolve(strict=True).name
        except (OSError, RuntimeError):  # missing, or a link loop
            return None

    def read_text(self, host_path: str) -> str | None:
        """A file's text, stripped, or ``None`` if it cannot be read."""
        try:
            return self.path(host_path).read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return None

    def glob(self, host_pattern: str) -> list[str]:
        """Host paths matching a glob, in natural order (``accel2`` before ``accel10``)."""
        relative = host_pattern.lstrip("/")
        try:
            matches = ["/" + str(p.relative_to(self.root)) for p in self.root.glob(relative)]
        except OSError:
            return []
        return sorted(matches, key=natural_key)

    def listdir(self, host_path: str) -> list[str]:
        """Entry names of a host directory in natural order; empty if absent."""
        try:
            return sorted(os.listdir(self.path(host_path)), key=natural_key)
        except OSError:
            return []

    # Commands -------------------------------------------------------------------------
    def which(self, name: str, extra_dirs: Sequence[str] = ()) -> str | None:
        """Find an executable in vendor install folders below the root, then on PATH."""
        for host_dir in extra_dirs:
            candidate = self.path(f"{host_dir.rstrip('/')}/{name}")
            try:
                if candidate.is_file() and os.access(candidate, os.X_OK):
                    return str(candidate)
            except OSError:
                continue
        # Never None: shutil.which would then search this process's own PATH.
        return shutil.which(name, path=self.env.get("PATH", os.defpath))

    def run(self, argv: Sequence[str], timeout: float | None = None) -> CommandResult | None:
        """Run a command with a timeout; ``None`` if it is missing, hangs or cannot start."""
        return self._run_command(argv, self.command_timeout_s if timeout is None else timeout)

    # Libraries and services ------------------------------------------------------------
    def nvml(self) -> Any | None:
        """The pynvml module (or a fake one in tests); ``None`` if the library is missing."""
        return self._nvml_loader()

    def gce_metadata(self, path: str) -> str | None:
        """A GCE metadata value such as ``instance/attributes/accelerator-type``."""
        return self._metadata_reader(path, self.metadata_timeout_s)
