"""Limits both ends of the wire agree on."""

# The largest gRPC message either side sends or accepts.
MAX_FRAME_BYTES = 64 << 20
