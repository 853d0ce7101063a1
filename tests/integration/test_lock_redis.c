/* test_lock_redis.c - the lock contract and Redis specifics against a real redis-server.
 *
 * Group "lock_redis" starts a throwaway server (tests/helpers/redis_proc.h),
 * runs tests/helpers/lock_contract.c against lock_redis_new() as group state,
 * then checks what only Redis has: the key's PTTL, the fence key, the selected
 * db, the NOSCRIPT fallback, and a server that dies or hangs (a prompt
 * LOCK_ERR_BACKEND, then recovery by the same client). Those last tests kill
 * the server, so they run last. Group "lock_redis_auth" starts a second
 * server with a password and ACL users.
 *
 * Waiting is checked by counting commands (INFO commandstats after CONFIG
 * RESETSTAT): threads of one client queue in-process, and a waiter in another
 * client sleeps on pub/sub, the PTTL and a capped poll schedule, so its
 * attempts are bounded by that schedule. The one time bound, a silent release
 * (no PUBLISH) noticed before a 900 ms foreign lease ends, is a correctness
 * bound with ~750 ms to spare; a waiter that did not poll fails it for sure.
 * Holders in child processes (lock_child_start) are stopped and killed to
 * show what a paused or dead holder does to its lease. Answers that arrive
 * after the lease they grant ran out are made by stopping the server with our
 * command already in its socket (seen in /proc/net/tcp) for longer than the
 * lease, so the elapsed time is certain, not a race.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"
#include "rconn/rconn.h"
#include "lock/lock_impl.h" /* the poll schedule's constants */
#include "tests/helpers/lock_contract.h"
#include "tests/helpers/redis_proc.h"

#define TIMEOUT_MS 2000

static th_redis g_redis;   /* group "lock_redis" */
static th_redis g_auth;    /* group "lock_redis_auth": requirepass + ACL users */
static const char *g_self; /* argv[0], to start holders in child processes */

/* ---- helpers ---- */

/* Returns a raw hiredis connection to port, or fails the test. */
static redisContext *raw_connect(int port) {
    struct timeval tv = {2, 0};
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", port, tv);
    assert_non_null(ctx);
    assert_int_equal(ctx->err, 0);
    assert_int_equal(redisSetTimeout(ctx, tv), REDIS_OK);
    return ctx;
}

/* Runs a command given as a NULL-terminated list; returns a new reply or fails the test. */
static redisReply *raw_cmd(redisContext *ctx, const char *const *argv) {
    int argc = 0;
    size_t lens[16];
    while (argv[argc] != NULL) {
        assert_true(argc < 16);
        lens[argc] = strlen(argv[argc]);
        argc++;
    }
    redisReply *r = redisCommandArgv(ctx, argc, (const char **)argv, lens);
    assert_non_null(r);
    return r;
}

/* Runs a command that must answer +OK. */
static void raw_ok(redisContext *ctx, const char *const *argv) {
    redisReply *r = raw_cmd(ctx, argv);
    int ok = r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    if (!ok) print_error("%s: %s\n", argv[0], r->str ? r->str : "(no text)");
    freeReplyObject(r);
    assert_true(ok);
}

/* Runs a command that must answer an integer; returns it. */
static long long raw_int(redisContext *ctx, const char *const *argv) {
    redisReply *r = raw_cmd(ctx, argv);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

/* Returns a new client for url, or fails the test. */
static lock_client *client_for(const char *url, int timeout_ms) {
    rconn_addr a;
    assert_int_equal(rconn_addr_parse(url, &a), RCONN_OK);
    int err = -100;
    lock_client *c = lock_redis_new(&a, timeout_ms, &err);
    assert_non_null(c);
    assert_int_equal(err, LOCK_OK);
    return c;
}

/* ---- group "lock_redis" ---- */

static int redis_setup(void **state) {
    memset(&g_redis, 0, sizeof g_redis);
    if (th_redis_start(&g_redis) != 0) {
        th_redis_stop(&g_redis);
        return -1;
    }
    rconn_addr a;
    int err = -100;
    lock_client *c = NULL;
    if (rconn_addr_parse(g_redis.url, &a) == RCONN_OK) c = lock_redis_new(&a, TIMEOUT_MS, &err);
    if (c == NULL) {
        th_redis_stop(&g_redis);
        return -1;
    }
    *state = c;
    return 0;
}

static int redis_teardown(void **state) {
    lock_free(*state);
    *state = NULL;
    th_redis_stop(&g_redis);
    return 0;
}

static void test_lock_redis_name_is_redis(void **state) {
    assert_string_equal(lock_name(*state), "redis");
}

static void test_lock_redis_acquire_key_pttl_within_ttl(void **state) {
    lock_client *c = *state;
    lock_handle h;
    assert_int_equal(lock_acquire(c, "redis:pttl", 5000, 0, &h), LOCK_OK);
    redisContext *raw = raw_connect(g_redis.port);

    long long pttl = raw_int(raw, (const char *const[]){"PTTL", "redis:pttl", NULL});
    assert_true(pttl > 0 && pttl <= 5000);
    redisReply *r = raw_cmd(raw, (const char *const[]){"GET", "redis:pttl", NULL});
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, h.token);
    freeReplyObject(r);

    /* the server's one fence counter holds the last fence; it started at the clock in
     * microseconds, above any fence an older per-key counter handed out */
    r = raw_cmd(raw, (const char *const[]){"GET", "lock:fences", NULL});
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_int_equal(strtoull(r->str, NULL, 10), h.fence);
    freeReplyObject(r);
    assert_true(h.fence > 1000000000000000ULL);
    assert_int_equal(raw_int(raw, (const char *const[]){"EXISTS", "redis:pttl:fence", NULL}), 0);

    /* extend resets the PTTL; release deletes the key and keeps the fence */
    assert_int_equal(lock_extend(c, &h, 60000), LOCK_OK);
    pttl = raw_int(raw, (const char *const[]){"PTTL", "redis:pttl", NULL});
    assert_true(pttl > 5000 && pttl <= 60000);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    assert_int_equal(raw_int(raw, (const char *const[]){"EXISTS", "redis:pttl", NULL}), 0);
    assert_int_equal(raw_int(raw, (const char *const[]){"EXISTS", "lock:fences", NULL}), 1);
    redisFree(raw);
}

static void test_lock_redis_other_holder_key_busy(void **state) {
    lock_client *c = *state;
    redisContext *raw = raw_connect(g_redis.port);
    /* a foreign value in the key: held by someone else, and never deleted by us */
    raw_ok(raw, (const char *const[]){"SET", "redis:foreign", "someone", "PX", "60000", NULL});
    lock_handle h;
    assert_int_equal(lock_acquire(c, "redis:foreign", 1000, 0, &h), LOCK_ERR_BUSY);
    memset(&h, 0, sizeof h);
    strcpy(h.key, "redis:foreign");
    memset(h.token, 'f', LOCK_TOKEN_LEN);
    assert_int_equal(lock_release(c, &h), LOCK_ERR_NOT_OWNER);
    assert_int_equal(lock_extend(c, &h, 1000), LOCK_ERR_LEASE_LOST);
    assert_int_equal(raw_int(raw, (const char *const[]){"EXISTS", "redis:foreign", NULL}), 1);
    redisFree(raw);
}

/* A lease this client gave up that the server still has under its token (a failover or a
 * restart from an AOF that lost the release brings it back; here a SET puts it back) is taken
 * over at once by the client's next acquire, with a new token and a larger fence; a plain and
 * a reentrant acquire alike. A lease of another client, and one a thread of this client still
 * holds, are waited for and left alone (so is a reentrant lease under our token, which other
 * clients may have joined: lock_contract_owned_two_clients). */
