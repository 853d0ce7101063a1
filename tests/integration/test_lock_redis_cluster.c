/* test_lock_redis_cluster.c - the redis lock backend and rconn_cluster on a real Redis Cluster.
 *
 * One six-node cluster (tests/helpers/cluster_proc.h, node timeout 1 s) serves every case,
 * in order: rconn_cluster_master() against CLUSTER SLOTS; the lock contract
 * (tests/helpers/lock_contract.h) through a client of the cluster whose keys get a hash tag
 * on the way in (the contract's keys are untagged, which a cluster refuses), spread over
 * the three masters; untagged keys and acquire_multi across slots refused; a slot moved
 * between two acquires (-MOVED followed), a slot half-way through a migration (-ASK
 * followed); mutual exclusion of threads of two clients on one key; and, last because it
 * changes the topology, a master killed with SIGKILL: its slots fail promptly while it is
 * down and work after the failover.
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
#include "lock/lock_impl.h"
#include "tests/helpers/cluster_proc.h"
#include "tests/helpers/lock_contract.h"

#define NODE_TIMEOUT_MS 1000
#define TIMEOUT_MS 2000
#define FAILOVER_MS 15000

static th_cluster g_cl;         /* started by the group setup */
static lock_client *g_client;   /* a redis client of the cluster */
static lock_client *g_tagged;   /* g_client behind tag_ops: the group state */
static rconn_addr g_addr;  /* the cluster's address */

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static rconn_cluster_stats stats_of(lock_client *c) {
    rconn_cluster_stats st;
    rconn_cluster_stats_get(lock__dist_cluster(c->impl), &st);
    return st;
}

/* The port of a master other than port (nodes[0..2] are the masters until the last case). */
static int other_master(int port) {
    return th_cluster_other_master(&g_cl, port);
}

/* ---- a client that tags the contract's keys: "contract:x:y" is "contract:{x}:y" ---- */

/* Writes into out the key the cluster gets for key: key itself when it has a tag; else its
 * second ':'-separated part (or all of it) made the tag, so the keys of one contract case
 * share a slot and the cases spread over the masters; a key too long for two more bytes has
 * its first and last bytes replaced by the braces. */
static void tag_key(const char *key, char out[LOCK_KEY_MAX + 1]) {
    size_t len = strlen(key);
    const char *p1 = strchr(key, ':');
    const char *p2 = p1 != NULL ? strchr(p1 + 1, ':') : NULL;
    if (rconn_key_tagged(key)) {
        snprintf(out, LOCK_KEY_MAX + 1, "%s", key);
    } else if (len + 2 > LOCK_KEY_MAX) {
        snprintf(out, LOCK_KEY_MAX + 1, "%s", key);
        out[0] = '{';
        out[len - 1] = '}';
    } else if (p2 != NULL && p2 > p1 + 1) {
        snprintf(out, LOCK_KEY_MAX + 1, "%.*s{%.*s}%s", (int)(p1 + 1 - key), key,
                 (int)(p2 - p1 - 1), p1 + 1, p2);
    } else {
        snprintf(out, LOCK_KEY_MAX + 1, "{%s}", key);
    }
}

static lock_client *inner(void *impl) {
    return impl;
}

static int tag_acquire(void *impl, const char *key, uint32_t ttl_ms, uint32_t wait_ms,
                       lock_handle *out) {
    char k[LOCK_KEY_MAX + 1];
    tag_key(key, k);
    int rc = inner(impl)->ops->acquire(inner(impl)->impl, k, ttl_ms, wait_ms, out);
    if (rc == LOCK_OK) snprintf(out->key, sizeof out->key, "%s", key);
    return rc;
}

static int tag_release(void *impl, const lock_handle *h) {
    lock_handle t = *h;
    tag_key(h->key, t.key);
    return inner(impl)->ops->release(inner(impl)->impl, &t);
}

static int tag_extend(void *impl, lock_handle *h, uint32_t ttl_ms) {
    lock_handle t = *h;
    tag_key(h->key, t.key);
    int rc = inner(impl)->ops->extend(inner(impl)->impl, &t, ttl_ms);
    h->valid_until_ms = t.valid_until_ms;
    return rc;
}

