#!/usr/bin/env bash
# run_ha.sh - `make run-ha`: the service over a Redis that Sentinel fails over.
#
# Starts a private master, two replicas of it and three Redis Sentinels that
# watch it as "mymaster" (quorum 2), all on 127.0.0.1 only, ports from
# $MARKET_HA_PORT (default 6390) up, skipping taken ones: the master, the
# replicas, then the Sentinels. Two replicas, so that with --min-replicas-ack 1
# the service keeps serving through a failover: the replica not promoted confirms
# commits to the new master while the old one is away. Each keeps its config, data
# (AOF) and log under var/ha/<node0..2|sentinel0..2>/, made afresh at every start (processes
# that an earlier run-ha of this checkout left behind are stopped first: a
# pidfile in var/ha names a live process working in that folder; a run-ha of
# this checkout that is still running makes this one stop at once). Seeds
# fixtures/demo.json through the Sentinel URL, prints how to watch and cause a
# failover, and runs
#   market-server --redis URL --lock-redis URL --min-replicas-ack 1
# with URL redis-sentinel://market:PASS@127.0.0.1:S0,127.0.0.1:S1,127.0.0.1:S2/mymaster:
# the service connects as the Redis user `market`, made on both nodes from
# deploy/redis/market.acl with a password drawn at each start (var/ha/market.pass), which
# may run only the service's commands on its keys. The default user (no password, loopback
# only) stays the administrator's: the seed, make load, redis-cli and the Sentinels use it.
# Ctrl-C (or a TERM to this script) stops the server, then every Redis and
# Sentinel it started, wherever the failovers left the roles.
#
# Environment: MARKET_LISTEN (127.0.0.1:8080), MARKET_HA_PORT (6390),
# MARKET_HA_DOWN_AFTER_MS (3000; keep it well above Sentinel's 1 s PING
# period, or a master it has just switched to can look down before its first
# PING is answered) and MARKET_HA_FAILOVER_TIMEOUT_MS (6000) for the
# Sentinels, MARKET_AUTH_SECRET / MARKET_NO_AUTH=1 as for make run, BIN (bin).
# Other MARKET_* variables and any arguments go to market-server. The
# server's log is var/log/market-server-ha.log (the last one kept as .1).
set -eu
cd "$(dirname "$0")/.."
# shellcheck source=scripts/common.sh
. scripts/common.sh
BIN=${BIN:-bin}
LISTEN=${MARKET_LISTEN:-127.0.0.1:8080}
BASE=${MARKET_HA_PORT:-6390}
DOWN_AFTER=${MARKET_HA_DOWN_AFTER_MS:-3000}
FAILOVER_TIMEOUT=${MARKET_HA_FAILOVER_TIMEOUT_MS:-6000}
NAME=mymaster
HA="$PWD/var/ha"
NODES="node0 node1 node2"
SENTINELS="sentinel0 sentinel1 sentinel2"
RUN_PID="$HA/run-ha.pid"
fifo_dir=""
server=""
owner=0 # 1 once this run owns var/ha

die() {
    echo "run-ha: $*" >&2
    exit 1
}

for v in "$BASE" "$DOWN_AFTER" "$FAILOVER_TIMEOUT"; do
    case $v in '' | *[!0-9]*) die "MARKET_HA_PORT, MARKET_HA_DOWN_AFTER_MS and MARKET_HA_FAILOVER_TIMEOUT_MS are whole numbers ('$v')" ;; esac
done
for b in market-server market-seed; do
    [ -x "$BIN/$b" ] || die "$BIN/$b is missing (run make build)"
done
command -v redis-sentinel >/dev/null || die "redis-sentinel is missing (scripts/deps.sh installs it)"

# The pid in var/ha/$1/redis.pid when that process is alive and works in var/ha/$1
# (a Redis chdirs to its dir), else nothing: a pid reused by another program is not ours.
our_pid() {
    local pid
    pid=$(cat "$HA/$1/redis.pid" 2>/dev/null) || return 0
    case $pid in '' | *[!0-9]*) return 0 ;; esac
    [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$HA/$1" ] && echo "$pid"
    return 0
}