static void test_lock_redis_own_lease_given_up_taken_over_others_waited(void **state) {
    lock_client *a = *state;
    lock_client *b = client_for(g_redis.url, TIMEOUT_MS);
    redisContext *raw = raw_connect(g_redis.port);
    lock_handle h1, h2, hb, hx;
    assert_int_equal(lock_acquire(a, "redis:gaveup", 60000, 0, &h1), LOCK_OK);
    assert_int_equal(lock_release(a, &h1), LOCK_OK);
    raw_ok(raw, (const char *const[]){"SET", "redis:gaveup", h1.token, "PX", "60000", NULL});
    int64_t t0 = rconn_now_ms();
    assert_int_equal(lock_acquire(a, "redis:gaveup", 60000, 0, &h2), LOCK_OK);
    assert_true(rconn_now_ms() - t0 < TIMEOUT_MS);
    assert_string_not_equal(h2.token, h1.token);
    assert_true(h2.fence > h1.fence);
    redisReply *r = raw_cmd(raw, (const char *const[]){"GET", "redis:gaveup", NULL});
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, h2.token);
    freeReplyObject(r);
    /* ... while this client holds it, another acquire of its own waits (in-process) */
    assert_int_equal(lock_acquire(a, "redis:gaveup", 60000, 200, &hx), LOCK_ERR_BUSY);
    assert_int_equal(lock_release(a, &h2), LOCK_OK);

    /* another client's lease is waited out, and its given-up lease is not ours to take */
    assert_int_equal(lock_acquire(b, "redis:gaveup:theirs", 60000, 0, &hb), LOCK_OK);
    assert_int_equal(lock_acquire(a, "redis:gaveup:theirs", 60000, 300, &hx), LOCK_ERR_BUSY);
    assert_int_equal(lock_release(b, &hb), LOCK_OK);
    raw_ok(raw, (const char *const[]){"SET", "redis:gaveup:theirs", hb.token, "PX", "60000", NULL});
    assert_int_equal(lock_acquire(a, "redis:gaveup:theirs", 60000, 300, &hx), LOCK_ERR_BUSY);
    r = raw_cmd(raw, (const char *const[]){"GET", "redis:gaveup:theirs", NULL});
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, hb.token);
    freeReplyObject(r);

    /* a reentrant acquire takes over a plain lease of ours given up too */
    assert_int_equal(lock_acquire(a, "redis:gaveup:owned", 60000, 0, &h1), LOCK_OK);
    assert_int_equal(lock_release(a, &h1), LOCK_OK);
    raw_ok(raw, (const char *const[]){"SET", "redis:gaveup:owned", h1.token, "PX", "60000", NULL});
    assert_int_equal(lock_acquire_owned(a, "redis:gaveup:owned", "req-2", 60000, 0, &h2), LOCK_OK);
    assert_true(h2.fence > h1.fence);
    assert_int_equal(h2.holds, 1);
    assert_int_equal(lock_release(a, &h2), LOCK_OK);
    assert_int_equal(raw_int(raw, (const char *const[]){"DEL", "redis:gaveup:theirs", NULL}), 1);
    redisFree(raw);
    lock_free(b);
}

static void test_lock_redis_two_clients_mutually_exclusive(void **state) {
    lock_client *a = *state;
    lock_client *b = client_for(g_redis.url, TIMEOUT_MS);
    lock_handle ha, hb;
    assert_int_equal(lock_acquire(a, "redis:two", 10000, 0, &ha), LOCK_OK);
    assert_int_equal(lock_acquire(b, "redis:two", 10000, 0, &hb), LOCK_ERR_BUSY);
    assert_int_equal(lock_release(a, &ha), LOCK_OK);
    assert_int_equal(lock_acquire(b, "redis:two", 10000, 0, &hb), LOCK_OK);
    assert_true(hb.fence > ha.fence);
    assert_int_equal(lock_release(b, &hb), LOCK_OK);
    lock_free(b);
}

static void test_lock_redis_db_in_url_selected(void **state) {
    (void)state;
    char url[96];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/3", g_redis.port);
    lock_client *c = client_for(url, TIMEOUT_MS);
    lock_handle h;
    assert_int_equal(lock_acquire(c, "redis:db", 10000, 0, &h), LOCK_OK);
    redisContext *raw = raw_connect(g_redis.port);
    assert_int_equal(raw_int(raw, (const char *const[]){"EXISTS", "redis:db", NULL}), 0);
    raw_ok(raw, (const char *const[]){"SELECT", "3", NULL});
    assert_int_equal(raw_int(raw, (const char *const[]){"EXISTS", "redis:db", NULL}), 1);
    redisFree(raw);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    lock_free(c);
}

