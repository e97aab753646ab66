"""Deployment files reference only commands, files and settings that exist."""

from __future__ import annotations

import copy
import json
import posixpath
import re
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema
import typer.main
import yaml
from pydantic import AliasChoices, SecretStr
from typer.testing import CliRunner

from nexus.access.policy import Principal, Venue, decide, load_policies, parse_policies
from nexus.adapters.celery_broker import QUEUES
from nexus.cli.app import app
from nexus.hooks.loader import load_hooks
from nexus.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
COMPOSE_SCHEMA = ROOT / "tests" / "fixtures" / "compose-spec.json"
# What each serving command answers on, besides its port: the probes may use only these.
PROBE_PATHS = {"api": {"/healthz", "/readyz"}, "flower": {"/healthcheck"}}
# The option naming each serving command's listening address (it must be every address).
ADDRESS_OPTION = {"api": "host", "flower": "address"}
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
SOFT_SHUTDOWN = re.compile(r"^worker\.soft_shutdown_timeout=(\d+(?:\.\d+)?)$")
HOOKS_SYNC = ["hooks", "sync"]
# The settings naming files a deployment provides (its hooks and access policies), and the
# processes given them: the workers route and run hooks, the API takes messages in and
# registers the hooks when the sync asks it to. By compose service, and by Kubernetes
# workload (its first argument). The sync itself reads neither: it asks the API.
MOUNTED_SETTINGS = ("NEXUS_HOOKS_DIR", "NEXUS_POLICIES")
COMPOSE_READERS = ("api", "worker")
KUBERNETES_READERS = ("api", "worker")
# A bind mount whose host path the environment may change: ${VARIABLE:-default}:TARGET[:ro]
COMPOSE_BIND_MOUNT = re.compile(
    r"^\$\{[A-Z_]+:-(?P<default>[^}]+)\}:(?P<target>[^:]+)(?P<ro>:ro)?$"
)


def _cli_has(command: list[str]) -> bool:
    """True when `nexus COMMAND --help` works, i.e. the command exists as written."""
    words = [word for word in command if not word.startswith("-")]
    return CliRunner().invoke(app, [*words, "--help"]).exit_code == 0


def _cli_command(args: list[str]) -> Any:
    """The click command `nexus ARGS` runs, following groups (`db upgrade`); None if none.

    Duck-typed: recent Typer releases vendor their own copy of click, older ones use click.
    """
    command: Any = typer.main.get_command(app)
    for word in args:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            break
        command = subcommands.get(word)
        if command is None:
            return None
    if getattr(command, "commands", None) is not None and not command.invoke_without_command:
        return None  # a bare group only prints its help
    return command


def _runs(args: list[str]) -> bool:
    """True when `nexus ARGS` is a command of the CLI."""
    return _cli_command(args) is not None


def _option(args: list[str], name: str) -> str | None:
    """The value given to --NAME in ARGS (as `--NAME VALUE` or `--NAME=VALUE`)."""
    flag = f"--{name}"
    for index, word in enumerate(args):
        if word == flag and index + 1 < len(args):
            return args[index + 1]
        if word.startswith(f"{flag}="):
            return word.split("=", 1)[1]
    return None


def _parameter_default(command: Any, name: str) -> Any:
    for parameter in command.params:
        if parameter.name == name:
            return parameter.default
    raise AssertionError(f"{command.name} has no {name} parameter")


def _listening_port(args: list[str]) -> int | None:
    """The port `nexus ARGS` listens on (the --port given, else the CLI's default)."""
    command = _cli_command(args)
    assert command is not None, f"nexus {' '.join(args)} does not exist"
    if not any(parameter.name == "port" for parameter in command.params):
        return None
    given = _option(args, "port")
    return int(given) if given is not None else int(_parameter_default(command, "port"))


def _soft_shutdown_s(args: list[str]) -> float:
    found = [float(m.group(1)) for word in args if (m := SOFT_SHUTDOWN.match(word))]
    assert found, f"nexus {' '.join(args)} sets no worker.soft_shutdown_timeout"
    return found[0]


