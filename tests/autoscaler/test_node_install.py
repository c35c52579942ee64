"""What a node installs: the node side alone (plus the control plane on the head), skipped
where the image already has this release; a control-plane command on a node-only install
names the extra in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from autoscaler.bootstrap import install_step, node_package
from autoscaler.extras import extra_for
from autoscaler.release import package_version

ROOT = Path(__file__).resolve().parents[2]


def test_a_worker_installs_the_node_side_and_the_head_the_control_plane():
    assert node_package("1.2.3", head=False, reports_into=None) == "accel-autoscaler==1.2.3"
    assert node_package("1.2.3", head=True, reports_into=None) == (
        "accel-autoscaler[control]==1.2.3"
    )
    # A worker that reports into its own tags needs its cloud's client.
    assert node_package("1.2.3", head=False, reports_into="gcp") == "accel-autoscaler[gcp]==1.2.3"


def _run(lines: list[str], tmp_path: Path, autoscale_version: str) -> list[str]:
    """Run the install lines with ``autoscale`` and ``python3`` that only say what ran."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "ran.log"
    (bin_dir / "autoscale").write_text(
        f"#!/bin/sh\necho 'autoscale, version {autoscale_version}'\n"
    )
    (bin_dir / "python3").write_text(f'#!/bin/sh\necho "python3 $*" >> {log}\n')
    for tool in ("autoscale", "python3"):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(lines)], env=env, check=True)
    return log.read_text().splitlines() if log.exists() else []


def test_the_install_is_skipped_where_this_release_is_installed(tmp_path):
    lines = install_step("accel-autoscaler==1.2.3")
    assert _run(lines, tmp_path, "1.2.3") == []
    assert _run(lines, tmp_path, "1.2.2") == [
        "python3 -m pip install --quiet accel-autoscaler==1.2.3"
    ]


def test_ray_is_installed_only_where_the_node_has_none(tmp_path):
    lines = install_step("accel-autoscaler==1.2.3", ray=True)
    ran = _run(lines, tmp_path, "1.2.3")
    assert len(ran) == 1 and ran[0].startswith("python3 -m pip install --quiet ray[default]")
    (tmp_path / "bin" / "ray").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "ray").chmod(0o755)
    (tmp_path / "ran.log").unlink()
    assert _run(lines, tmp_path, "1.2.3") == []


def test_a_package_without_a_pinned_version_is_always_installed(tmp_path):
    assert install_step("https://example.com/agent.whl") == [
        "python3 -m pip install --quiet https://example.com/agent.whl"
    ]


def test_the_extra_for_a_missing_module_comes_from_the_distribution_metadata():
    requires = [
        "click>=8.1",
        'boto3>=1.34; extra == "aws"',
        'pyyaml>=6; extra == "control"',
        'accel-autoscaler[aws]; extra == "control"',
        'accel-autoscaler[control]; extra == "local"',
        'moto[server]>=5; extra == "local"',
        'ray>=2.10; extra == "ray"',
    ]
    assert extra_for("boto3", requires) == "control"
    assert extra_for("yaml", requires) == "control"
    assert extra_for("moto", requires) == "local"
    assert extra_for("ray", requires) == "ray"
    assert extra_for("click", requires) is None
    assert extra_for("nothing", requires) is None


def test_a_control_plane_command_on_a_node_only_install_is_one_line():
    code = (
        "import sys; sys.modules['pydantic'] = None; sys.modules['yaml'] = None;"
        "sys.argv = ['autoscale', 'plan', 'example-clusters/quickstart.yaml'];"
        "from autoscaler.cli import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("Error: this command needs ")
    assert line.endswith("pip install 'accel-autoscaler[control]'")


def test_the_release_is_what_autoscale_version_prints():
    done = subprocess.run(
        [sys.executable, "-m", "autoscaler", "--version"], capture_output=True, text=True
    )
    assert done.stdout.strip() == f"autoscale, version {package_version()}"


def test_the_local_cloud_without_its_extra_is_one_line(tmp_path):
    code = (
        "import sys; sys.modules['moto'] = sys.modules['moto.server'] = None;"
        "sys.argv = ['autoscale', 'up', 'example-clusters/quickstart.yaml', '--yes'];"
        "from autoscaler.cli import main; main()"
    )
    env = {**os.environ, "AUTOSCALE_STATE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )
    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert line.endswith(
        "needs 'moto', which this install lacks (a node-only install): "
        "pip install 'accel-autoscaler[local]'"
    )
