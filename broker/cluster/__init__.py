"""A cluster of stateless brokers coordinated through etcd.

``etcd_coordinator`` is the ``Coordinator`` a broker runs with ``--etcd``; the
other modules are its parts, each pure or nearly so: ``keys`` (the etcd key
layout), ``endpoints`` (parsing ``--etcd``), ``membership`` (the watched view),
``assignment`` (who owns which bucket), ``hints`` (cross-broker wake-ups),
``skew`` (clock drift), ``events`` (what the coordinator tells the broker) and
``status`` (the ClusterStatus RPC). Nothing here imports ``aetcd`` at import
time: it is the optional ``[etcd]`` extra.
"""