def _env_names() -> dict[str, str]:
    """Each setting's field name -> the environment variable that sets it."""
    names: dict[str, str] = {}
    for field_name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            first = alias.choices[0]
            assert isinstance(first, str)
            names[field_name] = first
        else:
            names[field_name] = f"NEXUS_{field_name.upper()}"
    return names


def _secret_env_names() -> set[str]:
    """The variables of SecretStr settings, and the database URL (it holds a password)."""
    names = _env_names()
    secret = {
        names[field_name]
        for field_name, field in Settings.model_fields.items()
        if field.annotation is SecretStr or SecretStr in typing.get_args(field.annotation)
    }
    return secret | {names["database_url"]}


def _assert_known_settings(variables: Iterable[str], where: str) -> None:
    known = set(_env_names().values())
    for variable in variables:
        if variable.startswith(("NEXUS_", "ANTHROPIC_")):
            assert variable in known, f"{where}: {variable} is not a setting"


# --- docker-compose.yml ---------------------------------------------------------------


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def _nexus_services() -> dict[str, dict[str, Any]]:
    """The services that run the Nexus image (its entrypoint is `nexus`)."""
    services: dict[str, dict[str, Any]] = _compose()["services"]
    return {
        name: s for name, s in services.items() if "build" in s or s.get("image") == "nexus:local"
    }


def _as_2021_compose(compose: dict[str, Any]) -> dict[str, Any]:
    """COMPOSE in the form the vendored 2021 schema knows (tests/fixtures/README.md): the
    two later additions docker-compose.yml uses are checked here, then rewritten."""
    document = copy.deepcopy(compose)
    name = document.pop("name", None)
    assert name is None or (isinstance(name, str) and re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name))
    for service_name, service in document["services"].items():
        env_files = service.get("env_file")
        if not isinstance(env_files, list):
            continue
        paths: list[Any] = []
        for entry in env_files:
            if isinstance(entry, dict):
                assert set(entry) <= {"path", "required"}, f"{service_name}: env_file {entry}"
                assert isinstance(entry["path"], str)
                assert isinstance(entry.get("required", True), bool)
                paths.append(entry["path"])
            else:
                paths.append(entry)
        service["env_file"] = paths
    return document


def _compose_schema_errors(compose: dict[str, Any]) -> list[str]:
    schema = json.loads(COMPOSE_SCHEMA.read_text())
    validator = jsonschema.Draft201909Validator(schema)  # the draft its $schema names
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(_as_2021_compose(compose))
    ]


def _published_container_port(entry: str | int | dict[str, Any]) -> int:
    if isinstance(entry, dict):
        return int(entry["target"])
    return int(str(entry).rsplit(":", 1)[-1].split("/")[0])


def _duration_s(value: str) -> float:
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", value)
    assert parts, f"not a duration: {value}"
    assert "".join(number + unit for number, unit in parts) == value, value
    return sum(float(number) * units[unit] for number, unit in parts)


def test_the_hooks_sync_step_runs_a_real_command() -> None:
    assert _cli_command(HOOKS_SYNC) is not None


def test_the_command_check_can_fail() -> None:
    assert not _cli_has(["no-such-command"])
    assert not _cli_has(["db", "downgrade-everything"])
    assert _cli_command(["no-such-command"]) is None
    assert _cli_command(["db", "downgrade-everything"]) is None
    assert _cli_command(["db"]) is None
    command = _cli_command(["db", "upgrade"])
    assert command is not None and command.name == "upgrade"


def test_every_nexus_service_runs_a_real_cli_command() -> None:
    services = _compose()["services"]
    nexus_services = {name: s for name, s in services.items() if "build" in s}
    assert {"migrate", "doctor"} <= set(nexus_services)
    for name, service in nexus_services.items():
        command = service["command"]
        assert _cli_has(command), f"{name}: nexus {command}"


