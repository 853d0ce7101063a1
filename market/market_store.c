/* market_store.c - the store layer: one Redis connection per market_conn,
 * reconnecting by itself, pipelines, and replies read into values.
 *
 * The lowest layer of market/ that does I/O (market_store.h). It knows
 * Redis, not the market's rules: the layers above build the commands
 * (market_txn.c, market_batch.c, market.c, market_world.c) and judge what
 * comes back.
 *
 * Two things every layer above gets without asking:
 *   - a Sentinel group's master: a connection goes to the address the
 *     group's lock_sentinel names, is used only after ROLE says "master",
 *     and is dropped (never reused) once the group's generation moved; a
 *     failed socket or a -READONLY, -LOADING or -MASTERDOWN answer makes it
 *     suspect that master, so the next connection asks the Sentinels again;
 *   - acknowledged means replicated: with cfg.min_replicas_ack N > 0, a
 *     pipeline that holds EXEC gets "WAIT N timeout" behind it (one WAIT per
 *     commit, however many purchases it carries, and no extra round trip),
 *     and a commit that fewer than N replicas confirmed in time is
 *     MARKET_ERR_NOT_REPLICATED instead of its replies.
 */
#include "market/market_store.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Forgets a dead or unwanted connection; the next call reconnects. */
void market__drop(market_conn *c) {
    c->where[0] = '\0';
    c->wait_sent = 0;
    if (c->ctx) redisFree(c->ctx);
    c->ctx = NULL;
    c->unwatch = 0;
    c->unwatch_sent = 0;
    c->closed = 0;
}

static struct timeval ms_to_tv(int ms) {
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

static int reply_is_ok(const redisReply *r) {
    return r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
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

/* Returns the first error reply among replies[0..n), or NULL. */
const redisReply *market__reply_error(redisReply *const *replies, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (replies[i] && replies[i]->type == REDIS_REPLY_ERROR) return replies[i];
    return NULL;
}

/* Returns 1 when reply r says its server is not (or not yet) a master that
 * takes writes: the answers after which a Sentinel group's master is
 * suspect. */
static int reply_not_master(const redisReply *r) {
    return r && r->type == REDIS_REPLY_ERROR &&
           (strncmp(r->str, "READONLY", 8) == 0 || strncmp(r->str, "LOADING", 7) == 0 ||
            strncmp(r->str, "MASTERDOWN", 10) == 0);
}

/* Judges ROLE's reply: 0 for a master, else -1 with a sentence in why. */
int market__judge_role(const redisReply *r, char *why, size_t whylen) {
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, whylen, "redis refuses ROLE: %.60s", r->str);
        return -1;
    }
    const redisReply *name = r->type == REDIS_REPLY_ARRAY && r->elements > 0 ? r->element[0] : NULL;
    if (!name || (name->type != REDIS_REPLY_STRING && name->type != REDIS_REPLY_STATUS)) {
        snprintf(why, whylen, "redis answered ROLE with something unexpected");
        return -1;
    }
    if (strcmp(name->str, "master") == 0) return 0;
    if (strcmp(name->str, "slave") == 0)
        snprintf(why, whylen, "redis is a replica");
    else if (strcmp(name->str, "sentinel") == 0)
        snprintf(why, whylen, "redis is a sentinel, not a data server");
    else
        snprintf(why, whylen, "redis has an unknown role");
    return -1;
}

/* Says that c's server may not be the master any more (a Sentinel group
 * only): the next connection asks the Sentinels again. */
static void suspect(market_conn *c) {
    if (c->m->sentinel && c->sgen) lock_sentinel_suspect(c->m->sentinel, c->sgen);
}

/* Connects (when not connected), authenticates and selects the database;
 * for a Sentinel group, to the master the Sentinels name, checked with ROLE.
 * Returns MARKET_OK, or MARKET_ERR_STORE when Redis cannot be reached or
 * refuses us (c->errstr says which), MARKET_ERR_NOMEM on out-of-memory. */
