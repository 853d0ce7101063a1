/* market_store.c - the store layer: one Redis connection per market_conn
 * (one per master on a Redis Cluster), reconnecting by itself, and
 * pipelines.
 *
 * The lowest layer of market/ that does I/O (market_store.h). It knows
 * Redis, not the market's rules nor its data: the layers above build the
 * commands with the data model (market_model.c) and judge what comes back
 * with its replies (market_model_reply.c).
 *
 * Two things every layer above gets without asking:
 *   - a Sentinel group's master: a connection goes to the address the
 *     group's rconn_sentinel names, is used only after ROLE says "master",
 *     and is dropped (never reused) once the group's generation moved; a
 *     failed socket or a -READONLY, -LOADING or -MASTERDOWN answer makes it
 *     suspect that master, so the next connection asks the Sentinels again.
 *     A pipeline that relies on a WATCH made under an older generation is not
 *     sent on a new connection, where nothing would guard it: it returns
 *     MARKET__REDIRECTED and its attempt reads again (market__attempts);
 *   - acknowledged means replicated: with cfg.min_replicas_ack N > 0, a
 *     pipeline that holds EXEC gets "WAIT K timeout" behind it (one WAIT per
 *     commit, however many purchases it carries, and no extra round trip),
 *     and a commit that fewer than K replicas confirmed in time is
 *     MARKET_ERR_NOT_REPLICATED instead of its replies. K is N, and on a
 *     Sentinel group at least every replica the Sentinels could promote
 *     (rconn_sentinel_view: a replica that confirmed a write and is not the
 *     one promoted resyncs from the one that is, and forgets it). On a
 *     Sentinel group a commit is not even sent while a failover is under
 *     way or once the Sentinels name another master (MARKET_ERR_STORE), and
 *     a commit whose confirmation spans an announced step of a failover, or
 *     a new master, is MARKET_ERR_NOT_REPLICATED (market__ack_plan,
 *     judge_wait);
 *   - a Redis Cluster's master: every operation names its realm
 *     (market__route), whose keys all carry it as their hash tag, so they
 *     live in one slot; a pipeline goes to the master that serves that slot
 *     by m->cluster's map, on a connection kept per master. Every pipeline
 *     asks the map again, except one that relies on a WATCH sent earlier:
 *     it must go where the WATCH went. The cluster's answers:
 *       -MOVED      the map is patched (and fetched again, rate-limited);
 *       -ASK        the slot is being migrated: a market pipeline is
 *       -TRYAGAIN   multi-key (WATCH, MULTI/EXEC, claims), which ASKING
 *                   cannot serve while the slot's keys are split between two
 *                   nodes, so it waits for the migration to end (backing off
 *                   1, 2, 4 ... 25 ms);
 *       -CLUSTERDOWN
 *                   MARKET_ERR_STORE (a 503), and the map is fetched again.
 *     A pipeline that met MOVED, ASK or TRYAGAIN applied nothing (an EXEC
 *     behind such an answer is -EXECABORT), so one that stands alone is sent
 *     again, up to cfg.redis_timeout_ms; one that relies on an earlier WATCH
 *     returns MARKET__REDIRECTED and its attempt reads again
 *     (market__attempts). The pipelines sent again are the market's reads,
 *     its SET NX of its own claims, MULTI/EXEC blocks and seeding's writes:
 *     all of them safe to repeat. A lane's connection (c->set_aside) does
 *     not wait for a split slot: ASK and TRYAGAIN come back to it at once as
 *     MARKET__REDIRECTED, and its lane serves other realms meanwhile
 *     (market_lane.c).
 */
#include "market/market_store.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REDIRECT_PAUSE_MAX_MS 25 /* the longest pause before a migrating slot is tried again */

/* ---- a connection ---- */

/* Returns a new connection handle for m (it connects on first use); caller
 * frees with market_conn_free(). NULL with *err = MARKET_ERR_NOMEM or
 * MARKET_ERR_INVALID. */
market_conn *market_conn_new(market *m, int *err) {
    int dummy;
    if (!err) err = &dummy;
    if (!m) {
        *err = MARKET_ERR_INVALID;
        return NULL;
    }
    market_conn *c = calloc(1, sizeof *c);
    if (!c) {
        *err = MARKET_ERR_NOMEM;
        return NULL;
    }
    c->m = m;
    /* until an operation names its realm: the default realm's master */
    (void)market__route(c, MARKET_REALM_DEFAULT);
    *err = MARKET_OK;
    return c;
}

/* Closes and frees c; NULL is a no-op. This function can't fail. */
void market_conn_free(market_conn *c) {
    if (!c) return;
    market__close(c);
    free(c->out);
    free(c);
}

static void wait_verdict(market_conn *c, int rc);

/* Forgets a dead or unwanted connection; the next call reconnects. A
 * deferred WAIT whose reply had not come is judged not replicated. */
void market__drop(market_conn *c) {
    if (c->wait_pending) {
        c->wait_pending = 0;
        if (c->wait_committed) {
            market__fail(c, "Redis %s: the connection closed before the replicas confirmed "
                            "the commit", c->where);
            MARKET__COUNT(c->m, not_replicated);
            wait_verdict(c, MARKET_ERR_NOT_REPLICATED);
        } else {
            wait_verdict(c, MARKET_OK);
        }
    }
    c->where[0] = '\0';
    c->wait_sent = 0;
    if (c->ctx) redisFree(c->ctx);
    c->ctx = NULL;
    c->unwatch = 0;
    c->unwatch_sent = 0;
    c->closed = 0;
    c->watching = 0;
    c->exec_sent = 0;
    c->script_asked = 0;
    c->script_known = NULL; /* a new connection may reach a server without it */
}