def test_compose_runs_every_process_of_a_deployment() -> None:
    commands = {name: s["command"] for name, s in _nexus_services().items()}
    assert commands["migrate"] == ["db", "upgrade"]
    for role in ("api", "worker", "beat", "flower"):
        assert commands[role][0] == role, f"{role} runs nexus {commands[role]}"
    for name, command in commands.items():
        assert isinstance(command, list), f"{name}: give the command as a list"
        assert _runs(command), f"{name}: nexus {command} does not exist"


def test_compose_validates_against_the_compose_spec_schema() -> None:
    assert _compose_schema_errors(_compose()) == []


def test_the_schema_check_can_fail() -> None:
    compose = _compose()
    compose["services"]["api"]["stop_grace_periodx"] = "10s"
    compose["services"]["worker"]["depends_on"]["migrate"]["condition"] = "service_done"
    errors = _compose_schema_errors(compose)
    assert any("stop_grace_periodx" in error for error in errors), errors
    assert any("service_done" in error for error in errors), errors


def test_compose_dependencies_name_existing_services() -> None:
    services = _compose()["services"]
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown {dependency}"


def test_compose_waits_for_migrations() -> None:
    for name, service in _nexus_services().items():
        if name in {"migrate", "flower"}:
            continue  # flower reads only the broker
        condition = service["depends_on"]["migrate"]["condition"]
        assert condition == "service_completed_successfully", name
    assert _compose()["services"]["migrate"]["restart"] == "no"


def test_compose_environment_uses_known_settings() -> None:
    for name, service in _compose()["services"].items():
        _assert_known_settings(list(service.get("environment", {})), f"compose {name}")


def test_compose_serving_ports_and_health_checks_match_the_commands() -> None:
    services = _nexus_services()
    for name, service in services.items():
        command: list[str] = service["command"]
        port = _listening_port(command)
        published = [_published_container_port(entry) for entry in service.get("ports", [])]
        if port is None:
            assert published == [], f"{name} publishes a port nexus {command[0]} never opens"
            continue
        assert published == [port], f"{name} listens on {port}, publishes {published}"
        assert _option(command, ADDRESS_OPTION[command[0]]) == "0.0.0.0", f"{name}: loopback"
        test = " ".join(service["healthcheck"]["test"])
        assert "python" in test and "urllib" in test  # the image has no curl
        urls = re.findall(r"http://127\.0\.0\.1:(\d+)(/[\w/]*)", test)
        assert urls, f"{name}: the health check fetches no local URL"
        for url_port, path in urls:
            assert int(url_port) == port, f"{name}: health check on {url_port}, not {port}"
            assert path in PROBE_PATHS[command[0]], f"{name}: {path}"
    assert services["api"]["healthcheck"]["test"][-1].count("/healthz") == 1


def test_compose_workers_scale_and_stop_gracefully() -> None:
    worker = _nexus_services()["worker"]
    assert "container_name" not in worker and "ports" not in worker  # --scale worker=N
    assert worker["environment"]["REMAP_SIGTERM"] == "SIGQUIT"  # SIGTERM: soft shutdown
    grace = _duration_s(worker["stop_grace_period"])
    assert grace > _soft_shutdown_s(worker["command"]), "SIGKILL would cut the soft shutdown"
    assert worker["environment"]["NEXUS_REDIS_URL"]  # the merge kept the shared settings


def test_compose_runs_one_beat() -> None:
    beat = _nexus_services()["beat"]
    assert beat["deploy"]["replicas"] == 1
    assert "scale" not in beat


def test_compose_flower_takes_basic_auth_from_the_environment() -> None:
    flower = _nexus_services()["flower"]
    environment = flower["environment"]
    assert "NEXUS_FLOWER_BASIC_AUTH" in environment
    assert environment["NEXUS_FLOWER_BASIC_AUTH"] is None  # passed through, never a default
    assert set(flower["depends_on"]) == {"redis"}


def test_compose_redis_never_evicts() -> None:
    command = _compose()["services"]["redis"]["command"]
    assert command[command.index("--maxmemory-policy") + 1] == "noeviction"
    assert command[command.index("--appendonly") + 1] == "yes"


