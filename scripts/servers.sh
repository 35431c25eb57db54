# Sourced by test.sh: install the server binaries the tests start, and Java for
# Spark (Debian packages), when they are missing. Under CI=true a failed install is fatal;
# locally the tests that need a missing server are skipped instead.
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v etcd >/dev/null || need+=(etcd-server)
command -v promtool >/dev/null && command -v prometheus >/dev/null || need+=(prometheus)
command -v pg_ctl >/dev/null || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || need+=(postgresql)
command -v java >/dev/null || need+=(openjdk-17-jre-headless)  # Spark (tests/spark, benchmarks)
command -v faketime >/dev/null || need+=(faketime)  # a broker with a shifted clock (tests/cluster)
command -v node >/dev/null || need+=(nodejs)  # the Node.js client of the HTTP API (tests/e2e)
command -v chromium >/dev/null || need+=(chromium)  # the web console in a real browser (tests/e2e)
command -v nats-server >/dev/null || need+=(nats-server)  # JetStream ends of bridges (tests/bridges)
command -v rabbitmq-server >/dev/null || need+=(rabbitmq-server)  # RabbitMQ ends of bridges (tests/bridges)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }; then
      [ "${CI:-}" = "true" ] && { echo "could not install ${need[*]}"; exit 1; }
    fi
  elif [ "${CI:-}" = "true" ]; then
    echo "CI needs ${need[*]} and cannot install them (not root or no apt-get)"; exit 1
  else
    echo "== ${need[*]} missing: their tests will be skipped"
  fi
fi
# Debian keeps the PostgreSQL server binaries off PATH.
for d in /usr/lib/postgresql/*/bin; do [ -d "$d" ] && PATH="$PATH:$d"; done
export PATH
source "$(dirname "${BASH_SOURCE[0]}")/container-tools.sh"  # podman, buildah, runc, debootstrap: the image tests
