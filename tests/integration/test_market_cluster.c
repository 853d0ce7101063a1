/* test_market_cluster.c - the market on a real Redis Cluster, realm by realm.
 *
 * One six-node cluster (tests/helpers/cluster_proc.h: 3 masters, 3 replicas, node timeout
 * 1 s) serves every case, in order:
 *   - realms r0..r11 spread over the three masters; every operation works in a realm of
 *     each; /healthz's check probes every master; INFO is read from each;
 *   - for each strategy, 64 buyer threads over 12 realms: each realm's funds are conserved
 *     to the coin, player by player, the items that left each market are the purchases
 *     answered OK, and every key lives on the master of its realm's slot;
 *   - two realms whose ids hash to one slot: both work and stay apart, on one master;
 *   - a purchase that meets its realm's slot split between two masters waits, then buys;
 *   - a purchase stopped between its read and its commit while its slot moves buys once;
 *   - busy realms' slots moved to another master (MIGRATING/IMPORTING, MIGRATE, SETSLOT)
 *     while 64 buyers run: the store follows -MOVED, -ASK and -TRYAGAIN, no purchase fails,
 *     and the funds match the answers to the coin;
 *   - last, because it changes the topology: with min_replicas_ack 1, a master killed with
 *     SIGKILL while buyers run. The other masters' realms go on without an error; the dead
 *     master's realms fail promptly, then work again once its replica took over and the
 *     old master came back as its replica; every purchase answered OK is in the store.
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
#include "market/market.h"
#include "tests/helpers/cluster_proc.h"

#define NODE_TIMEOUT_MS 1000
#define TIMEOUT_MS 2000
#define FAILOVER_MS 20000
#define REALMS 12
#define BUYERS 64
#define PLAYERS 8
#define ITEMS 120       /* per realm, each listed by player i % PLAYERS; i0 kept back */
#define FUNDS 1000000   /* per player: nobody runs out */
#define OKS_MAX (ITEMS) /* purchases one buyer can make */

static th_cluster g_cl;
static char g_realm[REALMS][8]; /* r0..r11 */

struct fx {
    lock_client *lock;
    market *m;
    market_conn *c;
    market_config cfg;
};

/* ---- helpers ---- */

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static unsigned realm_slot(const char *realm) {
    char tag[64];
    int n = snprintf(tag, sizeof tag, "{%s}", realm);
    return rconn_key_slot(tag, (size_t)n);
}

/* Opens a market on the cluster with f->cfg (its store address filled in here), under the
 * cluster's Redis lock, or under the in-process lock when local_lock. */
static int fx_start(struct fx *f, int local_lock) {
    int err;
    if (rconn_addr_parse(g_cl.url, &f->cfg.redis) != RCONN_OK || !f->cfg.redis.cluster) return -1;
    f->lock = local_lock ? lock_local_new(&err) : lock_redis_new(&f->cfg.redis, TIMEOUT_MS, &err);
    f->m = f->lock ? market_new(&f->cfg, f->lock, &err) : NULL;
    f->c = f->m ? market_conn_new(f->m, &err) : NULL;
    return f->c ? 0 : -1;
}

/* Opens a market of strategy s on the cluster; stall_ms > 0 stops every purchase that long
 * between its read and its commit (the test hook). */
static int fx_open(struct fx *f, enum market_strategy s, unsigned min_replicas_ack,
                   uint32_t stall_ms) {
    memset(f, 0, sizeof *f);
    f->cfg = (market_config){.redis_timeout_ms = TIMEOUT_MS, .lock_ttl_ms = 5000,
                             .acquire_timeout_ms = 3000, .strategy = s,
                             .min_replicas_ack = min_replicas_ack, .test_stall_ms = stall_ms};
    return fx_start(f, 0);
}

static void fx_close(struct fx *f) {
    market_conn_free(f->c);
    market_free(f->m);
    lock_free(f->lock);
}

/* Seeds realm with PLAYERS players p0.. of FUNDS each and ITEMS listings i0.. */
static void seed_realm(market_conn *c, const char *realm, uint64_t seed) {
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_generate(w, PLAYERS, ITEMS, FUNDS, 10, 200, seed), MARKET_OK);
    assert_int_equal(market_world_store(c, realm, w, 1), MARKET_OK);
    market_world_free(w);
}

/* A buyer: buys in its realm, item after item, recording what it was told. */
struct buyer {
    market *m;
    const char *realm;
    char id[8];
    int first;              /* the item it starts with */
    atomic_int *stop;       /* non-NULL: go round again until it is set */
    int ok, refused, other; /* answers: OK; not listed; anything else */
    int oks[OKS_MAX];       /* the items bought */
    int64_t price[OKS_MAX]; /* at this price */
    int64_t failed_at_ms;   /* when it last got an "other" answer */
    int last_rc;
    char last_why[128];     /* and what the store said */
};