def _compose_mounts(service: dict[str, Any]) -> dict[str, tuple[Path, bool]]:
    """Each bind mount's container path -> (its host path by default, read-only)."""
    mounts: dict[str, tuple[Path, bool]] = {}
    for entry in service.get("volumes", []):
        mount = COMPOSE_BIND_MOUNT.match(entry)
        assert mount is not None, f"{entry}: give the host path as ${{VARIABLE:-default}}"
        mounts[mount["target"]] = (ROOT / mount["default"], mount["ro"] is not None)
    return mounts


def _assert_the_default_files_work(hooks_dir: Path, policies: Path) -> None:
    report = load_hooks(hooks_dir)
    assert hooks_dir.is_dir() and report.hooks and not report.problems, report.problems
    assert load_policies(str(policies))


def test_compose_mounts_hooks_and_policies_where_the_settings_point() -> None:
    services = _nexus_services()
    for name in COMPOSE_READERS:
        service = services[name]
        environment, mounts = service["environment"], _compose_mounts(service)
        for variable in MOUNTED_SETTINGS:
            assert environment[variable] in mounts, f"{name}: nothing mounted at {variable}"
        hooks_dir, hooks_read_only = mounts[environment["NEXUS_HOOKS_DIR"]]
        policies, policies_read_only = mounts[environment["NEXUS_POLICIES"]]
        assert hooks_read_only and policies_read_only, name
        _assert_the_default_files_work(hooks_dir, policies)
    for name, service in services.items():  # a setting naming a file the container lacks
        named = {v for k, v in service.get("environment", {}).items() if k in MOUNTED_SETTINGS}
        assert named <= set(_compose_mounts(service)), f"{name}: {named}"


