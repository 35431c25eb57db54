"""Which clock decides "due": the storage server's (``storage_clock``), and the
skew guard that stops a broker whose own clock drifts from the cluster's
(``guard``)."""
