"""The README's main command, end to end: the whole loop on the embedded local cloud."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from providers.processes import processes_with

ROOT = Path(__file__).resolve().parent.parent


def test_quickstart_runs_the_whole_loop_and_leaves_nothing_running(tmp_path):
    env = {**os.environ, "AUTOSCALE_STATE_DIR": str(tmp_path)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "autoscaler",
            "quickstart",
            "--config",
            str(ROOT / "example-clusters" / "quickstart.yaml"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    for step in range(1, 7):
        assert f"[{step}/6]" in out
    assert "lower bound" in out
    assert "A100-40G" in out and "Trainium" in out and "L4" in out
    assert "CUDA_VISIBLE_DEVICES=0,1" in out
    assert "local cloud and simulator stopped" in out
    leftovers = processes_with("AUTOSCALE_STATE_DIR", str(tmp_path).__eq__)
    assert leftovers == []


def test_ray_quickstart_scales_for_a_real_ray_job_and_leaves_nothing_running(tmp_path):
    pytest.importorskip("ray")
    env = {**os.environ, "AUTOSCALE_STATE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "autoscaler", "quickstart", "--ray"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    for step in range(1, 7):
        assert f"[{step}/6]" in out
    assert "4 x {CPU: 1, GPU: 1, accelerator_type:A100: 0.001}" in out  # Ray's pending tasks
    assert out.count("A100 task") == 4 and "CUDA_VISIBLE_DEVICES=" in out
    assert out.count("NeuronCore task") == 2 and "NEURON_RT_VISIBLE_CORES=" in out
    assert out.count("(drained by Ray)") == 2
    assert "Ray head stopped" in out
    leftovers = processes_with("AUTOSCALE_STATE_DIR", str(tmp_path).__eq__)
    assert leftovers == []