static void tag_destroy(void *impl) {
    (void)impl; /* the inner client is freed on its own */
}

static int tag_acquire_multi(void *impl, const char *const *keys, size_t n, uint32_t ttl_ms,
                             uint32_t wait_ms, lock_handle *out) {
    char k[LOCK_MULTI_MAX][LOCK_KEY_MAX + 1];
    const char *kp[LOCK_MULTI_MAX] = {NULL};
    for (size_t i = 0; i < n; i++) {
        tag_key(keys[i], k[i]);
        kp[i] = k[i];
    }
    int rc = inner(impl)->ops->acquire_multi(inner(impl)->impl, kp, n, ttl_ms, wait_ms, out);
    for (size_t i = 0; rc == LOCK_OK && i < n; i++)
        snprintf(out[i].key, sizeof out[i].key, "%s", keys[i]);
    return rc;
}

static int tag_release_multi(void *impl, const lock_handle *hs, size_t n) {
    lock_handle *t = malloc(n * sizeof *t);
    if (t == NULL) return LOCK_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        t[i] = hs[i];
        tag_key(hs[i].key, t[i].key);
    }
    int rc = inner(impl)->ops->release_multi(inner(impl)->impl, t, n);
    free(t);
    return rc;
}

static int tag_acquire_owned(void *impl, const char *key, const char *owner, uint32_t ttl_ms,
                             uint32_t wait_ms, lock_handle *out) {
    char k[LOCK_KEY_MAX + 1];
    tag_key(key, k);
    int rc = inner(impl)->ops->acquire_owned(inner(impl)->impl, k, owner, ttl_ms, wait_ms, out);
    if (rc == LOCK_OK) snprintf(out->key, sizeof out->key, "%s", key);
    return rc;
}

static int tag_release_owned(void *impl, const lock_handle *h, uint32_t *left) {
    lock_handle t = *h;
    tag_key(h->key, t.key);
    return inner(impl)->ops->release_owned(inner(impl)->impl, &t, left);
}

static const struct lock_ops tag_ops = {
    .name = "redis",
    .acquire = tag_acquire,
    .release = tag_release,
    .extend = tag_extend,
    .destroy = tag_destroy,
    .acquire_multi = tag_acquire_multi,
    .release_multi = tag_release_multi,
    .acquire_owned = tag_acquire_owned,
    .release_owned = tag_release_owned,
};

/* ---- group ---- */

static int cluster_setup(void **state) {
    if (th_cluster_start(&g_cl, NODE_TIMEOUT_MS) != 0) return -1;
    int err = -100;
    if (rconn_addr_parse(g_cl.url, &g_addr) != RCONN_OK || !g_addr.cluster) goto fail;
    g_client = lock_redis_new(&g_addr, TIMEOUT_MS, &err);
    if (g_client == NULL) goto fail;
    g_tagged = lock__client_new(&tag_ops, g_client, &err);
    if (g_tagged == NULL) goto fail;
    *state = g_tagged;
    return 0;
fail:
    lock_free(g_client);
    g_client = NULL;
    th_cluster_stop(&g_cl);
    return -1;
}

static int cluster_teardown(void **state) {
    lock_free(g_tagged);
    lock_free(g_client);
    g_tagged = g_client = NULL;
    *state = NULL;
    th_cluster_stop(&g_cl);
    return 0;
}

/* ---- rconn_cluster ---- */