static void *buy(void *arg) {
    struct buyer *b = arg;
    market_conn *c = market_conn_new(b->m, NULL);
    if (!c) {
        b->other++;
        return NULL;
    }
    do {
        for (int k = 0; k < ITEMS && b->ok < OKS_MAX; k++) {
            int i = (b->first + k) % ITEMS;
            if (i == 0) continue; /* kept for the failover's check */
            char item[16], seller[16];
            snprintf(item, sizeof item, "i%d", i);
            snprintf(seller, sizeof seller, "p%d", i % PLAYERS);
            if (strcmp(seller, b->id) == 0) continue;
            market_purchase_result res;
            int rc = market_purchase(c, b->realm, b->id, seller, item, -1, &res);
            if (rc == MARKET_OK) {
                b->price[b->ok] = res.price;
                b->oks[b->ok++] = i;
            } else if (rc == MARKET_ERR_NOT_LISTED) {
                b->refused++;
            } else {
                b->other++;
                b->last_rc = rc;
                b->failed_at_ms = now_ms();
                sleep_ms(10); /* as a client would, before its next try */
                snprintf(b->last_why, sizeof b->last_why, "%s", market_conn_errstr(c));
            }
        }
    } while (b->stop && !atomic_load(b->stop));
    market_conn_free(c);
    return NULL;
}

/* Starts BUYERS buyers over the realms: buyer i in realm i % REALMS, as player
 * p((i / REALMS) % PLAYERS), so that no two buyers of a realm share an id. */
static void buyers_start(struct buyer *b, pthread_t *t, market *m, atomic_int *stop) {
    for (int i = 0; i < BUYERS; i++) {
        b[i] = (struct buyer){.m = m, .realm = g_realm[i % REALMS], .first = (i * 7) % ITEMS,
                              .stop = stop};
        snprintf(b[i].id, sizeof b[i].id, "p%d", (i / REALMS) % PLAYERS);
        assert_int_equal(pthread_create(&t[i], NULL, buy, &b[i]), 0);
    }
}

/* Stops the buyers started by buyers_start() with stop, and waits for every one of them
 * (before any check can end the test). */
static void buyers_stop(pthread_t *t, atomic_int *stop) {
    atomic_store(stop, 1);
    for (int i = 0; i < BUYERS; i++)
        pthread_join(t[i], NULL);
}

/* Checks realm r against what its buyers were told: every player's funds to the coin
 * (FUNDS, less what it paid, plus what its listings sold for), each buyer holding exactly
 * what it bought, the market short of exactly that, and the audit's invariants. */
static void check_realm_exact(market_conn *c, int r, const struct buyer *b) {
    int64_t expect[PLAYERS];
    int held[PLAYERS] = {0};
    int sold = 0;
    for (int p = 0; p < PLAYERS; p++)
        expect[p] = FUNDS;
    for (int i = r; i < BUYERS; i += REALMS) {
        int me = atoi(b[i].id + 1);
        for (int k = 0; k < b[i].ok; k++) {
            expect[me] -= b[i].price[k];
            expect[b[i].oks[k] % PLAYERS] += b[i].price[k];
        }
        held[me] += b[i].ok;
        sold += b[i].ok;
    }
    for (int p = 0; p < PLAYERS; p++) {
        char id[8];
        snprintf(id, sizeof id, "p%d", p);
        market_player *pl = NULL;
        assert_int_equal(market_player_get(c, g_realm[r], id, &pl), MARKET_OK);
        assert_int_equal(pl->funds, expect[p]);
        assert_int_equal(pl->n_inventory, held[p]);
        market_player_free(pl);
    }
    market_audit_report a;
    assert_int_equal(market_audit(c, g_realm[r], &a), MARKET_OK);
    assert_int_equal(a.total_funds, (int64_t)PLAYERS * FUNDS);
    assert_int_equal(a.negative_funds, 0);
    assert_int_equal(a.items_misplaced, 0);
    assert_int_equal(a.items_listed, ITEMS - sold);
    assert_int_equal(a.items_held, sold);
}

/* Checks that every purchase a buyer of realm r was told succeeded is in the store (the
 * item in the buyer's inventory), and the audit's invariants. */
static void check_realm_kept(market_conn *c, int r, const struct buyer *b) {
    for (int i = r; i < BUYERS; i += REALMS) {
        market_player *pl = NULL;
        assert_int_equal(market_player_get(c, g_realm[r], b[i].id, &pl), MARKET_OK);
        for (int k = 0; k < b[i].ok; k++) {
            char item[16];
            snprintf(item, sizeof item, "i%d", b[i].oks[k]);
            int found = 0;
            for (size_t j = 0; j < pl->n_inventory; j++)
                found |= strcmp(pl->inventory[j], item) == 0;
            if (!found)
                fail_msg("realm %s: %s was told it bought %s, which it does not hold",
                         g_realm[r], b[i].id, item);
        }
        market_player_free(pl);
    }
    market_audit_report a;
    assert_int_equal(market_audit(c, g_realm[r], &a), MARKET_OK);
    assert_int_equal(a.total_funds, (int64_t)PLAYERS * FUNDS);
    assert_int_equal(a.negative_funds, 0);
    assert_int_equal(a.items_misplaced, 0);
    assert_int_equal(a.items_listed + a.items_held, ITEMS);
}

/* Checks that every key on every running master has a hash tag whose slot that master
 * serves: no realm spans two masters, and nothing is left behind by a move. */
