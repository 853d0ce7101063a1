/* test_market_direct.c - direct trades against a real redis-server, under each
 * strategy: a proposal moves nothing, its accept swaps both sides at once
 * (items, units, funds); the refusals (a stranger's accept, the proposer's
 * own, goods or funds one lacks at proposal or at accept, an unknown player,
 * a closed or expired trade) move nothing; either side cancels; replays of a
 * key; goods that move between an accept's decision and its commit; the
 * players' open trades; and 1,000 pairs accepting trades in both directions
 * at once, each pair's two trades exclusive: one of them or none swaps, never
 * both, no lock is left behind, and every item and coin is where the outcomes
 * say. The store is audited after each.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/helpers/http_client.h"
#include "tests/helpers/market_fx.h"

#define REALM MARKET_REALM_DEFAULT
#define PAIRS 1000

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A holds a sword, 20 ore and 100; B a shield, 10 wood and 500; C 50; D nothing. */
static void seed(market_conn *c) {
    (void)th_fx_num("FLUSHALL");
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "A", NULL, 100), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "B", NULL, 500), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "C", NULL, 50), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "D", NULL, 0), MARKET_OK);
    assert_int_equal(market_world_add_item(w, "A", "sword"), MARKET_OK);
    assert_int_equal(market_world_add_stack(w, "A", "ore", 20), MARKET_OK);
    assert_int_equal(market_world_add_item(w, "B", "shield"), MARKET_OK);
    assert_int_equal(market_world_add_stack(w, "B", "wood", 10), MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
}

#define FUNDS_ALL 650

static int fx_setup(void **state) {
    th_market *f = th_market_new((market_config){.redis_timeout_ms = 1000,
                                                 .lock_ttl_ms = 5000,
                                                 .acquire_timeout_ms = 5000,
                                                 .workers = 4,
                                                 .sweep_interval_ms = 0,
                                                 .test_decided = th_fx_on_decided});
    if (!f) return -1;
    th_fx_arm(NULL);
    seed(f->c);
    *state = f;
    return 0;
}

static int fx_teardown(void **state) {
    th_market_free(*state);
    return 0;
}

/* A side: items (NULL-ended), one kind of units (NULL: none) and funds. */
static market_goods side(const char *item, const char *unit_item, int64_t units, int64_t funds) {
    market_goods g = {.funds = funds};
    if (item) snprintf(g.items[g.n_items++], sizeof g.items[0], "%s", item);
    if (unit_item) {
        snprintf(g.unit_item[0], sizeof g.unit_item[0], "%s", unit_item);
        g.units[0] = units;
        g.n_units = 1;
    }
    return g;
}

static int propose(market_conn *c, const char *from, const char *to, const market_goods *give,
                   const market_goods *get, const market_idem *idem, market_direct_result *res) {
    market_order o = {.type = MARKET_ORDER_DIRECT,
                      .realm = REALM,
                      .player = from,
                      .to = to,
                      .give = give,
                      .get = get,
                      .idem = idem};
    int rc = market_order_run(c, &o);
    if (res) *res = o.res.direct;
    return rc;
}

/* Accepts (accept) or cancels direct trade id as player. */
static int close_trade(market_conn *c, const char *player, int64_t id, int accept,
                       const market_idem *idem, market_direct_result *res) {
    market_order o = {.type = accept ? MARKET_ORDER_DIRECT_ACCEPT : MARKET_ORDER_DIRECT_CANCEL,
                      .realm = REALM,
                      .player = player,
                      .id = id,
                      .idem = idem};
    int rc = market_order_run(c, &o);
    if (res) *res = o.res.direct;
    return rc;
}

static int holds(const char *id, const char *item) {
    return (int)th_fx_num("SISMEMBER inventory:{main}:%s %s", id, item);
}

static long long units(const char *id, const char *item) {
    return th_fx_num("HGET stacks:{main}:%s %s", id, item);
}

/* Funds conserved, none negative; every item in one place; the units all there. */
static void assert_whole(market_conn *c, int64_t funds, size_t items, int64_t all_units) {
    market_audit_report a;
    assert_int_equal(market_audit(c, REALM, &a), MARKET_OK);
    assert_int_equal(a.total_funds + a.total_escrow, funds);
    assert_int_equal(a.negative_funds, 0);
    assert_int_equal(a.items_misplaced, 0);
    assert_int_equal(a.items_held + a.items_listed, items);
    assert_int_equal(a.units_in_stacks + a.units_listed, all_units);
}

