"""The stand-ins a simulated host of the local cloud finds first on its ``PATH``: only what
cannot run on this machine. Each ``bin/`` entry runs ``standin.py NAME ARGS``.

- package installs (``pip``, ``python3 -m pip``, ``apt-get``, ``yum``...): recorded, not run
  (the agent is already importable from the control plane's environment);
- ``docker``: every command line recorded; ``docker exec [opts] CONTAINER CMD`` runs CMD on
  the simulated host, ``docker cp`` copies on it;
- ``systemctl``: ``enable --now`` / ``start`` / ``restart`` run the unit's ``ExecStart``;
- ``curl`` to the cloud's metadata service: answered from the host's metadata table;
- ``hostname -I``: the host's address;
- ``ray start``: the real Ray, on the host's address with its own ports and temporary folder
  (many simulated hosts share this machine); ``ray stop`` ends only this host's Ray;
- ``sudo``: runs the command (the boot script already runs as the node's root).

Settings come from the host's environment (``AUTOSCALE_SIM_*``, set by the simulator).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

METADATA_HOSTS = ("169.254.169.254", "metadata.google.internal", "metadata")
SUDO_FLAGS_WITH_VALUE = {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}
DOCKER_EXEC_FLAGS_WITH_VALUE = {"-e", "--env", "-u", "--user", "-w", "--workdir", "--env-file"}


def main() -> int:
    name, args = sys.argv[1], sys.argv[2:]
    return COMMANDS.get(name, record_only)(name, args)


def env(key: str) -> str:
    return os.environ[f"AUTOSCALE_SIM_{key}"]


def record(name: str, args: list[str]) -> None:
    line = shlex.join([name, *args])
    with open(env("RECORD"), "a") as out:
        out.write(line + "\n")
    print(f"[local cloud] recorded: {line}", file=sys.stderr)


def record_only(name: str, args: list[str]) -> int:
    record(name, args)
    return 0


def real(name: str) -> str:
    """``name`` on the PATH after the stand-ins."""
    own = Path(__file__).resolve().parent
    rest = [
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != own
    ]
    rest = [p for p in rest if Path(p).resolve() != Path(env("BIN")).resolve()]
    found = shutil.which(name, path=os.pathsep.join(rest))
    if found is None:
        print(f"{name}: not found", file=sys.stderr)
        raise SystemExit(127)
    return found


def sudo(name: str, args: list[str]) -> int:
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        if flag == "--":
            break
        if flag in SUDO_FLAGS_WITH_VALUE and args:
            args.pop(0)
    if not args:
        return 0
    os.execvp(args[0], args)


def docker(name: str, args: list[str]) -> int:
    record(name, args)
    command = args[0] if args else ""
    if command == "exec":
        return _docker_exec(args[1:])
    if command == "cp" and len(args) >= 3:
        source, dest = (a.split(":", 1)[-1] if ":" in a else a for a in args[-2:])
        if Path(source).is_dir():
            shutil.copytree(source, dest, dirs_exist_ok=True, symlinks=True)
        else:
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest)
        return 0
    if command == "run":
        print(f"{abs(hash(tuple(args))):064x}"[:64])
    elif command == "inspect":
        print("true")
    return 0


def _docker_exec(args: list[str]) -> int:
    extra: dict[str, str] = {}
    workdir = None
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        value = None
        if "=" in flag and flag.startswith("--"):
            flag, value = flag.split("=", 1)
        elif flag in DOCKER_EXEC_FLAGS_WITH_VALUE:
            value = args.pop(0) if args else ""
        if flag in ("-e", "--env") and value is not None:
            key, _, given = value.partition("=")
            extra[key] = given if "=" in value else os.environ.get(key, "")
        elif flag in ("-w", "--workdir"):
            workdir = value
    if len(args) < 2:
        return 0
    command = args[1:]  # args[0]: the container, which is this host
    return subprocess.call(command, env={**os.environ, **extra}, cwd=workdir)


def systemctl(name: str, args: list[str]) -> int:
    record(name, args)
    words = [a for a in args if not a.startswith("-")]
    if not words:
        return 0
    action, units = words[0], words[1:]
    starting = action in ("start", "restart") or (action == "enable" and "--now" in args)
    for unit in units:
        unit = unit if "." in unit else f"{unit}.service"
        if starting:
            _start_unit(unit)
        elif action == "stop":
            _stop_unit(unit)
        elif action == "is-active":
            return 0 if _unit_pid(unit) else 3
    return 0


def _unit_file(unit: str) -> Path:
    return Path(env("ROOT")) / "etc" / "systemd" / "system" / unit


def _pid_file(unit: str) -> Path:
    return Path(env("ROOT")) / "run" / "systemd-standin" / f"{unit}.pid"


def _unit_pid(unit: str) -> int | None:
    try:
        pid = int(_pid_file(unit).read_text())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def _start_unit(unit: str) -> None:
    settings: dict[str, list[str]] = {}
    for line in _unit_file(unit).read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith(("#", ";", "[")):
            settings.setdefault(key.strip(), []).append(value.strip())
    unit_env = dict(os.environ)
    for assignment in settings.get("Environment", []):
        for word in shlex.split(assignment):
            key, _, value = word.partition("=")
            unit_env[key] = value
    output = next(iter(settings.get("StandardOutput", [])), "")
    log = Path(output.split(":", 1)[1]) if output.startswith(("append:", "file:")) else None
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
    out = log.open("ab") if log is not None else subprocess.DEVNULL
    _stop_unit(unit)
    process = subprocess.Popen(
        ["bash", "-c", f"exec {settings['ExecStart'][0]}"],
        env=unit_env,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    _pid_file(unit).parent.mkdir(parents=True, exist_ok=True)
    _pid_file(unit).write_text(str(process.pid))


def _stop_unit(unit: str) -> None:
    pid = _unit_pid(unit)
    if pid is not None:
        os.killpg(pid, signal.SIGTERM)


def curl(name: str, args: list[str]) -> int:
    urls = [a for a in args if "://" in a]
    target = urls[-1] if urls else ""
    host = target.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0]
    if host not in METADATA_HOSTS:
        os.execv(real("curl"), ["curl", *args])
    path = "/" + target.split("://", 1)[-1].partition("/")[2].split("?", 1)[0]
    table = json.loads(Path(env("METADATA")).read_text())
    matches = [key for key in table if path.endswith(key)]
    if not matches:
        print(f"curl: (22) The requested URL returned error: 404 ({path})", file=sys.stderr)
        return 22
    sys.stdout.write(table[max(matches, key=len)])
    return 0


def hostname(name: str, args: list[str]) -> int:
    if args and args[0] in ("-I", "-i", "--all-ip-addresses", "--ip-address"):
        print(f"{env('IP')} ")
        return 0
    os.execv(real("hostname"), ["hostname", *args])


def ray(name: str, args: list[str]) -> int:
    ray_bin = str(Path(env("PYTHON")).with_name("ray"))
    if args[:1] == ["stop"]:
        record(name, args)
        return _stop_own_ray()
    if args[:1] != ["start"]:
        os.execv(ray_bin, [ray_bin, *args])
    from autoscaler.ray_cluster.processes import PORT_FLAGS, port_flags

    given = {a.split("=", 1)[0] for a in args}
    local = []
    if "--node-ip-address" not in given:
        local.append(f"--node-ip-address={env('IP')}")
    if "--temp-dir" not in given:
        local.append(f"--temp-dir={env('RAY_TEMP')}")
    local += port_flags([flag for flag in PORT_FLAGS if flag not in given])
    os.execv(ray_bin, [ray_bin, *args, *local])


def _stop_own_ray() -> int:
    """End this host's Ray: the processes that carry its mark and run in its Ray folder."""
    import psutil

    from providers.processes import processes_with

    marker, folder = env("HOST"), env("RAY_TEMP")
    for process in processes_with("AUTOSCALE_SIM_HOST", marker.__eq__):
        try:
            if folder in " ".join(process.cmdline()):
                process.terminate()
        except psutil.Error:
            continue
    return 0


def python(name: str, args: list[str]) -> int:
    if args[:2] == ["-m", "pip"]:
        record(name, args)
        return 0
    os.execv(env("PYTHON"), [env("PYTHON"), *args])


COMMANDS = {
    "sudo": sudo,
    "docker": docker,
    "systemctl": systemctl,
    "curl": curl,
    "hostname": hostname,
    "ray": ray,
    "python3": python,
    "python": python,
}
INSTALLERS = ("pip", "pip3", "apt-get", "apt", "yum", "dnf", "conda")
"""Recorded only: nothing is downloaded."""
NAMES = (*COMMANDS, *INSTALLERS)


if __name__ == "__main__":
    sys.exit(main())
