/* test_market_stacks.c - stackable goods against a real redis-server, under
 * each strategy: listing units from a stack, buying part of a listing, the
 * refusals that say how many there are, 64 buyers racing for the units of
 * one listing, and every unit in exactly one place afterwards.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/market_fx.h"

#define REALM MARKET_REALM_DEFAULT

/* ---- helpers ---- */

static long long stack_of(const char *player, const char *item) {
    return th_fx_num("HGET stacks:{main}:%s %s", player, item);
}

static long long listed_units(const char *member) {
    return th_fx_num("HGET market:{main}:units %s", member);
}

/* C holds 50 potions and lists 20 at 25; A holds 10 arrows; B has 2000, D a
 * fortune, E only 100. */
static void seed(market_conn *c) {
    redisReply *r = th_fx_cmd("FLUSHALL");
    freeReplyObject(r);
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "A", "Alice", 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "B", "Bob", 2000), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "C", "Carol", 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "D", "Dave", 100000000), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "E", "Eve", 100), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "A", "axe", 500), MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    r = th_fx_cmd("HSET stacks:{main}:C potion 50");
    freeReplyObject(r);
    r = th_fx_cmd("HSET stacks:{main}:A arrow 10");
    freeReplyObject(r);
    market_list_result lr;
    assert_int_equal(market_list_units(c, REALM, "C", "potion", 20, 25, NULL, &lr), MARKET_OK);
    assert_int_equal(lr.quantity, 20);
}

static int fx_setup(void **state) {
    th_market *f = th_market_new(
        (market_config){.redis_timeout_ms = 1000, .lock_ttl_ms = 5000, .acquire_timeout_ms = 5000});
    if (!f) return -1;
    seed(f->c);
    *state = f;
    return 0;
}

static int fx_teardown(void **state) {
    th_market_free(*state);
    return 0;
}

/* Every potion is in one place: C's stack, C's listing, or a buyer's stack. */
static void assert_potions(long long total) {
    long long sum = listed_units("potion.C");
    static const char *const who[] = {"A", "B", "C", "D", "E"};
    for (size_t i = 0; i < sizeof who / sizeof *who; i++) sum += stack_of(who[i], "potion");
    assert_int_equal(sum, total);
}

/* ---- tests ---- */

/* Units leave the seller's stack for the listing; more at the same price
 * join it; another price, or more than held, is refused with the numbers. */
static void test_list_units_from_a_stack(void **state) {
    th_market *f = *state;
    assert_int_equal(stack_of("C", "potion"), 30);
    assert_int_equal(listed_units("potion.C"), 20);
    assert_int_equal(th_fx_num("ZSCORE market:{main} potion.C"), 25);
    market_list_result r;
    assert_int_equal(market_list_units(f->c, REALM, "C", "potion", 5, 25, NULL, &r), MARKET_OK);
    assert_int_equal(r.quantity, 25);
    assert_int_equal(market_list_units(f->c, REALM, "C", "potion", 5, 30, NULL, &r),
                     MARKET_ERR_PRICE_CHANGED);
    assert_int_equal(r.price, 25);
    assert_int_equal(market_list_units(f->c, REALM, "C", "potion", 26, 25, NULL, &r),
                     MARKET_ERR_NOT_HELD);
    assert_int_equal(r.held, 25);
    /* all that is left: the stack's field goes */
    assert_int_equal(market_list_units(f->c, REALM, "C", "potion", 25, 25, NULL, &r), MARKET_OK);
    assert_int_equal(r.quantity, 50);
    assert_int_equal(th_fx_num("HEXISTS stacks:{main}:C potion"), 0);
    /* a unique item still lists as before, and is not a stack */
    assert_int_equal(market_list_units(f->c, REALM, "A", "arrow", 0, 3, NULL, &r), MARKET_OK);
    assert_int_equal(r.quantity, 1);
    assert_int_equal(stack_of("A", "arrow"), 9);
    assert_potions(50);
}

/* Part of a listing: the units go to the buyer's stack, the total moves,
 * the rest stays listed; the trade says how many. */
