"""Every manifest the chart renders, for every set of values, passes
`kubernetes-validate --strict` (unknown fields refused) against two Kubernetes
versions still supported. The ServiceMonitor and PrometheusRule are Prometheus
Operator CRDs that kubernetes-validate has no schema for: the policy tests
check their shape (test_chart_autoscaling.py runs the rule through promtool).
The KEDA ScaledObject is validated against its CRD's schema there."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.deploy.chart import VALUE_SETS, render
from tests.servers import unavailable

KUBERNETES_VERSIONS = ("1.35.0", "1.37.0")
CRDS = {"ServiceMonitor", "ScaledObject", "PrometheusRule"}
TIMEOUT_S = 60


def kubernetes_validate() -> str:
    found = shutil.which("kubernetes-validate", path=str(Path(sys.executable).parent))
    if found is None:
        unavailable("kubernetes-validate is not installed (pip install -e '.[dev]')")
    return found


@pytest.fixture(scope="module")
def manifest_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """One file per rendered manifest, for every set of values."""
    folder = tmp_path_factory.mktemp("manifests")
    files = []
    for name, values in VALUE_SETS.items():
        for i, manifest in enumerate(render(values).manifests):
            if manifest["kind"] in CRDS:
                continue
            path = folder / f"{name}-{i:02d}-{manifest['kind'].lower()}.yaml"
            path.write_text(yaml.safe_dump(manifest))
            files.append(path)
    return files


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_validates_strictly(version: str, manifest_files: list[Path]) -> None:
    command = [kubernetes_validate(), "--strict", "--kubernetes-version", version]

    result = subprocess.run(
        [*command, *map(str, manifest_files)], capture_output=True, text=True, timeout=TIMEOUT_S
    )

    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    passed = [line for line in output.splitlines() if line.startswith("INFO") and "passed" in line]
    assert len(passed) == len(manifest_files), output