int market__connect(market_conn *c) {
    if (c->ctx && c->m->sentinel && c->sgen != lock_sentinel_generation(c->m->sentinel))
        market__drop(c); /* made for a master that may be gone: never reused */
    if (c->ctx) return MARKET_OK;
    const market_config *cfg = &c->m->cfg;
    lock_redis_addr addr = cfg->redis;
    c->sgen = 0;
    if (c->m->sentinel) {
        char why[160];
        if (lock_sentinel_master(c->m->sentinel, &addr, &c->sgen, why, sizeof why) != LOCK_OK)
            return market__fail(c, "no master: %s", why);
    }
    struct timeval tv = ms_to_tv(cfg->redis_timeout_ms);
    redisContext *ctx = redisConnectWithTimeout(addr.host, addr.port, tv);
    if (!ctx) return MARKET_ERR_NOMEM;
    if (ctx->err || redisSetTimeout(ctx, tv) != REDIS_OK) {
        market__fail(c, "cannot connect to %s:%d: %s", addr.host, addr.port,
                     ctx->err ? ctx->errstr : "cannot set the timeout");
        goto fail;
    }
    (void)redisEnableKeepAlive(ctx); /* best effort: only speeds up noticing a dead peer */
    c->ctx = ctx;
    snprintf(c->where, sizeof c->where, "%s:%d", addr.host, addr.port);
    if (addr.pass[0]) {
        const char *argv[3] = {"AUTH", addr.user, addr.pass};
        int argc = 3;
        if (!addr.user[0]) {
            argv[1] = addr.pass;
            argc = 2;
        }
        redisReply *r = market__command(c, argc, argv, NULL);
        int ok = reply_is_ok(r);
        if (!ok) market__fail_reply(c, "Redis refused AUTH", r);
        if (r) freeReplyObject(r);
        if (!ok) goto fail_dropped;
    }
    if (addr.db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", addr.db);
        const char *argv[2] = {"SELECT", db};
        redisReply *r = market__command(c, 2, argv, NULL);
        int ok = reply_is_ok(r);
        if (!ok) market__fail_reply(c, "Redis refused SELECT", r);
        if (r) freeReplyObject(r);
        if (!ok) goto fail_dropped;
    }
    if (c->m->sentinel) {
        const char *argv[1] = {"ROLE"};
        redisReply *r = market__command(c, 1, argv, NULL);
        char why[96] = "no answer to ROLE";
        int ok = r && market__judge_role(r, why, sizeof why) == 0;
        if (r) freeReplyObject(r);
        if (!ok) {
            market__fail(c, "Redis %s:%d, named master by the Sentinels: %s", addr.host,
                         addr.port, why);
            goto fail_dropped;
        }
    }
    return MARKET_OK;
fail:
    redisFree(ctx);
    suspect(c);
    return MARKET_ERR_STORE;
fail_dropped:
    suspect(c);
    market__drop(c);
    return MARKET_ERR_STORE;
}

/* Runs one command and returns its reply (new; caller frees with
 * freeReplyObject), or NULL after an I/O error, in which case the connection
 * has been dropped. len may be NULL for NUL-terminated arguments. */
redisReply *market__command(market_conn *c, int argc, const char **argv, const size_t *len) {
    if (!c->ctx) return NULL;
    redisReply *r = redisCommandArgv(c->ctx, argc, argv, len);
    if (!r) market__drop(c);
    return r;
}

/* Fills cmd with argc NUL-terminated arguments (at most 8). */
void market__cmd_set(market__cmd *cmd, int argc, ...) {
    va_list ap;
    va_start(ap, argc);
    cmd->argc = argc;
    for (int i = 0; i < argc; i++) {
        cmd->argv[i] = va_arg(ap, const char *);
        cmd->len[i] = strlen(cmd->argv[i]);
    }
    va_end(ap);
}

/* Sends n commands in one write and reads their n replies into replies[]
 * (new references; free with market__replies_free). Connects first when
 * needed, and sends a pending UNWATCH in front. Returns MARKET_OK, or
 * MARKET_ERR_STORE (connection dropped, no replies left to free) or
 * MARKET_ERR_NOMEM. Error replies are returned as replies: the caller judges
 * them. argv[i] holds argc[i] NUL-terminated arguments. */
