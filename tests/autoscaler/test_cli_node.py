"""`autoscale node detect|run|status` as a user runs them: real processes, real ledger."""

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest


@pytest.fixture
def node_env(tmp_path) -> dict[str, str]:
    """An environment whose host tree is empty and whose ledger lives in tmp_path."""
    host = tmp_path / "host"
    host.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOSCALE_", "CUDA_"))}
    env.update(
        AUTOSCALE_HOST_ROOT=str(host),
        AUTOSCALE_NODE_STATE_DIR=str(tmp_path / "state"),
        AUTOSCALE_NODE_RESOURCES=json.dumps({"GPU": 4, "accelerator_type:A100": 1}),
    )
    return env


AUTOSCALE = (sys.executable, "-m", "autoscaler")


def autoscale(
    *args: str, env: dict[str, str], timeout: float = 60, **kwargs
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*AUTOSCALE, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def test_detect_json_reports_overridden_resources(node_env):
    done = autoscale("node", "detect", "--json", "--num-gpus", "8", env=node_env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["resources"]["GPU"] == 8
    assert report["resources"]["accelerator_type:A100"] == 1
    assert report["device_pools"]["GPU"]["family"] == "nvidia"
    assert report["device_pools"]["GPU"]["ids"] == [str(i) for i in range(8)]


def test_ray_start_args_match_the_inventory(node_env):
    done = autoscale("node", "detect", "--ray-start-args", env=node_env)
    assert done.returncode == 0, done.stderr
    assert "--num-gpus=4" in done.stdout
    assert '"accelerator_type:A100": 1.0' in done.stdout


def test_run_sets_visible_devices_and_assignment(node_env):
    done = autoscale(
        "node",
        "run",
        "--resources",
        '{"GPU": 0.5}',
        "--",
        sys.executable,
        "-c",
        "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['AUTOSCALE_ASSIGNED'])",
        env=node_env,
    )
    assert done.returncode == 0, done.stderr
    ids, assigned = done.stdout.strip().split(" ", 1)
    assert ids == "0"
    assert json.loads(assigned) == {"GPU": {"ids": ["0"], "fraction": 0.5}}


def test_run_honours_the_noset_opt_out(node_env):
    node_env["AUTOSCALE_NOSET_CUDA_VISIBLE_DEVICES"] = "1"
    done = autoscale(
        "node",
        "run",
        "--resources",
        '{"GPU": 1}',
        "--",
        sys.executable,
        "-c",
        "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'))",
        env=node_env,
    )
    assert done.stdout.strip() == "None"


def test_run_exits_with_the_workload_exit_code(node_env):
    done = autoscale("node", "run", "--", sys.executable, "-c", "raise SystemExit(7)", env=node_env)
    assert done.returncode == 7


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--resources", "{bad"], "--resources: not valid JSON"),
        (["--resources", '{"GPU": 1.5}'], "above 1 must be whole numbers"),
        (["--resources", '{"GPU": 9}'], "9 requested but this node has only 4"),
        (["--resources", '{"HPU": 1}'], "this node has no HPU devices"),
        (
            ["--resources", '{"GPU": 1, "neuron_cores": 2}'],
            "GPU and neuron_cores cannot be requested together",
        ),
        (["--resources", '{"GPU": NaN}'], "'GPU' must be a finite number"),
    ],
)
def test_bad_requests_fail_clearly_without_traceback(node_env, args, message):
    done = autoscale("node", "run", *args, "--", "true", env=node_env)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_bad_override_variable_fails_clearly(node_env):
    node_env["AUTOSCALE_NODE_RESOURCES"] = '{"GPU": "four"}'
    done = autoscale("node", "detect", env=node_env)
    assert done.returncode == 2
    assert "AUTOSCALE_NODE_RESOURCES: 'GPU' must be a number" in done.stderr


def test_huge_override_variable_fails_at_once(node_env):
    node_env["AUTOSCALE_NODE_RESOURCES"] = '{"GPU": 1e308, "TPU": 4}'
    done = autoscale("node", "run", "--", "true", env=node_env, timeout=10)
    assert done.returncode == 2
    assert "AUTOSCALE_NODE_RESOURCES: 'GPU' must be at most 1e+14, got 1e+308" in done.stderr


def test_seed_oneapi_selector_with_bare_ids_selects_intel_gpus_1_and_3(node_env):
    """``ONEAPI_DEVICE_SELECTOR=1,3 ray start --num-gpus=2`` lets Ray see devices 1 and 3."""
    from tests.fakes.gpu_trees import install_intel_gpu
    from tests.fakes.host import FakeHost

    install_intel_gpu(FakeHost(Path(node_env["AUTOSCALE_HOST_ROOT"])), count=4)
    del node_env["AUTOSCALE_NODE_RESOURCES"]
    node_env["ONEAPI_DEVICE_SELECTOR"] = "1,3"
    report = json.loads(autoscale("node", "detect", "--json", env=node_env).stdout)
    assert report["resources"]["GPU"] == 2
    assert report["device_pools"]["GPU"]["ids"] == ["1", "3"]
    node_env["ONEAPI_DEVICE_SELECTOR"] = "levelzero:1"
    done = autoscale("node", "detect", "--json", env=node_env)
    assert json.loads(done.stdout)["resources"]["GPU"] == 4
    assert "warning: ONEAPI_DEVICE_SELECTOR='levelzero:1' is ignored" in done.stderr


def test_missing_command_is_reported_and_lease_released(node_env):
    done = autoscale("node", "run", "--resources", '{"GPU": 4}', "--", "no-such-cmd", env=node_env)
    assert done.returncode == 1
    assert "command not found: no-such-cmd" in done.stderr
    status = json.loads(autoscale("node", "status", "--json", env=node_env).stdout)
    assert status["leases"] == []


def test_busy_devices_fail_fast_or_wait(node_env, tmp_path):
    release = tmp_path / "release"
    holder = _hold(node_env, '{"GPU": 4}', release)
    try:
        _wait_for_leases(node_env, 1)
        busy = autoscale("node", "run", "--resources", '{"GPU": 1}', "--", "true", env=node_env)
        assert busy.returncode == 1
        assert "not enough free resources" in busy.stderr
        waiter = subprocess.Popen(
            [*AUTOSCALE, "node", "run", "--wait", "30", "--resources", '{"GPU": 1}', "--", "true"],
            env=node_env,
        )
        assert waiter.poll() is None  # the four GPUs are still held
        release.touch()
        assert waiter.wait(timeout=30) == 0
    finally:
        release.touch()
        holder.wait(timeout=30)


def _hold(env: dict[str, str], resources: str, release: Path) -> subprocess.Popen:
    """``node run`` holding ``resources`` until the file ``release`` exists."""
    wait = f"import os, time\nwhile not os.path.exists({str(release)!r}): time.sleep(0.01)"
    return subprocess.Popen(
        [*AUTOSCALE, "node", "run", "--resources", resources, "--", sys.executable, "-c", wait],
        env=env,
    )


def test_concurrent_runs_never_share_a_whole_device(node_env, tmp_path):
    """Eight runs contend for four GPUs: no device ever has two holders at once."""
    log = tmp_path / "intervals.jsonl"
    script = (
        "import json, os, time; start = time.time(); time.sleep(0.3); "
        f"open({str(log)!r}, 'a').write(json.dumps("
        "[os.environ['CUDA_VISIBLE_DEVICES'], start, time.time()]) + '\\n')"
    )
    runs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "autoscaler",
                "node",
                "run",
                "--wait",
                "60",
                "--resources",
                '{"GPU": 1}',
                "--",
                sys.executable,
                "-c",
                script,
            ],
            env=node_env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    assert [run.wait(timeout=90) for run in runs] == [0] * 8
    intervals = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(intervals) == 8
    for device in {device for device, _, _ in intervals}:
        spans = sorted((start, end) for d, start, end in intervals if d == device)
        for (_, end), (next_start, _) in itertools.pairwise(spans):
            assert next_start >= end, f"device {device} was held twice at once"


