"""The broker's config reader: flags over environment, unknown keys named."""

from __future__ import annotations

import pytest

from dejaq.broker.api.topics import TopicCache
from dejaq.broker.config import DEFAULT_STORAGE, BrokerConfig
from dejaq.broker.context import BrokerContext
from dejaq.broker.coordination import LocalCoordinator
from dejaq.core.errors import InvalidArgument
from dejaq.storage_plugins import storage_from_url


def _broker(storage: str, env: dict[str, str]) -> BrokerContext:
    """A broker's context on ``storage`` (not opened: only its defaults are read)."""
    config = BrokerConfig.from_sources({"storage": storage}, env)
    backend = storage_from_url(storage)
    return BrokerContext(config, backend, LocalCoordinator(), TopicCache(backend))


def test_defaults_are_the_embedded_ones() -> None:
    config = BrokerConfig.from_sources({}, {})
    assert config.listen == "127.0.0.1:7700"
    assert config.storage == DEFAULT_STORAGE


def test_flags_win_over_environment() -> None:
    env = {"DEJAQ_STORAGE": "memory://", "DEJAQ_LISTEN": "127.0.0.1:1", "DEJAQ_RESCAN_MS": "50"}
    config = BrokerConfig.from_sources({"listen": "127.0.0.1:2", "storage": None}, env)
    assert (config.listen, config.storage, config.rescan_ms) == ("127.0.0.1:2", "memory://", 50)


def test_unknown_environment_key_is_named() -> None:
    with pytest.raises(InvalidArgument, match="DEJAQ_STORGE"):
        BrokerConfig.from_sources({}, {"DEJAQ_STORGE": "memory://"})


@pytest.mark.parametrize(
    ("storage", "env", "expected"),
    [
        ("memory://", {}, 100),
        ("sqlite:///x.db", {}, 100),
        ("redis://127.0.0.1:1/0", {}, 100),
        ("postgresql://u@127.0.0.1:1/d", {}, 200),  # slower lease calls to hide
        ("postgresql://u@127.0.0.1:1/d", {"DEJAQ_SEND_AHEAD_MS": "0"}, 0),
        ("memory://", {"DEJAQ_SEND_AHEAD_MS": "30"}, 30),
    ],
)
def test_send_ahead_is_the_storage_default_unless_set(
    storage: str, env: dict[str, str], expected: int
) -> None:
    assert _broker(storage, env).send_ahead_ms == expected


def test_client_variables_are_not_broker_settings() -> None:
    assert BrokerConfig.from_sources({}, {"DEJAQ_BROKER": "h:1"}).listen == "127.0.0.1:7700"


def test_the_pure_python_switch_is_not_a_broker_setting() -> None:
    # DEJAQ_PURE_PYTHON=1 picks the flavour at import; a broker run with it starts.
    env = {"DEJAQ_PURE_PYTHON": "1", "DEJAQ_LISTEN": "127.0.0.1:7701"}
    assert BrokerConfig.from_sources({}, env).listen == "127.0.0.1:7701"


@pytest.mark.parametrize(
    "env",
    [
        {"DEJAQ_RESCAN_MS": "soon"},
        {"DEJAQ_LISTEN": "nowhere"},
        {"DEJAQ_RESCAN_MS": "0"},
        {"DEJAQ_LOOKAHEAD_MS": "-2"},
        {"DEJAQ_LOOKAHEAD_MS": "1001"},
        {"DEJAQ_SEND_AHEAD_MS": "-2"},
        {"DEJAQ_SEND_AHEAD_MS": "1001"},
    ],
)
def test_bad_values_are_refused(env: dict[str, str]) -> None:
    with pytest.raises(InvalidArgument):
        BrokerConfig.from_sources({}, env)


@pytest.mark.parametrize(
    ("storage", "env", "expected"),
    [
        ("memory://", {}, 0),  # no round trip to hide
        ("sqlite:///x.db", {}, 20),
        ("redis://127.0.0.1:1/0", {}, 20),
        ("memory://", {"DEJAQ_LOOKAHEAD_MS": "5"}, 5),
        ("redis://127.0.0.1:1/0", {"DEJAQ_LOOKAHEAD_MS": "0"}, 0),
    ],
)
def test_the_look_ahead_is_the_storage_default_unless_set(
    storage: str, env: dict[str, str], expected: int
) -> None:
    assert _broker(storage, env).lookahead_ms == expected


