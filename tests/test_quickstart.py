"""The README's main command, end to end: the whole loop on the embedded local cloud."""

import os
import subprocess
import sys
from pathlib import Path

import psutil

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
    leftovers = [
        p.info["pid"]
        for p in psutil.process_iter(["pid", "environ"])
        if (p.info.get("environ") or {}).get("AUTOSCALE_STATE_DIR") == str(tmp_path)
    ]
    assert leftovers == []
