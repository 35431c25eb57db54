"""The chart mounts a bridges file from a Secret (its URLs may carry passwords)
and gives the broker ``--bridges`` to it; none without one."""

from __future__ import annotations

from tests.deploy.chart import ANONYMOUS, VALUE_SETS, broker_container, render


def test_a_bridges_file_is_mounted_from_its_secret_and_given_to_the_broker() -> None:
    # Given the values naming the Secret that holds the bridges file
    rendered = render(VALUE_SETS["bridges"])
    container = broker_container(rendered)
    # Then the broker runs it, read from the Secret's mount, read-only
    assert container["args"] == [
        "--insecure-allow-anonymous",
        "--bridges=/etc/dejaq/bridges/bridges",
    ]
    volumes = {
        v["name"]: v for v in rendered.one("Deployment")["spec"]["template"]["spec"]["volumes"]
    }
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/etc/dejaq/bridges"]
    assert mount["readOnly"] is True
    assert volumes[mount["name"]]["secret"]["secretName"] == "dejaq-bridges"
    # And without one no bridges flag
    assert "--bridges" not in " ".join(broker_container(render(ANONYMOUS)).get("args", []))