/* Drops c's connection and every parked one. This function can't fail. */
void market__close(market_conn *c) {
    market__drop(c);
    for (size_t i = 0; i < c->nparked; i++)
        redisFree(c->parked[i].ctx);
    c->nparked = 0;
}

/* Records why the store failed in c->errstr (the hiredis err/errstr way: the
 * reason travels as text to whoever reports it). Returns MARKET_ERR_STORE. */
int market__fail(market_conn *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errstr, sizeof c->errstr, fmt, ap);
    va_end(ap);
    return MARKET_ERR_STORE;
}

/* market__fail() with what Redis answered to what: its error text, or the
 * kind of reply that was not expected. Returns MARKET_ERR_STORE. */
int market__fail_reply(market_conn *c, const char *what, const redisReply *r) {
    if (r && (r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS))
        return market__fail(c, "%s: %.*s", what, (int)(r->len < 96 ? r->len : 96), r->str);
    return market__fail(c, "%s: unexpected reply (type %d)", what, r ? r->type : -1);
}

/* Plans the acknowledgement of a commit about to be sent on c (cfg.min_replicas_ack > 0):
 * *need is the replicas WAIT must count, cfg.min_replicas_ack or, on a Sentinel group, every
 * replica the Sentinels could promote if there are more (see top); *v the view it was planned
 * under (zero without Sentinels). Returns MARKET_OK, or MARKET_ERR_STORE with the reason in
 * c->errstr when no commit may be acknowledged now: a failover is under way, or c's master is
 * not the one the Sentinels name. */
int market__ack_plan(market_conn *c, unsigned *need, rconn_sentinel_view *v) {
    *need = c->m->cfg.min_replicas_ack;
    memset(v, 0, sizeof *v);
    if (!c->m->sentinel) return MARKET_OK;
    rconn_sentinel_view_get(c->m->sentinel, v);
    if (!v->known || v->generation != c->sgen)
        return market__fail(c, "Redis %s is no longer the master the Sentinels name", c->where);
    if (v->failover)
        return market__fail(c, "a failover of master %s is under way", c->where);
    if (v->replicas > *need) *need = v->replicas;
    return MARKET_OK;
}

/* Says that c's server may not be the master any more (a Sentinel group:
 * the next connection asks the Sentinels again; a cluster: the slot map is
 * fetched again). */
static void suspect(market_conn *c) {
    if (c->m->sentinel && c->sgen) rconn_sentinel_suspect(c->m->sentinel, c->sgen);
    if (c->m->cluster) rconn_cluster_stale(c->m->cluster);
}

/* ---- a cluster's masters ---- */

/* 1 when the next pipeline must go where the last one went: a WATCH it
 * relies on is there. */
static int bound(const market_conn *c) {
    return c->watching && !c->unwatch;
}

/* Keeps c's connection for later (evicting the oldest kept when full). */
static void park(market_conn *c) {
    if (!c->ctx) return;
    if (c->nparked == MARKET__NODES_MAX - 1) {
        redisFree(c->parked[0].ctx);
        memmove(&c->parked[0], &c->parked[1], --c->nparked * sizeof c->parked[0]);
    }
    struct market__parked *p = &c->parked[c->nparked++];
    p->ctx = c->ctx;
    p->unwatch = c->unwatch || c->watching;
    memcpy(p->where, c->where, sizeof p->where);
    c->ctx = NULL;
    market__drop(c);
}

/* Takes the kept connection to where ("host:port") back into use, if any. */
static void unpark(market_conn *c, const char *where) {
    for (size_t i = 0; i < c->nparked; i++) {
        struct market__parked *p = &c->parked[i];
        if (strcmp(p->where, where) != 0) continue;
        c->ctx = p->ctx;
        c->unwatch = p->unwatch;
        memcpy(c->where, p->where, sizeof c->where);
        memmove(p, p + 1, (--c->nparked - i) * sizeof *p);
        return;
    }
}

/* Points c at the master that serves c->slot now, by the slot map (which
 * may fetch it): the connection in use is parked when that master changed.
 * Returns MARKET_OK, or MARKET_ERR_STORE when no master is known. */
static int follow(market_conn *c) {
    rconn_addr a;
    char why[128];
    if (rconn_cluster_master(c->m->cluster, (unsigned)c->slot, &a, why, sizeof why) != RCONN_OK)
        return market__fail(c, "cluster slot %d: %s", c->slot, why);
    if (a.port == c->at_port && strcmp(a.host, c->at_host) == 0) return MARKET_OK;
    char where[sizeof c->where];
    snprintf(where, sizeof where, "%s:%d", a.host, a.port);
    park(c);
    unpark(c, where);
    memcpy(c->at_host, a.host, sizeof c->at_host);
    c->at_port = a.port;
    return MARKET_OK;
}

/* Sends c's next operations to the master of slot (a cluster; otherwise a
 * no-op). Returns MARKET_OK, or MARKET_ERR_STORE when no master is known
 * (c->errstr says why). */
int market__route_slot(market_conn *c, unsigned slot) {
    if (!c->m->cluster) return MARKET_OK;
    c->slot = (int)slot;
    return bound(c) ? MARKET_OK : follow(c);
}

/* Sends c's next operations to the master of realm's slot, the slot of
 * "{<realm>}" and so of every key of the realm (see market__route_slot). */
int market__route(market_conn *c, const char *realm) {
    return c->m->cluster ? market__route_slot(c, market__realm_slot(realm)) : MARKET_OK;
}

/* Waits before a slot on the move is tried again: nothing after a MOVED
 * (the map knows the new master), else 1, 2, 4 ... REDIRECT_PAUSE_MAX_MS
 * ms by tries (1, 2, ...). */