/* The master of each slot as CLUSTER SLOTS says, from one fetch; bad arguments refused. */
static void test_lock_cluster_master_several_slots_match_cluster_slots(void **state) {
    (void)state;
    int err = -100;
    rconn_cluster *c = rconn_cluster_new(&g_addr, TIMEOUT_MS, &err);
    assert_non_null(c);
    assert_int_equal(err, RCONN_OK);
    const unsigned slots[] = {0,     1,     5460, 5461,
                              8000,  10922, 10923, 16383,
                              rconn_key_slot("{eu-1}", 6), rconn_key_slot("users:{eu-2}:B", 14)};
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        rconn_addr m;
        char why[256];
        assert_int_equal(rconn_cluster_master(c, slots[i], &m, why, sizeof why), RCONN_OK);
        assert_string_equal(m.host, "127.0.0.1");
        assert_int_equal(m.port, th_cluster_slot_owner(&g_cl, (int)slots[i]));
        assert_int_equal(m.cluster, 0);
        assert_int_equal(m.db, 0);
        assert_int_equal(m.nseeds, 0);
    }
    rconn_cluster_stats st;
    rconn_cluster_stats_get(c, &st);
    assert_int_equal(st.refreshes, 1); /* one fetch served them all */
    assert_int_equal(st.moved, 0);
    rconn_cluster_stale(c); /* a refetch, rate-limited */
    sleep_ms(RCONN_CLUSTER_REFRESH_MS + 10);
    rconn_addr m;
    assert_int_equal(rconn_cluster_master(c, 42, &m, NULL, 0), RCONN_OK);
    rconn_cluster_stats_get(c, &st);
    assert_int_equal(st.refreshes, 2);
    assert_int_equal(rconn_cluster_master(c, RCONN_CLUSTER_SLOTS, &m, NULL, 0), RCONN_ERR_INVALID);
    rconn_cluster_free(c);

    rconn_addr one;
    assert_int_equal(rconn_addr_parse(g_cl.nodes[0].url, &one), RCONN_OK);
    assert_null(rconn_cluster_new(&one, TIMEOUT_MS, &err));
    assert_int_equal(err, RCONN_ERR_INVALID);
    assert_null(rconn_cluster_new(&g_addr, 0, &err));
    assert_int_equal(err, RCONN_ERR_INVALID);
}

/* No node answers: LOCK_ERR_BACKEND with a reason, at once. */
static void test_lock_cluster_master_no_node_backend(void **state) {
    (void)state;
    rconn_addr a;
    char url[64];
    snprintf(url, sizeof url, "redis-cluster://127.0.0.1:%d", th_free_port());
    assert_int_equal(rconn_addr_parse(url, &a), RCONN_OK);
    int err;
    rconn_cluster *c = rconn_cluster_new(&a, TIMEOUT_MS, &err);
    assert_non_null(c);
    rconn_addr m;
    char why[256] = "";
    assert_int_equal(rconn_cluster_master(c, 7, &m, why, sizeof why), RCONN_ERR_UNAVAILABLE);
    assert_true(strlen(why) > 0);
    rconn_cluster_free(c);
}

/* The contract's cases land on all three masters. */
static void test_lock_cluster_contract_keys_spread_over_masters(void **state) {
    (void)state;
    static const char *const keys[] = {
        "contract:exclusion", "contract:expiry",  "contract:extend:expired", "contract:multi:a",
        "contract:own:count", "contract:wd:keep", "contract:budget",         "contract:fence",
        "contract:nonowner",  "contract:double",  "contract:extend",         "contract:single",
    };
    int seen[3] = {0, 0, 0};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char k[LOCK_KEY_MAX + 1];
        tag_key(keys[i], k);
        int owner = th_cluster_slot_owner(&g_cl, (int)rconn_key_slot(k, strlen(k)));
        for (int j = 0; j < 3; j++)
            if (g_cl.nodes[j].port == owner) seen[j] = 1;
    }
    assert_int_equal(seen[0] + seen[1] + seen[2], 3);
}

/* ---- tags and slots ---- */

static void test_lock_cluster_untagged_key_invalid(void **state) {
    (void)state;
    lock_handle h;
    assert_int_equal(lock_acquire(g_client, "plain:key", 1000, 0, &h), LOCK_ERR_INVALID);
    assert_int_equal(lock_acquire(g_client, "empty:{}:tag", 1000, 0, &h), LOCK_ERR_INVALID);
    assert_int_equal(lock_acquire_owned(g_client, "plain:key", "me", 1000, 0, &h),
                     LOCK_ERR_INVALID);
    assert_int_equal(lock_acquire(g_client, "ok:{t}:key", 1000, 0, &h), LOCK_OK);
    lock_handle bad = h;
    strcpy(bad.key, "plain:key");
    assert_int_equal(lock_release(g_client, &bad), LOCK_ERR_INVALID);
    assert_int_equal(lock_extend(g_client, &bad, 1000), LOCK_ERR_INVALID);
    assert_int_equal(lock_release(g_client, &h), LOCK_OK);
}