static void test_buy_part_of_a_listing(void **state) {
    th_market *f = *state;
    market_purchase_result r = {0};
    assert_int_equal(market_purchase_units(f->c, REALM, "B", "C", "potion", 5, -1, NULL, &r),
                     MARKET_OK);
    assert_int_equal(r.price, 25);
    assert_int_equal(r.buyer_funds, 2000 - 125);
    assert_int_equal(stack_of("B", "potion"), 5);
    assert_int_equal(listed_units("potion.C"), 15);
    assert_int_equal(th_fx_funds(f->c, "C"), 125);
    market_trade t;
    assert_int_equal(market_trade_get(f->c, REALM, r.trade_id, &t), MARKET_OK);
    assert_int_equal(t.quantity, 5);
    assert_int_equal(t.total, 125);
    /* more than there are: how many there are */
    assert_int_equal(market_purchase_units(f->c, REALM, "B", "C", "potion", 16, -1, NULL, &r),
                     MARKET_ERR_NOT_ENOUGH);
    assert_int_equal(r.available, 15);
    /* more than one can pay */
    assert_int_equal(market_purchase_units(f->c, REALM, "E", "C", "potion", 5, -1, NULL, &r),
                     MARKET_ERR_INSUFFICIENT_FUNDS);
    /* the rest: the listing leaves the market and the index */
    assert_int_equal(market_purchase_units(f->c, REALM, "D", "C", "potion", 15, 25, NULL, &r),
                     MARKET_OK);
    assert_int_equal(th_fx_num("EXISTS market:{main}:units"), 0);
    assert_int_equal(th_fx_num("ZSCORE market:{main} potion.C"), 0);
    market_audit_report a;
    assert_int_equal(market_audit(f->c, REALM, &a), MARKET_OK);
    assert_int_equal(a.index_mismatch, 0);
    assert_int_equal(market_purchase_units(f->c, REALM, "D", "C", "potion", 1, -1, NULL, &r),
                     MARKET_ERR_NOT_LISTED);
    assert_potions(50);
    /* a unique item is one unit */
    assert_int_equal(market_purchase_units(f->c, REALM, "B", "A", "axe", 2, -1, NULL, &r),
                     MARKET_ERR_NOT_ENOUGH);
    assert_int_equal(r.available, 1);
    assert_int_equal(market_purchase_units(f->c, REALM, "B", "A", "axe", 1, -1, NULL, &r),
                     MARKET_OK);
    assert_int_equal(th_fx_num("SISMEMBER inventory:{main}:B axe"), 1);
}

/* Unlisting gives the units back to the stack. */
static void test_unlist_units_back_to_the_stack(void **state) {
    th_market *f = *state;
    market_purchase_result r = {0};
    assert_int_equal(market_purchase_units(f->c, REALM, "B", "C", "potion", 4, -1, NULL, &r),
                     MARKET_OK);
    int64_t price = 0, units = 0;
    assert_int_equal(market_unlist_units(f->c, REALM, "C", "potion", &price, &units), MARKET_OK);
    assert_int_equal(price, 25);
    assert_int_equal(units, 16);
    assert_int_equal(stack_of("C", "potion"), 46);
    assert_int_equal(th_fx_num("EXISTS market:{main}:units"), 0);
    assert_potions(50);
}

/* A refusal for want of units is final under its idempotency key, and a
 * success replays with its trade. */
static void test_idem_units(void **state) {
    th_market *f = *state;
    market_idem k = {"u-1", "fp-potions"};
    market_purchase_result r = {0}, again = {0};
    assert_int_equal(market_purchase_units(f->c, REALM, "D", "C", "potion", 21, -1, &k, &r),
                     MARKET_ERR_NOT_ENOUGH);
    assert_int_equal(market_purchase_units(f->c, REALM, "D", "C", "potion", 21, -1, &k, &again),
                     MARKET_ERR_NOT_ENOUGH);
    assert_int_equal(again.replayed, 1);
    assert_int_equal(again.available, 20);
    market_idem k2 = {"u-2", "fp-potions-3"};
    assert_int_equal(market_purchase_units(f->c, REALM, "D", "C", "potion", 3, -1, &k2, &r),
                     MARKET_OK);
    assert_int_equal(market_purchase_units(f->c, REALM, "D", "C", "potion", 3, -1, &k2, &again),
                     MARKET_OK);
    assert_int_equal(again.replayed, 1);
    assert_string_equal(again.trade_id, r.trade_id);
    assert_int_equal(stack_of("D", "potion"), 3);
}

