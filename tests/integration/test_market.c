/* test_market.c - market/ against a real redis-server: trades, refusals, races, faults.
 *
 * Every test starts from a freshly seeded world in a throwaway redis-server,
 * with the redis lock backend on the same server (the production setup).
 */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"
#include "rconn/rconn.h"
#include "market/market.h"
#include "tests/helpers/redis_proc.h"

#define REALM MARKET_REALM_DEFAULT /* the realm these tests use */
#define MARKET_LOCK_KEY_MAIN "lock:market:{main}" /* its market lock */

static th_redis redis;
static enum market_strategy strategy; /* the group being run */

struct fx {
    lock_client *lock;
    market *m;
    market_conn *c;
    market_config cfg;
};

/* ---- helpers ---- */

static market_config config(uint32_t ttl_ms, uint32_t wait_ms, uint32_t stall_ms) {
    market_config cfg = {.redis_timeout_ms = 1000, .lock_ttl_ms = ttl_ms,
                         .acquire_timeout_ms = wait_ms, .test_stall_ms = stall_ms,
                         .strategy = strategy};
    assert_int_equal(rconn_addr_parse(redis.url, &cfg.redis), RCONN_OK);
    return cfg;
}

/* The classic world: A lists an axe at 500; B has 800; C has 100; D is rich. */
static void seed_classic(market_conn *c) {
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "A", "Alice", 100), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "B", "Bob", 800), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "C", "Carol", 100), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "D", "Dave", 1000000), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "A", "axe", 500), MARKET_OK);
    assert_int_equal(market_world_add_item(w, "A", "shield"), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "C", "bow", 50), MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
}

static int64_t funds_of(market_conn *c, const char *id) {
    market_player *p = NULL;
    assert_int_equal(market_player_get(c, REALM, id, &p), MARKET_OK);
    int64_t f = p->funds;
    market_player_free(p);
    return f;
}

static int holds(market_conn *c, const char *id, const char *item) {
    market_player *p = NULL;
    assert_int_equal(market_player_get(c, REALM, id, &p), MARKET_OK);
    int found = 0;
    for (size_t i = 0; i < p->n_inventory; i++) found |= strcmp(p->inventory[i], item) == 0;
    market_player_free(p);
    return found;
}

static int listed(market_conn *c, const char *item, const char *seller) {
    market_listing *l = NULL;
    size_t n = 0, total = 0;
    assert_int_equal(market_listings(c, REALM, 0, 1000, &l, &n, &total), MARKET_OK);
    int found = 0;
    for (size_t i = 0; i < n; i++)
        found |= strcmp(l[i].item, item) == 0 && strcmp(l[i].seller, seller) == 0;
    free(l);
    return found;
}

static void assert_invariants(market_conn *c, int64_t total_funds, size_t items) {
    market_audit_report a;
    assert_int_equal(market_audit(c, REALM, &a), MARKET_OK);
    assert_int_equal(a.total_funds, total_funds);
    assert_int_equal(a.negative_funds, 0);
    assert_int_equal(a.items_misplaced, 0);
    assert_int_equal(a.index_mismatch, 0);
    assert_int_equal(a.items_held + a.items_listed, items);
}

#define CLASSIC_FUNDS (100 + 800 + 100 + 1000000)
#define CLASSIC_ITEMS 3

static int fx_setup(void **state) {
    struct fx *f = calloc(1, sizeof *f);
    int err;
    f->cfg = config(5000, 2000, 0);
    f->lock = lock_redis_new(&f->cfg.redis, 1000, &err);
    f->m = market_new(&f->cfg, f->lock, &err);
    f->c = market_conn_new(f->m, &err);
    if (!f->lock || !f->m || !f->c) return -1;
    seed_classic(f->c);
    *state = f;
    return 0;
}

static int fx_teardown(void **state) {
    struct fx *f = *state;
    market_conn_free(f->c);
    market_free(f->m);
    lock_free(f->lock);
    free(f);
    return 0;
}

/* ---- trades ---- */

static void test_purchase_classic_trade_moves_funds_and_item(void **state) {
    struct fx *f = *state;
    market_purchase_result r = {0};
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", -1, &r), MARKET_OK);
    assert_int_equal(r.price, 500);
    assert_int_equal(r.buyer_funds, 300);
    assert_int_equal(funds_of(f->c, "B"), 300);
    assert_int_equal(funds_of(f->c, "A"), 600);
    assert_true(holds(f->c, "B", "axe"));
    assert_false(listed(f->c, "axe", "A"));
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

static void test_purchase_twice_second_not_listed(void **state) {
    struct fx *f = *state;
    market_purchase_result r = {0};
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", -1, &r), MARKET_OK);
    assert_int_equal(market_purchase(f->c, REALM, "D", "A", "axe", -1, &r), MARKET_ERR_NOT_LISTED);
    assert_int_equal(funds_of(f->c, "D"), 1000000);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

static void test_purchase_poor_buyer_insufficient_nothing_moved(void **state) {
    struct fx *f = *state;
    market_purchase_result r = {0};
    assert_int_equal(market_purchase(f->c, REALM, "C", "A", "axe", -1, &r),
                     MARKET_ERR_INSUFFICIENT_FUNDS);
    assert_int_equal(funds_of(f->c, "C"), 100);
    assert_int_equal(funds_of(f->c, "A"), 100);
    assert_true(listed(f->c, "axe", "A"));
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

static void test_purchase_wrong_price_price_changed(void **state) {
    struct fx *f = *state;
    market_purchase_result r = {0};
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", 400, &r), MARKET_ERR_PRICE_CHANGED);
    assert_int_equal(r.price, 500);
    assert_true(listed(f->c, "axe", "A"));
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", 500, &r), MARKET_OK);
}

static void test_purchase_unknown_buyer_no_player(void **state) {
    struct fx *f = *state;
    market_purchase_result r = {0};
    assert_int_equal(market_purchase(f->c, REALM, "nobody", "A", "axe", -1, &r), MARKET_ERR_NO_PLAYER);
    assert_true(listed(f->c, "axe", "A"));
}

static void test_purchase_bad_arguments_invalid(void **state) {
    struct fx *f = *state;
    market_purchase_result r = {0};
    assert_int_equal(market_purchase(f->c, REALM, "A", "A", "axe", -1, &r), MARKET_ERR_INVALID);
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "a.x", -1, &r), MARKET_ERR_INVALID);
    assert_int_equal(market_purchase(f->c, REALM, "", "A", "axe", -1, &r), MARKET_ERR_INVALID);
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", MARKET_PRICE_MAX + 1, &r),
                     MARKET_ERR_INVALID);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

static void test_purchase_seller_would_overflow_refused(void **state) {
    struct fx *f = *state;
    market_world *w = market_world_new();
    assert_int_equal(market_world_add_player(w, "rich", "Rich", INT64_MAX - 10), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "rich", "crown", 500), MARKET_OK);
    assert_int_equal(market_world_store(f->c, REALM, w, 0), MARKET_OK);
    market_world_free(w);
    market_purchase_result r = {0};
    assert_int_equal(market_purchase(f->c, REALM, "B", "rich", "crown", -1, &r), MARKET_ERR_OVERFLOW);
    assert_int_equal(funds_of(f->c, "B"), 800);
    assert_int_equal(funds_of(f->c, "rich"), INT64_MAX - 10);
    assert_true(listed(f->c, "crown", "rich"));
}

/* ---- list and unlist ---- */

static void test_list_then_unlist_round_trip(void **state) {
    struct fx *f = *state;
    assert_int_equal(market_list(f->c, REALM, "A", "shield", 42), MARKET_OK);
    assert_false(holds(f->c, "A", "shield"));
    assert_true(listed(f->c, "shield", "A"));
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
    int64_t price = 0;
    assert_int_equal(market_unlist(f->c, REALM, "A", "shield", &price), MARKET_OK);
    assert_int_equal(price, 42);
    assert_true(holds(f->c, "A", "shield"));
    assert_false(listed(f->c, "shield", "A"));
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

static void test_list_item_not_held_refused(void **state) {
    struct fx *f = *state;
    assert_int_equal(market_list(f->c, REALM, "B", "shield", 42), MARKET_ERR_NOT_HELD);
    assert_int_equal(market_list(f->c, REALM, "A", "axe", 42), MARKET_ERR_NOT_HELD); /* listed already */
    assert_int_equal(market_list(f->c, REALM, "A", "shield", 0), MARKET_ERR_INVALID);
    int64_t price;
    assert_int_equal(market_unlist(f->c, REALM, "B", "axe", &price), MARKET_ERR_NOT_LISTED);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

static void test_listings_sorted_by_price_and_paged(void **state) {
    struct fx *f = *state;
    market_listing *l = NULL;
    size_t n = 0, total = 0;
    assert_int_equal(market_listings(f->c, REALM, 0, 10, &l, &n, &total), MARKET_OK);
    assert_int_equal(total, 2);
    assert_int_equal(n, 2);
    assert_string_equal(l[0].item, "bow");
    assert_int_equal(l[0].price, 50);
    assert_string_equal(l[1].item, "axe");
    assert_string_equal(l[1].seller, "A");
    free(l);
    assert_int_equal(market_listings(f->c, REALM, 1, 10, &l, &n, &total), MARKET_OK);
    assert_int_equal(n, 1);
    assert_string_equal(l[0].item, "axe");
    free(l);
    assert_int_equal(market_listings(f->c, REALM, 5, 10, &l, &n, &total), MARKET_OK);
    assert_int_equal(n, 0);
    assert_null(l);
}

static void test_player_get_unknown_no_player(void **state) {
    struct fx *f = *state;
    market_player *p = (market_player *)1;
    assert_int_equal(market_player_get(f->c, REALM, "ghost", &p), MARKET_ERR_NO_PLAYER);
    assert_null(p);
    assert_int_equal(market_player_get(f->c, REALM, "A", &p), MARKET_OK);
    assert_string_equal(p->name, "Alice");
    assert_int_equal(p->n_inventory, 1);
    assert_string_equal(p->inventory[0], "shield");
    market_player_free(p);
}

/* ---- seeding and auditing ---- */

static void test_world_duplicate_item_writes_nothing(void **state) {
    struct fx *f = *state;
    market_world *w = market_world_new();
    assert_int_equal(market_world_add_player(w, "X", NULL, 5), MARKET_OK);
    assert_int_equal(market_world_add_item(w, "X", "gem"), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "X", "gem", 9), MARKET_OK);
    char why[128];
    assert_int_equal(market_world_check(w, why, sizeof why), MARKET_ERR_DUPLICATE);
    assert_non_null(strstr(why, "gem"));
    assert_int_equal(market_world_store(f->c, REALM, w, 1), MARKET_ERR_DUPLICATE);
    market_world_free(w);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS); /* the reset did not happen */
}