int market__pipeline_argv(market_conn *c, size_t n, const int *argc, const char **const *argv,
                          redisReply **replies) {
    /* A connection that sat idle through a Redis restart is dead without
     * knowing it. A pipeline that does not commit may run again on a fresh
     * connection; one that commits (... EXEC) must not: its WATCH died
     * with the old connection, and it may have been applied. */
    int reused = c->ctx != NULL;
    int may_retry = 1;
    for (size_t i = 0; i < n; i++)
        if (strcmp(argv[i][0], "EXEC") == 0) may_retry = 0;
    for (;;) {
        int rc = market__pipeline_send(c, n, argc, argv);
        if (rc == MARKET_OK) rc = market__pipeline_recv(c, n, replies);
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

/* Sends a pipeline of n commands (as market__pipeline_argv()) and returns
 * without waiting: read its replies with market__pipeline_recv() before any
 * other use of c. Returns MARKET_OK, or MARKET_ERR_STORE with c dropped. */
int market__pipeline_send(market_conn *c, size_t n, const int *argc, const char **const *argv) {
    c->closed = 0;
    int rc = market__connect(c);
    if (rc < 0) return rc;
    const market_config *cfg = &c->m->cfg;
    int unwatch = c->unwatch, done = 0, wait = 0;
    if (unwatch && redisAppendCommand(c->ctx, "UNWATCH") != REDIS_OK) goto fail;
    for (size_t i = 0; i < n; i++) {
        if (redisAppendCommandArgv(c->ctx, argc[i], argv[i], NULL) != REDIS_OK) goto fail;
        if (cfg->min_replicas_ack && argc[i] == 1 && strcmp(argv[i][0], "EXEC") == 0) {
            wait = 1;
            c->exec_at = i;
        }
    }
    if (wait && redisAppendCommand(c->ctx, "WAIT %u %d", cfg->min_replicas_ack,
                                   cfg->replica_ack_timeout_ms) != REDIS_OK)
        goto fail;
    while (!done)
        if (redisBufferWrite(c->ctx, &done) != REDIS_OK) goto fail;
    c->unwatch = 0;
    c->unwatch_sent = unwatch;
    c->wait_sent = wait;
    return MARKET_OK;
fail:
    return pipeline_failed(c);
}

/* Judges the WAIT behind a commit: MARKET_OK when EXEC committed nothing
 * (aborted, refused) or enough replicas confirmed it; else
 * MARKET_ERR_NOT_REPLICATED, counted, with the reason in c->errstr. */
static int judge_wait(market_conn *c, const redisReply *exec, const redisReply *wait) {
    unsigned want = c->m->cfg.min_replicas_ack;
    if (exec->type != REDIS_REPLY_ARRAY) return MARKET_OK;
    if (wait->type == REDIS_REPLY_INTEGER && wait->integer >= (long long)want) return MARKET_OK;
    if (wait->type == REDIS_REPLY_INTEGER)
        market__fail(c, "Redis %s: %lld of %u replicas confirmed the commit within %d ms",
                     c->where, wait->integer, want, c->m->cfg.replica_ack_timeout_ms);
    else
        market__fail_reply(c, "WAIT after the commit", wait);
    MARKET__COUNT(c->m, not_replicated);
    return MARKET_ERR_NOT_REPLICATED;
}

/* Reads the n replies of market__pipeline_send() into replies (the caller
 * frees them with market__replies_free()). Returns MARKET_OK, or
 * MARKET_ERR_STORE with c dropped and nothing to free. */
int market__pipeline_recv(market_conn *c, size_t n, redisReply **replies) {
    size_t got = 0;
    c->closed = 0;
    if (!c->ctx) return market__fail(c, "no connection to Redis");
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
        not_master |= reply_not_master(r);
    }
    if (c->wait_sent) {
        void *r = NULL;
        if (redisGetReply(c->ctx, &r) != REDIS_OK) goto fail;
        c->wait_sent = 0;
        int rc = judge_wait(c, replies[c->exec_at], r);
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
    int argc[MARKET__BATCH_MAX + 2];
    const char *args[MARKET__BATCH_MAX + 2][3];
    const char **argv[MARKET__BATCH_MAX + 2];
    redisReply *rep[MARKET__BATCH_MAX + 2];
    size_t nc = n + 2;
    for (size_t i = 0; i < nc; i++) {
        const char **a = args[i];
        argv[i] = a;
        if (i == 0 || i == nc - 1) {
            a[0] = i == 0 ? "MULTI" : "EXEC";
            argc[i] = 1;
        } else {
            a[0] = "EXPIRE";
            a[1] = keys[i - 1];
            a[2] = MARKET__IDEM_TTL;
            argc[i] = 3;
        }
    }
    int rc = market__pipeline_argv(c, nc, argc, (const char **const *)argv, rep);
    if (rc < 0) return rc;
    const redisReply *exec = rep[nc - 1];
    if (exec->type != REDIS_REPLY_ARRAY || exec->elements != n)
        rc = market__fail_reply(c, "re-recording a replayed outcome", exec);
    for (size_t i = 0; i < n && rc == MARKET_OK; i++)
        if (exec->element[i]->type != REDIS_REPLY_INTEGER || exec->element[i]->integer != 1)
            rc = market__fail(c, "idempotency record %s expired while replayed", keys[i]);
    market__replies_free(rep, nc);
    return rc;
}

/* market__pipeline_argv() for fixed commands built with market__cmd_set(). */
int market__pipeline(market_conn *c, const market__cmd *cmds, size_t n, redisReply **replies) {
    int argc[MARKET__PIPE_MAX];
    const char **argv[MARKET__PIPE_MAX];
    if (n > MARKET__PIPE_MAX) return MARKET_ERR_INVALID;
    for (size_t i = 0; i < n; i++) {
        argc[i] = cmds[i].argc;
        argv[i] = (const char **)cmds[i].argv;
    }
    return market__pipeline_argv(c, n, argc, argv, replies);
}

/* Frees replies[0..n) and sets them to NULL. This function can't fail. */
void market__replies_free(redisReply **replies, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (replies[i]) freeReplyObject(replies[i]);
        replies[i] = NULL;
    }
}

/* Parses a whole decimal int64. Returns 0, or -1 when s is not one. */
int market__parse_i64(const char *s, size_t len, int64_t *out) {
    char buf[32];
    if (len == 0 || len >= sizeof buf) return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

/* Parses a zset score that must hold a whole price in 1..MARKET_PRICE_MAX.
 * Returns 0, or -1 when it does not. */
int market__parse_price(const char *s, size_t len, int64_t *out) {
    char buf[64];
    if (len == 0 || len >= sizeof buf) return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (errno || *end || !(v >= 1.0 && v <= (double)MARKET_PRICE_MAX)) return -1;
    int64_t p = (int64_t)v;
    if ((double)p != v) return -1;
    *out = p;
    return 0;
}

/* The listing price a ZSCORE (or ZMSCORE element) reply gives, as the
 * rules take it: MARKET__NOT_LISTED, MARKET__PRICE_UNREADABLE or the price. */
int64_t market__reply_price(const redisReply *r) {
    int64_t price;
    if (r->type == REDIS_REPLY_NIL) return MARKET__NOT_LISTED;
    if (r->type != REDIS_REPLY_STRING || market__parse_price(r->str, r->len, &price) < 0)
        return MARKET__PRICE_UNREADABLE;
    return price;
}

/* The party an HGET <user> funds reply gives (see market__party). */
market__party market__reply_party(const redisReply *r) {
    market__party p = {MARKET__ABSENT, 0};
    if (r->type == REDIS_REPLY_NIL) return p;
    p.known = r->type == REDIS_REPLY_STRING && market__parse_i64(r->str, r->len, &p.funds) == 0
                  ? MARKET__PRESENT
                  : MARKET__UNREADABLE;
    return p;
}

