"""Layers point one way (docs/architecture.md), checked by reading every module's imports.

    core (model, errors, clock, buckets)  <-  storage_plugins  <-  broker
    core  <-  core.wire (+ proto, fbs)  <-  broker, driver

Inside the broker its rooms (sub-packages and top modules) stand in the order
of ``BROKER_ROOMS``, lowest first: a room imports only itself and rooms below.

Every import counts: module level, inside functions, under ``TYPE_CHECKING``,
relative, and ``importlib.import_module("dejaq...")`` with a literal name.
A module may import only its own layer and the layers listed for it in
``MAY_IMPORT``; a deliberate exception is named, with its reason, in
``EXCEPTIONS``. No module reaches itself again through what it imports: a
circle, lazy or under ``TYPE_CHECKING`` too, says two modules are really one.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = (
    "dejaq.core",
    "dejaq.storage_plugins",
    "dejaq.broker",
    "dejaq.driver",
    "dejaq.outbox",
    "dejaq.bridges",
)
WIRE = ("dejaq.core.wire", "dejaq.proto", "dejaq.fbs")

# Each layer, and what its modules may import besides themselves.
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "dejaq.core": (),  # the pure model imports nothing of dejaq but itself
    "dejaq.core.wire": ("dejaq.core", "dejaq.proto", "dejaq.fbs"),
    "dejaq.proto": (),
    "dejaq.fbs": (),
    "dejaq.storage_plugins": ("dejaq.core",),  # storage sees bytes: no wire
    # the outbox's relay runs in a broker given --outbox, the bridges in one given --bridges
    "dejaq.broker": ("dejaq.core", *WIRE, "dejaq.storage_plugins", "dejaq.outbox", "dejaq.bridges"),
    "dejaq.driver": ("dejaq.core", *WIRE),
    # the outbox's helpers run inside the application: the model's checks, no client
    "dejaq.outbox": ("dejaq.core",),
    # a relay of its own hands rows to dejaq through the public driver
    "dejaq.outbox.driver_handoff": ("dejaq.core", "dejaq.outbox", "dejaq.driver", *WIRE),
    # a bridge produces and consumes its topic through the public driver
    "dejaq.bridges": ("dejaq.core", "dejaq.driver", *WIRE),
}

# (importing module, layer it may import although its own layer may not): why.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("dejaq.driver.cli.broker_cmd", "dejaq.broker"): (
        "`dejaq broker` is a command of the one CLI: it runs the broker in-process"
    ),
    ("dejaq.driver.cli.storage_cmd", "dejaq.storage_plugins"): (
        "`dejaq storage migrate` upgrades a store in place while no broker runs on it;"
        " it imports the storage inside the function"
    ),
    ("dejaq.driver.cli.outbox_cmd", "dejaq.outbox"): (
        "`dejaq outbox install|status` are commands of the one CLI; imported inside them"
    ),
    ("dejaq.driver.cli.outbox_cmd", "dejaq.outbox.driver_handoff"): (
        "`dejaq outbox relay` runs a relay; imported inside the command"
    ),
    ("dejaq.driver.cli.bridge_cmd", "dejaq.bridges"): (
        "`dejaq bridge run|list|status` are commands of the one CLI; imported inside them"
    ),
    ("dejaq.broker.bridges.runs", "dejaq.driver"): (
        "the bridges of --bridges consume their topics as any consumer does: through a"
        " driver client of the broker on loopback"
    ),
    ("dejaq.driver.embedded", "dejaq.broker"): (
        "`embedded()` runs a broker in the caller's event loop; it imports the broker"
        " inside the function, so `import dejaq.driver` loads no broker code"
    ),
}


# The broker's rooms, lowest first: each may import only itself and those before it.
BROKER_ROOMS: tuple[str, ...] = (
    "tasks",  # background tasks that never fail silently
    "allocator",  # the process's allocator settings
    "collector",  # the cyclic garbage collector's pacing
    "coordination",  # which buckets this broker's consumers own (an interface)
    "etcd_endpoints",  # the parsed --etcd flag
    "webhook_addresses",  # which addresses a webhook may reach without --webhook-allow
    "webhook_targets",  # the parsed --webhook-allow flag, and a target's check
    "ids",  # generated message ids
    "streams",  # the bound on open streams
    "storage_open",  # opening the storage, waiting while it is not ready
    "config",  # the one typed config
    "security",  # TLS, principals, the guard
    "observability",  # metrics (every room counts into them), gauges, logs
    "dispatch",  # the engine
    "clock",  # the storage's clock and the skew guard
    "context",  # what every handler of one broker shares
    "cron",  # cron entries and their firers
    "cluster",  # the etcd coordinator
    "api",  # the RPC handlers
    "outbox",  # relays of applications' transactional outboxes, into the api's handlers
    "bridges",  # bridges of --bridges: a client of the broker between two other queues
    "webhooks",  # webhook delivery: a consumer that settles through the api
    "http",  # the HTTP/JSON surface over the api
    "retention",  # the sweep of old dead messages
    "assembly",  # builds a broker from all of the above
    "server",  # runs one until SIGTERM
)


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # what it imports, absolute (``from a import b`` reads as ``a.b``)
    path: Path
    line: int


def layer_of(name: str) -> str | None:
    """The most specific layer ``name`` belongs to (None: not a dejaq layer)."""
    found = [layer for layer in MAY_IMPORT if name == layer or name.startswith(layer + ".")]
    return max(found, key=len, default=None)


def package_folders() -> dict[str, Path]:
    """The source folder of each checked package, from pyproject's package-dir."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        package_dir = tomllib.load(file)["tool"]["setuptools"]["package-dir"]
    return {package: ROOT / package_dir[package] for package in CHECKED}