# Stops the process of var/ha/$1 if it runs: TERM, then KILL after 3 s (a node in
# DEBUG SLEEP handles TERM only when it wakes up). Gone means no cwd any more: an
# exited daemon may stay a zombie for a while where init reaps slowly.
stop_one() {
    local pid i
    pid=$(our_pid "$1")
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 30); do
        [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$HA/$1" ] || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

stop_all() {
    local n
    for n in $SENTINELS $NODES; do stop_one "$n"; done # Sentinels first: no failover as the nodes go
}

# Whether a make run-ha of this checkout other than this one is running now.
run_alive() {
    local pid
    pid=$(cat "$RUN_PID" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ "$pid" != "$$" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q 'run_ha\.sh'
}

# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    [ "$owner" = 1 ] || return 0 # another run-ha's processes are not ours to stop
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
        kill -TERM "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    stop_all
    [ -z "$fifo_dir" ] || rm -rf "$fifo_dir"
    rm -f "$RUN_PID"
    if [ "$(sed -n 's/^pid=//p' var/run.env 2>/dev/null)" = "$$" ]; then rm -f var/run.env; fi
}
trap cleanup EXIT
trap 'exit 130' INT # while starting; serving, they stop the server (below)
trap 'exit 143' TERM
trap 'exit 129' HUP

listen_split "$LISTEN"

# ---- the ports: the service's must be free; Redis ones are picked free ----

if run_alive; then
    die "make run-ha is already running from this checkout (pid $(cat "$RUN_PID")); stop it first (Ctrl-C in its terminal)"
fi
mkdir -p "$HA"
echo "$$" >"$RUN_PID" || die "cannot write $RUN_PID"
owner=1
stale=""
for n in $NODES $SENTINELS; do
    p=$(our_pid "$n")
    [ -z "$p" ] || stale="$stale $p"
done
if [ -n "$stale" ]; then
    echo "run-ha: stopping what an earlier make run-ha left running (pids$stale)"
    stop_all
fi
if [ "$port" != 0 ] && port_taken "$probe_host" "$port"; then
    die "$LISTEN is taken: something already listens there (make run's, or another make run-ha's market-server?).
     Serve on another address with MARKET_LISTEN, e.g. MARKET_LISTEN=$host:$((port + 1)) make run-ha"
fi

ports=""
next=$BASE
for n in $NODES $SENTINELS; do
    tries=0
    while port_taken 127.0.0.1 "$next"; do
        next=$((next + 1))
        tries=$((tries + 1))
        [ "$tries" -lt 100 ] || die "no free port from $BASE up (MARKET_HA_PORT)"
    done
    ports="$ports $next"
    next=$((next + 1))
done
# shellcheck disable=SC2086 # word splitting wanted
set -- $ports "$@"
P0=$1 P1=$2 P2=$3 S0=$4 S1=$5 S2=$6
shift 6
URL="redis-sentinel://127.0.0.1:$S0,127.0.0.1:$S1,127.0.0.1:$S2/$NAME"
# The service's Redis user (deploy/redis/market.acl), with a fresh password each start.
[ -r deploy/redis/market.acl ] || die "deploy/redis/market.acl is missing"
ACL_RULES=$(sed 's/#.*//' deploy/redis/market.acl | tr '\t\n' '  ' | tr -s ' ')
MARKET_PASS=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
(umask 077 && echo "$MARKET_PASS" >"$HA/market.pass") || die "cannot write $HA/market.pass"
SURL="redis-sentinel://market:$MARKET_PASS@127.0.0.1:$S0,127.0.0.1:$S1,127.0.0.1:$S2/$NAME"

# ---- the data nodes: config files, so a node killed with -9 starts again with
# redis-server var/ha/nodeN/redis.conf (and one that Sentinel made a replica,
# which rewrites the file, comes back a replica) ----

for n in $NODES $SENTINELS; do
    rm -rf "${HA:?}/$n"
    mkdir -p "$HA/$n"
done

node_conf() { # $1 node, $2 port, $3 "replicaof host port" or ""
    (umask 077 && cat >"$HA/$1/redis.conf") <<CONF
# written by scripts/run_ha.sh (make run-ha); Sentinel may rewrite it
port $2
bind 127.0.0.1
protected-mode yes
dir $HA/$1
daemonize yes
pidfile $HA/$1/redis.pid
logfile $HA/$1/redis.log
appendonly yes
appendfsync always
save ""
repl-diskless-sync-delay 0
enable-debug-command local
user market on >$MARKET_PASS $ACL_RULES
$3
CONF
}
node_conf node0 "$P0" ""
node_conf node1 "$P1" "replicaof 127.0.0.1 $P0"
node_conf node2 "$P2" "replicaof 127.0.0.1 $P0"

# Waits until `redis-cli -p $2 $4...` prints a line matching the regex $3; $1 says what for.
wait_for() {
    local what=$1 port=$2 re=$3 i
    shift 3
    for i in $(seq 300); do
        redis-cli -h 127.0.0.1 -p "$port" "$@" 2>/dev/null | grep -Eq "$re" && return 0
        sleep 0.1
    done
    die "$what did not come up in 30 s (see var/ha/*/redis.log)"
}

for n in $NODES; do
    redis-server "$HA/$n/redis.conf" || die "redis-server did not start (see var/ha/$n/redis.log)"
done
wait_for "the master on $P0" "$P0" '^PONG$' ping
wait_for "the replica on $P1" "$P1" '^master_link_status:up' info replication
wait_for "the replica on $P2" "$P2" '^master_link_status:up' info replication

# ---- the Sentinels ----

i=0
for sp in $S0 $S1 $S2; do
    n=sentinel$i
    cat >"$HA/$n/sentinel.conf" <<CONF
# written by scripts/run_ha.sh (make run-ha); Sentinel rewrites it
port $sp
bind 127.0.0.1
dir $HA/$n
daemonize yes
pidfile $HA/$n/redis.pid
logfile $HA/$n/sentinel.log
sentinel monitor $NAME 127.0.0.1 $P0 2
sentinel down-after-milliseconds $NAME $DOWN_AFTER
sentinel failover-timeout $NAME $FAILOVER_TIMEOUT
sentinel parallel-syncs $NAME 1
CONF
    redis-sentinel "$HA/$n/sentinel.conf" || die "redis-sentinel did not start (see var/ha/$n/sentinel.log)"
    i=$((i + 1))
done
# Ready when each sees the master up, knows both replicas and the two other
# Sentinels (hello messages go every 2 s): else the first failover may find no quorum.
sentinel_field() { # $1 Sentinel port, $2 field of SENTINEL master
    redis-cli -h 127.0.0.1 -p "$1" sentinel master "$NAME" 2>/dev/null |
        awk -v k="$2" 'NR % 2 == 1 && $0 == k { getline v; print v; exit }'
}
for sp in $S0 $S1 $S2; do
    for i in $(seq 300); do
        [ "$(sentinel_field "$sp" flags)" = master ] &&
            [ "$(sentinel_field "$sp" num-slaves)" = 2 ] &&
            [ "$(sentinel_field "$sp" num-other-sentinels)" = 2 ] && break
        [ "$i" -lt 300 ] || die "the Sentinel on $sp did not meet the replicas and the other Sentinels in 30 s (see var/ha/sentinel*/sentinel.log)"
        sleep 0.1
    done
done
pid0=$(our_pid node0)
pid1=$(our_pid node1)
pid2=$(our_pid node2)
echo "run-ha: master 127.0.0.1:$P0 (pid $pid0), replicas 127.0.0.1:$P1 (pid $pid1) and 127.0.0.1:$P2 (pid $pid2), Sentinels on $S0 $S1 $S2 (var/ha)"

# ---- the demo world, written through the Sentinel group ----

noauth=""
# shellcheck disable=SC2016 # printed for the user's shell to expand
secret='"$MARKET_AUTH_SECRET"'
secret_from="env" # for var/run.env, as scripts/run.sh writes it
if [ "${MARKET_NO_AUTH:-0}" = 1 ]; then
    noauth="--no-auth"
    secret_from="none"
elif [ -z "${MARKET_AUTH_SECRET:-}" ]; then
    secret_from="file"
    # shellcheck disable=SC2016
    secret='"$(cat var/auth-secret)"'
    if [ ! -s var/auth-secret ]; then
        mkdir -p var
        (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >var/auth-secret)
        echo "run-ha: made an auth secret in var/auth-secret"
    fi
    MARKET_AUTH_SECRET=$(cat var/auth-secret)
    export MARKET_AUTH_SECRET
fi

"$BIN/market-seed" --redis "$URL" --reset fixtures/demo.json || die "seeding through $URL failed"

# Where this run serves, for `make load`, as scripts/run.sh writes it (mode 0600).
mkdir -p var
(umask 077 && cat >var/run.env <<ENV) || die "cannot write var/run.env"
# written by scripts/run_ha.sh while make run-ha serves; read by make load
pid=$$
listen=$LISTEN
redis=$URL
secret=$secret_from
log=var/log/market-server-ha.log
ENV

url="http://$LISTEN"
log=var/log/market-server-ha.log
if [ -n "$noauth" ]; then
    auth=""
    token_line=""
    tokens="  Authentication is off (MARKET_NO_AUTH)."
else
    auth="-H \"Authorization: Bearer \$TOKEN\" "
    # The command, not a token: a token (a JWT) expires an hour after it is made.
    token_line="  TOKEN=\$($BIN/market-seed --auth-secret $secret --print-token B)
"
    tokens="  TOKEN is B's, valid for an hour. Any player's: bin/market-seed --auth-secret $secret --print-token A"
fi
cat <<MSG

market-server on $url over a Sentinel group  (Ctrl-C stops it all; request log: $log)
  $URL, as the Redis user market (deploy/redis/market.acl)
  node0 127.0.0.1:$P0 starts as master (pid $pid0), node1 127.0.0.1:$P1 (pid $pid1) and
  node2 127.0.0.1:$P2 (pid $pid2) as its replicas
  Sentinels on $S0, $S1, $S2 (down-after ${DOWN_AFTER} ms); data, configs and logs in var/ha/
  The server waits for 1 replica to confirm each commit (--min-replicas-ack 1).

Watch it, from another terminal:
  curl -s $url/healthz
  curl -s $url/metrics
  redis-cli -p $S0 SENTINEL get-master-addr-by-name $NAME     # who is master now
  redis-cli -p $P0 ROLE; redis-cli -p $P1 ROLE; redis-cli -p $P2 ROLE
  tail -f var/ha/sentinel0/sentinel.log                     # +sdown, +odown, +switch-master
$token_line  curl -s -X POST $url/purchase $auth-d '{"buyer":"B","seller":"A","item":"axe"}'
$tokens

Cause a failover. The master is node0 on $P0 now; after a failover it is node1 or node2.
With two replicas and --min-replicas-ack 1, the service keeps serving once a replica is
promoted: the other one confirms each commit, while the old master is down or catching up.
  # the master hangs 30 s: Sentinel promotes a replica ${DOWN_AFTER} ms and an election later
  redis-cli -p $P0 DEBUG SLEEP 30
  # or the master dies (a node's pid: cat var/ha/node0/redis.pid) ...
  kill -9 $pid0
  # ... and comes back from its AOF a master, until Sentinel makes it a replica
  redis-server var/ha/node0/redis.conf
  # or a switchover, both nodes up
  redis-cli -p $S0 SENTINEL FAILOVER $NAME

MSG

# ---- the service: in the background, so that a TERM or Ctrl-C to this script
# stops it gracefully (a background job ignores the terminal's Ctrl-C itself) ----

mkdir -p var/log
[ ! -f "$log" ] || mv -f "$log" "$log.1"
fifo_dir=$(mktemp -d -t gm-run-ha.XXXXXX) || die "mktemp failed"
mkfifo "$fifo_dir/log" || die "mkfifo failed"
tee -a "$log" <"$fifo_dir/log" | grep --line-buffered -v ' msg=request ' >&2 &
filter=$!
# shellcheck disable=SC2086 # $noauth is one word or none
"$BIN/market-server" --listen "$LISTEN" $noauth --redis "$SURL" --lock-redis "$SURL" \
    --min-replicas-ack 1 "$@" 2>"$fifo_dir/log" &
server=$!
trap 'kill -TERM "$server" 2>/dev/null || true' INT TERM
status=0
while :; do
    if wait "$server"; then status=0; else status=$?; fi
    kill -0 "$server" 2>/dev/null || break # else a trap interrupted the wait
done
server=""
wait "$filter" || true
[ "$status" -eq 0 ] || echo "run-ha: market-server exited $status (its log: $log)" >&2
exit "$status"