static void test_lock_redis_script_flush_falls_back_to_eval(void **state) {
    lock_client *c = *state;
    lock_handle h;
    assert_int_equal(lock_acquire(c, "redis:noscript", 10000, 0, &h), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_OK);

    redisContext *raw = raw_connect(g_redis.port);
    raw_ok(raw, (const char *const[]){"SCRIPT", "FLUSH", NULL});
    raw_ok(raw, (const char *const[]){"CONFIG", "RESETSTAT", NULL});

    assert_int_equal(lock_acquire(c, "redis:noscript", 10000, 0, &h), LOCK_OK);
    assert_int_equal(lock_extend(c, &h, 10000), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    /* EVAL cached the scripts again: the next round is EVALSHA only */
    assert_int_equal(lock_acquire(c, "redis:noscript", 10000, 0, &h), LOCK_OK);
    assert_int_equal(lock_extend(c, &h, 10000), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_OK);

    redisReply *r = raw_cmd(raw, (const char *const[]){"INFO", "commandstats", NULL});
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    int eval3 = strstr(r->str, "cmdstat_eval:calls=3,") != NULL;
    int evalsha6 = strstr(r->str, "cmdstat_evalsha:calls=6,") != NULL;
    if (!eval3 || !evalsha6) print_error("%s\n", r->str);
    freeReplyObject(r);
    redisFree(raw);
    assert_true(eval3);
    assert_true(evalsha6);
}

/* ---- reentrant leases: what they look like in Redis ---- */

/* Returns field of hash key as a string in the caller's buf (cap bytes), or "" when absent. */
static const char *raw_hget(redisContext *raw, const char *key, const char *field, char *buf,
                            size_t cap) {
    redisReply *r = raw_cmd(raw, (const char *const[]){"HGET", key, field, NULL});
    snprintf(buf, cap, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    return buf;
}

/* A reentrant lease is the plain lease's key (value = the token, PX = ttl: any SET NX client
 * finds it taken, and a store can compare the token) plus the hash "<key>:owner" {owner,
 * token, holds, fence} with the same expiry. A re-acquisition counts a hold, draws no fence,
 * and moves both expiries later, never earlier; the last release deletes both keys. */
static void test_lock_redis_owned_key_holds_token_hash_holds_owner(void **state) {
    lock_client *c = *state;
    const char *key = "redis:own", *okey = "redis:own:owner";
    char buf[64];
    lock_handle h[3];
    redisContext *raw = raw_connect(g_redis.port);
    assert_int_equal(lock_acquire_owned(c, key, "req-1", 5000, 0, &h[0]), LOCK_OK);
    redisReply *r = raw_cmd(raw, (const char *const[]){"GET", key, NULL});
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, h[0].token);
    freeReplyObject(r);
    assert_string_equal(raw_hget(raw, okey, "owner", buf, sizeof buf), "req-1");
    assert_string_equal(raw_hget(raw, okey, "token", buf, sizeof buf), h[0].token);
    assert_string_equal(raw_hget(raw, okey, "holds", buf, sizeof buf), "1");
    assert_int_equal(strtoull(raw_hget(raw, okey, "fence", buf, sizeof buf), NULL, 10), h[0].fence);
    long long p1 = raw_int(raw, (const char *const[]){"PTTL", key, NULL});
    long long p2 = raw_int(raw, (const char *const[]){"PTTL", okey, NULL});
    assert_true(p1 > 0 && p1 <= 5000 && p2 > 0 && p2 <= 5000);
    assert_true(p1 - p2 <= 5 && p2 - p1 <= 5);

    /* another client speaking the plain protocol (node-redlock: SET key value NX PX) */
    r = raw_cmd(raw, (const char *const[]){"SET", key, "foreign", "NX", "PX", "1000", NULL});
    assert_int_equal(r->type, REDIS_REPLY_NIL);
    freeReplyObject(r);

    assert_int_equal(lock_acquire_owned(c, key, "req-1", 60000, 0, &h[1]), LOCK_OK);
    assert_string_equal(raw_hget(raw, okey, "holds", buf, sizeof buf), "2");
    p1 = raw_int(raw, (const char *const[]){"PTTL", key, NULL});
    p2 = raw_int(raw, (const char *const[]){"PTTL", okey, NULL});
    assert_true(p1 > 5000 && p2 > 5000); /* prolonged */
    assert_int_equal(lock_acquire_owned(c, key, "req-1", 1000, 0, &h[2]), LOCK_OK);
    assert_string_equal(raw_hget(raw, okey, "holds", buf, sizeof buf), "3");
    p1 = raw_int(raw, (const char *const[]){"PTTL", key, NULL});
    assert_true(p1 > 5000); /* never shortened */
    r = raw_cmd(raw, (const char *const[]){"GET", "lock:fences", NULL});
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_int_equal(strtoull(r->str, NULL, 10), h[0].fence); /* no fence drawn since */
    freeReplyObject(r);

    assert_int_equal(lock_release(c, &h[2]), LOCK_OK);
    assert_string_equal(raw_hget(raw, okey, "holds", buf, sizeof buf), "2");
    assert_int_equal(lock_release(c, &h[0]), LOCK_OK);
    assert_string_equal(raw_hget(raw, okey, "holds", buf, sizeof buf), "1");
    assert_int_equal(raw_int(raw, (const char *const[]){"EXISTS", key, NULL}), 1);
    assert_int_equal(lock_release(c, &h[1]), LOCK_OK);
    assert_int_equal(raw_int(raw, (const char *const[]){"EXISTS", key, okey, NULL}), 0);
    redisFree(raw);
}

/* A foreign client that frees the key the plain way (DEL, or node-redlock's compare-and-delete)
 * leaves the hash behind until it expires; the hash names the old token, so it lets nobody
 * re-enter the next lease on the key, plain or reentrant. (Client b takes the key after the
 * DEL: a's in-process queue, not told of the DEL, would wait for the old lease's deadline.) */
static void test_lock_redis_owned_key_freed_by_foreign_client_stale_hash_ignored(void **state) {
    lock_client *a = *state;
    lock_client *b = client_for(g_redis.url, TIMEOUT_MS);
    const char *key = "redis:own:stale", *okey = "redis:own:stale:owner";
    char buf[64];
    lock_handle ha, plain, hb, again;
    redisContext *raw = raw_connect(g_redis.port);
    assert_int_equal(lock_acquire_owned(a, key, "req-a", 60000, 0, &ha), LOCK_OK);
    assert_int_equal(raw_int(raw, (const char *const[]){"DEL", key, NULL}), 1);
    assert_int_equal(raw_int(raw, (const char *const[]){"EXISTS", okey, NULL}), 1);
    assert_int_equal(lock_acquire(b, key, 60000, 0, &plain), LOCK_OK);
    assert_int_equal(lock_acquire_owned(a, key, "req-a", 10000, 0, &again), LOCK_ERR_BUSY);
    assert_int_equal(lock_acquire_owned(b, key, "req-a", 10000, 0, &again), LOCK_ERR_BUSY);
    assert_int_equal(lock_release(a, &ha), LOCK_ERR_NOT_OWNER);
    assert_int_equal(lock_release(b, &plain), LOCK_OK);
    assert_int_equal(lock_acquire_owned(b, key, "req-b", 10000, 0, &hb), LOCK_OK);
    assert_int_equal(hb.holds, 1);
    assert_string_equal(raw_hget(raw, okey, "owner", buf, sizeof buf), "req-b");
    assert_string_equal(raw_hget(raw, okey, "token", buf, sizeof buf), hb.token);
    assert_int_equal(lock_acquire_owned(a, key, "req-a", 10000, 0, &again), LOCK_ERR_BUSY);
    assert_int_equal(lock_release(b, &hb), LOCK_OK);
    assert_int_equal(raw_int(raw, (const char *const[]){"EXISTS", key, okey, NULL}), 0);
    redisFree(raw);
    lock_free(b);
}

static void test_lock_redis_owned_other_client_same_owner_joins(void **state) {
    lock_client *b = client_for(g_redis.url, TIMEOUT_MS);
    lock_contract_owned_two_clients(*state, b);
    lock_free(b);
}

/* ---- waiting without spinning: command counts ---- */

/* Returns the calls of cmd in an INFO commandstats text, or 0. */
static long long stat_calls(const char *info, const char *cmd) {
    char pat[64];
    snprintf(pat, sizeof pat, "cmdstat_%s:calls=", cmd);
    const char *p = strstr(info, pat);
    return p != NULL ? atoll(p + strlen(pat)) : 0;
}

struct cmdstats {
    long long evalsha, eval, subscribe, publish;
    long long fences; /* TIME calls: the acquire script reads the clock once per new fence */
};

static void stats_reset(void) {
    redisContext *raw = raw_connect(g_redis.port);
    raw_ok(raw, (const char *const[]){"CONFIG", "RESETSTAT", NULL});
    redisFree(raw);
}

static struct cmdstats stats_read(void) {
    redisContext *raw = raw_connect(g_redis.port);
    redisReply *r = raw_cmd(raw, (const char *const[]){"INFO", "commandstats", NULL});
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    struct cmdstats st = {stat_calls(r->str, "evalsha"), stat_calls(r->str, "eval"),
                          stat_calls(r->str, "subscribe"), stat_calls(r->str, "publish"),
                          stat_calls(r->str, "time")};
    freeReplyObject(r);
    redisFree(raw);
    return st;
}

#define LOAD_THREADS 16
#define LOAD_CYCLES 50

struct load {
    lock_client *clients[4];
    int nclients;
    atomic_int acquired, released, failures, holders, overlaps;
};

struct loader {
    struct load *l;
    lock_client *c;
};

static void *load_worker(void *arg) {
    struct loader *me = arg;
    struct load *l = me->l;
    for (int i = 0; i < LOAD_CYCLES; i++) {
        lock_handle h;
        if (lock_acquire(me->c, "redis:load", 10000, 60000, &h) != LOCK_OK) {
            atomic_fetch_add(&l->failures, 1);
            continue;
        }
        atomic_fetch_add(&l->acquired, 1);
        if (atomic_fetch_add(&l->holders, 1) != 0) atomic_fetch_add(&l->overlaps, 1);
        struct timespec ts = {0, 200 * 1000}; /* 200 us of "work" under the lock */
        nanosleep(&ts, NULL);
        atomic_fetch_sub(&l->holders, 1);
        if (lock_release(me->c, &h) == LOCK_OK)
            atomic_fetch_add(&l->released, 1);
        else
            atomic_fetch_add(&l->failures, 1);
    }
    return NULL;
}

/* Runs LOAD_THREADS x LOAD_CYCLES acquire/release cycles on one key over nclients clients and
 * returns the acquire-script calls: every EVALSHA/EVAL minus one per release. */
static long long run_load(int nclients, struct load *l, struct cmdstats *st) {
    memset(l, 0, sizeof *l);
    l->nclients = nclients;
    for (int i = 0; i < nclients; i++)
        l->clients[i] = client_for(g_redis.url, TIMEOUT_MS);
    stats_reset();
    struct loader ls[LOAD_THREADS];
    pthread_t th[LOAD_THREADS];
    for (int i = 0; i < LOAD_THREADS; i++) {
        ls[i].l = l;
        ls[i].c = l->clients[i % nclients];
        assert_int_equal(pthread_create(&th[i], NULL, load_worker, &ls[i]), 0);
    }
    for (int i = 0; i < LOAD_THREADS; i++)
        pthread_join(th[i], NULL);
    *st = stats_read();
    for (int i = 0; i < nclients; i++)
        lock_free(l->clients[i]);
    return st->evalsha + st->eval - atomic_load(&l->released);
}

/* 16 threads sharing one client: they queue in-process, so Redis sees about one acquire per
 * acquisition (the old SET NX retry loop sent 1.2-2.5 per acquisition here). */
static void test_lock_redis_16_threads_one_client_evalsha_within_3x_acquisitions(void **state) {
    (void)state;
    struct load l;
    struct cmdstats st;
    long long attempts = run_load(1, &l, &st);
    long long acq = atomic_load(&l.acquired);
    print_message("1 client x %d threads x %d cycles: acquisitions=%lld evalsha=%lld eval=%lld "
                  "acquire_script_calls=%lld (%.2f per acquisition) subscribe=%lld\n",
                  LOAD_THREADS, LOAD_CYCLES, acq, st.evalsha, st.eval, attempts,
                  (double)attempts / (double)(acq > 0 ? acq : 1), st.subscribe);
    assert_int_equal(atomic_load(&l.failures), 0);
    assert_int_equal(atomic_load(&l.overlaps), 0);
    assert_int_equal(acq, LOAD_THREADS * LOAD_CYCLES);
    assert_int_equal(st.fences, acq); /* the fence of every success, and no other */
    assert_true(st.evalsha + st.eval <= 3 * acq);
    assert_true(attempts <= acq + acq / 10);
}

/* The same load over 4 clients: a release wakes at most one waiter per client (the others
 * sleep in their client's queue), and each client spends at most two attempts per release
 * (the woken waiter's retry; a fresh contender's try plus its retry once subscribed). */
static void test_lock_redis_16_threads_four_clients_attempts_bounded(void **state) {
    (void)state;
    struct load l;
    struct cmdstats st;
    long long attempts = run_load(4, &l, &st);
    long long acq = atomic_load(&l.acquired);
    print_message("4 clients x %d threads x %d cycles: acquisitions=%lld evalsha=%lld eval=%lld "
                  "acquire_script_calls=%lld (%.2f per acquisition) subscribe=%lld\n",
                  LOAD_THREADS / 4, LOAD_CYCLES, acq, st.evalsha, st.eval, attempts,
                  (double)attempts / (double)(acq > 0 ? acq : 1), st.subscribe);
    assert_int_equal(atomic_load(&l.failures), 0);
    assert_int_equal(atomic_load(&l.overlaps), 0);
    assert_int_equal(acq, LOAD_THREADS * LOAD_CYCLES);
    assert_true(attempts <= 2 * 4 * acq);
}

struct bg_acquire {
    lock_client *c;
    const char *key;
    uint32_t wait_ms;
    lock_handle h;
    int rc;
    int64_t took_ms; /* how long lock_acquire() ran */
};

static void *bg_acquire_main(void *arg) {
    struct bg_acquire *b = arg;
    int64_t t0 = rconn_now_ms();
    b->rc = lock_acquire(b->c, b->key, 10000, b->wait_ms, &b->h);
    b->took_ms = rconn_now_ms() - t0;
    return NULL;
}

/* Returns the most acquire attempts a waiter in another client can spend in a wait of wait_ms:
 * its first try, the try once subscribed, the successful one, and the polls of the schedule
 * (LOCK_WAIT_POLL_FIRST_MS doubling up to LOCK_WAIT_POLL_CAP_MS, each nap at least 3/4 of its
 * step), plus one for a nap cut short at the lease's end. Pub/sub wakes the waiter early; it
 * does not spare the polls before that. */
static long long waiter_attempts_max(int64_t wait_ms) {
    long long n = 3 + 1;
    int64_t t = 0;
    for (unsigned step = 0; t <= wait_ms; step++, n++) {
        uint32_t d = step < 16 ? LOCK_WAIT_POLL_FIRST_MS << step : LOCK_WAIT_POLL_CAP_MS;
        if (d > LOCK_WAIT_POLL_CAP_MS) d = LOCK_WAIT_POLL_CAP_MS;
        t += d - d / 4 > 0 ? d - d / 4 : 1;
    }
    return n;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Returns 1 once some connection of the server on port has bytes the server has not read yet
 * (/proc/net/tcp: rx_queue of an established socket whose local port is the server's), 0 when
 * none shows up within timeout_ms. With the server stopped, that is a command of ours sitting
 * in its socket: the operation is in flight, its clock started. */
static int server_has_unread(int port, int timeout_ms) {
    for (int64_t end = rconn_now_ms() + timeout_ms; rconn_now_ms() < end; sleep_ms(1)) {
        FILE *f = fopen("/proc/net/tcp", "r");
        if (f == NULL) return 0;
        char line[512];
        int found = 0;
        while (!found && fgets(line, sizeof line, f) != NULL) {
            unsigned lport, state;
            unsigned long tx, rx;
            if (sscanf(line, " %*d: %*x:%x %*x:%*x %x %lx:%lx", &lport, &state, &tx, &rx) == 4 &&
                (int)lport == port && state == 1 && rx > 0)
                found = 1;
        }
        fclose(f);
        if (found) return 1;
    }
    return 0;
}

struct bg_extend {
    lock_client *c;
    lock_handle *h;
    uint32_t ttl_ms;
    int rc;
};

static void *bg_extend_main(void *arg) {
    struct bg_extend *b = arg;
    b->rc = lock_extend(b->c, b->h, b->ttl_ms);
    return NULL;
}

/* ---- answers that come back after the lease ran out ---- */

/* The server is paused (SIGSTOP) while an extend to 2 ms is in flight, for far longer than
 * those 2 ms: Redis applies the extension when it wakes up and answers yes, but the new lease
 * ran out before the answer came back. That is a lapsed lease (LEASE_LOST), not a store
 * failure: the server answered, and is healthy. */
static void test_lock_redis_extend_answered_after_new_ttl_lease_lost(void **state) {
    lock_client *c = *state;
    lock_handle h;
    assert_int_equal(lock_acquire(c, "redis:late:extend", 60000, 0, &h), LOCK_OK);
    lock_handle before = h;
    th_redis_signal(&g_redis, SIGSTOP);
    struct bg_extend bg = {.c = c, .h = &h, .ttl_ms = 2, .rc = -100};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, bg_extend_main, &bg), 0);
    int in_flight = server_has_unread(g_redis.port, 5000);
    sleep_ms(50); /* 25 x the new lease, with the extend's clock running */
    th_redis_signal(&g_redis, SIGCONT);
    pthread_join(th, NULL);
    assert_true(in_flight);
    assert_int_equal(bg.rc, LOCK_ERR_LEASE_LOST);
    assert_memory_equal(&h, &before, sizeof h); /* a failed extend leaves the handle alone */

    /* Redis did apply it (the 60 s lease is gone 2 ms after the wake-up) and works; the lost
     * lease does not hold up the client's own threads (its queue entry was freed) */
    sleep_ms(20);
    redisContext *raw = raw_connect(g_redis.port);
    assert_int_equal(raw_int(raw, (const char *const[]){"EXISTS", "redis:late:extend", NULL}), 0);
    redisFree(raw);
    lock_handle h2;
    assert_int_equal(lock_acquire(c, "redis:late:extend", 60000, 0, &h2), LOCK_OK);
    assert_true(h2.fence > h.fence);
    assert_int_equal(lock_extend(c, &h2, 60000), LOCK_OK);
    assert_int_equal(lock_release(c, &h2), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_ERR_NOT_OWNER);
}

struct bg_acquire_ttl {
    lock_client *c;
    const char *key;
    uint32_t ttl_ms, wait_ms;
    lock_handle h;
    int rc;
};

static void *bg_acquire_ttl_main(void *arg) {
    struct bg_acquire_ttl *b = arg;
    b->rc = lock_acquire(b->c, b->key, b->ttl_ms, b->wait_ms, &b->h);
    return NULL;
}

/* Runs lock_acquire(key, ttl_ms, wait_ms) on a thread while the server is paused for pause_ms
 * from the moment the acquire's command reaches it; returns the thread's result. */
static void acquire_through_pause(lock_client *c, struct bg_acquire_ttl *bg, int pause_ms) {
    bg->c = c;
    bg->rc = -100;
    th_redis_signal(&g_redis, SIGSTOP);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, bg_acquire_ttl_main, bg), 0);
    int in_flight = server_has_unread(g_redis.port, 5000);
    sleep_ms(pause_ms);
    th_redis_signal(&g_redis, SIGCONT);
    pthread_join(th, NULL);
    assert_true(in_flight);
}