static void assert_keys_on_their_masters(void) {
    for (int n = 0; n < TH_CLUSTER_NODES; n++) {
        if (!th_cluster_is_master(g_cl.nodes[n].port)) continue; /* a replica, a killed node */
        redisContext *x = th_cluster_connect(g_cl.nodes[n].port, TIMEOUT_MS);
        if (!x) continue;
        redisReply *keys = redisCommand(x, "KEYS *");
        for (size_t i = 0; keys && i < keys->elements; i++) {
            const redisReply *k = keys->element[i];
            assert_non_null(memchr(k->str, '{', k->len)); /* tagged */
            int owner = th_cluster_slot_owner(&g_cl, (int)rconn_key_slot(k->str, k->len));
            if (owner != g_cl.nodes[n].port)
                fail_msg("key %s is on %d, its slot is served by %d", k->str,
                         g_cl.nodes[n].port, owner);
        }
        if (keys) freeReplyObject(keys);
        redisFree(x);
    }
}

/* The realms' masters: how many distinct ones serve r0..r11. */
static int masters_of_realms(void) {
    int ports[REALMS], n = 0;
    for (int r = 0; r < REALMS; r++) {
        int p = th_cluster_slot_owner(&g_cl, (int)realm_slot(g_realm[r]));
        int seen = 0;
        for (int i = 0; i < n; i++)
            seen |= ports[i] == p;
        if (!seen) ports[n++] = p;
    }
    return n;
}

/* ---- cases ---- */

/* Realms spread over the masters; each operation works in a realm of each master; the
 * health check probes all three; INFO comes from each. */
static void test_realms_on_every_master_every_operation_works(void **state) {
    (void)state;
    struct fx f;
    assert_int_equal(fx_open(&f, MARKET_STRATEGY_MARKET, 0, 0), 0);
    assert_int_equal(masters_of_realms(), 3);
    for (int r = 0; r < REALMS; r++) {
        seed_realm(f.c, g_realm[r], (uint64_t)r + 1);
        market_purchase_result res;
        assert_int_equal(market_purchase(f.c, g_realm[r], "p0", "p1", "i1", -1, &res),
                         MARKET_OK);
        assert_int_equal(market_purchase(f.c, g_realm[r], "p0", "p1", "i1", -1, &res),
                         MARKET_ERR_NOT_LISTED);
        assert_int_equal(market_list(f.c, g_realm[r], "p0", "i1", 77), MARKET_OK);
        int64_t was = 0;
        assert_int_equal(market_unlist(f.c, g_realm[r], "p0", "i1", &was), MARKET_OK);
        assert_int_equal(was, 77);
        market_listing *l = NULL;
        size_t n = 0, total = 0;
        assert_int_equal(market_listings(f.c, g_realm[r], 0, 5, &l, &n, &total), MARKET_OK);
        assert_int_equal(total, ITEMS - 1);
        free(l);
    }
    char why[256];
    assert_int_equal(market_health(f.c, why, sizeof why), MARKET_OK);
    assert_string_equal(why, "");
    market_master_info *info = NULL;
    size_t n = 0;
    assert_int_equal(market_store_info_masters(f.c, "commandstats", &info, &n), MARKET_OK);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++) {
        assert_non_null(strstr(info[i].text, "cmdstat_exec:")); /* each master committed */
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(info[i].where, info[j].where);
    }
    market_master_info_free(info, n);
    char master[300];
    assert_int_equal(market_master(f.m, master, sizeof master), MARKET_OK);
    char expect[300];
    snprintf(expect, sizeof expect, "127.0.0.1:%d",
             th_cluster_slot_owner(&g_cl, (int)realm_slot(MARKET_REALM_DEFAULT)));
    assert_string_equal(master, expect);
    fx_close(&f);
}

/* 64 buyers over 12 realms on three masters, under strategy s. */
static void realms_in_parallel(enum market_strategy s) {
    struct fx f;
    assert_int_equal(fx_open(&f, s, 0, 0), 0);
    for (int r = 0; r < REALMS; r++)
        seed_realm(f.c, g_realm[r], (uint64_t)r + 100 * s + 7);
    static struct buyer b[BUYERS];
    pthread_t t[BUYERS];
    buyers_start(b, t, f.m, NULL);
    for (int i = 0; i < BUYERS; i++)
        pthread_join(t[i], NULL); /* all of them before any check can end the test */
    int ok = 0;
    for (int i = 0; i < BUYERS; i++) {
        if (b[i].other) fail_msg("buyer %d (realm %s): %d failures, the last %s (%s)", i, b[i].realm,
                     b[i].other, market_strerror(b[i].last_rc), b[i].last_why);
        ok += b[i].ok;
    }
    assert_true(ok > REALMS);
    for (int r = 0; r < REALMS; r++)
        check_realm_exact(f.c, r, b);
    assert_keys_on_their_masters();
    fx_close(&f);
}

static void test_realms_in_parallel_market_strategy(void **state) {
    (void)state;
    realms_in_parallel(MARKET_STRATEGY_MARKET);
}

static void test_realms_in_parallel_item_strategy(void **state) {
    (void)state;
    realms_in_parallel(MARKET_STRATEGY_ITEM);
}

static void test_realms_in_parallel_optimistic_strategy(void **state) {
    (void)state;
    realms_in_parallel(MARKET_STRATEGY_OPTIMISTIC);
}

/* Two realms whose ids hash to the same slot: both work, stay apart, and live on the one
 * master of that slot. */