/* A proposal moves nothing; B's accept swaps the sword, 5 ore and 30 for the shield, all
 * of B's wood and 200, in one commit; the trade is done and leaves both indexes. */
static void test_accept_swaps_both_sides(void **state) {
    th_market *f = *state;
    market_goods give = side("sword", "ore", 5, 30), get = side("shield", "wood", 10, 200);
    market_direct_result r;
    assert_int_equal(propose(f->c, "A", "B", &give, &get, NULL, &r), MARKET_OK);
    int64_t id = r.t.id;
    assert_int_equal(id, 1);
    assert_int_equal(r.t.state, MARKET_DIRECT_OPEN);
    assert_true(r.t.expires_ms - r.t.made_ms == MARKET_DIRECT_DURATION_S * 1000);
    assert_true(holds("A", "sword"));
    assert_int_equal(th_fx_funds(f->c, "A"), 100);
    assert_int_equal(th_fx_num("ZCARD directs:{main}:A"), 1);
    assert_int_equal(th_fx_num("ZCARD directs:{main}:B"), 1);

    assert_int_equal(close_trade(f->c, "B", id, 1, NULL, &r), MARKET_OK);
    assert_int_equal(r.t.state, MARKET_DIRECT_DONE);
    assert_int_equal(r.funds, 500 - 200 + 30);
    assert_false(holds("A", "sword"));
    assert_true(holds("B", "sword"));
    assert_true(holds("A", "shield"));
    assert_false(holds("B", "shield"));
    assert_int_equal(units("A", "ore"), 15);
    assert_int_equal(units("B", "ore"), 5);
    assert_int_equal(units("A", "wood"), 10);
    assert_int_equal(th_fx_num("HEXISTS stacks:{main}:B wood"), 0); /* the last unit: gone */
    assert_int_equal(th_fx_funds(f->c, "A"), 100 - 30 + 200);
    assert_int_equal(th_fx_funds(f->c, "B"), 500 - 200 + 30);
    assert_int_equal(th_fx_num("ZCARD directs:{main}:A"), 0);
    assert_int_equal(th_fx_num("ZCARD directs:{main}:B"), 0);
    market_direct t;
    assert_int_equal(market_direct_get(f->c, REALM, id, &t), MARKET_OK);
    assert_int_equal(t.state, MARKET_DIRECT_DONE);
    assert_string_equal(t.give.items[0], "sword");
    assert_int_equal(t.get.units[0], 10);
    assert_true(th_fx_num("TTL direct:{main}:1") > 0);
    /* done: a second accept, a cancel */
    assert_int_equal(close_trade(f->c, "B", id, 1, NULL, &r), MARKET_ERR_TRADE_CLOSED);
    assert_int_equal(close_trade(f->c, "A", id, 0, NULL, &r), MARKET_ERR_TRADE_CLOSED);
    assert_whole(f->c, FUNDS_ALL, 2, 30);
}