static void test_world_unknown_owner_refused(void **state) {
    (void)state;
    market_world *w = market_world_new();
    assert_int_equal(market_world_add_player(w, "X", NULL, 5), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "Y", "gem", 9), MARKET_OK);
    char why[128];
    assert_int_equal(market_world_check(w, why, sizeof why), MARKET_ERR_NO_PLAYER);
    assert_non_null(strstr(why, "Y"));
    market_world_free(w);
}

static void test_world_generate_lists_every_item(void **state) {
    struct fx *f = *state;
    market_world *w = market_world_new();
    assert_int_equal(market_world_generate(w, 10, 1000, 777, 5, 9, 42), MARKET_OK);
    assert_int_equal(market_world_store(f->c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    market_audit_report a;
    assert_int_equal(market_audit(f->c, REALM, &a), MARKET_OK);
    assert_int_equal(a.players, 10);
    assert_int_equal(a.total_funds, 7770);
    assert_int_equal(a.items_listed, 1000);
    assert_int_equal(a.items_held, 0);
    market_listing *l = NULL;
    size_t n, total;
    assert_int_equal(market_listings(f->c, REALM, 0, 1000, &l, &n, &total), MARKET_OK);
    for (size_t i = 0; i < n; i++) assert_in_range(l[i].price, 5, 9);
    free(l);
}

static void test_audit_item_in_two_places_counted(void **state) {
    struct fx *f = *state;
    redisContext *rc = redisConnect("127.0.0.1", redis.port);
    assert_non_null(rc);
    redisReply *r = redisCommand(rc, "SADD inventory:{main}:B axe"); /* axe is also listed */
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(rc);
    market_audit_report a;
    assert_int_equal(market_audit(f->c, REALM, &a), MARKET_OK);
    assert_int_equal(a.items_misplaced, 1);
}

/* ---- concurrency ---- */

struct racer {
    market *m;
    const char *buyer, *seller, *item;
    int rc;
    pthread_barrier_t *start;
};

static void *race(void *arg) {
    struct racer *r = arg;
    market_conn *c = market_conn_new(r->m, NULL);
    market_purchase_result res;
    pthread_barrier_wait(r->start);
    r->rc = c ? market_purchase(c, REALM, r->buyer, r->seller, r->item, -1, &res) : MARKET_ERR_NOMEM;
    market_conn_free(c);
    return NULL;
}

#define RACERS 16

static void test_many_buyers_one_item_exactly_one_wins(void **state) {
    struct fx *f = *state;
    market_world *w = market_world_new();
    char ids[RACERS][24];
    for (int i = 0; i < RACERS; i++) {
        snprintf(ids[i], sizeof ids[i], "racer%d", i);
        assert_int_equal(market_world_add_player(w, ids[i], NULL, 1000), MARKET_OK);
    }
    assert_int_equal(market_world_store(f->c, REALM, w, 0), MARKET_OK);
    market_world_free(w);

    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, RACERS);
    struct racer r[RACERS];
    pthread_t t[RACERS];
    for (int i = 0; i < RACERS; i++) {
        r[i] = (struct racer){f->m, ids[i], "A", "axe", 1, &start};
        assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    int won = 0, lost = 0;
    for (int i = 0; i < RACERS; i++) {
        pthread_join(t[i], NULL);
        won += r[i].rc == MARKET_OK;
        lost += r[i].rc == MARKET_ERR_NOT_LISTED;
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(won, 1);
    assert_int_equal(lost, RACERS - 1);
    assert_invariants(f->c, CLASSIC_FUNDS + RACERS * 1000, CLASSIC_ITEMS);
}

/* ---- realms ---- */

/* The classic world in realm. */
static void seed_classic_in(market_conn *c, const char *realm) {
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "A", "Alice", 100), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "B", "Bob", 800), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "A", "axe", 500), MARKET_OK);
    assert_int_equal(market_world_store(c, realm, w, 1), MARKET_OK);
    market_world_free(w);
}

static int64_t funds_in(market_conn *c, const char *realm, const char *id) {
    market_player *p = NULL;
    assert_int_equal(market_player_get(c, realm, id, &p), MARKET_OK);
    int64_t v = p->funds;
    market_player_free(p);
    return v;
}

/* Every key the market and its lock wrote carries a realm's hash tag: one
 * realm's purchase touches one Redis Cluster slot. */
static void assert_every_key_tagged(void) {
    redisContext *rc = redisConnect("127.0.0.1", redis.port);
    assert_non_null(rc);
    redisReply *r = redisCommand(rc, "KEYS *");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_true(r->elements > 0);
    for (size_t i = 0; i < r->elements; i++) {
        const char *k = r->element[i]->str, *open = strchr(k, '{');
        if (!open || !strchr(open + 2, '}')) fail_msg("key %s has no hash tag", k);
    }
    freeReplyObject(r);
    redisFree(rc);
}

static void test_realms_are_separate_worlds(void **state) {
    struct fx *f = *state;
    seed_classic_in(f->c, "eu-1");
    market_purchase_result res;
    assert_int_equal(market_purchase(f->c, "eu-1", "B", "A", "axe", -1, &res), MARKET_OK);
    assert_int_equal(res.buyer_funds, 300);
    /* the same ids in the default realm did not move */
    assert_int_equal(funds_of(f->c, "B"), 800);
    assert_int_equal(funds_of(f->c, "A"), 100);
    assert_true(listed(f->c, "axe", "A"));
    assert_false(holds(f->c, "B", "axe"));
    assert_int_equal(funds_in(f->c, "eu-1", "A"), 600);
    assert_int_equal(market_purchase(f->c, "eu-1", "B", "A", "axe", -1, &res),
                     MARKET_ERR_NOT_LISTED);
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", -1, &res), MARKET_OK);
    /* a player of one realm is unknown in another */
    assert_int_equal(market_purchase(f->c, "eu-1", "D", "C", "bow", -1, &res),
                     MARKET_ERR_NOT_LISTED);
    market_player *p = NULL;
    assert_int_equal(market_player_get(f->c, "eu-1", "D", &p), MARKET_ERR_NO_PLAYER);
    market_audit_report a;
    assert_int_equal(market_audit(f->c, "eu-1", &a), MARKET_OK);
    assert_int_equal(a.players, 2);
    assert_int_equal(a.total_funds, 900);
    assert_int_equal(a.items_held + a.items_listed, 1);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
    /* an idempotency key is per realm and player */
    const market_idem k = {"K1", "fp"};
    assert_int_equal(market_list_idem(f->c, "eu-1", "B", "axe", 700, &k, NULL), MARKET_OK);
    assert_int_equal(market_list_idem(f->c, REALM, "B", "axe", 700, &k, NULL), MARKET_OK);
    assert_true(listed(f->c, "axe", "B"));
    assert_every_key_tagged();
}

static void test_realm_ids_are_validated(void **state) {
    struct fx *f = *state;
    market_purchase_result res;
    const char *bad[] = {"", "eu 1", "{eu}", "eu:1", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(market_purchase(f->c, bad[i], "B", "A", "axe", -1, &res),
                         MARKET_ERR_INVALID);
        assert_int_equal(market_list(f->c, bad[i], "A", "shield", 5), MARKET_ERR_INVALID);
        market_player *p = NULL;
        assert_int_equal(market_player_get(f->c, bad[i], "A", &p), MARKET_ERR_INVALID);
    }
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
    assert_true(listed(f->c, "axe", "A"));
}

#define REALMS 12
#define REALM_BUYERS 64
#define REALM_PLAYERS 8
#define REALM_ITEMS 48

struct realm_buyer {
    market *m;
    char realm[8], buyer[8];
    int first;   /* the item it starts with */
    int ok;      /* purchases it made */
    int refused; /* not listed any more, not enough funds */
    int other;   /* anything else: a failure */
};

static void *realm_buy(void *arg) {
    struct realm_buyer *b = arg;
    market_conn *c = market_conn_new(b->m, NULL);
    if (!c) {
        b->other++;
        return NULL;
    }
    for (int k = 0; k < REALM_ITEMS; k++) {
        int i = (b->first + k) % REALM_ITEMS;
        char item[16], seller[16];
        snprintf(item, sizeof item, "i%d", i);
        /* market_world_generate lists item i by player i % players */
        snprintf(seller, sizeof seller, "p%d", i % REALM_PLAYERS);
        if (strcmp(seller, b->buyer) == 0) continue;
        market_purchase_result res;
        int rc = market_purchase(c, b->realm, b->buyer, seller, item, -1, &res);
        if (rc == MARKET_OK)
            b->ok++;
        else if (rc == MARKET_ERR_NOT_LISTED || rc == MARKET_ERR_INSUFFICIENT_FUNDS)
            b->refused++;
        else
            b->other++;
    }
    market_conn_free(c);
    return NULL;
}

/* 64 buyers over 12 realms at once: each realm keeps its own invariants,
 * and what left each realm's market is what its buyers were told they
 * bought. */
