/* market.c - purchases, listings and reads against the Redis data model.
 *
 * DESIGN
 * Every write (purchase, list, unlist) runs as a guarded transaction:
 *   1. take the market lock (lock_acquire on MARKET_LOCK_KEY);
 *   2. one pipeline: WATCH the keys the decision depends on plus the lock key,
 *      and read them;
 *   3. decide in C (not listed, not affordable, overflow, ...);
 *   4. one pipeline: MULTI, the writes, EXEC. Redis aborts the EXEC when any
 *      watched key changed or expired, so a holder whose lease lapsed (the lock
 *      key expired or was taken over) cannot write;
 *   5. release the lock (compare-and-delete inside the lock layer).
 * When EXEC aborts, lock_extend() tells the two causes apart: if the lease is
 * still ours, someone outside the lock changed the data and the attempt is
 * read again (a few times); if not, the purchase fails with LEASE_LOST.
 * A refusal after WATCH leaves the connection watching; the UNWATCH rides in
 * front of the connection's next pipeline instead of costing a round trip.
 */
#include "market/market.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "market/market_impl.h"
#include "market/market_rules.h"

#define TXN_ABORTED MARKET__TXN_ABORTED
#define TXN_RETRIES 32 /* reads again after an abort while the lease is still ours */
#define OPTIMISTIC_BACKOFF_US 500 /* optimistic strategy: most random sleep between tries */

/* ---- lifecycle ---- */

/* Creates a market over cfg (copied) and lock (borrowed: it must outlive the
 * market). Returns a new market; caller frees with market_free(). Returns
 * NULL with *err = MARKET_ERR_INVALID on a bad config, MARKET_ERR_NOMEM on
 * out-of-memory. Does not touch Redis. */
market *market_new(const market_config *cfg, lock_client *lock, int *err) {
    int dummy;
    if (!err) err = &dummy;
    if (!cfg || !lock || cfg->lock_ttl_ms == 0 || cfg->redis_timeout_ms <= 0 ||
        cfg->strategy > MARKET_STRATEGY_OPTIMISTIC) {
        *err = MARKET_ERR_INVALID;
        return NULL;
    }
    market *m = calloc(1, sizeof *m);
    if (!m) {
        *err = MARKET_ERR_NOMEM;
        return NULL;
    }
    m->cfg = *cfg;
    if (m->cfg.batch_max == 0) m->cfg.batch_max = 64;
    if (m->cfg.batch_max > MARKET__BATCH_MAX) m->cfg.batch_max = MARKET__BATCH_MAX;
    m->lock = lock;
    lock_redis_addr la;
    m->lock_in_store = lock_store_addr(lock, &la) == LOCK_OK &&
                       strcmp(la.host, cfg->redis.host) == 0 && la.port == cfg->redis.port &&
                       la.db == cfg->redis.db;
    if (market__batch_init(m) < 0) {
        free(m);
        *err = MARKET_ERR_NOMEM;
        return NULL;
    }
    *err = MARKET_OK;
    return m;
}

/* Frees m; market_free(NULL) is a no-op. Every market_conn of m must be freed
 * first. This function can't fail. */
void market_free(market *m) {
    if (!m) return;
    market__batch_free(m); /* serves what is queued, releases the lock, frees the queue */
    free(m);
}

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
    *err = MARKET_OK;
    return c;
}

/* Closes and frees c; NULL is a no-op. This function can't fail. */
void market_conn_free(market_conn *c) {
    if (!c) return;
    market__drop(c);
    free(c);
}

/* ---- Redis plumbing (shared with market_world.c) ---- */