static void test_lock_cluster_multi_across_slots_invalid_within_slot_ok(void **state) {
    (void)state;
    const char *across[] = {"m:{a}:1", "m:{b}:1"};
    assert_int_not_equal(rconn_key_slot("{a}", 3), rconn_key_slot("{b}", 3));
    lock_handle hs[3];
    assert_int_equal(lock_acquire_multi(g_client, across, 2, 1000, 0, hs), LOCK_ERR_INVALID);
    const char *within[] = {"m:{a}:1", "m:{a}:2", "other:{a}"};
    assert_int_equal(lock_acquire_multi(g_client, within, 3, 5000, 0, hs), LOCK_OK);
    lock_handle probe;
    assert_int_equal(lock_acquire(g_client, "m:{a}:2", 1000, 0, &probe), LOCK_ERR_BUSY);
    assert_true(hs[0].fence > 0 && hs[1].fence == hs[0].fence); /* one counter per tag */
    assert_int_equal(lock_release_multi(g_client, hs, 3), LOCK_OK);
    /* handles of several slots are released one slot at a time */
    lock_handle two[2];
    assert_int_equal(lock_acquire(g_client, across[0], 5000, 0, &two[0]), LOCK_OK);
    assert_int_equal(lock_acquire(g_client, across[1], 5000, 0, &two[1]), LOCK_OK);
    assert_int_equal(lock_release_multi(g_client, two, 2), LOCK_OK);
    assert_int_equal(lock_acquire(g_client, across[1], 1000, 0, &probe), LOCK_OK);
    assert_int_equal(lock_release(g_client, &probe), LOCK_OK);
}

/* lock_store_addr() tells the cluster; redlock refuses a cluster. */
static void test_lock_cluster_store_addr_is_cluster_redlock_refuses(void **state) {
    (void)state;
    rconn_addr a;
    assert_int_equal(lock_store_addr(g_client, &a), LOCK_OK);
    assert_int_equal(a.cluster, 1);
    assert_true(rconn_addr_same(&a, &g_addr));
    int err = -100;
    rconn_addr three[3] = {g_addr, g_addr, g_addr};
    assert_null(lock_redlock_new(three, 3, TIMEOUT_MS, &err));
    assert_int_equal(err, LOCK_ERR_INVALID);
}

/* ---- redirects ---- */

/* A slot moved between two acquires: the next one follows -MOVED and succeeds. */
static void test_lock_cluster_slot_moved_acquire_follows_moved(void **state) {
    (void)state;
    const char *key = "mv:{moveme}:1";
    const int slot = (int)rconn_key_slot(key, strlen(key));
    lock_handle h;
    assert_int_equal(lock_acquire(g_client, key, 5000, 0, &h), LOCK_OK);
    uint64_t fence = h.fence;
    assert_int_equal(lock_release(g_client, &h), LOCK_OK);
    const int from = th_cluster_slot_owner(&g_cl, slot), to = other_master(from);
    assert_int_equal(th_cluster_move_slot(&g_cl, slot, to), 0);
    assert_int_equal(th_cluster_slot_owner(&g_cl, slot), to);

    rconn_cluster_stats before = stats_of(g_client);
    assert_int_equal(lock_acquire(g_client, key, 5000, 0, &h), LOCK_OK);
    rconn_cluster_stats after = stats_of(g_client);
    assert_true(after.moved > before.moved);
    assert_true(h.fence > fence); /* the counter moved with the slot */
    lock_handle probe;
    assert_int_equal(lock_acquire(g_client, key, 1000, 0, &probe), LOCK_ERR_BUSY);
    assert_int_equal(lock_extend(g_client, &h, 5000), LOCK_OK);
    assert_int_equal(lock_release(g_client, &h), LOCK_OK);
    assert_int_equal(lock_acquire(g_client, key, 1000, 0, &probe), LOCK_OK);
    assert_int_equal(lock_release(g_client, &probe), LOCK_OK);
}

