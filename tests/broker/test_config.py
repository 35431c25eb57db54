"""The broker's config reader: flags over environment, unknown keys named."""

from __future__ import annotations

import pytest

from dejaq.broker.config import DEFAULT_STORAGE, BrokerConfig
from dejaq.core.errors import InvalidArgument


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


def test_client_variables_are_not_broker_settings() -> None:
    assert BrokerConfig.from_sources({}, {"DEJAQ_BROKER": "h:1"}).listen == "127.0.0.1:7700"


@pytest.mark.parametrize(
    "env", [{"DEJAQ_RESCAN_MS": "soon"}, {"DEJAQ_LISTEN": "nowhere"}, {"DEJAQ_RESCAN_MS": "0"}]
)
def test_bad_values_are_refused(env: dict[str, str]) -> None:
    with pytest.raises(InvalidArgument):
        BrokerConfig.from_sources({}, env)
