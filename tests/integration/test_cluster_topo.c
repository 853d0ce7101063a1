/* test_cluster_topo.c - the Redis Cluster test harness (tests/helpers/cluster_proc.h),
 * and rconn_cluster.c against a live cluster.
 *
 * One cluster of six nodes (node timeout 1 s) serves every case, in order: it
 * starts with three masters serving the three thirds of the slots; a key is
 * served where CLUSTER KEYSLOT says; rconn_key_slot agrees with CLUSTER KEYSLOT
 * on thousands of random keys, and rconn__slotmap_from_slots/_from_shards with
 * what the nodes say; a slot moves with its keys to another master, answering
 * -ASK from the old owner half-way and -MOVED after, and moves back; a master
 * killed with SIGKILL is replaced by its replica, and rejoins as a replica when
 * restarted. The last case changes the topology, so it runs last.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"
#include "lock/lock_impl.h"
#include "rconn/rconn_impl.h"

#include <hiredis.h>
#include "tests/helpers/cluster_proc.h"

#define NODE_TIMEOUT_MS 1000
#define FAILOVER_MS 15000 /* promotion bound: detection ~1 s, election delay 0.5-1.5 s */
#define MOVE_KEYS 250     /* keys in the migrated slot: three MIGRATE batches */
#define RANDOM_KEYS 4000  /* keys whose slot rconn_key_slot and CLUSTER KEYSLOT compare */

static th_cluster g_cl; /* started by the group setup, stopped by its teardown */

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Runs one command on a new connection to port; fails the test when the node does not
 * answer. Returns the reply (errors included); the caller frees it. */
static redisReply *on(int port, const char *fmt, ...) {
    redisContext *c = th_cluster_connect(port, 2000);
    assert_non_null(c);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    assert_non_null(r);
    return r;
}

/* Fails the test unless r is the error redirect kind slot -> 127.0.0.1:port (read with
 * rconn_cluster_redirect_parse). Frees r. */
static void expect_redirect_reply(redisReply *r, int kind, int slot, int port) {
    if (r->type != REDIS_REPLY_ERROR)
        fail_msg("expected a %s, got reply type %d (%s)", kind ? "ASK" : "MOVED",
                 r->type, r->str ? r->str : "");
    rconn_cluster_redirect rd;
    if (rconn_cluster_redirect_parse(r->str, r->len, &rd) != 0) fail_msg("unreadable: %s", r->str);
    assert_int_equal(rd.ask, kind == 1);
    assert_int_equal(rd.slot, slot);
    assert_string_equal(rd.host, "127.0.0.1");
    assert_int_equal(rd.port, port);
    freeReplyObject(r);
}

/* Fails the test unless r is the string value. Frees r. */
static void expect_string_reply(redisReply *r, const char *value) {
    if (r->type != REDIS_REPLY_STRING)
        fail_msg("expected \"%s\", got reply type %d (%s)", value, r->type, r->str ? r->str : "");
    assert_string_equal(r->str, value);
    freeReplyObject(r);
}

static int group_setup(void **state) {
    (void)state;
    long long t0 = now_ms();
    if (th_cluster_start(&g_cl, NODE_TIMEOUT_MS) != 0) return -1;
    fprintf(stderr, "# cluster of 3 masters + 3 replicas ready in %lld ms\n", now_ms() - t0);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    th_cluster_stop(&g_cl);
    th_cluster_stop(&g_cl); /* twice is harmless */
    return 0;
}

/* ---- the cluster as started ---- */

