"""deploy/'s Grafana dashboard and Prometheus alert rules load, and every metric they name
is one Nexus exposes (read from a real /metrics), so none silently watches nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
# Prometheus's own series for each scrape target, not Nexus's.
PROMETHEUS_OWN = {"up"}
SUFFIXES = {
    "counter": ("",),  # its TYPE line already says `_total`
    "histogram": ("_bucket", "_count", "_sum"),
    "gauge": ("",),
}


def _exposed(database: Database) -> set[str]:
    """Every series name /metrics can carry, from its TYPE lines (an empty family too)."""
    app = create_app(
        bootstrap(Settings(metrics_public=True), database=database, doorbell=RecordingDoorbell())
    )
    text = TestClient(app).get("/metrics").text
    names = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.MULTILINE):
        names |= {name + suffix for suffix in SUFFIXES.get(kind, ("",))}
    return names


def _named(expr: str) -> set[str]:
    return set(re.findall(r"\b(nexus_[a-z_]+|up)\b", expr))


def _alert_rules() -> list[dict[str, object]]:
    rules = yaml.safe_load((DEPLOY / "alerts.yml").read_text())
    return [rule for group in rules["groups"] for rule in group["rules"]]


def _dashboard_exprs() -> list[str]:
    dashboard = json.loads((DEPLOY / "grafana" / "nexus-dashboard.json").read_text())
    assert dashboard["title"] and dashboard["uid"] and dashboard["panels"]
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_the_alerts_cover_what_an_operator_is_woken_for() -> None:
    names = {str(rule["alert"]) for rule in _alert_rules()}
    assert {
        "NexusWorkerDown",
        "NexusBeatTickLate",
        "NexusDeadLettersGrowing",
        "NexusTurnLatencyHigh",
    } <= names
    for rule in _alert_rules():
        assert rule["expr"] and rule["annotations"], rule


def test_every_metric_the_alerts_and_dashboard_name_exists(database: Database) -> None:
    exposed = _exposed(database) | PROMETHEUS_OWN
    named: set[str] = set()
    for expr in [str(rule["expr"]) for rule in _alert_rules()] + _dashboard_exprs():
        found = _named(expr)
        assert found, expr
        named |= found
    assert named - exposed == set()
    assert "nexus_task_duration_seconds_bucket" in named  # the worker's, too


def test_prometheus_loads_the_rules_and_scrapes_the_workers() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    assert config["rule_files"] == ["alerts.yml"]
    jobs = {job["job_name"] for job in config["scrape_configs"]}
    assert jobs == {"nexus", "nexus-worker"}
    worker_job = 'up{job="nexus-worker"}'
    assert any(worker_job in str(rule["expr"]) for rule in _alert_rules())
