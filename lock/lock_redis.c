/* lock_redis.c - single-instance Redis lock backend.
 *
 * A lease is one Redis key: SET key token NX PX ttl, done inside a Lua script
 * that also INCRs "key:fence" so every acquisition gets a larger fencing
 * number. Release is compare-and-delete and extend is compare-and-pexpire,
 * both Lua, so a client can never free or prolong a lease it does not own.
 * There is never a blind DEL and never SETNX-then-EXPIRE.
 *
 * DESIGN
 * Connections: hiredis contexts are not thread-safe, so the client keeps a
 * mutex-protected free list of connected contexts. Each operation borrows one
 * (connecting a new one when the list is empty) and gives it back. A context
 * that reported any error (ctx->err, a NULL reply, an error or unexpected
 * reply) is dead: it is freed, never returned, and the operation answers
 * LOCK_ERR_BACKEND at once. A failure also bumps a generation counter and
 * empties the free list, because the other idle connections almost certainly
 * point at the same dead server; connections borrowed before the bump are
 * freed when given back. The next operation reconnects, so the client recovers
 * by itself when Redis comes back, and lock_redis_new() does not need Redis up.
 *
 * Scripts: each new connection runs SCRIPT LOAD for the three scripts and
 * keeps the returned SHA1s. Calls use EVALSHA; a NOSCRIPT error (after a
 * SCRIPT FLUSH or a restart) falls back to EVAL with the full text, which
 * also puts the script back in the server's cache.
 *
 * Waiting: acquire retries a busy key with capped, jittered exponential
 * backoff (lock__backoff_ms) until wait_ms, measured on the monotonic clock
 * from the start of the call, is spent, and never sleeps past that deadline.
 * Connections are borrowed per attempt, so a waiter holds none while asleep.
 */
#include "lock/lock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis.h>

#include "lock/lock_impl.h"

#define REDIS_IDLE_MAX 32 /* idle connections kept; extras are closed */
#define REDIS_SHA_LEN 40
#define FENCE_SUFFIX ":fence"

enum { SCRIPT_ACQUIRE, SCRIPT_RELEASE, SCRIPT_EXTEND, SCRIPT_COUNT };

static const char *const script_text[SCRIPT_COUNT] = {
    [SCRIPT_ACQUIRE] = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
                       "return redis.call('INCR', KEYS[2]) end return 0",
    [SCRIPT_RELEASE] = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                       "return redis.call('DEL', KEYS[1]) end return 0",
    [SCRIPT_EXTEND] = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                      "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0",
};

struct redis_conn {
    redisContext *ctx;                         /* owned; connected and authenticated */
    unsigned long gen;                         /* pool generation when it was made */
    char sha[SCRIPT_COUNT][REDIS_SHA_LEN + 1]; /* from SCRIPT LOAD */
    struct redis_conn *next;                   /* free list */
};

struct redis_impl {
    lock_redis_addr addr;    /* copy of the caller's */
    struct timeval timeout;  /* connect and command timeout */
    pthread_mutex_t mu;      /* guards idle, n_idle, gen */
    struct redis_conn *idle; /* free list of connections */
    size_t n_idle;
    unsigned long gen; /* bumped on every connection failure */
};

/* ---- connections ---- */

static void conn_free(struct redis_conn *rc) {
    if (rc == NULL) return;
    if (rc->ctx != NULL) redisFree(rc->ctx);
    free(rc);
}

static void conn_list_free(struct redis_conn *list) {
    while (list != NULL) {
        struct redis_conn *next = list->next;
        conn_free(list);
        list = next;
    }
}

/* Sends argv; returns a new reply (caller frees) or NULL when the context is dead. */
static redisReply *conn_cmd(struct redis_conn *rc, int argc, const char **argv) {
    size_t lens[8];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return redisCommandArgv(rc->ctx, argc, argv, lens);
}

