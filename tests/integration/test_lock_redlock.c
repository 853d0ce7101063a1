/* test_lock_redlock.c - the lock contract and Redlock's fault tolerance over 3 real masters.
 *
 * Group "lock_redlock" starts three throwaway redis-servers
 * (tests/helpers/redis_proc.h), runs tests/helpers/lock_contract.c against
 * lock_redlock_new() over them, then checks what only Redlock has: the lease
 * on every master, the fence as the maximum over the majority (and the
 * lagging counters raised), two clients racing, watchdogs, holders in child
 * processes that are stopped or killed, an extend whose validity is gone
 * (LEASE_LOST, not BACKEND), and a foreign holder that releases without
 * publishing (the waiter polls). Group "lock_redlock_faults"
 * injects master failures: one killed (still works), one hung (still
 * acquires within the budget thanks to the per-node timeout), two killed (a
 * clear LOCK_ERR_BACKEND within the budget and nothing left on the survivor),
 * all killed (at once), and everything back (works again).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"
#include "rconn/rconn.h"
#include "tests/helpers/lock_contract.h"
#include "tests/helpers/redis_proc.h"

#define MASTERS 3
#define TIMEOUT_MS 500 /* per master; Redlock waits at most min(this, max(5, ttl/10)) */
#define SLACK_MS 3000  /* generous: sanity bounds only, never timing targets */

static th_redis g_m[MASTERS];
static const char *g_self; /* argv[0], to start holders in child processes */

/* ---- helpers ---- */

static redisContext *raw_connect(int port) {
    struct timeval tv = {2, 0};
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", port, tv);
    assert_non_null(ctx);
    assert_int_equal(ctx->err, 0);
    assert_int_equal(redisSetTimeout(ctx, tv), REDIS_OK);
    return ctx;
}

/* Runs a command on master i given as a NULL-terminated list; returns a new reply. */
static redisReply *raw_cmd(int i, const char *const *argv) {
    int argc = 0;
    size_t lens[16];
    while (argv[argc] != NULL) {
        lens[argc] = strlen(argv[argc]);
        argc++;
    }
    redisContext *ctx = raw_connect(g_m[i].port);
    redisReply *r = redisCommandArgv(ctx, argc, (const char **)argv, lens);
    redisFree(ctx);
    assert_non_null(r);
    return r;
}