/* Forgets a dead or unwanted connection; the next call reconnects. */
void market__drop(market_conn *c) {
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

/* Connects (when not connected), authenticates and selects the database.
 * Returns MARKET_OK, or MARKET_ERR_STORE when Redis cannot be reached or
 * refuses us, MARKET_ERR_NOMEM on out-of-memory. */
int market__connect(market_conn *c) {
    if (c->ctx) return MARKET_OK;
    const market_config *cfg = &c->m->cfg;
    struct timeval tv = ms_to_tv(cfg->redis_timeout_ms);
    redisContext *ctx = redisConnectWithTimeout(cfg->redis.host, cfg->redis.port, tv);
    if (!ctx) return MARKET_ERR_NOMEM;
    if (ctx->err || redisSetTimeout(ctx, tv) != REDIS_OK) goto fail;
    (void)redisEnableKeepAlive(ctx); /* best effort: only speeds up noticing a dead peer */
    c->ctx = ctx;
    if (cfg->redis.pass[0]) {
        const char *argv[3] = {"AUTH", cfg->redis.user, cfg->redis.pass};
        int argc = 3;
        if (!cfg->redis.user[0]) {
            argv[1] = cfg->redis.pass;
            argc = 2;
        }
        redisReply *r = market__command(c, argc, argv, NULL);
        int ok = reply_is_ok(r);
        if (r) freeReplyObject(r);
        if (!ok) goto fail_dropped;
    }
    if (cfg->redis.db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", cfg->redis.db);
        const char *argv[2] = {"SELECT", db};
        redisReply *r = market__command(c, 2, argv, NULL);
        int ok = reply_is_ok(r);
        if (r) freeReplyObject(r);
        if (!ok) goto fail_dropped;
    }
    return MARKET_OK;
fail:
    redisFree(ctx);
    return MARKET_ERR_STORE;
fail_dropped:
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
    c->closed = c->ctx && (c->ctx->err == REDIS_ERR_EOF ||
                           (c->ctx->err == REDIS_ERR_IO && (errno == ECONNRESET ||
                                                            errno == EPIPE)));
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
    int unwatch = c->unwatch, done = 0;
    if (unwatch && redisAppendCommand(c->ctx, "UNWATCH") != REDIS_OK) goto fail;
    for (size_t i = 0; i < n; i++)
        if (redisAppendCommandArgv(c->ctx, argc[i], argv[i], NULL) != REDIS_OK) goto fail;
    while (!done)
        if (redisBufferWrite(c->ctx, &done) != REDIS_OK) goto fail;
    c->unwatch = 0;
    c->unwatch_sent = unwatch;
    return MARKET_OK;
fail:
    return pipeline_failed(c);
}

/* Reads the n replies of market__pipeline_send() into replies (the caller
 * frees them with market__replies_free()). Returns MARKET_OK, or
 * MARKET_ERR_STORE with c dropped and nothing to free. */
int market__pipeline_recv(market_conn *c, size_t n, redisReply **replies) {
    size_t got = 0;
    c->closed = 0;
    if (!c->ctx) return MARKET_ERR_STORE;
    if (c->unwatch_sent) {
        void *r = NULL;
        if (redisGetReply(c->ctx, &r) != REDIS_OK) goto fail;
        freeReplyObject(r);
        c->unwatch_sent = 0;
    }
    for (; got < n; got++) {
        void *r = NULL;
        if (redisGetReply(c->ctx, &r) != REDIS_OK) goto fail;
        replies[got] = r;
    }
    return MARKET_OK;
fail:
    market__replies_free(replies, got);
    return pipeline_failed(c);
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

/* Writes "<prefix><id>" into out. */
void market__key(char *out, size_t outlen, const char *prefix, const char *id) {
    snprintf(out, outlen, "%s%s", prefix, id);
}

/* ---- helpers ---- */

/* Returns a static description of a market code. Can't fail. */
const char *market_strerror(int err) {
    switch (err) {
#define MARKET_ERR_STR(name, val, msg)                                                             \
    case MARKET_##name:                                                                            \
        return msg;
        MARKET_ERRNO_MAP(MARKET_ERR_STR)
#undef MARKET_ERR_STR
    }
    return "unknown market error";
}

static int from_lock_err(int lrc) {
    switch (lrc) {
    case LOCK_ERR_BUSY: return MARKET_ERR_BUSY;
    case LOCK_ERR_NOMEM: return MARKET_ERR_NOMEM;
    case LOCK_ERR_NOT_OWNER:
    case LOCK_ERR_LEASE_LOST: return MARKET_ERR_LEASE_LOST;
    case LOCK_ERR_INVALID: return MARKET_ERR_INVALID;
    default: return MARKET_ERR_STORE;
    }
}

/* Sleeps ms milliseconds (the test hook between read and commit). */
void market__stall(uint32_t ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- the guarded transaction ---- */

/* What an attempt watches besides the keys it reads: the strategy's lock and
 * market keys, and the fencing records of the leases held. */
struct watchset {
    const char *keys[6];
    size_t n;
};

/* Ends an attempt that read under WATCH and will not commit: the UNWATCH is
 * sent in front of the connection's next pipeline. Returns rc. */
int market__refuse(market_conn *c, int rc) {
    c->unwatch = 1;
    return rc;
}

static void sleep_us(long us) {
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

static int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void count_wait(market *m, int64_t us, int acquired) {
    static const int64_t bounds[MARKET_WAIT_BUCKETS - 1] = {MARKET_WAIT_BUCKETS_US};
    size_t b = 0;
    while (b < MARKET_WAIT_BUCKETS - 1 && us > bounds[b]) b++;
    atomic_fetch_add_explicit(&m->stats.lock_wait_bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->stats.lock_wait_us, (uint64_t)us, memory_order_relaxed);
    MARKET__COUNT(m, lock_waits);
    if (acquired) MARKET__COUNT(m, lock_acquired);
}

/* Runs fn under the lock lock_key (taken before the monotonic time
 * deadline_ms; NULL: no lock, the optimistic strategy) until it decides: see
 * market__attempts(). Releases the lock on every path. Returns fn's result or
 * a lock error mapped to a market code. Purchases under the market and item
 * strategies do not come here: they are served in batches (market_batch.c). */
int market__guarded(market_conn *c, const char *lock_key, int64_t deadline_ms, market__attempt fn,
                    void *ud) {
    market *m = c->m;
    lock_handle h = {0};
    market__held hd = {0};
    int rc = MARKET_OK;
    if (m->cfg.test_stall_lock_ms) market__stall(m->cfg.test_stall_lock_ms);
    if (lock_key) {
        hd.tokens = m->lock_in_store;
        rc = market__lock(m, lock_key, deadline_ms, &h);
        if (rc < 0) goto out;
        market__held_set(&hd, 0, lock_key, &h);
        if (m->cfg.test_stall_read_ms) market__stall(m->cfg.test_stall_read_ms);
    }
    rc = market__attempts(c, &h, &hd, fn, ud);
    /* A failed release needs no undo: every commit was guarded, and a lease
     * we cannot release expires by itself. */
    if (lock_key) (void)lock_release(m->lock, &h);
out:
    market__count_result(m, rc);
    return rc;
}

/* Takes the lock on key, waiting until the monotonic time by (ms), and
 * counts the wait. A budget already spent is not tried at all: a purchase
 * is never attempted after its deadline. Returns MARKET_OK, or ERR_BUSY,
 * ERR_STORE, ERR_NOMEM. */
int market__lock(market *m, const char *key, int64_t by, lock_handle *h) {
    int64_t t0 = now_us(), left = by - t0 / 1000;
    if (left <= 0) {
        count_wait(m, 0, 0);
        return MARKET_ERR_BUSY;
    }
    int lrc = lock_acquire(m->lock, key, m->cfg.lock_ttl_ms, left > 0 ? (uint32_t)left : 0, h);
    count_wait(m, now_us() - t0, lrc == LOCK_OK);
    return lrc < 0 ? from_lock_err(lrc) : MARKET_OK;
}

/* Takes the locks on keys[0..n) all or none, waiting until the monotonic
 * time by (ms), and counts the wait. Returns MARKET_OK, or ERR_BUSY,
 * ERR_STORE, ERR_NOMEM, ERR_INVALID. */
int market__lock_multi(market *m, const char *const *keys, size_t n, int64_t by, lock_handle *h) {
    int64_t t0 = now_us(), left = by - t0 / 1000;
    if (left <= 0) {
        count_wait(m, 0, 0);
        return MARKET_ERR_BUSY;
    }
    int lrc = lock_acquire_multi(m->lock, keys, n, m->cfg.lock_ttl_ms,
                                 left > 0 ? (uint32_t)left : 0, h);
    count_wait(m, now_us() - t0, lrc == LOCK_OK);
    return lrc < 0 ? from_lock_err(lrc) : MARKET_OK;
}

/* Describes lease h on key as entry k of hd (its fencing record, fence and token). */
void market__held_set(market__held *hd, size_t k, const char *key, const lock_handle *h) {
    market__held_name(hd, k, key);
    snprintf(hd->fence[k], sizeof hd->fence[k], "%llu", (unsigned long long)h->fence);
    hd->fence_v[k] = h->fence;
    memcpy(hd->token[k], h->token, sizeof hd->token[k]);
}

/* Names lease k of hd (key, fencing record) before its fence is known. */
void market__held_name(market__held *hd, size_t k, const char *key) {
    hd->key[k] = key;
    snprintf(hd->fenced[k], sizeof hd->fenced[k], "%s:fenced", key);
    if (hd->n < k + 1) hd->n = k + 1;
}

/* Runs fn until it decides, under the leases h[0..hd->n) (none: optimistic).
 * When EXEC aborts, lock_extend() tells a lapsed lease (MARKET_ERR_LEASE_LOST)
 * from a write made without the lock (read again, up to TXN_RETRIES, within
 * the wait budget). Without leases it retries with a short random sleep
 * until the wait budget is spent (MARKET_ERR_CONFLICT). Returns fn's result
 * or a lock error mapped to a market code; releases nothing. */
int market__attempts(market_conn *c, lock_handle *h, const market__held *hd, market__attempt fn,
                     void *ud) {
    market *m = c->m;
    int64_t deadline = lock_now_ms() + m->cfg.acquire_timeout_ms;
    int rc;
    for (int i = 1;; i++) {
        rc = fn(c, hd, ud);
        if (rc != TXN_ABORTED) break;
        MARKET__COUNT(m, txn_aborts);
        rc = MARKET_ERR_CONFLICT;
        if (hd->n == 0) {
            if (lock_now_ms() >= deadline) break;
            sleep_us(random() % OPTIMISTIC_BACKOFF_US);
            continue;
        }
        if (i >= TXN_RETRIES || lock_now_ms() >= deadline) break;
        /* Aborted under the lock: our lease lapsed, or someone wrote without it. */
        for (size_t k = 0; k < hd->n; k++) {
            int lrc = lock_extend(m->lock, &h[k], m->cfg.lock_ttl_ms);
            if (lrc < 0 && lrc != LOCK_ERR_UNSUPPORTED) return from_lock_err(lrc);
        }
    }
    return rc;
}

/* Counts a guarded operation's failure in the stats. Can't fail. */
void market__count_result(market *m, int rc) {
    if (rc == MARKET_ERR_BUSY) MARKET__COUNT(m, lock_busy);
    if (rc == MARKET_ERR_LEASE_LOST) MARKET__COUNT(m, lease_lost);
    if (rc == MARKET_ERR_STORE) MARKET__COUNT(m, store_errors);
}

/* Fills argv with "MGET", the fencing records of held and, when held->tokens,
 * the lock keys themselves (argv has room for 1 + 2 * held->n); returns the
 * count. Read under a WATCH of the same keys, its reply tells
 * market__held_lost() whether the leases are still ours. */
size_t market__held_read(const market__held *held, const char **argv) {
    size_t k = 0;
    argv[k++] = "MGET";
    for (size_t i = 0; i < held->n; i++) argv[k++] = held->fenced[i];
    if (held->tokens)
        for (size_t i = 0; i < held->n; i++) argv[k++] = held->key[i];
    return k;
}

/* Given the reply to market__held_read()'s MGET, returns 1 when a lease of
 * held cannot commit: a newer holder has committed (a stored fence above
 * ours), or, when held->tokens, a lock key no longer holds our token (the
 * lease lapsed, or anyone speaking the lock protocol took the key over); else
 * 0. A missing or unreadable fencing record counts as none. */
int market__held_lost(const market__held *held, const redisReply *mget) {
    if (!mget || mget->type != REDIS_REPLY_ARRAY) return held->tokens;
    if (mget->elements != held->n * (held->tokens ? 2 : 1)) return 1;
    for (size_t i = 0; i < held->n; i++) {
        const redisReply *e = mget->element[i];
        if (e->type != REDIS_REPLY_STRING) continue;
        int64_t seen;
        if (market__parse_i64(e->str, e->len, &seen) == 0 && (uint64_t)seen > held->fence_v[i])
            return 1;
    }
    for (size_t i = 0; held->tokens && i < held->n; i++) {
        const redisReply *e = mget->element[held->n + i];
        if (e->type != REDIS_REPLY_STRING || e->len != LOCK_TOKEN_LEN ||
            memcmp(e->str, held->token[i], LOCK_TOKEN_LEN) != 0)
            return 1;
    }
    return 0;
}

/* Appends the fencing parts of an attempt: to w, the "<lock>:fenced" keys to
 * watch (the lock keys are in w already: strategy_guard()); to cmd, the
 * MGET of market__held_read() (cmd->argc 0 when nothing is held). */
static void fence_read(const market__held *held, struct watchset *w, market__cmd *cmd) {
    cmd->argc = 0;
    if (held->n == 0) return;
    for (size_t i = 0; i < held->n; i++) w->keys[w->n++] = held->fenced[i];
    cmd->argc = (int)market__held_read(held, cmd->argv);
    for (int i = 0; i < cmd->argc; i++) cmd->len[i] = strlen(cmd->argv[i]);
}

/* Appends "SET <lock>:fenced <our fence>" for every held lease to cmds. */
static size_t fence_write(const market__held *held, market__cmd *cmds) {
    for (size_t i = 0; i < held->n; i++)
        market__cmd_set(&cmds[i], 3, "SET", held->fenced[i], held->fence[i]);
    return held->n;
}

/* Sends MULTI, cmds, EXEC in one pipeline. Returns MARKET_OK with *exec set
 * to EXEC's reply (new; caller frees), TXN_ABORTED, or MARKET_ERR_STORE. */
static int commit(market_conn *c, const market__cmd *cmds, size_t n, redisReply **exec) {
    market__cmd all[MARKET__PIPE_MAX];
    redisReply *rep[MARKET__PIPE_MAX] = {0};
    if (n + 2 > MARKET__PIPE_MAX) return MARKET_ERR_INVALID;
    market__cmd_set(&all[0], 1, "MULTI");
    memcpy(&all[1], cmds, n * sizeof *cmds);
    market__cmd_set(&all[n + 1], 1, "EXEC");
    int rc = market__pipeline(c, all, n + 2, rep);
    if (rc < 0) return rc;
    c->unwatch = 0; /* EXEC, committed or aborted, ends every WATCH */
    redisReply *r = rep[n + 1];
    if (r->type == REDIS_REPLY_NIL) {
        rc = TXN_ABORTED;
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements == n) {
        rc = MARKET_OK;
        *exec = r;
        rep[n + 1] = NULL;
    } else {
        rc = MARKET_ERR_STORE; /* EXECABORT or a queued command refused */
    }
    market__replies_free(rep, n + 2);
    return rc;
}

/* ---- purchase ---- */

#define LOCK_KEY_MAX_LEN MARKET__LOCK_KEY_MAX

/* The WATCH command for keys a, b (b may be NULL) and everything in w. */
static void watch_cmd(market__cmd *cmd, const char *a, const char *b, const struct watchset *w) {
    cmd->argc = 0;
    cmd->argv[cmd->argc++] = "WATCH";
    cmd->argv[cmd->argc++] = a;
    if (b) cmd->argv[cmd->argc++] = b;
    for (size_t i = 0; i < w->n; i++) cmd->argv[cmd->argc++] = w->keys[i];
    for (int i = 0; i < cmd->argc; i++) cmd->len[i] = strlen(cmd->argv[i]);
}

/* Sets *lock_key to the lock an operation on listing member takes under the
 * market's strategy (NULL: none; an item lock is written into keybuf), and
 * fills w with what it watches besides the keys it reads. Returns MARKET_OK,
 * or MARKET_ERR_NOMEM when a long listing's key cannot be hashed. */
static int strategy_guard(const market *m, const char *member, char keybuf[LOCK_KEY_MAX_LEN],
                          struct watchset *w, const char **lock_key) {
    w->n = 0;
    *lock_key = NULL;
    switch (m->cfg.strategy) {
    case MARKET_STRATEGY_MARKET:
        w->keys[w->n++] = MARKET_LOCK_KEY;
        w->keys[w->n++] = "market:";
        *lock_key = MARKET_LOCK_KEY;
        break;
    case MARKET_STRATEGY_ITEM:
        /* The listing lock protects the listing, so market: itself is not
         * watched (every purchase changes it); the lock key is. */
        if (market__lock_key(keybuf, "lock:item:", member) < 0) return MARKET_ERR_NOMEM;
        w->keys[w->n++] = keybuf;
        *lock_key = keybuf;
        break;
    case MARKET_STRATEGY_OPTIMISTIC:
        w->keys[w->n++] = "market:";
        break;
    }
    return MARKET_OK;
}

/* ---- one operation at a time: purchases of the optimistic strategy, list, unlist ---- */

/* What every such attempt shares: its deadline, what it watches besides
 * its own reads, and its idempotency key with this operation's claim. */
struct single {
    const market_idem *idem; /* may be NULL */
    int64_t deadline_ms;     /* decided after this: MARKET_ERR_BUSY */
    struct watchset watch;
    char k_idem[MARKET__IDEM_REDIS_MAX];
    char token[MARKET__TOKEN_LEN + 1];
    char claim[MARKET__IDEM_RECORD_MAX];
    char claim_ttl[24];
    char record[MARKET__IDEM_RECORD_MAX];
    /* set when single_read() finds a stored outcome */
    int replayed, stored_rc;
    int64_t stored_a, stored_b;
};

/* Prepares s for an operation of player, before the monotonic time
 * deadline_ms. Returns MARKET_OK, or MARKET_ERR_STORE when no claim token
 * can be drawn. */
static int single_init(struct single *s, const char *player, const market_idem *idem,
                       int64_t deadline_ms) {
    s->idem = idem;
    s->deadline_ms = deadline_ms;
    s->replayed = 0;
    if (!idem) return MARKET_OK;
    market__idem_key(s->k_idem, sizeof s->k_idem, player, idem);
    if (market__token_new(s->token) < 0) return MARKET_ERR_STORE;
    market__idem_claim(s->claim, sizeof s->claim, idem, s->token);
    return MARKET_OK;
}

/* Reads under WATCH for one attempt: [SET claim NX PX], WATCH a, b (may be
 * NULL) and s->watch, own[0..n_own), [the leases' MGET], [GET of the
 * record]. The claim goes before the WATCH, so our own claim does not abort
 * our commit, while anyone else's write of the record after it does.
 * Returns MARKET_OK with rep[0..*nrep) filled and own's replies from
 * rep[*i_own] when the attempt should decide. When the read settles it, it
 * returns that outcome with nothing left to free (*nrep = 0): ERR_STORE,
 * ERR_LEASE_LOST (see market__held_lost), a stored outcome (MARKET_OK or a
 * refusal, with s->replayed set), ERR_IN_PROGRESS, ERR_IDEM_MISMATCH, or
 * ERR_BUSY when the deadline has passed (nothing is decided after it). */
static int single_read(market_conn *c, const market__held *held, struct single *s, const char *a,
                       const char *b, const market__cmd *own, size_t n_own, redisReply **rep,
                       size_t *nrep, size_t *i_own) {
    market__cmd rd[MARKET__PIPE_MAX];
    struct watchset w = s->watch;
    size_t n = 0, i_fence = 0, i_idem = 0, i_claim = 0;
    *nrep = 0;
    if (s->idem) {
        market__idem_claim_ttl(s->claim_ttl, sizeof s->claim_ttl, s->deadline_ms);
        market__cmd_set(&rd[i_claim = n++], 6, "SET", s->k_idem, s->claim, "NX", "PX",
                        s->claim_ttl);
    }
    size_t i_watch = n++;
    *i_own = n;
    memcpy(&rd[n], own, n_own * sizeof *own);
    n += n_own;
    if (held->n) fence_read(held, &w, &rd[i_fence = n++]);
    if (s->idem) {
        w.keys[w.n++] = s->k_idem;
        market__cmd_set(&rd[i_idem = n++], 2, "GET", s->k_idem);
    }
    watch_cmd(&rd[i_watch], a, b, &w);
    int rc = market__pipeline(c, rd, n, rep);
    if (rc < 0) return rc;
    int judged = MARKET__IDEM_FREE;
    if (s->idem)
        judged = market__idem_judge(rep[i_idem], s->idem, s->token, &s->stored_rc, &s->stored_a,
                                    &s->stored_b);
    if (rep[i_watch]->type != REDIS_REPLY_STATUS ||
        (s->idem && rep[i_claim]->type == REDIS_REPLY_ERROR) || judged == MARKET_ERR_STORE)
        rc = MARKET_ERR_STORE;
    else if (held->n && market__held_lost(held, rep[i_fence]))
        rc = MARKET_ERR_LEASE_LOST; /* taken over, lapsed, or a newer holder committed */
    else if (judged == MARKET__IDEM_DONE)
        s->replayed = 1, rc = s->stored_rc;
    else if (judged < 0)
        rc = judged; /* ERR_IN_PROGRESS, ERR_IDEM_MISMATCH */
    else if (lock_now_ms() >= s->deadline_ms)
        rc = MARKET_ERR_BUSY;
    else {
        *nrep = n;
        return MARKET_OK;
    }
    market__replies_free(rep, n);
    return market__refuse(c, rc);
}

/* Appends "SET <record> <outcome rc> EX <ttl>" to cmds when s has an
 * idempotency key; returns how many commands it appended. */
static size_t single_record(struct single *s, int rc, int64_t a, int64_t b, market__cmd *cmds) {
    if (!s->idem) return 0;
    market__idem_record(s->record, sizeof s->record, s->idem, rc, a, b);
    market__cmd_set(cmds, 5, "SET", s->k_idem, s->record, "EX", MARKET__IDEM_TTL);
    return 1;
}

/* Ends an attempt that decided to refuse with rc. A final refusal of an
 * idempotent request is recorded, with our fences, in a guarded commit, so
 * that no other attempt of the same key can decide otherwise later; a is
 * what the record keeps (the current price of a price_changed). Returns rc,
 * MARKET__TXN_ABORTED (read again), or the commit's error. */
static int single_refuse(market_conn *c, const market__held *held, struct single *s, int rc,
                         int64_t a) {
    if (!s->idem || !market__idem_final(rc)) return market__refuse(c, rc);
    market__cmd wr[MARKET__PIPE_MAX - 2];
    size_t nwr = fence_write(held, wr);
    nwr += single_record(s, rc, a, 0, &wr[nwr]);
    redisReply *exec = NULL;
    int crc = commit(c, wr, nwr, &exec);
    if (exec) freeReplyObject(exec);
    return crc == MARKET_OK ? rc : crc;
}

struct purchase {
    const char *buyer, *seller, *item;
    int64_t expect_price;
    market_purchase_result *res;
    char k_buyer[MARKET__KEY_MAX], k_seller[MARKET__KEY_MAX], k_inv[MARKET__KEY_MAX];
    char member[MARKET__MEMBER_MAX];
    struct single s;
};

static int purchase_attempt(market_conn *c, const market__held *held, void *ud) {
    struct purchase *p = ud;
    market__cmd own[3];
    redisReply *rep[MARKET__PIPE_MAX] = {0};
    size_t nrep, io;
    market__cmd_set(&own[0], 3, "ZSCORE", "market:", p->member);
    market__cmd_set(&own[1], 3, "HGET", p->k_buyer, "funds");
    market__cmd_set(&own[2], 3, "HGET", p->k_seller, "funds");
    int rc = single_read(c, held, &p->s, p->k_buyer, p->k_seller, own, 3, rep, &nrep, &io);
    if (nrep == 0) {
        if (p->s.replayed) {
            p->res->replayed = 1;
            p->res->price = p->s.stored_a;
            p->res->buyer_funds = p->s.stored_b;
        }
        return rc;
    }
    int64_t price = market__reply_price(rep[io]);
    market__party buyer = market__reply_party(rep[io + 1]);
    market__party seller = market__reply_party(rep[io + 2]);
    market__replies_free(rep, nrep);
    int64_t buyer_funds = buyer.funds;
    rc = market__purchase_rule(price, p->expect_price, &buyer, &seller);
    if (rc == MARKET_ERR_PRICE_CHANGED) p->res->price = price;
    if (rc < 0) return single_refuse(c, held, &p->s, rc, rc == MARKET_ERR_PRICE_CHANGED ? price : 0);

    if (c->m->cfg.test_stall_ms) market__stall(c->m->cfg.test_stall_ms);

    char credit[24], debit[24];
    snprintf(credit, sizeof credit, "%lld", (long long)price);
    snprintf(debit, sizeof debit, "%lld", -(long long)price);
    market__cmd wr[8];
    market__cmd_set(&wr[0], 4, "HINCRBY", p->k_seller, "funds", credit);
    market__cmd_set(&wr[1], 4, "HINCRBY", p->k_buyer, "funds", debit);
    market__cmd_set(&wr[2], 3, "SADD", p->k_inv, p->item);
    market__cmd_set(&wr[3], 3, "ZREM", "market:", p->member);
    size_t nwr = 4 + fence_write(held, &wr[4]);
    nwr += single_record(&p->s, MARKET_OK, price, buyer_funds - price, &wr[nwr]);
    redisReply *exec = NULL;
    rc = commit(c, wr, nwr, &exec);
    if (rc != MARKET_OK) return rc;
    if (exec->element[1]->type == REDIS_REPLY_INTEGER) {
        p->res->price = price;
        p->res->buyer_funds = exec->element[1]->integer;
        p->res->replayed = 0;
    } else {
        rc = MARKET_ERR_STORE; /* cannot happen: funds were parsed under WATCH */
    }
    freeReplyObject(exec);
    return rc;
}

/* Buys item, listed by seller, for buyer. expect_price > 0 makes the purchase
 * conditional on that price. Fills *res on success (and res->price on
 * MARKET_ERR_PRICE_CHANGED). Returns MARKET_OK or: ERR_INVALID (bad ids,
 * buyer == seller), ERR_NOT_LISTED, ERR_PRICE_CHANGED, ERR_NO_PLAYER (no such
 * buyer), ERR_INSUFFICIENT_FUNDS, ERR_OVERFLOW (the seller's funds would
 * overflow), ERR_BUSY (the wait budget was spent: nothing is decided after
 * it), ERR_STORE (Redis down or failing), ERR_LEASE_LOST (the lease lapsed
 * or was taken over before the commit: nothing was written), ERR_CONFLICT,
 * ERR_NOMEM. Nothing is written unless it returns MARKET_OK - with one
 * exception: ERR_STORE after the connection failed while EXEC's answer was
 * on its way leaves the outcome unknown (a client retries with the same
 * idempotency key to learn it; see market_purchase_idem). */
int market_purchase(market_conn *c, const char *buyer, const char *seller, const char *item,
                    int64_t expect_price, market_purchase_result *res) {
    return market_purchase_idem(c, buyer, seller, item, expect_price, NULL, res);
}

/* market_purchase(), made idempotent by idem (may be NULL; see market_idem).
 * A replay returns the stored outcome with res->replayed set: MARKET_OK with
 * the stored price and buyer_funds, or the stored refusal (res->price holds
 * the price of a price_changed). Also returns MARKET_ERR_IDEM_MISMATCH,
 * MARKET_ERR_IN_PROGRESS (another attempt of the same key is deciding), and
 * ERR_INVALID for a bad key or fingerprint. */
int market_purchase_idem(market_conn *c, const char *buyer, const char *seller, const char *item,
                         int64_t expect_price, const market_idem *idem,
                         market_purchase_result *res) {
    if (!c || !res || !market__purchase_args_ok(buyer, seller, item, expect_price, idem))
        return MARKET_ERR_INVALID;
    market *m = c->m;
    res->replayed = 0;
    if (market_purchase_async(m)) /* the worker counts and serves it */
        return market__purchase_batched(m, buyer, seller, item, expect_price, idem, res);
    MARKET__COUNT(m, purchases);
    int64_t deadline = lock_now_ms() + m->cfg.acquire_timeout_ms;
    struct purchase p = {buyer, seller, item, expect_price, res};
    market__key(p.k_buyer, sizeof p.k_buyer, "users:", buyer);
    market__key(p.k_seller, sizeof p.k_seller, "users:", seller);
    market__key(p.k_inv, sizeof p.k_inv, "inventory:", buyer);
    snprintf(p.member, sizeof p.member, "%s.%s", item, seller);
    char keybuf[LOCK_KEY_MAX_LEN];
    const char *lock_key;
    int rc = single_init(&p.s, buyer, idem, deadline);
    if (rc == MARKET_OK) rc = strategy_guard(m, p.member, keybuf, &p.s.watch, &lock_key);
    if (rc == MARKET_OK) rc = market__guarded(c, lock_key, deadline, purchase_attempt, &p);
    if (rc == MARKET_OK && !res->replayed) MARKET__COUNT(m, purchased);
    return rc;
}

/* Copies the counters into *out (each read atomically; together they are
 * not one snapshot). This function can't fail. */
void market_stats_get(const market *m, market_stats *out) {
    market *mm = (market *)m; /* atomic loads take non-const pointers in C11 */
    out->purchases = atomic_load(&mm->stats.purchases);
    out->purchased = atomic_load(&mm->stats.purchased);
    out->batches = atomic_load(&mm->stats.batches);
    out->txn_aborts = atomic_load(&mm->stats.txn_aborts);
    out->lock_busy = atomic_load(&mm->stats.lock_busy);
    out->lease_lost = atomic_load(&mm->stats.lease_lost);
    out->store_errors = atomic_load(&mm->stats.store_errors);
    out->lock_acquired = atomic_load(&mm->stats.lock_acquired);
    out->lock_waits = atomic_load(&mm->stats.lock_waits);
    out->lock_wait_us = atomic_load(&mm->stats.lock_wait_us);
    for (size_t i = 0; i < MARKET_WAIT_BUCKETS; i++)
        out->lock_wait_bucket[i] = atomic_load(&mm->stats.lock_wait_bucket[i]);
}

static const char *const strategy_names[] = {"market", "item", "optimistic"};

/* Parses "market", "item" or "optimistic". Returns MARKET_OK or
 * MARKET_ERR_INVALID. */
int market_strategy_parse(const char *name, enum market_strategy *out) {
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, strategy_names[i]) == 0) {
            *out = (enum market_strategy)i;
            return MARKET_OK;
        }
    return MARKET_ERR_INVALID;
}

/* Returns the strategy's name (static). Can't fail. */
const char *market_strategy_name(enum market_strategy s) {
    return (unsigned)s < 3 ? strategy_names[s] : "unknown";
}

/* ---- list and unlist ---- */

struct listing_op {
    const char *seller, *item;
    int64_t price; /* list: the asking price; unlist: the price it had */
    char k_inv[MARKET__KEY_MAX];
    char member[MARKET__MEMBER_MAX];
    struct single s;
};

/* Runs a list or unlist attempt under the market's strategy; idem may be
 * NULL (unlist: always). */
static int listing_guarded(market_conn *c, struct listing_op *op, const market_idem *idem,
                           market__attempt fn) {
    int64_t deadline = lock_now_ms() + c->m->cfg.acquire_timeout_ms;
    market__key(op->k_inv, sizeof op->k_inv, "inventory:", op->seller);
    snprintf(op->member, sizeof op->member, "%s.%s", op->item, op->seller);
    char keybuf[LOCK_KEY_MAX_LEN];
    const char *lock_key;
    int rc = single_init(&op->s, op->seller, idem, deadline);
    if (rc == MARKET_OK) rc = strategy_guard(c->m, op->member, keybuf, &op->s.watch, &lock_key);
    if (rc == MARKET_OK) rc = market__guarded(c, lock_key, deadline, fn, op);
    return rc;
}

static int list_attempt(market_conn *c, const market__held *held, void *ud) {
    struct listing_op *op = ud;
    market__cmd own[1];
    redisReply *rep[MARKET__PIPE_MAX] = {0};
    size_t nrep, io;
    market__cmd_set(&own[0], 3, "SISMEMBER", op->k_inv, op->item);
    int rc = single_read(c, held, &op->s, op->k_inv, NULL, own, 1, rep, &nrep, &io);
    if (nrep == 0) return rc;
    if (rep[io]->type != REDIS_REPLY_INTEGER)
        rc = MARKET_ERR_STORE;
    else if (rep[io]->integer != 1)
        rc = MARKET_ERR_NOT_HELD;
    market__replies_free(rep, nrep);
    if (rc < 0) return single_refuse(c, held, &op->s, rc, 0);

    char score[24];
    snprintf(score, sizeof score, "%lld", (long long)op->price);
    market__cmd wr[MARKET__PIPE_MAX - 2];
    market__cmd_set(&wr[0], 3, "SREM", op->k_inv, op->item);
    market__cmd_set(&wr[1], 4, "ZADD", "market:", score, op->member);
    size_t nwr = 2 + fence_write(held, &wr[2]);
    nwr += single_record(&op->s, MARKET_OK, op->price, 0, &wr[nwr]);
    redisReply *exec = NULL;
    rc = commit(c, wr, nwr, &exec);
    if (exec) freeReplyObject(exec);
    return rc;
}

static int unlist_attempt(market_conn *c, const market__held *held, void *ud) {
    struct listing_op *op = ud;
    market__cmd own[1];
    redisReply *rep[MARKET__PIPE_MAX] = {0};
    size_t nrep, io;
    market__cmd_set(&own[0], 3, "ZSCORE", "market:", op->member);
    int rc = single_read(c, held, &op->s, op->k_inv, NULL, own, 1, rep, &nrep, &io);
    if (nrep == 0) return rc;
    if (rep[io]->type == REDIS_REPLY_NIL)
        rc = MARKET_ERR_NOT_LISTED;
    else if (rep[io]->type != REDIS_REPLY_STRING ||
             market__parse_price(rep[io]->str, rep[io]->len, &op->price) < 0)
        rc = MARKET_ERR_STORE;
    market__replies_free(rep, nrep);
    if (rc < 0) return market__refuse(c, rc);

    market__cmd wr[4];
    market__cmd_set(&wr[0], 3, "ZREM", "market:", op->member);
    market__cmd_set(&wr[1], 3, "SADD", op->k_inv, op->item);
    size_t nwr = 2 + fence_write(held, &wr[2]);
    redisReply *exec = NULL;
    rc = commit(c, wr, nwr, &exec);
    if (exec) freeReplyObject(exec);
    return rc;
}

/* Moves item from seller's inventory to the market at price. Returns
 * MARKET_OK or ERR_INVALID, ERR_NOT_HELD (the seller does not hold it),
 * ERR_BUSY, ERR_STORE, ERR_LEASE_LOST, ERR_CONFLICT, ERR_NOMEM. */
int market_list(market_conn *c, const char *seller, const char *item, int64_t price) {
    return market_list_idem(c, seller, item, price, NULL, NULL);
}

/* market_list(), made idempotent by idem (may be NULL; see market_idem):
 * *replayed (may be NULL) tells a replay. Also returns
 * MARKET_ERR_IDEM_MISMATCH. */
int market_list_idem(market_conn *c, const char *seller, const char *item, int64_t price,
                     const market_idem *idem, int *replayed) {
    if (!c || !market__listing_args_ok(seller, item, price, idem)) return MARKET_ERR_INVALID;
    struct listing_op op = {seller, item, price};
    int rc = listing_guarded(c, &op, idem, list_attempt);
    if (replayed) *replayed = op.s.replayed;
    return rc;
}

/* Moves item, listed by seller, back to the seller's inventory and stores the
 * price it had in *price (may be NULL). Returns MARKET_OK or ERR_INVALID,
 * ERR_NOT_LISTED, ERR_BUSY, ERR_STORE, ERR_LEASE_LOST, ERR_CONFLICT. */
int market_unlist(market_conn *c, const char *seller, const char *item, int64_t *price) {
    if (!c || !market_id_valid(seller) || !market_id_valid(item)) return MARKET_ERR_INVALID;
    struct listing_op op = {seller, item, 0};
    int rc = listing_guarded(c, &op, NULL, unlist_attempt);
    if (rc == MARKET_OK && price) *price = op.price;
    return rc;
}

/* ---- reading ---- */

static int cmp_id(const void *a, const void *b) { return strcmp(a, b); }

/* Reads player id: name, funds and sorted inventory. Returns MARKET_OK with
 * *out a new player (caller frees with market_player_free), or ERR_INVALID,
 * ERR_NO_PLAYER, ERR_STORE, ERR_NOMEM with *out NULL. No lock is taken: the
 * two reads come from one pipeline, not one snapshot. */
int market_player_get(market_conn *c, const char *id, market_player **out) {
    if (!out) return MARKET_ERR_INVALID;
    *out = NULL;
    if (!c || !market_id_valid(id)) return MARKET_ERR_INVALID;
    char k_user[MARKET__KEY_MAX], k_inv[MARKET__KEY_MAX];
    market__key(k_user, sizeof k_user, "users:", id);
    market__key(k_inv, sizeof k_inv, "inventory:", id);
    market__cmd rd[2];
    redisReply *rep[2] = {0};
    market__cmd_set(&rd[0], 4, "HMGET", k_user, "name", "funds");
    market__cmd_set(&rd[1], 2, "SMEMBERS", k_inv);
    int rc = market__pipeline(c, rd, 2, rep);
    if (rc < 0) return rc;

    market_player *p = NULL;
    redisReply *h = rep[0], *inv = rep[1];
    if (h->type != REDIS_REPLY_ARRAY || h->elements != 2 || inv->type != REDIS_REPLY_ARRAY) {
        rc = MARKET_ERR_STORE;
        goto out;
    }
    if (h->element[1]->type == REDIS_REPLY_NIL) {
        rc = MARKET_ERR_NO_PLAYER;
        goto out;
    }
    p = calloc(1, sizeof *p);
    if (!p || (inv->elements && !(p->inventory = calloc(inv->elements, sizeof *p->inventory)))) {
        rc = MARKET_ERR_NOMEM;
        goto out;
    }
    snprintf(p->id, sizeof p->id, "%s", id);
    if (h->element[1]->type != REDIS_REPLY_STRING ||
        market__parse_i64(h->element[1]->str, h->element[1]->len, &p->funds) < 0) {
        rc = MARKET_ERR_STORE;
        goto out;
    }
    if (h->element[0]->type == REDIS_REPLY_STRING)
        snprintf(p->name, sizeof p->name, "%s", h->element[0]->str);
    for (size_t i = 0; i < inv->elements; i++) {
        const redisReply *e = inv->element[i];
        if (e->type != REDIS_REPLY_STRING || e->len > MARKET_ID_MAX) continue;
        memcpy(p->inventory[p->n_inventory], e->str, e->len);
        p->inventory[p->n_inventory++][e->len] = '\0';
    }
    if (p->n_inventory) qsort(p->inventory, p->n_inventory, sizeof *p->inventory, cmp_id);
    *out = p;
    p = NULL;
out:
    market_player_free(p);
    market__replies_free(rep, 2);
    return rc;
}

/* Frees p; NULL is a no-op. This function can't fail. */
void market_player_free(market_player *p) {
    if (!p) return;
    free(p->inventory);
    free(p);
}

/* Reads up to limit listings, cheapest first, starting at offset. Returns
 * MARKET_OK with *out a new array of *n listings (caller frees with free();
 * NULL when *n is 0) and *total the number of listings; or ERR_INVALID,
 * ERR_STORE, ERR_NOMEM. */
int market_listings(market_conn *c, size_t offset, size_t limit, market_listing **out,
                    size_t *n, size_t *total) {
    if (!out || !n || !total) return MARKET_ERR_INVALID;
    *out = NULL;
    *n = *total = 0;
    if (!c || limit == 0 || offset > INT32_MAX || limit > INT32_MAX) return MARKET_ERR_INVALID;
    char start[24], stop[24];
    snprintf(start, sizeof start, "%zu", offset);
    snprintf(stop, sizeof stop, "%zu", offset + limit - 1);
    market__cmd rd[2];
    redisReply *rep[2] = {0};
    market__cmd_set(&rd[0], 2, "ZCARD", "market:");
    market__cmd_set(&rd[1], 5, "ZRANGE", "market:", start, stop, "WITHSCORES");
    int rc = market__pipeline(c, rd, 2, rep);
    if (rc < 0) return rc;
    redisReply *r = rep[1];
    market_listing *l = NULL;
    if (rep[0]->type != REDIS_REPLY_INTEGER || r->type != REDIS_REPLY_ARRAY || r->elements % 2) {
        rc = MARKET_ERR_STORE;
        goto out;
    }
    size_t count = 0;
    if (r->elements && !(l = calloc(r->elements / 2, sizeof *l))) {
        rc = MARKET_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *mem = r->element[i], *sc = r->element[i + 1];
        if (mem->type != REDIS_REPLY_STRING || sc->type != REDIS_REPLY_STRING) continue;
        const char *dot = memchr(mem->str, '.', mem->len);
        if (!dot) continue;
        size_t ilen = (size_t)(dot - mem->str), slen = mem->len - ilen - 1;
        if (ilen == 0 || ilen > MARKET_ID_MAX || slen == 0 || slen > MARKET_ID_MAX) continue;
        if (market__parse_price(sc->str, sc->len, &l[count].price) < 0) continue;
        memcpy(l[count].item, mem->str, ilen);
        memcpy(l[count].seller, dot + 1, slen);
        count++;
    }
    *out = l;
    l = NULL;
    *n = count;
    *total = (size_t)rep[0]->integer;
out:
    free(l);
    market__replies_free(rep, 2);
    return rc;
}

/* Asks Redis for a PONG. Returns MARKET_OK or MARKET_ERR_STORE. */
int market_ping(market_conn *c) {
    if (!c) return MARKET_ERR_INVALID;
    market__cmd cmd;
    redisReply *rep = NULL;
    market__cmd_set(&cmd, 1, "PING");
    int rc = market__pipeline(c, &cmd, 1, &rep);
    if (rc < 0) return rc;
    rc = rep->type == REDIS_REPLY_STATUS ? MARKET_OK : MARKET_ERR_STORE;
    freeReplyObject(rep);
    return rc;
}