/* What is refused moves nothing and writes no trade. */
static void test_refusals_move_nothing(void **state) {
    th_market *f = *state;
    market_direct_result r;
    char *before = th_store_fingerprint(th_fx_redis.port);
    market_goods helm = side("helm", NULL, 0, 0), none = side(NULL, NULL, 0, 0);
    market_goods much_ore = side(NULL, "ore", 21, 0), rich = side(NULL, NULL, 0, 101);
    assert_int_equal(propose(f->c, "A", "B", &helm, &none, NULL, &r), MARKET_ERR_NOT_HELD);
    assert_string_equal(r.lacks, "A");
    assert_string_equal(r.missing, "helm");
    assert_int_equal(propose(f->c, "A", "B", &much_ore, &none, NULL, &r), MARKET_ERR_NOT_HELD);
    assert_string_equal(r.missing, "ore");
    assert_int_equal(propose(f->c, "A", "B", &rich, &none, NULL, &r),
                     MARKET_ERR_INSUFFICIENT_FUNDS);
    assert_int_equal(propose(f->c, "A", "nobody", &none, &rich, NULL, &r), MARKET_ERR_NO_PLAYER);
    assert_int_equal(propose(f->c, "nobody", "A", &none, &rich, NULL, &r), MARKET_ERR_NO_PLAYER);
    assert_int_equal(propose(f->c, "A", "A", &none, &rich, NULL, &r), MARKET_ERR_INVALID);
    assert_int_equal(propose(f->c, "A", "B", &none, &none, NULL, &r), MARKET_ERR_INVALID);
    assert_int_equal(close_trade(f->c, "B", 7, 1, NULL, &r), MARKET_ERR_NO_DIRECT);
    char *after = th_store_fingerprint(th_fx_redis.port);
    assert_string_equal(before, after); /* not even a counter */
    free(before);
    free(after);

    /* an open trade: a stranger's accept and cancel, the proposer's accept */
    market_goods sword = side("sword", NULL, 0, 0), shield = side("shield", NULL, 0, 0);
    assert_int_equal(propose(f->c, "A", "B", &sword, &shield, NULL, &r), MARKET_OK);
    int64_t id = r.t.id;
    assert_int_equal(close_trade(f->c, "C", id, 1, NULL, &r), MARKET_ERR_NO_DIRECT);
    assert_int_equal(close_trade(f->c, "C", id, 0, NULL, &r), MARKET_ERR_NO_DIRECT);
    assert_int_equal(close_trade(f->c, "A", id, 1, NULL, &r), MARKET_ERR_OWN_TRADE);
    /* B no longer holds the shield: refused, nothing moved, still open */
    (void)th_fx_num("SMOVE inventory:{main}:B inventory:{main}:D shield");
    assert_int_equal(close_trade(f->c, "B", id, 1, NULL, &r), MARKET_ERR_NOT_HELD);
    assert_string_equal(r.lacks, "B");
    assert_string_equal(r.missing, "shield");
    assert_true(holds("A", "sword"));
    assert_true(holds("D", "shield"));
    /* A no longer holds the sword either: the proposer's side is checked first */
    (void)th_fx_num("SMOVE inventory:{main}:A inventory:{main}:D sword");
    assert_int_equal(close_trade(f->c, "B", id, 1, NULL, &r), MARKET_ERR_NOT_HELD);
    assert_string_equal(r.lacks, "A");
    (void)th_fx_num("SMOVE inventory:{main}:D inventory:{main}:A sword");
    (void)th_fx_num("SMOVE inventory:{main}:D inventory:{main}:B shield");
    market_direct t;
    assert_int_equal(market_direct_get(f->c, REALM, id, &t), MARKET_OK);
    assert_int_equal(t.state, MARKET_DIRECT_OPEN);
    /* its time passed: expired, refused */
    (void)th_fx_num("HSET direct:{main}:%lld expires 1000", (long long)id);
    assert_int_equal(close_trade(f->c, "B", id, 1, NULL, &r), MARKET_ERR_TRADE_CLOSED);
    assert_int_equal(r.t.state, MARKET_DIRECT_EXPIRED);
    assert_int_equal(market_direct_get(f->c, REALM, id, &t), MARKET_OK);
    assert_int_equal(t.state, MARKET_DIRECT_EXPIRED);
    assert_true(holds("A", "sword"));
    assert_true(holds("B", "shield"));
    assert_int_equal(th_fx_funds(f->c, "A"), 100);
    assert_whole(f->c, FUNDS_ALL, 2, 30);
}

/* Either side cancels an open trade; then it cannot be accepted. */
static void test_either_side_cancels(void **state) {
    th_market *f = *state;
    market_goods sword = side("sword", NULL, 0, 0), pay = side(NULL, NULL, 0, 300);
    market_direct_result r;
    assert_int_equal(propose(f->c, "A", "B", &sword, &pay, NULL, &r), MARKET_OK);
    int64_t first = r.t.id;
    assert_int_equal(close_trade(f->c, "B", first, 0, NULL, &r), MARKET_OK);
    assert_int_equal(r.t.state, MARKET_DIRECT_CANCELLED);
    assert_string_equal(r.t.closed_by, "B");
    assert_int_equal(close_trade(f->c, "B", first, 1, NULL, &r), MARKET_ERR_TRADE_CLOSED);
    assert_int_equal(r.t.state, MARKET_DIRECT_CANCELLED);
    assert_int_equal(propose(f->c, "A", "B", &sword, &pay, NULL, &r), MARKET_OK);
    int64_t second = r.t.id;
    assert_int_equal(second, first + 1);
    assert_int_equal(close_trade(f->c, "A", second, 0, NULL, &r), MARKET_OK);
    assert_string_equal(r.t.closed_by, "A");
    assert_int_equal(th_fx_num("ZCARD directs:{main}:A"), 0);
    assert_int_equal(th_fx_num("ZCARD directs:{main}:B"), 0);
    assert_true(holds("A", "sword"));
    assert_int_equal(th_fx_funds(f->c, "B"), 500);
    assert_whole(f->c, FUNDS_ALL, 2, 30);
}