WORKLOAD_SIGNALS_READY = (
    "import os, pathlib, sys, time; ready = pathlib.Path(sys.argv[1]); "
    "ready.with_suffix('.tmp').write_text(str(os.getpid())); "
    "ready.with_suffix('.tmp').replace(ready); time.sleep(120)"
)


def test_killing_the_runner_kills_its_workload_and_frees_the_lease(node_env, tmp_path):
    """Ray's rule: a worker's process dies with it, so its devices come free at once."""
    from accel.ledger import ProcessRef

    ready = tmp_path / "workload.pid"
    runner = subprocess.Popen(
        [
            *(sys.executable, "-m", "autoscaler", "node", "run", "--resources", '{"GPU": 4}'),
            *("--", sys.executable, "-c", WORKLOAD_SIGNALS_READY, str(ready)),
        ],
        env=node_env,
    )
    workload = ProcessRef.of(int(_wait_for_file(ready).read_text()))
    assert workload.alive()
    runner.kill()
    runner.wait(timeout=10)
    _wait_until(lambda: not workload.alive(), "the workload outlived its runner")
    assert _status(node_env)["leases"] == []
    done = autoscale("node", "run", "--resources", '{"GPU": 4}', "--", "true", env=node_env)
    assert done.returncode == 0, done.stderr