struct racer {
    market *m;
    char buyer[16];
    int64_t quantity;
    pthread_barrier_t *start;
    int rc;
    market_purchase_result res;
};

static void *race(void *arg) {
    struct racer *r = arg;
    int err;
    market_conn *c = market_conn_new(r->m, &err);
    pthread_barrier_wait(r->start);
    r->rc = market_purchase_units(c, REALM, r->buyer, "C", "potion", r->quantity, -1, NULL,
                                  &r->res);
    market_conn_free(c);
    return NULL;
}

/* 64 buyers at once, 3 units each, for a listing of 20 (then 50): exactly
 * as many win as the units allow, each refusal says how many were left
 * when it was decided, and every unit and coin is accounted for. */
static void test_64_buyers_race_for_units(void **state) {
    th_market *f = *state;
    enum { N = 64 };
    market_list_result lr;
    assert_int_equal(market_list_units(f->c, REALM, "C", "potion", 30, 25, NULL, &lr), MARKET_OK);
    assert_int_equal(lr.quantity, 50);
    market_world *w = market_world_new();
    char names[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "b%d", i);
        assert_int_equal(market_world_add_player(w, names[i], NULL, 1000), MARKET_OK);
    }
    assert_int_equal(market_world_store(f->c, REALM, w, 0), MARKET_OK);
    market_world_free(w);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, N);
    struct racer r[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        r[i] = (struct racer){.m = f->m, .quantity = 3, .start = &start};
        memcpy(r[i].buyer, names[i], sizeof r[i].buyer);
        assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < N; i++) pthread_join(t[i], NULL); /* all, before any assertion */
    int won = 0;
    for (int i = 0; i < N; i++) {
        if (r[i].rc == MARKET_OK) {
            won++;
            assert_int_equal(stack_of(names[i], "potion"), 3);
            assert_int_equal(th_fx_funds(f->c, names[i]), 1000 - 75);
        } else {
            assert_int_equal(r[i].rc, MARKET_ERR_NOT_ENOUGH);
            assert_int_equal(r[i].res.available, 2); /* 50 = 16 x 3 + 2 */
            assert_int_equal(stack_of(names[i], "potion"), 0);
            assert_int_equal(th_fx_funds(f->c, names[i]), 1000);
        }
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(won, 16);
    assert_int_equal(listed_units("potion.C"), 2);
    assert_int_equal(th_fx_funds(f->c, "C"), 16 * 75);
    assert_int_equal(th_fx_num("XLEN trades:{main}"), 16);
    long long sum = listed_units("potion.C") + stack_of("C", "potion");
    for (int i = 0; i < N; i++) sum += stack_of(names[i], "potion");
    assert_int_equal(sum, 50);
}

/* One of the threads of test_listers_and_buyers_race: the seller lists and
 * unlists its potions while buyers buy them, all at once. */
struct churn {
    market *m;
    int seller; /* 1: list and unlist C's potions; 0: buy them */
    pthread_barrier_t *start;
    int ok, refused, failed;
};

static void *churn_run(void *arg) {
    struct churn *ch = arg;
    int err;
    market_conn *c = market_conn_new(ch->m, &err);
    pthread_barrier_wait(ch->start);
    for (int k = 0; k < 40; k++) {
        int rc;
        if (ch->seller && k % 3 == 2) {
            int64_t price, units;
            rc = market_unlist_units(c, REALM, "C", "potion", &price, &units);
            if (rc == MARKET_OK && (price != 25 || units < 1)) rc = MARKET_ERR_STORE;
        } else if (ch->seller) {
            market_list_result lr;
            rc = market_list_units(c, REALM, "C", "potion", 1 + k % 4, 25, NULL, &lr);
        } else {
            market_purchase_result res;
            rc = market_purchase_units(c, REALM, "D", "C", "potion", 1, -1, NULL, &res);
        }
        if (rc == MARKET_OK)
            ch->ok++;
        else if (rc == MARKET_ERR_NOT_HELD || rc == MARKET_ERR_NOT_LISTED ||
                 rc == MARKET_ERR_NOT_ENOUGH)
            ch->refused++;
        else
            ch->failed++;
    }
    market_conn_free(c);
    return NULL;
}

