"""The process definitions an operator deploys (deploy/systemd/, the Dockerfile, compose.yaml) run the Procfile's
commands, stop no run half-way, and keep one beat; the image and compose file are not built here (no registry is
reachable), so their text is what is held to the Procfile."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath

import pytest
import yaml
from django.conf import settings

from config.startup import EXIT_SETTINGS
from config.supervise import EXIT_SETTINGS as SUPERVISE_EXIT_SETTINGS
from tests.procfile import ROOT, procfile_commands

UNITS = {
    "web": "tasklift-web.service",
    "worker": "tasklift-worker@.service",
    "beat": "tasklift-beat.service",
    "imap-idle": "tasklift-imap-idle.service",
    "inbound": "tasklift-inbound.service",
}


def unit_entries(name: str) -> dict[str, list[str]]:
    """A systemd unit's `Key=value` lines (a key may repeat, as Environment= does), of every section."""
    entries: dict[str, list[str]] = {}
    for line in (ROOT / "deploy" / "systemd" / name).read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            entries.setdefault(key.strip(), []).append(value.strip())
    return entries


def seconds(value: str) -> int:
    """A duration as systemd and compose write it: `660`, `660s`, `11m`, `11min`."""
    number, unit = re.fullmatch(r"(\d+)\s*(s|sec|m|min)?", value).groups()  # type: ignore[union-attr]
    return int(number) * (60 if unit in ("m", "min") else 1)


def test_the_procfile_lists_web_worker_beat_imap_idle_and_inbound() -> None:
    assert set(procfile_commands()) == {"web", "worker", "beat", "imap-idle", "inbound"}


def test_each_systemd_unit_runs_its_procfile_command_from_the_virtualenv() -> None:
    for process, unit in UNITS.items():
        entries = unit_entries(unit)
        (exec_start,) = entries["ExecStart"]
        program, *arguments = shlex.split(exec_start)
        procfile = shlex.split(procfile_commands()[process])
        assert PurePosixPath(program).name == procfile[0], unit
        assert arguments == procfile[1:], unit
        # The Procfile's promise: run from the project root with the virtualenv's bin first on PATH.
        (directory,) = entries["WorkingDirectory"]
        venv_bin = str(PurePosixPath(directory) / ".venv" / "bin")
        assert str(PurePosixPath(program).parent) == venv_bin, unit
        path = next(value for value in entries["Environment"] if value.startswith("PATH="))
        assert path.removeprefix("PATH=").split(":")[0] == venv_bin, unit


def test_systemd_units_restart_on_failure_as_a_user_of_their_own_with_the_settings_file() -> None:
    for unit in UNITS.values():
        entries = unit_entries(unit)
        assert entries["Restart"] in (["always"], ["on-failure"]), unit
        assert entries["User"] not in ([], ["root"]), unit
        assert entries["EnvironmentFile"] == ["/etc/tasklift/tasklift.env"], unit
        # Wrong settings (config/startup.py) are not restarted in a loop, by systemd or by config.supervise.
        assert entries["RestartPreventExitStatus"] == [str(EXIT_SETTINGS)], unit
    assert EXIT_SETTINGS == SUPERVISE_EXIT_SETTINGS == 78


def test_a_stopping_worker_is_given_longer_than_a_run_may_take() -> None:
    """systemd SIGKILLs a unit still running after TimeoutStopSec: a worker finishing its run on SIGTERM must get
    past the run's soft and hard time limits first, and only its main process gets the SIGTERM (KillMode=mixed),
    which waits for its pool's runs."""
    worker = unit_entries(UNITS["worker"])
    (timeout,) = worker["TimeoutStopSec"]
    assert settings.CELERY_TASK_SOFT_TIME_LIMIT == 540  # the defaults, which this unit is written for
    assert seconds(timeout) > settings.CELERY_TASK_TIME_LIMIT > settings.CELERY_TASK_SOFT_TIME_LIMIT
    assert worker["KillMode"] == ["mixed"]


def test_worker_instances_on_one_machine_have_node_names_of_their_own() -> None:
    assert "CELERY_WORKER_HOSTNAME=worker%i@%H" in unit_entries(UNITS["worker"])["Environment"]


