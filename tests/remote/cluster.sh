#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Start a real Redis Cluster on loopback in a temporary folder (3 masters, each with one
# replica: the failover test needs them), run the remote tests against it, and stop every
# server by its PID (trap: also on failure or interruption).
#   cluster.sh TEST_BINARY [gtest arguments...]
# CXLT_TEST_REDIS_REPLICAS=0 starts the 3 masters alone (benchmarks: no replication traffic).
# Exit 77 (meson: skipped) only when redis-server or redis-cli is missing or cannot start.
set -uo pipefail

test_bin="$1"
shift

skip() { echo "SKIP: $*"; exit 77; }
command -v redis-server >/dev/null 2>&1 || skip "redis-server is not installed (apt-get install redis-server redis-tools; .ci/run installs them)"
command -v redis-cli >/dev/null 2>&1 || skip "redis-cli is not installed (apt-get install redis-tools)"

dir=$(mktemp -d /tmp/cxlt-redis.XXXXXX)
pids=()
cleanup() {
  local p
  local f
  for f in "$dir"/*.pid; do [ -f "$f" ] && pids+=("$(cat "$f")"); done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for t in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  done
  if [ "${CXLT_TEST_KEEP_REDIS:-0}" = 1 ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

replicas=${CXLT_TEST_REDIS_REPLICAS:-1}
nodes=$(( 3 * (1 + replicas) ))
# Free ports P..P+nodes-1 whose cluster-bus ports (P+10000) are free too. Both stay below the
# kernel's ephemeral range: a port there can be the local end of some outgoing connection,
# which a connect test does not see and which makes redis-server fail to bind.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
ephemeral_low=32768
{ read -r lo _ < /proc/sys/net/ipv4/ip_local_port_range; } 2>/dev/null && [ "$lo" -gt 0 ] 2>/dev/null && ephemeral_low=$lo
choices=$(( (ephemeral_low - 10000 - nodes - 20000) / 10 ))
[ "$choices" -ge 10 ] || choices=900  # an unusual range: fall back to the free-port test alone
base=""
for try in $(seq 1 50); do
  b=$(( 20000 + (RANDOM % choices) * 10 ))
  ok=1
  for i in $(seq 0 $((nodes - 1))); do
    port_free $((b + i)) && port_free $((b + i + 10000)) || { ok=0; break; }
  done
  if [ $ok = 1 ]; then base=$b; break; fi
done
[ -n "$base" ] || skip "no $nodes free loopback ports (and bus ports) found"

# start_node PORT: one server with the settings docs/remote.md recommends: bounded memory with
# LFU eviction, no persistence, the cluster keeps serving the slots it has when some are lost.
# A short node timeout makes the failover tests take seconds; a replica takes over however
# stale its copy (a cache), and starts its first sync at once. Restarted with its nodes.conf
# (restart.sh, for tests that kill a master), a server rejoins as a replica of its successor.
start_node() {
  local p="$1"
  mkdir -p "$dir/$p"
  redis-server --port "$p" --bind 127.0.0.1 --dir "$dir/$p" --cluster-enabled yes \
    --cluster-config-file "$dir/$p/nodes.conf" --cluster-node-timeout 1000 \
    --cluster-require-full-coverage no --cluster-allow-reads-when-down no \
    --cluster-replica-validity-factor 0 --repl-diskless-sync-delay 0 \
    --maxmemory 256mb --maxmemory-policy allkeys-lfu --save "" --appendonly no \
    --logfile "$dir/$p/redis.log" >/dev/null 2>&1 &
  pids+=("$!")
  disown "$!"  # no job notices when a test kills one
  echo "$!" > "$dir/$p.pid"
}
ports=()
for i in $(seq 0 $((nodes - 1))); do
  p=$((base + i))
  ports+=("$p")
  start_node "$p"
done
for p in "${ports[@]}"; do
  for t in $(seq 1 100); do
    redis-cli -p "$p" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  redis-cli -p "$p" ping >/dev/null 2>&1 || { tail -n 20 "$dir/$p/redis.log"; skip "redis-server on port $p did not start"; }
done
t0=$(date +%s%N)
hosts=()
for p in "${ports[@]}"; do hosts+=("127.0.0.1:$p"); done
if ! redis-cli --cluster create "${hosts[@]}" --cluster-replicas "$replicas" --cluster-yes >"$dir/create.log" 2>&1; then
  cat "$dir/create.log"
  echo "FAIL: redis-cli --cluster create failed"
  exit 1
fi
for t in $(seq 1 200); do
  good=1
  for p in "${ports[@]}"; do
    redis-cli -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || good=0
  done
  [ $good = 1 ] && break
  sleep 0.1
done
[ $good = 1 ] || { echo "FAIL: the cluster did not reach cluster_state:ok"; exit 1; }
# Replicas must have finished their first sync: a replica that never synced refuses to take
# over (the failover test kills a master), and one still syncing slows the first tests.
if [ "$replicas" != 0 ]; then
  for t in $(seq 1 300); do
    up=0
    for p in "${ports[@]}"; do
      redis-cli -p "$p" info replication 2>/dev/null | grep -q 'master_link_status:up' && up=$((up + 1))
    done
    [ $up -ge 3 ] && break
    sleep 0.1
  done
  [ $up -ge 3 ] || { echo "FAIL: only $up of 3 replicas finished their first sync in 30 s"; exit 1; }
fi
echo "cluster of 3 masters + $((nodes - 3)) replicas on 127.0.0.1:${ports[0]}-${ports[$((nodes - 1))]} ready in $(( ($(date +%s%N) - t0) / 1000000 )) ms ($dir)"

# restart.sh PORT starts a killed server again (same settings, same nodes.conf) and records
# its PID; cleanup below kills every PID recorded in $dir/*.pid.
{
  echo '#!/usr/bin/env bash'
  echo "dir='$dir'"
  declare -f start_node
  echo 'pids=(); start_node "$1"'
} > "$dir/restart.sh"
export CXLT_TEST_REDIS_DIR="$dir"
export CXLT_TEST_REDIS_RESTART="$dir/restart.sh"
export CXLT_TEST_REDIS_SEEDS="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]}"
export CXLT_TEST_REDIS_PORTS="${ports[*]}"
"$test_bin" "$@"
rc=$?
exit $rc