/* A proposal and an accept sent twice with one key: one trade, one swap. */
static void test_keys_replay(void **state) {
    th_market *f = *state;
    market_goods ore = side(NULL, "ore", 20, 0), pay = side(NULL, NULL, 0, 100);
    market_idem k1 = {.key = "p-1", .fingerprint = "fp1"},
                k2 = {.key = "a-1", .fingerprint = "fp2"};
    market_direct_result r;
    assert_int_equal(propose(f->c, "A", "C", &ore, &pay, &k1, &r), MARKET_OK);
    assert_false(r.replayed);
    int64_t id = r.t.id;
    assert_int_equal(propose(f->c, "A", "C", &ore, &pay, &k1, &r), MARKET_OK);
    assert_true(r.replayed);
    assert_int_equal(r.t.id, id);
    assert_int_equal(th_fx_num("GET market:{main}:directs"), 1);
    /* C lacks the 100 */
    assert_int_equal(close_trade(f->c, "C", id, 1, &k2, &r), MARKET_ERR_INSUFFICIENT_FUNDS);
    assert_string_equal(r.lacks, "C");
    assert_int_equal(th_fx_num("HINCRBY users:{main}:C funds 50"), 100);
    assert_int_equal(close_trade(f->c, "C", id, 1, &k2, &r), MARKET_ERR_INSUFFICIENT_FUNDS);
    market_idem k3 = {.key = "a-2", .fingerprint = "fp2"};
    assert_int_equal(close_trade(f->c, "C", id, 1, &k3, &r), MARKET_OK);
    assert_int_equal(close_trade(f->c, "C", id, 1, &k3, &r), MARKET_OK);
    assert_true(r.replayed);
    assert_int_equal(units("C", "ore"), 20);
    assert_int_equal(th_fx_num("HEXISTS stacks:{main}:A ore"), 0);
    assert_int_equal(th_fx_funds(f->c, "A"), 200);
    assert_int_equal(th_fx_funds(f->c, "C"), 0);
    assert_whole(f->c, FUNDS_ALL + 50, 2, 30);
}

static void sword_to_d(void) {
    (void)th_fx_num("SMOVE inventory:{main}:A inventory:{main}:D sword");
}

/* The sword leaves A between an accept's decision and its commit: the commit aborts, the
 * accept is decided again and refused; the shield stays B's, the trade open. */
static void test_goods_moved_before_an_accept_commits(void **state) {
    th_market *f = *state;
    market_goods sword = side("sword", NULL, 0, 0), shield = side("shield", NULL, 0, 0);
    market_direct_result r;
    assert_int_equal(propose(f->c, "A", "B", &sword, &shield, NULL, &r), MARKET_OK);
    int64_t id = r.t.id;
    th_fx_arm(sword_to_d);
    assert_int_equal(close_trade(f->c, "B", id, 1, NULL, &r), MARKET_ERR_NOT_HELD);
    assert_false(th_fx_armed());
    assert_true(holds("D", "sword"));
    assert_false(holds("B", "sword"));
    assert_true(holds("B", "shield"));
    assert_false(holds("A", "shield"));
    market_direct t;
    assert_int_equal(market_direct_get(f->c, REALM, id, &t), MARKET_OK);
    assert_int_equal(t.state, MARKET_DIRECT_OPEN);
    assert_whole(f->c, FUNDS_ALL, 2, 30);
}

static void a_cancels_trade_1(void) {
    (void)th_fx_num("HSET direct:{main}:1 state cancelled closed 5 by A");
}

/* The proposer cancels (as another server's commit would) between an accept's decision and
 * its commit: the commit aborts, the accept is decided again and refused as closed; nothing
 * swapped, the trade stays cancelled. */