/* A slot half-way through a migration, its keys moved already: extend and release of the
 * lease follow -ASK to the importing master; after the migration, acquire works there. */
static void test_lock_cluster_slot_migrating_extend_release_follow_ask(void **state) {
    (void)state;
    const char *key = "ask:{askme}:1";
    const int slot = (int)rconn_key_slot(key, strlen(key));
    lock_handle h;
    assert_int_equal(lock_acquire(g_client, key, 20000, 0, &h), LOCK_OK);
    const int from = th_cluster_slot_owner(&g_cl, slot), to = other_master(from);
    assert_int_equal(th_cluster_move_slot_begin(&g_cl, slot, to), 0);
    assert_true(th_cluster_move_slot_keys(&g_cl, slot, to, -1) >= 2); /* the key, its counter */

    rconn_cluster_stats before = stats_of(g_client);
    assert_int_equal(lock_extend(g_client, &h, 20000), LOCK_OK);
    rconn_cluster_stats mid = stats_of(g_client);
    assert_true(mid.ask > before.ask);
    assert_int_equal(mid.moved, before.moved); /* an ASK does not change the map */
    assert_int_equal(lock_release(g_client, &h), LOCK_OK);
    assert_true(stats_of(g_client).ask > mid.ask);

    assert_int_equal(th_cluster_move_slot_end(&g_cl, slot, to), 0);
    assert_int_equal(lock_acquire(g_client, key, 5000, 2000, &h), LOCK_OK);
    assert_true(stats_of(g_client).moved > before.moved);
    assert_int_equal(lock_release(g_client, &h), LOCK_OK);
}

/* A lease released while its slot is being migrated, its key not moved yet: the release
 * deletes it at once (the script must not fail at the waiter's mark, which is on neither
 * node), so the next holder need not wait for the lease to expire. */
static void test_lock_cluster_release_mid_migration_key_not_moved(void **state) {
    (void)state;
    const char *key = "stay:{notmoved}:1";
    const int slot = (int)rconn_key_slot(key, strlen(key));
    lock_handle h;
    assert_int_equal(lock_acquire(g_client, key, 20000, 0, &h), LOCK_OK);
    const int from = th_cluster_slot_owner(&g_cl, slot), to = other_master(from);
    assert_int_equal(th_cluster_move_slot_begin(&g_cl, slot, to), 0);
    int released = lock_release(g_client, &h);
    int moved = th_cluster_move_slot_keys(&g_cl, slot, to, -1) >= 0 &&
                th_cluster_move_slot_end(&g_cl, slot, to) == 0;
    /* not on its new master either: a key the release had missed would have moved there */
    redisContext *x = th_cluster_connect(to, TIMEOUT_MS);
    redisReply *r = x ? redisCommand(x, "EXISTS %s", key) : NULL;
    long long left = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r) freeReplyObject(r);
    if (x) redisFree(x);
    assert_int_equal(released, LOCK_OK);
    assert_int_equal(left, 0);
    assert_true(moved);
    assert_int_equal(lock_acquire(g_client, key, 5000, 0, &h), LOCK_OK); /* free at once */
    assert_int_equal(lock_release(g_client, &h), LOCK_OK);
}

/* ---- exclusion ---- */

#define EXCL_THREADS 4
#define EXCL_ROUNDS 40

static atomic_int g_inside;  /* holders of the key right now, over both clients */
static atomic_int g_overlap; /* times a holder found another one inside */
static atomic_int g_failed;  /* acquires or releases that failed */
static long g_counter;       /* incremented by holders only, not atomically */

static void *excl_main(void *arg) {
    lock_client *c = arg;
    for (int i = 0; i < EXCL_ROUNDS; i++) {
        lock_handle h;
        if (lock_acquire(c, "excl:{count}:k", 10000, 30000, &h) != LOCK_OK) {
            atomic_fetch_add(&g_failed, 1);
            continue;
        }
        if (atomic_fetch_add(&g_inside, 1) != 0) atomic_fetch_add(&g_overlap, 1);
        long v = g_counter;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
        g_counter = v + 1;
        atomic_fetch_sub(&g_inside, 1);
        if (lock_release(c, &h) != LOCK_OK) atomic_fetch_add(&g_failed, 1);
    }
    return NULL;
}