def _wait_for_file(path: Path, timeout_s: float = 20) -> Path:
    _wait_until(path.exists, f"{path} never appeared", timeout_s)
    return path


def _wait_until(condition, failure: str, timeout_s: float = 20):
    """Poll ``condition`` until it returns something true, and return that."""
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(failure)
        time.sleep(0.02)
    return result


def _status(env: dict[str, str]) -> dict:
    return json.loads(autoscale("node", "status", "--json", env=env).stdout)


def test_status_lists_leases_and_free_shares(node_env, tmp_path):
    release = tmp_path / "release"
    holder = _hold(node_env, '{"GPU": 0.25}', release)
    try:
        status = _wait_for_leases(node_env, 1)
        assert status["free_device_shares"]["GPU"] == {"0": 0.75, "1": 1.0, "2": 1.0, "3": 1.0}
        assert status["leases"][0]["grants"] == {"GPU": {"ids": ["0"], "fraction": 0.25}}
        table = autoscale("node", "status", env=node_env)
        assert "Free share per device" in table.stdout
    finally:
        release.touch()
        holder.wait(timeout=30)


def _wait_for_leases(env: dict[str, str], count: int) -> dict:
    def enough() -> dict | None:
        status = _status(env)
        return status if len(status["leases"]) >= count else None

    return _wait_until(enough, f"no {count} lease(s) appeared")


def test_host_root_points_detection_at_another_tree(node_env):
    root = Path(node_env["AUTOSCALE_HOST_ROOT"])
    (root / "sys/devices/system/cpu").mkdir(parents=True)
    (root / "sys/devices/system/cpu/online").write_text("0-63\n")
    (root / "proc").mkdir()
    (root / "proc/meminfo").write_text("MemTotal:       1048576 kB\n")
    report = json.loads(autoscale("node", "detect", "--json", env=node_env).stdout)
    assert report["resources"]["CPU"] == 64
    assert report["resources"]["memory"] == 1024**3


def test_detect_and_run_on_an_amd_host_tree(node_env):
    """The real CLI against a fake host tree: KFD topology of four MI300X GPUs."""
    from tests.fakes.gpu_trees import install_amd
    from tests.fakes.host import FakeHost

    install_amd(FakeHost(Path(node_env["AUTOSCALE_HOST_ROOT"])), count=4, model="MI300X")
    del node_env["AUTOSCALE_NODE_RESOURCES"]
    report = json.loads(autoscale("node", "detect", "--json", env=node_env).stdout)
    assert report["resources"]["GPU"] == 4
    assert report["device_pools"]["GPU"]["family"] == "amd"
    assert "accelerator_type:AMD-Instinct-MI300X" in report["resources"]
    done = autoscale(
        "node",
        "run",
        "--resources",
        '{"GPU": 2}',
        "--",
        sys.executable,
        "-c",
        "import os; print(os.environ['HIP_VISIBLE_DEVICES'])",
        env=node_env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0,1"


def test_tpu_sub_host_run_gets_chips_and_bounds(node_env):
    from tests.fakes.host import FakeHost
    from tests.fakes.tpu_trees import install_tpu_host

    install_tpu_host(FakeHost(Path(node_env["AUTOSCALE_HOST_ROOT"])), "v4-8", chips=4, via=None)
    del node_env["AUTOSCALE_NODE_RESOURCES"]
    node_env.update(TPU_ACCELERATOR_TYPE="v4-8", TPU_WORKER_ID="0", TPU_NAME="my-tpu")
    show = (
        "import os; print(os.environ['TPU_VISIBLE_CHIPS'], "
        "os.environ.get('TPU_CHIPS_PER_HOST_BOUNDS'), os.environ.get('TPU_HOST_BOUNDS'))"
    )
    two = autoscale(
        "node", "run", "--resources", '{"TPU": 2}', "--", sys.executable, "-c", show, env=node_env
    )
    assert two.stdout.split() == ["0,1", "1,2,1", "1,1,1"], two.stderr
    whole = autoscale(
        "node", "run", "--resources", '{"TPU": 4}', "--", sys.executable, "-c", show, env=node_env
    )
    assert whole.stdout.split() == ["0,1,2,3", "None", "None"], whole.stderr
    bad = autoscale("node", "run", "--resources", '{"TPU": 3}', "--", "true", env=node_env)
    assert bad.returncode == 2
    assert "1, 2, 4" in bad.stderr
