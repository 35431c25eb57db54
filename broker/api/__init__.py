"""The RPC side: the gRPC Timeline service, the handler of each call
(produce, consume, control, scan, settle), the checks of what a caller sends
(``validation``), and what those handlers keep (the topic cache, the open
stream slots, the ids the broker generates)."""