static void test_two_realms_in_one_slot_stay_apart(void **state) {
    (void)state;
    struct fx f;
    assert_int_equal(fx_open(&f, MARKET_STRATEGY_MARKET, 0, 0), 0);
    char other[16] = "";
    unsigned slot = realm_slot("ta");
    for (int n = 0; n < 1 << 22 && !other[0]; n++) {
        char id[16];
        snprintf(id, sizeof id, "tb%d", n);
        if (realm_slot(id) == slot) memcpy(other, id, sizeof other);
    }
    assert_true(other[0] != '\0');
    const char *pair[2] = {"ta", other};
    for (int k = 0; k < 2; k++)
        seed_realm(f.c, pair[k], 42); /* the same world in both */
    market_purchase_result res;
    assert_int_equal(market_purchase(f.c, "ta", "p0", "p1", "i1", -1, &res), MARKET_OK);
    int64_t price = res.price;
    assert_int_equal(market_purchase(f.c, "ta", "p0", "p1", "i1", -1, &res),
                     MARKET_ERR_NOT_LISTED);
    /* the other realm's i1 is still listed, and p0 there still has all its funds */
    assert_int_equal(market_purchase(f.c, other, "p2", "p1", "i1", -1, &res), MARKET_OK);
    assert_int_equal(res.price, price);
    assert_int_equal(res.buyer_funds, FUNDS - price);
    market_player *pl = NULL;
    assert_int_equal(market_player_get(f.c, other, "p0", &pl), MARKET_OK);
    assert_int_equal(pl->funds, FUNDS);
    assert_int_equal(pl->n_inventory, 0);
    market_player_free(pl);
    for (int k = 0; k < 2; k++) {
        market_audit_report a;
        assert_int_equal(market_audit(f.c, pair[k], &a), MARKET_OK);
        assert_int_equal(a.total_funds, (int64_t)PLAYERS * FUNDS);
        assert_int_equal(a.items_held, 1);
        assert_int_equal(a.items_listed, ITEMS - 1);
        assert_int_equal(a.items_misplaced, 0);
    }
    /* both realms' markets are in the slot, on its master */
    redisContext *x = th_cluster_connect(th_cluster_slot_owner(&g_cl, (int)slot), TIMEOUT_MS);
    assert_non_null(x);
    redisReply *r = redisCommand(x, "EXISTS market:{ta} market:{%s}", other);
    assert_non_null(r);
    assert_int_equal(r->integer, 2);
    freeReplyObject(r);
    redisFree(x);
    assert_keys_on_their_masters();
    fx_close(&f);
}

/* The master serving most of r0..r11, and those realms. */
static int busiest_master(int *realms, int *n) {
    int best = -1, most = 0;
    for (int m = 0; m < 3; m++) {
        int port = g_cl.nodes[m].port, k = 0;
        for (int r = 0; r < REALMS; r++)
            k += th_cluster_slot_owner(&g_cl, (int)realm_slot(g_realm[r])) == port;
        if (k > most) most = k, best = port;
    }
    *n = 0;
    for (int r = 0; r < REALMS; r++)
        if (th_cluster_slot_owner(&g_cl, (int)realm_slot(g_realm[r])) == best)
            realms[(*n)++] = r;
    return best;
}

/* Another running master than port. */
static int other_master(int port) {
    return th_cluster_other_master(&g_cl, port);
}

/* One purchase on a thread of its own: p0 buys i1 from p1 in realm. */
struct split_buy {
    market *m;
    const char *realm;
    int rc;
    market_purchase_result res;
};

static void *split_buy_main(void *arg) {
    struct split_buy *s = arg;
    market_conn *c = market_conn_new(s->m, NULL);
    s->rc = c ? market_purchase(c, s->realm, "p0", "p1", "i1", -1, &s->res) : MARKET_ERR_NOMEM;
    market_conn_free(c);
    return NULL;
}

/* A purchase that meets its realm's slot half-way through a migration, some keys on each
 * master (the optimistic strategy: no lock to wait for first, so the store itself meets the
 * -ASK/-TRYAGAIN answers): it waits for the migration to end, then buys on the new master. */
static void test_purchase_meets_a_split_slot_waits_then_buys(void **state) {
    (void)state;
    struct fx f;
    assert_int_equal(fx_open(&f, MARKET_STRATEGY_OPTIMISTIC, 0, 0), 0);
    seed_realm(f.c, "split", 77);
    int slot = (int)realm_slot("split");
    int from = th_cluster_slot_owner(&g_cl, slot), to = other_master(from);
    market_stats before;
    market_stats_get(f.m, &before);
    int split = th_cluster_move_slot_begin(&g_cl, slot, to) == 0 &&
                th_cluster_move_slot_keys(&g_cl, slot, to, PLAYERS) == PLAYERS;
    struct split_buy sb = {.m = f.m, .realm = "split", .rc = 1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, split_buy_main, &sb), 0);
    sleep_ms(150); /* the purchase keeps meeting the split slot meanwhile */
    int moved = th_cluster_move_slot_keys(&g_cl, slot, to, -1) >= 0 &&
                th_cluster_move_slot_end(&g_cl, slot, to) == 0;
    pthread_join(t, NULL);
    assert_true(split && moved);
    if (sb.rc != MARKET_OK) fail_msg("purchase: %s", market_strerror(sb.rc));
    market_stats after;
    market_stats_get(f.m, &after);
    assert_true(after.cluster_ask + after.cluster_tryagain >
                before.cluster_ask + before.cluster_tryagain);
    market_player *pl = NULL;
    assert_int_equal(market_player_get(f.c, "split", "p0", &pl), MARKET_OK);
    assert_int_equal(pl->funds, FUNDS - sb.res.price);
    assert_int_equal(pl->n_inventory, 1);
    market_player_free(pl);
    assert_keys_on_their_masters();
    fx_close(&f);
}