static void test_realms_in_parallel_keep_their_invariants(void **state) {
    struct fx *f = *state;
    market_audit_report before[REALMS];
    char names[REALMS][8];
    for (int r = 0; r < REALMS; r++) {
        assert_int_equal(market_realm_nth((unsigned)r, names[r], sizeof names[r]), 0);
        market_world *w = market_world_new();
        assert_non_null(w);
        assert_int_equal(market_world_generate(w, REALM_PLAYERS, REALM_ITEMS, 3000, 10, 200,
                                               (uint64_t)r + 1),
                         MARKET_OK);
        assert_int_equal(market_world_store(f->c, names[r], w, 1), MARKET_OK);
        market_world_free(w);
        assert_int_equal(market_audit(f->c, names[r], &before[r]), MARKET_OK);
        assert_int_equal(before[r].items_listed, REALM_ITEMS);
    }
    static struct realm_buyer b[REALM_BUYERS];
    pthread_t t[REALM_BUYERS];
    for (int i = 0; i < REALM_BUYERS; i++) {
        b[i] = (struct realm_buyer){.m = f->m, .first = (i * 7) % REALM_ITEMS};
        snprintf(b[i].realm, sizeof b[i].realm, "%s", names[i % REALMS]);
        snprintf(b[i].buyer, sizeof b[i].buyer, "p%d", (i / REALMS) % REALM_PLAYERS);
        assert_int_equal(pthread_create(&t[i], NULL, realm_buy, &b[i]), 0);
    }
    int ok[REALMS] = {0};
    for (int i = 0; i < REALM_BUYERS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(b[i].other, 0);
        ok[i % REALMS] += b[i].ok;
    }
    int total_ok = 0;
    for (int r = 0; r < REALMS; r++) {
        market_audit_report a;
        assert_int_equal(market_audit(f->c, names[r], &a), MARKET_OK);
        assert_int_equal(a.total_funds, before[r].total_funds);
        assert_int_equal(a.negative_funds, 0);
        assert_int_equal(a.items_misplaced, 0);
        assert_int_equal(a.items_held + a.items_listed, REALM_ITEMS);
        assert_int_equal(before[r].items_listed - a.items_listed, ok[r]);
        total_ok += ok[r];
    }
    assert_true(total_ok > REALMS); /* the buyers did buy, in every strategy */
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS); /* the default realm untouched */
    assert_every_key_tagged();
}

/* ---- submitted orders (market_order_submit) ---- */

struct outcome {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls; /* done calls so far, over every order sharing this outcome */
};

struct pending {
    market_order p;
    struct outcome *o;
    int rc;
    int calls;
};

static void pending_done(market_order *p) {
    struct pending *pd = p->ud;
    pthread_mutex_lock(&pd->o->mu);
    pd->rc = p->rc;
    pd->calls++;
    pd->o->calls++;
    pthread_cond_signal(&pd->o->cv);
    pthread_mutex_unlock(&pd->o->mu);
}

static void pending_init(struct pending *pd, struct outcome *o, const char *buyer,
                         const char *seller, const char *item) {
    *pd = (struct pending){.p = {.type = MARKET_ORDER_PURCHASE, .realm = REALM, .player = buyer,
                                 .seller = seller, .item = item, .price = -1,
                                 .done = pending_done},
                           .o = o};
    pd->p.ud = pd;
}

static void outcome_wait(struct outcome *o, int calls) {
    pthread_mutex_lock(&o->mu);
    while (o->calls < calls) pthread_cond_wait(&o->cv, &o->mu);
    pthread_mutex_unlock(&o->mu);
}

/* Submitted purchases are decided in submission order, each done called
 * exactly once with its outcome; a bad one is refused at once, without a
 * call. Every strategy takes submissions: the optimistic one too is served
 * by the combiner, without a lock. */
static void test_submit_outcomes_in_order_done_once(void **state) {
    struct fx *f = *state;
    struct outcome o = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    struct pending a, b, bad;
    pending_init(&a, &o, "B", "A", "axe");
    pending_init(&b, &o, "D", "A", "axe");
    pending_init(&bad, &o, "C", "C", "bow");
    assert_int_equal(market_can_submit(f->m), 1);
    assert_int_equal(market_order_submit(f->m, &a.p), MARKET_OK);
    assert_int_equal(market_order_submit(f->m, &b.p), MARKET_OK);
    assert_int_equal(market_order_submit(f->m, &bad.p), MARKET_ERR_INVALID);
    outcome_wait(&o, 2);
    assert_int_equal(a.rc, MARKET_OK);
    assert_int_equal(a.p.res.purchase.price, 500);
    assert_int_equal(a.p.res.purchase.buyer_funds, 300);
    assert_int_equal(b.rc, MARKET_ERR_NOT_LISTED);
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL); /* a second call would come from the worker by now */
    assert_int_equal(a.calls, 1);
    assert_int_equal(b.calls, 1);
    assert_int_equal(bad.calls, 0);
    assert_int_equal(funds_of(f->c, "B"), 300);
    assert_int_equal(funds_of(f->c, "D"), 1000000);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

/* Every order type the market serves is handed over with
 * market_order_submit() without waiting: a list, an unlist and purchases of
 * one realm are served in the order they came (the purchase finds the
 * listing the list made; the second finds the one the unlist took back
 * gone), each done called once with its outcome, and the store shows what
 * they did. A bad order is refused at once, without a call. */
static void test_order_submit_list_unlist_purchase(void **state) {
    struct fx *f = *state;
    struct outcome o = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    struct pending list, unlist, buy, gone, bad;
    pending_init(&list, &o, "A", NULL, "shield");
    list.p.type = MARKET_ORDER_LIST;
    list.p.price = 70;
    pending_init(&unlist, &o, "C", NULL, "bow");
    unlist.p.type = MARKET_ORDER_UNLIST;
    pending_init(&buy, &o, "D", "A", "shield");
    buy.p.price = 70;
    pending_init(&gone, &o, "B", "C", "bow");
    pending_init(&bad, &o, "A", NULL, "no such item!");
    bad.p.type = MARKET_ORDER_UNLIST;
    assert_int_equal(market_order_submit(f->m, &list.p), MARKET_OK);
    assert_int_equal(market_order_submit(f->m, &unlist.p), MARKET_OK);
    assert_int_equal(market_order_submit(f->m, &buy.p), MARKET_OK);
    assert_int_equal(market_order_submit(f->m, &gone.p), MARKET_OK);
    assert_int_equal(market_order_submit(f->m, &bad.p), MARKET_ERR_INVALID);
    outcome_wait(&o, 4);
    assert_int_equal(list.rc, MARKET_OK);
    assert_int_equal(list.p.res.list.quantity, 1);
    assert_int_equal(list.p.res.list.replayed, 0);
    assert_int_equal(unlist.rc, MARKET_OK);
    assert_int_equal(unlist.p.res.unlist.price, 50);
    assert_int_equal(unlist.p.res.unlist.units, 1);
    assert_int_equal(buy.rc, MARKET_OK);
    assert_int_equal(buy.p.res.purchase.price, 70);
    assert_int_equal(buy.p.res.purchase.buyer_funds, 1000000 - 70);
    assert_true(market_trade_id_valid(buy.p.res.purchase.trade_id));
    assert_int_equal(gone.rc, MARKET_ERR_NOT_LISTED);
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL); /* a second call would come from the worker by now */
    assert_int_equal(list.calls + unlist.calls + buy.calls + gone.calls, 4);
    assert_int_equal(bad.calls, 0);
    assert_true(holds(f->c, "D", "shield"));
    assert_true(holds(f->c, "C", "bow"));
    assert_false(listed(f->c, "shield", "A"));
    assert_false(listed(f->c, "bow", "C"));
    assert_true(listed(f->c, "axe", "A"));
    assert_int_equal(funds_of(f->c, "A"), 100 + 70);
    assert_int_equal(funds_of(f->c, "B"), 800);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

/* market_shutdown() serves what is queued, releases every lock it took, and
 * refuses later submissions as busy. */
