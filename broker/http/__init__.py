"""The HTTP/JSON surface (``--http``): the Timeline calls as JSON over HTTP,
served in the broker's event loop through the same handlers as gRPC."""