/* The step between a purchase's read under WATCH and its commit: a purchase stopped there
 * (the stall hook; market strategy, under the realm's lock) while its realm's slot moves to
 * another master, keys and lock key with it. Its commit goes where its WATCH went and is
 * refused there (nothing written); it reads again on the new master and buys, once. */
static void test_slot_moves_between_read_and_commit_buys_once(void **state) {
    (void)state;
    struct fx f;
    assert_int_equal(fx_open(&f, MARKET_STRATEGY_MARKET, 0, 400), 0);
    seed_realm(f.c, "stall", 91);
    int slot = (int)realm_slot("stall");
    int from = th_cluster_slot_owner(&g_cl, slot), to = other_master(from);
    market_stats before;
    market_stats_get(f.m, &before);
    struct split_buy sb = {.m = f.m, .realm = "stall", .rc = 1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, split_buy_main, &sb), 0);
    sleep_ms(150); /* read, decided, stopped before its commit */
    int moved = th_cluster_move_slot(&g_cl, slot, to) == 0;
    pthread_join(t, NULL);
    assert_true(moved);
    assert_int_equal(th_cluster_slot_owner(&g_cl, slot), to);
    if (sb.rc != MARKET_OK) fail_msg("purchase: %s", market_strerror(sb.rc));
    market_stats after;
    market_stats_get(f.m, &after);
    assert_true(after.cluster_moved > before.cluster_moved);
    assert_int_equal(after.store_errors, before.store_errors);
    market_player *pl = NULL;
    assert_int_equal(market_player_get(f.c, "stall", "p0", &pl), MARKET_OK);
    assert_int_equal(pl->funds, FUNDS - sb.res.price); /* charged once */
    assert_int_equal(pl->n_inventory, 1);
    market_player_free(pl);
    assert_int_equal(market_player_get(f.c, "stall", "p1", &pl), MARKET_OK);
    assert_int_equal(pl->funds, FUNDS + sb.res.price);
    market_player_free(pl);
    market_audit_report a;
    assert_int_equal(market_audit(f.c, "stall", &a), MARKET_OK);
    assert_int_equal(a.items_listed, ITEMS - 1);
    assert_int_equal(a.items_misplaced, 0);
    assert_keys_on_their_masters();
    fx_close(&f);
}

/* ---- a realm whose slot is on the move does not hold up its lane ---- */

#define HOL_ITEMS 3000    /* listings in each realm: the buyers do not run out */
#define HOL_BUYERS 3      /* buyers in each of the two realms */
#define HOL_SPLIT_MS 3000 /* how long the moving realm's slot stays split between two masters */

enum { HOL_BEFORE, HOL_SPLIT, HOL_AFTER, HOL_PHASES }; /* where the migration is */

/* What a buyer of the lane test was answered. */
struct hol_count {
    int ok[HOL_PHASES];          /* purchases answered OK */
    int unavailable[HOL_PHASES]; /* answered 503: MARKET_ERR_BUSY or MARKET_ERR_STORE */
    int ok_total;
    int store; /* answered MARKET_ERR_STORE: outcome unknown */
};

/* A buyer of the lane test: buys item after item in its realm, and counts its answers by
 * where the migration was (a purchase counts in a phase when it began and ended in it). */
struct hol_buyer {
    market *m;
    const char *realm;
    char id[8];
    int first;               /* the item it starts with */
    const atomic_int *phase; /* HOL_* */
    const atomic_int *stop;
    struct hol_count n;
    int refused, other; /* not listed (or not enough funds); anything else */
    int last_rc;
    char last_why[128];
};

/* Sums the counts of the buyers b[0..HOL_BUYERS). */
static struct hol_count hol_total(const struct hol_buyer *b) {
    struct hol_count t = {0};
    for (int i = 0; i < HOL_BUYERS; i++) {
        for (int p = 0; p < HOL_PHASES; p++) {
            t.ok[p] += b[i].n.ok[p];
            t.unavailable[p] += b[i].n.unavailable[p];
        }
        t.ok_total += b[i].n.ok_total;
        t.store += b[i].n.store;
    }
    return t;
}