void market__redirect_pause(market_conn *c, int tries) {
    if (c->redirect == 1) return;
    long ms = tries >= 5 ? REDIRECT_PAUSE_MAX_MS : 1L << (tries - 1);
    if (ms > REDIRECT_PAUSE_MAX_MS) ms = REDIRECT_PAUSE_MAX_MS;
    struct timespec ts = {0, ms * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Reads what a cluster said in replies[0..n) of the pipeline just sent:
 * 0 nothing (or its EXEC committed), 1 MOVED, 2 ASK or TRYAGAIN, 3
 * CLUSTERDOWN; reports redirects and outages to the slot map, and the
 * first such answer to c->errstr. */
static int cluster_said(market_conn *c, redisReply **replies, size_t n) {
    if (c->exec_sent && replies[c->exec_sent - 1]->type == REDIS_REPLY_ARRAY) return 0;
    int said = 0;
    for (size_t i = 0; i < n; i++) {
        const redisReply *r = replies[i];
        if (r->type != REDIS_REPLY_ERROR) continue;
        int k = 0;
        rconn_cluster_redirect rd;
        if (rconn_cluster_redirect_parse(r->str, r->len, &rd) == 0) {
            if (!rd.host[0]) memcpy(rd.host, c->at_host, sizeof rd.host);
            rconn_cluster_redirected(c->m->cluster, &rd);
            k = rd.ask ? 2 : 1;
        } else if (strncmp(r->str, "TRYAGAIN", 8) == 0) {
            MARKET__COUNT(c->m, cluster_tryagain);
            k = 2;
        } else if (strncmp(r->str, "CLUSTERDOWN", 11) == 0) {
            MARKET__COUNT(c->m, cluster_down);
            rconn_cluster_stale(c->m->cluster);
            k = 3;
        }
        if (k && !said) market__fail_reply(c, "cluster", r);
        if (k > said) said = k;
    }
    return said;
}

/* Connects (when not connected), authenticates and selects the database;
 * for a Sentinel group, to the master the Sentinels name, checked with ROLE.
 * Returns MARKET_OK, or MARKET_ERR_STORE when Redis cannot be reached or
 * refuses us (c->errstr says which), MARKET_ERR_NOMEM on out-of-memory. */
int market__connect(market_conn *c) {
    if (c->ctx && c->m->sentinel && c->sgen != rconn_sentinel_generation(c->m->sentinel))
        market__drop(c); /* made for a master that may be gone: never reused */
    if (c->ctx) return MARKET_OK;
    const market_config *cfg = &c->m->cfg;
    rconn_addr addr = cfg->redis;
    c->sgen = 0;
    if (c->m->sentinel) {
        char why[160];
        if (rconn_sentinel_master(c->m->sentinel, &addr, &c->sgen, why, sizeof why) != RCONN_OK)
            return market__fail(c, "no master: %s", why);
    }
    if (c->m->cluster) {
        if (!c->at_port) {
            int rc = follow(c);
            if (rc < 0) return rc;
        }
        memcpy(addr.host, c->at_host, sizeof addr.host);
        addr.port = c->at_port;
        addr.db = 0;
    }
    redisContext *ctx = NULL;
    char why[RCONN_AT_MAX + 160];
    int rc = rconn_connect(addr.host, addr.port, cfg->redis_timeout_ms, cfg->redis_timeout_ms,
                           &ctx, why, sizeof why);
    if (rc == RCONN_ERR_NOMEM) return MARKET_ERR_NOMEM;
    if (rc != RCONN_OK) {
        market__fail(c, "cannot connect to %s", why);
        suspect(c);
        return MARKET_ERR_STORE;
    }
    c->ctx = ctx;
    snprintf(c->where, sizeof c->where, "%s:%d", addr.host, addr.port);
    if (rconn_setup(ctx, &addr, RCONN_SETUP_AUTH | RCONN_SETUP_SELECT, why, sizeof why) !=
        RCONN_OK) {
        market__fail(c, "Redis refused %s", why);
        goto fail_dropped;
    }
    if (c->m->sentinel && rconn_setup(ctx, &addr, RCONN_SETUP_ROLE, why, sizeof why) != RCONN_OK) {
        market__fail(c, "Redis %s, named master by the Sentinels: %s", c->where, why);
        goto fail_dropped;
    }
    return MARKET_OK;
fail_dropped:
    suspect(c);
    market__drop(c);
    return MARKET_ERR_STORE;
}

/* Runs the first command of b (borrowed) at once, on c's connection as it is (no UNWATCH
 * or redirect handling: the bulk reads of tools), and returns its reply (new; caller frees
 * with freeReplyObject). Returns NULL with *rc MARKET_ERR_STORE when not connected or after
 * an I/O error (then the connection has been dropped), or MARKET_ERR_NOMEM when b could not
 * be built. */
redisReply *market__command_buf(market_conn *c, market__buf *b, int *rc) {
    *rc = market__buf_seal(b);
    if (*rc < 0) return NULL;
    *rc = MARKET_ERR_STORE;
    if (!c->ctx || b->n == 0) return NULL;
    redisReply *r = redisCommandArgv(c->ctx, b->argc[0], b->argv[0], NULL);
    if (!r) market__drop(c);
    if (r) *rc = MARKET_OK;
    return r;
}

/* Sends n commands in one write and reads their n replies into replies[]
 * (new references; free with market__replies_free). Connects first when
 * needed, and sends a pending UNWATCH in front. Returns MARKET_OK, or
 * MARKET_ERR_STORE (connection dropped, no replies left to free),
 * MARKET_ERR_NOMEM, or MARKET__REDIRECTED (nothing applied: a cluster slot on
 * the move, when the pipeline relies on an earlier WATCH or c->set_aside; or
 * the WATCH it relies on went to a master the Sentinels may no longer name).
 * Error replies are returned as replies: the caller judges them. argv[i]
 * holds argc[i] NUL-terminated arguments. */
int market__pipeline_argv(market_conn *c, size_t n, const int *argc, const char **const *argv,
                          redisReply **replies) {
    /* A connection that sat idle through a Redis restart is dead without
     * knowing it. A pipeline that does not commit may run again on a fresh
     * connection; one that commits (... EXEC) must not: its WATCH died
     * with the old connection, and it may have been applied. */
    int reused = c->ctx != NULL;
    int may_retry = 1;
    for (size_t i = 0; i < n; i++)
        if (market__cmd_is_exec(argv[i])) may_retry = 0;
    int64_t since = rconn_now_ms();
    int alone = !bound(c); /* relies on no earlier WATCH: may be sent again */
    for (int moved = 1;; moved++) {
        int rc = market__pipeline_send(c, n, argc, argv);
        if (rc == MARKET_OK) rc = market__pipeline_recv(c, n, replies);
        if (rc == MARKET__REDIRECTED) {
            /* Its attempt reads again; a lane tries a split slot later. */
            if (!alone || (c->set_aside && c->redirect == 2)) return rc;
            if (rconn_now_ms() - since >= c->m->cfg.redis_timeout_ms) return MARKET_ERR_STORE;
            market__redirect_pause(c, moved);
            continue;
        }
        if (rc != MARKET_ERR_STORE || !(reused && may_retry && c->closed)) return rc;
        reused = 0; /* one more try, on a new connection */
    }
}

/* Drops c after a failed write or read, noting whether the server had
 * closed it: only such a connection is worth another try (a timeout is a
 * slow or paused server, and trying again doubles the wait). */
static int pipeline_failed(market_conn *c) {
    c->closed =
        c->ctx && (c->ctx->err == REDIS_ERR_EOF ||
                   (c->ctx->err == REDIS_ERR_IO && (errno == ECONNRESET || errno == EPIPE)));
    if (c->ctx)
        market__fail(c, "Redis %s: %s", c->where,
                     c->ctx->err ? c->ctx->errstr : "connection failed");
    suspect(c);
    int closed = c->closed;
    market__drop(c); /* clears c->closed */
    c->closed = closed;
    return MARKET_ERR_STORE;
}

#define OUT_KEEP (1u << 20) /* the largest encoded pipeline a connection keeps room for */

/* Runs c's sent hook, once. */
static void run_sent(market_conn *c) {
    void (*f)(void *) = c->sent;
    c->sent = NULL;
    if (f) f(c->sent_ud);
}

/* Sends buffer b's commands (market_model.h) as one pipeline and reads
 * their replies into b->rep, as market__pipeline_argv() does; the caller
 * frees them (market__replies_free(b->rep, b->n)) unless it fails. */
int market__pipeline_buf(market_conn *c, market__buf *b) {
    int rc = market__buf_seal(b);
    if (rc < 0) return rc;
    return market__pipeline_argv(c, b->n, b->argc, b->argv, b->rep);
}

/* Judges rep, the reply to a read of a realm's seeding mark, the key mark:
 * its EXISTS (market__rd_building()), or its value (an element of an MGET).
 * Returns MARKET_OK (no seeding is writing the realm), or
 * ERR_REALM_UNAVAILABLE (one is, or one stopped half-way), ERR_STORE (Redis
 * refused the read), with the reason in c->errstr. */
int market__building_judge(market_conn *c, const char *mark, const redisReply *rep) {
    int set = rep->type == REDIS_REPLY_INTEGER  ? rep->integer != 0
              : rep->type == REDIS_REPLY_STRING ? 1
              : rep->type == REDIS_REPLY_NIL    ? 0
                                                : -1;
    if (set < 0) return market__fail_reply(c, "reading whether the realm is being seeded", rep);
    if (!set) return MARKET_OK;
    market__fail(c, "the realm is being seeded or reset (%s is set)", mark);
    return MARKET_ERR_REALM_UNAVAILABLE;
}

/* Makes c ready to send a pipeline: connected to the master it must go to.
 * Returns MARKET_OK, or what market__pipeline_send() returns then. */
static int send_ready(market_conn *c) {
    c->closed = 0;
    if (c->ctx && bound(c) && c->m->sentinel &&
        c->sgen != rconn_sentinel_generation(c->m->sentinel)) {
        /* The WATCH this pipeline relies on is on a master the Sentinels may no longer name:
         * it must not go out on a new connection, unguarded. Its attempt reads again. */
        run_sent(c);
        market__drop(c);
        c->redirect = 1; /* read again at once */
        market__fail(c, "the Sentinels' master may have changed since the read");
        return MARKET__REDIRECTED;
    }
    if (!c->ctx || c->m->cluster) run_sent(c); /* connecting or following may wait */
    if (c->m->cluster && !bound(c)) { /* the slot's master may have changed since */
        int rc = follow(c);
        if (rc < 0) return rc;
    }
    return market__connect(c);
}

/* Sends a pipeline of n commands (as market__pipeline_argv()) and returns
 * without waiting: read its replies with market__pipeline_recv() before any
 * other use of c. Returns MARKET_OK, MARKET_ERR_STORE with c dropped,
 * MARKET_ERR_NOMEM with nothing sent, or MARKET__REDIRECTED with c dropped
 * and nothing sent (it relies on a WATCH made for a master the Sentinels may
 * no longer name). Runs c's sent hook (see market_conn). */
int market__pipeline_send(market_conn *c, size_t n, const int *argc, const char **const *argv) {
    int rc = send_ready(c);
    if (rc < 0) return rc;
    const market_config *cfg = &c->m->cfg;
    int unwatch = c->unwatch, done = 0, wait = 0, watch = 0, watches = 0;
    size_t exec = 0;
    c->out_len = 0;
    for (size_t i = 0; i < n; i++) { /* encoded first: nothing is queued when it fails */
        if (rconn_resp_append(&c->out, &c->out_cap, &c->out_len, argc[i], argv[i]) < 0) {
            market__fail(c, "out of memory for a pipeline of %zu commands", n);
            return MARKET_ERR_NOMEM;
        }
        if (market__cmd_is_watch(argv[i])) watch = watches = 1;
        if (argc[i] == 1 && market__cmd_is_exec(argv[i])) {
            exec = i + 1;
            watch = 0; /* EXEC ends every WATCH */
            if (cfg->min_replicas_ack) {
                wait = 1;
                c->exec_at = i;
            }
        }
    }
    if (wait && (rc = market__ack_plan(c, &c->wait_need, &c->wait_view)) < 0) {
        run_sent(c);
        market__drop(c); /* nothing sent; a WATCH it relied on goes with the connection */
        return rc;
    }
    const char *frame[3]; /* an UNWATCH in front; a WAIT, or the mark, behind (market_model.h) */
    char need[24], timeout[24];
    if (unwatch &&
        redisAppendCommandArgv(c->ctx, market__cmd_unwatch(frame), frame, NULL) != REDIS_OK)
        goto fail;
    /* one copy into hiredis's output buffer, not an allocation a command */
    int appended =
        !c->out_len || redisAppendFormattedCommand(c->ctx, c->out, c->out_len) == REDIS_OK;
    if (c->out_cap > OUT_KEEP) { /* a rare large pipeline (seeding): not kept for the next */
        free(c->out);
        c->out = NULL;
        c->out_cap = 0;
    }
    if (!appended) goto fail;
    if (wait && redisAppendCommandArgv(c->ctx,
                                       market__cmd_wait(frame, need, timeout, c->wait_need,
                                                        cfg->replica_ack_timeout_ms),
                                       frame, NULL) != REDIS_OK)
        goto fail;
    /* a batch's read asks, until the connection knows, whether its commit's script is cached */
    int ask = c->script_sha && watches && !exec && c->script_known != c->script_sha;
    if (ask && redisAppendCommandArgv(c->ctx, market__cmd_script_exists(frame, c->script_sha),
                                      frame, NULL) != REDIS_OK)
        goto fail;
    while (!done)
        if (redisBufferWrite(c->ctx, &done) != REDIS_OK) goto fail;
    run_sent(c);
    c->unwatch = 0;
    c->unwatch_sent = unwatch;
    c->wait_sent = wait;
    c->script_asked = ask;
    c->exec_sent = exec;
    if (unwatch || exec) c->watching = 0;
    if (watch) c->watching = 1;
    return MARKET_OK;
fail:
    run_sent(c);
    return pipeline_failed(c);
}

/* Judges the WAIT behind a commit: MARKET_OK when EXEC committed nothing
 * (aborted, refused), or when the replicas planned (c->wait_need) confirmed
 * it and, on a Sentinel group, no step of a failover was announced and no
 * new master named meanwhile, and the Sentinels list no more replicas that
 * could be promoted than confirmed it; else MARKET_ERR_NOT_REPLICATED,
 * counted, with the reason in c->errstr. */
static int judge_wait(market_conn *c, int committed, const redisReply *wait) {
    unsigned want = c->wait_need;
    if (!committed) return MARKET_OK;
    if (wait->type != REDIS_REPLY_INTEGER) {
        market__fail_reply(c, "WAIT after the commit", wait);
    } else if (wait->integer < (long long)want) {
        market__fail(c, "Redis %s: %lld of %u replicas confirmed the commit within %d ms",
                     c->where, wait->integer, want, c->m->cfg.replica_ack_timeout_ms);
    } else if (!c->m->sentinel) {
        return MARKET_OK;
    } else {
        const rconn_sentinel_view *then = &c->wait_view;
        rconn_sentinel_view now;
        rconn_sentinel_view_get(c->m->sentinel, &now);
        if (now.generation != then->generation || now.alarms != then->alarms || now.failover)
            market__fail(c, "Redis %s: a failover began before the commit was confirmed",
                         c->where);
        else if (now.replicas > (unsigned long long)wait->integer)
            market__fail(c, "Redis %s: %lld replicas confirmed the commit, the Sentinels could "
                            "promote %u", c->where, wait->integer, now.replicas);
        else
            return MARKET_OK;
    }
    MARKET__COUNT(c->m, not_replicated);
    return MARKET_ERR_NOT_REPLICATED;
}

/* Keeps the verdict rc on c's deferred WAIT, with c->errstr as its reason. */
static void wait_verdict(market_conn *c, int rc) {
    c->wait_judged = 1;
    c->wait_rc = rc;
    snprintf(c->wait_why, sizeof c->wait_why, "%s", rc < 0 ? c->errstr : "");
}

/* Reads and judges c's deferred WAIT (c->wait_pending), which comes before
 * any other reply. Returns 0, or -1 when the connection failed (dropped:
 * the commit is judged not replicated). */
static int wait_take(market_conn *c) {
    void *r = NULL;
    if (redisGetReply(c->ctx, &r) != REDIS_OK) {
        pipeline_failed(c); /* judged in market__drop() */
        return -1;
    }
    c->wait_pending = 0;
    wait_verdict(c, judge_wait(c, c->wait_committed, r));
    freeReplyObject(r);
    return 0;
}

/* Hands the verdict of the WAIT deferred behind c's last commit, reading it
 * first (which waits for the replicas) when it has not come: MARKET_OK
 * (confirmed, nothing committed, or no WAIT deferred), or
 * MARKET_ERR_NOT_REPLICATED with the reason in why (len bytes). */
int market__wait_recv(market_conn *c, char *why, size_t len) {
    if (c->wait_pending) (void)wait_take(c);
    if (!c->wait_judged) return MARKET_OK;
    c->wait_judged = 0;
    if (c->wait_rc < 0) snprintf(why, len, "%s", c->wait_why);
    return c->wait_rc;
}

/* Reads the n replies of market__pipeline_send() into replies (the caller
 * frees them with market__replies_free()). Returns MARKET_OK, or
 * MARKET_ERR_STORE with c dropped and nothing to free. */
int market__pipeline_recv(market_conn *c, size_t n, redisReply **replies) {
    size_t got = 0;
    c->closed = 0;
    if (!c->ctx) return market__fail(c, "no connection to Redis");
    if (c->wait_pending && wait_take(c) < 0) return MARKET_ERR_STORE;
    if (c->unwatch_sent) {
        void *r = NULL;
        if (redisGetReply(c->ctx, &r) != REDIS_OK) goto fail;
        freeReplyObject(r);
        c->unwatch_sent = 0;
    }
    int not_master = 0;
    for (; got < n; got++) {
        void *r = NULL;
        if (redisGetReply(c->ctx, &r) != REDIS_OK) goto fail;
        replies[got] = r;
        not_master |= rconn_reply_not_master(r);
    }
    if (c->script_asked) { /* the SCRIPT EXISTS behind a batch's read (market__ask_script) */
        void *r = NULL;
        if (redisGetReply(c->ctx, &r) != REDIS_OK) goto fail;
        c->script_asked = 0;
        c->script_known = market__reply_script_here(r) ? c->script_sha : NULL;
        freeReplyObject(r);
    }
    if (c->wait_sent && c->defer_wait) { /* read by market__wait_recv() */
        c->wait_sent = 0;
        c->wait_pending = 1;
        c->wait_committed = replies[c->exec_at]->type == REDIS_REPLY_ARRAY;
    } else if (c->wait_sent) {
        void *r = NULL;
        if (redisGetReply(c->ctx, &r) != REDIS_OK) goto fail;
        c->wait_sent = 0;
        int rc = judge_wait(c, replies[c->exec_at]->type == REDIS_REPLY_ARRAY, r);
        freeReplyObject(r);
        if (rc < 0) {
            market__replies_free(replies, n);
            return rc;
        }
    }
    if (not_master) { /* the caller judges the replies; the connection is done */
        suspect(c);
        market__drop(c);
    }
    int said = c->m->cluster ? cluster_said(c, replies, n) : 0;
    if (said) {
        market__replies_free(replies, n);
        if (c->watching) c->unwatch = 1; /* a WATCH that went out with it is abandoned */
        if (said == 3) return MARKET_ERR_STORE;
        c->redirect = said;
        return MARKET__REDIRECTED;
    }
    return MARKET_OK;
fail:
    market__replies_free(replies, got);
    return pipeline_failed(c);
}

/* Makes sure a stored outcome that is about to be replayed is on enough
 * replicas (cfg.min_replicas_ack): its commit may have been answered
 * not_replicated. WAIT only counts this connection's own writes, so each
 * record keys[0..n) is written again (EXPIRE to the full idempotency TTL, in
 * one MULTI/EXEC), which puts the whole stream up to it behind the WAIT that
 * every EXEC gets. Returns MARKET_OK (at once when no replica is asked
 * for), MARKET_ERR_NOT_REPLICATED, MARKET_ERR_STORE (also when a record is
 * gone: it expired after it was read), MARKET_ERR_INVALID (more than
 * MARKET__BATCH_MAX keys). */
int market__replicated(market_conn *c, const char *const *keys, size_t n) {
    if (!c->m->cfg.min_replicas_ack || n == 0) return MARKET_OK;
    if (n > MARKET__BATCH_MAX) return MARKET_ERR_INVALID;
    market__buf b = {0};
    size_t nc = n + 2;
    market__fx_multi(&b);
    for (size_t i = 0; i < n; i++) market__fx_idem_keep(&b, keys[i]);
    market__fx_exec(&b);
    int rc = market__pipeline_buf(c, &b);
    if (rc < 0) market__buf_free(&b);
    if (rc == MARKET__REDIRECTED) return MARKET_ERR_STORE; /* a lane's: c->errstr says why */
    if (rc < 0) return rc;
    redisReply **rep = b.rep;
    const redisReply *exec = rep[nc - 1];
    if (exec->type != REDIS_REPLY_ARRAY || exec->elements != n)
        rc = market__fail_reply(c, "re-recording a replayed outcome", exec);
    for (size_t i = 0; i < n && rc == MARKET_OK; i++)
        if (exec->element[i]->type != REDIS_REPLY_INTEGER || exec->element[i]->integer != 1)
            rc = market__fail(c, "idempotency record %s expired while replayed", keys[i]);
    market__replies_free(rep, nc);
    market__buf_free(&b);
    return rc;
}

/* Frees replies[0..n) and sets them to NULL. This function can't fail. */
void market__replies_free(redisReply **replies, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (replies[i]) freeReplyObject(replies[i]);
        replies[i] = NULL;
    }
}

/* Makes the pipelines of c that read under a WATCH (the batches' reads) also ask, behind
 * their own commands, whether the server has the script script_sha (kept: static storage)
 * cached, until the connection knows (c->script_known), or until
 * market__ask_script(c, NULL). Can't fail. */
void market__ask_script(market_conn *c, const char *script_sha) {
    c->script_sha = script_sha && *script_sha ? script_sha : NULL;
}

/* Sends buffer b's commands on realm's master as market__pipeline_buf()
 * does, and in the same pipeline reads whether seeding is writing realm.
 * Returns MARKET_OK with the replies of b's commands in b->rep (the caller
 * frees them and b), or ERR_REALM_UNAVAILABLE (c->errstr says why: see
 * building_judge()), ERR_STORE, ERR_NOMEM, MARKET__REDIRECTED with b
 * freed. */
int market__read_buf(market_conn *c, const char *realm, market__buf *b) {
    market__realm rl;
    market__realm_init(&rl, realm);
    size_t n = b->n;
    market__rd_building(b, rl.building);
    int rc = market__route(c, realm);
    if (rc == MARKET_OK) rc = market__pipeline_buf(c, b);
    if (rc == MARKET_OK) {
        rc = market__building_judge(c, rl.building, b->rep[n]);
        freeReplyObject(b->rep[n]);
        b->n = n; /* the mark's read is not the caller's */
        if (rc < 0) market__replies_free(b->rep, n);
    }
    if (rc < 0) market__buf_free(b);
    return rc;
}

/* Runs b - MULTI, one write command, EXEC (market__fx_multi(), the command,
 * market__fx_exec()) - on realm's master: a write that is not a batch's
 * commit (the admin's), confirmed on the replicas as every commit is
 * (cfg.min_replicas_ack: the WAIT behind its EXEC). The caller frees b.
 * Returns MARKET_OK with *rep the command's reply (caller frees; never an
 * error reply), or ERR_NOT_REPLICATED (written on the master, not confirmed
 * in time: its outcome is unknown), ERR_REALM_UNAVAILABLE, ERR_STORE,
 * ERR_NOMEM. */
int market__write_one(market_conn *c, const char *realm, market__buf *b, redisReply **rep) {
    *rep = NULL;
    int rc = market__read_buf(c, realm, b);
    if (rc < 0) return rc;
    redisReply *x = b->rep[2];
    if (x->type != REDIS_REPLY_ARRAY || x->elements != 1 ||
        x->element[0]->type == REDIS_REPLY_ERROR) {
        const redisReply *e = market__reply_error(b->rep, 3);
        rc = market__fail_reply(c, "a write refused",
                                e                                             ? e
                                : x->type == REDIS_REPLY_ARRAY && x->elements ? x->element[0]
                                                                              : x);
    } else {
        *rep = x->element[0];
        x->element[0] = NULL; /* the caller's now: freeReplyObject() skips it */
    }
    market__replies_free(b->rep, b->n);
    return rc;
}

/* Runs script over keys[0..nkeys) and args[0..nargs) on realm's master as one write
 * (market__write_one()) that answers a number, into *out (what: the write, for a failure's
 * text). Returns MARKET_OK, or ERR_STORE (an answer that is no number), or
 * market__write_one()'s error. */
int market__write_script(market_conn *c, const char *realm, const char *script, size_t nkeys,
                         const char *const *keys, size_t nargs, const char *const *args,
                         const char *what, int64_t *out) {
    market__buf b = {0};
    market__fx_multi(&b); /* a commit: confirmed by the replicas (cfg.min_replicas_ack) */
    market__fx_script(&b, script, nkeys, keys, nargs, args);
    market__fx_exec(&b);
    redisReply *r = NULL;
    int rc = market__write_one(c, realm, &b, &r);
    market__buf_free(&b);
    if (rc < 0) return rc;
    if (r->type != REDIS_REPLY_INTEGER)
        rc = market__fail_reply(c, what, r);
    else
        *out = (int64_t)r->integer;
    freeReplyObject(r);
    return rc;
}

/* Adds realm to the realms whose listings may end (MARKET__ENDING_KEY), confirmed on the
 * replicas as a commit is: before a listing with an end is committed, so that every
 * sweeper finds it. Returns MARKET_OK, or ERR_NOT_REPLICATED, ERR_STORE, ERR_NOMEM. */
int market__ending_add(market_conn *c, const char *realm) {
    market__buf b = {0};
    market__fx_multi(&b);
    market__fx_ending_add(&b, realm);
    market__fx_exec(&b);
    redisReply *r = NULL;
    int rc = market__write_one(c, MARKET__ENDING_TAG, &b, &r);
    market__buf_free(&b);
    freeReplyObject(r);
    return rc;
}

/* Runs the one read command of b on realm's master (see market__read_buf;
 * the caller frees b). Returns MARKET_OK with *rep set (caller frees; never
 * an error reply), or ERR_STORE, ERR_NOMEM. */
int market__read_one(market_conn *c, const char *realm, market__buf *b, redisReply **rep) {
    int rc = market__read_buf(c, realm, b);
    if (rc < 0) return rc;
    *rep = b->rep[0];
    if ((*rep)->type == REDIS_REPLY_ERROR) {
        rc = market__fail_reply(c, "read refused", *rep);
        freeReplyObject(*rep);
        *rep = NULL;
    }
    return rc;
}

/* Reads realm's streams s[0..n) (1..MARKET__STREAMS_MAX) on realm's master as one snapshot, in
 * one MULTI/EXEC when n is more than 1 (a commit lands before every read or after every one): up to
 * limit (1..MARKET_TRADES_PAGE_MAX) entries of s[i] made after entry id after[i]
 * (after NULL, or after[i] NULL or "": from the oldest kept), oldest first; limit 0:
 * each one's latest entry alone (XREVRANGE). Returns MARKET_OK with *top set (the
 * caller frees it) and rep[0..n) borrowed from it (never an error reply),
 * ERR_INVALID (a bad realm, n, limit or after), or ERR_STORE. */
static int streams_read(market_conn *c, const char *realm, size_t n, const enum market__stream *s,
                        const char *const *after, size_t limit, redisReply **top,
                        const redisReply **rep) {
    if (!c || !market_id_valid(realm) || n == 0 || n > MARKET__STREAMS_MAX ||
        limit > MARKET_TRADES_PAGE_MAX)
        return MARKET_ERR_INVALID;
    char start[MARKET__STREAMS_MAX][MARKET_TRADE_ID_MAX + 2], count[24];
    for (size_t i = 0; i < n; i++) {
        const char *from = after && after[i] && *after[i] ? after[i] : NULL;
        if (from && !market_trade_id_valid(from)) return MARKET_ERR_INVALID;
        snprintf(start[i], sizeof start[i], "%s%s", from ? "(" : "", from ? from : "-");
    }
    snprintf(count, sizeof count, "%zu", limit);
    market__realm rl;
    market__realm_init(&rl, realm);
    market__buf b = {0};
    if (n > 1) market__fx_multi(&b);
    for (size_t i = 0; i < n; i++) {
        const char *key = s[i] == MARKET__STREAM_TRADES    ? rl.trades
                          : s[i] == MARKET__STREAM_CHANGES ? rl.changes
                                                           : rl.bids;
        if (limit)
            market__rd_stream(&b, key, start[i], count);
        else
            market__rd_stream_last(&b, key);
    }
    if (n > 1) market__fx_exec(&b);
    int rc = market__read_buf(c, realm, &b);
    if (rc < 0) {
        market__buf_free(&b);
        return rc;
    }
    redisReply *r = b.rep[b.n - 1];       /* the read, or EXEC's replies to the reads */
    market__replies_free(b.rep, b.n - 1); /* MULTI's OK and the QUEUEDs */
    market__buf_free(&b);
    if (n > 1 && (r->type != REDIS_REPLY_ARRAY || r->elements != n)) {
        rc = market__fail_reply(c, "reading the streams", r);
    } else {
        for (size_t i = 0; i < n && rc == MARKET_OK; i++) {
            rep[i] = n > 1 ? r->element[i] : r;
            if (rep[i]->type == REDIS_REPLY_ERROR)
                rc = market__fail_reply(c, "read refused", rep[i]);
        }
    }
    if (rc < 0) {
        freeReplyObject(r);
        return rc;
    }
    *top = r;
    return MARKET_OK;
}

/* What realm's stream s holds, as a failure says it. */
static const char *stream_name(enum market__stream s) {
    return s == MARKET__STREAM_TRADES    ? "trades"
           : s == MARKET__STREAM_CHANGES ? "listing changes"
                                         : "auctions' changes";
}

/* Reads realm's streams s[0..n) (1..MARKET__STREAMS_MAX) as one snapshot (streams_read()): up to
 * limit (1..MARKET_TRADES_PAGE_MAX) entries of s[i] made after entry id after[i] (NULL
 * or "": from the oldest kept), oldest first (the next page starts after the last one
 * read). Returns MARKET_OK with out[i] a new array of count[i] entries (market_trade,
 * market_change or market_auction_event; caller frees; NULL when none), or ERR_INVALID, ERR_STORE,
 * ERR_NOMEM with none. */
int market__streams_after(market_conn *c, const char *realm, size_t n, const enum market__stream *s,
                          const char *const *after, size_t limit, void **out, size_t *count) {
    if (!out || !count || n == 0 || n > MARKET__STREAMS_MAX) return MARKET_ERR_INVALID;
    for (size_t i = 0; i < n; i++) {
        out[i] = NULL;
        count[i] = 0;
    }
    redisReply *top = NULL;
    const redisReply *rep[MARKET__STREAMS_MAX];
    int rc = limit ? streams_read(c, realm, n, s, after, limit, &top, rep) : MARKET_ERR_INVALID;
    for (size_t i = 0; i < n && rc == MARKET_OK; i++) {
        rc = market__reply_entries(rep[i], limit, s[i], &out[i], &count[i]);
        if (rc == MARKET_ERR_STORE)
            rc = market__fail(c, "the %s of realm %s are unreadable", stream_name(s[i]), realm);
    }
    if (top) freeReplyObject(top);
    if (rc < 0)
        for (size_t i = 0; i < n; i++) {
            free(out[i]);
            out[i] = NULL;
            count[i] = 0;
        }
    return rc;
}

/* Reads the ids of the latest entries of realm's streams s[0..n) (1..MARKET__STREAMS_MAX), as one
 * snapshot, into id[0..n) ("" for a stream that has none). Returns MARKET_OK,
 * ERR_INVALID or ERR_STORE. */
int market__streams_last(market_conn *c, const char *realm, size_t n, const enum market__stream *s,
                         char (*id)[MARKET_TRADE_ID_MAX + 1]) {
    if (!id || n == 0 || n > MARKET__STREAMS_MAX) return MARKET_ERR_INVALID;
    for (size_t i = 0; i < n; i++)
        id[i][0] = '\0';
    redisReply *top = NULL;
    const redisReply *rep[MARKET__STREAMS_MAX];
    int rc = streams_read(c, realm, n, s, NULL, 0, &top, rep);
    for (size_t i = 0; i < n && rc == MARKET_OK; i++)
        if (market__reply_stream_last(rep[i], id[i]) < 0)
            rc = market__fail(c, "the %s of realm %s are unreadable", stream_name(s[i]), realm);
    if (top) freeReplyObject(top);
    return rc;
}