static void test_cancel_before_an_accept_commits(void **state) {
    th_market *f = *state;
    market_goods sword = side("sword", NULL, 0, 0), pay = side(NULL, NULL, 0, 50);
    market_direct_result r;
    assert_int_equal(propose(f->c, "A", "B", &sword, &pay, NULL, &r), MARKET_OK);
    assert_int_equal(r.t.id, 1);
    th_fx_arm(a_cancels_trade_1);
    assert_int_equal(close_trade(f->c, "B", 1, 1, NULL, &r), MARKET_ERR_TRADE_CLOSED);
    assert_false(th_fx_armed());
    assert_int_equal(r.t.state, MARKET_DIRECT_CANCELLED);
    assert_true(holds("A", "sword"));
    assert_int_equal(th_fx_funds(f->c, "B"), 500);
    redisReply *st = th_fx_cmd("HGET direct:{main}:1 state");
    assert_string_equal(st->str, "cancelled");
    freeReplyObject(st);
    assert_whole(f->c, FUNDS_ALL, 2, 30);
}

/* A player's open trades: proposed by it and to it, not the closed ones. */
static void test_players_open_trades(void **state) {
    th_market *f = *state;
    market_goods sword = side("sword", NULL, 0, 0), pay = side(NULL, NULL, 0, 10);
    market_direct_result r;
    assert_int_equal(propose(f->c, "A", "B", &sword, &pay, NULL, &r), MARKET_OK);
    assert_int_equal(propose(f->c, "C", "A", &pay, &sword, NULL, &r), MARKET_OK);
    assert_int_equal(propose(f->c, "A", "D", &sword, &pay, NULL, &r), MARKET_OK);
    assert_int_equal(close_trade(f->c, "D", r.t.id, 0, NULL, &r), MARKET_OK);
    market_direct *t = NULL;
    size_t n = 0;
    assert_int_equal(market_player_directs(f->c, REALM, "A", &t, &n), MARKET_OK);
    assert_int_equal(n, 2);
    assert_string_equal(t[0].to, "B");
    assert_string_equal(t[1].from, "C");
    free(t);
    assert_int_equal(market_player_directs(f->c, REALM, "D", &t, &n), MARKET_OK);
    assert_int_equal(n, 0);
    assert_null(t);
    assert_int_equal(market_player_directs(f->c, REALM, "B", &t, &n), MARKET_OK);
    assert_int_equal(n, 1);
    free(t);
}

/* ---- 1,000 pairs, both directions at once ---- */

/* Pair i: x<i> holds item gx<i> and 100, y<i> holds gy<i> and 100. Trade 2i (x -> y): gx
 * for 10. Trade 2i+1 (y -> x): gy for gx. Whichever is accepted first, the other finds gx
 * gone: one of the two swaps, or none (a refusal), never both. */
static void pairs_seed(market_conn *c) {
    (void)th_fx_num("FLUSHALL");
    market_world *w = market_world_new();
    assert_non_null(w);
    char id[16], item[16];
    for (int i = 0; i < PAIRS; i++) {
        for (int s = 0; s < 2; s++) {
            snprintf(id, sizeof id, "%c%d", s ? 'y' : 'x', i);
            snprintf(item, sizeof item, "g%c%d", s ? 'y' : 'x', i);
            assert_int_equal(market_world_add_player(w, id, NULL, 100), MARKET_OK);
            assert_int_equal(market_world_add_item(w, id, item), MARKET_OK);
        }
    }
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
}

struct acceptor {
    th_market *f;
    int dir; /* 0: the y's accept trades x -> y; 1: the x's accept trades y -> x */
    int from, step;
    int rc[PAIRS];
};

/* Accepts one direction's trades of pairs from, from + step, ... */
static void *accepting(void *arg) {
    struct acceptor *a = arg;
    int err;
    market_conn *c = market_conn_new(a->f->m, &err);
    assert_non_null(c);
    char me[16];
    for (int i = a->from; i < PAIRS; i += a->step) {
        snprintf(me, sizeof me, "%c%d", a->dir ? 'x' : 'y', i);
        a->rc[i] = close_trade(c, me, 2 * i + 1 + a->dir, 1, NULL, NULL);
    }
    market_conn_free(c);
    return NULL;
}

#define THREADS 8 /* four of each direction, in step */

/* The players' leases held: their locks' keys (not the waiting marks, ":wanted", nor the
 * fencing records a commit leaves, ":fenced"). */
static long long leases_held(void) {
    return th_fx_num("EVAL %s 0", "local n = 0 for _, k in ipairs(redis.call('KEYS', "
                                  "'lock:player:*')) do if not (k:find(':wanted$') or "
                                  "k:find(':fenced$')) then n = n + 1 end end return n");
}