static void *hol_buy(void *arg) {
    struct hol_buyer *b = arg;
    market_conn *c = market_conn_new(b->m, NULL);
    if (!c) {
        b->other++;
        return NULL;
    }
    for (int k = 0; !atomic_load(b->stop); k++) {
        int i = 1 + (b->first + k) % (HOL_ITEMS - 1);
        char item[16], seller[16];
        snprintf(item, sizeof item, "i%d", i);
        snprintf(seller, sizeof seller, "p%d", i % PLAYERS);
        if (strcmp(seller, b->id) == 0) continue;
        int began = atomic_load(b->phase);
        market_purchase_result res;
        int rc = market_purchase(c, b->realm, b->id, seller, item, -1, &res);
        int ended = atomic_load(b->phase);
        if (rc == MARKET_OK) {
            b->n.ok_total++;
            if (began == ended) b->n.ok[ended]++;
        } else if (rc == MARKET_ERR_NOT_LISTED || rc == MARKET_ERR_INSUFFICIENT_FUNDS) {
            b->refused++;
        } else {
            if (rc == MARKET_ERR_BUSY || rc == MARKET_ERR_STORE)
                b->n.unavailable[ended]++;
            else
                b->other++;
            b->n.store += rc == MARKET_ERR_STORE;
            b->last_rc = rc;
            snprintf(b->last_why, sizeof b->last_why, "%s", market_conn_errstr(c));
            sleep_ms(10); /* as a client would, before its next try */
        }
        sleep_ms(1); /* a steady pace: the listings last the whole test */
    }
    market_conn_free(c);
    return NULL;
}

/* Checks realm against its buyers' answers: funds conserved, no item in two places, every
 * item either listed or held, and held exactly by the purchases answered OK (plus at most
 * those whose answer was MARKET_ERR_STORE: their outcome is unknown). */
static void hol_check_realm(market_conn *c, const char *realm, const struct hol_buyer *b) {
    market_audit_report a;
    assert_int_equal(market_audit(c, realm, &a), MARKET_OK);
    assert_int_equal(a.total_funds, (int64_t)PLAYERS * FUNDS);
    assert_int_equal(a.negative_funds, 0);
    assert_int_equal(a.items_misplaced, 0);
    assert_int_equal(a.index_mismatch, 0);
    assert_int_equal(a.items_listed + a.items_held, HOL_ITEMS);
    struct hol_count t = hol_total(b);
    assert_true(a.items_held >= (size_t)t.ok_total &&
                a.items_held <= (size_t)t.ok_total + (size_t)t.store);
}

/* Two realms served by one lane (cfg.workers 1), in different slots: while the slot of one
 * of them stays split between two masters (MIGRATING/IMPORTING, some keys moved: its
 * multi-key commands are answered -TRYAGAIN or -ASK) for HOL_SPLIT_MS, buyers buy in both.
 * The other realm's purchases go on meanwhile and none of them is answered 503; once the
 * migration ends, the moving realm's purchases succeed again; both realms' audits hold.
 * local_lock: under the in-process lock, so that the moving realm's batches get their lock
 * and meet the split slot in the store's read; else under the cluster's Redis lock, whose
 * acquire script meets it first. */
static void lane_not_held_up(int local_lock) {
    struct fx f;
    memset(&f, 0, sizeof f);
    f.cfg = (market_config){.redis_timeout_ms = TIMEOUT_MS, .lock_ttl_ms = 5000,
                            .acquire_timeout_ms = 1000, .strategy = MARKET_STRATEGY_MARKET,
                            .workers = 1};
    assert_int_equal(fx_start(&f, local_lock), 0);
    const char *moving = local_lock ? "holm1" : "holm0", *steady = local_lock ? "hols1" : "hols0";
    int slot = (int)realm_slot(moving);
    assert_int_not_equal(slot, (int)realm_slot(steady));
    const char *realms[2] = {moving, steady};
    for (int k = 0; k < 2; k++) {
        market_world *w = market_world_new();
        assert_non_null(w);
        assert_int_equal(market_world_generate(w, PLAYERS, HOL_ITEMS, FUNDS, 10, 200, 1300 + k),
                         MARKET_OK);
        assert_int_equal(market_world_store(f.c, realms[k], w, 1), MARKET_OK);
        market_world_free(w);
    }
    int from = th_cluster_slot_owner(&g_cl, slot), to = other_master(from);
    assert_true(from > 0 && to > 0);

    static struct hol_buyer b[2][HOL_BUYERS]; /* [0] the moving realm's, [1] the steady one's */
    pthread_t t[2][HOL_BUYERS];
    atomic_int phase = HOL_BEFORE, stop = 0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < HOL_BUYERS; i++) {
            b[k][i] = (struct hol_buyer){.m = f.m, .realm = realms[k],
                                         .first = i * (HOL_ITEMS / HOL_BUYERS), .phase = &phase,
                                         .stop = &stop};
            snprintf(b[k][i].id, sizeof b[k][i].id, "p%d", i);
            assert_int_equal(pthread_create(&t[k][i], NULL, hol_buy, &b[k][i]), 0);
        }
    sleep_ms(300);
    /* the split: the migration begun and a few keys moved, the rest left behind */
    int split = th_cluster_move_slot_begin(&g_cl, slot, to) == 0 &&
                th_cluster_move_slot_keys(&g_cl, slot, to, PLAYERS) > 0;
    atomic_store(&phase, HOL_SPLIT);
    sleep_ms(HOL_SPLIT_MS);
    atomic_store(&phase, HOL_AFTER);
    int moved = th_cluster_move_slot_keys(&g_cl, slot, to, -1) >= 0 &&
                th_cluster_move_slot_end(&g_cl, slot, to) == 0;
    /* the moving realm's buyers buy again (every one of them, or a generous while) */
    for (int64_t until = now_ms() + FAILOVER_MS; now_ms() < until; sleep_ms(20)) {
        int all = 1;
        for (int i = 0; i < HOL_BUYERS; i++)
            all &= b[0][i].n.ok[HOL_AFTER] > 0;
        if (all) break;
    }
    atomic_store(&stop, 1);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < HOL_BUYERS; i++)
            pthread_join(t[k][i], NULL);

    for (int k = 0; k < 2; k++) {
        struct hol_count n = hol_total(b[k]);
        fprintf(stderr,
                "# %s lock, %s realm: OK %d before, %d while split, %d after; 503 %d before, "
                "%d while split, %d after\n",
                local_lock ? "in-process" : "Redis", k ? "steady" : "moving", n.ok[HOL_BEFORE],
                n.ok[HOL_SPLIT], n.ok[HOL_AFTER], n.unavailable[HOL_BEFORE],
                n.unavailable[HOL_SPLIT], n.unavailable[HOL_AFTER]);
    }
    assert_true(split);
    assert_true(moved);
    assert_int_equal(th_cluster_slot_owner(&g_cl, slot), to);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < HOL_BUYERS; i++)
            if (b[k][i].other)
                fail_msg("%s buyer %d: %d failures, the last %s (%s)", realms[k], i, b[k][i].other,
                         market_strerror(b[k][i].last_rc), b[k][i].last_why);
    /* the steady realm: never a 503, and it went on buying while the other slot was split */
    for (int i = 0; i < HOL_BUYERS; i++) {
        const struct hol_buyer *s = &b[1][i];
        int n503 = s->n.unavailable[HOL_BEFORE] + s->n.unavailable[HOL_SPLIT] +
                   s->n.unavailable[HOL_AFTER];
        if (n503)
            fail_msg("steady realm, buyer %d: %d answers 503, the last %s (%s)", i, n503,
                     market_strerror(s->last_rc), s->last_why);
    }
    assert_true(hol_total(b[1]).ok[HOL_SPLIT] > 0);
    /* the moving realm: every buyer bought once the migration ended */
    for (int i = 0; i < HOL_BUYERS; i++)
        assert_true(b[0][i].n.ok[HOL_AFTER] > 0);
    for (int k = 0; k < 2; k++)
        hol_check_realm(f.c, realms[k], b[k]);
    assert_keys_on_their_masters();
    fx_close(&f);
}

