#!/usr/bin/env bash
# A demo cluster on loopback: etcd and three brokers sharing one storage (a
# SQLite file by default). Prints the addresses and what to try; Ctrl-C stops
# everything (brokers first, gracefully, then etcd).
#
#   deploy/local-cluster.sh [--storage URL] [--dir DIR] [--etcd-port PORT]
#                           [--ports 7701,7702,7703] [--cluster NAME]
#
# Needs the etcd server binary (Debian: apt-get install etcd-server) and the
# [etcd] extra (pip install 'dejaq-timeline[etcd]'; scripts/bootstrap.sh has it).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$ROOT/dejaq-data/local-cluster"
storage=""
etcd_port=2379
ports="7701,7702,7703"
cluster="local"
START_TIMEOUT_S=20

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --storage) storage="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --etcd-port) etcd_port="$2"; shift 2 ;;
    --ports) ports="$2"; shift 2 ;;
    --cluster) cluster="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "unknown option $1" >&2; usage 2 >&2 ;;
  esac
done

command -v etcd >/dev/null || { echo "etcd is not installed (Debian: apt-get install etcd-server)" >&2; exit 1; }
if ! command -v dejaq >/dev/null; then
  source "$ROOT/scripts/bootstrap.sh"  # .venv with dejaq and its dev extras
fi
python3 -c 'import aetcd' 2>/dev/null || python -c 'import aetcd' 2>/dev/null || {
  echo "the etcd client is missing: pip install 'dejaq-timeline[etcd]'" >&2; exit 1; }

mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
storage="${storage:-sqlite:///$dir/dejaq.db}"
etcd_url="http://127.0.0.1:$etcd_port"
IFS=, read -r -a broker_ports <<< "$ports"
pids=()

stop_all() {
  trap - EXIT
  echo
  echo "stopping..."
  # Brokers first (each leaves the cluster at once), etcd last.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[$i]}" 2>/dev/null || true
    wait "${pids[$i]}" 2>/dev/null || true
  done
  echo "stopped; logs and data in $dir"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# Wait (bounded) until a command succeeds.
wait_for() {
  local what="$1"; shift
  local deadline=$((SECONDS + START_TIMEOUT_S))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then echo "$what did not start; see $dir" >&2; exit 1; fi
    sleep 0.1
  done
}

peer="http://127.0.0.1:$((etcd_port + 1))"
etcd --name default --data-dir "$dir/etcd" \
  --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
  --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
  --initial-cluster "default=$peer" \
  --auto-compaction-mode revision --auto-compaction-retention 10000 >"$dir/etcd.log" 2>&1 &
pids=("$!")
wait_for "etcd" python3 -c "import urllib.request; urllib.request.urlopen('$etcd_url/health', timeout=1)"

addresses=()
for port in "${broker_ports[@]}"; do
  log="$dir/broker-$port.log"
  dejaq broker --listen "127.0.0.1:$port" --storage "$storage" \
    --etcd "$etcd_url" --cluster "$cluster" >"$log" 2>&1 &
  pids+=("$!")
  addresses+=("127.0.0.1:$port")
done
for port in "${broker_ports[@]}"; do
  wait_for "the broker on port $port" grep -q "dejaq broker listening" "$dir/broker-$port.log"
done

all="$(IFS=,; echo "${addresses[*]}")"
cat <<EOF

dejaq cluster '$cluster' is up
  etcd     $etcd_url
  brokers  ${addresses[*]}
  storage  $storage
  logs     $dir/*.log

In another terminal (clients fail over along the DEJAQ_BROKER list):
  export DEJAQ_BROKER=$all
  dejaq topic create demo
  dejaq consume demo --broker ${addresses[1]} &            # a consumer on the second broker
  dejaq produce demo --broker ${addresses[0]} --in 2s hi   # produced on the first
  dejaq cluster status                          # brokers, clock skew, consumers, buckets

Kill a broker with kill -9 (pids: ${pids[*]:1}) and watch 'dejaq cluster status':
its consumers' buckets move to the others within a few seconds.
Ctrl-C stops everything.
EOF
# Until Ctrl-C (brokers may be killed and restarted meanwhile; etcd must stay).
wait "${pids[0]}" || true
echo "etcd exited; see $dir/etcd.log" >&2
