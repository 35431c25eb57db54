"""Reference pages that must follow the code they describe."""

from __future__ import annotations

import dataclasses
import re

from dejaq.broker.config import BrokerConfig
from tests.deploy.podman import ULIMITS
from tests.docs.examples import ROOT, blocks, pages


def test_the_configuration_page_names_every_broker_setting() -> None:
    """Given the broker's typed config, then each of its DEJAQ_* variables is on the page."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    missing = [
        f"DEJAQ_{f.name.upper()}"
        for f in dataclasses.fields(BrokerConfig)
        if f"DEJAQ_{f.name.upper()}" not in page
    ]
    assert missing == []


def test_the_chart_readme_points_to_the_kubernetes_page_and_repeats_nothing() -> None:
    chart = (ROOT / "deploy" / "helm" / "dejaq" / "README.md").read_text()
    assert "docs/kubernetes.md" in chart
    assert "helm install" not in chart and "| key |" not in chart


def test_the_readme_stays_a_front_door() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


def test_every_link_of_the_readme_leads_to_a_file() -> None:
    """The docs build checks the links of docs/; this checks the README's."""
    readme = (ROOT / "README.md").read_text()
    links = [t for t in re.findall(r"\]\(([^)#\s]+)\)", readme) if "://" not in t]
    assert links
    assert [t for t in links if not (ROOT / t).exists()] == []


def test_the_storage_page_gives_each_store_s_current_format_version() -> None:
    """Given the format versions the plugins write, then the page's table says them."""
    from dejaq.storage_plugins.redis.keys import FORMAT_VERSION
    from dejaq.storage_plugins.sqlite.sql import SCHEMA_VERSION

    page = (ROOT / "docs" / "storage.md").read_text()
    rows = {
        cells[0]: cells[2]
        for line in page.splitlines()
        if line.startswith("| ")
        and len(cells := [c.strip() for c in line.strip("|").split("|")]) == 4
    }
    assert rows["Redis, Redis Cluster"] == str(FORMAT_VERSION)
    assert rows["SQLite"] == str(SCHEMA_VERSION)


# How a page's examples create a topic: the CLI, the driver, or HTTP (POST or PUT).
CREATES = re.compile(
    r"dejaq topic create ([a-z][\w.-]*)|create_topic\(\s*\"([\w.-]+)\""
    r"|/v1/topics -d '\{\"name\": \"([\w.-]+)\""
    r"|-X PUT \S+/v1/topics/([\w.-]+)"
)


def test_each_page_creates_topics_of_its_own() -> None:
    """Given the pages' examples followed one after another against one broker,
    then no topic is created twice (which would stop the second page at
    ALREADY_EXISTS)."""
    makers: dict[str, set[str]] = {}
    for page in pages():
        for block in blocks(page):
            for match in CREATES.finditer(block.text):
                name = next(g for g in match.groups() if g)
                makers.setdefault(name, set()).add(block.page)
    assert len(makers) >= 10, makers  # the pattern still finds the pages' topics
    assert {name: sorted(p) for name, p in makers.items() if len(p) > 1} == {}


def test_the_kubernetes_page_runs_the_image_with_the_ulimits_it_is_tested_with() -> None:
    """Given hosts whose hard limits are below podman's defaults, then the page's
    podman run gives the limits the image's own tests run it with."""
    page = (ROOT / "docs" / "kubernetes.md").read_text()
    flags = " ".join(ULIMITS)
    assert [b for b in blocks(ROOT / "docs" / "kubernetes.md") if flags in b.text]
    assert "ulimit -Hn" in page and "ulimit -Hu" in page


def test_the_contributing_page_says_where_the_built_site_lands() -> None:
    """Given the site_dir of mkdocs.yml, then the contributing page names it and how to view it."""
    site_dir = re.search(r"^site_dir: (\S+)$", (ROOT / "mkdocs.yml").read_text(), re.MULTILINE)
    assert site_dir is not None
    page = (ROOT / "docs" / "contributing.md").read_text()
    assert f"`{site_dir.group(1)}/index.html`" in page and "scripts/docs.sh --serve" in page
    assert "--serve" in (ROOT / "scripts" / "docs.sh").read_text()
