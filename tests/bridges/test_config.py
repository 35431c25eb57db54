"""The bridges file: the issue's shape is read as written; a bad file is one
line naming the bridge and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from dejaq.bridges import config
from dejaq.bridges.rules import DueRule, FieldRule
from dejaq.core.errors import InvalidArgument

SHAPE = """
bridges:
  - name: reorder
    source: {url: "redis-stream://127.0.0.1:6379/0", stream: "in", group: "dejaq"}
    topic: reorder
    due: {field: "due_ms"}          # epoch ms; or {delay: "5s"}, {field: ..., format: iso}
    id: {field: "id"}               # default: the source's own message id
    sink: {url: "redis-stream://127.0.0.1:6379/0", stream: "out"}
"""


def one(body: str) -> str:
    """A file of one bridge named ``b`` with ``body``'s fields over good defaults."""
    return (
        "bridges:\n  - name: b\n"
        '    source: {url: "redis-stream://h:1/0", stream: in, group: g}\n'
        "    topic: t\n    " + body
    )


def test_the_documented_shape_is_read_as_written(tmp_path: Path) -> None:
    # Given the file of the docs' example
    path = tmp_path / "bridges.yaml"
    path.write_text(SHAPE)
    # When it is loaded
    (spec,) = config.load(path)
    # Then each field is as written
    assert (spec.name, spec.topic) == ("reorder", "reorder")
    assert spec.source.url == "redis-stream://127.0.0.1:6379/0"
    assert dict(spec.source.options) == {"stream": "in", "group": "dejaq"}
    assert spec.rules.due == DueRule("due_ms", "ms", None)
    assert spec.rules.id == FieldRule("id")
    assert spec.sink is not None and dict(spec.sink.options) == {"stream": "out"}
    assert spec.error_sink is None


def test_each_due_rule_and_the_optional_fields_are_read() -> None:
    # Given bridges with a delay, an ISO field, a field with a fallback delay,
    # a key, a priority, the headers carried and an error sink
    text = one(
        'due: {field: at, format: iso, delay: "2s"}\n'
        "    key: {field: user}\n    priority: {field: p}\n    headers: [a, b]\n"
        '    error_sink: {url: "rediss-stream://h:1/0", stream: bad}\n'
    )
    (spec,) = config.parse(text)
    # Then each is as written
    assert spec.rules.due == DueRule("at", "iso", 2000)
    assert (spec.rules.key, spec.rules.priority) == (FieldRule("user"), FieldRule("p"))
    assert spec.rules.headers == ("a", "b")
    assert spec.error_sink is not None and spec.error_sink.scheme == "rediss-stream"
    (fixed,) = config.parse(one('due: {delay: "5s"}\n'))
    assert fixed.rules.due == DueRule(None, "ms", 5000)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("due: {field: d, format: unix}\n", "bridge 'b': due.format: 'unix' is not one of"),
        ('due: {delay: "5"}\n', "bridge 'b': due.delay: '5' has no unit"),
        ("due: {}\n", "bridge 'b': due: wants"),
        ("due: {format: iso}\n", "bridge 'b': due.format: wants due.field"),
        ("due: {field: d}\n    id: id\n", "bridge 'b': id: wants {field: NAME}"),
        ("due: {field: d}\n    colour: red\n", "bridge 'b': unknown field(s) ['colour']"),
        (
            'due: {field: d}\n    sink: {url: "kafka://h:9092", stream: out}\n',
            "bridge 'b': sink.url: no sink for scheme 'kafka'",
        ),
        (
            'due: {field: d}\n    sink: {url: "redis-stream://h:1/0"}\n',
            "bridge 'b': sink: stream: wants a non-empty string",
        ),
        ("due: {field: d}\n    headers: 3\n", "bridge 'b': headers: wants a list"),
    ],
)
def test_a_bad_bridge_is_one_line_naming_it_and_the_field(body: str, says: str) -> None:
    # Given a bridge with one bad field, when its file is read
    with pytest.raises(InvalidArgument) as refused:
        config.parse(one(body), "bridges.yaml")
    # Then the one line names the file, the bridge and the field
    message = str(refused.value)
    assert "\n" not in message and message.startswith("bridges.yaml: ")
    assert says in message


def test_a_source_without_its_group_and_a_missing_field_are_named() -> None:
    text = 'bridges:\n  - name: x\n    source: {url: "redis-stream://h:1/0", stream: in}\n'
    with pytest.raises(InvalidArgument, match="bridge 'x': topic: missing"):
        config.parse(text)
    text += "    topic: t\n    due: {field: d}\n"
    with pytest.raises(InvalidArgument, match="bridge 'x': source: group: wants"):
        config.parse(text)


def test_two_bridges_of_one_name_and_a_file_of_no_bridges_are_refused(tmp_path: Path) -> None:
    twice = one("due: {field: d}\n") + one("due: {field: d}\n").removeprefix("bridges:\n")
    with pytest.raises(InvalidArgument, match="bridge 'b': name: 'b' is the name of an earlier"):
        config.parse(twice)
    with pytest.raises(InvalidArgument, match="wants a list of one bridge or more"):
        config.parse("bridges: []\n")
    with pytest.raises(InvalidArgument, match="not YAML"):
        config.parse("bridges: [\n")
    with pytest.raises(InvalidArgument, match=r"missing\.yaml"):
        config.load(tmp_path / "missing.yaml")