static long long raw_int(int i, const char *const *argv) {
    redisReply *r = raw_cmd(i, argv);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

/* Returns master i's string value of key as a number, or -1 when absent. */
static long long raw_get_num(int i, const char *key) {
    redisReply *r = raw_cmd(i, (const char *const[]){"GET", key, NULL});
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    return v;
}

static lock_client *redlock_client(void) {
    rconn_addr a[MASTERS];
    for (int i = 0; i < MASTERS; i++)
        assert_int_equal(rconn_addr_parse(g_m[i].url, &a[i]), RCONN_OK);
    int err = -100;
    lock_client *c = lock_redlock_new(a, MASTERS, TIMEOUT_MS, &err);
    assert_non_null(c);
    assert_int_equal(err, LOCK_OK);
    return c;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static int masters_start(void) {
    memset(g_m, 0, sizeof g_m);
    for (int i = 0; i < MASTERS; i++)
        if (th_redis_start(&g_m[i]) != 0) return -1;
    return 0;
}

static void masters_stop(void) {
    for (int i = 0; i < MASTERS; i++)
        th_redis_stop(&g_m[i]);
}

static int group_setup(void **state) {
    if (masters_start() != 0) {
        masters_stop();
        return -1;
    }
    rconn_addr a[MASTERS];
    for (int i = 0; i < MASTERS; i++)
        if (rconn_addr_parse(g_m[i].url, &a[i]) != RCONN_OK) return -1;
    *state = lock_redlock_new(a, MASTERS, TIMEOUT_MS, NULL);
    if (*state == NULL) {
        masters_stop();
        return -1;
    }
    return 0;
}

static int group_teardown(void **state) {
    lock_free(*state);
    *state = NULL;
    masters_stop();
    return 0;
}

/* ---- group "lock_redlock" ---- */

static void test_lock_redlock_name_is_redlock(void **state) {
    assert_string_equal(lock_name(*state), "redlock");
}

/* The lease is the same key with the same token on every master; release removes them all. */
static void test_lock_redlock_acquire_key_on_every_master(void **state) {
    lock_client *c = *state;
    lock_handle h;
    int64_t t0 = rconn_now_ms();
    assert_int_equal(lock_acquire(c, "rl:every", 5000, 0, &h), LOCK_OK);
    /* validity: ttl less the round and the drift allowance (5000/100 + 2) */
    assert_true(h.valid_until_ms <= rconn_now_ms() + 5000 - 52);
    assert_true(h.valid_until_ms >= t0 + 5000 - 52);
    for (int i = 0; i < MASTERS; i++) {
        redisReply *r = raw_cmd(i, (const char *const[]){"GET", "rl:every", NULL});
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_string_equal(r->str, h.token);
        freeReplyObject(r);
        long long pttl = raw_int(i, (const char *const[]){"PTTL", "rl:every", NULL});
        assert_true(pttl > 0 && pttl <= 5000);
    }
    assert_int_equal(lock_extend(c, &h, 60000), LOCK_OK);
    for (int i = 0; i < MASTERS; i++)
        assert_true(raw_int(i, (const char *const[]){"PTTL", "rl:every", NULL}) > 5000);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    for (int i = 0; i < MASTERS; i++)
        assert_int_equal(raw_int(i, (const char *const[]){"EXISTS", "rl:every", NULL}), 0);
}

/* One master's fence counter is ahead: the handle's fence is the maximum, and the other
 * masters' counters are raised to it, so the next majority continues from there. */
static void test_lock_redlock_fence_max_over_majority_and_raised(void **state) {
    lock_client *c = *state;
    redisReply *r =
        raw_cmd(0, (const char *const[]){"SET", "lock:fences", "5000000000000000", NULL});
    freeReplyObject(r);
    lock_handle h;
    assert_int_equal(lock_acquire(c, "rl:fence", 10000, 0, &h), LOCK_OK);
    assert_true(h.fence > 5000000000000000ULL);
    for (int i = 0; i < MASTERS; i++)
        assert_int_equal(raw_get_num(i, "lock:fences"), (long long)h.fence);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    lock_handle h2;
    assert_int_equal(lock_acquire(c, "rl:fence", 10000, 0, &h2), LOCK_OK);
    assert_true(h2.fence > h.fence);
    assert_int_equal(lock_release(c, &h2), LOCK_OK);
}

/* A stale lease on one master (a leftover of someone's failed round) does not stop a majority;
 * and a foreign lease on two masters does. */
static void test_lock_redlock_minority_foreign_lease_still_acquires(void **state) {
    lock_client *c = *state;
    redisReply *r = raw_cmd(1, (const char *const[]){"SET", "rl:stale", "x", "PX", "60000", NULL});
    freeReplyObject(r);
    lock_handle h;
    assert_int_equal(lock_acquire(c, "rl:stale", 10000, 0, &h), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    r = raw_cmd(2, (const char *const[]){"SET", "rl:stale", "x", "PX", "60000", NULL});
    freeReplyObject(r);
    assert_int_equal(lock_acquire(c, "rl:stale", 10000, 200, &h), LOCK_ERR_BUSY);
    /* the failed attempts left nothing on master 0 */
    assert_int_equal(raw_int(0, (const char *const[]){"EXISTS", "rl:stale", NULL}), 0);
}

#define TRIES 5 /* rounds whose 5 ms per-master wait a busy machine may overrun */

/* Returns how many masters hold key. */
static int masters_holding(const char *key) {
    int n = 0;
    for (int i = 0; i < MASTERS; i++)
        n += (int)raw_int(i, (const char *const[]){"EXISTS", key, NULL});
    return n;
}

/* A lease of 2 ms is no longer than the drift allowance (2/100 + 2 ms): it has no validity even
 * when every master applies it at once. Extending to it is a lapsed lease (LEASE_LOST), not a
 * store failure, and acquiring it is BUSY (the grants are given back); the masters are fine. */
static void test_lock_redlock_extend_no_validity_left_lease_lost(void **state) {
    lock_client *c = *state;
    lock_handle h, before;
    int rc = -100;
    /* A 2 ms lease waits at most 5 ms per master: on a busy machine two slow answers make a
     * round BACKEND, rightly. Up to TRIES rounds, each on a fresh lease; the old verdict
     * answered BACKEND to every one of them. */
    for (int i = 0; i < TRIES && rc != LOCK_ERR_LEASE_LOST; i++) {
        if (i > 0) sleep_ms(20);
        assert_int_equal(lock_acquire(c, "rl:novalid", 10000, 5000, &h), LOCK_OK);
        before = h;
        rc = lock_extend(c, &h, 2);
        if (rc != LOCK_ERR_LEASE_LOST) assert_int_equal(rc, LOCK_ERR_BACKEND);
        assert_memory_equal(&h, &before, sizeof h);
        (void)lock_release(c, &h);
    }
    assert_int_equal(rc, LOCK_ERR_LEASE_LOST);
    sleep_ms(20);
    assert_int_equal(masters_holding("rl:novalid"), 0); /* the masters applied the 2 ms */

    lock_handle h2;
    rc = -100;
    for (int i = 0; i < TRIES && rc != LOCK_ERR_BUSY; i++) {
        rc = lock_acquire(c, "rl:novalid", 2, 0, &h2);
        if (rc != LOCK_ERR_BUSY) assert_int_equal(rc, LOCK_ERR_BACKEND);
    }
    assert_int_equal(rc, LOCK_ERR_BUSY); /* granted with no validity: given back */
    sleep_ms(20);
    assert_int_equal(masters_holding("rl:novalid"), 0);
    assert_int_equal(lock_acquire(c, "rl:novalid", 10000, 0, &h2), LOCK_OK);
    assert_true(h2.fence > h.fence);
    assert_int_equal(lock_release(c, &h2), LOCK_OK);
}

struct bg_acquire {
    lock_client *c;
    const char *key;
    lock_handle h;
    int rc;
};

static void *bg_acquire_main(void *arg) {
    struct bg_acquire *b = arg;
    b->rc = lock_acquire(b->c, b->key, 10000, 5000, &b->h);
    return NULL;
}

/* A foreign lease shorter than the 1 s recheck that used to be a waiter's longest nap: a waiter
 * that relied on pub/sub and the PTTL alone provably slept until this lease ran out. */
#define FOREIGN_TTL_MS 900
#define FOREIGN_TTL_STR "900"

/* A foreign Redlock client (node-redlock: SET NX PX on every master, a plain compare-and-delete
 * that publishes nothing) holds the key and lets go after ~100 ms. The waiter, subscribed on
 * every master in vain, polls as well and gets the key before the foreign lease would end. */
static void test_lock_redlock_foreign_holder_silent_release_waiter_polls(void **state) {
    lock_client *c = *state;
    int64_t set_at = rconn_now_ms();
    for (int i = 0; i < MASTERS; i++) {
        redisReply *r = raw_cmd(i, (const char *const[]){"SET", "rl:foreign", "theirs", "NX", "PX",
                                                         FOREIGN_TTL_STR, NULL});
        assert_int_equal(r->type, REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    struct bg_acquire bg = {.c = c, .key = "rl:foreign", .rc = -100};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, bg_acquire_main, &bg), 0);
    for (int64_t end = rconn_now_ms() + 5000;; sleep_ms(1)) { /* until it listens */
        redisReply *r =
            raw_cmd(0, (const char *const[]){"PUBSUB", "NUMSUB", "rl:foreign:released", NULL});
        int listening = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                        r->element[1]->type == REDIS_REPLY_INTEGER && r->element[1]->integer > 0;
        freeReplyObject(r);
        if (listening) break;
        assert_true(rconn_now_ms() < end);
    }
    sleep_ms(100);
    for (int i = 0; i < MASTERS; i++)
        assert_int_equal(raw_int(i, (const char *const[]){"DEL", "rl:foreign", NULL}), 1);
    pthread_join(th, NULL);
    int64_t got_at = rconn_now_ms();
    print_message("redlock foreign holder, silent release: key taken %lld ms after the SET "
                  "(foreign ttl %d)\n",
                  (long long)(got_at - set_at), FOREIGN_TTL_MS);
    assert_int_equal(bg.rc, LOCK_OK);
    assert_true(got_at < set_at + FOREIGN_TTL_MS); /* before the foreign lease could end */
    assert_int_equal(lock_release(c, &bg.h), LOCK_OK);
}

static void test_lock_redlock_multi_two_clients_opposite_orders(void **state) {
    lock_client *b = redlock_client();
    lock_contract_multi_race(*state, b);
    lock_free(b);
}

static void test_lock_redlock_owned_other_client_same_owner_joins(void **state) {
    lock_client *b = redlock_client();
    lock_contract_owned_two_clients(*state, b);
    lock_free(b);
}

/* Returns master i's field of hash key as a number, or -1 when absent. */
static long long raw_hget_num(int i, const char *key, const char *field) {
    redisReply *r = raw_cmd(i, (const char *const[]){"HGET", key, field, NULL});
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    return v;
}

/* A master that lost a reentrant lease (restarted empty; here its keys are deleted) grants a
 * new lease to the owner's next acquisition; the majority counts a hold on the old one, which
 * wins: the handle has the old token and fence, and the stray new lease is undone on that
 * master. The two releases free the other two. */
static void test_lock_redlock_owned_master_lost_lease_reentry_undoes_stray(void **state) {
    lock_client *c = *state;
    const char *key = "rl:own:lost", *okey = "rl:own:lost:owner";
    lock_handle h1, h2;
    assert_int_equal(lock_acquire_owned(c, key, "req-1", 60000, 0, &h1), LOCK_OK);
    assert_int_equal(masters_holding(key), MASTERS);
    assert_int_equal(raw_int(0, (const char *const[]){"DEL", key, okey, NULL}), 2);
    assert_int_equal(lock_acquire_owned(c, key, "req-1", 60000, 0, &h2), LOCK_OK);
    assert_string_equal(h2.token, h1.token);
    assert_true(h2.fence == h1.fence);
    assert_int_equal(h2.holds, 2);
    assert_int_equal(raw_int(0, (const char *const[]){"EXISTS", key, okey, NULL}), 0);
    for (int i = 1; i < MASTERS; i++)
        assert_int_equal(raw_hget_num(i, okey, "holds"), 2);
    assert_int_equal(lock_release(c, &h2), LOCK_OK);
    assert_int_equal(masters_holding(key), MASTERS - 1);
    assert_int_equal(lock_release(c, &h1), LOCK_OK);
    assert_int_equal(masters_holding(key), 0);
}

/* Masters whose fence counters disagree: the reentrant lease's fence is their maximum, and the
 * fence every master keeps in the lease's hash is raised to it, so a re-acquisition answers
 * the same fence whichever majority it reaches. */
static void test_lock_redlock_owned_fences_differ_hashes_raised(void **state) {
    lock_client *c = *state;
    const char *key = "rl:own:fence", *okey = "rl:own:fence:owner";
    lock_handle h, again;
    long long top = raw_get_num(2, "lock:fences") + 1000000;
    char num[32];
    snprintf(num, sizeof num, "%lld", top);
    redisReply *r = raw_cmd(2, (const char *const[]){"SET", "lock:fences", num, NULL});
    freeReplyObject(r);
    assert_int_equal(lock_acquire_owned(c, key, "req-1", 60000, 0, &h), LOCK_OK);
    assert_true(h.fence == (uint64_t)top + 1);
    for (int i = 0; i < MASTERS; i++) {
        assert_int_equal(raw_hget_num(i, okey, "fence"), top + 1);
        assert_true(raw_get_num(i, "lock:fences") >= top + 1);
    }
    assert_int_equal(lock_acquire_owned(c, key, "req-1", 60000, 0, &again), LOCK_OK);
    assert_true(again.fence == h.fence);
    assert_int_equal(lock_release(c, &again), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    assert_int_equal(masters_holding(key), 0);
}

static void test_lock_redlock_watchdog_other_client_never_gets_key(void **state) {
    lock_client *b = redlock_client();
    lock_contract_watchdog_two_clients(*state, b, 300);
    lock_free(b);
}

static void test_lock_redlock_watchdog_max_hold_other_client_gets_key(void **state) {
    lock_client *b = redlock_client();
    lock_contract_watchdog_max_hold_two_clients(*state, b, 1000, 2000); /* a second of slack */
    lock_free(b);
}

static void urls_of_masters(const char *urls[MASTERS]) {
    for (int i = 0; i < MASTERS; i++)
        urls[i] = g_m[i].url;
}

static void test_lock_redlock_holder_killed_lease_lapses_within_ttl(void **state) {
    lock_client *c = *state;
    const char *urls[MASTERS];
    urls_of_masters(urls);
    lock_child ch;
    assert_int_equal(lock_child_start(&ch, g_self, urls, MASTERS, "rl:child:wd", 300, 1), 0);
    lock_handle h;
    int got = 0;
    for (int64_t end = rconn_now_ms() + 5 * 300; rconn_now_ms() < end;) {
        if (lock_acquire(c, "rl:child:wd", 10000, 0, &h) == LOCK_OK) {
            got++;
            (void)lock_release(c, &h);
        }
        sleep_ms(20);
    }
    lock_child_signal(&ch, SIGKILL);
    int64_t t0 = rconn_now_ms();
    int rc = lock_acquire(c, "rl:child:wd", 10000, 300 + 5000, &h);
    int64_t took = rconn_now_ms() - t0;
    lock_child_end(&ch);
    print_message("redlock holder killed: key taken %lld ms later (ttl 300)\n", (long long)took);
    assert_int_equal(got, 0);
    assert_int_equal(rc, LOCK_OK);
    assert_true(h.fence > ch.h.fence);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
}

static void test_lock_redlock_holder_stopped_past_lease_release_not_owner(void **state) {
    lock_client *c = *state;
    const char *urls[MASTERS];
    urls_of_masters(urls);
    lock_child ch;
    assert_int_equal(lock_child_start(&ch, g_self, urls, MASTERS, "rl:child:stop", 300, 0), 0);
    lock_child_signal(&ch, SIGSTOP);
    lock_handle h;
    int rc = lock_acquire(c, "rl:child:stop", 10000, 5000, &h);
    lock_child_signal(&ch, SIGCONT);
    int child_rc = lock_child_release(&ch);
    lock_child_end(&ch);
    assert_int_equal(rc, LOCK_OK);
    assert_true(rconn_now_ms() >= ch.h.valid_until_ms);
    assert_true(h.fence > ch.h.fence);
    assert_int_equal(child_rc, LOCK_ERR_NOT_OWNER);
    /* Freed nothing: our lease is still on a majority of the masters (a master
     * that answered late may not have it), and no master has anyone else's. */
    int ours = 0;
    for (int i = 0; i < MASTERS; i++) {
        redisReply *r = raw_cmd(i, (const char *const[]){"GET", "rl:child:stop", NULL});
        if (r->type == REDIS_REPLY_STRING) {
            assert_string_equal(r->str, h.token);
            ours++;
        } else {
            assert_int_equal(r->type, REDIS_REPLY_NIL);
        }
        freeReplyObject(r);
    }
    assert_true(ours >= MASTERS / 2 + 1);
    assert_int_equal(lock_extend(c, &h, 10000), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
}

/* ---- group "lock_redlock_faults" ---- */

/* One master killed: acquire, extend, release and exclusion between two clients still work. */
static void test_lock_redlock_one_master_killed_still_acquires(void **state) {
    lock_client *c = *state;
    th_redis_signal(&g_m[2], SIGKILL);
    lock_client *b = redlock_client();
    for (int i = 0; i < 20; i++) {
        lock_handle h, probe;
        assert_int_equal(lock_acquire(c, "rl:f:one", 10000, 1000, &h), LOCK_OK);
        assert_int_equal(lock_acquire(b, "rl:f:one", 10000, 0, &probe), LOCK_ERR_BUSY);
        assert_int_equal(lock_extend(c, &h, 10000), LOCK_OK);
        assert_int_equal(lock_release(c, &h), LOCK_OK);
    }
    lock_free(b);
    assert_int_equal(th_redis_restart(&g_m[2]), 0);
}

/* One master hung (SIGSTOP): acquire still succeeds within the budget, because each master's
 * answer is awaited at most min(timeout, ttl/10); the validity accounts for the time spent. */
static void test_lock_redlock_one_master_hung_acquires_within_budget(void **state) {
    lock_client *c = *state;
    lock_handle h;
    assert_int_equal(lock_acquire(c, "rl:f:hung", 10000, 0, &h), LOCK_OK); /* warm connections */
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    th_redis_signal(&g_m[1], SIGSTOP);
    int64_t t0 = rconn_now_ms();
    int rc = lock_acquire(c, "rl:f:hung", 10000, 2000, &h);
    int64_t took = rconn_now_ms() - t0;
    int64_t valid_until = h.valid_until_ms; /* before the extend below moves it */
    int rc_ext = rc == LOCK_OK ? lock_extend(c, &h, 10000) : rc;
    int rc_rel = rc == LOCK_OK ? lock_release(c, &h) : rc;
    th_redis_signal(&g_m[1], SIGCONT);
    print_message("one master hung: acquired in %lld ms (budget 2000)\n", (long long)took);
    assert_int_equal(rc, LOCK_OK);
    assert_true(took <= 2000 + SLACK_MS);
    /* the validity counts the time the round spent waiting for the hung master */
    assert_true(valid_until <= t0 + took + 10000 - 102);
    assert_true(valid_until >= t0 + 10000 - 102);
    assert_int_equal(rc_ext, LOCK_OK);
    assert_int_equal(rc_rel, LOCK_OK);
    /* the hung master ran the late acquire and the release queued behind it: nothing is left */
    lock_handle h2;
    assert_int_equal(lock_acquire(c, "rl:f:hung", 10000, 5000, &h2), LOCK_OK);
    assert_int_equal(lock_release(c, &h2), LOCK_OK);
    for (int i = 0; i < MASTERS; i++)
        assert_int_equal(raw_int(i, (const char *const[]){"EXISTS", "rl:f:hung", NULL}), 0);
}

/* An extend whose validity is gone (2 ms: see test_lock_redlock_extend_no_validity_left_*)
 * with a master hung: the two others are a majority that answered, so the lease lapsed
 * (LEASE_LOST). With two masters hung no majority can answer: that is the store (BACKEND). */
static void test_lock_redlock_extend_no_validity_lease_lost_unless_majority_silent(void **state) {
    lock_client *c = *state;
    static const char *const keys[TRIES + 1] = {"rl:f:late0", "rl:f:late1", "rl:f:late2",
                                                "rl:f:late3", "rl:f:late4", "rl:f:late5"};
    lock_handle h[TRIES + 1];
    for (int i = 0; i <= TRIES; i++)
        assert_int_equal(lock_acquire(c, keys[i], 10000, 0, &h[i]), LOCK_OK);
    th_redis_signal(&g_m[1], SIGSTOP);
    /* the two others must answer within 5 ms: a few tries (see the test above) */
    int rc1 = -100;
    for (int i = 0; i < TRIES && rc1 != LOCK_ERR_LEASE_LOST; i++) {
        rc1 = lock_extend(c, &h[i], 2);
        if (rc1 != LOCK_ERR_LEASE_LOST) assert_int_equal(rc1, LOCK_ERR_BACKEND);
    }
    th_redis_signal(&g_m[2], SIGSTOP);
    int rc2 = lock_extend(c, &h[TRIES], 2);
    th_redis_signal(&g_m[1], SIGCONT);
    th_redis_signal(&g_m[2], SIGCONT);
    assert_int_equal(rc1, LOCK_ERR_LEASE_LOST);
    assert_int_equal(rc2, LOCK_ERR_BACKEND);
    for (int i = 0; i <= TRIES; i++)
        (void)lock_release(c, &h[i]);
    lock_handle h3;
    assert_int_equal(lock_acquire(c, keys[0], 10000, 5000, &h3), LOCK_OK);
    assert_int_equal(lock_release(c, &h3), LOCK_OK);
}

/* Fences keep growing when the majority changes: the master that was ahead is gone, the two
 * others were raised to its counter. */
static void test_lock_redlock_master_lost_fence_still_grows(void **state) {
    lock_client *c = *state;
    redisReply *r =
        raw_cmd(0, (const char *const[]){"SET", "lock:fences", "6000000000000000", NULL});
    freeReplyObject(r);
    lock_handle h, h2;
    assert_int_equal(lock_acquire(c, "rl:f:fence", 10000, 0, &h), LOCK_OK);
    assert_true(h.fence > 6000000000000000ULL);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    th_redis_signal(&g_m[0], SIGKILL);
    assert_int_equal(lock_acquire(c, "rl:f:fence", 10000, 1000, &h2), LOCK_OK);
    assert_true(h2.fence > h.fence);
    assert_int_equal(lock_release(c, &h2), LOCK_OK);
    assert_int_equal(th_redis_restart(&g_m[0]), 0); /* empty: no persistence */
}

/* Two masters killed: no majority can answer. The attempt ends within the budget with
 * LOCK_ERR_BACKEND, and the survivor holds nothing of it. Then all three down: at once. */
static void test_lock_redlock_majority_killed_backend_within_budget(void **state) {
    lock_client *c = *state;
    lock_handle h;
    th_redis_signal(&g_m[0], SIGKILL);
    th_redis_signal(&g_m[1], SIGKILL);
    int64_t t0 = rconn_now_ms();
    int rc = lock_acquire(c, "rl:f:major", 10000, 1000, &h);
    int64_t took = rconn_now_ms() - t0;
    print_message("two of three masters down: %s after %lld ms (budget 1000)\n", lock_strerror(rc),
                  (long long)took);
    assert_int_equal(rc, LOCK_ERR_BACKEND);
    assert_true(took <= 1000 + SLACK_MS);
    assert_int_equal(h.token[0], '\0');
    assert_int_equal(raw_int(2, (const char *const[]){"EXISTS", "rl:f:major", NULL}), 0);
    /* zero budget: one round, same answer */
    assert_int_equal(lock_acquire(c, "rl:f:major", 10000, 0, &h), LOCK_ERR_BACKEND);
    assert_int_equal(raw_int(2, (const char *const[]){"EXISTS", "rl:f:major", NULL}), 0);

    th_redis_signal(&g_m[2], SIGKILL);
    t0 = rconn_now_ms();
    assert_int_equal(lock_acquire(c, "rl:f:major", 10000, 5000, &h), LOCK_ERR_BACKEND);
    assert_true(rconn_now_ms() - t0 < 2000); /* nobody answers: no point waiting */
}

/* Everything back (empty, no persistence): the same client works again. */
static void test_lock_redlock_masters_back_works_again(void **state) {
    lock_client *c = *state;
    for (int i = 0; i < MASTERS; i++)
        if (g_m[i].pid == 0) assert_int_equal(th_redis_restart(&g_m[i]), 0);
    lock_handle h;
    assert_int_equal(lock_acquire(c, "rl:f:back", 10000, 0, &h), LOCK_OK);
    assert_int_equal(lock_extend(c, &h, 10000), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    for (int i = 0; i < MASTERS; i++)
        assert_int_equal(raw_int(i, (const char *const[]){"EXISTS", "lock:fences", NULL}), 1);
}

int main(int argc, char **argv) {
    int child = lock_child_main(argc, argv);
    if (child >= 0) return child;
    g_self = argv[0];
    signal(SIGPIPE, SIG_IGN); /* a killed master must not kill the test */
    const struct CMUnitTest redlock[] = {
        LOCK_CONTRACT_TESTS,
        cmocka_unit_test(test_lock_redlock_name_is_redlock),
        cmocka_unit_test(test_lock_redlock_acquire_key_on_every_master),
        cmocka_unit_test(test_lock_redlock_fence_max_over_majority_and_raised),
        cmocka_unit_test(test_lock_redlock_minority_foreign_lease_still_acquires),
        cmocka_unit_test(test_lock_redlock_extend_no_validity_left_lease_lost),
        cmocka_unit_test(test_lock_redlock_foreign_holder_silent_release_waiter_polls),
        cmocka_unit_test(test_lock_redlock_multi_two_clients_opposite_orders),
        cmocka_unit_test(test_lock_redlock_owned_other_client_same_owner_joins),
        cmocka_unit_test(test_lock_redlock_owned_master_lost_lease_reentry_undoes_stray),
        cmocka_unit_test(test_lock_redlock_owned_fences_differ_hashes_raised),
        cmocka_unit_test(test_lock_redlock_watchdog_other_client_never_gets_key),
        cmocka_unit_test(test_lock_redlock_watchdog_max_hold_other_client_gets_key),
        cmocka_unit_test(test_lock_redlock_holder_killed_lease_lapses_within_ttl),
        cmocka_unit_test(test_lock_redlock_holder_stopped_past_lease_release_not_owner),
    };
    const struct CMUnitTest faults[] = {
        cmocka_unit_test(test_lock_redlock_one_master_killed_still_acquires),
        cmocka_unit_test(test_lock_redlock_one_master_hung_acquires_within_budget),
        cmocka_unit_test(test_lock_redlock_extend_no_validity_lease_lost_unless_majority_silent),
        cmocka_unit_test(test_lock_redlock_master_lost_fence_still_grows),
        cmocka_unit_test(test_lock_redlock_majority_killed_backend_within_budget),
        cmocka_unit_test(test_lock_redlock_masters_back_works_again),
    };
    int failed = cmocka_run_group_tests_name("lock_redlock", redlock, group_setup, group_teardown);
    failed +=
        cmocka_run_group_tests_name("lock_redlock_faults", faults, group_setup, group_teardown);
    return failed == 0 ? 0 : 1;
}
