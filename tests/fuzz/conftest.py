"""Hypothesis settings for the fuzz stories, and the live brokers they fuzz.

Under ``CI=true`` the ``ci`` profile runs: derandomized (the same examples on
every run, so a red CI run replays locally with ``CI=true``) and without the
example database. Elsewhere the ``dev`` profile draws fresh examples each run
and remembers failing ones in ``.hypothesis/``. Each test sets its own
``max_examples`` so the whole folder stays within about a minute.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from tests.servers import in_ci

# Examples talk to a live broker: fixtures are module-scoped on purpose, and a
# slow example is the shared 2-core machine, not the code under test.
_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
}
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, **_COMMON)
settings.register_profile("dev", print_blob=True, **_COMMON)
settings.load_profile("ci" if in_ci() else "dev")