/* Lists, unlists and purchases of one stack, from four threads at once, so
 * that they share batches: each is decided as if they ran one at a time.
 * Every potion stays in exactly one place, the listing is on the market
 * exactly when it holds units, and the buyer paid for what it holds. */
static void test_listers_and_buyers_race(void **state) {
    th_market *f = *state;
    enum { N = 4 };
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, N);
    struct churn ch[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        ch[i] = (struct churn){.m = f->m, .seller = i < 2, .start = &start};
        assert_int_equal(pthread_create(&t[i], NULL, churn_run, &ch[i]), 0);
    }
    for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < N; i++) {
        assert_int_equal(ch[i].failed, 0);
        assert_int_equal(ch[i].ok + ch[i].refused, 40);
    }
    assert_potions(50);
    long long listed = listed_units("potion.C");
    redisReply *z = th_fx_cmd("ZSCORE market:{main} potion.C");
    assert_int_equal(z->type == REDIS_REPLY_STRING, listed > 0);
    freeReplyObject(z);
    long long bought = stack_of("D", "potion");
    assert_int_equal(th_fx_funds(f->c, "D"), 100000000 - 25 * bought);
    assert_int_equal(th_fx_funds(f->c, "C"), 25 * bought);
    assert_int_equal(th_fx_num("XLEN trades:{main}"), bought);
}

/* Sellers C (20 at 25), F (10 at 22), G (30 at 31) and B's own (5 at 20). */
static void seed_commodity(market_conn *c) {
    market_world *w = market_world_new();
    assert_int_equal(market_world_add_player(w, "F", "Fay", 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "G", "Gus", 0), MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 0), MARKET_OK);
    market_world_free(w);
    redisReply *r = th_fx_cmd("HSET stacks:{main}:F potion 10");
    freeReplyObject(r);
    r = th_fx_cmd("HSET stacks:{main}:G potion 30");
    freeReplyObject(r);
    r = th_fx_cmd("HSET stacks:{main}:B potion 5");
    freeReplyObject(r);
    market_list_result lr;
    assert_int_equal(market_list_units(c, REALM, "F", "potion", 10, 22, NULL, &lr), MARKET_OK);
    assert_int_equal(market_list_units(c, REALM, "G", "potion", 30, 31, NULL, &lr), MARKET_OK);
    assert_int_equal(market_list_units(c, REALM, "B", "potion", 5, 20, NULL, &lr), MARKET_OK);
}

/* Without a seller: the cheapest units at or under the price, across
 * sellers, never the buyer's own, all or nothing, one trade a seller. */