def test_compose_syncs_the_hooks_after_migrating_and_before_the_workers() -> None:
    services = _nexus_services()
    sync = services["hooks-sync"]
    assert sync["command"] == HOOKS_SYNC
    assert sync["restart"] == "no"
    assert sync["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    worker_waits_for = services["worker"]["depends_on"]["hooks-sync"]
    assert worker_waits_for["condition"] == "service_completed_successfully"


def test_compose_syncs_the_hooks_through_the_healthy_api() -> None:
    """`nexus hooks sync` asks the API, which registers the hooks mounted into it: the sync
    starts once the API answers its health check, and reaches it by its service name."""
    services = _nexus_services()
    sync, api = services["hooks-sync"], services["api"]
    assert sync["depends_on"]["api"]["condition"] == "service_healthy"
    assert api["healthcheck"]["test"], "service_healthy needs the API to have a health check"
    port = _listening_port(api["command"])
    assert sync["environment"]["NEXUS_API_URL"] == f"http://api:{port}"
    assert "NEXUS_DATABASE_URL" not in sync["environment"]  # no database settings needed
    # NEXUS_API_TOKEN comes from .env, where NEXUS_API_TOKENS is set too.
    assert {"path": ".env", "required": False} in sync["env_file"]
    assert "NEXUS_HOOKS_DIR" in api["environment"] and api["volumes"]


def test_the_packaged_policy_files_are_the_built_in_defaults() -> None:
    """A deployment behaves as an unconfigured Nexus until its policy file is edited."""
    for path in (ROOT / "deploy" / "policies.yaml", KUBERNETES / "policies" / "policies.yaml"):
        assert load_policies(str(path)) == load_policies(None), path


def test_the_example_policies_in_the_comments_are_valid() -> None:
    text = (ROOT / "deploy" / "policies.yaml").read_text()
    commented = [line[2:] for line in text.splitlines() if line.startswith(("# - ", "#   "))]
    examples = parse_policies("\n".join(commented), source="the commented examples")
    assert [policy.name for policy in examples] == [
        "team-channel",
        "sms-from-the-owner",
        "no-sms-from-anyone-else",
    ]


def test_the_example_sms_rules_admit_the_owner_only() -> None:
    """Every sender has an entity from their first message, so a first-time texter is a
    `known` principal, not `unknown`: the example must deny them, not only senderless events."""
    text = (ROOT / "deploy" / "policies.yaml").read_text()
    commented = [line[2:] for line in text.splitlines() if line.startswith(("# - ", "#   "))]
    rules = [*parse_policies("\n".join(commented)), *load_policies(None)]
    sms = Venue(platform="twilio", peer_kind="dm", peer_id="+15550100")
    stranger = decide(rules, Principal(type="known", entity_id="ent_stranger"), sms)
    owner = decide(rules, Principal(type="owner", entity_id="ent_owner"), sms)
    assert (stranger.allowed, stranger.policy) == (False, "no-sms-from-anyone-else")
    assert (owner.allowed, owner.session_key) == (True, "dm:ent_owner")


# --- deploy/env.example, deploy/Dockerfile --------------------------------------------


def test_env_example_lists_every_setting() -> None:
    text = (ROOT / "deploy" / "env.example").read_text()
    listed = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", text, flags=re.MULTILINE))
    expected = set(_env_names().values())
    assert expected <= listed, sorted(expected - listed)


def test_dockerfile_copies_paths_that_exist() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    for line in dockerfile.splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            *sources, _destination = line.split()[1:]
            for source in sources:
                assert (ROOT / source).exists(), f"Dockerfile copies missing {source}"
    assert "USER nexus" in dockerfile  # never root


def _final_stage(dockerfile: str) -> list[str]:
    """The lines of the image's last stage, the one that runs."""
    lines = dockerfile.splitlines()
    start = max(index for index, line in enumerate(lines) if line.startswith("FROM "))
    return lines[start:]


def test_the_image_ships_the_example_hooks_where_nexus_looks() -> None:
    stage = _final_stage((ROOT / "deploy" / "Dockerfile").read_text())
    copies = {
        line.split()[-1]: line.split()[1:-1]
        for line in stage
        if line.startswith("COPY ") and "--from" not in line
    }
    environment = dict(
        line.removeprefix("ENV ").split("=", 1) for line in stage if line.startswith("ENV ")
    )
    hooks_dir = environment["NEXUS_HOOKS_DIR"]
    assert copies.get(hooks_dir) == ["hooks"], f"nothing copies hooks/ to {hooks_dir}"
    report = load_hooks(ROOT / "hooks")
    assert report.hooks and not report.problems, report.problems


# --- deploy/kubernetes ----------------------------------------------------------------


def _manifest_files() -> list[Path]:
    return sorted(p for p in KUBERNETES.glob("*.yaml") if p.name != "kustomization.yaml")


def _manifests() -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = []
    for path in _manifest_files():
        for document in yaml.safe_load_all(path.read_text()):
            if document is None:
                continue
            assert isinstance(document, dict), path
            assert {"apiVersion", "kind", "metadata"} <= set(document), path
            documents.append(document)
    return documents


def _of_kind(kind: str) -> list[dict[str, Any]]:
    return [m for m in _manifests() if m["kind"] == kind]


def _workloads() -> list[dict[str, Any]]:
    return [m for m in _manifests() if m["kind"] in {"Deployment", "StatefulSet", "Job"}]


def _pod(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def _containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    pod = _pod(workload)
    return [*pod.get("initContainers", []), *pod["containers"]]


def _workload_running(role: str) -> dict[str, Any]:
    found = [w for w in _workloads() if _pod(w)["containers"][0]["args"][0] == role]
    assert len(found) == 1, f"{len(found)} workloads run nexus {role}"
    return found[0]


def _container_port(container: dict[str, Any], port: int | str) -> int:
    """PORT as a number: a named port is looked up among the container's ports."""
    if isinstance(port, int):
        return port
    named = [p["containerPort"] for p in container.get("ports", []) if p.get("name") == port]
    assert named, f"{container['name']} has no port named {port}"
    return int(named[0])


def test_kubernetes_manifests_parse() -> None:
    kinds = {m["kind"] for m in _manifests()}
    expected = {"Deployment", "Service", "Job", "ConfigMap", "Secret", "ScaledObject"}
    assert expected <= kinds


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    resources = kustomization["resources"]
    assert len(resources) == len(set(resources))
    assert set(resources) == {p.name for p in _manifest_files()}


def test_every_container_runs_a_real_command_of_one_image() -> None:
    images = set()
    for workload in _workloads():
        for container in _containers(workload):
            where = f"{workload['metadata']['name']}/{container['name']}"
            assert "command" not in container, f"{where}: the entrypoint is nexus; use args"
            args = container["args"]
            assert _runs(args), f"{where}: nexus {args} does not exist"
            images.add(container["image"])
    assert len(images) == 1, images
    roles = {_pod(w)["containers"][0]["args"][0] for w in _workloads()}
    assert {"api", "worker", "beat", "flower", "db"} <= roles


def test_kubernetes_ports_and_probes_match_the_commands() -> None:
    for workload in _workloads():
        for container in _containers(workload):
            where = f"{workload['metadata']['name']}/{container['name']}"
            args = container["args"]
            port = _listening_port(args)
            opened = [int(p["containerPort"]) for p in container.get("ports", [])]
            probes = [container[k] for k in PROBES if k in container]
            if port is None:
                assert opened == [] and probes == [], f"{where}: nexus {args[0]} serves nothing"
                continue
            assert opened == [port], f"{where} listens on {port}, declares {opened}"
            assert _option(args, ADDRESS_OPTION[args[0]]) == "0.0.0.0", f"{where}: loopback"
            assert probes, f"{where} has no probes"
            for probe in probes:
                get = probe["httpGet"]
                assert _container_port(container, get["port"]) == port, where
                assert get["path"] in PROBE_PATHS[args[0]], f"{where}: {get['path']}"


def test_api_probes_liveness_and_readiness() -> None:
    api = _pod(_workload_running("api"))["containers"][0]
    assert api["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_services_reach_a_port_their_pods_listen_on() -> None:
    services = _of_kind("Service")
    assert {s["metadata"]["name"] for s in services} >= {"nexus-api", "nexus-flower"}
    for service in services:
        selector = service["spec"]["selector"]
        targets = [
            w
            for w in _workloads()
            if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert len(targets) == 1, f"{service['metadata']['name']} selects {len(targets)}"
        container = _pod(targets[0])["containers"][0]
        for port in service["spec"]["ports"]:
            target = _container_port(container, port.get("targetPort", port["port"]))
            assert target == _listening_port(container["args"]), service["metadata"]["name"]


def test_pods_run_as_non_root_with_resources() -> None:
    for workload in _workloads():
        pod = _pod(workload)
        name = workload["metadata"]["name"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        # The image's USER is a name; runAsNonRoot can only be checked against a number.
        assert isinstance(pod["securityContext"]["runAsUser"], int), name
        assert pod["securityContext"]["runAsUser"] != 0, name
        for container in _containers(workload):
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]), f"{name}: requests"
            assert {"cpu", "memory"} <= set(resources["limits"]), f"{name}: limits"
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, name


def test_beat_runs_exactly_once() -> None:
    beat = _workload_running("beat")
    assert beat["kind"] == "Deployment"
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}


def test_workers_stop_gracefully() -> None:
    worker = _workload_running("worker")
    container = _pod(worker)["containers"][0]
    env = {item["name"]: item.get("value") for item in container.get("env", [])}
    assert env.get("REMAP_SIGTERM") == "SIGQUIT"  # SIGTERM starts the soft shutdown
    grace = _pod(worker)["terminationGracePeriodSeconds"]
    assert grace > _soft_shutdown_s(container["args"]), "SIGKILL would cut the soft shutdown"
    assert "replicas" not in worker["spec"]  # KEDA's to set


def test_keda_scales_the_workers_on_their_queues() -> None:
    (scaled,) = _of_kind("ScaledObject")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    target = scaled["spec"]["scaleTargetRef"]
    assert target.get("kind", "Deployment") == "Deployment"
    assert target["name"] == _workload_running("worker")["metadata"]["name"]
    assert scaled["spec"]["minReplicaCount"] >= 1  # beat's ticks need a worker
    triggers = scaled["spec"]["triggers"]
    assert all(trigger["type"] == "redis" for trigger in triggers)
    lists = [trigger["metadata"]["listName"] for trigger in triggers]
    assert sorted(lists) == sorted({"events", "sessions", "delivery"})
    assert set(lists) <= set(QUEUES)
    worker_args = _pod(_workload_running("worker"))["containers"][0]["args"]
    queue_flags = [w for w in worker_args if w.split("=")[0] in {"-Q", "--queues"}]
    assert queue_flags == [], "the scaled workers must consume every queue"


def test_config_and_secret_hold_real_settings_in_the_right_place() -> None:
    (config,) = _of_kind("ConfigMap")
    (secret,) = _of_kind("Secret")
    config_keys, secret_keys = set(config["data"]), set(secret["stringData"])
    known = set(_env_names().values())
    assert config_keys <= known, sorted(config_keys - known)
    assert secret_keys <= known, sorted(secret_keys - known)
    assert secret_keys == _secret_env_names(), sorted(secret_keys ^ _secret_env_names())
    assert not config_keys & _secret_env_names(), sorted(config_keys & _secret_env_names())
    assert all(isinstance(value, str) for value in config["data"].values())
    for workload in _workloads():
        for container in _containers(workload):
            sources = container["envFrom"]
            assert {"configMapRef": {"name": config["metadata"]["name"]}} in sources
            assert {"secretRef": {"name": secret["metadata"]["name"]}} in sources
            names = [item["name"] for item in container.get("env", [])]
            _assert_known_settings(names, f"{workload['metadata']['name']}/{container['name']}")


def test_the_secret_check_tells_secrets_from_settings() -> None:
    secret = _secret_env_names()
    assert {"NEXUS_DATABASE_URL", "ANTHROPIC_API_KEY", "NEXUS_API_TOKENS"} <= secret
    assert {"NEXUS_FLOWER_BASIC_AUTH", "NEXUS_SMTP_PASSWORD"} <= secret
    assert not {"NEXUS_REDIS_URL", "NEXUS_DISCORD_PUBLIC_KEY", "NEXUS_BROKER_URL"} & secret


def _generated_config_maps() -> dict[str, dict[str, Path]]:
    """Each ConfigMap kustomize generates -> its keys, each with the file it holds."""
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    generated: dict[str, dict[str, Path]] = {}
    for generator in kustomization.get("configMapGenerator", []):
        files: dict[str, Path] = {}
        for entry in generator.get("files", []):
            key, _, path = entry.rpartition("=")
            files[key or posixpath.basename(path)] = KUBERNETES / path
        generated[generator["name"]] = files
    return generated


def _volume_mounts(workload: dict[str, Any]) -> dict[str, tuple[str, str | None, bool]]:
    """The first container's mounts: path -> (its ConfigMap, the key, read-only); the key
    is None for a whole ConfigMap mounted as a directory."""
    pod = _pod(workload)
    config_maps = {v["name"]: v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v}
    return {
        mount["mountPath"]: (
            config_maps[mount["name"]],
            mount.get("subPath"),
            mount.get("readOnly", False),
        )
        for mount in pod["containers"][0].get("volumeMounts", [])
        if mount["name"] in config_maps
    }


def _env(container: dict[str, Any]) -> dict[str, str | None]:
    return {item["name"]: item.get("value") for item in container.get("env", [])}


def test_kustomization_generates_the_hooks_and_policies_config_maps() -> None:
    generated = _generated_config_maps()
    assert {"nexus-hooks", "nexus-policies"} <= set(generated)
    for files in generated.values():
        for path in files.values():
            # kustomize reads no file outside its directory
            assert path.resolve().is_relative_to(KUBERNETES), path
            assert path.is_file(), path
    hooks_dir = KUBERNETES / "hooks"
    listed = {path.name for path in generated["nexus-hooks"].values()}
    assert listed == {path.name for path in hooks_dir.glob("*.py")}, "list every hook file"
    assert all(key.endswith(".py") for key in generated["nexus-hooks"])
    assert not load_hooks(hooks_dir).problems
    assert set(generated["nexus-policies"]) == {"policies.yaml"}


def test_pods_mount_hooks_and_policies_where_the_settings_point() -> None:
    generated = _generated_config_maps()
    for role in KUBERNETES_READERS:
        workload = _workload_running(role)
        env, mounts = _env(_pod(workload)["containers"][0]), _volume_mounts(workload)
        where = workload["metadata"]["name"]
        hooks_dir, policies = env["NEXUS_HOOKS_DIR"], env["NEXUS_POLICIES"]
        assert hooks_dir is not None and policies is not None, where
        assert mounts.get(hooks_dir) == ("nexus-hooks", None, True), f"{where}: {hooks_dir}"
        # The one file, at the path the setting names, wherever the ConfigMap keeps it.
        config_map, key, read_only = mounts.get(policies, ("", None, False))
        assert config_map == "nexus-policies" and read_only, f"{where}: {policies}"
        assert key in generated["nexus-policies"], f"{where}: {key}"
    # Set beside their mounts, never for every container through the shared ConfigMap.
    (config,) = _of_kind("ConfigMap")
    assert not set(MOUNTED_SETTINGS) & set(config["data"])
    for workload in _workloads():  # a setting naming a file the container lacks
        mounts = _volume_mounts(workload)
        env = _env(_pod(workload)["containers"][0])
        named = {env[name] for name in MOUNTED_SETTINGS if name in env}
        assert named <= set(mounts), f"{workload['metadata']['name']}: {named}"


_COMPONENT = "app.kubernetes.io/component"


def test_a_job_syncs_the_hooks_like_the_migrations() -> None:
    sync, migrate = _workload_running("hooks"), _workload_running("db")
    assert sync["kind"] == migrate["kind"] == "Job"
    assert _pod(sync)["containers"][0]["args"] == HOOKS_SYNC
    # Through the API's Service, with the token from the Secret that holds NEXUS_API_TOKENS.
    [service] = [s for s in _of_kind("Service") if s["spec"]["selector"].get(_COMPONENT) == "api"]
    [port] = service["spec"]["ports"]
    container = _pod(sync)["containers"][0]
    url = f"http://{service['metadata']['name']}:{port['port']}"
    assert _env(container)["NEXUS_API_URL"] == url
    (secret,) = _of_kind("Secret")
    assert {"NEXUS_API_TOKEN", "NEXUS_API_TOKENS"} <= set(secret["stringData"])
    assert {"secretRef": {"name": secret["metadata"]["name"]}} in container["envFrom"]
    assert _pod(sync)["restartPolicy"] == "Never"
    # It may start before the migrations are done: it fails and is retried until they are.
    assert sync["spec"]["backoffLimit"] >= migrate["spec"]["backoffLimit"]
    assert sync["spec"]["ttlSecondsAfterFinished"] == migrate["spec"]["ttlSecondsAfterFinished"]


# --- deploy/prometheus.yml ---------------------------------------------------------------


def test_prometheus_scrapes_the_api_with_a_bearer_token() -> None:
    config = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    [job] = [job for job in config["scrape_configs"] if job["job_name"] == "nexus"]
    assert job["metrics_path"] == "/metrics"
    # /metrics wants a token unless NEXUS_METRICS_PUBLIC opens it, which no deploy file does.
    assert job["authorization"]["type"] == "Bearer" and job["authorization"]["credentials_file"]
    api = _compose()["services"]["api"]
    published = {str(port).rsplit(":", 1)[-1] for port in api["ports"]}
    [target] = [t for group in job["static_configs"] for t in group["targets"]]
    host, port = target.split(":")
    assert host == "api" and port in published
    assert "NEXUS_METRICS_PUBLIC" not in api.get("environment", {})
    secret = yaml.safe_load((KUBERNETES / "secret.yaml").read_text())
    assert "NEXUS_METRICS_PUBLIC" not in secret.get("stringData", {})


def test_the_image_installs_the_locked_versions_and_nothing_else() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    installs = [line for line in dockerfile.splitlines() if "pip install" in line]
    assert len(installs) == 2, installs
    locked, project = installs
    assert "--require-hashes -r requirements/app.lock" in locked
    assert "--no-deps ." in project  # Nexus itself adds no version the lock did not choose
