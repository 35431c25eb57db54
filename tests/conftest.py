"""Settings for the whole test session."""

import os

# Some fixtures fork server tools (pg_ctl as another user) from this process,
# which also runs gRPC clients. gRPC's fork handlers then crash the child now
# and then; the tests never use gRPC in a forked child, so turn them off before
# grpc is first imported.
os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"


import pytest

from tests.certs import Certs, make_certs


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A throwaway CA with server and client certificates (PEM files)."""
    return make_certs(tmp_path_factory.mktemp("certs"))