def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def test_compose_runs_the_procfile_commands_with_one_beat_and_workers_to_scale() -> None:
    services = compose()["services"]
    for process in UNITS:
        assert services[process]["command"] == shlex.split(procfile_commands()[process]), process
    assert services["beat"]["deploy"]["replicas"] == 1
    assert services["worker"]["deploy"]["replicas"] >= 2
    assert seconds(services["worker"]["stop_grace_period"]) > settings.CELERY_TASK_TIME_LIMIT


def test_compose_migrates_once_before_web_worker_and_beat_start() -> None:
    services = compose()["services"]
    command = services["migrate"]["command"]
    assert command[:2] == ["sh", "-c"] and command[2].endswith("exec python manage.py migrate --noinput"), command
    assert services["migrate"]["restart"] == "no"
    for process in UNITS:
        assert services[process]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
        assert services[process]["environment"]["TASKLIFT_MODE"] == "production"


def test_compose_agrees_with_the_runbook_whatever_its_env_file_says() -> None:
    """Issue 35: with the runbook's .env, GUNICORN_BIND=127.0.0.1:8000 bound the container's loopback (the
    published port reached nothing), STATIC_ROOT hid the image's collected files (every page a 500), there were
    no healthchecks, and each container kept its metrics to itself. compose's `environment` is over `env_file`."""
    services = compose()["services"]
    image_env = dict(
        word.split("=", 1) for keyword, rest in dockerfile() if keyword == "ENV" for word in rest.split() if "=" in word
    )
    for process in UNITS:
        environment = services[process]["environment"]
        host, _, port = environment["GUNICORN_BIND"].rpartition(":")
        assert host == "0.0.0.0" and services["web"]["ports"] == [f"127.0.0.1:{port}:{port}"], process
        assert environment["STATIC_ROOT"] == image_env["STATIC_ROOT"], process  # where collectstatic wrote
        # One metrics folder, a volume every process writes to, emptied before any starts (by `migrate`).
        assert f"metrics:{environment['PROMETHEUS_MULTIPROC_DIR']}" in services[process]["volumes"], process
        check = services[process]["healthcheck"]["test"]
        assert check == ["CMD", "python", "-m", "config.healthcheck", process], process
    assert "python manage.py metrics_clear &&" in services["migrate"]["command"][2]
    assert "metrics" in compose()["volumes"]
    healthcheck = [rest for keyword, rest in dockerfile() if keyword == "HEALTHCHECK"]
    assert len(healthcheck) == 1 and healthcheck[0].endswith('CMD ["python", "-m", "config.healthcheck", "web"]')
    runs = " ".join(rest for keyword, rest in dockerfile() if keyword == "RUN")
    assert f"install -d -o tasklift -g tasklift /var/lib/tasklift {image_env['TASKLIFT_LOCAL_DIR']}/metrics" in runs


def test_compose_redis_keeps_an_append_only_file_on_a_volume() -> None:
    redis = compose()["services"]["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert any(volume.endswith(":/data") for volume in redis["volumes"])


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, continuation lines joined, comments left out."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    instructions = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def test_the_image_serves_the_procfile_web_command_as_a_user_who_is_not_root() -> None:
    instructions = dockerfile()
    (base,) = [rest for keyword, rest in instructions if keyword == "FROM"]
    assert re.fullmatch(r"python:3\.1[12]-slim(-\w+)?", base)
    (cmd,) = [rest for keyword, rest in instructions if keyword == "CMD"]
    assert json.loads(cmd) == shlex.split(procfile_commands()["web"])
    users = [rest for keyword, rest in instructions if keyword == "USER"]
    assert users and users[-1] not in ("root", "0")
    # The Procfile's promise: from the project root, with the virtualenv's bin first on PATH.
    assert ("WORKDIR", "/app") in instructions
    env = [word for keyword, rest in instructions if keyword == "ENV" for word in rest.split()]
    assert "PATH=/app/.venv/bin:$PATH" in env


def test_the_image_installs_the_lock_without_the_dev_group_and_collects_static_files() -> None:
    runs = [rest for keyword, rest in dockerfile() if keyword == "RUN"]
    assert any("pip install" in run and "uv" in run for run in runs)
    assert any("uv sync --frozen --no-dev" in run for run in runs)
    collect = next(run for run in runs if "collectstatic --noinput" in run)
    assert "TASKLIFT_MODE=production" in collect  # the manifest production serves, not development's plain copy
    # What the Procfile runs is a main dependency, installed without the dev group (or the virtualenv's python).
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.match(r"[A-Za-z0-9_.-]+", requirement)[0].lower() for requirement in project["dependencies"]}  # type: ignore[index]
    names.add("python")
    for command in procfile_commands().values():
        assert shlex.split(command)[0] in names, command