static void test_buy_cheapest_across_sellers(void **state) {
    th_market *f = *state;
    seed_commodity(f->c);
    market_buy_result r;
    /* 25 at <= 30: F's 10 at 22, then 15 of C's at 25; B's own at 20 left alone */
    assert_int_equal(market_buy_units(f->c, REALM, "B", "potion", 25, 30, NULL, &r), MARKET_OK);
    assert_int_equal(r.total, 10 * 22 + 15 * 25);
    assert_int_equal(r.buyer_funds, 2000 - r.total);
    assert_int_equal(r.n_fills, 2);
    assert_string_equal(r.fill[0].seller, "F");
    assert_int_equal(r.fill[0].quantity, 10);
    assert_string_equal(r.fill[1].seller, "C");
    assert_int_equal(r.fill[1].quantity, 15);
    market_trade t;
    assert_int_equal(market_trade_get(f->c, REALM, r.fill[1].trade_id, &t), MARKET_OK);
    assert_int_equal(t.quantity, 15);
    assert_int_equal(t.price, 25);
    market_trade *chart = NULL; /* both trades of one commit, chained: newest first */
    size_t nc = 0;
    assert_int_equal(market_trades_item(f->c, REALM, "potion", 10, &chart, &nc), MARKET_OK);
    assert_int_equal(nc, 2);
    assert_string_equal(chart[0].id, r.fill[1].trade_id);
    assert_string_equal(chart[1].id, r.fill[0].trade_id);
    free(chart);
    assert_int_equal(stack_of("B", "potion"), 25);
    assert_int_equal(listed_units("potion.F"), 0); /* sold out: gone */
    assert_int_equal(th_fx_num("ZSCORE market:{main} potion.F"), 0);
    assert_int_equal(listed_units("potion.C"), 5);
    assert_int_equal(th_fx_funds(f->c, "F"), 220);
    assert_int_equal(th_fx_funds(f->c, "C"), 375);
    market_audit_report a;
    assert_int_equal(market_audit(f->c, REALM, &a), MARKET_OK);
    assert_int_equal(a.index_mismatch, 0);
    /* not enough at that price: how many there are, nothing moves */
    assert_int_equal(market_buy_units(f->c, REALM, "D", "potion", 41, 31, NULL, &r),
                     MARKET_ERR_NOT_ENOUGH);
    assert_int_equal(r.available, 5 + 5 + 30); /* C's rest, B's own (not D's), G's */
    assert_int_equal(market_buy_units(f->c, REALM, "D", "potion", 11, 25, NULL, &r),
                     MARKET_ERR_NOT_ENOUGH);
    assert_int_equal(r.available, 10);
    /* more than one can pay */
    assert_int_equal(market_buy_units(f->c, REALM, "E", "potion", 6, 25, NULL, &r),
                     MARKET_ERR_INSUFFICIENT_FUNDS); /* 5 x 20 + 25 > 100 */
    assert_int_equal(th_fx_funds(f->c, "E"), 100);
    /* an idempotent repeat replays the total and the first trade */
    market_idem k = {"c-1", "fp-c"};
    market_buy_result again;
    assert_int_equal(market_buy_units(f->c, REALM, "D", "potion", 12, 40, &k, &r), MARKET_OK);
    assert_int_equal(market_buy_units(f->c, REALM, "D", "potion", 12, 40, &k, &again), MARKET_OK);
    assert_int_equal(again.replayed, 1);
    assert_int_equal(again.total, r.total);
    assert_string_equal(again.trade_id, r.fill[0].trade_id);
    assert_int_equal(stack_of("D", "potion"), 12);
    /* nothing listed at all: none available */
    assert_int_equal(market_buy_units(f->c, REALM, "D", "elixir", 1, 1000, NULL, &r),
                     MARKET_ERR_NOT_ENOUGH);
    assert_int_equal(r.available, 0);
    /* a unique item is one unit, bought into the inventory */
    assert_int_equal(market_buy_units(f->c, REALM, "D", "axe", 1, 499, NULL, &r),
                     MARKET_ERR_NOT_ENOUGH);
    assert_int_equal(market_buy_units(f->c, REALM, "D", "axe", 1, 500, NULL, &r), MARKET_OK);
    assert_int_equal(th_fx_num("SISMEMBER inventory:{main}:D axe"), 1);
    assert_int_equal(th_fx_num("ZSCORE market:{main} axe.A"), 0);
    long long sum = listed_units("potion.C") + listed_units("potion.G") + listed_units("potion.B");
    static const char *const who[] = {"A", "B", "C", "D", "E", "F", "G"};
    for (size_t i = 0; i < sizeof who / sizeof *who; i++) sum += stack_of(who[i], "potion");
    assert_int_equal(sum, 50 + 10 + 30 + 5);
}

struct cbuyer {
    market *m;
    char buyer[16];
    pthread_barrier_t *start;
    int rc;
    market_buy_result res;
};

static void *cbuy(void *arg) {
    struct cbuyer *r = arg;
    int err;
    market_conn *c = market_conn_new(r->m, &err);
    pthread_barrier_wait(r->start);
    r->rc = market_buy_units(c, REALM, r->buyer, "potion", 4, 40, NULL, &r->res);
    market_conn_free(c);
    return NULL;
}

