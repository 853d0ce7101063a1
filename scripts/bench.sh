#!/usr/bin/env bash
# bench.sh - `make bench`: purchases/s, latency, and Redis and server cost per lock strategy.
#
# Starts its own redis-server (free loopback port, temp dir, no persistence),
# and for each strategy one bin/market-server (--strategy S --log-level warn,
# everything else default). For each mix (distinct, contended) and each
# number of buyers (1, 8, 64) it reseeds the same generated world and runs
# bin/market-load for BENCH_SECONDS, keeping every JSON report under
# bench/raw/ (and the server's CPU time around the run, raw/<run>.cpu). It also records the server's VmRSS after start, after the
# 64-buyer runs and while 256 idle keep-alive connections are open, then
# writes bench/results.md and bench/results.png (gnuplot). Then (BENCH_HA=1) it
# makes its Redis the master of a Sentinel group (two replicas, three
# Sentinels) and runs 64 distinct buyers against `--strategy market` with and
# without `--min-replicas-ack 1` (see below). Every process it started is
# stopped by PID on exit.
#
#   scripts/bench.sh
#   BENCH_SECONDS=3 BENCH_STRATEGIES=market scripts/bench.sh     # quick
#   BENCH_PEERS=SCRIPT scripts/bench.sh # then also the peer benchmarks (see below)
#   BENCH_STRATEGIES= BENCH_HA=0 BENCH_CLUSTER=0 BENCH_OUT=/tmp/b scripts/bench.sh  # search only
#
# Environment: BENCH_SECONDS (10), BENCH_STRATEGIES ("market item optimistic"; empty: none),
# BENCH_LEVELS ("1 8 64"), BENCH_MIXES ("distinct contended"),
# BENCH_WORLD (players=10000,items=400000,funds=1000000000), BENCH_OUT (bench),
# BENCH_HA (1; 0 skips the --min-replicas-ack section), BENCH_HA_RUNS (3 of each
# configuration), BENCH_HA_BUYERS (64), BENCH_FSYNC (1; 0 skips the appendfsync section),
# BENCH_FSYNC_RUNS (2 of each setting), BENCH_FSYNC_LEVELS ("1 64"), BENCH_HISTORY (1; 0 skips
# the price history section), BENCH_HISTORY_RUNS (3 of each setting), BENCH_CLUSTER (1; 0 skips
# the cluster section), BENCH_CLUSTER_REALMS
# (12), BENCH_SEARCH (1; 0 skips the search section), BENCH_SEARCH_SIZES ("1000 1000000"),
# BENCH_SEARCH_REQUESTS (2000), BENCH_FLASH (1; 0 skips the flash sale), BENCH_FLASH_BUYERS
# (1000), BENCH_FLASH_STOCK (10000), BENCH_BOOK (1; 0 skips the book), BENCH_BOOK_WORLD
# (players=2000,items=0,goods=20,orders=2000,prices=100-1000,funds=1000000), BENCH_BOOK_BUYERS
# (64), BENCH_ENDS (1; 0 skips the listings that end), BENCH_ENDS_WORLD
# (players=1000,items=10000,funds=1000), BENCH_ENDS_IN (8), BENCH_PEERS (none), BIN (bin).
#
# The world gives every player funds for the whole market: the contended mix
# sends its purchases as the N poorest players, and with too little they run
# out within seconds, every strategy stops at the same count, and the rows
# measure the fixture rather than the lock.
#
# BENCH_HA=1 (the default), after the strategies: makes the bench's Redis the
# master of a Sentinel group as users run one: two replicas (`--replicaof`,
# free ports, no persistence) and three redis-sentinels (free ports, configs in
# the temp dir, `sentinel monitor benchmaster 127.0.0.1 <port> 2`,
# down-after-milliseconds 60000 so that none fails it over during the bench).
# Once the master lists both replicas online and every Sentinel lists both
# (SENTINEL REPLICAS: flags slave, master-link-status ok) and the two other
# Sentinels, it runs `market-load --buyers BENCH_HA_BUYERS --mix distinct` against
# `--strategy market` (noack) and `--strategy market --min-replicas-ack 1`
# (ack1: every commit followed by a WAIT for every replica the Sentinels could
# promote, here `WAIT 2`), alternately, BENCH_HA_RUNS (3) times each: noack,
# ack1, noack, ack1, ... Server and load get `--redis redis-sentinel://<the
# three Sentinels>/benchmaster`; the world is reseeded and the replicas catch
# up before each run. Then a short ack1 run (8 buyers, 500 purchases) under
# `redis-cli MONITOR` on the master counts the WAITs by numreplicas (too heavy
# during the timed runs). Reports raw/ha-<noack|ack1>-<run>.json, raw/ha.tsv
# (replicas online and seen by every Sentinel before/after each run, the master
# after it), raw/ha-wait.tsv, results.md section "Acknowledged means
# replicated": each run, the median of each configuration, ack1/noack of the
# medians.
#
# BENCH_FSYNC=1 (the default), after the strategies: what a durable store costs. The bench's
# Redis keeps an append-only file for these runs alone (CONFIG SET appendonly yes, in its temp
# dir, after the reseed and its AOF rewrite), with `appendfsync always` (a write is in the file
# and fsynced before it is answered) and `everysec` (Redis's default, which can answer writes
# it then loses: OPERATIONS.md, Durability), alternated, BENCH_FSYNC_RUNS (2) times each, at
# each of BENCH_FSYNC_LEVELS ("1 64") distinct buyers against `--strategy market`. Reports
# raw/fsync-<always|everysec>-<buyers>-<run>.json, raw/fsync.tsv, results.md section
# "Durability: appendfsync always against everysec": the medians and always/everysec.
#
# BENCH_HISTORY=1 (the default), after that: what the price history costs. 64 buyers of a
# flash sale (every buy a trade of a stackable good, so every commit writes the good's
# candles) against a server with the history on, then one with --no-price-history,
# alternated, BENCH_HISTORY_RUNS (3) times each. Reports raw/history-<on|off>-<run>.json,
# raw/history.tsv, results.md section "The price history: on against off": the medians
# (purchases/s, p99, Redis and server CPU per purchase) and on/off.
#
# BENCH_CLUSTER=1 (the default), after that: starts a Redis Cluster of three masters
# (cluster-enabled redis-servers on free ports, no replicas, joined with `redis-cli --cluster
# create`), and runs the same load twice, 64 buyers over BENCH_CLUSTER_REALMS realms (12),
# distinct mix, `--strategy market`: once with the world (market-seed --generate realms=...)
# on the bench's single Redis, once on the cluster (`--redis redis-cluster://...`). Reports
# raw/cluster-single.json and raw/cluster-cluster.json, results.md section "Redis Cluster":
# purchases/s of each and their ratio, Redis commands per purchase, and each master's share
# of the commands (market-load reads INFO commandstats of every master).
#
# BENCH_SEARCH=1 (the default), after that: for each size in BENCH_SEARCH_SIZES, seeds a
# world of that many listings (`market-seed --reset --generate players=N/100,items=N`,
# prices 1-1000, timed), starts `market-server` on it, and times BENCH_SEARCH_REQUESTS
# requests of each kind, one at a time over one keep-alive connection (python3
# http.client, after 100 of warm-up): `GET /market?item=<a random listed item>`,
# `?min_price=X&max_price=X+99&limit=50` (X random), `?seller=<random>&limit=50`, a page
# 90% deep by cursor (`?limit=50&cursor=...`, the cursor of market:{main}'s listing there) and the
# same page by offset (`?limit=50&offset=0.9N`). Reports raw/search.tsv and results.md
# section "Search": median and p99 ms per kind and size, the seeding time and Redis memory.
#
# BENCH_FLASH=1 (the default), after that: a flash sale. Reseeds the world, starts
# `--strategy market` (with --per-ip-connections 0: every buyer comes from 127.0.0.1), and runs
# `market-load --mix flash --buyers BENCH_FLASH_BUYERS (1000) --sale-stock BENCH_FLASH_STOCK
# (10000)`: market-load creates the sale, its buyers all buy one unit a request until it is sold
# out. Reports raw/flash.json, results.md section "Flash sale": time to sell out, purchases/s,
# p50/p99, oversold and limit violations (both must be 0).
#
# BENCH_BOOK=1 (the default), after that: the book. Reseeds BENCH_BOOK_WORLD (goods with
# listings and resting buy orders), starts `--strategy market`, and runs `market-load --mix book
# --buyers BENCH_BOOK_BUYERS (64)` for BENCH_SECONDS: buy orders, sales into the book, cancels
# and lists. Reports raw/book.json (and the server's CPU, raw/book.cpu), results.md section
# "The book": requests/s, fills/s, p50/p99, Redis and server cost per request.
#
# BENCH_ENDS=1 (the default), after that: listings that end. For each case, calm and then
# kill, reseeds BENCH_ENDS_WORLD (players=1000,items=10000,funds=1000) with every listing ending
# BENCH_ENDS_IN (8) seconds after the seed (`market-seed --generate ...,ends=S`: all at the same
# millisecond), starts three `--strategy market` servers with their default sweepers, and
# polls the store's `market:{main}:ends` every 20 ms until it is empty. In the kill case the
# server that settles first (its settlement histogram's count rises) is killed (-9) then. It
# reads the servers' `market_settlement_lag_seconds` histograms (the survivors') and reports
# raw/ends-<case>.json, results.md section "Listings that end": endings/s from the end to the
# last one settled, lateness p50/p99 (bucket bounds) and the last one's.
#
# BENCH_AUCTION=1 (the default), after that: one hot auction. For --strategy market and then
# optimistic, reseeds BENCH_AUCTION_WORLD (players=1000,items=0,funds=1000000000), and runs
# `market-load --mix auctions --auctions 1 --buyout 0 --buyers BENCH_AUCTION_BUYERS (64)` for
# BENCH_SECONDS: every bidder bids the least the one auction takes. Reports
# raw/auction-<strategy>.json, results.md section "One hot auction": bids taken/s, refused
# (outbid meanwhile)/s, p50/p99, server CPU per bid.
#
# BENCH_PEERS names a script of peer benchmarks, which are not part of this
# repository (bench/peers.md says what they are). It is run with bash, with
# LEVELS, SECS and OUT_MD (where to write its markdown table) in its
# environment; its output goes to raw/peers.log.
# Exit status: 0, 1 when a run failed or a setup step did, 3 when an invariant broke.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
BIN=${BIN:-bin}
SECS=${BENCH_SECONDS:-10}
STRATEGIES=${BENCH_STRATEGIES-"market item optimistic"} # set but empty: none
LEVELS=${BENCH_LEVELS:-"1 8 64"}
MIXES=${BENCH_MIXES:-"distinct contended"}
WORLD=${BENCH_WORLD:-players=10000,items=400000,funds=1000000000}
OUT=${BENCH_OUT:-bench}
HA=${BENCH_HA:-1}
HA_RUNS=${BENCH_HA_RUNS:-3}
HA_BUYERS=${BENCH_HA_BUYERS:-64}
FSYNC=${BENCH_FSYNC:-1}
FSYNC_RUNS=${BENCH_FSYNC_RUNS:-2}
FSYNC_LEVELS=${BENCH_FSYNC_LEVELS:-"1 64"}
HIST=${BENCH_HISTORY:-1}
HIST_RUNS=${BENCH_HISTORY_RUNS:-3}
CLUSTER=${BENCH_CLUSTER:-1}
CREALMS=${BENCH_CLUSTER_REALMS:-12}
SEARCH=${BENCH_SEARCH:-1}
SEARCH_SIZES=${BENCH_SEARCH_SIZES:-"1000 1000000"}
SEARCH_N=${BENCH_SEARCH_REQUESTS:-2000}
FLASH=${BENCH_FLASH:-1}
BOOK=${BENCH_BOOK:-1}
BOOK_WORLD=${BENCH_BOOK_WORLD:-players=2000,items=0,goods=20,orders=2000,prices=100-1000,funds=1000000}
BOOK_BUYERS=${BENCH_BOOK_BUYERS:-64}
ENDS=${BENCH_ENDS:-1}
AUCTION=${BENCH_AUCTION:-1}
AUCTION_WORLD=${BENCH_AUCTION_WORLD:-players=1000,items=0,funds=1000000000}
AUCTION_BUYERS=${BENCH_AUCTION_BUYERS:-64}
ENDS_WORLD=${BENCH_ENDS_WORLD:-players=1000,items=10000,funds=1000}
ENDS_IN=${BENCH_ENDS_IN:-8}
FBUYERS=${BENCH_FLASH_BUYERS:-1000}
FSTOCK=${BENCH_FLASH_STOCK:-10000}
case $OUT in /*) ;; *) OUT=$ROOT/$OUT ;; esac # absolute: the peers run from their own folder
HOLD=256

die() { echo "bench: $*" >&2; exit 1; }
case $HA_RUNS in '' | *[!0-9]* | 0) die "BENCH_HA_RUNS is a whole number above 0 ('$HA_RUNS')" ;; esac
case $FSYNC_RUNS in '' | *[!0-9]* | 0) die "BENCH_FSYNC_RUNS is a whole number above 0 ('$FSYNC_RUNS')" ;; esac
case $HIST_RUNS in '' | *[!0-9]* | 0) die "BENCH_HISTORY_RUNS is a whole number above 0 ('$HIST_RUNS')" ;; esac
for b in market-server market-seed market-load; do
    [ -x "$BIN/$b" ] || die "$BIN/$b is missing (run make build)"
done
for c in redis-server redis-cli curl python3; do
    command -v "$c" >/dev/null || die "missing $c (scripts/deps.sh installs redis; apt-get install curl python3)"
done
if ! command -v gnuplot >/dev/null; then
    echo "bench: installing gnuplot-nox"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends gnuplot-nox; } \
        >/dev/null || echo "bench: could not install gnuplot; results.png will be missing" >&2
fi

TMP=$(mktemp -d /tmp/gm-bench.XXXXXX) || die "mktemp failed"
PIDS=()
stop_pid() { # $1: pid; TERM, up to 5 s, then KILL
    kill -0 "$1" 2>/dev/null || { wait "$1" 2>/dev/null; return 0; }
    kill "$1" 2>/dev/null
    for _ in $(seq 50); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$1" 2>/dev/null && kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    return 0
}
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    for p in "${PIDS[@]}"; do stop_pid "$p"; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { # the first port >= $1 nothing listens on
    local p=$1
    while ss -Hltn "sport = :$p" | grep -q .; do p=$((p + 1)); done
    echo "$p"
}
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo ""; }

mkdir -p "$OUT/raw" || die "cannot create $OUT/raw"
rm -f "$OUT"/raw/*.json "$OUT"/raw/*.txt "$OUT"/raw/*.dat "$OUT"/raw/*.cpu "$OUT"/raw/*.log "$OUT"/raw/ha*.tsv \
    "$OUT"/raw/search*.tsv
NOTES=$OUT/raw/notes.txt
MEM=$OUT/raw/memory.tsv
: >"$NOTES"
printf 'strategy\tstart_kb\tafter64_distinct_kb\tafter64_contended_kb\thold%s_kb\n' "$HOLD" >"$MEM"
note() { echo "bench: $*"; echo "$*" >>"$NOTES"; }

# ---- redis ----
RPORT=$(free_port 17379)
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
    --logfile "$TMP/redis.log" --daemonize no &
PIDS+=($!)
for _ in $(seq 100); do
    redis-cli -p "$RPORT" ping 2>/dev/null | grep -q PONG && break
    sleep 0.1
done
redis-cli -p "$RPORT" ping 2>/dev/null | grep -q PONG || die "redis-server did not start ($TMP/redis.log)"
RURL="redis://127.0.0.1:$RPORT/0"

{
    echo "date=$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "nproc=$(nproc)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "mem=$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
    echo "kernel=$(uname -sr)"
    echo "redis=$(redis-server --version | grep -o 'v=[0-9.]*' | cut -d= -f2)"
    echo "loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "secs=$SECS"
    echo "levels=$LEVELS"
    echo "mixes=$MIXES"
    echo "world=$WORLD"
} >"$OUT/raw/meta.txt"

# Waits (up to 60 s) until the Redis servers on ports $@ have freed what a reseed's UNLINKs
# handed to their background threads: that CPU is not the run's (market-load reports the
# Redis CPU of the run itself, INFO cpu counting every thread).
lazyfree_wait() {
    local p n
    for _ in $(seq 600); do
        n=0
        for p in "$@"; do
            n=$((n + $(redis-cli -p "$p" info memory | awk -F: '/^lazyfree_pending_objects:/ {print $2 + 0}')))
        done
        [ "$n" -eq 0 ] && return 0
        sleep 0.1
    done
}
reseed() {
    "$BIN/market-seed" --redis "$RURL" --reset --generate "$WORLD" >/dev/null 2>"$TMP/seed.err" \
        || die "seeding failed: $(cat "$TMP/seed.err")"
    lazyfree_wait "$RPORT"
}

# The user + system CPU time of process $1 so far, in clock ticks (0 when it is gone).
cpu_ticks() {
    awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}

SPID=""
# $1: strategy, $2: "flag" or "noflag", $3: log name (raw/server-NAME.log),
# $4...: further flags; sets SPID and SPORT
start_server() {
    SPORT=$(free_port 18180)
    local args=(--listen "127.0.0.1:$SPORT" --redis "$RURL" --log-level warn)
    [ "$2" = flag ] && args+=(--strategy "$1")
    # market-load sends no player tokens: serve without authentication when the server has it.
    grep -q -- '--no-auth' <<<"$SERVER_HELP" && args+=(--no-auth)
    args+=("${@:4}")
    "$BIN/market-server" "${args[@]}" 2>>"$OUT/raw/server-$3.log" &
    SPID=$!
    PIDS+=("$SPID")
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$SPORT/healthz" >/dev/null 2>&1 && return 0
        kill -0 "$SPID" 2>/dev/null || break
        sleep 0.1
    done
    return 1
}

# Sets RSS_HOLD to the server's VmRSS while HOLD idle keep-alive connections are
# open (one GET /healthz each), or to "" when they could not be opened.
hold_rss() {
    local out=$TMP/hold.txt hp
    RSS_HOLD=""
    "$BIN/market-load" --url "http://127.0.0.1:$SPORT" --hold-connections "$HOLD" --duration 60 \
        >"$out" 2>"$TMP/hold.err" &
    hp=$!
    PIDS+=("$hp")
    for _ in $(seq 100); do
        grep -q '^holding' "$out" 2>/dev/null && break
        kill -0 "$hp" 2>/dev/null || break
        sleep 0.1
    done
    if grep -q '^holding' "$out" 2>/dev/null; then
        sleep 0.5
        RSS_HOLD=$(rss_kb "$SPID")
    else
        note "could not hold $HOLD connections: $(cat "$TMP/hold.err")"
    fi
    stop_pid "$hp"
}

status=0
load_verdict() { # $1: run name, $2: market-load's exit status; prints the summary, sets status
    grep -E '^  (outcomes|purchases/s|latency ms|redis|invariants)' "$OUT/raw/$1.txt"
    case $2 in
    0) ;;
    3) note "$1: INVARIANT BROKEN (see raw/$1.txt)"; status=3 ;;
    *) note "$1: market-load exited $2: $(tail -1 "$OUT/raw/$1.txt")"
       [ "$status" -eq 0 ] && status=1 ;;
    esac
}
SERVER_HELP=$("$BIN/market-server" --help 2>&1)
RAN=""
for s in $STRATEGIES; do
    mode=flag
    if ! grep -q -- '--strategy' <<<"$SERVER_HELP"; then
        if [ "$s" = market ]; then
            mode=noflag
            note "market-server has no --strategy flag: 'market' is its default, run without the flag"
        else
            note "skipped strategy '$s': market-server has no --strategy flag"
            continue
        fi
    else
        "$BIN/market-server" --strategy "$s" --help >/dev/null 2>&1
        rc=$?
        if [ "$rc" -ne 0 ]; then
            note "skipped strategy '$s': market-server --strategy $s exits $rc (unsupported)"
            continue
        fi
    fi
    reseed
    if ! start_server "$s" "$mode" "$s"; then
        note "skipped strategy '$s': market-server did not become healthy (see raw/server-$s.log)"
        status=1
        stop_pid "$SPID"
        continue
    fi
    RAN="$RAN $s"
    rss_start=$(rss_kb "$SPID")
    rss64_distinct=""
    rss64_contended=""
    for mix in $MIXES; do
        for n in $LEVELS; do
            reseed
            name="$s-$mix-$n"
            echo "bench: $name (${SECS}s)"
            cpu0=$(cpu_ticks "$SPID")
            "$BIN/market-load" --url "http://127.0.0.1:$SPORT" --redis "$RURL" --buyers "$n" \
                --duration "$SECS" --mix "$mix" --seed 1 --quiet --json "$OUT/raw/$name.json" \
                >"$OUT/raw/$name.txt" 2>&1
            rc=$?
            echo "$cpu0 $(cpu_ticks "$SPID") $(getconf CLK_TCK)" >"$OUT/raw/$name.cpu"
            load_verdict "$name" "$rc"
            if [ "$n" = 64 ]; then
                [ "$mix" = distinct ] && rss64_distinct=$(rss_kb "$SPID")
                [ "$mix" = contended ] && rss64_contended=$(rss_kb "$SPID")
            fi
            if ! kill -0 "$SPID" 2>/dev/null; then
                note "$s: market-server died during $name"
                status=1
                break 2
            fi
        done
    done
    hold_rss
    printf '%s\t%s\t%s\t%s\t%s\n' "$s" "$rss_start" "$rss64_distinct" "$rss64_contended" \
        "$RSS_HOLD" >>"$MEM"
    stop_pid "$SPID"
done

# ---- durability: appendfsync always against everysec ----
aof_settled() { # waits up to 120 s until the bench's Redis has no AOF rewrite running or due
    local info
    for _ in $(seq 1200); do
        info=$(redis-cli -p "$RPORT" info persistence)
        grep -q '^aof_rewrite_in_progress:0' <<<"$info" &&
            grep -q '^aof_rewrite_scheduled:0' <<<"$info" && return 0
        sleep 0.1
    done
    return 1
}
if [ "$FSYNC" != 0 ]; then
    fmode=flag
    grep -q -- '--strategy' <<<"$SERVER_HELP" || fmode=noflag
    printf 'name\tfsync\tbuyers\trun\n' >"$OUT/raw/fsync.tsv"
    if start_server market "$fmode" fsync; then
        for r in $(seq "$FSYNC_RUNS"); do
            for n in $FSYNC_LEVELS; do
                for f in always everysec; do
                    name="fsync-$f-$n-$r"
                    reseed
                    redis-cli -p "$RPORT" config set appendfsync "$f" >/dev/null &&
                        redis-cli -p "$RPORT" config set appendonly yes >/dev/null &&
                        aof_settled || { note "$name: the AOF did not start"; status=1; continue; }
                    echo "bench: $name (${SECS}s)"
                    cpu0=$(cpu_ticks "$SPID")
                    "$BIN/market-load" --url "http://127.0.0.1:$SPORT" --redis "$RURL" --buyers "$n" \
                        --duration "$SECS" --mix distinct --seed 1 --quiet --json "$OUT/raw/$name.json" \
                        >"$OUT/raw/$name.txt" 2>&1
                    rc=$?
                    echo "$cpu0 $(cpu_ticks "$SPID") $(getconf CLK_TCK)" >"$OUT/raw/$name.cpu"
                    redis-cli -p "$RPORT" config set appendonly no >/dev/null
                    load_verdict "$name" "$rc"
                    printf '%s\t%s\t%s\t%s\n' "$name" "$f" "$n" "$r" >>"$OUT/raw/fsync.tsv"
                done
            done
        done
    else
        note "fsync: market-server did not become healthy (see raw/server-fsync.log)"
        status=1
    fi
    stop_pid "$SPID"
fi

# ---- the price history: on against off ----
if [ "$HIST" != 0 ] && ! grep -q -- '--no-price-history' <<<"$SERVER_HELP"; then
    note "history: this market-server has no --no-price-history; the section did not run"
elif [ "$HIST" != 0 ]; then
    hmode=flag
    grep -q -- '--strategy' <<<"$SERVER_HELP" || hmode=noflag
    printf 'name\thistory\trun\n' >"$OUT/raw/history.tsv"
    for r in $(seq "$HIST_RUNS"); do
        for h in on off; do
            name="history-$h-$r"
            reseed
            extra=(--per-ip-connections 0)
            [ "$h" = off ] && extra+=(--no-price-history)
            if ! start_server market "$hmode" "$name" "${extra[@]}"; then
                note "$name: market-server did not become healthy (see raw/server-$name.log)"
                status=1
                stop_pid "$SPID"
                continue
            fi
            echo "bench: $name (64 buyers of a flash sale of 100000 units)"
            cpu0=$(cpu_ticks "$SPID")
            "$BIN/market-load" --url "http://127.0.0.1:$SPORT" --redis "$RURL" --mix flash \
                --buyers 64 --sale-stock 100000 --sale-limit 100000 --seed 1 --quiet \
                --json "$OUT/raw/$name.json" >"$OUT/raw/$name.txt" 2>&1
            rc=$?
            echo "$cpu0 $(cpu_ticks "$SPID") $(getconf CLK_TCK)" >"$OUT/raw/$name.cpu"
            load_verdict "$name" "$rc"
            printf '%s\t%s\t%s\n' "$name" "$h" "$r" >>"$OUT/raw/history.tsv"
            stop_pid "$SPID"
        done
    done
fi

# ---- acknowledged means replicated (--min-replicas-ack) on a Sentinel group ----
HA_NAME=benchmaster
online_replicas() { # replicas the bench's Redis lists as state=online
    redis-cli -p "$RPORT" info replication 2>/dev/null | grep -c '^slave[0-9]*:.*state=online'
}
sentinel_field() { # $1 Sentinel port, $2 field of SENTINEL MASTER
    redis-cli -p "$1" sentinel master "$HA_NAME" 2>/dev/null |
        awk -v k="$2" 'NR % 2 == 1 && $0 == k { getline v; print v; exit }'
}
sentinel_replicas_ok() { # $1 Sentinel port: the replicas it lists with flags "slave" and link ok
    redis-cli -p "$1" sentinel replicas "$HA_NAME" 2>/dev/null |
        awk 'NR % 2 == 1 { k = $0; next }
             k == "name" { if (f == "slave" && m == "ok") n++; f = m = "" }
             k == "flags" { f = $0 }
             k == "master-link-status" { m = $0 }
             END { if (f == "slave" && m == "ok") n++; print n + 0 }'
}
sentinels_min_ok() { # the fewest replicas any of the Sentinels sees as sentinel_replicas_ok does
    local sp n min=""
    for sp in "${SPORTS[@]}"; do
        n=$(sentinel_replicas_ok "$sp")
        [ -z "$min" ] || [ "$n" -lt "$min" ] && min=$n
    done
    echo "${min:-0}"
}
sentinel_group_ready() { # every Sentinel: the master up, both replicas, the two other Sentinels
    local sp
    for sp in "${SPORTS[@]}"; do
        if [ "$(sentinel_field "$sp" flags)" != master ] ||
            [ "$(sentinel_field "$sp" num-other-sentinels)" != 2 ] ||
            [ "$(sentinel_replicas_ok "$sp")" != 2 ]; then
            return 1
        fi
    done
}
# Waits (up to 60 s) until each replica has applied everything the master had written when
# called (a reseed): its replication, like its lazy free, is not the run's.
replicas_caught_up() {
    local m p o
    m=$(redis-cli -p "$RPORT" info replication | awk -F: '/^master_repl_offset:/ {print $2 + 0}')
    for p in "${HPORTS[@]}"; do
        for _ in $(seq 600); do
            o=$(redis-cli -p "$p" info replication | awk -F: '/^slave_repl_offset:/ {print $2 + 0}')
            [ "${o:-0}" -ge "$m" ] && break
            sleep 0.1
        done
        [ "${o:-0}" -ge "$m" ] || return 1
    done
}
ha_reseed() {
    reseed
    replicas_caught_up || note "ha: a replica had not caught up with the reseed within 60 s"
    lazyfree_wait "${HPORTS[@]}"
}
if [ "$HA" != 0 ]; then
    HPORTS=()
    HPIDS=()
    SPORTS=()
    SENTPIDS=()
    HA_OK=1
    command -v redis-sentinel >/dev/null || { note "ha: redis-sentinel is missing (scripts/deps.sh installs it); section skipped"; HA_OK=0; }
    if [ "$HA_OK" = 1 ]; then
        hport=$((RPORT + 1))
        for i in 1 2; do
            p=$(free_port "$hport")
            hport=$((p + 1))
            mkdir -p "$TMP/replica$i"
            redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP/replica$i" \
                --logfile "$TMP/replica$i.log" --daemonize no --replicaof 127.0.0.1 "$RPORT" &
            PIDS+=($!)
            HPIDS+=($!)
            HPORTS+=("$p")
        done
        for _ in $(seq 300); do
            [ "$(online_replicas)" = 2 ] && break
            sleep 0.1
        done
        if [ "$(online_replicas)" != 2 ]; then
            note "ha: the replicas on ports ${HPORTS[*]} did not both come online within 30 s; section skipped: $(tail -qn1 "$TMP"/replica*.log 2>/dev/null | paste -sd' ')"
            HA_OK=0
        fi
    fi
    if [ "$HA_OK" = 1 ]; then
        sport=$hport
        for i in 1 2 3; do
            p=$(free_port "$sport")
            sport=$((p + 1))
            mkdir -p "$TMP/sentinel$i"
            cat >"$TMP/sentinel$i/sentinel.conf" <<CONF
port $p
bind 127.0.0.1
dir $TMP/sentinel$i
logfile $TMP/sentinel$i.log
sentinel monitor $HA_NAME 127.0.0.1 $RPORT 2
sentinel down-after-milliseconds $HA_NAME 60000
sentinel failover-timeout $HA_NAME 180000
CONF
            redis-sentinel "$TMP/sentinel$i/sentinel.conf" &
            PIDS+=($!)
            SENTPIDS+=($!)
            SPORTS+=("$p")
        done
        for _ in $(seq 600); do
            sentinel_group_ready && break
            sleep 0.1
        done
        if ! sentinel_group_ready; then
            note "ha: the Sentinels on ports ${SPORTS[*]} did not all see the master, both replicas and each other within 60 s; section skipped (see their logs)"
            HA_OK=0
        fi
    fi
    if [ "$HA_OK" = 0 ]; then
        status=1
    else
        HURL="redis-sentinel://$(printf '127.0.0.1:%s,' "${SPORTS[@]}" | sed 's/,$//')/$HA_NAME"
        echo "bench: ha: master $RPORT, replicas ${HPORTS[*]}, Sentinels ${SPORTS[*]} ($HURL)"
        hmode=flag
        grep -q -- '--strategy' <<<"$SERVER_HELP" || hmode=noflag
        printf 'name\tconfig\trun\tflags\treplicas_before\treplicas_after\tsentinels_see_before\tsentinels_see_after\tmaster_after\n' \
            >"$OUT/raw/ha.tsv"
        for r in $(seq "$HA_RUNS"); do
            for cfg in noack ack1; do
                extra=()
                [ "$cfg" = ack1 ] && extra=(--min-replicas-ack 1)
                name="ha-$cfg-$r"
                flags="--strategy market${extra[*]:+ ${extra[*]}}"
                ha_reseed
                if ! start_server market "$hmode" "$name" --redis "$HURL" "${extra[@]}"; then
                    note "$name: market-server $flags did not become healthy: $(tail -1 "$OUT/raw/server-$name.log" 2>/dev/null)"
                    printf '%s\t%s\t%s\t%s\t-\t-\t-\t-\t-\n' "$name" "$cfg" "$r" "$flags" >>"$OUT/raw/ha.tsv"
                    status=1
                    stop_pid "$SPID"
                    continue
                fi
                before=$(online_replicas)
                sbefore=$(sentinels_min_ok)
                echo "bench: $name: $flags, $before replica(s) online, every Sentinel sees $sbefore (${SECS}s)"
                "$BIN/market-load" --url "http://127.0.0.1:$SPORT" --redis "$HURL" --buyers "$HA_BUYERS" \
                    --duration "$SECS" --mix distinct --seed 1 --quiet --json "$OUT/raw/$name.json" \
                    >"$OUT/raw/$name.txt" 2>&1
                rc=$?
                after=$(online_replicas)
                safter=$(sentinels_min_ok)
                master=$(redis-cli -p "${SPORTS[0]}" sentinel get-master-addr-by-name "$HA_NAME" 2>/dev/null |
                    paste -sd:)
                load_verdict "$name" "$rc"
                printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$cfg" "$r" "$flags" "$before" "$after" \
                    "$sbefore" "$safter" "$master" >>"$OUT/raw/ha.tsv"
                [ "$master" = "127.0.0.1:$RPORT" ] ||
                    { note "$name: the Sentinels name $master as master after the run, not 127.0.0.1:$RPORT"; status=1; }
                kill -0 "$SPID" 2>/dev/null || { note "$name: market-server died during the run"; status=1; }
                stop_pid "$SPID"
            done
        done
        # What a commit's WAIT asks for: a short run of the ack1 configuration, after the timed
        # ones, while redis-cli MONITOR copies the master's commands (too heavy to run during them).
        ha_reseed
        printf 'command\tcount\n' >"$OUT/raw/ha-wait.tsv"
        if start_server market "$hmode" ha-wait --redis "$HURL" --min-replicas-ack 1; then
            redis-cli -p "$RPORT" monitor >"$TMP/monitor.txt" 2>&1 &
            mpid=$!
            PIDS+=("$mpid")
            sleep 0.5
            "$BIN/market-load" --url "http://127.0.0.1:$SPORT" --redis "$HURL" --buyers 8 \
                --requests 500 --mix distinct --seed 1 --quiet >"$OUT/raw/ha-wait.txt" 2>&1 ||
                note "ha-wait: market-load exited $?: $(tail -1 "$OUT/raw/ha-wait.txt")"
            sleep 0.5
            stop_pid "$mpid"
            # "WAIT <numreplicas>" and how many, then "EXEC" and how many
            grep -o '"WAIT" "[0-9]*"' "$TMP/monitor.txt" | tr -d '"' | sort | uniq -c |
                awk '{printf "%s %s\t%d\n", $2, $3, $1}' >>"$OUT/raw/ha-wait.tsv"
            printf 'EXEC\t%s\n' "$(grep -c '"EXEC"' "$TMP/monitor.txt")" >>"$OUT/raw/ha-wait.tsv"
            rm -f "$TMP/monitor.txt" # some 90 MB: market-load's audits read the whole world
        else
            note "ha-wait: market-server did not become healthy: $(tail -1 "$OUT/raw/server-ha-wait.log" 2>/dev/null)"
            status=1
        fi
        stop_pid "$SPID"
    fi
    # the Sentinels first: no failover while the replicas go
    for p in "${SENTPIDS[@]}" "${HPIDS[@]}"; do stop_pid "$p"; done
fi

# ---- Redis Cluster ----
if [ "$CLUSTER" != 0 ]; then
    CPORTS=()
    cport=$((RPORT + 100))
    for i in 0 1 2; do
        p=$(free_port "$cport")
        b=$(free_port $((p + 1)))
        cport=$((b + 1))
        mkdir -p "$TMP/cluster$i"
        redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP/cluster$i" \
            --cluster-enabled yes --cluster-config-file nodes.conf --cluster-port "$b" \
            --cluster-node-timeout 5000 --logfile "$TMP/cluster$i.log" --daemonize no &
        PIDS+=($!)
        CPORTS+=("$p")
    done
    for p in "${CPORTS[@]}"; do
        for _ in $(seq 100); do
            redis-cli -p "$p" ping 2>/dev/null | grep -q PONG && break
            sleep 0.1
        done
    done
    cluster_ok() {
        for p in "${CPORTS[@]}"; do
            redis-cli -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || return 1
        done
    }
    redis-cli --cluster create "${CPORTS[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes \
        >"$TMP/cluster-create.log" 2>&1
    for _ in $(seq 100); do cluster_ok && break; sleep 0.1; done
    # Place the realms evenly, as an operator would: realm i's slot (CLUSTER KEYSLOT "{ri}")
    # to master i % 3. The slots are still empty, so SETSLOT ... NODE on every master moves
    # one. Without this the CRC16 of 12 names lands 3, 6 and 3 realms on the masters.
    if cluster_ok; then
        CIDS=()
        for p in "${CPORTS[@]}"; do CIDS+=("$(redis-cli -p "$p" cluster myid)"); done
        for i in $(seq 0 $((CREALMS - 1))); do
            slot=$(redis-cli -p "${CPORTS[0]}" cluster keyslot "{r$i}")
            id=${CIDS[$((i % 3))]}
            for p in "${CPORTS[@]}"; do
                redis-cli -p "$p" cluster setslot "$slot" node "$id" >/dev/null
            done
        done
        # every master was told directly: they agree at once
    fi
    if ! cluster_ok; then
        note "cluster: the three masters did not agree within 10 s; section skipped: $(tail -1 "$TMP/cluster-create.log")"
        status=1
    else
        CURL="redis-cluster://$(printf '127.0.0.1:%s,' "${CPORTS[@]}" | sed 's/,$//')"
        cworld="realms=$CREALMS,${WORLD}"
        for target in single cluster; do
            url=$RURL
            ports=("$RPORT")
            [ "$target" = cluster ] && url=$CURL && ports=("${CPORTS[@]}")
            name="cluster-$target"
            "$BIN/market-seed" --redis "$url" --reset --generate "$cworld" >/dev/null \
                2>"$TMP/seed.err" || die "seeding $target failed: $(cat "$TMP/seed.err")"
            lazyfree_wait "${ports[@]}"
            if ! start_server market flag "$name" --redis "$url"; then
                note "$name: market-server did not become healthy: $(tail -1 "$OUT/raw/server-$name.log" 2>/dev/null)"
                status=1
                stop_pid "$SPID"
                continue
            fi
            echo "bench: $name: 64 buyers over $CREALMS realms (${SECS}s)"
            "$BIN/market-load" --url "http://127.0.0.1:$SPORT" --redis "$url" --realms "$CREALMS" \
                --buyers 64 --duration "$SECS" --mix distinct --seed 1 --quiet \
                --json "$OUT/raw/$name.json" >"$OUT/raw/$name.txt" 2>&1
            rc=$?
            load_verdict "$name" "$rc"
            kill -0 "$SPID" 2>/dev/null || { note "$name: market-server died during the run"; status=1; }
            stop_pid "$SPID"
        done
    fi
fi

# ---- search: GET /market at several market sizes ----
if [ "$SEARCH" != 0 ]; then
    cat >"$TMP/search_time.py" <<'PY'
import http.client, random, sys, time
port, listings, players, n, cursor = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), \
    int(sys.argv[4]), sys.argv[5]
deep = listings * 9 // 10
rnd = random.Random(1)
kinds = [
    ("item", lambda: f"/market?item=i{rnd.randrange(listings)}"),
    ("price range, limit 50", lambda: (lambda x: f"/market?min_price={x}&max_price={x + 99}&limit=50")(rnd.randrange(1, 902))),
    ("seller, limit 50", lambda: f"/market?seller=p{rnd.randrange(players)}&limit=50"),
    ("page 90% deep by cursor, limit 50", lambda: f"/market?limit=50&cursor={cursor}"),
    ("page 90% deep by offset, limit 50", lambda: f"/market?limit=50&offset={deep}"),
]
conn = http.client.HTTPConnection("127.0.0.1", port)
def get(path):
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        sys.exit(f"GET {path}: {r.status} {body[:200]!r}")
for name, make in kinds:
    for _ in range(100):
        get(make())
    ms = []
    for _ in range(n):
        path = make()
        t0 = time.perf_counter_ns()
        get(path)
        ms.append((time.perf_counter_ns() - t0) / 1e6)
    ms.sort()
    print(f"{listings}\t{name}\t{n}\t{ms[len(ms) // 2]:.3f}\t{ms[min(len(ms) - 1, len(ms) * 99 // 100)]:.3f}")
PY
    printf 'listings\tquery\trequests\tp50_ms\tp99_ms\n' >"$OUT/raw/search.tsv"
    printf 'listings\tseed_s\tredis_memory\n' >"$OUT/raw/search-seed.tsv"
    for n in $SEARCH_SIZES; do
        players=$((n / 100))
        [ "$players" -ge 1 ] || players=1
        echo "bench: search: seeding $n listings ($players sellers)"
        t0=$(date +%s.%N)
        if ! "$BIN/market-seed" --redis "$RURL" --reset --generate "players=$players,items=$n" \
            >/dev/null 2>"$TMP/seed.err"; then
            note "search: seeding $n listings failed: $(cat "$TMP/seed.err")"
            status=1
            continue
        fi
        t1=$(date +%s.%N)
        mem=$(redis-cli -p "$RPORT" info memory | sed -n 's/^used_memory_human:\(.*\)\r$/\1/p')
        printf '%s\t%s\t%s\n' "$n" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')" \
            "$mem" >>"$OUT/raw/search-seed.tsv"
        # the cursor of the listing 90% into the market: "<price, 13 digits>:<item>.<seller>"
        cursor=$(redis-cli -p "$RPORT" zrange 'market:{main}' $((n * 9 / 10)) $((n * 9 / 10)) \
            withscores | paste -sd' ' | awk '{printf "%013.0f:%s", $2, $1}')
        if ! start_server market flag "search-$n"; then
            note "search: market-server did not become healthy (see raw/server-search-$n.log)"
            status=1
            stop_pid "$SPID"
            continue
        fi
        echo "bench: search: $SEARCH_N requests of each kind at $n listings"
        python3 "$TMP/search_time.py" "$SPORT" "$n" "$players" "$SEARCH_N" "$cursor" \
            >>"$OUT/raw/search.tsv" 2>"$TMP/search.err" ||
            { note "search at $n listings failed: $(tail -1 "$TMP/search.err")"; status=1; }
        stop_pid "$SPID"
    done
    column -t -s "$(printf '\t')" "$OUT/raw/search.tsv"
fi

# ---- a flash sale ----
if [ "$FLASH" != 0 ]; then
    reseed
    fmode=flag
    grep -q -- '--strategy' <<<"$SERVER_HELP" || fmode=noflag
    if ! start_server market "$fmode" flash --per-ip-connections 0 \
        --max-connections $((FBUYERS + 256)); then
        note "flash: market-server did not become healthy: $(tail -1 "$OUT/raw/server-flash.log" 2>/dev/null)"
        status=1
    else
        echo "bench: flash: $FBUYERS buyers, a sale of $FSTOCK units"
        "$BIN/market-load" --url "http://127.0.0.1:$SPORT" --redis "$RURL" --mix flash \
            --buyers "$FBUYERS" --sale-stock "$FSTOCK" --seed 1 --quiet \
            --json "$OUT/raw/flash.json" >"$OUT/raw/flash.txt" 2>&1
        rc=$?
        grep -E '^(  flash sale|    .*(sold out|oversold|above the limit))' "$OUT/raw/flash.txt"
        load_verdict flash "$rc"
        kill -0 "$SPID" 2>/dev/null || { note "flash: market-server died during the run"; status=1; }
    fi
    stop_pid "$SPID"
fi

# ---- the book: buy orders, sales into them, cancels ----
if [ "$BOOK" != 0 ]; then
    "$BIN/market-seed" --redis "$RURL" --reset --generate "$BOOK_WORLD" >/dev/null \
        2>"$TMP/seed.err" || die "seeding the book's world failed: $(cat "$TMP/seed.err")"
    lazyfree_wait "$RPORT"
    if ! start_server market flag book; then
        note "book: market-server did not become healthy: $(tail -1 "$OUT/raw/server-book.log" 2>/dev/null)"
        status=1
    else
        echo "bench: book: $BOOK_BUYERS connections, market-load --mix book for ${SECS}s"
        c0=$(cpu_ticks "$SPID")
        "$BIN/market-load" --url "http://127.0.0.1:$SPORT" --redis "$RURL" --mix book \
            --buyers "$BOOK_BUYERS" --duration "$SECS" --seed 1 --quiet \
            --json "$OUT/raw/book.json" >"$OUT/raw/book.txt" 2>&1
        rc=$?
        echo "$(( $(cpu_ticks "$SPID") - c0 )) $(getconf CLK_TCK)" >"$OUT/raw/book.cpu"
        load_verdict book "$rc"
        kill -0 "$SPID" 2>/dev/null || { note "book: market-server died during the run"; status=1; }
    fi
    stop_pid "$SPID"
fi

# ---- listings that end: three servers' sweepers, one killed or none ----
if [ "$ENDS" != 0 ] && grep -q -- '--sweep-interval-ms' <<<"$SERVER_HELP"; then
    for case in calm kill; do
        "$BIN/market-seed" --redis "$RURL" --reset --generate "$ENDS_WORLD,ends=$ENDS_IN" \
            >/dev/null 2>"$TMP/seed.err" || die "seeding the endings' world failed: $(cat "$TMP/seed.err")"
        lazyfree_wait "$RPORT"
        eports=() epids=()
        for i in 1 2 3; do
            if ! start_server market flag "ends-$case-$i"; then
                note "ends: market-server did not become healthy"
                status=1
            fi
            eports+=("$SPORT") epids+=("$SPID")
        done
        echo "bench: ends ($case): $(redis-cli -p "$RPORT" ZCARD 'market:{main}:ends') listings end at once, 3 servers"
        python3 - "$RPORT" "$case" "$OUT/raw/ends-$case.json" "${eports[*]}" "${epids[*]}" <<'PY' || { note "ends ($case): the run failed"; status=1; }
import json, os, re, signal, subprocess, sys, time, urllib.request
rport, case, out = sys.argv[1], sys.argv[2], sys.argv[3]
ports, pids = sys.argv[4].split(), [int(p) for p in sys.argv[5].split()]
def cli(*a):
    return subprocess.run(["redis-cli", "-p", rport, *a], capture_output=True, text=True).stdout.split()
def store_ms():
    s, us = cli("TIME")
    return int(s) * 1000 + int(us) // 1000
def histogram(port):
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return None
    b = {}
    for m in re.finditer(r'^market_settlement_lag_seconds_bucket\{le="([^"]+)"\} (\d+)$', text, re.M):
        b[m.group(1)] = int(m.group(2))
    return b
total = int(cli("ZCARD", "market:{main}:ends")[0])
first = cli("ZRANGE", "market:{main}:ends", "0", "0", "WITHSCORES")
due = int(float(first[1]))
killed = None
while store_ms() < due:
    time.sleep(0.005)
while True:
    left = int(cli("ZCARD", "market:{main}:ends")[0])
    if case == "kill" and killed is None:
        for port, pid in zip(ports, pids):
            h = histogram(port)
            if h and h.get("+Inf", 0) > 0:
                os.kill(pid, signal.SIGKILL)
                killed = port
                break
    if left == 0:
        break
    if store_ms() - due > 600000:
        sys.exit("endings still left after 10 minutes")
    time.sleep(0.02)
done = store_ms()
merged = {}
for port in ports:
    if port == killed:
        continue
    for le, n in (histogram(port) or {}).items():
        merged[le] = merged.get(le, 0) + n
bounds = sorted(((float(le) if le != "+Inf" else float("inf")), n) for le, n in merged.items())
count = bounds[-1][1] if bounds else 0
def quantile(q):
    for le, n in bounds:
        if n >= q * count:
            return le
    return None
json.dump({"case": case, "endings": total, "servers": 3, "killed": killed is not None,
           "seconds": (done - due) / 1000, "per_s": total / max((done - due) / 1000, 1e-3),
           "last_ms": done - due, "counted": count, "p50_le_s": quantile(0.5),
           "p99_le_s": quantile(0.99)}, open(out, "w"))
print(f"bench: ends ({case}): {total} settled in {(done - due) / 1000:.2f} s")
PY
        for p in "${epids[@]}"; do stop_pid "$p"; done
    done
fi

# ---- one hot auction: bids/s ----
if [ "$AUCTION" != 0 ] && "$BIN/market-load" --help 2>&1 | grep -q -- '--auctions'; then
    for s in market optimistic; do
        "$BIN/market-seed" --redis "$RURL" --reset --generate "$AUCTION_WORLD" >/dev/null \
            2>"$TMP/seed.err" || die "seeding the auction's world failed: $(cat "$TMP/seed.err")"
        lazyfree_wait "$RPORT"
        if ! start_server "$s" flag "auction-$s"; then
            note "auction ($s): market-server did not become healthy"
            status=1
            continue
        fi
        echo "bench: auction ($s): $AUCTION_BUYERS bidders on one auction for ${SECS}s"
        c0=$(cpu_ticks "$SPID")
        "$BIN/market-load" --url "http://127.0.0.1:$SPORT" --redis "$RURL" --mix auctions \
            --auctions 1 --auction-seconds 3600 --buyout 0 --buyers "$AUCTION_BUYERS" \
            --duration "$SECS" --seed 1 --quiet --json "$OUT/raw/auction-$s.json" \
            >"$OUT/raw/auction-$s.txt" 2>&1
        rc=$?
        echo "$(( $(cpu_ticks "$SPID") - c0 )) $(getconf CLK_TCK)" >"$OUT/raw/auction-$s.cpu"
        load_verdict "auction-$s" "$rc"
        stop_pid "$SPID"
    done
fi

# ---- peers (optional) ----
PEERS_RAN=0
if [ -n "${BENCH_PEERS:-}" ]; then
    peers=$BENCH_PEERS
    if [ -f "$peers" ]; then
        echo "bench: running the peers ($peers)"
        if LEVELS="$LEVELS" SECS="$SECS" OUT_MD="$OUT/peers.md" bash "$peers" \
            >"$OUT/raw/peers.log" 2>&1; then
            PEERS_RAN=1
        else
            note "peers run failed (exit $?; see raw/peers.log)"
        fi
        sed -i "s|$ROOT/||g" "$OUT/raw/peers.log" # the log names this checkout's files relatively
    else
        echo "bench: BENCH_PEERS names no file: $peers" >&2
        note "BENCH_PEERS was given, but names no file; the peers did not run"
    fi
fi

# ---- results.md ----
python3 - "$OUT" "$SECS" "$HOLD" "$RAN" "$PEERS_RAN" "$HA_BUYERS" <<'PY' || { echo "bench: cannot write results.md" >&2; status=1; }
import json, os, sys
out, secs, hold, ran = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
peers_ran = sys.argv[5] == "1"
ha_buyers = sys.argv[6]
raw = os.path.join(out, "raw")
meta = dict(l.rstrip("\n").split("=", 1) for l in open(os.path.join(raw, "meta.txt")) if "=" in l)
levels = meta["levels"].split()
mixes = meta["mixes"].split()

def fmt(v, p=1):
    return "-" if v is None else f"{v:,.{p}f}"

def server_us(path, ok):
    """market-server's CPU (user + system) over a run, in µs per 200 (None when not known)."""
    try:
        c0, c1, tck = (int(x) for x in open(path).read().split())
    except (OSError, ValueError):
        return None
    return None if not ok or not tck or c1 < c0 else (c1 - c0) / tck / ok * 1e6

rows = []
for s in ran:
    for mix in mixes:
        dat = []
        for n in levels:
            path = os.path.join(raw, f"{s}-{mix}-{n}.json")
            if not os.path.exists(path):
                rows.append(f"| {s} | {mix} | {n} | failed | - | - | - | - | - | - | - | - |")
                continue
            j = json.load(open(path))
            st, lat, r, inv = j["status"], j["latency_ms"], j["redis"], j["invariants"]
            pps = j["run"]["purchases_per_s"]
            dat.append(f'{n} {pps:.2f} {lat["all"]["p50"]:.4f} {lat["all"]["p99"]:.4f}')
            cpp, cpu = r.get("commands_per_purchase"), r.get("cpu_us_per_purchase")
            srv = server_us(os.path.join(raw, f"{s}-{mix}-{n}.cpu"), st["200"])
            outcomes = f'{st["200"]} / {st["402"]} / {st["404"]} / {st["409"]} / {st["503"]} / {st["other"]} / {st["transport_errors"]}'
            early = " (ran out)" if j["run"]["stopped_early"] else ""
            rows.append(
                f'| {s} | {mix} | {n} | {fmt(pps)}{early} | {lat["all"]["p50"]:.3f} | {lat["all"]["p99"]:.3f} '
                f'| {lat["ok"]["p99"]:.3f} | {fmt(cpp, 2)} | {fmt(cpu, 1)} | {fmt(srv, 1)} | {outcomes} '
                f'| {"OK" if inv["ok"] else "**BROKEN**"} |')
        with open(os.path.join(raw, f"{s}-{mix}.dat"), "w") as f:
            f.write("# buyers purchases_per_s p50_ms p99_ms\n" + "\n".join(dat) + "\n")

mem = [l.rstrip("\n").split("\t") for l in open(os.path.join(raw, "memory.tsv"))][1:]
notes = [l.strip() for l in open(os.path.join(raw, "notes.txt")) if l.strip()]

def mib(kb):
    return "-" if not kb else f"{int(kb) / 1024:.1f}"

L = []
L.append("# market-load: POST /purchase by lock strategy")
L.append("")
L.append(f'- date: {meta["date"]}; commit {meta["commit"]}')
L.append(f'- machine: nproc={meta["nproc"]}, {meta["cpu"]}, {meta["mem"]} RAM, {meta["kernel"]}; '
         f'load average at start {meta["loadavg"]}')
L.append(f'- redis {meta["redis"]} on 127.0.0.1, `--save \'\' --appendonly no`; world '
         f'`market-seed --generate {meta["world"]}` reseeded before every run')
L.append(f'- server: `bin/market-server --strategy S --log-level warn [--no-auth]` (threads and every other flag '
         f'default), one server per strategy; load: `bin/market-load --buyers N --duration {secs} '
         f'--mix M --seed 1` (one epoll thread, keep-alive HTTP/1.1, one request in flight per buyer)')
L.append("")
L.append(f'**Caveat: {meta["nproc"]} cores shared by everything.** Redis, market-server and market-load '
         "all run on the same cores, so each number mixes server, Redis and client cost; compare rows "
         "taken in the same run, not with a real deployment. At 64 buyers the run-to-run spread on "
         "this box has been up to ~40%: two back-to-back runs of the peer benchmarks moved by up to "
         "40% at 64 clients, and mostly by less than 5% at 1 and 8.")
L.append("")
L.append("| strategy | mix | buyers | purchases/s | p50 ms | p99 ms | p99 ms (200s) | Redis cmds / purchase "
         "| Redis CPU µs / purchase | server CPU µs / purchase | 200 / 402 / 404 / 409 / 503 / other / transport "
         "| invariants |")
L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
L += rows
L.append("")
L.append("Like Redis in Action's table 6.2, one row per strategy and load. purchases/s counts 200 "
         "answers per second of the run; latencies are over every request (and over the 200s); "
         "Redis cmds / purchase = the `INFO commandstats` calls delta between the first request and "
         "the last answer (INFO itself excluded) divided by the 200s, so in the contended mix it also "
         "carries the cost of the refused (404/402) attempts; Redis CPU µs / purchase = the `INFO cpu` "
         "user + sys delta over the same span (every Redis thread) divided by the 200s; server CPU µs / "
         "purchase = market-server's user + system time (`/proc/<pid>/stat`) from just before "
         "market-load starts to just after it ends, divided by the 200s. *distinct*: every request buys a different "
         "item (contention only on the lock); *contended*: the N buyers with the least funds fight over a "
         "window of the ~N/4 cheapest items still listed (a 404 means another buyer won the race; every "
         "player has funds for the whole market, so a 402 means something is wrong). "
         "invariants: market-load's audit before and after (funds conserved, none negative, every item in "
         "exactly one place, 200s == items that left the market).")
L.append("")
L.append("## Server memory (VmRSS, MiB)")
L.append("")
L.append(f"| strategy | after start | after 64 buyers, distinct | after 64 buyers, contended | {hold} idle keep-alive connections |")
L.append("|---|---:|---:|---:|---:|")
for m in mem:
    m += [""] * (5 - len(m))
    L.append(f"| {m[0]} | {mib(m[1])} | {mib(m[2])} | {mib(m[3])} | {mib(m[4])} |")
L.append("")
L.append(f"The idle connections are opened by `market-load --hold-connections {hold}` (one GET /healthz "
         "each, then kept open); RSS is read from /proc/PID/status while they are held.")
L.append("")
L.append("![purchases/s and p99 by buyers](results.png)")
L.append("")
L.append("Raw reports: `raw/<strategy>-<mix>-<buyers>.json` (whole market-load report, including the "
         "per-command Redis deltas) and `.txt`; plot data `raw/<strategy>-<mix>.dat`.")

# ---- durability: raw/fsync.tsv (the runs), raw/fsync-<appendfsync>-<buyers>-<run>.json ----
def runs(tsv):
    """The rows of raw/<tsv> (a header line, then a run a line), each with "j": its run's
    market-load report raw/<name>.json, or None when it is missing. [] without the file."""
    path = os.path.join(raw, tsv)
    if not os.path.exists(path):
        return []
    lines = [l.rstrip("\n").split("\t") for l in open(path)]
    rs = [dict(zip(lines[0], x)) for x in lines[1:]]
    for x in rs:
        p = os.path.join(raw, f'{x["name"]}.json')
        x["j"] = json.load(open(p)) if os.path.exists(p) else None
    return rs

def medians_row(xs, first):
    """A table row of the runs xs (market-load reports in x["j"]): first (the row's own
    columns, "| a | b"), the runs, the medians of purchases/s, p99, the slowest answer,
    Redis and server CPU per purchase, and each run's purchases/s. Returns (row, the median
    purchases/s, the median Redis CPU per purchase or None)."""
    from statistics import median
    pps = [x["j"]["run"]["purchases_per_s"] for x in xs]
    cpu = [c for c in (x["j"]["redis"].get("cpu_us_per_purchase") for x in xs) if c is not None]
    srv = [v for v in (server_us(os.path.join(raw, f'{x["name"]}.cpu'), x["j"]["status"]["200"])
                       for x in xs) if v is not None]
    mcpu = median(cpu) if cpu else None
    return (f'{first} | {len(xs)} | {fmt(median(pps))} '
            f'| {median(x["j"]["latency_ms"]["all"]["p99"] for x in xs):.3f} '
            f'| {max(x["j"]["latency_ms"]["all"]["max"] for x in xs):.1f} '
            f'| {fmt(mcpu)} | {fmt(median(srv) if srv else None)} '
            f'| {", ".join(fmt(v, 0) for v in pps)} |', median(pps), mcpu)

MEDIANS_HEAD = ("| runs | median purchases/s | median p99 ms | slowest answer ms "
                "| median Redis CPU µs / purchase | median server CPU µs / purchase | purchases/s of each run |")
MEDIANS_RULE = "|---:|---:|---:|---:|---:|---:|---|"

fs = runs("fsync.tsv")
if any(x["j"] for x in fs):
    fmeds = {}
    L.append("")
    L.append("## Durability: appendfsync always against everysec")
    L.append("")
    L.append("| buyers | appendfsync " + MEDIANS_HEAD)
    L.append("|---:|---" + MEDIANS_RULE)
    for n in dict.fromkeys(x["buyers"] for x in fs):
        for f in ("always", "everysec"):
            xs = [x for x in fs if x["buyers"] == n and x["fsync"] == f and x["j"]]
            if not xs:
                continue
            row, fmeds[(n, f)], _ = medians_row(xs, f"| {n} | {f}")
            L.append(row)
    ratios = [f'{n} buyer{"" if n == "1" else "s"} {fmeds[(n, "always")] / fmeds[(n, "everysec")]:.2f}x'
              for n in dict.fromkeys(x["buyers"] for x in fs)
              if fmeds.get((n, "everysec")) and (n, "always") in fmeds]
    L.append("")
    L.append("always / everysec, medians of purchases/s: " + ("; ".join(ratios) or "-") + ". The bench's "
             "Redis keeps an append-only file (in its temp dir, on this machine's disk) for these runs "
             "alone, `--strategy market`, distinct purchases, the two settings alternated. `always` "
             "writes and fsyncs a write before Redis answers it, once per pass of its event loop, so a "
             "batch of purchases shares one fsync; `everysec` answers first and can lose what it "
             "answered (OPERATIONS.md, Durability). Raw reports: `raw/fsync-<appendfsync>-<buyers>-<run>.json` "
             "and `.txt`, `raw/fsync.tsv`.")

# ---- the price history: raw/history.tsv (the runs), raw/history-<on|off>-<run>.json ----
hs = runs("history.tsv")
if any(x["j"] for x in hs):
    hmeds = {}
    L.append("")
    L.append("## The price history: on against off")
    L.append("")
    L.append("| history " + MEDIANS_HEAD)
    L.append("|---" + MEDIANS_RULE)
    for h in ("on", "off"):
        xs = [x for x in hs if x["history"] == h and x["j"]]
        if xs:
            row, pps, cpu = medians_row(xs, f"| {h}")
            hmeds[h] = (pps, cpu)
            L.append(row)
    if "on" in hmeds and "off" in hmeds:
        (pon, con), (poff, coff) = hmeds["on"], hmeds["off"]
        L.append("")
        L.append(f"on / off, medians: purchases/s {pon / poff:.2f}x"
                 + (f", Redis CPU per purchase {con / coff:.2f}x" if con and coff else "")
                 + ". 64 buyers of a flash sale of 100,000 units, `--strategy market`: every buy is a "
                 "trade of a stackable good, so every commit writes the good's candles (one `HMGET` "
                 "and one `HSET`); `--no-price-history` writes none. The two alternated, each on a "
                 "server of its own. Raw reports: `raw/history-<on|off>-<run>.json` and `.txt`, "
                 "`raw/history.tsv`.")

# ---- --min-replicas-ack on a Sentinel group: raw/ha.tsv (the runs), raw/ha-<cfg>-<run>.json,
# raw/ha-wait.tsv (the WAITs MONITOR saw in a short run after them) ----
ha = runs("ha.tsv")
if any(h["j"] for h in ha):
    from statistics import median
    cfgs = list(dict.fromkeys(h["config"] for h in ha))
    flags = {h["config"]: h["flags"] for h in ha}
    done = {c: [h for h in ha if h["config"] == c and h["j"]] for c in cfgs}
    med = {}
    L.append("")
    L.append("## Acknowledged means replicated (--min-replicas-ack)")
    L.append("")
    L.append("| configuration | runs | median purchases/s | median p50 ms | median p99 ms | purchases/s of each run |")
    L.append("|---|---:|---:|---:|---:|---|")
    for c in cfgs:
        js = [h["j"] for h in done[c]]
        if not js:
            L.append(f"| `{flags[c]}` | 0 | failed (see Notes) | - | - | - |")
            continue
        med[c] = {"pps": median(j["run"]["purchases_per_s"] for j in js),
                  "p50": median(j["latency_ms"]["all"]["p50"] for j in js),
                  "p99": median(j["latency_ms"]["all"]["p99"] for j in js)}
        each = ", ".join(fmt(j["run"]["purchases_per_s"]) for j in js)
        L.append(f'| `{flags[c]}` | {len(js)} | {fmt(med[c]["pps"])} | {med[c]["p50"]:.3f} | '
                 f'{med[c]["p99"]:.3f} | {each} |')
    L.append("")
    if "noack" in med and "ack1" in med and med["noack"]["pps"]:
        L.append(f'**ack1 / noack, of the medians: {med["ack1"]["pps"] / med["noack"]["pps"]:.2f}x the '
                 f'purchases/s**, {med["ack1"]["p50"] / med["noack"]["p50"]:.2f}x the p50 and '
                 f'{med["ack1"]["p99"] / med["noack"]["p99"]:.2f}x the p99.')
        L.append("")
    L.append("| run | configuration | purchases/s | p50 ms | p99 ms | 200 / 503 | `EXEC` / `WAIT` | replicas online before / after "
             "| replicas every Sentinel sees before / after | invariants |")
    L.append("|---:|---|---:|---:|---:|---|---|---|---|---|")
    for h in ha:
        j = h["j"]
        if not j:
            L.append(f'| {h["run"]} | `{h["flags"]}` | failed (see Notes) | - | - | - | - | - | - | - |')
            continue
        st, lat, inv = j["status"], j["latency_ms"], j["invariants"]
        d = j["redis"].get("commands_delta", {})
        early = " (ran out)" if j["run"]["stopped_early"] else ""
        L.append(f'| {h["run"]} | `{h["flags"]}` | {fmt(j["run"]["purchases_per_s"])}{early} | '
                 f'{lat["all"]["p50"]:.3f} | {lat["all"]["p99"]:.3f} | {st["200"]:,} / {st["503"]:,} | '
                 f'{d.get("exec", 0):,} / {d.get("wait", 0):,} | {h["replicas_before"]} / {h["replicas_after"]} | '
                 f'{h["sentinels_see_before"]} / {h["sentinels_see_after"]} | {"OK" if inv["ok"] else "**BROKEN**"} |')
    L.append("")
    ran_ha = [h for h in ha if h["j"]]
    steady = all(h[k] == "2" for h in ran_ha for k in
                 ("replicas_before", "replicas_after", "sentinels_see_before", "sentinels_see_after"))
    masters = {h["master_after"] for h in ran_ha}
    runs = max(int(h["run"]) for h in ha)
    spread = [f'{(max(p) - min(p)) / med[c]["pps"] * 100:.0f}% of the median for {c}'
              for c in cfgs if c in med and med[c]["pps"]
              for p in [[h["j"]["run"]["purchases_per_s"] for h in done[c]]]]
    L.append(f"The bench's Redis is the master of a Sentinel group: two replicas (`redis-server --replicaof`, "
             "same host, no persistence) and three `redis-sentinel`s (`sentinel monitor <name> 127.0.0.1 "
             "<port> 2`, `down-after-milliseconds` 60000 so that none fails it over during the bench). "
             "`market-server` and `market-load` get `--redis redis-sentinel://<the three Sentinels>/<name>`, "
             "as users run it. "
             f"{ha_buyers} buyers, distinct mix, {secs} s a run, the same seeded world (reseeded, and the replicas "
             f"caught up with the reseed, before each run); the two configurations alternate, {runs} runs "
             "each (noack, ack1, noack, ...), because runs on this shared machine move by some ±20% at "
             "64 buyers: compare the medians"
             + (" (this time, max - min of the runs: " + ", ".join(spread) + ")" if spread else "")
             + ". The p50 and p99 medians are the medians of the runs' p50 and p99.")
    if steady and len(masters) == 1:
        L.append("Every run had both replicas online on the master before and after it, every Sentinel "
                 "listed both (`SENTINEL REPLICAS`: flags `slave`, `master-link-status` ok), and the "
                 "Sentinels named the same master after every run: the master replicated the same "
                 "writes to the same two replicas in both configurations; the difference is the `WAIT` "
                 "that follows every commit (one per batch, not per purchase) with `--min-replicas-ack 1`.")
    else:
        L.append("The group was not steady throughout (replicas online, replicas every Sentinel sees, "
                 "before/after each run: " + ", ".join(
                     f'{h["name"]} {h["replicas_before"]}/{h["replicas_after"]}, '
                     f'{h["sentinels_see_before"]}/{h["sentinels_see_after"]}' for h in ran_ha)
                 + f'; master after the runs: {", ".join(sorted(masters))}): the rows are not comparable.')
    wait_tsv = os.path.join(raw, "ha-wait.tsv")
    wl = dict(l.rstrip("\n").split("\t") for l in list(open(wait_tsv))[1:]) if os.path.exists(wait_tsv) else {}
    wl_wait = {k[5:]: int(n) for k, n in wl.items() if k.startswith("WAIT ")}
    if wl_wait:
        L.append("What each `WAIT` asks for: in a short run of the ack1 configuration after the timed ones "
                 "(8 buyers, 500 purchases), `redis-cli MONITOR` on the master saw "
                 + ", ".join(f"{n:,} `WAIT {k} <timeout>`" for k, n in sorted(wl_wait.items()))
                 + f' for {int(wl.get("EXEC", 0)):,} `EXEC`s'
                 + ("; with two promotable replicas the service waits for both (docs/LOCKING.md, "
                    "\"What a write must reach to survive a failover\"), not for the one "
                    "`--min-replicas-ack 1` names." if list(wl_wait) == ["2"] else "."))
    elif os.path.exists(wait_tsv):
        L.append("What each `WAIT` asks for could not be read: `MONITOR` saw no `WAIT` in the short run "
                 "after the timed ones (raw/ha-wait.txt).")
    L.append("`EXEC` / `WAIT`: the master's `INFO commandstats` calls delta over the run (market-load reads "
             "it through the Sentinels). Raw reports: `raw/ha-<configuration>-<run>.json` and `.txt`, "
             "`raw/ha.tsv`, `raw/ha-wait.tsv`.")
# ---- Redis Cluster: raw/cluster-single.json and raw/cluster-cluster.json ----
cl = {t: os.path.join(raw, f"cluster-{t}.json") for t in ("single", "cluster")}
if all(os.path.exists(p) for p in cl.values()):
    cj = {t: json.load(open(p)) for t, p in cl.items()}
    L.append("")
    L.append("## Redis Cluster (64 buyers over several realms, distinct mix, --strategy market)")
    L.append("")
    L.append("| store | purchases/s | p50 ms | p99 ms | commands / purchase | commands per master | invariants |")
    L.append("|---|---:|---:|---:|---:|---|---|")
    for t, label in (("single", "one Redis"), ("cluster", "Redis Cluster, 3 masters")):
        j = cj[t]
        lat, inv, cpp = j["latency_ms"], j["invariants"], j.get("redis_commands_per_purchase")
        masters = j["redis"].get("masters", [])
        share = ", ".join(f'{m["share"] * 100:.1f}%' for m in masters if m.get("share") is not None)
        L.append(f'| {label} | {fmt(j["run"]["purchases_per_s"])} | {lat["all"]["p50"]:.3f} | '
                 f'{lat["all"]["p99"]:.3f} | {cpp if cpp is None else f"{cpp:.2f}"} | '
                 f'{share or "-"} | {"OK" if inv["ok"] else "**BROKEN**"} |')
    s1, s3 = cj["single"]["run"]["purchases_per_s"], cj["cluster"]["run"]["purchases_per_s"]
    if s1:
        L.append("")
        L.append(f"The cluster served {s3 / s1:.2f}x the single Redis's purchases/s on the same "
                 "machine (every process shares its cores: the three masters do not add CPU here). "
                 "The bench places realm i's slot on master i % 3 before seeding (an empty slot moves "
                 "with `CLUSTER SETSLOT <slot> NODE <id>`), as an operator places realms.")
    for t in ("single", "cluster"):
        ok200 = cj[t]["status"].get("200", 0)
        c = cj[t]["redis"].get("cpu_seconds") or 0
        if ok200 and c > 0:
            L.append(f"Redis CPU ({t}): {c:.2f} s (`INFO cpu`, user + sys, summed over its masters, from "
                     f"the first request to the last answer) for "
                     f"{ok200:,} purchases: {c / ok200 * 1e6:.1f} µs of a Redis core per purchase, so "
                     f"one master's core would carry about {ok200 / c:,.0f} purchases/s.")
    L.append("Raw reports: `raw/cluster-single.json`, `raw/cluster-cluster.json` and `.txt`.")
# ---- search: raw/search.tsv and raw/search-seed.tsv ----
stsv = os.path.join(raw, "search.tsv")
srows = [l.rstrip("\n").split("\t") for l in open(stsv)][1:] if os.path.exists(stsv) else []
if srows:
    sizes = sorted({int(r[0]) for r in srows})
    kinds = list(dict.fromkeys(r[1] for r in srows))
    by = {(int(r[0]), r[1]): (float(r[3]), float(r[4])) for r in srows}
    seed_tsv = os.path.join(raw, "search-seed.tsv")
    seeds = {int(l.split("\t")[0]): l.rstrip("\n").split("\t")[1:] for l in list(open(seed_tsv))[1:]} \
        if os.path.exists(seed_tsv) else {}
    L.append("")
    L.append("## Search (GET /market) by market size")
    L.append("")
    L.append("| query | " + " | ".join(f"{n:,} listings: p50 / p99 ms" for n in sizes) +
             (f" | p50 at {sizes[-1]:,} / at {sizes[0]:,} |" if len(sizes) > 1 else " |"))
    L.append("|---|" + "---:|" * len(sizes) + ("---:|" if len(sizes) > 1 else ""))
    for k in kinds:
        cells = [f"{by[(n, k)][0]:.3f} / {by[(n, k)][1]:.3f}" if (n, k) in by else "-" for n in sizes]
        ratio = ""
        if len(sizes) > 1 and (sizes[0], k) in by and (sizes[-1], k) in by:
            ratio = f" | {by[(sizes[-1], k)][0] / by[(sizes[0], k)][0]:.2f}x"
        L.append(f"| `{k}` | " + " | ".join(cells) + ratio + (" |" if ratio else ""))
    L.append("")
    n_req = srows[0][2]
    L.append(f"Each size: `market-seed --reset --generate players=N/100,items=N` (prices 1-1000; every "
             f"listing in market:{{main}} and its item's and seller's search indexes), then `market-server` (defaults, "
             f"`--log-level warn`) and {n_req} requests of each kind, one at a time over one keep-alive "
             "connection from python3's http.client (its own cost, some 0.1 ms, is in every number), "
             "after 100 of warm-up; random items, sellers and price windows (100 wide). "
             "The deep pages start 90% into the market: by the cursor of the listing there, and by "
             "offset as before (a ZRANGE by rank of market:{main}).")
    if seeds:
        L.append("Seeding: " + "; ".join(f"{n:,} listings in {v[0]} s (Redis used_memory {v[1]} after)"
                                          for n, v in sorted(seeds.items())) + ".")
    L.append("Raw: `raw/search.tsv`, `raw/search-seed.tsv`.")
# ---- a flash sale: raw/flash.json ----
fp = os.path.join(raw, "flash.json")
if os.path.exists(fp):
    fj = json.load(open(fp))
    fl, lat, st = fj.get("flash", {}), fj["latency_ms"], fj["status"]
    L.append("")
    L.append("## Flash sale (--strategy market, market-load --mix flash)")
    L.append("")
    L.append("| buyers | stock | limit | time to sell out s | purchases/s | p50 ms | p99 ms | "
             "oversold | limit violations | 200 / 409 / 503 / other / transport | invariants |")
    L.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    L.append(f'| {fj["config"]["buyers"]:,} | {fl.get("stock", 0):,} | {fl.get("limit", 0):,} | '
             f'{fl.get("time_to_sell_out_s", 0):.3f}{"" if fl.get("sold_out") else " (not sold out)"} | '
             f'{fmt(fl.get("purchases_per_s", 0))} | {lat["all"]["p50"]:.3f} | {lat["all"]["p99"]:.3f} | '
             f'{fl.get("oversold", "?")} | {fl.get("limit_violations", "?")} | '
             f'{st["200"]} / {st["409"]} / {st["503"]} / {st["other"]} / {st["transport_errors"]} | '
             f'{"OK" if fj["invariants"]["ok"] else "**BROKEN**"} |')
    L.append("")
    L.append("Every buyer sends one request at a time (one unit each) from its own keep-alive "
             "connection; a sale's buys queue in the server and one worker serves them in batches "
             "(up to `--batch-max`) under the sale's lock, one guarded `HINCRBY` of the stock per "
             "batch. Time to sell out runs from the first request to the first 409 sold_out; "
             "purchases/s is the 200s over that time. Oversold (units beyond the stock) and limit "
             "violations (buyers above the limit in the sale's bought hash, read after the run) "
             "must be 0; the invariants include the trade audit and the house's funds. Raw report: "
             "`raw/flash.json` and `.txt`.")
# ---- the book: raw/book.json ----
bp = os.path.join(raw, "book.json")
if os.path.exists(bp):
    bj = json.load(open(bp))
    run, lat, st, inv = bj["run"], bj["latency_ms"], bj["status"], bj["invariants"]
    el = run["elapsed_s"] or 1
    fills = (inv.get("trades") or {}).get("recorded", 0)
    by = st.get("by_code", {})
    cpu_us = ""
    cf = os.path.join(raw, "book.cpu")
    if os.path.exists(cf):
        ticks, hz = open(cf).read().split()
        cpu_us = f'{int(ticks) / int(hz) * 1e6 / max(run["requests"], 1):.1f}'
    L.append("")
    L.append("## The book (--strategy market, market-load --mix book)")
    L.append("")
    L.append("| connections | requests/s | fills/s | p50 ms | p99 ms | Redis commands / request | "
             "Redis CPU µs / request | server CPU µs / request | 200 / 201 / 404 / 409 / other | "
             "invariants |")
    L.append("|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    rr = bj["redis"]
    L.append(f'| {bj["config"]["buyers"]:,} | {fmt(run["requests_per_s"])} | {fmt(fills / el)} | '
             f'{lat["all"]["p50"]:.3f} | {lat["all"]["p99"]:.3f} | '
             f'{rr["commands"] / max(run["requests"], 1):.2f} | '
             f'{rr["cpu_seconds"] * 1e6 / max(run["requests"], 1):.1f} | {cpu_us or "?"} | '
             f'{by.get("200", 0)} / {by.get("201", 0)} / {by.get("404", 0)} / {by.get("409", 0)} / '
             f'{st["other"]} | {"OK" if inv["ok"] else "**BROKEN**"} |')
    L.append("")
    L.append("Each request, on a listing of one of the world's goods drawn at random: 40% a buy "
             "order of 1..5 units at 80..110% of the listing's price (it fills the listings at "
             "or under it, then rests), 35% its seller selling 1..3 units into the book at "
             "70..100% of it, 15% a cancel of one of the run's resting orders, 10% its seller "
             "listing 1..2 more units at its price (which sells into any bid at or over it "
             "first). A fill is a trade; fills/s counts the trade records the run made. 404 is an "
             "order filled or taken back meanwhile, or units the seller no longer holds; 409 "
             "nothing to sell into. The invariants include funds with escrow, every order's "
             "escrow against its buyer's, and the trades against every player's funds and "
             "escrow. Raw report: `raw/book.json` and `.txt`.")
# ---- one hot auction: raw/auction-<strategy>.json ----
hot = [(s, json.load(open(os.path.join(raw, f"auction-{s}.json")))) for s in ("market", "optimistic")
       if os.path.exists(os.path.join(raw, f"auction-{s}.json"))]
if hot:
    L.append("")
    L.append("## One hot auction (market-load --mix auctions --auctions 1)")
    L.append("")
    L.append("| strategy | bidders | bids taken/s | refused (409)/s | p50 ms | p99 ms | "
             "server CPU µs / request | invariants |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---|")
    for s, aj in hot:
        run, lat, st, inv = aj["run"], aj["latency_ms"], aj["status"], aj["invariants"]
        el = run["elapsed_s"] or 1
        cpu_us = "?"
        cf = os.path.join(raw, f"auction-{s}.cpu")
        if os.path.exists(cf):
            ticks, hz = open(cf).read().split()
            cpu_us = f'{int(ticks) / int(hz) * 1e6 / max(run["requests"], 1):.1f}'
        L.append(f'| {s} | {aj["config"]["buyers"]:,} | {fmt(st["200"] / el)} | '
                 f'{fmt(st["409"] / el)} | {lat["all"]["p50"]:.3f} | {lat["all"]["p99"]:.3f} | '
                 f'{cpu_us} | {"OK" if inv["ok"] else "**BROKEN**"} |')
    L.append("")
    L.append("Every bidder bids the least the one auction takes as its last answer said; a bid "
             "another topped meanwhile is refused (409 bid_too_low, with the least it takes now, "
             "which the next bid uses). A bid taken escrows its amount and gives the bid it "
             "topped back, in one commit. The invariants include funds with escrow and the "
             "auction's escrow against its bidder's. Raw reports: `raw/auction-<strategy>.json`.")
# ---- listings that end: raw/ends-<case>.json ----
ends = [json.load(open(os.path.join(raw, f"ends-{c}.json"))) for c in ("calm", "kill")
        if os.path.exists(os.path.join(raw, f"ends-{c}.json"))]
if ends:
    L.append("")
    L.append("## Listings that end (three servers' sweepers, --strategy market)")
    L.append("")
    L.append("| case | listings ending at once | endings/s | last settled after | lateness p50 | "
             "lateness p99 | endings in the histograms |")
    L.append("|---|---:|---:|---:|---:|---:|---:|")
    for e in ends:
        le = lambda v: "?" if v is None else ("over 60 s" if v == float("inf") else f"≤ {v:g} s")
        L.append(f'| {"one server killed (-9) as it settled" if e["killed"] else "all three up"} | '
                 f'{e["endings"]:,} | {fmt(e["per_s"])} | {e["last_ms"] / 1000:.2f} s | '
                 f'{le(e["p50_le_s"])} | {le(e["p99_le_s"])} | {e["counted"]:,} |')
    L.append("")
    L.append("Every listing of the world ends at the same millisecond, a few seconds after the "
             "seed; each server runs its sweeper with its defaults (a look every second, a "
             "lease of 5 s). Endings/s and \"last settled after\" run from that millisecond to "
             "the first poll (every 20 ms) that finds no end left. Lateness is the servers' "
             "`market_settlement_lag_seconds` histograms, summed: the bounds of the buckets the "
             "median and the 99th percentile fall in. In the kill case the server that settled "
             "first is killed as soon as its histogram counts one: what it settled is not in "
             "the histograms, and the rest waits for its sweep lease to lapse. Raw reports: "
             "`raw/ends-calm.json`, `raw/ends-kill.json`.")
if notes:
    L.append("")
    L.append("## Notes")
    L.append("")
    L += [f"- {n}" for n in notes]
peers = os.path.join(out, "peers.md")
if os.path.exists(peers) and not peers_ran:
    L.append("")
    L.append("Peers: [peers.md](peers.md) is from an earlier run (its own date): not run this "
             "time (BENCH_PEERS), so do not compare its rows with these.")
elif os.path.exists(peers):
    L.append("")
    L.append("## Peers (run right after, same box): [peers.md](peers.md)")
    L.append("")
    body = open(peers).read().split("\n")
    L += [("#" + l if l.startswith("#") else l) for l in body]
open(os.path.join(out, "results.md"), "w").write("\n".join(L) + "\n")
PY

# ---- results.png ----
PLOTTED=""
for s in $RAN; do
    [ -s "$OUT/raw/$s-distinct.dat" ] && [ -s "$OUT/raw/$s-contended.dat" ] && PLOTTED="$PLOTTED $s"
done
PLOTTED=${PLOTTED# }
if command -v gnuplot >/dev/null && [ -n "$PLOTTED" ]; then
    term=png
    gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo && term=pngcairo
    sub="$(sed -n 's/^date=//p' "$OUT/raw/meta.txt"), $(nproc) shared cores, ${SECS}s per point"
    gnuplot -e "datadir='$OUT/raw'; strategies='$PLOTTED'; out='$OUT/results.png'; term='$term'; subtitle='$sub'" \
        scripts/bench_plot.gp 2>"$TMP/gnuplot.err" || {
        echo "bench: gnuplot failed: $(cat "$TMP/gnuplot.err")" >&2
        status=1
    }
fi

echo "bench: wrote $OUT/results.md${PLOTTED:+ and $OUT/results.png}"
[ -s "$NOTES" ] && { echo "bench: notes:"; sed 's/^/  /' "$NOTES"; }
exit "$status"
