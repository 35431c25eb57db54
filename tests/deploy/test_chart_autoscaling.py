"""The chart's autoscaling recipe: a KEDA ScaledObject on ``dejaq_due_ahead``
(validated against KEDA's CRD schema, kept in tests/deploy/crds) and the
PrometheusRule warning of a spike due within 10 minutes (run through
``promtool test rules``). Both are off by default."""

from __future__ import annotations

import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.deploy.chart import ANONYMOUS, VALUE_SETS, helm, render
from tests.servers import require_binary

SCHEMA = Path(__file__).parent / "crds" / "keda-scaledobject-v1alpha1.yaml"


def test_neither_is_rendered_by_default() -> None:
    kinds = {m["kind"] for m in render(ANONYMOUS).manifests}

    assert "ScaledObject" not in kinds and "PrometheusRule" not in kinds


def test_the_scaled_object_follows_keda_s_schema_and_queries_the_due_load() -> None:
    scaled = render(VALUE_SETS["autoscaling"]).one("ScaledObject")

    jsonschema.validate(scaled, yaml.safe_load(SCHEMA.read_text()))
    assert scaled["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "workers",
    }
    [trigger] = scaled["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    assert trigger["metadata"]["query"] == 'sum(dejaq_due_ahead{topic="sends", within="5m"})'
    assert trigger["metadata"]["threshold"] == "1000"


def test_a_misspelt_field_fails_the_schema() -> None:
    scaled = render(VALUE_SETS["autoscaling"]).one("ScaledObject")
    scaled["spec"]["maxReplicas"] = 3  # KEDA's field is maxReplicaCount

    with pytest.raises(jsonschema.ValidationError, match="maxReplicas"):
        jsonschema.validate(scaled, yaml.safe_load(SCHEMA.read_text()))


@pytest.mark.parametrize("missing", ["target", "topic"])
def test_a_scaled_object_without_its_target_or_topic_is_refused(missing: str) -> None:
    keda = {"enabled": True, "target": {"name": "workers"}, "topic": "sends"}
    keda[missing] = {"name": ""} if missing == "target" else ""

    with pytest.raises(helm().HelmError) as err:
        render({**ANONYMOUS, "autoscaling": {"keda": keda}})
    assert f"autoscaling.keda.{missing}" in str(err.value)


RULE_TESTS = """
rule_files: [rules.yaml]
evaluation_interval: 30s
tests:
  - interval: 30s
    input_series:
      # a campaign scheduled: 80,000 due within 10 minutes from the third minute on
      - series: 'dejaq_due_ahead{topic="sends", kind="timeline", within="10m", pod="b-1"}'
        values: '0 0 0 0 0 80000x20'
      # another topic stays under the threshold
      - series: 'dejaq_due_ahead{topic="reminders", kind="timeline", within="10m", pod="b-2"}'
        values: '100x30'
    alert_rule_test:
      - eval_time: 2m
        alertname: DejaqDueSpike
        exp_alerts: []
      - eval_time: 4m
        alertname: DejaqDueSpike
        exp_alerts:
          - exp_labels: {severity: warning, topic: sends}
            exp_annotations:
              summary: "sends: 80000 messages due within 10 minutes"
              description: >-
                More than 50000 messages of topic sends fall due in the next 10 minutes:
                make sure its consumers can take them.
"""


def test_the_spike_alert_fires_once_the_load_due_within_10_minutes_stays_high(
    tmp_path: Path,
) -> None:
    promtool = require_binary("promtool")
    rule = render(VALUE_SETS["autoscaling"]).one("PrometheusRule")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    (tmp_path / "tests.yaml").write_text(RULE_TESTS)

    result = subprocess.run(
        [promtool, "test", "rules", "tests.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0, result.stdout + result.stderr