static void test_split_slot_does_not_hold_up_its_lane_redis_lock(void **state) {
    (void)state;
    lane_not_held_up(0);
}

static void test_split_slot_does_not_hold_up_its_lane_local_lock(void **state) {
    (void)state;
    lane_not_held_up(1);
}

/* The busiest master's realms move to another master while 64 buyers run, one slot at a
 * time as an operator's reshard does (half the keys, a pause with the slot split between
 * the two, the rest, then the new owner announced): no purchase fails, the store followed
 * the moves, and every realm's funds match the answers to the coin. */
static void test_reshard_under_load_loses_nothing(void **state) {
    (void)state;
    struct fx f;
    assert_int_equal(fx_open(&f, MARKET_STRATEGY_MARKET, 0, 0), 0);
    for (int r = 0; r < REALMS; r++)
        seed_realm(f.c, g_realm[r], (uint64_t)r + 500);
    int moving[REALMS], nmoving;
    int from = busiest_master(moving, &nmoving);
    int to = other_master(from);
    assert_true(nmoving > 0 && to > 0);
    market_stats before;
    market_stats_get(f.m, &before);
    static struct buyer b[BUYERS];
    pthread_t t[BUYERS];
    atomic_int stop = 0;
    buyers_start(b, t, f.m, &stop);
    sleep_ms(100);
    int moved = 1; /* checked once the buyers are stopped: a failed check ends the test */
    for (int k = 0; k < nmoving && moved; k++) {
        int slot = (int)realm_slot(g_realm[moving[k]]);
        moved = th_cluster_move_slot_begin(&g_cl, slot, to) == 0 &&
                th_cluster_move_slot_keys(&g_cl, slot, to, PLAYERS) >= 0;
        sleep_ms(30); /* buyers meet the slot split between two masters */
        moved = moved && th_cluster_move_slot_keys(&g_cl, slot, to, -1) >= 0 &&
                th_cluster_move_slot_end(&g_cl, slot, to) == 0;
    }
    sleep_ms(100);
    buyers_stop(t, &stop);
    assert_true(moved);
    for (int i = 0; i < BUYERS; i++) {
        if (b[i].other) fail_msg("buyer %d (realm %s): %d failures, the last %s (%s)", i, b[i].realm,
                     b[i].other, market_strerror(b[i].last_rc), b[i].last_why);
    }
    for (int k = 0; k < nmoving; k++)
        assert_int_equal(th_cluster_slot_owner(&g_cl, (int)realm_slot(g_realm[moving[k]])), to);
    market_stats after;
    market_stats_get(f.m, &after);
    fprintf(stderr, "# %d realms moved: MOVED %llu, ASK %llu, TRYAGAIN %llu, map fetches %llu\n",
            nmoving, (unsigned long long)(after.cluster_moved - before.cluster_moved),
            (unsigned long long)(after.cluster_ask - before.cluster_ask),
            (unsigned long long)(after.cluster_tryagain - before.cluster_tryagain),
            (unsigned long long)(after.cluster_refreshes - before.cluster_refreshes));
    assert_true(after.cluster_moved > before.cluster_moved); /* the store followed */
    assert_int_equal(after.store_errors, before.store_errors);
    for (int r = 0; r < REALMS; r++)
        check_realm_exact(f.c, r, b);
    assert_keys_on_their_masters();
    fx_close(&f);
}

