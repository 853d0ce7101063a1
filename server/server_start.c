/* server_start.c - the HTTP front of the market: what it is built of, start and graceful stop.
 *
 * DESIGN
 * server_start() builds, from the configuration, the player tokens' keys
 * (api_auth), the lock client and the market, the page's files (web.c) and
 * the event streams (events.c), then starts the daemon (daemon.c), whose
 * access handler (request.c) answers through respond.c. Each file calls
 * only those below it: server_start.c, daemon.c, request.c, respond.c, then
 * conn.c (a store connection per thread), log.c, metrics.c, events.c,
 * cors.c, web.c, request_id.c and process.c.
 * Graceful stop: quiesce (stop accepting), wait for requests in flight to
 * complete, stop the market's worker (it answers what is queued), then stop
 * the daemon.
 */
#include "server/server.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>

#include "api/api.h"
#include "lock/lock.h"
#include "rconn/rconn.h"
#include "market/market.h"
#include "server/server_impl.h"

#define DRAIN_MS 10000 /* longest wait for requests in flight at stop */

/* Parses a comma-separated list of Redlock masters (each a server or a
 * Sentinel group): an odd number, 1 to LOCK_REDLOCK_NODES_MAX. Returns 0, or
 * -1 with a sentence in why. */
static int parse_masters(const char *list, rconn_addr *nodes, size_t *n, char *why, size_t whylen) {
    if (rconn_addr_parse_list(list, nodes, LOCK_REDLOCK_NODES_MAX, n) != RCONN_OK) {
        snprintf(why, whylen,
                 "redlock: bad --lock-redis list (want 1 to %d redis:// or redis-sentinel:// "
                 "URLs, comma-separated)",
                 LOCK_REDLOCK_NODES_MAX);
        return -1;
    }
    if (*n % 2 == 0) {
        snprintf(why, whylen, "redlock needs an odd number of masters (--lock-redis), not %zu",
                 *n);
        return -1;
    }
    return 0;
}

/* Builds s's lock client and market from its configuration. Returns
 * SERVER_OK, or SERVER_ERR_INVALID, _BACKEND, _NOMEM with a sentence in why
 * (what was built is freed by server_stop()). Redis need not be up:
 * connections are made on first use. */
static int market_build(server *s, char *why, size_t whylen) {
    const server_config *cfg = &s->cfg;
    market_config mcfg = {.redis_timeout_ms = cfg->redis_timeout_ms,
                          .min_replicas_ack = cfg->min_replicas_ack,
                          .replica_ack_timeout_ms = cfg->replica_ack_timeout_ms,
                          .batch_max = cfg->batch_max,
                          .workers = cfg->workers,
                          .lock_ttl_ms = cfg->lock_ttl_ms,
                          .acquire_timeout_ms = cfg->acquire_timeout_ms,
                          .trade_history = cfg->trade_history,
                          .trade_index = cfg->trade_index,
                          .no_price_history = cfg->no_price_history,
                          .sweep_interval_ms = cfg->sweep_interval_ms,
                          .sweep_lease_ms = cfg->sweep_lease_ms,
                          .test_stall_ms = cfg->test_stall_ms};
    if (rconn_addr_parse(cfg->redis, &mcfg.redis) < 0) {
        snprintf(why, whylen,
                 "bad Redis URL (want redis://[user:pass@]host[:port][/db], "
                 "redis-sentinel://[user:pass@]host[:port][,host[:port]...]/name[/db] or "
                 "redis-cluster://[user:pass@]host[:port][,host[:port]...])");
        return SERVER_ERR_INVALID;
    }
    int ack_ms = cfg->replica_ack_timeout_ms ? cfg->replica_ack_timeout_ms
                                              : cfg->redis_timeout_ms / 2; /* the market's default */
    if (cfg->min_replicas_ack > 0 && (ack_ms <= 0 || ack_ms >= cfg->redis_timeout_ms)) {
        snprintf(why, whylen,
                 "--replica-ack-timeout-ms (%d) must be above 0 and below --redis-timeout-ms (%d)",
                 ack_ms, cfg->redis_timeout_ms);
        return SERVER_ERR_INVALID;
    }
    if (market_strategy_parse(cfg->strategy, &mcfg.strategy) < 0) {
        snprintf(why, whylen, "unknown strategy '%s'", cfg->strategy);
        return SERVER_ERR_INVALID;
    }
    int lerr = 0, merr = 0;
    if (strcmp(cfg->lock, "local") == 0) {
        s->lock = lock_local_new(&lerr);
    } else if (strcmp(cfg->lock, "redlock") == 0) {
        rconn_addr nodes[LOCK_REDLOCK_NODES_MAX];
        size_t n = 0;
        if (parse_masters(cfg->lock_redis, nodes, &n, why, whylen) < 0) return SERVER_ERR_INVALID;
        s->lock = lock_redlock_new(nodes, n, cfg->redis_timeout_ms, &lerr);
    } else {
        rconn_addr where = mcfg.redis;
        if (cfg->lock_redis[0] && rconn_addr_parse(cfg->lock_redis, &where) < 0) {
            snprintf(why, whylen, "bad --lock-redis URL for the redis lock (one URL)");
            return SERVER_ERR_INVALID;
        }
        s->lock = lock_redis_new(&where, cfg->redis_timeout_ms, &lerr);
    }
    if (!s->lock) {
        snprintf(why, whylen, "lock backend '%s': %s", cfg->lock, lock_strerror(lerr));
        return lerr == LOCK_ERR_NOMEM ? SERVER_ERR_NOMEM : SERVER_ERR_BACKEND;
    }
    s->market = market_new(&mcfg, s->lock, &merr);
    if (!s->market) {
        snprintf(why, whylen, "market: %s", market_strerror(merr));
        return merr == MARKET_ERR_NOMEM ? SERVER_ERR_NOMEM : SERVER_ERR_INVALID;
    }
    if (cfg->sweep_interval_ms && market_sweeper_start(s->market) != MARKET_OK) {
        snprintf(why, whylen, "market: cannot start the sweeper");
        return SERVER_ERR_NOMEM;
    }
    return SERVER_OK;
}

