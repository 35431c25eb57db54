"""Wire conversion: protobuf and FlatBuffers <-> the model, errors <-> gRPC status.

Kept apart from the pure model so that storage never sees the wire."""

import dejaq.core.hotpath  # noqa: F401  (first: DEJAQ_PURE_PYTHON chooses the .py files)