/* With min_replicas_ack 1, the master of the most realms is killed with SIGKILL while
 * buyers run: the other masters' realms see no error at all; the dead
 * master's realms fail promptly, and work again after its replica took over and the old
 * master rejoined as that replica's replica; every purchase answered OK is in the store. */
static void test_master_killed_others_go_on_no_ok_lost(void **state) {
    (void)state;
    struct fx f;
    assert_int_equal(fx_open(&f, MARKET_STRATEGY_MARKET, 1, 0), 0);
    for (int r = 0; r < REALMS; r++)
        seed_realm(f.c, g_realm[r], (uint64_t)r + 900);
    int victims[REALMS], nvictims;
    int dead = busiest_master(victims, &nvictims);
    int di = th_cluster_node_index(&g_cl, dead);
    assert_true(di >= 0 && nvictims > 0);
    static struct buyer b[BUYERS];
    pthread_t t[BUYERS];
    atomic_int stop = 0;
    buyers_start(b, t, f.m, &stop);
    sleep_ms(200);
    int64_t killed_at = now_ms();
    th_redis_signal(&g_cl.nodes[di], SIGKILL);
    int promoted = th_cluster_wait_failover(&g_cl, dead, FAILOVER_MS);
    /* the old master comes back with its old data, and becomes the new one's replica */
    int back = promoted > 0 && th_redis_restart(&g_cl.nodes[di]) == 0 &&
               th_cluster_wait_ok(&g_cl, FAILOVER_MS) == 0;
    /* the dead master's realms work again: the item kept for this (i0, which buyers
     * leave alone) is bought in each, retried under one idempotency key until it is OK */
    market_conn *c = market_conn_new(f.m, NULL);
    int after[REALMS], nafter = 0;
    for (int k = 0; k < nvictims && back && c; k++) {
        const market_idem key = {"after-failover", "i0"};
        market_purchase_result res;
        int rc = MARKET_ERR_STORE;
        for (int64_t until = now_ms() + FAILOVER_MS; now_ms() < until; sleep_ms(100)) {
            rc = market_purchase_idem(c, g_realm[victims[k]], "p1", "p0", "i0", -1, &key, &res);
            if (rc != MARKET_ERR_STORE && rc != MARKET_ERR_NOT_REPLICATED &&
                rc != MARKET_ERR_BUSY)
                break;
        }
        after[nafter++] = rc;
    }
    market_conn_free(c);
    buyers_stop(t, &stop);
    assert_true(promoted > 0);
    assert_true(back);
    assert_int_equal(nafter, nvictims);
    for (int k = 0; k < nafter; k++)
        if (after[k] != MARKET_OK)
            fail_msg("realm %s after the failover: %s", g_realm[victims[k]],
                     market_strerror(after[k]));
    for (int r = 0; r < REALMS; r++) {
        int victim = 0;
        for (int k = 0; k < nvictims; k++)
            victim |= victims[k] == r;
        for (int i = r; i < BUYERS; i += REALMS) {
            if (!victim && b[i].other)
                fail_msg("realm %s of a live master: buyer %d failed %d times, the last %s "
                         "(%s), %lld ms after the kill", g_realm[r], i, b[i].other,
                         market_strerror(b[i].last_rc), b[i].last_why,
                         (long long)(b[i].failed_at_ms - killed_at));
            if (victim) assert_true(b[i].failed_at_ms == 0 || b[i].failed_at_ms >= killed_at);
        }
        check_realm_kept(f.c, r, b);
    }
    assert_keys_on_their_masters();
    fx_close(&f);
}

/* ---- group ---- */

static int cluster_setup(void **state) {
    (void)state;
    for (int r = 0; r < REALMS; r++)
        if (market_realm_nth((unsigned)r, g_realm[r], sizeof g_realm[r]) != 0) return -1;
    return th_cluster_start(&g_cl, NODE_TIMEOUT_MS);
}

static int cluster_teardown(void **state) {
    (void)state;
    th_cluster_stop(&g_cl);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_realms_on_every_master_every_operation_works),
        cmocka_unit_test(test_realms_in_parallel_market_strategy),
        cmocka_unit_test(test_realms_in_parallel_item_strategy),
        cmocka_unit_test(test_realms_in_parallel_optimistic_strategy),
        cmocka_unit_test(test_two_realms_in_one_slot_stay_apart),
        cmocka_unit_test(test_purchase_meets_a_split_slot_waits_then_buys),
        cmocka_unit_test(test_slot_moves_between_read_and_commit_buys_once),
        cmocka_unit_test(test_split_slot_does_not_hold_up_its_lane_redis_lock),
        cmocka_unit_test(test_split_slot_does_not_hold_up_its_lane_local_lock),
        cmocka_unit_test(test_reshard_under_load_loses_nothing),
        cmocka_unit_test(test_master_killed_others_go_on_no_ok_lost),
    };
    return cmocka_run_group_tests_name("market on a Redis Cluster", tests, cluster_setup,
                                       cluster_teardown);
}