static void test_1000_pairs_both_directions(void **state) {
    th_market *f = *state;
    pairs_seed(f->c);
    char x[16], y[16], gx[16], gy[16];
    for (int i = 0; i < PAIRS; i++) {
        snprintf(x, sizeof x, "x%d", i);
        snprintf(y, sizeof y, "y%d", i);
        snprintf(gx, sizeof gx, "gx%d", i);
        snprintf(gy, sizeof gy, "gy%d", i);
        market_goods g_x = side(gx, NULL, 0, 0), ten = side(NULL, NULL, 0, 10),
                     g_y = side(gy, NULL, 0, 0);
        market_direct_result r;
        assert_int_equal(propose(f->c, x, y, &g_x, &ten, NULL, &r), MARKET_OK);
        assert_int_equal(r.t.id, 2 * i + 1);
        assert_int_equal(propose(f->c, y, x, &g_y, &g_x, NULL, &r), MARKET_OK);
    }
    static struct acceptor a[THREADS];
    pthread_t t[THREADS];
    for (int k = 0; k < THREADS; k++) {
        a[k] = (struct acceptor){.f = f, .dir = k % 2, .from = k / 2, .step = THREADS / 2};
        assert_int_equal(pthread_create(&t[k], NULL, accepting, &a[k]), 0);
    }
    for (int k = 0; k < THREADS; k++)
        pthread_join(t[k], NULL);
    int swaps[2] = {0, 0}, refused = 0;
    for (int i = 0; i < PAIRS; i++) {
        int rc0 = a[2 * (i % (THREADS / 2))].rc[i], rc1 = a[2 * (i % (THREADS / 2)) + 1].rc[i];
        for (int d = 0; d < 2; d++) {
            int rc = d ? rc1 : rc0;
            assert_true(rc == MARKET_OK || rc == MARKET_ERR_NOT_HELD || rc == MARKET_ERR_BUSY ||
                        rc == MARKET_ERR_CONFLICT);
        }
        assert_false(rc0 == MARKET_OK && rc1 == MARKET_OK); /* never both */
        snprintf(x, sizeof x, "x%d", i);
        snprintf(y, sizeof y, "y%d", i);
        snprintf(gx, sizeof gx, "gx%d", i);
        snprintf(gy, sizeof gy, "gy%d", i);
        if (rc0 == MARKET_OK) { /* gx to y for 10 */
            assert_true(holds(y, gx) && holds(y, gy) && !holds(x, gx));
            assert_int_equal(th_fx_funds(f->c, x), 110);
            assert_int_equal(th_fx_funds(f->c, y), 90);
        } else if (rc1 == MARKET_OK) { /* gy for gx */
            assert_true(holds(x, gy) && holds(y, gx) && !holds(x, gx) && !holds(y, gy));
            assert_int_equal(th_fx_funds(f->c, x), 100);
            assert_int_equal(th_fx_funds(f->c, y), 100);
        } else {
            assert_true(holds(x, gx) && holds(y, gy));
            assert_int_equal(th_fx_funds(f->c, x), 100);
        }
        swaps[0] += rc0 == MARKET_OK;
        swaps[1] += rc1 == MARKET_OK;
        refused += rc0 != MARKET_OK && rc1 != MARKET_OK;
    }
    fprintf(stderr, "# 1,000 pairs: %d swapped x -> y, %d y -> x, %d neither\n", swaps[0], swaps[1],
            refused);
    assert_int_equal(swaps[0] + swaps[1] + refused, PAIRS);
    /* every lease released by the releaser thread soon after its batch: within 2 s, while an
     * unreleased one would hold for its 5 s (waiting marks, ":wanted", go with the leases) */
    for (int k = 0; k < 200 && leases_held(); k++)
        sleep_ms(10);
    assert_int_equal(leases_held(), 0);
    assert_whole(f->c, 200 * PAIRS, 2 * PAIRS, 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_accept_swaps_both_sides),
        T(test_refusals_move_nothing),
        T(test_either_side_cancels),
        T(test_keys_replay),
        T(test_goods_moved_before_an_accept_commits),
        T(test_cancel_before_an_accept_commits),
        T(test_players_open_trades),
        T(test_1000_pairs_both_directions),
    };
    return th_run_strategies("market direct trades", tests, sizeof tests / sizeof *tests);
}