static void test_shutdown_serves_queue_then_refuses(void **state) {
    struct fx *f = *state;
    if (!market_can_submit(f->m)) skip();
    struct outcome o = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    struct pending a, b, late;
    pending_init(&a, &o, "B", "A", "axe");
    pending_init(&b, &o, "D", "C", "bow");
    pending_init(&late, &o, "D", "A", "axe");
    assert_int_equal(market_order_submit(f->m, &a.p), MARKET_OK);
    assert_int_equal(market_order_submit(f->m, &b.p), MARKET_OK);
    market_shutdown(f->m);
    assert_int_equal(o.calls, 2); /* both answered before shutdown returned */
    assert_int_equal(a.rc, MARKET_OK);
    assert_int_equal(b.rc, MARKET_OK);
    assert_int_equal(market_order_submit(f->m, &late.p), MARKET_ERR_BUSY);
    market_purchase_result res;
    assert_int_equal(market_purchase(f->c, REALM, "D", "A", "axe", -1, &res), MARKET_ERR_BUSY);
    assert_int_equal(late.calls, 0);
    /* Every lease was released (none left to expire). */
    redisContext *r = redisConnect("127.0.0.1", redis.port);
    assert_non_null(r);
    static const char *const keys[] = {MARKET_LOCK_KEY_MAIN, "lock:item:{main}:axe.A", "lock:item:{main}:bow.C",
                                       "lock:player:{main}:B", "lock:player:{main}:D"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        redisReply *e = redisCommand(r, "EXISTS %s", keys[i]);
        assert_non_null(e);
        if (e->integer != 0) fprintf(stderr, "%s still held\n", keys[i]);
        assert_int_equal(e->integer, 0);
        freeReplyObject(e);
    }
    redisFree(r);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

/* While buyers race for gone listings (a whole batch of them), a retry of a
 * purchase that succeeded must still replay its stored success, though its
 * listing is gone: the item strategy's unlocked pre-check leaves purchases
 * with an idempotency key to the locked path. */
static void test_idem_retry_replays_while_contended(void **state) {
    struct fx *f = *state;
    if (!market_can_submit(f->m)) skip();
    market_idem k = {"order-1", "fp-1"};
    market_purchase_result res;
    assert_int_equal(market_purchase_idem(f->c, REALM, "B", "A", "axe", -1, &k, &res), MARKET_OK);
    /* Hold the worker on a lock while eight purchases of gone listings queue
     * up, so that they make one batch: the market then reads as contended. */
    int err;
    lock_client *l = lock_redis_new(&f->cfg.redis, 1000, &err);
    assert_non_null(l);
    lock_handle h;
    const char *block = strategy == MARKET_STRATEGY_ITEM ? "lock:player:{main}:C" : MARKET_LOCK_KEY_MAIN;
    assert_int_equal(lock_acquire(l, block, 30000, 30000, &h), LOCK_OK);
    struct outcome o = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    struct pending blocker, ghost[8];
    char items[8][24];
    pending_init(&blocker, &o, "C", "A", "shield"); /* refused in the end: not listed */
    assert_int_equal(market_order_submit(f->m, &blocker.p), MARKET_OK);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL); /* the worker is waiting for the lock now */
    for (int i = 0; i < 8; i++) {
        snprintf(items[i], sizeof items[i], "ghost%d", i);
        pending_init(&ghost[i], &o, "D", "A", items[i]);
        assert_int_equal(market_order_submit(f->m, &ghost[i].p), MARKET_OK);
    }
    assert_int_equal(lock_release(l, &h), LOCK_OK);
    outcome_wait(&o, 9);
    for (int i = 0; i < 8; i++) assert_int_equal(ghost[i].rc, MARKET_ERR_NOT_LISTED);
    lock_free(l);
    /* The retry: replayed, not refused, nothing charged again. */
    memset(&res, 0, sizeof res);
    assert_int_equal(market_purchase_idem(f->c, REALM, "B", "A", "axe", -1, &k, &res), MARKET_OK);
    assert_int_equal(res.replayed, 1);
    assert_int_equal(res.buyer_funds, 300);
    assert_int_equal(funds_of(f->c, "B"), 300);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

static void test_one_buyer_funds_for_one_never_negative(void **state) {
    struct fx *f = *state;
    market_world *w = market_world_new();
    char items[RACERS][16];
    assert_int_equal(market_world_add_player(w, "poor", NULL, 600), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "merchant", NULL, 0), MARKET_OK);
    for (int i = 0; i < RACERS; i++) {
        snprintf(items[i], sizeof items[i], "ring%d", i);
        assert_int_equal(market_world_add_listing(w, "merchant", items[i], 500), MARKET_OK);
    }
    assert_int_equal(market_world_store(f->c, REALM, w, 0), MARKET_OK);
    market_world_free(w);

    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, RACERS);
    struct racer r[RACERS];
    pthread_t t[RACERS];
    for (int i = 0; i < RACERS; i++) {
        r[i] = (struct racer){f->m, "poor", "merchant", items[i], 1, &start};
        assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    int won = 0, poor = 0;
    for (int i = 0; i < RACERS; i++) {
        pthread_join(t[i], NULL);
        won += r[i].rc == MARKET_OK;
        poor += r[i].rc == MARKET_ERR_INSUFFICIENT_FUNDS;
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(won, 1);
    assert_int_equal(poor, RACERS - 1);
    assert_int_equal(funds_of(f->c, "poor"), 100);
    assert_int_equal(funds_of(f->c, "merchant"), 500);
    assert_invariants(f->c, CLASSIC_FUNDS + 600, CLASSIC_ITEMS + RACERS);
}

/* Many purchases at once, with every kind of outcome: two buyers racing for
 * each of several items, a buyer who can afford only some of what it tries,
 * a buyer who does not exist. Whatever the interleaving or batching, the
 * result must be one that serial execution could give. */
static void test_batch_mixed_outcomes_match_serial_order(void **state) {
    struct fx *f = *state;
    market_world *w = market_world_new();
    char items[8][24];
    assert_int_equal(market_world_add_player(w, "shop", NULL, 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "thrifty", NULL, 250), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "spender", NULL, 100000), MARKET_OK);
    for (int i = 0; i < 8; i++) {
        snprintf(items[i], sizeof items[i], "gem%d", i);
        assert_int_equal(market_world_add_listing(w, "shop", items[i], 100), MARKET_OK);
    }
    assert_int_equal(market_world_store(f->c, REALM, w, 0), MARKET_OK);
    market_world_free(w);

    enum { N = 24 };
    static const char *const buyers[3] = {"thrifty", "spender", "ghost"};
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, N);
    struct racer r[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        r[i] = (struct racer){f->m, buyers[i % 3], "shop", items[i % 8], 1, &start};
        assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    int won[3] = {0}, other = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        int b = i % 3;
        if (r[i].rc == MARKET_OK) won[b]++;
        else if (b == 2 && r[i].rc == MARKET_ERR_NO_PLAYER) continue;
        else if (r[i].rc != MARKET_ERR_NOT_LISTED && r[i].rc != MARKET_ERR_INSUFFICIENT_FUNDS)
            other++;
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(other, 0);
    assert_int_equal(won[2], 0);
    assert_true(won[0] <= 2); /* 250 buys at most two gems at 100 */
    assert_int_equal(won[0] + won[1], 8); /* every gem sold: spender can afford all */
    assert_int_equal(funds_of(f->c, "thrifty"), 250 - 100 * won[0]);
    assert_int_equal(funds_of(f->c, "shop"), 800);
    assert_invariants(f->c, CLASSIC_FUNDS + 100250, CLASSIC_ITEMS + 8);
}

/* ---- idempotency ---- */

static void test_idem_repeat_replays_without_charging(void **state) {
    struct fx *f = *state;
    market_idem k = {"order-1", "fp-axe"};
    market_purchase_result r = {0}, again = {0};
    assert_int_equal(market_purchase_idem(f->c, REALM, "B", "A", "axe", -1, &k, &r), MARKET_OK);
    assert_int_equal(r.replayed, 0);
    assert_int_equal(r.buyer_funds, 300);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(market_purchase_idem(f->c, REALM, "B", "A", "axe", -1, &k, &again), MARKET_OK);
        assert_int_equal(again.replayed, 1);
        assert_int_equal(again.price, 500);
        assert_int_equal(again.buyer_funds, 300);
    }
    assert_int_equal(funds_of(f->c, "B"), 300);
    market_idem other = {"order-1", "fp-bow"};
    assert_int_equal(market_purchase_idem(f->c, REALM, "B", "C", "bow", -1, &other, &again),
                     MARKET_ERR_IDEM_MISMATCH);
    assert_true(listed(f->c, "bow", "C"));
    /* Keys are per player: D may use the same key for its own purchase. */
    assert_int_equal(market_purchase_idem(f->c, REALM, "D", "C", "bow", -1, &other, &again), MARKET_OK);
    assert_int_equal(again.replayed, 0);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