/* The same for an acquire: Redis grants the key when it wakes up, but the 100 ms lease ran out
 * during the 300 ms pause. The grant is given back at once (not left to expire), and the caller
 * hears BUSY with a zero budget, or gets the key on the retry with a budget; never BACKEND. */
static void test_lock_redis_acquire_answered_after_ttl_undone_busy_or_retried(void **state) {
    lock_client *c = *state;
    struct bg_acquire_ttl bg = {.key = "redis:late:acquire", .ttl_ms = 100, .wait_ms = 0};
    acquire_through_pause(c, &bg, 300);
    redisContext *raw = raw_connect(g_redis.port);
    /* checked within the 100 ms the late grant would otherwise live */
    long long left = raw_int(raw, (const char *const[]){"EXISTS", "redis:late:acquire", NULL});
    assert_int_equal(bg.rc, LOCK_ERR_BUSY);
    assert_int_equal(bg.h.token[0], '\0');
    assert_int_equal(left, 0);

    bg.wait_ms = 5000;
    acquire_through_pause(c, &bg, 300);
    assert_int_equal(bg.rc, LOCK_OK);
    assert_true(bg.h.valid_until_ms > rconn_now_ms());
    redisReply *r = raw_cmd(raw, (const char *const[]){"GET", "redis:late:acquire", NULL});
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, bg.h.token);
    freeReplyObject(r);
    redisFree(raw);
    assert_int_equal(lock_release(c, &bg.h), LOCK_OK);
}

/* A waiter in another client through a 600 ms hold: it listens for the release notice and
 * polls on the capped schedule meanwhile (a holder may release without publishing), so its
 * attempts are bounded by the schedule, about one per LOCK_WAIT_POLL_CAP_MS once it is capped
 * (20 here, measured; 3 when it relied on pub/sub alone; the old SET NX loop spent 23), and it
 * is woken by exactly one PUBLISH. */