/* Sends argv and expects +OK. Returns 0, or -1 (the connection is then unusable). */
static int conn_cmd_ok(struct redis_conn *rc, int argc, const char **argv) {
    redisReply *r = conn_cmd(rc, argc, argv);
    if (r == NULL) return -1;
    int ok = r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Connects, authenticates, selects the db and loads the scripts. Returns LOCK_OK with a new
 * connection in *out, LOCK_ERR_NOMEM or LOCK_ERR_BACKEND. */
static int conn_open(struct redis_impl *ri, unsigned long gen, struct redis_conn **out) {
    int err = LOCK_ERR_BACKEND;
    struct redis_conn *rc = calloc(1, sizeof *rc);
    if (rc == NULL) return LOCK_ERR_NOMEM;
    rc->gen = gen;
    rc->ctx = redisConnectWithTimeout(ri->addr.host, ri->addr.port, ri->timeout);
    if (rc->ctx == NULL) {
        err = LOCK_ERR_NOMEM;
        goto fail;
    }
    if (rc->ctx->err != 0) goto fail;
    if (redisSetTimeout(rc->ctx, ri->timeout) != REDIS_OK) goto fail;
    if (redisEnableKeepAlive(rc->ctx) != REDIS_OK) goto fail;

    if (ri->addr.user[0] != '\0') {
        const char *argv[] = {"AUTH", ri->addr.user, ri->addr.pass};
        if (conn_cmd_ok(rc, 3, argv) != 0) goto fail;
    } else if (ri->addr.pass[0] != '\0') {
        const char *argv[] = {"AUTH", ri->addr.pass};
        if (conn_cmd_ok(rc, 2, argv) != 0) goto fail;
    }
    if (ri->addr.db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", ri->addr.db);
        const char *argv[] = {"SELECT", db};
        if (conn_cmd_ok(rc, 2, argv) != 0) goto fail;
    }
    for (int i = 0; i < SCRIPT_COUNT; i++) {
        const char *argv[] = {"SCRIPT", "LOAD", script_text[i]};
        redisReply *r = conn_cmd(rc, 3, argv);
        if (r == NULL) goto fail;
        int ok = r->type == REDIS_REPLY_STRING && r->len == REDIS_SHA_LEN;
        if (ok) memcpy(rc->sha[i], r->str, REDIS_SHA_LEN + 1);
        freeReplyObject(r);
        if (!ok) goto fail;
    }
    *out = rc;
    return LOCK_OK;

fail:
    conn_free(rc);
    return err;
}

/* Lends a connection from the free list, or a new one. Returns LOCK_OK with *out set,
 * LOCK_ERR_NOMEM or LOCK_ERR_BACKEND. */
static int conn_borrow(struct redis_impl *ri, struct redis_conn **out) {
    if (pthread_mutex_lock(&ri->mu) != 0) return LOCK_ERR_BACKEND;
    struct redis_conn *rc = ri->idle;
    if (rc != NULL) {
        ri->idle = rc->next;
        ri->n_idle--;
        rc->next = NULL;
    }
    unsigned long gen = ri->gen;
    pthread_mutex_unlock(&ri->mu);
    if (rc != NULL) {
        *out = rc;
        return LOCK_OK;
    }
    return conn_open(ri, gen, out);
}

/* Gives rc back. A dead one (healthy == 0) is freed, and so are all idle ones. */
static void conn_return(struct redis_impl *ri, struct redis_conn *rc, int healthy) {
    struct redis_conn *drop = NULL;
    if (pthread_mutex_lock(&ri->mu) != 0) {
        conn_free(rc);
        return;
    }
    if (!healthy) {
        ri->gen++;
        drop = ri->idle;
        ri->idle = NULL;
        ri->n_idle = 0;
    } else if (rc->gen == ri->gen && ri->n_idle < REDIS_IDLE_MAX) {
        rc->next = ri->idle;
        ri->idle = rc;
        ri->n_idle++;
        rc = NULL;
    }
    pthread_mutex_unlock(&ri->mu);
    conn_free(rc);
    conn_list_free(drop);
}

/* Runs script s with nkeys keys (k1, k2) and args (a1, a2 or NULL) via EVALSHA, falling
 * back to EVAL on NOSCRIPT, and expects an integer reply. Returns LOCK_OK with *value set, or
 * LOCK_ERR_BACKEND (the connection is then dead). */
static int run_script(struct redis_conn *rc, int s, int nkeys, const char *k1, const char *k2,
                      const char *a1, const char *a2, long long *value) {
    const char *argv[7];
    int argc = 0;
    argv[argc++] = "EVALSHA";
    argv[argc++] = rc->sha[s];
    argv[argc++] = nkeys == 2 ? "2" : "1";
    argv[argc++] = k1;
    if (nkeys == 2) argv[argc++] = k2;
    argv[argc++] = a1;
    if (a2 != NULL) argv[argc++] = a2;

    redisReply *r = conn_cmd(rc, argc, argv);
    if (r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        freeReplyObject(r);
        argv[0] = "EVAL";
        argv[1] = script_text[s];
        r = conn_cmd(rc, argc, argv);
    }
    if (r == NULL) return LOCK_ERR_BACKEND;
    int ok = r->type == REDIS_REPLY_INTEGER;
    if (ok) *value = r->integer;
    freeReplyObject(r);
    return ok ? LOCK_OK : LOCK_ERR_BACKEND;
}

/* ---- ops ---- */

static int redis_acquire(void *impl, const char *key, uint32_t ttl_ms, uint32_t wait_ms,
                         lock_handle *out) {
    struct redis_impl *ri = impl;
    int64_t deadline = lock_now_ms() + wait_ms;
    char token[LOCK_TOKEN_LEN + 1];
    int rc = lock__token_new(token);
    if (rc != LOCK_OK) return rc;

    char fence_key[LOCK_KEY_MAX + sizeof FENCE_SUFFIX];
    snprintf(fence_key, sizeof fence_key, "%s%s", key, FENCE_SUFFIX);
    char ttl[16];
    snprintf(ttl, sizeof ttl, "%u", (unsigned)ttl_ms);
    uint64_t rng = strtoull(token + LOCK_TOKEN_LEN / 2, NULL, 16);

    for (unsigned attempt = 0;; attempt++) {
        struct redis_conn *conn;
        rc = conn_borrow(ri, &conn);
        if (rc != LOCK_OK) return rc;
        int64_t sent_at = lock_now_ms();
        long long fence = 0;
        rc = run_script(conn, SCRIPT_ACQUIRE, 2, key, fence_key, token, ttl, &fence);
        if (rc != LOCK_OK || fence < 0) {
            conn_return(ri, conn, 0);
            return LOCK_ERR_BACKEND;
        }
        conn_return(ri, conn, 1);
        if (fence > 0) {
            strcpy(out->key, key);
            memcpy(out->token, token, sizeof token);
            out->fence = (uint64_t)fence;
            out->valid_until_ms = sent_at + ttl_ms;
            return LOCK_OK;
        }
        int64_t now = lock_now_ms();
        if (now >= deadline) return LOCK_ERR_BUSY;
        uint32_t delay = lock__backoff_ms(attempt, &rng);
        if ((int64_t)delay > deadline - now) delay = (uint32_t)(deadline - now);
        lock__sleep_ms(delay);
    }
}

static int redis_release(void *impl, const lock_handle *h) {
    struct redis_impl *ri = impl;
    struct redis_conn *conn;
    int rc = conn_borrow(ri, &conn);
    if (rc != LOCK_OK) return rc;
    long long n = 0;
    rc = run_script(conn, SCRIPT_RELEASE, 1, h->key, NULL, h->token, NULL, &n);
    conn_return(ri, conn, rc == LOCK_OK);
    if (rc != LOCK_OK) return rc;
    return n == 1 ? LOCK_OK : LOCK_ERR_NOT_OWNER;
}

static int redis_extend(void *impl, lock_handle *h, uint32_t ttl_ms) {
    struct redis_impl *ri = impl;
    char ttl[16];
    snprintf(ttl, sizeof ttl, "%u", (unsigned)ttl_ms);
    struct redis_conn *conn;
    int rc = conn_borrow(ri, &conn);
    if (rc != LOCK_OK) return rc;
    int64_t sent_at = lock_now_ms();
    long long n = 0;
    rc = run_script(conn, SCRIPT_EXTEND, 1, h->key, NULL, h->token, ttl, &n);
    conn_return(ri, conn, rc == LOCK_OK);
    if (rc != LOCK_OK) return rc;
    if (n != 1) return LOCK_ERR_LEASE_LOST;
    h->valid_until_ms = sent_at + ttl_ms;
    return LOCK_OK;
}

static void redis_destroy(void *impl) {
    struct redis_impl *ri = impl;
    if (ri == NULL) return;
    conn_list_free(ri->idle);
    ri->idle = NULL;
    pthread_mutex_destroy(&ri->mu);
    free(ri);
}

static const struct lock_ops redis_ops = {
    .name = "redis",
    .acquire = redis_acquire,
    .release = redis_release,
    .extend = redis_extend,
    .destroy = redis_destroy,
};

/* ---- API ---- */

static int field_ok(const char *s, size_t cap) {
    return memchr(s, '\0', cap) != NULL;
}

/* Returns a new client for the Redis server at *addr (borrowed; copied), using timeout_ms for
 * connecting and for each command; caller frees with lock_free(). Does not contact Redis:
 * connections are made on first use and remade after failures, so the server may start
 * later. Returns NULL with *err (when err is non-NULL) set to LOCK_ERR_INVALID (NULL addr,
 * empty or unterminated host, port outside 1..65535, negative db, timeout_ms <= 0),
 * LOCK_ERR_NOMEM, or LOCK_ERR_BACKEND if the mutex cannot be created; *err is LOCK_OK on
 * success. */
lock_client *lock_redis_new(const lock_redis_addr *addr, int timeout_ms, int *err) {
    int dummy;
    if (err == NULL) err = &dummy;
    if (addr == NULL || timeout_ms <= 0 || !field_ok(addr->host, sizeof addr->host) ||
        addr->host[0] == '\0' || addr->port < 1 || addr->port > 65535 || addr->db < 0 ||
        !field_ok(addr->user, sizeof addr->user) || !field_ok(addr->pass, sizeof addr->pass)) {
        *err = LOCK_ERR_INVALID;
        return NULL;
    }
    struct redis_impl *ri = calloc(1, sizeof *ri);
    if (ri == NULL) {
        *err = LOCK_ERR_NOMEM;
        return NULL;
    }
    ri->addr = *addr;
    ri->timeout.tv_sec = timeout_ms / 1000;
    ri->timeout.tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000;
    if (pthread_mutex_init(&ri->mu, NULL) != 0) {
        free(ri);
        *err = LOCK_ERR_BACKEND;
        return NULL;
    }
    lock_client *c = lock__client_new(&redis_ops, ri, err);
    if (c == NULL) {
        pthread_mutex_destroy(&ri->mu);
        free(ri);
        return NULL;
    }
    return c;
}