/* Runs one command on the test's Redis and returns its reply (caller frees). */
static redisReply *redis_cmd(const char *fmt, ...) {
    redisContext *rc0 = redisConnect("127.0.0.1", redis.port);
    assert_non_null(rc0);
    assert_int_equal(rc0->err, 0);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(rc0, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    redisFree(rc0);
    return r;
}

static void redis_do(const char *fmt, ...) {
    redisContext *rc0 = redisConnect("127.0.0.1", redis.port);
    assert_non_null(rc0);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(rc0, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    redisFree(rc0);
}

/* A refusal is final: the same key answers the same refusal later, even
 * when the purchase could now succeed, and nothing is bought. */
static void test_idem_refusal_is_final(void **state) {
    struct fx *f = *state;
    market_idem k = {"try", "fp"};
    market_purchase_result r = {0};
    assert_int_equal(market_purchase_idem(f->c, REALM, "C", "A", "axe", -1, &k, &r),
                     MARKET_ERR_INSUFFICIENT_FUNDS);
    assert_int_equal(r.replayed, 0);
    redis_do("HINCRBY users:{main}:C funds 1000"); /* C could pay now */
    assert_int_equal(market_purchase_idem(f->c, REALM, "C", "A", "axe", -1, &k, &r),
                     MARKET_ERR_INSUFFICIENT_FUNDS);
    assert_int_equal(r.replayed, 1);
    assert_int_equal(funds_of(f->c, "C"), 1100);
    assert_true(listed(f->c, "axe", "A"));
    /* price_changed keeps the price it answered */
    market_idem kp = {"try-price", "fp"};
    assert_int_equal(market_purchase_idem(f->c, REALM, "C", "A", "axe", 400, &kp, &r),
                     MARKET_ERR_PRICE_CHANGED);
    assert_int_equal(r.price, 500);
    memset(&r, 0, sizeof r);
    assert_int_equal(market_purchase_idem(f->c, REALM, "C", "A", "axe", 400, &kp, &r),
                     MARKET_ERR_PRICE_CHANGED);
    assert_int_equal(r.replayed, 1);
    assert_int_equal(r.price, 500);
    /* a new key is a new request */
    market_idem k2 = {"try-2", "fp"};
    assert_int_equal(market_purchase_idem(f->c, REALM, "C", "A", "axe", -1, &k2, &r), MARKET_OK);
    assert_int_equal(funds_of(f->c, "C"), 600);
    /* a refused listing is final too */
    int replayed = -1;
    market_idem kl = {"sell", "fpl"};
    assert_int_equal(market_list_idem(f->c, REALM, "B", "shield", 10, &kl, &replayed),
                     MARKET_ERR_NOT_HELD);
    assert_int_equal(replayed, 0);
    assert_int_equal(market_list_idem(f->c, REALM, "B", "shield", 10, &kl, &replayed),
                     MARKET_ERR_NOT_HELD);
    assert_int_equal(replayed, 1);
    market_idem bad = {"has space", "fp"};
    assert_int_equal(market_purchase_idem(f->c, REALM, "B", "A", "axe", -1, &bad, &r), MARKET_ERR_INVALID);
    assert_invariants(f->c, CLASSIC_FUNDS + 1000, CLASSIC_ITEMS);
}

static void test_idem_list_replays(void **state) {
    struct fx *f = *state;
    market_idem k = {"sell-shield", "fp1"};
    int replayed = -1;
    assert_int_equal(market_list_idem(f->c, REALM, "A", "shield", 42, &k, &replayed), MARKET_OK);
    assert_int_equal(replayed, 0);
    assert_int_equal(market_list_idem(f->c, REALM, "A", "shield", 42, &k, &replayed), MARKET_OK);
    assert_int_equal(replayed, 1);
    market_idem k2 = {"sell-shield", "fp2"};
    assert_int_equal(market_list_idem(f->c, REALM, "A", "shield", 43, &k2, &replayed),
                     MARKET_ERR_IDEM_MISMATCH);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

struct idem_racer {
    market *m;
    const char *item;
    const market_idem *idem;
    int rc, replayed;
    pthread_barrier_t *start;
};

static void *idem_race(void *arg) {
    struct idem_racer *r = arg;
    market_conn *c = market_conn_new(r->m, NULL);
    market_purchase_result res = {0};
    pthread_barrier_wait(r->start);
    r->rc = c ? market_purchase_idem(c, REALM, "D", "A", r->item, -1, r->idem, &res) : MARKET_ERR_NOMEM;
    r->replayed = res.replayed;
    market_conn_free(c);
    return NULL;
}

/* The same request sent many times at once (a client retrying over several
 * connections) is done once; every other copy is a replay of it. */
static void test_idem_concurrent_repeats_charged_once(void **state) {
    struct fx *f = *state;
    enum { N = 12 };
    market_idem k = {"dup", "fp-axe"};
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, N);
    struct idem_racer r[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        r[i] = (struct idem_racer){f->m, "axe", &k, 1, 0, &start};
        assert_int_equal(pthread_create(&t[i], NULL, idem_race, &r[i]), 0);
    }
    int done = 0, replays = 0, in_progress = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        if (r[i].rc == MARKET_ERR_IN_PROGRESS) {
            in_progress++;
            continue;
        }
        assert_int_equal(r[i].rc, MARKET_OK);
        done += !r[i].replayed;
        replays += r[i].replayed;
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(done, 1);
    assert_int_equal(replays + in_progress, N - 1);
    /* One worker serves a process's purchases in order: a copy comes after
     * the first's outcome, never beside it. Without a worker (optimistic),
     * a copy that reads while the first is deciding is told so. */
    if (market_can_submit(f->m)) assert_int_equal(in_progress, 0);
    assert_int_equal(funds_of(f->c, "D"), 1000000 - 500);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

/* ---- faults ---- */

struct stalled {
    market *m;
    int rc;
};

static void *stalled_purchase(void *arg) {
    struct stalled *s = arg;
    market_conn *c = market_conn_new(s->m, NULL);
    market_purchase_result res;
    s->rc = c ? market_purchase(c, REALM, "B", "A", "axe", -1, &res) : MARKET_ERR_NOMEM;
    market_conn_free(c);
    return NULL;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A holder stalls (test hook) between its read and its commit, past its
 * 100 ms lease; meanwhile another client takes the lock and trades. The
 * stalled holder's commit must be refused, and nothing of it written. */
static void test_stalled_holder_past_lease_cannot_commit(void **state) {
    struct fx *f = *state;
    if (strategy == MARKET_STRATEGY_OPTIMISTIC) skip(); /* no lease to lose */
    market_config slow = config(100, 2000, 400);
    int err;
    market *sm = market_new(&slow, f->lock, &err);
    assert_non_null(sm);
    struct stalled s = {sm, 1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stalled_purchase, &s), 0);
    sleep_ms(200); /* the stalled holder's lease has lapsed; it is still asleep */
    market_purchase_result r;
    assert_int_equal(market_purchase(f->c, REALM, "D", "C", "bow", -1, &r), MARKET_OK);
    pthread_join(t, NULL);
    market_free(sm);
    assert_int_equal(s.rc, MARKET_ERR_LEASE_LOST);
    assert_int_equal(funds_of(f->c, "B"), 800);
    assert_true(listed(f->c, "axe", "A"));
    assert_true(holds(f->c, "D", "bow"));
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

/* The same stall with nobody else around: the lease lapsing alone refuses
 * the commit (the market strategy: the lock key expires under the holder's
 * WATCH; the item strategy: its check of the leases before committing). */
static void test_stalled_holder_lease_expired_alone_refused(void **state) {
    struct fx *f = *state;
    if (strategy == MARKET_STRATEGY_OPTIMISTIC) skip(); /* no lease to lose */
    market_config slow = config(50, 2000, 200);
    int err;
    market *sm = market_new(&slow, f->lock, &err);
    struct stalled s = {sm, 1};
    stalled_purchase(&s);
    market_free(sm);
    assert_int_equal(s.rc, MARKET_ERR_LEASE_LOST);
    assert_int_equal(funds_of(f->c, "B"), 800);
    assert_true(listed(f->c, "axe", "A"));
}

/* The fencing record of listing member's lock: its value, or -1 when there is none. */
static long long fenced_of(const char *member) {
    redisReply *r = redis_cmd("GET lock:item:{main}:%s:fenced", member);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    return v;
}

/* Item strategy: a listing's fencing record lives as long as the listing.
 * Its sale (sold out) or its unlisting deletes the record in the same
 * commit, and listing it again writes the fence of the new lease, above
 * every earlier one: no record is left behind of a listing that is gone,
 * and none is missing under a listing. */
static void test_fenced_record_goes_with_its_listing(void **state) {
    struct fx *f = *state;
    if (strategy != MARKET_STRATEGY_ITEM) skip(); /* the only strategy with a lock a listing */
    market_purchase_result r;
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", -1, &r), MARKET_OK);
    assert_int_equal(fenced_of("axe.A"), -1); /* sold: its record went with it */
    assert_int_equal(market_list(f->c, REALM, "A", "shield", 70), MARKET_OK);
    long long listed_at = fenced_of("shield.A");
    assert_true(listed_at > 0);
    int64_t price;
    assert_int_equal(market_unlist(f->c, REALM, "A", "shield", &price), MARKET_OK);
    assert_int_equal(fenced_of("shield.A"), -1); /* taken back: gone */
    assert_int_equal(market_list(f->c, REALM, "A", "shield", 80), MARKET_OK);
    assert_true(fenced_of("shield.A") > listed_at); /* a new lease's fence */
    assert_int_equal(fenced_of("bow.C"), -1); /* never traded: never written */
    redisReply *k = redis_cmd("KEYS lock:item:*:fenced");
    assert_int_equal(k->type, REDIS_REPLY_ARRAY);
    assert_int_equal(k->elements, 1); /* shield.A's, the one listing traded that is listed */
    freeReplyObject(k);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

/* Deletes the fencing records of the data store: what an operator does when
 * the lock moves to another store (docs/OPERATIONS.md, Fencing records). */
static void forget_fenced_records(void) {
    redisContext *rc0 = redisConnect("127.0.0.1", redis.port);
    assert_non_null(rc0);
    redisReply *del = redisCommand(
        rc0, "EVAL %s 0",
        "for _, k in ipairs(redis.call('KEYS', 'lock:*:fenced')) do redis.call('DEL', k) end");
    assert_non_null(del);
    freeReplyObject(del);
    redisFree(rc0);
}

/* Fencing: the lock lives on its own Redis, so a WATCH in the data store
 * cannot see it change hands. A holder stalls after taking the lock and
 * before reading, past its lease; another holder takes the lock and trades.
 * When the first wakes, its read is clean (nothing changes after it), but
 * the fence the newer holder stored is above its own: it must not write. */
static void test_fence_stale_holder_lock_elsewhere_refused(void **state) {
    struct fx *f = *state;
    if (strategy == MARKET_STRATEGY_OPTIMISTIC) skip();
    th_redis lock_store = {0};
    assert_int_equal(th_redis_start(&lock_store), 0);
    rconn_addr la;
    assert_int_equal(rconn_addr_parse(lock_store.url, &la), RCONN_OK);
    int err;
    lock_client *remote = lock_redis_new(&la, 1000, &err);
    assert_non_null(remote);
    /* The new lock store's fences have nothing to do with the old one's. */
    forget_fenced_records();

    market_config slow = config(100, 2000, 0);
    slow.test_stall_read_ms = 300;
    market *sm = market_new(&slow, remote, &err);
    market_config quick = config(5000, 2000, 0);
    market *qm = market_new(&quick, remote, &err);
    market_conn *qc = market_conn_new(qm, &err);
    assert_non_null(sm);
    assert_non_null(qc);

    struct stalled s = {sm, 1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stalled_purchase, &s), 0);
    sleep_ms(150); /* the stalled holder's lease has lapsed before it read anything */
    market_purchase_result r;
    /* The newer holder shares a lock with the stalled one under every
     * strategy (the market lock, or buyer B's lock) but not its listing, so
     * without fencing the stalled purchase would still find the axe listed
     * and B able to pay, and would commit. */
    int rc = market_purchase(qc, REALM, "B", "C", "bow", -1, &r);
    pthread_join(t, NULL);
    assert_int_equal(rc, MARKET_OK);
    assert_int_equal(s.rc, MARKET_ERR_LEASE_LOST);
    assert_int_equal(funds_of(f->c, "B"), 750);
    assert_true(holds(f->c, "B", "bow"));
    assert_true(listed(f->c, "axe", "A"));
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);

    market_conn_free(qc);
    market_free(qm);
    market_free(sm);
    lock_free(remote);
    th_redis_stop(&lock_store);
    forget_fenced_records(); /* back to the lock on the data server for the next tests */
}

/* The lock key a purchase of listing member takes under the strategy. */
static const char *listing_lock(const char *member, char *buf, size_t len) {
    if (strategy == MARKET_STRATEGY_MARKET) return MARKET_LOCK_KEY_MAIN;
    snprintf(buf, len, "lock:item:{main}:%s", member);
    return buf;
}

static long long elapsed_ms(int64_t t0) {
    return (long long)(rconn_now_ms() - t0);
}

/* After a takeover: the new holder's lease on key is untouched (then
 * dropped for the next test), and B did not buy the axe. */
static void assert_taken_over_nothing_bought(market_conn *c, const char *key, const char *holder) {
    redisReply *r = redis_cmd("GET %s", key);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, holder);
    freeReplyObject(r);
    redis_do("DEL %s", key);
    assert_int_equal(funds_of(c, "B"), 800);
    assert_true(listed(c, "axe", "A"));
    assert_invariants(c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

/* Issue 9.1: a holder takes its lock, then pauses (test hook) before its
 * first read, past its 100 ms lease. Meanwhile a client of another kind
 * that speaks the same lock protocol (a plain SET NX PX, as node-redlock or
 * an operator's script does) takes the key and holds it. That client writes
 * no fencing record, so only the token in the lock key can tell: the
 * resumed holder must not commit inside the other's lease. */
static void test_lease_taken_over_by_foreign_client_refused(void **state) {
    struct fx *f = *state;
    if (strategy == MARKET_STRATEGY_OPTIMISTIC) skip(); /* no lock */
    market_config slow = config(100, 2000, 0);
    slow.test_stall_read_ms = 400;
    int err;
    market *sm = market_new(&slow, f->lock, &err);
    assert_non_null(sm);
    struct stalled s = {sm, 1};
    pthread_t t;
    int64_t t0 = rconn_now_ms();
    assert_int_equal(pthread_create(&t, NULL, stalled_purchase, &s), 0);
    sleep_ms(200); /* the holder's lease has lapsed; it has not read yet */
    char buf[64];
    const char *key = listing_lock("axe.A", buf, sizeof buf);
    redisReply *r = redis_cmd("SET %s foreign-holder NX PX 5000", key);
    assert_int_equal(r->type, REDIS_REPLY_STATUS); /* OK: the key was free */
    freeReplyObject(r);
    pthread_join(t, NULL);
    assert_true(elapsed_ms(t0) < 5000); /* it ended inside the foreign lease */
    assert_int_equal(s.rc, MARKET_ERR_LEASE_LOST);
    market_free(sm);
    assert_taken_over_nothing_bought(f->c, key, "foreign-holder");
}

struct slow_buy {
    market *m;
    const char *buyer, *item, *seller;
    const market_idem *idem;
    int rc;
    market_purchase_result res;
};

static void *slow_buy_run(void *arg) {
    struct slow_buy *s = arg;
    market_conn *c = market_conn_new(s->m, NULL);
    s->rc = c ? market_purchase_idem(c, REALM, s->buyer, s->seller, s->item, -1, s->idem, &s->res)
              : MARKET_ERR_NOMEM;
    market_conn_free(c);
    return NULL;
}

/* The same takeover by another market server (its own lock client, as in
 * another process): it takes the lapsed lock, reads, and pauses before its
 * commit, still holding its lease. The first holder resumes inside that
 * lease: it must not commit, and the second's purchase goes through. */
static void test_lease_taken_over_by_other_server_refused(void **state) {
    struct fx *f = *state;
    if (strategy == MARKET_STRATEGY_OPTIMISTIC) skip(); /* no lock */
    int err;
    lock_client *other_lock = lock_redis_new(&f->cfg.redis, 1000, &err);
    assert_non_null(other_lock);
    market_config first_cfg = config(100, 2000, 0);
    first_cfg.test_stall_read_ms = 400;
    market *first = market_new(&first_cfg, f->lock, &err);
    market_config second_cfg = config(5000, 2000, 600); /* pauses between read and commit */
    market *second = market_new(&second_cfg, other_lock, &err);
    assert_non_null(first);
    assert_non_null(second);
    struct slow_buy a = {first, "B", "axe", "A", NULL, 1, {0}};
    struct slow_buy b = {second, "D", "axe", "A", NULL, 1, {0}};
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, slow_buy_run, &a), 0);
    sleep_ms(150); /* the first's lease has lapsed */
    assert_int_equal(pthread_create(&tb, NULL, slow_buy_run, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_equal(a.rc, MARKET_ERR_LEASE_LOST);
    assert_int_equal(b.rc, MARKET_OK);
    assert_int_equal(funds_of(f->c, "B"), 800);
    assert_true(holds(f->c, "D", "axe"));
    assert_false(holds(f->c, "B", "axe"));
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
    market_free(first);
    market_free(second);
    lock_free(other_lock);
}

/* The lock key changes hands while its holder still trusts its lease by the
 * clock (the key lost in a failover and taken by another client, or deleted
 * by hand and taken): the holder has read and pauses before its commit.
 * The commit must see that the key no longer holds its token. (The item
 * strategy's read went out before its locks were taken: its commit's guard
 * checks the lock keys.) */
static void test_lock_key_taken_while_lease_valid_refused(void **state) {
    struct fx *f = *state;
    if (strategy == MARKET_STRATEGY_OPTIMISTIC) skip(); /* no lock */
    market_config slow = config(5000, 2000, 300); /* pauses between read and commit */
    int err;
    market *sm = market_new(&slow, f->lock, &err);
    assert_non_null(sm);
    struct stalled s = {sm, 1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stalled_purchase, &s), 0);
    sleep_ms(150); /* it has read, its lease has seconds left */
    char buf[64];
    const char *key = listing_lock("axe.A", buf, sizeof buf);
    redisReply *r = redis_cmd("SET %s other-holder XX PX 5000", key);
    assert_int_equal(r->type, REDIS_REPLY_STATUS); /* the key was there: ours */
    freeReplyObject(r);
    pthread_join(t, NULL);
    assert_int_equal(s.rc, MARKET_ERR_LEASE_LOST);
    market_free(sm);
    assert_taken_over_nothing_bought(f->c, key, "other-holder");
}

/* What a done call saw of the store: its own purchase committed, the next
 * one not yet. */
struct seen {
    struct pending pd;
    struct pending *next;
    long long own_funds, next_funds; /* B's and D's funds when a's done ran */
    int next_calls;                  /* the next one's done calls by then */
    long long lock_held;             /* whether the market lock's key was there */
};

static long long funds_now(const char *id) {
    redisReply *r = redis_cmd("HGET users:{main}:%s funds", id);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    return v;
}

static void seen_done(market_order *p) {
    struct seen *sn = p->ud;
    sn->own_funds = funds_now("B");
    sn->next_funds = funds_now("D");
    sn->next_calls = sn->next->calls; /* the same worker thread calls both */
    redisReply *r = redis_cmd("EXISTS %s", MARKET_LOCK_KEY_MAIN);
    sn->lock_held = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    sn->pd.p.ud = &sn->pd;
    pending_done(p);
}

/* Submits a (B buys the axe) and b (D buys the bow) at once to a market of
 * batches of one that pauses stall_ms between each batch's read and commit,
 * and checks what a's done call saw: a committed (an answer follows its
 * commit), b not, and a first. (The same worker thread answers a and
 * commits b: the order is not a race.) Returns whether the market lock was
 * held when a was answered (1), or not (0). */
static long long answer_order(struct fx *f, uint32_t stall_ms) {
    market_config one = config(5000, 5000, stall_ms);
    one.batch_max = 1;
    int err;
    market *sm = market_new(&one, f->lock, &err);
    assert_non_null(sm);
    struct outcome o = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    struct seen a = {.own_funds = -2, .next_funds = -2, .next_calls = -1, .lock_held = -1};
    struct pending b;
    pending_init(&a.pd, &o, "B", "A", "axe");
    a.pd.p.done = seen_done;
    a.pd.p.ud = &a;
    pending_init(&b, &o, "D", "C", "bow");
    a.next = &b;
    assert_int_equal(market_order_submit(sm, &a.pd.p), MARKET_OK);
    assert_int_equal(market_order_submit(sm, &b.p), MARKET_OK);
    outcome_wait(&o, 1);
    assert_int_equal(a.pd.rc, MARKET_OK);
    assert_int_equal(a.next_calls, 0); /* a first */
    assert_int_equal(a.own_funds, 300);
    assert_int_equal(a.next_funds, 1000000);
    outcome_wait(&o, 2);
    assert_int_equal(b.rc, MARKET_OK);
    assert_int_equal(funds_of(f->c, "D"), 1000000 - 50);
    market_free(sm);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
    return a.lock_held;
}

/* A batch's answers go out once the next batch's read is on its way, never
 * held until it commits (the lock kept from a to b: answered from the read's
 * send). */
static void test_answer_not_held_by_next_batch(void **state) {
    struct fx *f = *state;
    if (!market_can_submit(f->m)) skip();
    (void)answer_order(f, 0);
}

/* When the next batch must give the market lock up and take it again (a's
 * batch held it past MARKET__HOLD_MAX_MS: a pause of 40 ms), a is answered
 * before the release's round trip, while the lock is still ours. */
static void test_answer_not_held_by_lock_release(void **state) {
    struct fx *f = *state;
    if (strategy != MARKET_STRATEGY_MARKET) skip(); /* the market lock's hold */
    assert_int_equal(answer_order(f, 40), 1);
}

/* Whether the market lock's key is there now. */
static int market_lock_there(void) {
    redisReply *r = redis_cmd("EXISTS %s", MARKET_LOCK_KEY_MAIN);
    int there = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return there;
}

/* A market whose workers keep a lock for a minute (the test hook), after B bought the axe
 * through *hc: its worker is idle and keeps the market lock. */
static market *held_market(struct fx *f, market_conn **hc) {
    market_config slow = config(240000, 5000, 0);
    slow.test_hold_ms = 60000;
    int err;
    market *hm = market_new(&slow, f->lock, &err);
    assert_non_null(hm);
    *hc = market_conn_new(hm, &err);
    assert_non_null(*hc);
    market_purchase_result r;
    assert_int_equal(market_purchase(*hc, REALM, "B", "A", "axe", -1, &r), MARKET_OK);
    assert_true(market_lock_there()); /* idle, and kept */
    return hm;
}

/* Low load: the worker keeps the market lock across an empty queue for the next
 * purchase (here for a minute, by the test hook), so a second purchase after the first
 * was answered takes no lock of its own; the lock is released at shutdown. */
static void test_hold_kept_across_an_idle_queue(void **state) {
    struct fx *f = *state;
    if (strategy != MARKET_STRATEGY_MARKET) skip(); /* the market lock's hold */
    market_conn *hc;
    market *hm = held_market(f, &hc);
    market_purchase_result r;
    assert_int_equal(market_purchase(hc, REALM, "D", "C", "bow", -1, &r), MARKET_OK);
    market_stats st;
    market_stats_get(hm, &st);
    assert_int_equal(st.purchased, 2);
    assert_int_equal(st.lock_acquired, 1);
    market_conn_free(hc);
    market_free(hm);
    assert_false(market_lock_there());
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

/* A client of another process waiting for the market lock. */
struct lock_waiter {
    lock_client *lock;
    lock_handle h;
    int rc;
};

static void *lock_waiter_main(void *arg) {
    struct lock_waiter *w = arg;
    w->rc = lock_acquire(w->lock, MARKET_LOCK_KEY_MAIN, 5000, 30000, &w->h);
    return NULL;
}

/* Another process waits for the market lock while an idle worker keeps it (for a minute,
 * by the test hook): the worker's next batch reads the waiter's mark (":wanted") and gives
 * the lock up once its queue is empty, long before the hold would end. */
static void test_hold_given_up_when_wanted(void **state) {
    struct fx *f = *state;
    if (strategy != MARKET_STRATEGY_MARKET) skip();
    market_conn *hc;
    market *hm = held_market(f, &hc);
    int err;
    struct lock_waiter w = {.lock = lock_redis_new(&f->cfg.redis, 1000, &err), .rc = -1};
    assert_non_null(w.lock);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, lock_waiter_main, &w), 0);
    int64_t until = rconn_now_ms() + 30000; /* the waiter has marked the key */
    for (;;) {
        redisReply *e = redis_cmd("EXISTS %s" LOCK_WANTED_SUFFIX, MARKET_LOCK_KEY_MAIN);
        int marked = e->type == REDIS_REPLY_INTEGER && e->integer == 1;
        freeReplyObject(e);
        if (marked || rconn_now_ms() >= until) break;
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
    market_purchase_result r;
    assert_int_equal(market_purchase(hc, REALM, "D", "C", "bow", -1, &r), MARKET_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, LOCK_OK); /* within its 30 s, not after the minute */
    assert_int_equal(lock_release(w.lock, &w.h), LOCK_OK);
    market_stats st;
    market_stats_get(hm, &st);
    assert_int_equal(st.lock_acquired, 1);
    lock_free(w.lock);
    market_conn_free(hc);
    market_free(hm);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

/* With the defaults, a lock kept across an empty queue is released soon by itself:
 * another process's purchase is not kept waiting by an idle one. */
static void test_hold_released_when_idle(void **state) {
    struct fx *f = *state;
    if (strategy != MARKET_STRATEGY_MARKET) skip();
    market_purchase_result r;
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", -1, &r), MARKET_OK);
    int64_t until = rconn_now_ms() + 30000;
    while (market_lock_there() && rconn_now_ms() < until) {
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
    assert_false(market_lock_there());
    lock_handle h;
    assert_int_equal(lock_acquire(f->lock, MARKET_LOCK_KEY_MAIN, 5000, 0, &h), LOCK_OK);
    assert_int_equal(lock_release(f->lock, &h), LOCK_OK);
}

/* Issue 9.2(a): a purchase whose wait budget ran out before it could take
 * its lock (a pause, here the test hook) is answered busy without trying:
 * no lock is taken, nothing is read or decided, nothing changes. */
static void test_deadline_passed_before_lock_nothing_attempted(void **state) {
    struct fx *f = *state;
    market_config late = config(5000, 100, 0);
    late.test_stall_lock_ms = 300;
    int err;
    market *lm = market_new(&late, f->lock, &err);
    market_conn *lc = market_conn_new(lm, &err);
    assert_non_null(lc);
    market_purchase_result r;
    assert_int_equal(market_purchase(lc, REALM, "B", "A", "axe", -1, &r), MARKET_ERR_BUSY);
    market_stats st;
    market_stats_get(lm, &st);
    assert_int_equal(st.lock_acquired, 0);
    assert_int_equal(st.purchased, 0);
    market_conn_free(lc);
    market_free(lm);
    assert_int_equal(funds_of(f->c, "B"), 800);
    assert_true(listed(f->c, "axe", "A"));
}

/* Issue 9.2(b), the reported sequence: attempt 1 of key K pauses before its
 * lock on server S1; the client gives up and retries K on S2, which answers
 * insufficient funds (final); the buyer's funds then rise; S1 resumes with
 * its budget not yet spent. It must answer the stored refusal, not buy. */
static void test_idem_refused_elsewhere_not_committed_later(void **state) {
    struct fx *f = *state;
    int err;
    market_config s1_cfg = config(5000, 3000, 0);
    s1_cfg.test_stall_lock_ms = 400;
    market *s1 = market_new(&s1_cfg, f->lock, &err);
    assert_non_null(s1);
    market_idem k = {"K", "fp-axe"};
    struct slow_buy a = {s1, "C", "axe", "A", &k, 1, {0}};
    pthread_t ta;
    assert_int_equal(pthread_create(&ta, NULL, slow_buy_run, &a), 0);
    sleep_ms(100); /* S1 is paused before its lock */
    market_purchase_result r = {0};
    assert_int_equal(market_purchase_idem(f->c, REALM, "C", "A", "axe", -1, &k, &r),
                     MARKET_ERR_INSUFFICIENT_FUNDS);
    redis_do("HINCRBY users:{main}:C funds 1000"); /* now C could pay */
    pthread_join(ta, NULL);
    assert_int_equal(a.rc, MARKET_ERR_INSUFFICIENT_FUNDS);
    assert_int_equal(a.res.replayed, 1);
    market_free(s1);
    assert_int_equal(funds_of(f->c, "C"), 1100);
    assert_true(listed(f->c, "axe", "A"));
    assert_invariants(f->c, CLASSIC_FUNDS + 1000, CLASSIC_ITEMS);
}

/* Issue 9.2(b): a second attempt of a key while the first is still deciding
 * is answered in_progress (409), not run beside it. The first pauses
 * between its read and its commit past its lease (lock strategies) or just
 * pauses (optimistic); when it ends, the key has exactly one outcome. */
static void test_idem_second_attempt_in_flight_in_progress(void **state) {
    struct fx *f = *state;
    int err;
    lock_client *other_lock = lock_redis_new(&f->cfg.redis, 1000, &err);
    assert_non_null(other_lock);
    market_config s1_cfg = config(100, 500, 400);
    market *s1 = market_new(&s1_cfg, f->lock, &err);
    market_config s2_cfg = config(5000, 2000, 0);
    market *s2 = market_new(&s2_cfg, other_lock, &err);
    market_conn *c2 = market_conn_new(s2, &err);
    assert_non_null(s1);
    assert_non_null(c2);
    market_idem k = {"K2", "fp-axe"};
    struct slow_buy a = {s1, "B", "axe", "A", &k, 1, {0}};
    pthread_t ta;
    int64_t t0 = rconn_now_ms();
    assert_int_equal(pthread_create(&ta, NULL, slow_buy_run, &a), 0);
    /* Wait until S1 has claimed K (it then reads, and pauses before its
     * commit for 400 ms): polled, not slept, so a slow machine cannot send
     * S2 in before the claim. */
    for (int tries = 0;; tries++) {
        redisReply *claim = redis_cmd("GET idem:{main}:B:K2");
        int claimed = claim->type == REDIS_REPLY_STRING && strstr(claim->str, " ?") != NULL;
        freeReplyObject(claim);
        if (claimed) break;
        assert_true(tries < 400);
        sleep_ms(5);
    }
    market_purchase_result r = {0};
    assert_int_equal(market_purchase_idem(c2, REALM, "B", "A", "axe", -1, &k, &r), MARKET_ERR_IN_PROGRESS);
    pthread_join(ta, NULL);
    int lock_strategy = strategy != MARKET_STRATEGY_OPTIMISTIC;
    /* Lock strategies: S1's lease lapsed while it paused, so it may not
     * commit; optimistic: nothing it read changed, so it commits. */
    assert_int_equal(a.rc, lock_strategy ? MARKET_ERR_LEASE_LOST : MARKET_OK);
    /* Once S1's claim has lapsed with its budget, the retry decides (lock
     * strategies) or replays S1's purchase (optimistic). */
    while (elapsed_ms(t0) < 500 + 100 + 50) sleep_ms(20);
    memset(&r, 0, sizeof r);
    assert_int_equal(market_purchase_idem(c2, REALM, "B", "A", "axe", -1, &k, &r), MARKET_OK);
    assert_int_equal(r.replayed, lock_strategy ? 0 : 1);
    assert_int_equal(r.buyer_funds, 300);
    assert_int_equal(funds_of(f->c, "B"), 300);
    assert_true(holds(f->c, "B", "axe"));
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
    market_conn_free(c2);
    market_free(s2);
    market_free(s1);
    lock_free(other_lock);
}

/* Issue 9.3: ids of the longest valid length work under every strategy
 * (the item strategy's lock key on such a listing is longer than the lock
 * layer takes, so it is hashed). */
static void test_longest_ids_trade(void **state) {
    struct fx *f = *state;
    char buyer[MARKET_ID_MAX + 1], seller[MARKET_ID_MAX + 1], item[MARKET_ID_MAX + 1];
    memset(buyer, 'b', MARKET_ID_MAX);
    memset(seller, 's', MARKET_ID_MAX);
    memset(item, 'i', MARKET_ID_MAX);
    buyer[MARKET_ID_MAX] = seller[MARKET_ID_MAX] = item[MARKET_ID_MAX] = '\0';
    market_world *w = market_world_new();
    assert_int_equal(market_world_add_player(w, buyer, NULL, 1000), MARKET_OK);
    assert_int_equal(market_world_add_player(w, seller, NULL, 0), MARKET_OK);
    assert_int_equal(market_world_add_item(w, seller, item), MARKET_OK);
    assert_int_equal(market_world_store(f->c, REALM, w, 0), MARKET_OK);
    market_world_free(w);
    assert_int_equal(market_list(f->c, REALM, seller, item, 700), MARKET_OK);
    int64_t price = 0;
    assert_int_equal(market_unlist(f->c, REALM, seller, item, &price), MARKET_OK);
    assert_int_equal(price, 700);
    market_idem k = {"long", "fp"};
    assert_int_equal(market_list_idem(f->c, REALM, seller, item, 600, &k, NULL), MARKET_OK);
    market_purchase_result r;
    assert_int_equal(market_purchase_idem(f->c, REALM, buyer, seller, item, 600, &k, &r), MARKET_OK);
    assert_int_equal(r.buyer_funds, 400);
    assert_true(holds(f->c, buyer, item));
    assert_invariants(f->c, CLASSIC_FUNDS + 1000, CLASSIC_ITEMS + 1);
}

/* Issue 9.3: one purchase that cannot be served (its listing's score or its
 * buyer's funds are unreadable in the store) fails alone; the purchases
 * batched with it go through. */
static void test_batch_one_bad_purchase_others_served(void **state) {
    struct fx *f = *state;
    if (!market_can_submit(f->m)) skip(); /* batches only */
    redis_do("ZADD market:{main} 1.5 odd.A");   /* a price that is not whole */
    redis_do("HSET users:{main}:corrupt funds lots"); /* funds that are not a number */
    redis_do("ZADD market:{main} 10 cheap.C");
    redis_do("SADD inventory:{main}:C ring");
    int err;
    lock_client *l = lock_redis_new(&f->cfg.redis, 1000, &err);
    assert_non_null(l);
    lock_handle h;
    const char *block = strategy == MARKET_STRATEGY_ITEM ? "lock:player:{main}:C" : MARKET_LOCK_KEY_MAIN;
    assert_int_equal(lock_acquire(l, block, 30000, 30000, &h), LOCK_OK);
    struct outcome o = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    struct pending blocker, good1, odd, poor, good2;
    pending_init(&blocker, &o, "C", "A", "shield"); /* holds the worker on the lock */
    assert_int_equal(market_order_submit(f->m, &blocker.p), MARKET_OK);
    sleep_ms(100);
    pending_init(&good1, &o, "B", "A", "axe");
    pending_init(&odd, &o, "D", "A", "odd");
    pending_init(&poor, &o, "corrupt", "C", "cheap");
    pending_init(&good2, &o, "D", "C", "bow");
    struct pending *all[] = {&good1, &odd, &poor, &good2};
    for (size_t i = 0; i < 4; i++) assert_int_equal(market_order_submit(f->m, &all[i]->p), 0);
    assert_int_equal(lock_release(l, &h), LOCK_OK);
    outcome_wait(&o, 5);
    lock_free(l);
    assert_int_equal(good1.rc, MARKET_OK);
    assert_int_equal(odd.rc, MARKET_ERR_STORE);
    assert_int_equal(poor.rc, MARKET_ERR_STORE);
    assert_int_equal(good2.rc, MARKET_OK);
    assert_true(holds(f->c, "B", "axe"));
    assert_true(holds(f->c, "D", "bow"));
    assert_int_equal(funds_of(f->c, "D"), 1000000 - 50);
    redis_do("DEL users:{main}:corrupt");
}

/* Errors carry their reason as text to the caller: a store that refuses us
 * (here: AUTH with a password the server does not have) is not just "store
 * unavailable". Batched purchases bring the worker's reason back too. */
static void test_store_failure_reason_reaches_caller(void **state) {
    struct fx *f = *state;
    market_config bad = config(5000, 500, 0);
    snprintf(bad.redis.pass, sizeof bad.redis.pass, "not-the-password");
    int err;
    market *bm = market_new(&bad, f->lock, &err);
    market_conn *bc = market_conn_new(bm, &err);
    assert_non_null(bc);
    assert_string_equal(market_conn_errstr(bc), "");
    market_purchase_result r;
    assert_int_equal(market_purchase(bc, REALM, "B", "A", "axe", -1, &r), MARKET_ERR_STORE);
    const char *why = market_conn_errstr(bc);
    if (!strstr(why, "Redis refused AUTH")) fprintf(stderr, "# reason: %s\n", why);
    assert_non_null(strstr(why, "Redis refused AUTH"));
    market_conn_free(bc);
    market_free(bm);
    assert_true(listed(f->c, "axe", "A"));
}

/* A lock store that fails says why, up to the caller: the lock's Redis is not there (nothing
 * listens on its port), and the reason names it and what hiredis said, not only "lock store
 * unavailable". */
static void test_lock_failure_reason_reaches_caller(void **state) {
    struct fx *f = *state;
    if (strategy == MARKET_STRATEGY_OPTIMISTIC) skip(); /* it takes no lock */
    int port = th_free_port();
    assert_true(port > 0);
    char url[64], at[32];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", port);
    snprintf(at, sizeof at, "127.0.0.1:%d", port);
    rconn_addr la;
    assert_int_equal(rconn_addr_parse(url, &la), RCONN_OK);
    int err;
    lock_client *gone = lock_redis_new(&la, 1000, &err);
    assert_non_null(gone);
    market_config quick = config(5000, 300, 0);
    market *gm = market_new(&quick, gone, &err);
    market_conn *gc = market_conn_new(gm, &err);
    assert_non_null(gc);
    market_purchase_result r;
    assert_int_equal(market_purchase(gc, REALM, "B", "A", "axe", -1, &r), MARKET_ERR_STORE);
    const char *why = market_conn_errstr(gc);
    fprintf(stderr, "# reason: %s\n", why);
    assert_non_null(strstr(why, "lock redis: "));
    assert_non_null(strstr(why, at));
    assert_non_null(strstr(why, "refused"));
    market_conn_free(gc);
    market_free(gm);
    lock_free(gone);
    assert_true(listed(f->c, "axe", "A"));
}

static void test_lock_held_elsewhere_busy(void **state) {
    struct fx *f = *state;
    if (strategy != MARKET_STRATEGY_MARKET) skip(); /* only this one takes lock:market */
    lock_handle h;
    assert_int_equal(lock_acquire(f->lock, MARKET_LOCK_KEY_MAIN, 10000, 0, &h), LOCK_OK);
    market_config quick = config(5000, 100, 0);
    int err;
    market *qm = market_new(&quick, f->lock, &err);
    market_conn *qc = market_conn_new(qm, &err);
    market_purchase_result r;
    assert_int_equal(market_purchase(qc, REALM, "B", "A", "axe", -1, &r), MARKET_ERR_BUSY);
    assert_int_equal(lock_release(f->lock, &h), LOCK_OK);
    assert_int_equal(market_purchase(qc, REALM, "B", "A", "axe", -1, &r), MARKET_OK);
    market_conn_free(qc);
    market_free(qm);
}

static void test_redis_down_store_unavailable_then_recovers(void **state) {
    struct fx *f = *state;
    th_redis_signal(&redis, SIGKILL);
    market_purchase_result r;
    int64_t t0 = rconn_now_ms();
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", -1, &r), MARKET_ERR_STORE);
    assert_int_equal(market_ping(f->c), MARKET_ERR_STORE);
    assert_true(rconn_now_ms() - t0 < 2000); /* prompt, not the wait budget */
    assert_int_equal(th_redis_restart(&redis), 0);
    assert_int_equal(market_ping(f->c), MARKET_OK);
    seed_classic(f->c); /* the restarted server is empty */
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", -1, &r), MARKET_OK);
    assert_int_equal(r.buyer_funds, 300);
}

static void test_redis_paused_store_unavailable_within_timeout(void **state) {
    struct fx *f = *state;
    assert_int_equal(market_ping(f->c), MARKET_OK);
    th_redis_signal(&redis, SIGSTOP);
    market_purchase_result r;
    int rc = market_purchase(f->c, REALM, "B", "A", "axe", -1, &r);
    th_redis_signal(&redis, SIGCONT);
    assert_int_equal(rc, MARKET_ERR_STORE);
    sleep_ms(100);
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", -1, &r), MARKET_OK);
    assert_invariants(f->c, CLASSIC_FUNDS, CLASSIC_ITEMS);
}

static int group_setup(void **state) {
    (void)state;
    return th_redis_start(&redis);
}

static int group_teardown(void **state) {
    (void)state;
    th_redis_stop(&redis);
    return 0;
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

static int run_group(enum market_strategy s, const struct CMUnitTest *tests, size_t n) {
    char name[64];
    strategy = s;
    snprintf(name, sizeof name, "market (integration, strategy %s)", market_strategy_name(s));
    return _cmocka_run_group_tests(name, tests, n, group_setup, group_teardown);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_purchase_classic_trade_moves_funds_and_item),
        T(test_purchase_twice_second_not_listed),
        T(test_purchase_poor_buyer_insufficient_nothing_moved),
        T(test_purchase_wrong_price_price_changed),
        T(test_purchase_unknown_buyer_no_player),
        T(test_purchase_bad_arguments_invalid),
        T(test_purchase_seller_would_overflow_refused),
        T(test_list_then_unlist_round_trip),
        T(test_list_item_not_held_refused),
        T(test_listings_sorted_by_price_and_paged),
        T(test_player_get_unknown_no_player),
        T(test_world_duplicate_item_writes_nothing),
        T(test_world_unknown_owner_refused),
        T(test_world_generate_lists_every_item),
        T(test_audit_item_in_two_places_counted),
        T(test_many_buyers_one_item_exactly_one_wins),
        T(test_realms_are_separate_worlds),
        T(test_realm_ids_are_validated),
        T(test_realms_in_parallel_keep_their_invariants),
        T(test_one_buyer_funds_for_one_never_negative),
        T(test_submit_outcomes_in_order_done_once),
        T(test_order_submit_list_unlist_purchase),
        T(test_answer_not_held_by_next_batch),
        T(test_answer_not_held_by_lock_release),
        T(test_hold_kept_across_an_idle_queue),
        T(test_hold_given_up_when_wanted),
        T(test_hold_released_when_idle),
        T(test_shutdown_serves_queue_then_refuses),
        T(test_idem_retry_replays_while_contended),
        T(test_batch_mixed_outcomes_match_serial_order),
        T(test_idem_repeat_replays_without_charging),
        T(test_idem_refusal_is_final),
        T(test_idem_list_replays),
        T(test_idem_concurrent_repeats_charged_once),
        T(test_stalled_holder_past_lease_cannot_commit),
        T(test_stalled_holder_lease_expired_alone_refused),
        T(test_fence_stale_holder_lock_elsewhere_refused),
        T(test_fenced_record_goes_with_its_listing),
        T(test_lease_taken_over_by_foreign_client_refused),
        T(test_lease_taken_over_by_other_server_refused),
        T(test_lock_key_taken_while_lease_valid_refused),
        T(test_deadline_passed_before_lock_nothing_attempted),
        T(test_idem_refused_elsewhere_not_committed_later),
        T(test_idem_second_attempt_in_flight_in_progress),
        T(test_longest_ids_trade),
        T(test_batch_one_bad_purchase_others_served),
        T(test_store_failure_reason_reaches_caller),
        T(test_lock_failure_reason_reaches_caller),
        T(test_lock_held_elsewhere_busy),
        T(test_redis_down_store_unavailable_then_recovers),
        T(test_redis_paused_store_unavailable_within_timeout),
    };
    size_t n = sizeof tests / sizeof *tests;
    int failed = 0;
    failed += run_group(MARKET_STRATEGY_MARKET, tests, n);
    failed += run_group(MARKET_STRATEGY_ITEM, tests, n);
    failed += run_group(MARKET_STRATEGY_OPTIMISTIC, tests, n);
    return failed;
}
