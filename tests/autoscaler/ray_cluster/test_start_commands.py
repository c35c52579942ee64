"""Ray start lines rewritten for our monitor, and the detected flags each gets at boot."""

import json
import subprocess

from accel.node import NodeInventory
from autoscaler.ray_cluster.start_commands import boot_flags, head_port, rewrite_line

HEAD = (
    "ulimit -n 65536; ray start --head --port=6379 --object-manager-port=8076 "
    "--autoscaling-config=~/ray_bootstrap_config.yaml --dashboard-host=0.0.0.0"
)


def test_the_head_loses_rays_autoscaler_and_keeps_every_other_flag():
    text, (start,) = rewrite_line(HEAD, True, "F")
    assert text == (
        "ulimit -n 65536; ray start --head --port=6379 --object-manager-port=8076 "
        "--dashboard-host=0.0.0.0 --no-monitor ${F_0}"
    )
    assert start.head and start.port == 6379 and start.omit == ()


def test_folded_multi_line_commands_and_quoted_config_paths():
    # YAML's folded ``>-`` joins Ray's multi-line commands with spaces.
    line = "ulimit -n 65536; ray start --head --port=6390 --autoscaling-config '/a b.yaml'"
    text, (start,) = rewrite_line(line, True, "F")
    assert start.port == 6390
    assert "--autoscaling-config" not in text and "a b.yaml" not in text
    assert text.endswith("--port=6390 --no-monitor ${F_0}")
    assert head_port([line]) == 6390 and head_port(["ray stop"]) == 6379


def test_a_worker_keeps_its_address_and_gets_no_no_monitor():
    text, (start,) = rewrite_line("ray start --address=$RAY_HEAD_IP:6379 && echo ok", False, "W")
    assert text == "ray start --address=$RAY_HEAD_IP:6379 ${W_0} && echo ok"
    assert not start.head


def test_flags_the_user_sets_are_not_added_and_their_resources_are_merged():
    line = "ray start --address=h:1 --num-gpus 2 --resources='{\"Custom\": 1}'"
    text, (start,) = rewrite_line(line, False, "W")
    assert start.omit == ("num-gpus",)
    assert start.resources == {"Custom": 1.0}
    assert "--resources" not in text and "--num-gpus 2" in text
    inventory = NodeInventory(
        {"CPU": 8, "GPU": 4, "memory": 1000, "accelerator_type:A100": 1, "my res": 2}
    )
    flags = boot_flags(inventory, start.omit, start.resources)
    assert flags[0] == "--num-cpus=8" and not any(f.startswith("--num-gpus") for f in flags)
    resources = next(f for f in flags if f.startswith("--resources="))
    # Safe unquoted in the shell (no spaces, no glob characters), and still the JSON.
    echoed = subprocess.run(
        ["bash", "-c", 'printf "%s\\n" $FLAGS'],
        env={"FLAGS": resources},
        capture_output=True,
        text=True,
    ).stdout.split("\n")[0]
    assert json.loads(echoed.split("=", 1)[1]) == {
        "Custom": 1.0,
        "accelerator_type:A100": 1,
        "my res": 2,
    }


def test_lines_without_ray_start_are_unchanged():
    for line in ("ray stop", "echo 'ray start --head'", "pip install ray"):
        assert rewrite_line(line, True, "F") == (line, [])