static void test_lock_redis_remote_waiter_woken_by_release_few_attempts(void **state) {
    lock_client *a = *state;
    lock_client *b = client_for(g_redis.url, TIMEOUT_MS);
    lock_handle h;
    assert_int_equal(lock_acquire(a, "redis:wake", 60000, 0, &h), LOCK_OK);
    stats_reset();
    struct bg_acquire bg = {.c = b, .key = "redis:wake", .wait_ms = 30000};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, bg_acquire_main, &bg), 0);
    sleep_ms(600);
    assert_int_equal(lock_release(a, &h), LOCK_OK);
    pthread_join(th, NULL);
    struct cmdstats st = stats_read();
    long long attempts = st.evalsha + st.eval - 1; /* minus a's release */
    print_message("remote waiter through a 600 ms hold: %lld acquire attempts in %lld ms (at most "
                  "%lld), %lld subscribe\n",
                  attempts, (long long)bg.took_ms, waiter_attempts_max(bg.took_ms), st.subscribe);
    assert_int_equal(bg.rc, LOCK_OK);
    assert_true(bg.h.fence > h.fence);
    assert_true(attempts <= waiter_attempts_max(bg.took_ms));
    assert_int_equal(st.subscribe, 1);
    assert_int_equal(st.publish, 1); /* the waiter marked the key wanted: the release told it */
    assert_int_equal(lock_release(b, &bg.h), LOCK_OK);
    lock_free(b);
}

/* Nobody waits: a release deletes the lease and announces nothing. */
static void test_lock_redis_release_without_waiter_publishes_nothing(void **state) {
    lock_client *a = *state;
    lock_handle h[2];
    const char *const keys[2] = {"redis:quiet:a", "redis:quiet:b"};
    stats_reset();
    assert_int_equal(lock_acquire(a, keys[0], 60000, 0, &h[0]), LOCK_OK);
    assert_int_equal(lock_release(a, &h[0]), LOCK_OK);
    assert_int_equal(lock_acquire_multi(a, keys, 2, 60000, 0, h), LOCK_OK);
    assert_int_equal(lock_release_multi(a, h, 2), LOCK_OK);
    struct cmdstats st = stats_read();
    assert_int_equal(st.publish, 0);
    assert_int_equal(st.evalsha + st.eval, 4);
}

/* A holder that never releases: the waiter polls on the schedule until the lease's end (the
 * last nap is cut at the PTTL the busy answer carried), then takes the key. */
static void test_lock_redis_remote_waiter_woken_at_expiry_few_attempts(void **state) {
    lock_client *a = *state;
    lock_client *b = client_for(g_redis.url, TIMEOUT_MS);
    lock_handle h;
    assert_int_equal(lock_acquire(a, "redis:expire", 600, 0, &h), LOCK_OK);
    stats_reset();
    struct bg_acquire bg = {.c = b, .key = "redis:expire", .wait_ms = 30000};
    bg_acquire_main(&bg);
    struct cmdstats st = stats_read();
    long long attempts = st.evalsha + st.eval;
    print_message("remote waiter through a 600 ms lease that expires: %lld acquire attempts in "
                  "%lld ms (at most %lld)\n",
                  attempts, (long long)bg.took_ms, waiter_attempts_max(bg.took_ms));
    assert_int_equal(bg.rc, LOCK_OK);
    assert_true(rconn_now_ms() >= h.valid_until_ms);
    assert_true(attempts <= waiter_attempts_max(bg.took_ms));
    assert_int_equal(lock_release(b, &bg.h), LOCK_OK);
    assert_int_equal(lock_release(a, &h), LOCK_ERR_NOT_OWNER);
    lock_free(b);
}

/* Waits until someone is subscribed to channel (PUBSUB NUMSUB), or fails the test after 5 s. */
static void wait_subscriber(redisContext *raw, const char *channel) {
    for (int64_t end = rconn_now_ms() + 5000;; sleep_ms(1)) {
        redisReply *r = raw_cmd(raw, (const char *const[]){"PUBSUB", "NUMSUB", channel, NULL});
        int subscribed = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                         r->element[1]->type == REDIS_REPLY_INTEGER && r->element[1]->integer > 0;
        freeReplyObject(r);
        if (subscribed) return;
        assert_true(rconn_now_ms() < end);
    }
}

/* A foreign lease shorter than the 1 s recheck that used to be a waiter's longest nap: a waiter
 * that relied on pub/sub and the PTTL alone provably slept until this lease ran out. */
#define FOREIGN_TTL_MS 900
#define FOREIGN_TTL_STR "900"

/* A foreign holder (node-redlock, any plain SET NX PX client) releases with a plain DEL and
 * publishes nothing. The waiter, subscribed in vain, keeps polling at a short, backing-off,
 * capped interval, so it gets the key within a poll step of the DEL, long before the foreign
 * lease would have run out (a waiter that relied on pub/sub and the PTTL slept until then). */
static void test_lock_redis_foreign_holder_silent_release_waiter_polls(void **state) {
    (void)state;
    lock_client *b = client_for(g_redis.url, TIMEOUT_MS);
    redisContext *raw = raw_connect(g_redis.port);
    int64_t set_at = rconn_now_ms(); /* the foreign lease ends after set_at + FOREIGN_TTL_MS */
    raw_ok(raw, (const char *const[]){"SET", "redis:foreign:silent", "their-token", "NX", "PX",
                                      FOREIGN_TTL_STR, NULL});
    stats_reset();
    struct bg_acquire bg = {.c = b, .key = "redis:foreign:silent", .wait_ms = 5000};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, bg_acquire_main, &bg), 0);
    wait_subscriber(raw, "redis:foreign:silent:released");
    sleep_ms(100);
    assert_int_equal(raw_int(raw, (const char *const[]){"DEL", "redis:foreign:silent", NULL}), 1);
    pthread_join(th, NULL);
    int64_t got_at = rconn_now_ms();
    struct cmdstats st = stats_read();
    long long attempts = st.evalsha + st.eval;
    print_message("foreign holder, silent release after ~100 ms: key taken %lld ms after the SET "
                  "(foreign ttl %d), %lld acquire attempts in %lld ms (at most %lld)\n",
                  (long long)(got_at - set_at), FOREIGN_TTL_MS, attempts, (long long)bg.took_ms,
                  waiter_attempts_max(bg.took_ms));
    assert_int_equal(bg.rc, LOCK_OK);
    assert_true(got_at < set_at + FOREIGN_TTL_MS); /* before the foreign lease could end */
    assert_int_equal(st.publish, 0);
    assert_int_equal(st.subscribe, 1);
    /* busy, busy once subscribed, the polls of ~100 ms (2, 4, 8, 16, 32, 50 ms), the success */
    assert_true(attempts <= waiter_attempts_max(bg.took_ms));
    assert_int_equal(lock_release(b, &bg.h), LOCK_OK);
    redisFree(raw);
    lock_free(b);
}

/* ---- several keys ---- */

/* A key held by someone else: the multi acquire writes nothing at all (no lock key, no fence
 * increment) on the other keys. */