def module_name(package: str, folder: Path, path: Path) -> str:
    parts = path.relative_to(folder).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((package, *parts))


def imports_of(source: str, module: str, path: Path, is_package: bool = False) -> Iterator[Import]:
    """Every dejaq import in ``source``, the source of ``module``."""
    home = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source, str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = home.split(".")[: len(home.split(".")) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            targets = [base if a.name == "*" else f"{base}.{a.name}" for a in node.names]
        elif _is_import_module_call(node):
            assert isinstance(node, ast.Call)
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                targets = [first.value]
        for target in targets:
            if target == "dejaq" or target.startswith("dejaq."):
                yield Import(module, target, path, getattr(node, "lineno", 0))


def _is_import_module_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or not node.args:
        return False
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name in ("import_module", "__import__")


def all_imports() -> list[Import]:
    found: list[Import] = []
    for package, folder in package_folders().items():
        for path in sorted(folder.rglob("*.py")):
            module = module_name(package, folder, path)
            source = path.read_text()
            found += imports_of(source, module, path, is_package=path.name == "__init__.py")
    return found


def wrong_way(imp: Import) -> str | None:
    """Why ``imp`` points the wrong way, or None when it is allowed."""
    importer, imported = layer_of(imp.module), layer_of(imp.target)
    assert importer is not None, imp
    if imported == importer or imported in MAY_IMPORT[importer]:
        return None
    if imported is not None and (imp.module, imported) in EXCEPTIONS:
        return None
    allowed = ", ".join(MAY_IMPORT[importer]) or "nothing of dejaq"
    return f"{importer} may import only itself and {allowed}"


def test_every_import_points_down_the_layers() -> None:
    # Given every import of every module under core/, storage_plugins/, broker/, driver/
    imports = all_imports()
    # Then none points the wrong way
    wrong = [
        f"{imp.path.relative_to(ROOT)}:{imp.line}: {imp.module} imports {imp.target} ({why})"
        for imp in imports
        if (why := wrong_way(imp)) is not None
    ]
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def broker_room(name: str) -> str | None:
    """The broker room ``name`` is in (None: outside the broker's rooms)."""
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["dejaq", "broker"] else None


def upward(imp: Import) -> str | None:
    """Why ``imp`` points up the broker's rooms, or None when it does not."""
    importer, imported = broker_room(imp.module), broker_room(imp.target)
    if importer is None or imported is None or importer == imported:
        return None
    assert importer in BROKER_ROOMS, f"{importer}: a broker room not in BROKER_ROOMS"
    assert imported in BROKER_ROOMS, f"{imported}: a broker room not in BROKER_ROOMS"
    if BROKER_ROOMS.index(imported) < BROKER_ROOMS.index(importer):
        return None
    return f"broker room {importer} may import only rooms below it, and {imported} is above"


def test_every_broker_import_points_down_the_rooms() -> None:
    # Given every import between two of the broker's rooms
    imports = all_imports()
    # Then none points up BROKER_ROOMS
    wrong = [
        f"{imp.path.relative_to(ROOT)}:{imp.line}: {imp.module} imports {imp.target} ({why})"
        for imp in imports
        if (why := upward(imp)) is not None
    ]
    assert not wrong, "imports up the broker's rooms:\n" + "\n".join(wrong)


def test_every_broker_room_is_ordered() -> None:
    # Given the broker's sub-packages and top modules
    rooms = {broker_room(m) for m in all_modules()} - {None}
    # Then each has its place in BROKER_ROOMS, and the order names nothing else
    assert rooms == set(BROKER_ROOMS)
    assert len(BROKER_ROOMS) == len(set(BROKER_ROOMS))


def all_modules() -> set[str]:
    return {
        module_name(package, folder, path)
        for package, folder in package_folders().items()
        for path in folder.rglob("*.py")
    }


def module_graph(imports: list[Import], modules: Iterable[str] = ()) -> dict[str, set[str]]:
    """Each module and the modules it imports (``a.b.Name`` counts as ``a.b``;
    importing a package's module does not count as importing the package)."""
    graph: dict[str, set[str]] = {m: set() for m in [*modules, *(i.module for i in imports)]}
    for imp in imports:
        target = imp.target
        while target and target not in graph:
            target = target.rpartition(".")[0]
        if target and target != imp.module:
            graph[imp.module].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected parts of more
    than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_import_circles() -> None:
    # Given every import of every module, the lazy and TYPE_CHECKING ones too
    graph = module_graph(all_imports(), all_modules())
    # Then no module reaches itself again through them
    found = circles(graph)
    assert not found, "import circles (each line: the modules of one):\n" + "\n".join(
        " <-> ".join(part) for part in found
    )


def test_every_exception_is_still_needed() -> None:
    used = {(imp.module, layer_of(imp.target)) for imp in all_imports()}
    stale = [exception for exception in EXCEPTIONS if exception not in used]
    assert not stale, f"allowed exceptions no import needs any more, remove them: {stale}"


def test_every_package_folder_has_modules() -> None:
    # A wrong folder would make the layer test pass by reading nothing.
    for package, folder in package_folders().items():
        modules = {module_name(package, folder, p) for p in folder.rglob("*.py")}
        assert package in modules, (package, folder)
        assert len(modules) > 1, (package, folder)


# -- the reader itself, on made-up sources -------------------------------------

SOURCE = """
from __future__ import annotations
import importlib
from typing import TYPE_CHECKING
from dejaq.core import errors
from . import rules
from ...broker import context

if TYPE_CHECKING:
    from dejaq.driver.client import Client

def later():
    import dejaq.proto.dejaq_pb2 as pb
    return importlib.import_module("dejaq.fbs.batch")
"""


def test_the_reader_finds_every_kind_of_import() -> None:
    module = "dejaq.storage_plugins.memory.storage"
    found = {i.target for i in imports_of(SOURCE, module, Path("storage.py"))}
    assert found == {
        "dejaq.core.errors",
        "dejaq.storage_plugins.memory.rules",
        "dejaq.broker.context",
        "dejaq.driver.client.Client",
        "dejaq.proto.dejaq_pb2",
        "dejaq.fbs.batch",
    }


def test_the_rules_catch_each_wrong_direction() -> None:
    def wrong(module: str, target: str) -> bool:
        return wrong_way(Import(module, target, Path("x.py"), 1)) is not None

    # the pure core imports only itself
    assert not wrong("dejaq.core.model", "dejaq.core.errors.NotFound")
    assert wrong("dejaq.core.model", "dejaq.core.wire.convert")
    assert wrong("dejaq.core.model", "dejaq.proto.dejaq_pb2")
    # wire: core, proto, fbs
    assert not wrong("dejaq.core.wire.convert", "dejaq.proto.dejaq_pb2")
    assert not wrong("dejaq.core.wire.batches", "dejaq.fbs.batch")
    assert wrong("dejaq.core.wire.convert", "dejaq.storage_plugins.base")
    # storage: never broker, driver or wire
    for target in ("dejaq.broker.config", "dejaq.driver.client", "dejaq.core.wire.convert"):
        assert wrong("dejaq.storage_plugins.base", target)
    assert wrong("dejaq.storage_plugins.base", "dejaq.proto.dejaq_pb2")
    assert wrong("dejaq.storage_plugins.base", "dejaq.fbs.batch")
    # broker: never the driver
    assert wrong("dejaq.broker.server", "dejaq.driver.client")
    assert not wrong("dejaq.broker.server", "dejaq.storage_plugins.base")
    # driver: never storage or broker, except the command that runs a broker
    assert wrong("dejaq.driver.client", "dejaq.storage_plugins.base")
    assert wrong("dejaq.driver.cli.main", "dejaq.broker.server")
    assert not wrong("dejaq.driver.cli.broker_cmd", "dejaq.broker.server")
    assert not wrong("dejaq.driver.embedded", "dejaq.broker.assembly")
    assert wrong("dejaq.driver.client", "dejaq.broker.assembly")
    assert wrong("dejaq.driver.cli.broker_cmd", "dejaq.storage_plugins.base")
    # the outbox's helpers: only the core; the driver only for the relay's own hand-over
    assert not wrong("dejaq.outbox.rows", "dejaq.core.keys")
    assert wrong("dejaq.outbox.write", "dejaq.driver.client")
    assert wrong("dejaq.outbox.relay.loop", "dejaq.broker.context")
    assert not wrong("dejaq.outbox.driver_handoff", "dejaq.driver.producer")
    assert not wrong("dejaq.broker.outbox.handoff", "dejaq.outbox.relay.loop")
    assert wrong("dejaq.broker.outbox.handoff", "dejaq.outbox.driver_handoff")


def test_the_room_rules_catch_an_upward_import() -> None:
    def up(module: str, target: str) -> bool:
        return upward(Import(module, target, Path("x.py"), 1)) is not None

    # down the rooms, within a room, and outside the broker: allowed
    assert not up("dejaq.broker.api.settle", "dejaq.broker.context.BrokerContext")
    assert not up("dejaq.broker.api.settle", "dejaq.broker.api.validation")
    assert not up("dejaq.broker.config", "dejaq.core.errors.InvalidArgument")
    assert not up("dejaq.driver.client", "dejaq.core.model")
    # up the rooms: refused
    assert up("dejaq.broker.context", "dejaq.broker.api.topics.TopicCache")
    assert up("dejaq.broker.config", "dejaq.broker.cluster.endpoints")
    assert up("dejaq.broker.dispatch.dispatcher", "dejaq.broker.context")


def test_the_circle_finder_finds_each_circle_and_only_circles() -> None:
    def imports(*edges: tuple[str, str]) -> list[Import]:
        return [Import(a, b, Path("x.py"), 1) for a, b in edges]

    # a chain and a diamond are no circles; a name imported from a module is the module
    chain = imports(("p.a", "p.b.Name"), ("p.b", "p.c"), ("p.a", "p.c"), ("p.c", "p.d"))
    assert circles(module_graph(chain)) == []
    # two modules importing each other, and a longer circle beside them
    found = circles(
        module_graph(
            imports(
                ("p.a", "p.b.thing"),
                ("p.b", "p.a"),
                ("q.x", "q.y"),
                ("q.y", "q.z.Name"),
                ("q.z", "q.x"),
                ("q.z", "p.a"),
            )
        )
    )
    assert found == [["p.a", "p.b"], ["q.x", "q.y", "q.z"]]
    # a module importing from its own package's __init__ (``from p import a``)
    # names the module, not the package
    assert circles(module_graph(imports(("p", "p.a.f"), ("p.a", "p.b"), ("p.b", "p.a.g")))) == [
        ["p.a", "p.b"]
    ]