@pytest.mark.slow  # it starts a process (tests/slow.py)
def test_the_images_build_time_placeholders_pass_productions_checks_at_start() -> None:
    """The image's collectstatic runs production's settings on placeholders: each must be one production accepts
    (every encryption key is checked at start), or the build fails."""
    collect = next(rest for keyword, rest in dockerfile() if keyword == "RUN" and "collectstatic --noinput" in rest)
    words = shlex.split(collect.split("python manage.py", 1)[0])
    placeholders = dict(word.split("=", 1) for word in words)
    environment = {k: v for k, v in os.environ.items() if k != "OAUTHLIB_INSECURE_TRANSPORT"}
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**environment, "DJANGO_SETTINGS_MODULE": "config.settings", **placeholders},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_runbook_steps_are_a_numbered_list_of_shell_commands() -> None:
    """docs/deploy.md's "## Steps" is what an operator and benchmarks/production.py both follow."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    steps = text.split("\n## Steps\n", 1)[1].split("\n## ", 1)[0]
    commands = "\n".join(re.findall(r"```sh\n(.*?)```", steps, flags=re.S))
    for needed in (
        "python3 -m pip install",
        "python3 -m uv sync --frozen",
        "manage.py migrate",
        "manage.py collectstatic --noinput",
        "manage.py createsuperuser --noinput",
    ):
        assert needed in commands, needed
    order = [commands.index(word) for word in ("migrate", "collectstatic", "createsuperuser", "systemctl enable")]
    assert order == sorted(order)


def test_the_changelog_has_a_section_with_upgrade_notes_for_the_version_pyproject_names() -> None:
    """Issue 35: nothing named a version. pyproject.toml's is the one; CHANGELOG.md has its section, with the
    upgrade notes an operator reads before an upgrade, and config/version.py reads the same."""
    from config.version import version

    named = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version() == named
    changelog = (ROOT / "CHANGELOG.md").read_text()
    section = re.search(
        rf"^## \[{re.escape(named)}\] - (Unreleased|\d{{4}}-\d{{2}}-\d{{2}})$(.*?)(?=^## |\Z)", changelog, re.M | re.S
    )
    assert section, f"no section for {named} in CHANGELOG.md"
    assert "### Upgrade notes" in section[2]


def test_the_production_benchmark_sets_the_runbooks_ca_setting_and_none_it_says_to_leave_unset(tmp_path: Path) -> None:
    """Issue 35, point 7: the benchmark deploys as docs/deploy.md says; the names come from the runbook itself."""
    from types import SimpleNamespace
    from typing import Any, cast

    runbook = (ROOT / "docs" / "deploy.md").read_text()
    sentence = re.search(r"Leave ((?:`[A-Z0-9_]+`(?:, | and )?)+) unset", runbook)
    assert sentence is not None, "docs/deploy.md no longer says which CA variables to leave unset"
    unset = set(re.findall(r"`([A-Z0-9_]+)`", sentence.group(1)))
    assert unset >= {"HTTPLIB2_CA_CERTS", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"}
    from benchmarks.production import deployment_env

    cert = tmp_path / "tls-cert.pem"
    env, _ = deployment_env(
        scratch=tmp_path,
        postgres=cast(Any, SimpleNamespace(url="postgresql://postgres@127.0.0.1:5/tasklift")),
        redis=cast(Any, SimpleNamespace(url="redis://127.0.0.1:6/0")),
        sandbox=cast(Any, SimpleNamespace(cert_file=cert, tls_url="https://127.0.0.1:7")),
        web_port=8,
    )
    assert env["SANDBOX_CA_BUNDLE"] == str(cert)
    assert not unset & env.keys(), unset & env.keys()
