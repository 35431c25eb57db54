"""How many examples a fuzz test draws: its CI budget times ``FUZZ_SCALE``
(default 1). A long local hunt: ``FUZZ_SCALE=50 pytest tests/fuzz``. (Not a
``DEJAQ_`` name: the brokers the tests start refuse unknown ``DEJAQ_`` ones.)"""

from __future__ import annotations

import os


def examples(ci_budget: int) -> int:
    return max(1, round(ci_budget * float(os.environ.get("FUZZ_SCALE", "1"))))