/* Builds s->auth, the verification keys of player tokens, from s->cfg: the
 * --auth-secret (tokens without a kid), each --auth-key (PEM files read now), the
 * audience and the leeway. Returns SERVER_OK, SERVER_ERR_INVALID with a sentence in
 * why (a bad key; never the secret), or SERVER_ERR_NOMEM. */
static int auth_build(server *s, char *why, size_t whylen) {
    char kwhy[300];
    if (!(s->auth = api_auth_new())) return SERVER_ERR_NOMEM;
    api_auth_set_leeway(s->auth, s->cfg.auth_leeway_s);
    if (api_auth_set_audience(s->auth, s->cfg.auth_audience) < 0 ||
        (s->cfg.auth_secret[0] &&
         api_auth_set_secret(s->auth, s->cfg.auth_secret, kwhy, sizeof kwhy) < 0)) {
        snprintf(why, whylen, "bad --auth-secret or --auth-audience");
        return SERVER_ERR_INVALID;
    }
    const char *line = s->cfg.auth_keys;
    while (*line) {
        char spec[sizeof s->cfg.auth_keys];
        size_t n = strcspn(line, "\n");
        snprintf(spec, sizeof spec, "%.*s", (int)n, line);
        int rc = api_auth_add_key(s->auth, spec, kwhy, sizeof kwhy);
        if (rc < 0) {
            snprintf(why, whylen, "--auth-key: %s", kwhy);
            return SERVER_ERR_INVALID;
        }
        line += n + (line[n] == '\n');
    }
    return SERVER_OK;
}

/* Says in the log what a Redis crash can take back of the purchases
 * answered 200, from the store's appendfsync (market_durability): a
 * warning unless it is "always", a line at info when it cannot be read (a
 * store that is down now, or a user without CONFIG). Can't fail. */