static void test_lock_redis_multi_one_held_elsewhere_nothing_written(void **state) {
    lock_client *c = *state;
    redisContext *raw = raw_connect(g_redis.port);
    raw_ok(raw, (const char *const[]){"SET", "redis:m:b", "someone", "PX", "60000", NULL});
    const char *keys[] = {"redis:m:a", "redis:m:b", "redis:m:c"};
    lock_handle hs[3];
    lock_handle once;
    assert_int_equal(lock_acquire(c, "redis:m:before", 10000, 0, &once), LOCK_OK);
    assert_int_equal(lock_acquire_multi(c, keys, 3, 10000, 0, hs), LOCK_ERR_BUSY);
    assert_int_equal(lock_acquire_multi(c, keys, 3, 10000, 150, hs), LOCK_ERR_BUSY);
    static const char *const absent[] = {"redis:m:a", "redis:m:c"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
        assert_int_equal(raw_int(raw, (const char *const[]){"EXISTS", absent[i], NULL}), 0);
    redisReply *r = raw_cmd(raw, (const char *const[]){"GET", "lock:fences", NULL});
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_int_equal(strtoull(r->str, NULL, 10), once.fence); /* no fence was drawn since */
    freeReplyObject(r);
    assert_int_equal(lock_release(c, &once), LOCK_OK);
    assert_int_equal(raw_int(raw, (const char *const[]){"DEL", "redis:m:b", NULL}), 1);
    redisFree(raw);
}

/* Reads a fence counter key as a number (0 when absent). */
static unsigned long long fence_counter(redisContext *raw, const char *key) {
    redisReply *r = raw_cmd(raw, (const char *const[]){"GET", key, NULL});
    unsigned long long v = r->type == REDIS_REPLY_STRING ? strtoull(r->str, NULL, 10) : 0;
    freeReplyObject(r);
    return v;
}

/* Keys with a hash tag "{t}" advance their tag's own counter "lock:fences:{t}" (the key's
 * Redis Cluster slot), the others "lock:fences"; an empty tag "{}" is no tag. Fences still
 * grow per key, and a multi acquire over keys of one tag draws one fence from that counter. */
static void test_lock_redis_tagged_keys_count_in_their_tag(void **state) {
    lock_client *c = *state;
    redisContext *raw = raw_connect(g_redis.port);
    lock_handle a, b, u, e, hs[2];
    assert_int_equal(lock_acquire(c, "tag:{eu-1}:a", 10000, 0, &a), LOCK_OK);
    unsigned long long plain = fence_counter(raw, "lock:fences");
    assert_int_equal(fence_counter(raw, "lock:fences:{eu-1}"), a.fence);
    assert_int_equal(lock_acquire(c, "tag:{eu-1}:b", 10000, 0, &b), LOCK_OK);
    assert_true(b.fence > a.fence);
    assert_int_equal(fence_counter(raw, "lock:fences:{eu-1}"), b.fence);
    assert_int_equal(fence_counter(raw, "lock:fences"), plain); /* untouched by tagged keys */
    assert_int_equal(lock_acquire(c, "tag:untagged", 10000, 0, &u), LOCK_OK);
    assert_int_equal(fence_counter(raw, "lock:fences"), u.fence);
    assert_int_equal(lock_acquire(c, "tag:{}:empty", 10000, 0, &e), LOCK_OK);
    assert_int_equal(fence_counter(raw, "lock:fences"), e.fence); /* "{}" is no tag */
    assert_int_equal(raw_int(raw, (const char *const[]){"EXISTS", "lock:fences:{}", NULL}), 0);
    const char *keys[] = {"tag:{eu-2}:x", "tag:{eu-2}:y"};
    assert_int_equal(lock_acquire_multi(c, keys, 2, 10000, 0, hs), LOCK_OK);
    assert_int_equal(hs[0].fence, hs[1].fence);
    assert_int_equal(fence_counter(raw, "lock:fences:{eu-2}"), hs[0].fence);
    lock_handle again;
    assert_int_equal(lock_release(c, &a), LOCK_OK);
    assert_int_equal(lock_acquire(c, "tag:{eu-1}:a", 10000, 0, &again), LOCK_OK);
    assert_true(again.fence > b.fence);
    assert_int_equal(lock_release(c, &again), LOCK_OK);
    assert_int_equal(lock_release(c, &b), LOCK_OK);
    assert_int_equal(lock_release(c, &u), LOCK_OK);
    assert_int_equal(lock_release(c, &e), LOCK_OK);
    assert_int_equal(lock_release_multi(c, hs, 2), LOCK_OK);
    lock_handle o;
    assert_int_equal(lock_acquire_owned(c, "tag:{eu-3}:o", "me", 10000, 0, &o), LOCK_OK);
    assert_int_equal(fence_counter(raw, "lock:fences:{eu-3}"), o.fence);
    assert_int_equal(lock_release(c, &o), LOCK_OK);
    redisFree(raw);
}

static void test_lock_redis_multi_two_clients_opposite_orders(void **state) {
    lock_client *a = *state;
    lock_client *b = client_for(g_redis.url, TIMEOUT_MS);
    lock_contract_multi_race(a, b);
    lock_free(b);
}

/* ---- watchdog ---- */

static void test_lock_redis_watchdog_other_client_never_gets_key(void **state) {
    lock_client *b = client_for(g_redis.url, TIMEOUT_MS);
    lock_contract_watchdog_two_clients(*state, b, 300);
    lock_free(b);
}

static void test_lock_redis_watchdog_max_hold_other_client_gets_key(void **state) {
    lock_client *b = client_for(g_redis.url, TIMEOUT_MS);
    lock_contract_watchdog_max_hold_two_clients(*state, b, 1000, 2000); /* a second of slack */
    lock_free(b);
}

/* Someone deletes the key under a watched lease: the next renewal is refused and the holder can
 * see it before committing. */
static void test_lock_redis_watchdog_key_deleted_lost(void **state) {
    lock_client *c = *state;
    lock_handle h;
    lock_watchdog *w = NULL;
    assert_int_equal(lock_acquire(c, "redis:wd:del", 300, 0, &h), LOCK_OK);
    assert_int_equal(lock_watchdog_start(c, &h, 300, 600000, &w), LOCK_OK);
    assert_int_equal(lock_watchdog_check(w, NULL), LOCK_OK);
    redisContext *raw = raw_connect(g_redis.port);
    assert_int_equal(raw_int(raw, (const char *const[]){"DEL", "redis:wd:del", NULL}), 1);
    redisFree(raw);
    int rc = LOCK_OK;
    for (int64_t end = rconn_now_ms() + 10000; rc == LOCK_OK && rconn_now_ms() < end;) {
        sleep_ms(10);
        rc = lock_watchdog_check(w, NULL);
    }
    assert_int_equal(rc, LOCK_ERR_LEASE_LOST);
    assert_non_null(strstr(lock_last_error(), "renewal")); /* the watchdog thread's reason */
    assert_int_equal(lock_watchdog_stop(w, &h), LOCK_ERR_LEASE_LOST);
    assert_int_equal(lock_release(c, &h), LOCK_ERR_NOT_OWNER);
}

/* ---- holders in child processes ---- */

/* A child holds the key with a watchdog: while it lives, nobody gets the key (5 x ttl of
 * zero-wait polls); after kill -9 the lease lapses within about one ttl. */
static void test_lock_redis_holder_killed_lease_lapses_within_ttl(void **state) {
    lock_client *c = *state;
    const char *urls[] = {g_redis.url};
    lock_child ch;
    assert_int_equal(lock_child_start(&ch, g_self, urls, 1, "redis:child:wd", 300, 1), 0);
    lock_handle h;
    int got = 0;
    for (int64_t end = rconn_now_ms() + 5 * 300; rconn_now_ms() < end;) {
        if (lock_acquire(c, "redis:child:wd", 10000, 0, &h) == LOCK_OK) {
            got++;
            (void)lock_release(c, &h);
        }
        sleep_ms(20);
    }
    lock_child_signal(&ch, SIGKILL);
    int64_t t0 = rconn_now_ms();
    int rc = lock_acquire(c, "redis:child:wd", 10000, 300 + 5000, &h);
    int64_t took = rconn_now_ms() - t0;
    lock_child_end(&ch);
    print_message("holder killed: key taken %lld ms later (ttl 300)\n", (long long)took);
    assert_int_equal(got, 0);
    assert_int_equal(rc, LOCK_OK);
    assert_true(h.fence > ch.h.fence);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
}

/* A child holder is stopped past its lease; the parent takes the key; the child, resumed,
 * cannot release it (NOT_OWNER) and frees nothing. */
static void test_lock_redis_holder_stopped_past_lease_release_not_owner(void **state) {
    lock_client *c = *state;
    const char *urls[] = {g_redis.url};
    lock_child ch;
    assert_int_equal(lock_child_start(&ch, g_self, urls, 1, "redis:child:stop", 300, 0), 0);
    lock_child_signal(&ch, SIGSTOP);
    lock_handle h;
    int rc = lock_acquire(c, "redis:child:stop", 10000, 5000, &h);
    lock_child_signal(&ch, SIGCONT);
    int child_rc = lock_child_release(&ch);
    lock_child_end(&ch);
    assert_int_equal(rc, LOCK_OK);
    assert_true(rconn_now_ms() >= ch.h.valid_until_ms);
    assert_true(h.fence > ch.h.fence);
    assert_int_equal(child_rc, LOCK_ERR_NOT_OWNER);
    /* the key is still ours, untouched */
    redisContext *raw = raw_connect(g_redis.port);
    redisReply *r = raw_cmd(raw, (const char *const[]){"GET", "redis:child:stop", NULL});
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, h.token);
    freeReplyObject(r);
    redisFree(raw);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
}

