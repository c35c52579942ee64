"""What a node installs at boot: size, distributions and seconds, from a fresh virtualenv.

Builds this checkout's wheel, makes a fresh virtualenv, and runs the install lines the boot
script carries (``autoscaler.bootstrap.install_step`` for the requirement
``node_package`` picks) with that venv's ``python3`` first on ``PATH``, the wheel standing
in for the release on the package index. Then it runs the same lines again, as on an
image built for this release (the install is skipped), and checks the agent starts.

    python benchmarks/node_install.py                 # a worker (reports to the head)
    python benchmarks/node_install.py --role head     # the head: node side + control plane
    python benchmarks/node_install.py --role full     # everything (control plane + local cloud)

Sizes count what the install added to the venv's site-packages; Ray is excluded (it comes
from the image or the user's setup commands, or with ``ray_start`` from ``pip`` separately).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoscaler.bootstrap import CONTROL_EXTRA, install_step

ROOT = Path(__file__).resolve().parent.parent
ROLES = {"worker": [], "head": [CONTROL_EXTRA], "full": [CONTROL_EXTRA, "local"]}
MB = 1e6


def build_wheel(out: Path) -> Path:
    """This checkout's wheel, built from a copy (a build leaves ``build/`` behind)."""
    source = out / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__"),
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(source)],
        check=True,
    )
    return next(out.glob("accel_autoscaler-*.whl"))


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python*/site-packages"))


def footprint(venv: Path) -> tuple[int, int]:
    """(bytes, distributions) in the venv's site-packages."""
    root = site_packages(venv)
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    return size, len(list(root.glob("*.dist-info")))


def run_install(venv: Path, lines: list[str]) -> float:
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    started = time.monotonic()
    subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(lines)], env=env, check=True)
    return time.monotonic() - started


def measure(role: str, wheel: Path, work: Path) -> dict[str, float]:
    venv = work / f"venv-{role}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    before_bytes, before_dists = footprint(venv)
    extras = ROLES[role]
    package = f"{wheel}[{','.join(extras)}]" if extras else str(wheel)
    # The boot script pins the release (``accel-autoscaler==V``), which is what lets an image
    # built for it skip the install; the wheel stands in for that requirement here.
    lines = install_step(package)
    seconds = run_install(venv, lines)
    after_bytes, after_dists = footprint(venv)
    check = subprocess.run(
        [str(venv / "bin" / "autoscale"), "node", "agent", "--help"], capture_output=True
    )
    if check.returncode != 0:
        raise SystemExit(f"the agent does not start after the install: {check.stderr.decode()}")
    return {
        "mb": (after_bytes - before_bytes) / MB,
        "distributions": after_dists - before_dists,
        "seconds": seconds,
    }


def skipped_install_seconds(work: Path) -> float:
    """The install step on a node that already has this release (an image built for it)."""
    from autoscaler.bootstrap import node_package
    from autoscaler.release import package_version

    lines = install_step(node_package(package_version(), head=False, reports_into=None))
    return run_install(Path(sys.executable).parent.parent, lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--role", choices=sorted(ROLES), action="append")
    args = parser.parse_args()
    roles = args.role or ["worker"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wheel = build_wheel(work)
        print(f"wheel: {wheel.name} ({wheel.stat().st_size / MB:.2f} MB)")
        print(f"{'role':8} {'installed MB':>13} {'distributions':>14} {'seconds':>8}")
        for role in roles:
            figures = measure(role, wheel, work)
            print(
                f"{role:8} {figures['mb']:13.1f} {figures['distributions']:14d} "
                f"{figures['seconds']:8.1f}"
            )
        print(f"already installed (image built for it): {skipped_install_seconds(work):.2f} s")


if __name__ == "__main__":
    main()