static void report_durability(server *s) {
    market_conn *c = market_conn_new(s->market, NULL);
    char fsync[MARKET_FSYNC_MAX + 1], why[200];
    int rc = c ? market_durability(c, fsync, sizeof fsync, why, sizeof why) : MARKET_ERR_NOMEM;
    market_conn_free(c);
    if (rc < 0)
        server_log(SERVER_LOG_INFO, "msg=\"cannot read the store's appendfsync\" reason=\"%s\"",
                   rc == MARKET_ERR_NOMEM ? "out of memory" : why);
    else if (strcmp(fsync, "off") == 0)
        server_log(SERVER_LOG_WARN, "msg=\"the store keeps no append-only file (appendonly no): "
                                    "a Redis restart loses the purchases answered 200 since its "
                                    "last snapshot, if any\"");
    else if (strcmp(fsync, "always") != 0)
        server_log(SERVER_LOG_WARN,
                   "msg=\"the store runs appendfsync %s: a Redis crash can take "
                   "back purchases answered 200; appendfsync always keeps them "
                   "(OPERATIONS.md, Durability)\"",
                   fsync);
}

/* Builds the lock client and market from cfg (market_build) and starts
 * serving (server__daemon_start). Returns a new server (stop and free with
 * server_stop), or NULL with *err set (SERVER_ERR_INVALID, _LISTEN,
 * _BACKEND, _NOMEM) and a sentence in why. */
server *server_start(const server_config *cfg, int *err, char *why, size_t whylen) {
    int dummy;
    if (!err) err = &dummy;
    *err = SERVER_ERR_NOMEM;
    snprintf(why, whylen, "out of memory");
    server *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cfg = *cfg;
    server__metrics_init(&s->metrics);
    server_log_set_level(cfg->log_level);
    if (!cfg->no_auth && !cfg->auth_secret[0] && !cfg->auth_keys[0]) {
        *err = SERVER_ERR_INVALID;
        snprintf(why, whylen, "no --auth-secret (MARKET_AUTH_SECRET) nor --auth-key "
                              "(MARKET_AUTH_KEYS) given; --no-auth serves without authentication");
    } else if (!cfg->no_auth && (*err = auth_build(s, why, whylen)) != SERVER_OK) {
        /* why says which key */
    } else {
        if (cfg->no_auth)
            server_log(SERVER_LOG_WARN, "msg=\"authentication is off (--no-auth): any client may "
                                        "act for any player\"");
        *err = market_build(s, why, whylen);
        if (*err == SERVER_OK) report_durability(s);
        if (*err == SERVER_OK && cfg->web_dir[0]) {
            int rc = server__web_load(&s->web, cfg->web_dir, why, whylen);
            if (rc < 0) *err = SERVER_ERR_INVALID;
            if (rc > 0) server_log(SERVER_LOG_INFO, "msg=\"no market page at GET /\" reason=\"%s\"", why);
        }
        if (*err == SERVER_OK && !(s->events = server__events_new(s->market, cfg)))
            *err = SERVER_ERR_NOMEM;
        if (*err == SERVER_OK) *err = server__daemon_start(s, why, whylen);
    }
    if (*err == SERVER_OK) {
        why[0] = '\0';
        return s;
    }
    server_stop(s);
    return NULL;
}

/* Returns the TCP port the server listens on. Can't fail. */
int server_port(const server *s) { return s ? s->port : 0; }

/* Stops accepting, lets requests in flight finish (up to DRAIN_MS), stops the
 * daemon (its threads free their connections), then frees the market, the
 * lock client and s. NULL is a no-op. This function can't fail. */
void server_stop(server *s) {
    if (!s) return;
    if (s->daemon) {
        /* The quiesced listening socket is ours, but a pool's threads may
         * still poll it until they see the quiesce: stop listening now (new
         * connections are refused), close it only after MHD_stop_daemon. */
        MHD_socket fd = MHD_quiesce_daemon(s->daemon);
        if (fd != MHD_INVALID_SOCKET) (void)shutdown(fd, SHUT_RDWR);
        server__events_stop(s->events); /* event streams end: not requests to wait for */
        int64_t deadline = rconn_now_ms() + DRAIN_MS;
        while (atomic_load(&s->in_flight) > 0 && rconn_now_ms() < deadline) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        /* Purchases still queued are answered (their connections resumed)
         * while the daemon runs; any later one is refused. */
        market_shutdown(s->market);
        MHD_stop_daemon(s->daemon);
        if (fd != MHD_INVALID_SOCKET) close(fd);
    }
    server__conn_key_delete(s); /* the pool threads freed theirs; this thread may hold one */
    server__events_free(s->events); /* its followers use the market */
    market_free(s->market);
    lock_free(s->lock);
    server__web_free(&s->web);
    api_auth_free(s->auth);
    free(s);
}