HTTPS = {"DEJAQ_ETCD": "https://e:2379"}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({**HTTPS, "DEJAQ_ETCD_CERT": "c.pem"}, "etcd_cert and etcd_key go together"),
        ({"DEJAQ_ETCD": "http://e:2379", "DEJAQ_ETCD_CA": "ca.pem"}, "need https://"),
        ({"DEJAQ_ETCD_CA": "ca.pem"}, "--etcd is not"),
        ({**HTTPS, "DEJAQ_ETCD_USER": "u"}, "etcd_user needs etcd_password_file"),
        ({**HTTPS, "DEJAQ_ETCD_PASSWORD": "p"}, "an etcd password needs etcd_user"),
        (
            {
                **HTTPS,
                "DEJAQ_ETCD_USER": "u",
                "DEJAQ_ETCD_PASSWORD": "p",
                "DEJAQ_ETCD_PASSWORD_FILE": "f",
            },
            "not both",
        ),
        ({"DEJAQ_METRICS": "127.0.0.1:0", "DEJAQ_METRICS_TLS_KEY": "k"}, "go together"),
        ({"DEJAQ_METRICS_TLS_CERT": "c", "DEJAQ_METRICS_TLS_KEY": "k"}, "--metrics is not"),
        (
            {"DEJAQ_METRICS": "127.0.0.1:0", "DEJAQ_METRICS_TLS_CLIENT_CA": "ca"},
            "needs metrics_tls_cert",
        ),
    ],
)
def test_tls_and_credential_settings_come_in_whole_sets(env: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        BrokerConfig.from_sources({}, env)


def test_the_etcd_password_stays_out_of_the_config_repr() -> None:
    env = {**HTTPS, "DEJAQ_ETCD_USER": "u", "DEJAQ_ETCD_PASSWORD": "hunter2"}

    config = BrokerConfig.from_sources({}, env)

    assert config.etcd_password == "hunter2"
    assert "hunter2" not in repr(config)


def test_resource_bounds_have_environment_twins() -> None:
    env = {
        "DEJAQ_MAX_FRAME_BYTES": "1048576",
        "DEJAQ_MAX_PRODUCE_MESSAGES": "500",
        "DEJAQ_MAX_PRODUCE_BYTES": "2097152",
        "DEJAQ_MAX_STREAMS": "7",
        "DEJAQ_MAX_OUTBOX_FRAMES": "9",
        "DEJAQ_MAX_HELD_BYTES": "1048576",
        "DEJAQ_KEEPALIVE_MS": "1500",
        "DEJAQ_KEEPALIVE_TIMEOUT_MS": "2500",
        "DEJAQ_HTTP_HEADER_TIMEOUT_MS": "700",
        "DEJAQ_HTTP_BODY_TIMEOUT_MS": "900",
        "DEJAQ_HTTP_MAX_CONNECTIONS": "11",
    }
    c = BrokerConfig.from_sources({"max_streams": 8}, env)
    assert (c.max_frame_bytes, c.max_produce_messages, c.max_produce_bytes) == (
        1 << 20,
        500,
        2 << 20,
    )
    assert (c.max_streams, c.max_outbox_frames, c.max_held_bytes) == (8, 9, 1 << 20)
    assert (c.keepalive_ms, c.keepalive_timeout_ms) == (1500, 2500)
    assert (c.http_header_timeout_ms, c.http_body_timeout_ms, c.http_max_connections) == (
        700,
        900,
        11,
    )


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"DEJAQ_MAX_FRAME_BYTES": "1000"}, "max_frame_bytes"),  # under 64 KiB
        ({"DEJAQ_MAX_PRODUCE_BYTES": str(65 << 20)}, "max_produce_bytes"),  # over gRPC's 64 MiB
        ({"DEJAQ_MAX_PRODUCE_MESSAGES": "0"}, "max_produce_messages"),
        ({"DEJAQ_MAX_STREAMS": "0"}, "max_streams"),
        ({"DEJAQ_MAX_OUTBOX_FRAMES": "-1"}, "max_outbox_frames"),
        ({"DEJAQ_MAX_HELD_BYTES": "0"}, "max_held_bytes"),
        ({"DEJAQ_KEEPALIVE_MS": "0"}, "keepalive_ms"),
        ({"DEJAQ_KEEPALIVE_MS": str(2**31)}, "keepalive_ms"),  # past gRPC's C int
        ({"DEJAQ_KEEPALIVE_TIMEOUT_MS": str(10**20)}, "keepalive_timeout_ms"),
        ({"DEJAQ_HTTP_HEADER_TIMEOUT_MS": "0"}, "http_header_timeout_ms"),
        ({"DEJAQ_HTTP_BODY_TIMEOUT_MS": "-5"}, "http_body_timeout_ms"),
        ({"DEJAQ_HTTP_MAX_CONNECTIONS": "0"}, "http_max_connections"),
    ],
)
def test_bad_bounds_are_refused_by_name(env: dict[str, str], named: str) -> None:
    with pytest.raises(InvalidArgument, match=named):
        BrokerConfig.from_sources({}, env)


@pytest.mark.parametrize(
    ("flags", "env", "message"),
    [
        ({"rescan_ms": "soon"}, {}, "rescan_ms='soon' is not a number"),
        ({}, {"DEJAQ_RESCAN_MS": "soon"}, "DEJAQ_RESCAN_MS='soon' is not a number"),
        ({}, {"DEJAQ_INSECURE_ALLOW_ANONYMOUS": "maybe"}, "is not a boolean"),
        ({"keepalive_ms": 2**31}, {}, "keepalive_ms must be at most 2147483647"),
        ({}, {"DEJAQ_MAX_FRAME_BYTES": "1"}, "max_frame_bytes must be between 65536 and"),
        ({}, {"DEJAQ_ETCD_TTL_S": "1"}, "etcd_ttl_s must be at least 2"),
        ({"skew_max_ms": -1}, {}, "skew_max_ms cannot be negative"),
        ({}, {"DEJAQ_TRACE_SAMPLE": "1.5"}, r"trace_sample must be between 0 and 1 \(0: off\)"),
        ({"trace_sample": -0.1}, {}, "trace_sample must be between 0 and 1"),
        ({}, {"DEJAQ_TRACE_SAMPLE": "often"}, "DEJAQ_TRACE_SAMPLE='often' is not a number"),
    ],
)
def test_a_bad_value_is_refused_naming_its_flag_or_variable(
    flags: dict[str, object], env: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        BrokerConfig.from_sources(flags, env)


def test_a_boolean_variable_reads_yes_and_no() -> None:
    for text, expected in (("yes", True), ("on", True), ("TRUE", True), ("no", False), ("", False)):
        env = {"DEJAQ_INSECURE_ALLOW_ANONYMOUS": text}
        assert BrokerConfig.from_sources({}, env).insecure_allow_anonymous is expected


def test_the_trace_sample_is_a_share_off_by_default() -> None:
    assert BrokerConfig().trace_sample == 0
    assert BrokerConfig.from_sources({}, {"DEJAQ_TRACE_SAMPLE": "0.01"}).trace_sample == 0.01
