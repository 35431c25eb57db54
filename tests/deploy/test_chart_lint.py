"""`helm lint --strict` finds nothing to say about the chart: with its default
values, with each kind of storage and with external etcd."""

from __future__ import annotations

import pytest

from tests.deploy.chart import CHART, VALUE_SETS, Values, helm

WARNING = 2  # helm lint severities: 1 info, 2 warning, 3 error


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_strict_lint_is_clean(values: Values) -> None:
    report = helm().lint(str(CHART), values, strict=True, namespace="queues")

    problems = [m for m in report["messages"] if m["severity"] >= WARNING]
    assert report["errors"] == [] and problems == [], report