static void test_cluster_started_three_masters_three_replicas(void **state) {
    (void)state;
    th_cluster *c = &g_cl;
    assert_int_equal(c->n, 6);
    char want[512];
    snprintf(want, sizeof want, "redis-cluster://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             c->nodes[0].port, c->nodes[1].port, c->nodes[2].port);
    assert_string_equal(c->url, want);
    for (int i = 0; i < c->n; i++) {
        assert_int_equal(strlen(c->id[i]), 40);
        assert_int_equal(th_cluster_node_index(c, c->nodes[i].port), i);
        redisReply *r = on(c->nodes[i].port, "ROLE");
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        assert_string_equal(r->element[0]->str, i < 3 ? "master" : "slave");
        freeReplyObject(r);
    }
    assert_int_equal(th_cluster_node_index(c, 1), -1);
    assert_int_equal(th_cluster_slot_owner(c, 0), c->nodes[0].port);
    assert_int_equal(th_cluster_slot_owner(c, 5460), c->nodes[0].port);
    assert_int_equal(th_cluster_slot_owner(c, 5461), c->nodes[1].port);
    assert_int_equal(th_cluster_slot_owner(c, 10922), c->nodes[1].port);
    assert_int_equal(th_cluster_slot_owner(c, 10923), c->nodes[2].port);
    assert_int_equal(th_cluster_slot_owner(c, 16383), c->nodes[2].port);
    assert_int_equal(th_cluster_slot_owner(c, -1), -1);
    assert_int_equal(th_cluster_slot_owner(c, 16384), -1);
    assert_int_equal(th_cluster_wait_ok(c, 1000), 0);

    static th_cluster bad; /* refused before anything starts */
    assert_int_equal(th_cluster_start(&bad, 99), -1);
    assert_int_equal(th_cluster_start(&bad, 60001), -1);
    th_cluster_stop(&bad);
}

static void test_key_served_by_keyslot_owner_moved_elsewhere(void **state) {
    (void)state;
    th_cluster *c = &g_cl;
    redisReply *r = on(c->nodes[0].port, "CLUSTER KEYSLOT %s", "users:{eu-1}:B");
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    int slot = (int)r->integer;
    freeReplyObject(r);
    int owner = th_cluster_slot_owner(c, slot);
    assert_true(owner > 0);

    r = on(owner, "SET %s %s", "users:{eu-1}:B", "100");
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    for (int i = 0; i < 3; i++) { /* the other masters send it to the owner */
        if (c->nodes[i].port == owner) continue;
        expect_redirect_reply(on(c->nodes[i].port, "GET %s", "users:{eu-1}:B"), 0, slot,
                              owner);
    }
    expect_string_reply(on(owner, "GET %s", "users:{eu-1}:B"), "100");
    r = on(owner, "DEL %s", "users:{eu-1}:B");
    freeReplyObject(r);
}

/* ---- rconn_cluster.c against the live cluster ---- */

static uint64_t rng_state;

static uint64_t rng(void) { /* xorshift64 */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Writes a random key of up to 40 bytes into buf, returns its length: a quarter any
 * bytes, the rest from an alphabet rich in braces, half of those around a {tag}. */
static size_t random_key(char *buf) {
    static const char alphabet[] = "ab:{}{}-_0123456789";
    size_t n = 0, len = (size_t)(rng() % 24);
    int kind = (int)(rng() % 4);
    for (size_t i = 0; i < len; i++)
        buf[n++] = kind == 0 ? (char)(rng() & 0xff) : alphabet[rng() % (sizeof alphabet - 1)];
    if (kind >= 2) { /* a tag, possibly empty, possibly not the first one */
        buf[n++] = '{';
        size_t tag = (size_t)(rng() % 8);
        for (size_t i = 0; i < tag; i++)
            buf[n++] = alphabet[rng() % (sizeof alphabet - 1)];
        buf[n++] = '}';
        size_t tail = (size_t)(rng() % 8);
        for (size_t i = 0; i < tail; i++)
            buf[n++] = alphabet[rng() % (sizeof alphabet - 1)];
    }
    return n;
}

static void test_key_slot_matches_cluster_keyslot(void **state) {
    (void)state;
    uint64_t seed = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
    if (!seed) seed = 1;
    rng_state = seed;
    redisContext *ctx = th_cluster_connect(g_cl.nodes[0].port, 5000);
    assert_non_null(ctx);
    static char keys[RANDOM_KEYS][48];
    static size_t lens[RANDOM_KEYS];
    for (int i = 0; i < RANDOM_KEYS; i++) {
        lens[i] = random_key(keys[i]);
        assert_int_equal(redisAppendCommand(ctx, "CLUSTER KEYSLOT %b", keys[i], lens[i]), REDIS_OK);
    }
    int tagged = 0;
    for (int i = 0; i < RANDOM_KEYS; i++) {
        void *v = NULL;
        assert_int_equal(redisGetReply(ctx, &v), REDIS_OK);
        redisReply *r = v;
        assert_int_equal(r->type, REDIS_REPLY_INTEGER);
        uint16_t mine = rconn_key_slot(keys[i], lens[i]);
        if (mine != r->integer) {
            char hex[2 * 48 + 1];
            for (size_t k = 0; k < lens[i]; k++)
                snprintf(hex + 2 * k, 3, "%02x", (unsigned char)keys[i][k]);
            hex[2 * lens[i]] = '\0';
            fail_msg("key %s (hex, seed %llu): rconn_key_slot %u, CLUSTER KEYSLOT %lld", hex,
                     (unsigned long long)seed, (unsigned)mine, r->integer);
        }
        const char *open = memchr(keys[i], '{', lens[i]);
        if (open && mine != rconn__crc16(keys[i], lens[i]) % 16384) tagged++;
        freeReplyObject(r);
    }
    redisFree(ctx);
    assert_true(tagged > RANDOM_KEYS / 4); /* the hash tags were exercised */
    fprintf(stderr, "# %d random keys (%d hashed by a tag), seed %llu: same slots\n", RANDOM_KEYS,
            tagged, (unsigned long long)seed);
}

/* Checks that *m serves every slot as the cluster does: th_cluster_slot_owner for a
 * sample, and c->agreed (the harness's own last agreed view) for every slot. */
static void check_map(const th_cluster *c, const rconn__slotmap *m, int nmasters) {
    assert_int_equal(m->nnodes, nmasters);
    for (int s = 0; s < RCONN_CLUSTER_SLOTS; s++) {
        const rconn__cluster_node *n = rconn__slotmap_node(m, (uint16_t)s);
        if (!n) fail_msg("slot %d unassigned", s);
        if (n->port != c->agreed[s])
            fail_msg("slot %d: map says %d, the cluster %d", s, n->port, c->agreed[s]);
        if (s % 97 == 0 || s == 5460 || s == 5461 || s == 10922 || s == 10923 || s == 16383) {
            assert_int_equal(n->port, th_cluster_slot_owner(c, s));
            assert_string_equal(n->host, "127.0.0.1");
            int i = th_cluster_node_index(c, n->port);
            assert_true(i >= 0);
            assert_string_equal(n->id, c->id[i]);
        }
    }
}

/* Builds slot maps from CLUSTER SLOTS and CLUSTER SHARDS of every running node and
 * checks them against the cluster. */
static void check_maps_of_every_node(th_cluster *c, int nmasters) {
    assert_int_equal(th_cluster_wait_ok(c, 10000), 0); /* c->agreed is current */
    rconn__slotmap *m = malloc(sizeof *m);
    assert_non_null(m);
    for (int i = 0; i < c->n; i++) {
        if (c->nodes[i].pid <= 0) continue;
        redisReply *r = on(c->nodes[i].port, "CLUSTER SLOTS");
        assert_int_equal(rconn__slotmap_from_slots(r, m), 0);
        freeReplyObject(r);
        check_map(c, m, nmasters);
        r = on(c->nodes[i].port, "CLUSTER SHARDS");
        assert_int_equal(rconn__slotmap_from_shards(r, m), 0);
        freeReplyObject(r);
        check_map(c, m, nmasters);
    }
    free(m);
}

static void test_slotmap_matches_live_cluster(void **state) {
    (void)state;
    check_maps_of_every_node(&g_cl, 3);
}

/* ---- live resharding ---- */

static void test_move_slot_ask_half_way_moved_after(void **state) {
    (void)state;
    th_cluster *c = &g_cl;
    const int slot = rconn_key_slot("{move}", 6);
    const int from = th_cluster_slot_owner(c, slot);
    int to = -1;
    for (int i = 0; i < 3 && to < 0; i++)
        if (c->nodes[i].port != from) to = c->nodes[i].port;
    assert_true(from > 0 && to > 0);
    char key[MOVE_KEYS][32], val[MOVE_KEYS][32];
    for (int k = 0; k < MOVE_KEYS; k++) {
        snprintf(key[k], sizeof key[k], "{move}:%d", k);
        snprintf(val[k], sizeof val[k], "v%d", k);
        redisReply *r = on(from, "SET %s %s", key[k], val[k]);
        assert_int_equal(r->type, REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }

    /* refusals that change nothing */
    assert_int_equal(th_cluster_move_slot_begin(c, slot, from), -1);             /* to itself */
    assert_int_equal(th_cluster_move_slot_begin(c, slot, c->nodes[3].port), -1); /* a replica */
    assert_int_equal(th_cluster_move_slot_begin(c, 16384, to), -1);
    assert_int_equal(th_cluster_move_slot_keys(c, slot, to, -1), -1); /* nothing begun */
    assert_int_equal(th_cluster_move_slot_end(c, slot, to), -1);

    long long t0 = now_ms();
    assert_int_equal(th_cluster_move_slot_begin(c, slot, to), 0);
    assert_int_equal(th_cluster_move_slot_begin(c, (slot + 1) % 16384, to), -1); /* one at once */
    /* Migrating, nothing moved yet: the old owner serves what it has, sends the rest to
     * the new one with -ASK; the new one sends plain requests back with -MOVED. */
    expect_string_reply(on(from, "GET %s", key[0]), val[0]);
    expect_redirect_reply(on(from, "GET %s", "{move}:absent"), 1, slot, to);
    expect_redirect_reply(on(to, "GET %s", key[0]), 0, slot, from);
    assert_int_equal(th_cluster_slot_owner(c, slot), from);

    assert_int_equal(th_cluster_move_slot_keys(c, slot, to + 1, 10), -1); /* not that one */
    assert_int_equal(th_cluster_move_slot_keys(c, slot, to, 100), 100);
    int asked = 0, served = 0;
    int moved_k = -1, kept_k = -1; /* a key moved already, one not yet */
    redisContext *ctx = th_cluster_connect(to, 2000);
    assert_non_null(ctx);
    for (int k = 0; k < MOVE_KEYS; k++) {
        redisReply *r = on(from, "GET %s", key[k]);
        if (r->type == REDIS_REPLY_STRING) {
            expect_string_reply(r, val[k]);
            served++;
            kept_k = k;
            continue;
        }
        expect_redirect_reply(r, 1, slot, to);
        asked++;
        moved_k = k;
        /* where the ASK points, ASKING lets the next command through */
        assert_int_equal(redisAppendCommand(ctx, "ASKING"), REDIS_OK);
        assert_int_equal(redisAppendCommand(ctx, "GET %s", key[k]), REDIS_OK);
        void *a = NULL, *g = NULL;
        assert_int_equal(redisGetReply(ctx, &a), REDIS_OK);
        assert_int_equal(redisGetReply(ctx, &g), REDIS_OK);
        assert_int_equal(((redisReply *)a)->type, REDIS_REPLY_STATUS);
        freeReplyObject(a);
        expect_string_reply(g, val[k]);
    }
    redisFree(ctx);
    assert_int_equal(asked, 100);
    assert_int_equal(served, MOVE_KEYS - 100);
    assert_true(moved_k >= 0 && kept_k >= 0);
    /* a multi-key command over both sides: TRYAGAIN, which is no redirect */
    redisReply *r = on(from, "MGET %s %s", key[moved_k], key[kept_k]);
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_int_equal(strncmp(r->str, "TRYAGAIN", 8), 0);
    rconn_cluster_redirect rd;
    assert_int_equal(rconn_cluster_redirect_parse(r->str, r->len, &rd), -1);
    freeReplyObject(r);

    assert_int_equal(th_cluster_move_slot_end(c, slot, to), -1); /* keys left: refused */
    assert_int_equal(th_cluster_slot_owner(c, slot), from);
    expect_redirect_reply(on(from, "GET %s", key[moved_k]), 1, slot,
                          to); /* still migrating */
    assert_int_equal(th_cluster_move_slot_keys(c, slot, to, -1), MOVE_KEYS - 100);
    assert_int_equal(th_cluster_move_slot_end(c, slot, to), 0);
    long long moved_ms = now_ms() - t0;

    /* Moved: the old owner and the third master send everything there with -MOVED. */
    assert_int_equal(th_cluster_slot_owner(c, slot), to);
    assert_int_equal(c->agreed[slot], to);
    for (int k = 0; k < MOVE_KEYS; k++) {
        expect_redirect_reply(on(from, "GET %s", key[k]), 0, slot, to);
        expect_string_reply(on(to, "GET %s", key[k]), val[k]);
    }
    for (int i = 0; i < 3; i++)
        if (c->nodes[i].port != from && c->nodes[i].port != to)
            expect_redirect_reply(on(c->nodes[i].port, "GET %s", key[0]), 0, slot, to);
    r = on(from, "CLUSTER COUNTKEYSINSLOT %d", slot);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    check_maps_of_every_node(c, 3); /* the old owner's range now has a hole in it */

    /* and back in one call */
    t0 = now_ms();
    assert_int_equal(th_cluster_move_slot(c, slot, from), 0);
    long long back_ms = now_ms() - t0;
    assert_int_equal(th_cluster_slot_owner(c, slot), from);
    for (int k = 0; k < MOVE_KEYS; k++)
        expect_string_reply(on(from, "GET %s", key[k]), val[k]);
    expect_redirect_reply(on(to, "GET %s", key[0]), 0, slot, from);
    check_maps_of_every_node(c, 3);
    fprintf(stderr, "# slot %d with %d keys moved in %lld ms (checks included), back in %lld ms\n",
            slot, MOVE_KEYS, moved_ms, back_ms);
}

/* ---- failover ---- */

/* Returns the port of the first replica that INFO replication of the master on port
 * lists online, waiting up to 5 s for one; or -1. */
static int replica_of(int port) {
    long long deadline = now_ms() + 5000;
    do {
        redisReply *r = on(port, "INFO replication");
        int replica = -1;
        const char *p = r->type == REDIS_REPLY_STRING ? strstr(r->str, "slave0:") : NULL;
        const char *q = p ? strstr(p, ",port=") : NULL;
        const char *eol = p ? strpbrk(p, "\r\n") : NULL;
        const char *online = p ? strstr(p, ",state=online,") : NULL;
        if (q && online && (!eol || online < eol)) replica = atoi(q + 6);
        freeReplyObject(r);
        if (replica > 0) return replica;
        sleep_ms(50);
    } while (now_ms() < deadline);
    return -1;
}

/* Returns 1 when CLUSTER SHARDS on port has a shard without slots whose node is id,
 * 0 when it has none, failing the test on a reply of another shape. */
static int slotless_shard_of(int port, const char *id) {
    redisReply *r = on(port, "CLUSTER SHARDS");
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    int found = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *sh = r->element[i];
        assert_int_equal(sh->type, REDIS_REPLY_ARRAY);
        assert_int_equal(sh->elements, 4); /* "slots", [...], "nodes", [...] */
        const redisReply *slots = sh->element[1], *nodes = sh->element[3];
        for (size_t k = 0; k < nodes->elements && slots->elements == 0; k++) {
            const redisReply *n = nodes->element[k];
            for (size_t f = 0; f + 1 < n->elements; f += 2)
                if (strcmp(n->element[f]->str, "id") == 0 &&
                    strcmp(n->element[f + 1]->str, id) == 0)
                    found = 1;
        }
    }
    freeReplyObject(r);
    return found;
}

/* Polls ROLE on port until it names role; returns 0, or -1 after timeout_ms. */
static int wait_role(int port, const char *role, int timeout_ms) {
    long long deadline = now_ms() + timeout_ms;
    do {
        redisContext *ctx = th_cluster_connect(port, 500);
        redisReply *r = ctx ? redisCommand(ctx, "ROLE") : NULL;
        int yes = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                  r->element[0]->type == REDIS_REPLY_STRING &&
                  strcmp(r->element[0]->str, role) == 0;
        if (r) freeReplyObject(r);
        if (ctx) redisFree(ctx);
        if (yes) return 0;
        sleep_ms(50);
    } while (now_ms() < deadline);
    return -1;
}

static void test_master_killed_replica_takes_over_old_master_rejoins(void **state) {
    (void)state;
    th_cluster *c = &g_cl;
    const int slot = rconn_key_slot("{fail}", 6);
    const int old = th_cluster_slot_owner(c, slot);
    const int idx = th_cluster_node_index(c, old);
    assert_true(idx >= 0);
    const int replica = replica_of(old);
    assert_true(th_cluster_node_index(c, replica) >= 3);
    redisReply *r = on(old, "SET %s %s", "{fail}:k", "before");
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    r = on(old, "WAIT 1 2000"); /* the replica has it */
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);

    th_redis_signal(&c->nodes[idx], SIGKILL);
    long long t0 = now_ms();
    int promoted = th_cluster_wait_failover(c, old, FAILOVER_MS);
    long long failover_ms = now_ms() - t0;
    if (promoted != replica) th_cluster_dump_logs(c, 30, stderr);
    assert_int_equal(promoted, replica);
    assert_int_equal(th_cluster_slot_owner(c, slot), replica);
    assert_int_equal(wait_role(replica, "master", 1000), 0);
    expect_string_reply(on(replica, "GET %s", "{fail}:k"), "before");
    r = on(replica, "SET %s %s", "{fail}:k", "after");
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    for (int i = 0; i < 3; i++) /* the other masters know */
        if (c->nodes[i].port != old)
            expect_redirect_reply(on(c->nodes[i].port, "GET %s", "{fail}:k"), 0, slot,
                                  replica);
    assert_int_equal(th_cluster_wait_ok(c, 1000), 0);
    assert_int_equal(th_cluster_wait_failover(c, old, 100), -1); /* it serves nothing now */
    /* the maps, with the dead master in CLUSTER SHARDS as a shard without slots */
    assert_int_equal(slotless_shard_of(replica, c->id[idx]), 1);
    check_maps_of_every_node(c, 3);

    /* Restarted from its nodes.conf and AOF, it learns it lost its slots: a replica of
     * the node that took them, which then syncs it. */
    t0 = now_ms();
    assert_int_equal(th_redis_restart(&c->nodes[idx]), 0);
    int role = wait_role(old, "slave", FAILOVER_MS);
    long long rejoin_ms = now_ms() - t0;
    if (role != 0) th_cluster_dump_logs(c, 30, stderr);
    assert_int_equal(role, 0);
    assert_int_equal(th_cluster_wait_ok(c, FAILOVER_MS), 0);
    assert_int_equal(th_cluster_slot_owner(c, slot), replica);
    expect_redirect_reply(on(old, "GET %s", "{fail}:k"), 0, slot, replica);
    long long deadline = now_ms() + 10000;
    int synced = 0;
    while (!synced && now_ms() < deadline) { /* READONLY: a replica serves reads */
        redisContext *ctx = th_cluster_connect(old, 1000);
        assert_non_null(ctx);
        redisReply *ro = redisCommand(ctx, "READONLY");
        redisReply *g = redisCommand(ctx, "GET %s", "{fail}:k");
        synced = g && g->type == REDIS_REPLY_STRING && strcmp(g->str, "after") == 0;
        if (ro) freeReplyObject(ro);
        if (g) freeReplyObject(g);
        redisFree(ctx);
        if (!synced) sleep_ms(50);
    }
    assert_true(synced);
    check_maps_of_every_node(c, 3);
    fprintf(stderr,
            "# master killed: replica serving its slots %lld ms later; the old master, "
            "restarted, was a replica %lld ms later\n",
            failover_ms, rejoin_ms);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cluster_started_three_masters_three_replicas),
        cmocka_unit_test(test_key_served_by_keyslot_owner_moved_elsewhere),
        cmocka_unit_test(test_key_slot_matches_cluster_keyslot),
        cmocka_unit_test(test_slotmap_matches_live_cluster),
        cmocka_unit_test(test_move_slot_ask_half_way_moved_after),
        cmocka_unit_test(test_master_killed_replica_takes_over_old_master_rejoins), /* last */
    };
    return cmocka_run_group_tests_name("cluster harness (integration)", tests, group_setup,
                                       group_teardown);
}