/* Threads of two clients on one key: no two holders at once, every increment kept. */
static void test_lock_cluster_threads_two_clients_mutually_exclusive(void **state) {
    (void)state;
    int err;
    lock_client *other = lock_redis_new(&g_addr, TIMEOUT_MS, &err);
    assert_non_null(other);
    atomic_store(&g_inside, 0);
    atomic_store(&g_overlap, 0);
    atomic_store(&g_failed, 0);
    g_counter = 0;
    pthread_t th[2 * EXCL_THREADS];
    for (int i = 0; i < 2 * EXCL_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, excl_main, i % 2 ? other : g_client), 0);
    for (int i = 0; i < 2 * EXCL_THREADS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&g_failed), 0);
    assert_int_equal(atomic_load(&g_overlap), 0);
    assert_int_equal(g_counter, 2 * EXCL_THREADS * EXCL_ROUNDS);
    lock_free(other);
}

/* ---- failover (last: it changes the topology) ---- */

static void test_lock_cluster_master_killed_fails_promptly_works_after_failover(void **state) {
    (void)state;
    const char *key = "fo:{failme}:1";
    const int slot = (int)rconn_key_slot(key, strlen(key));
    const int old = th_cluster_slot_owner(&g_cl, slot);
    const int idx = th_cluster_node_index(&g_cl, old);
    assert_true(idx >= 0);
    lock_handle h;
    assert_int_equal(lock_acquire(g_client, key, 5000, 0, &h), LOCK_OK);
    uint64_t fence = h.fence;
    assert_int_equal(lock_release(g_client, &h), LOCK_OK);

    th_redis_signal(&g_cl.nodes[idx], SIGKILL);
    long long t0 = now_ms();
    int rc = lock_acquire(g_client, key, 5000, 500, &h);
    long long took = now_ms() - t0;
    assert_true(rc == LOCK_ERR_BACKEND || rc == LOCK_ERR_BUSY);
    assert_true(took < 500 + 2 * TIMEOUT_MS);
    int down_rc = rc;

    int promoted = th_cluster_wait_failover(&g_cl, old, FAILOVER_MS);
    if (promoted < 0) th_cluster_dump_logs(&g_cl, 30, stderr);
    assert_true(promoted > 0 && promoted != old);
    long long deadline = now_ms() + 5000;
    do {
        rc = lock_acquire(g_client, key, 5000, 200, &h);
        if (rc != LOCK_OK) sleep_ms(50);
    } while (rc != LOCK_OK && now_ms() < deadline);
    assert_int_equal(rc, LOCK_OK);
    assert_true(h.fence > fence);
    assert_int_equal(lock_release(g_client, &h), LOCK_OK);
    fprintf(stderr, "# master killed: an acquire while it was down answered \"%s\" in %lld ms\n",
            lock_strerror(down_rc), took);
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_cluster_master_several_slots_match_cluster_slots),
        cmocka_unit_test(test_lock_cluster_master_no_node_backend),
        cmocka_unit_test(test_lock_cluster_contract_keys_spread_over_masters),
        LOCK_CONTRACT_TESTS,
        cmocka_unit_test(test_lock_cluster_untagged_key_invalid),
        cmocka_unit_test(test_lock_cluster_multi_across_slots_invalid_within_slot_ok),
        cmocka_unit_test(test_lock_cluster_store_addr_is_cluster_redlock_refuses),
        cmocka_unit_test(test_lock_cluster_slot_moved_acquire_follows_moved),
        cmocka_unit_test(test_lock_cluster_slot_migrating_extend_release_follow_ask),
        cmocka_unit_test(test_lock_cluster_release_mid_migration_key_not_moved),
        cmocka_unit_test(test_lock_cluster_threads_two_clients_mutually_exclusive),
        cmocka_unit_test(test_lock_cluster_master_killed_fails_promptly_works_after_failover),
    };
    return cmocka_run_group_tests_name("lock on a Redis Cluster", tests, cluster_setup,
                                       cluster_teardown);
}
