"""The dispatch engine: one ``Dispatcher`` per topic leases what is due and
pushes it to the topic's consumers (``window`` releases each message at its
millisecond, ``rate`` caps a topic's deliveries, ``ranks`` orders a priority
topic, ``outbox`` batches frames to one consumer, ``lateness`` measures how
late each delivery left)."""

import dejaq.core.hotpath  # noqa: F401  (first: DEJAQ_PURE_PYTHON chooses the .py files)