/* 32 buyers without a seller at once, 4 units each, for 20 + 10 + 30 + 5
 * units: 16 of them win, every unit and coin accounted for. */
static void test_buyers_without_seller_race(void **state) {
    th_market *f = *state;
    enum { N = 32 };
    seed_commodity(f->c);
    market_world *w = market_world_new();
    char names[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "c%d", i);
        assert_int_equal(market_world_add_player(w, names[i], NULL, 1000), MARKET_OK);
    }
    assert_int_equal(market_world_store(f->c, REALM, w, 0), MARKET_OK);
    market_world_free(w);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, N);
    struct cbuyer r[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        r[i] = (struct cbuyer){.m = f->m, .start = &start};
        memcpy(r[i].buyer, names[i], sizeof r[i].buyer);
        assert_int_equal(pthread_create(&t[i], NULL, cbuy, &r[i]), 0);
    }
    for (int i = 0; i < N; i++) pthread_join(t[i], NULL); /* all, before any assertion */
    int won = 0;
    int64_t paid = 0;
    for (int i = 0; i < N; i++) {
        if (r[i].rc == MARKET_OK) {
            won++;
            paid += r[i].res.total;
            assert_int_equal(stack_of(names[i], "potion"), 4);
            assert_int_equal(th_fx_funds(f->c, names[i]), 1000 - r[i].res.total);
        } else {
            if (r[i].rc != MARKET_ERR_NOT_ENOUGH) fprintf(stderr, "%s: %d\n", names[i], r[i].rc);
            assert_int_equal(r[i].rc, MARKET_ERR_NOT_ENOUGH);
            assert_int_equal(stack_of(names[i], "potion"), 0);
        }
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(won, 16); /* 65 units: 16 x 4 */
    long long left = listed_units("potion.C") + listed_units("potion.F") +
                     listed_units("potion.G") + listed_units("potion.B");
    assert_int_equal(left, 1);
    assert_int_equal(th_fx_funds(f->c, "C") + th_fx_funds(f->c, "F") + th_fx_funds(f->c, "G") +
                         th_fx_funds(f->c, "B") - 2000,
                     paid);
    market_audit_report a;
    assert_int_equal(market_audit(f->c, REALM, &a), MARKET_OK);
    assert_int_equal(a.index_mismatch, 0);
}

struct slow_buy {
    market *m;
    int rc;
    market_buy_result res;
};

static void *slow_buy_main(void *arg) {
    struct slow_buy *b = arg;
    int err;
    market_conn *c = market_conn_new(b->m, &err);
    assert_non_null(c);
    b->rc = market_buy_units(c, REALM, "D", "potion", 30, 31, NULL, &b->res);
    market_conn_free(c);
    return NULL;
}

/* Item strategy: a purchase without a seller chooses its listings without
 * a lock, then locks them. Another holder of one of them, there first,
 * sells most of its units before letting go: under the locks the chosen
 * listings no longer make the quantity, and the purchase chooses again
 * (taking the dearer listing it had left out) instead of failing. Every
 * unit and coin stays in one place. */
