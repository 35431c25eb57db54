"""A cluster of stateless brokers coordinated through etcd.

``etcd_coordinator`` is the ``Coordinator`` a broker runs with ``--etcd``. It
joins ``session`` (staying present in etcd: lease, heartbeat, writes, watch,
riding out outages) and ``view`` (applying what the watch shows). The other
modules are their parts, each pure or nearly so: ``keys`` (the etcd key
layout), ``endpoints`` (parsing ``--etcd``), ``etcd_access`` (TLS files and
credentials towards etcd), ``etcd_client`` (aetcd's client over TLS, loaded
lazily), ``membership`` (the watched
brokers and consumers), ``assignment`` (who owns which bucket), ``registrar``
(this broker's consumer keys), ``hints`` (cross-broker wake-ups), ``skew``
(clock drift), ``events`` (what the coordinator tells the broker) and
``status`` (the ClusterStatus RPC). Nothing here imports ``aetcd`` at import
time: it is the optional ``[etcd]`` extra.
"""