static void test_lock_redis_new_no_server_backend_promptly(void **state) {
    (void)state;
    char url[96];
    int port = th_free_port();
    assert_true(port > 0);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", port);
    lock_client *c = client_for(url, TIMEOUT_MS); /* nothing listens: still constructed */
    lock_handle h;
    int64_t t0 = rconn_now_ms();
    assert_int_equal(lock_acquire(c, "redis:noserver", 1000, 5000, &h), LOCK_ERR_BACKEND);
    assert_true(rconn_now_ms() - t0 < 2000);
    lock_free(c);
}

/* A failure says why, as hiredis said it, with the server's address: nothing listens, so the
 * connection is refused. The reason is the calling thread's: another thread's calls neither
 * see nor change it. */
static void *other_thread_reason(void *arg) {
    lock_client *c = arg;
    lock_handle h;
    int fresh = strcmp(lock_last_error(), "") == 0;
    int invalid = lock_acquire(c, "", 1000, 0, &h) == LOCK_ERR_INVALID &&
                  strcmp(lock_last_error(), lock_strerror(LOCK_ERR_INVALID)) == 0;
    return (void *)(intptr_t)(fresh && invalid);
}

static void test_lock_redis_no_server_reason_names_address_and_refusal(void **state) {
    (void)state;
    char url[96], at[32];
    int port = th_free_port();
    assert_true(port > 0);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", port);
    snprintf(at, sizeof at, "127.0.0.1:%d: ", port);
    lock_client *c = client_for(url, TIMEOUT_MS);
    lock_handle h;
    assert_int_equal(lock_acquire(c, "redis:noserver", 1000, 0, &h), LOCK_ERR_BACKEND);
    char why[512];
    snprintf(why, sizeof why, "%s", lock_last_error());
    print_message("reason: %s\n", why);
    assert_true(strncmp(why, "lock store unavailable: ", 24) == 0);
    assert_non_null(strstr(why, at));
    assert_non_null(strstr(why, "refused"));

    pthread_t th;
    void *other_ok = NULL;
    assert_int_equal(pthread_create(&th, NULL, other_thread_reason, c), 0);
    pthread_join(th, &other_ok);
    assert_non_null(other_ok);
    assert_string_equal(lock_last_error(), why);

    /* a call that succeeds leaves the last failure's reason alone */
    lock_client *local = lock_local_new(NULL);
    assert_non_null(local);
    assert_int_equal(lock_acquire(local, "k", 1000, 0, &h), LOCK_OK);
    assert_int_equal(lock_release(local, &h), LOCK_OK);
    assert_string_equal(lock_last_error(), why);
    lock_free(local);
    lock_free(c);
}

static void test_lock_redis_hung_server_backend_then_recovers(void **state) {
    (void)state;
    lock_client *c = client_for(g_redis.url, 300);
    lock_handle h;
    assert_int_equal(lock_acquire(c, "redis:warm", 10000, 0, &h), LOCK_OK); /* a pooled conn */
    assert_int_equal(lock_release(c, &h), LOCK_OK);

    th_redis_signal(&g_redis, SIGSTOP);
    int64_t t0 = rconn_now_ms();
    int rc = lock_acquire(c, "redis:hung", 200, 5000, &h);
    int64_t spent = rconn_now_ms() - t0;
    int rc2 = lock_acquire(c, "redis:hung", 200, 5000, &h); /* a new connection times out too */
    char why[512];
    snprintf(why, sizeof why, "%s", lock_last_error());
    th_redis_signal(&g_redis, SIGCONT);
    assert_int_equal(rc, LOCK_ERR_BACKEND);
    assert_int_equal(rc2, LOCK_ERR_BACKEND);
    print_message("reason: %s\n", why);
    assert_non_null(strstr(why, "no answer"));
    assert_non_null(strstr(why, "within 300 ms"));
    assert_true(spent < 2000);

    /* the server may still run the timed-out SET later: that ghost lease expires by itself */
    assert_int_equal(lock_acquire(c, "redis:hung", 10000, 5000, &h), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    lock_free(c);
}

/* Threads that hold keys at the same moment, so the pool ends up with several idle
 * connections (all of which the kill below makes dead). */
static void *touch_key(void *arg) {
    lock_client *c = arg;
    char key[32];
    lock_handle h;
    snprintf(key, sizeof key, "redis:down:%p", (void *)&h);
    intptr_t failures = 0;
    for (int i = 0; i < 20; i++)
        if (lock_acquire(c, key, 1000, 0, &h) != LOCK_OK || lock_release(c, &h) != LOCK_OK)
            failures++;
    return (void *)failures;
}

/* Kills the server: keep it the last test of its group. */
static void test_lock_redis_server_down_backend_then_recovers(void **state) {
    lock_client *c = *state;
    lock_handle h, old;
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, touch_key, c), 0);
    for (int i = 0; i < 4; i++) {
        void *failures = NULL;
        pthread_join(th[i], &failures);
        assert_null(failures);
    }
    assert_int_equal(lock_acquire(c, "redis:down:old", 60000, 0, &old), LOCK_OK);
    redisContext *raw = raw_connect(g_redis.port);
    redisReply *r = raw_cmd(raw, (const char *const[]){"CLIENT", "LIST", NULL});
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    int conns = 0;
    for (const char *p = r->str; (p = strstr(p, "id=")) != NULL; p++)
        conns++;
    freeReplyObject(r);
    redisFree(raw);
    print_message("server had %d connections before the kill\n", conns);

    th_redis_signal(&g_redis, SIGKILL);
    int64_t t0 = rconn_now_ms();
    assert_int_equal(lock_acquire(c, "redis:down", 1000, 5000, &h), LOCK_ERR_BACKEND);
    assert_true(rconn_now_ms() - t0 < 2000);

    /* one failure is enough: the next call on the same client reaches the new server */
    assert_int_equal(th_redis_restart(&g_redis), 0);
    assert_int_equal(lock_acquire(c, "redis:down", 1000, 0, &h), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    /* the restarted server (no persistence) forgot the old lease */
    assert_int_equal(lock_release(c, &old), LOCK_ERR_NOT_OWNER);
    assert_int_equal(lock_extend(c, &old, 1000), LOCK_ERR_LEASE_LOST);

    /* down again, with no connection left: refused at once, for every operation */
    th_redis_signal(&g_redis, SIGKILL);
    t0 = rconn_now_ms();
    assert_int_equal(lock_acquire(c, "redis:down", 1000, 5000, &h), LOCK_ERR_BACKEND);
    assert_int_equal(lock_acquire(c, "redis:down", 1000, 5000, &h), LOCK_ERR_BACKEND);
    assert_int_equal(lock_release(c, &old), LOCK_ERR_BACKEND);
    assert_non_null(strstr(lock_last_error(), "refused"));
    assert_int_equal(lock_extend(c, &old, 1000), LOCK_ERR_BACKEND);
    assert_non_null(strstr(lock_last_error(), "refused"));
    assert_true(rconn_now_ms() - t0 < 2000);
    assert_int_equal(th_redis_restart(&g_redis), 0);
    assert_int_equal(lock_acquire(c, "redis:down", 1000, 0, &h), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
}

/* ---- group "lock_redis_auth" ---- */

static int auth_setup(void **state) {
    (void)state;
    memset(&g_auth, 0, sizeof g_auth);
    /* th_redis_start() waits for a PING answer, which --requirepass would refuse (NOAUTH),
     * so the password is set once the server is up. */
    if (th_redis_start(&g_auth) != 0) {
        th_redis_stop(&g_auth);
        return -1;
    }
    struct timeval tv = {2, 0};
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", g_auth.port, tv);
    if (ctx == NULL || ctx->err) goto fail;
    static const char *const cmds[][8] = {
        {"ACL", "SETUSER", "gm", "on", ">pw", "~*", "+@all", NULL},
        {"ACL", "SETUSER", "gm2", "on", ">p@ss:w/rd", "~*", "+@all", NULL},
        {"ACL", "SETUSER", "noeval", "on", ">pw", "~*", "+@all", NULL},
        {"ACL", "SETUSER", "noeval", "-evalsha", "-eval", NULL},
        {"CONFIG", "SET", "requirepass", "secret", NULL},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        int argc = 0;
        size_t lens[8];
        while (cmds[i][argc] != NULL) {
            lens[argc] = strlen(cmds[i][argc]);
            argc++;
        }
        redisReply *r = redisCommandArgv(ctx, argc, (const char **)cmds[i], lens);
        int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        if (r != NULL) freeReplyObject(r);
        if (!ok) goto fail;
    }
    redisFree(ctx);
    return 0;
fail:
    if (ctx != NULL) redisFree(ctx);
    th_redis_stop(&g_auth);
    return -1;
}

static int auth_teardown(void **state) {
    (void)state;
    th_redis_stop(&g_auth);
    return 0;
}

/* Acquires and releases one key through url; returns the acquire's code. */
static int try_url(const char *fmt) {
    char url[160];
    snprintf(url, sizeof url, fmt, g_auth.port);
    lock_client *c = client_for(url, TIMEOUT_MS);
    lock_handle h;
    int rc = lock_acquire(c, "auth:key", 10000, 0, &h);
    if (rc == LOCK_OK) assert_int_equal(lock_release(c, &h), LOCK_OK);
    lock_free(c);
    return rc;
}

static void test_lock_redis_requirepass_right_password_ok(void **state) {
    (void)state;
    assert_int_equal(try_url("redis://:secret@127.0.0.1:%d/0"), LOCK_OK);
}

static void test_lock_redis_requirepass_wrong_or_no_password_backend(void **state) {
    (void)state;
    assert_int_equal(try_url("redis://:wrong@127.0.0.1:%d/0"), LOCK_ERR_BACKEND);
    assert_int_equal(try_url("redis://127.0.0.1:%d/0"), LOCK_ERR_BACKEND);
}

static void test_lock_redis_acl_user_ok(void **state) {
    (void)state;
    assert_int_equal(try_url("redis://gm:pw@127.0.0.1:%d/0"), LOCK_OK);
    /* a password with '@', ':' and '/' travels percent-encoded */
    assert_int_equal(try_url("redis://gm2:p%%40ss%%3Aw%%2Frd@127.0.0.1:%d/0"), LOCK_OK);
}

static void test_lock_redis_acl_wrong_password_backend(void **state) {
    (void)state;
    assert_int_equal(try_url("redis://gm:bad@127.0.0.1:%d/0"), LOCK_ERR_BACKEND);
    assert_int_equal(try_url("redis://nobody:pw@127.0.0.1:%d/0"), LOCK_ERR_BACKEND);
}

/* User gm has no channel rights (Redis 7 starts users with resetchannels): releases still work
 * (the PUBLISH is a pcall) and a waiter falls back to polling with backoff. */
static void test_lock_redis_acl_user_without_channels_waiter_still_acquires(void **state) {
    (void)state;
    char url[160];
    snprintf(url, sizeof url, "redis://gm:pw@127.0.0.1:%d/0", g_auth.port);
    lock_client *a = client_for(url, TIMEOUT_MS);
    lock_client *b = client_for(url, TIMEOUT_MS);
    lock_handle h;
    assert_int_equal(lock_acquire(a, "auth:nochan", 60000, 0, &h), LOCK_OK);
    struct bg_acquire bg = {.c = b, .key = "auth:nochan", .wait_ms = 30000};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, bg_acquire_main, &bg), 0);
    sleep_ms(150);
    assert_int_equal(lock_release(a, &h), LOCK_OK);
    pthread_join(th, NULL);
    assert_int_equal(bg.rc, LOCK_OK);
    assert_int_equal(lock_release(b, &bg.h), LOCK_OK);
    lock_free(a);
    lock_free(b);
}