static void test_buy_chooses_again_when_outbid(void **state) {
    th_market *f = *state;
    if (th_fx_strategy != MARKET_STRATEGY_ITEM)
        skip();           /* only that strategy chooses before locking */
    seed_commodity(f->c); /* B 5 at 20, F 10 at 22, C 20 at 25, G 30 at 31 */
    long long funds0 = th_fx_funds(f->c, "B") + th_fx_funds(f->c, "C") + th_fx_funds(f->c, "D") +
                       th_fx_funds(f->c, "F") + th_fx_funds(f->c, "G");
    lock_handle h; /* waited for: the last test's locks go by the releaser thread, maybe late */
    assert_int_equal(lock_acquire(f->lock, "lock:item:{main}:potion.F", 10000, 30000, &h),
                     LOCK_OK);
    long long ranges = th_fx_calls("zrange"), prices = th_fx_calls("zmscore");
    struct slow_buy b = {.m = f->m};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_buy_main, &b), 0);
    while (th_fx_calls("zmscore") == prices) /* D's choice read: B 5, F 10, C 15 of 20 */
        sched_yield();
    /* the holder of F's listing sells 8 of its 10 units to B, and lets go */
    freeReplyObject(th_fx_cmd("HINCRBY market:{main}:units potion.F -8"));
    freeReplyObject(th_fx_cmd("HINCRBY stacks:{main}:B potion 8"));
    freeReplyObject(th_fx_cmd("HINCRBY users:{main}:B funds -176"));
    freeReplyObject(th_fx_cmd("HINCRBY users:{main}:F funds 176"));
    assert_int_equal(lock_release(f->lock, &h), LOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(b.rc, MARKET_OK);
    assert_true(th_fx_calls("zrange") - ranges >= 2); /* it chose again */
    /* B 5 at 20, F 2 at 22, C 20 at 25, then G 3 at 31 */
    assert_int_equal(b.res.n_fills, 4);
    assert_string_equal(b.res.fill[3].seller, "G");
    assert_int_equal(b.res.fill[3].quantity, 3);
    assert_int_equal(b.res.total, 5 * 20 + 2 * 22 + 20 * 25 + 3 * 31);
    assert_int_equal(stack_of("D", "potion"), 30);
    assert_int_equal(listed_units("potion.F") + listed_units("potion.B") +
                         listed_units("potion.C"),
                     0);
    assert_int_equal(listed_units("potion.G"), 27);
    long long units = stack_of("B", "potion") + stack_of("C", "potion") + stack_of("D", "potion") +
                      stack_of("F", "potion") + stack_of("G", "potion") + listed_units("potion.G");
    assert_int_equal(units, 50 + 10 + 30 + 5); /* C's 50, F's 10, G's 30, B's 5 */
    assert_int_equal(th_fx_funds(f->c, "B") + th_fx_funds(f->c, "C") + th_fx_funds(f->c, "D") +
                         th_fx_funds(f->c, "F") + th_fx_funds(f->c, "G"),
                     funds0);
}

/* A refusal for want of units, under an idempotency key, from 20 listings
 * (under the item strategy: 21 leases whose fences the record's commit
 * writes) is final: the replay says the same. */
static void test_idem_refusal_over_many_listings(void **state) {
    th_market *f = *state;
    market_world *w = market_world_new();
    char id[16];
    for (int i = 0; i < 20; i++) {
        snprintf(id, sizeof id, "s%d", i);
        assert_int_equal(market_world_add_player(w, id, NULL, 0), MARKET_OK);
        assert_int_equal(market_world_add_units_listing(w, id, "ore", 10 + i, 1), MARKET_OK);
    }
    assert_int_equal(market_world_store(f->c, REALM, w, 0), MARKET_OK);
    market_world_free(w);
    market_idem k = {"ore-1", "fp-ore"};
    market_buy_result r, again;
    assert_int_equal(market_buy_units(f->c, REALM, "D", "ore", 25, 100, &k, &r),
                     MARKET_ERR_NOT_ENOUGH);
    assert_int_equal(r.available, 20);
    assert_int_equal(market_buy_units(f->c, REALM, "D", "ore", 25, 100, &k, &again),
                     MARKET_ERR_NOT_ENOUGH);
    assert_int_equal(again.replayed, 1);
    assert_int_equal(again.available, 20);
    assert_int_equal(market_buy_units(f->c, REALM, "D", "ore", 20, 100, NULL, &r), MARKET_OK);
    assert_int_equal(r.n_fills, 20);
    assert_int_equal(r.total, 20 * 10 + 190);
    assert_int_equal(stack_of("D", "ore"), 20);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_list_units_from_a_stack),
        T(test_buy_part_of_a_listing),
        T(test_unlist_units_back_to_the_stack),
        T(test_idem_units),
        T(test_64_buyers_race_for_units),
        T(test_listers_and_buyers_race),
        T(test_buy_cheapest_across_sellers),
        T(test_buyers_without_seller_race),
        T(test_idem_refusal_over_many_listings),
        T(test_buy_chooses_again_when_outbid),
    };
    return th_run_strategies("market stacks", tests, sizeof tests / sizeof *tests);
}
