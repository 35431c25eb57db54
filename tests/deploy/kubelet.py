"""What a kubelet does with a rendered container, done on loopback.

``container_env`` builds the environment from ``env`` entries (plain values,
``fieldRef``, ``secretKeyRef`` on the chart's own Secrets) and expands
``$(VAR)`` references to earlier entries, as Kubernetes does. ``to_loopback``
maps in-cluster addresses (Services and StatefulSet pods behind headless
Services) to servers started on 127.0.0.1. ``mount_secrets`` projects the
Secret volumes a container mounts into local folders, as the kubelet does, and
``to_local_paths`` points the container's paths there. ``grpc_probe`` asks the gRPC health
service what a kubelet's native gRPC probe asks, and ``until_probe_passes``
repeats it on the probe's own period and failure threshold.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

POD_IP = "127.0.0.1"
_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_ADDRESS = re.compile(r"([A-Za-z0-9][A-Za-z0-9.-]*):(\d+)")

Secrets = Mapping[str, Mapping[str, str]]


def secrets(manifests: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """The chart's Secrets: name -> key -> value (stringData, or base64 data)."""
    found: dict[str, dict[str, str]] = {}
    for m in manifests:
        if m["kind"] == "Secret":
            data = {k: base64.b64decode(v).decode() for k, v in m.get("data", {}).items()}
            found[m["metadata"]["name"]] = {**data, **m.get("stringData", {})}
    return found


def container_env(
    container: Mapping[str, Any], secret_values: Secrets, pod_name: str
) -> dict[str, str]:
    env: dict[str, str] = {}
    fields = {"status.podIP": POD_IP, "metadata.name": pod_name}
    for entry in container.get("env", []):
        name = entry["name"]
        if "value" in entry:
            env[name] = _REFERENCE.sub(lambda m: env.get(m[1], m[0]), str(entry["value"]))
            continue
        source = entry["valueFrom"]
        if "fieldRef" in source:
            env[name] = fields[source["fieldRef"]["fieldPath"]]
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            env[name] = secret_values[ref["name"]][ref["key"]]
        else:
            raise ValueError(f"env {name}: {source} is not emulated here")
    return env


def to_loopback(text: str, services: Mapping[str, int]) -> str:
    """Every ``HOST:PORT`` whose host is one of ``services`` (by its short name,
    or a pod under it) becomes ``127.0.0.1:<the local server's port>``."""

    def local(match: re.Match[str]) -> str:
        labels = match[1].split(".")
        for service, port in services.items():
            if labels[0] == service or labels[1:2] == [service]:
                return f"{POD_IP}:{port}"
        return match[0]

    return _ADDRESS.sub(local, text)


def mount_secrets(
    pod_spec: Mapping[str, Any], container: Mapping[str, Any], secret_values: Secrets, root: Path
) -> dict[str, Path]:
    """Write every Secret volume ``container`` mounts under ``root`` (each key as a
    file, or the listed ``items``, with the volume's ``defaultMode``): mount path ->
    local folder."""
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    mounts: dict[str, Path] = {}
    for mount in container.get("volumeMounts", []):
        secret = volumes[mount["name"]].get("secret")
        if secret is None:
            continue
        values = secret_values[secret["secretName"]]
        items = secret.get("items") or [{"key": key, "path": key} for key in values]
        folder = root / mount["name"]
        folder.mkdir(parents=True)
        for item in items:
            path = folder / item["path"]
            path.write_text(values[item["key"]])
            path.chmod(secret.get("defaultMode", 0o644))
        mounts[mount["mountPath"]] = folder
    return mounts


def to_local_paths(text: str, mounts: Mapping[str, Path]) -> str:
    """Paths under a mounted folder, pointed at its local copy."""
    for mount_path, folder in mounts.items():
        text = text.replace(f"{mount_path}/", f"{folder}/")
    return text


def grpc_probe(probe: Mapping[str, Any], host: str = POD_IP) -> bool:
    """One native gRPC probe: success only when the health service says SERVING."""
    spec = probe["grpc"]
    timeout = float(probe.get("timeoutSeconds", 1))
    with grpc.insecure_channel(f"{host}:{spec['port']}") as channel:
        request = health_pb2.HealthCheckRequest(service=spec.get("service", ""))
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(request, timeout=timeout)
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def until_probe_passes(probe: Mapping[str, Any]) -> int:
    """Probe on the probe's period until it passes; the attempts it took. Fails
    as the kubelet gives up: after failureThreshold attempts."""
    period = float(probe.get("periodSeconds", 10))
    attempts = int(probe.get("failureThreshold", 3))
    time.sleep(float(probe.get("initialDelaySeconds", 0)))
    for attempt in range(1, attempts + 1):
        if grpc_probe(probe):
            return attempt
        time.sleep(period)  # the kubelet's own rhythm, not a guess at readiness
    raise AssertionError(f"probe {probe} failed {attempts} times: the kubelet gives up")