static void test_lock_redis_acl_user_without_eval_backend(void **state) {
    (void)state;
    assert_int_equal(try_url("redis://noeval:pw@127.0.0.1:%d/0"), LOCK_ERR_BACKEND);
}

/* Asserts that the calling thread's last reason holds want (and names the server). */
static void assert_reason_has(const char *want) {
    char at[32];
    snprintf(at, sizeof at, "127.0.0.1:%d: ", g_auth.port);
    const char *why = lock_last_error();
    print_message("reason: %s\n", why);
    assert_non_null(strstr(why, at));
    assert_non_null(strstr(why, want));
}

/* The server's error replies reach the caller: a refused AUTH (a wrong password, none at all)
 * and a script refused by the ACL, each with Redis's own words. */
static void test_lock_redis_refusals_reason_carries_server_error(void **state) {
    (void)state;
    assert_int_equal(try_url("redis://gm:bad@127.0.0.1:%d/0"), LOCK_ERR_BACKEND);
    assert_reason_has("AUTH/SELECT: WRONGPASS");
    assert_int_equal(try_url("redis://127.0.0.1:%d/0"), LOCK_ERR_BACKEND);
    assert_reason_has("NOAUTH");
    assert_int_equal(try_url("redis://noeval:pw@127.0.0.1:%d/0"), LOCK_ERR_BACKEND);
    assert_reason_has("script: NOPERM");
}

int main(int argc, char **argv) {
    int child = lock_child_main(argc, argv);
    if (child >= 0) return child;
    g_self = argv[0];
    signal(SIGPIPE, SIG_IGN); /* a killed server must not kill the test */
    const struct CMUnitTest redis[] = {
        LOCK_CONTRACT_TESTS,
        cmocka_unit_test(test_lock_redis_name_is_redis),
        cmocka_unit_test(test_lock_redis_acquire_key_pttl_within_ttl),
        cmocka_unit_test(test_lock_redis_other_holder_key_busy),
        cmocka_unit_test(test_lock_redis_own_lease_given_up_taken_over_others_waited),
        cmocka_unit_test(test_lock_redis_two_clients_mutually_exclusive),
        cmocka_unit_test(test_lock_redis_db_in_url_selected),
        cmocka_unit_test(test_lock_redis_script_flush_falls_back_to_eval),
        cmocka_unit_test(test_lock_redis_owned_key_holds_token_hash_holds_owner),
        cmocka_unit_test(test_lock_redis_owned_key_freed_by_foreign_client_stale_hash_ignored),
        cmocka_unit_test(test_lock_redis_owned_other_client_same_owner_joins),
        cmocka_unit_test(test_lock_redis_16_threads_one_client_evalsha_within_3x_acquisitions),
        cmocka_unit_test(test_lock_redis_16_threads_four_clients_attempts_bounded),
        cmocka_unit_test(test_lock_redis_release_without_waiter_publishes_nothing),
        cmocka_unit_test(test_lock_redis_remote_waiter_woken_by_release_few_attempts),
        cmocka_unit_test(test_lock_redis_remote_waiter_woken_at_expiry_few_attempts),
        cmocka_unit_test(test_lock_redis_foreign_holder_silent_release_waiter_polls),
        cmocka_unit_test(test_lock_redis_extend_answered_after_new_ttl_lease_lost),
        cmocka_unit_test(test_lock_redis_acquire_answered_after_ttl_undone_busy_or_retried),
        cmocka_unit_test(test_lock_redis_multi_one_held_elsewhere_nothing_written),
        cmocka_unit_test(test_lock_redis_tagged_keys_count_in_their_tag),
        cmocka_unit_test(test_lock_redis_multi_two_clients_opposite_orders),
        cmocka_unit_test(test_lock_redis_watchdog_other_client_never_gets_key),
        cmocka_unit_test(test_lock_redis_watchdog_max_hold_other_client_gets_key),
        cmocka_unit_test(test_lock_redis_watchdog_key_deleted_lost),
        cmocka_unit_test(test_lock_redis_holder_killed_lease_lapses_within_ttl),
        cmocka_unit_test(test_lock_redis_holder_stopped_past_lease_release_not_owner),
        cmocka_unit_test(test_lock_redis_new_no_server_backend_promptly),
        cmocka_unit_test(test_lock_redis_no_server_reason_names_address_and_refusal),
        cmocka_unit_test(test_lock_redis_hung_server_backend_then_recovers),
        cmocka_unit_test(test_lock_redis_server_down_backend_then_recovers),
    };
    const struct CMUnitTest auth[] = {
        cmocka_unit_test(test_lock_redis_requirepass_right_password_ok),
        cmocka_unit_test(test_lock_redis_requirepass_wrong_or_no_password_backend),
        cmocka_unit_test(test_lock_redis_acl_user_ok),
        cmocka_unit_test(test_lock_redis_acl_wrong_password_backend),
        cmocka_unit_test(test_lock_redis_acl_user_without_eval_backend),
        cmocka_unit_test(test_lock_redis_refusals_reason_carries_server_error),
        cmocka_unit_test(test_lock_redis_acl_user_without_channels_waiter_still_acquires),
    };
    int failed = cmocka_run_group_tests_name("lock_redis", redis, redis_setup, redis_teardown);
    failed += cmocka_run_group_tests_name("lock_redis_auth", auth, auth_setup, auth_teardown);
    return failed == 0 ? 0 : 1;
}
