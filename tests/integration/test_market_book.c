/* test_market_book.c - buy orders and the book, against a real
 * redis-server, under each strategy: a buy order filling listings then
 * resting with its escrow; selling into the book in price-time priority,
 * all or nothing or partly, never into the seller's own orders, paying the
 * realm's cut; taking an order back; idempotent orders; refusals that
 * change nothing; a buy order taken back, and one filled, by another
 * server between a batch's decision and its commit; a seller's last units
 * and units it buys in one commit; a model of price-time priority run
 * against the service order by order, and the same players placing,
 * selling and cancelling at once, their orders then replayed through the
 * model in the order the service decided them; and many players at once,
 * then the audit: funds and escrow conserved, every unit in one place,
 * every order in its book.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/helpers/market_fx.h"

#define REALM MARKET_REALM_DEFAULT
#define FUNDS 100000 /* B's, D's and S's */
#define HOUSE 1000
#define FUNDS_ALL (3 * FUNDS + HOUSE)
#define ORE_S 100 /* S's ore; T lists 10 of its 50 at 20 */
#define UNITS_ALL (ORE_S + 50)

/* ---- orders ---- */

static int bid(market_conn *c, const char *buyer, int64_t q, int64_t max, const market_idem *k,
               market_buy_result *r) {
    market_order o = {.type = MARKET_ORDER_BID,
                      .realm = REALM,
                      .player = buyer,
                      .item = "ore",
                      .quantity = q,
                      .price = max,
                      .idem = k};
    int rc = market_order_run(c, &o);
    if (r) *r = o.res.buy;
    return rc;
}

static int sell(market_conn *c, const char *seller, int64_t q, int64_t min, int partial,
                const market_idem *k, market_sell_result *r) {
    market_order o = {.type = MARKET_ORDER_SELL,
                      .realm = REALM,
                      .player = seller,
                      .item = "ore",
                      .quantity = q,
                      .price = min,
                      .partial = partial,
                      .idem = k};
    int rc = market_order_run(c, &o);
    if (r) *r = o.res.sell;
    return rc;
}

static int cancel(market_conn *c, const char *buyer, int64_t id, market_cancel_result *r) {
    market_order o = {.type = MARKET_ORDER_CANCEL, .realm = REALM, .player = buyer, .id = id};
    int rc = market_order_run(c, &o);
    if (r) *r = o.res.cancel;
    return rc;
}

static int64_t escrow_of(market_conn *c, const char *id) {
    market_player *p = NULL;
    assert_int_equal(market_player_get(c, REALM, id, &p), MARKET_OK);
    int64_t e = p->escrow;
    market_player_free(p);
    return e;
}

static int64_t ore_of(const char *id) {
    return th_fx_num("HGET stacks:{main}:%s ore", id);
}

/* Funds and escrow together conserved, every unit in one place, every
 * order's escrow its buyer's and every order in its book and its buyer's
 * list. */
static void assert_conserved(market_conn *c, int64_t funds_all, int64_t units_all) {
    market_audit_report a;
    assert_int_equal(market_audit(c, REALM, &a), MARKET_OK);
    assert_int_equal(a.total_funds + a.total_escrow, funds_all);
    assert_int_equal(a.orders_escrow, a.total_escrow);
    assert_int_equal(a.orders_misbooked, 0);
    assert_int_equal(a.negative_funds, 0);
    assert_int_equal(a.negative_escrow, 0);
    assert_int_equal(a.units_in_stacks + a.units_listed, units_all);
}

/* ---- the fixture ---- */

/* B, D and S have funds; S 100 ore; T lists 10 of its 50 ore at 20. */
static void seed(market_conn *c) {
    (void)th_fx_num("FLUSHALL");
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "B", "Bob", FUNDS), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "D", "Dave", FUNDS), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "S", "Sam", FUNDS), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "T", "Tess", 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "game", "The house", HOUSE), MARKET_OK);
    assert_int_equal(market_world_add_stack(w, "S", "ore", ORE_S), MARKET_OK);
    assert_int_equal(market_world_add_stack(w, "T", "ore", 40), MARKET_OK);
    assert_int_equal(market_world_add_units_listing(w, "T", "ore", 20, 10), MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
}

static int fx_setup(void **state) {
    th_market *f = th_market_new((market_config){.redis_timeout_ms = 1000,
                                                 .lock_ttl_ms = 5000,
                                                 .acquire_timeout_ms = 5000,
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

/* ---- tests ---- */

/* D wants 15 ore at up to 25: T's 10 at 20 fill at once (at 20), the other
 * 5 rest in the book at 25 with 125 of D's funds in escrow. A buy order
 * under every listing rests whole. */
static void test_order_fills_listings_then_rests(void **state) {
    th_market *f = *state;
    market_buy_result r;
    assert_int_equal(bid(f->c, "D", 15, 25, NULL, &r), MARKET_OK);
    assert_int_equal(r.quantity, 10);
    assert_int_equal(r.total, 200);
    assert_int_equal(r.n_fills, 1);
    assert_string_equal(r.fill[0].seller, "T");
    assert_int_equal(r.rested, 5);
    assert_true(r.order_id >= 1);
    assert_int_equal(r.buyer_funds, FUNDS - 200 - 125);
    assert_int_equal(th_fx_funds(f->c, "D"), FUNDS - 325);
    assert_int_equal(escrow_of(f->c, "D"), 125);
    assert_int_equal(ore_of("D"), 10);
    assert_int_equal(th_fx_funds(f->c, "T"), 200);
    market_book bk;
    assert_int_equal(market_book_get(f->c, REALM, "ore", 10, &bk), MARKET_OK);
    assert_int_equal(bk.n_asks, 0);
    assert_int_equal(bk.n_bids, 1);
    assert_int_equal(bk.bids[0].price, 25);
    assert_int_equal(bk.bids[0].units, 5);
    assert_int_equal(bk.bids[0].orders, 1);
    market_buy_result r2;
    assert_int_equal(bid(f->c, "B", 3, 30, NULL, &r2), MARKET_OK); /* nothing listed: rests */
    assert_int_equal(r2.quantity, 0);
    assert_int_equal(r2.n_fills, 0);
    assert_int_equal(r2.rested, 3);
    assert_true(r2.order_id > r.order_id);
    assert_int_equal(market_book_get(f->c, REALM, "ore", 1, &bk), MARKET_OK);
    assert_int_equal(bk.n_bids, 1); /* depth 1: the best level alone */
    assert_int_equal(bk.bids[0].price, 30);
    market_bid *v = NULL;
    size_t n = 0;
    assert_int_equal(market_player_orders(f->c, REALM, "D", &v, &n), MARKET_OK);
    assert_int_equal(n, 1);
    assert_int_equal(v[0].id, r.order_id);
    assert_int_equal(v[0].price, 25);
    assert_int_equal(v[0].quantity, 15);
    assert_int_equal(v[0].left, 5);
    free(v);
    assert_conserved(f->c, FUNDS_ALL, UNITS_ALL);
}

/* The best price first, and within a price the oldest: S's 12 go 5 to B's
 * 31, 5 to B's 30 (older), 2 to D's 30; D's 29 is not reached. Each at the
 * order's price, paid out of its escrow; the filled orders leave the book. */
static void test_sell_in_price_time_priority(void **state) {
    th_market *f = *state;
    market_buy_result b1, b2, b3, b4;
    assert_int_equal(bid(f->c, "B", 5, 18, NULL, &b1), MARKET_OK); /* 18: under T's 20 */
    assert_int_equal(bid(f->c, "D", 5, 18, NULL, &b2), MARKET_OK);
    assert_int_equal(bid(f->c, "B", 5, 19, NULL, &b3), MARKET_OK);
    assert_int_equal(bid(f->c, "D", 5, 17, NULL, &b4), MARKET_OK);
    market_sell_result s;
    assert_int_equal(sell(f->c, "S", 12, 17, 0, NULL, &s), MARKET_OK);
    assert_int_equal(s.quantity, 12);
    assert_int_equal(s.total, 5 * 19 + 5 * 18 + 2 * 18);
    assert_int_equal(s.n_fills, 3);
    assert_int_equal(s.fill[0].order_id, b3.order_id);
    assert_int_equal(s.fill[1].order_id, b1.order_id);
    assert_int_equal(s.fill[2].order_id, b2.order_id);
    assert_int_equal(s.fill[2].quantity, 2);
    assert_string_equal(s.fill[2].buyer, "D");
    assert_int_equal(s.seller_funds, FUNDS + s.total);
    assert_int_equal(ore_of("S"), ORE_S - 12);
    assert_int_equal(ore_of("B"), 10);
    assert_int_equal(ore_of("D"), 2);
    assert_int_equal(escrow_of(f->c, "B"), 0);
    assert_int_equal(escrow_of(f->c, "D"), 3 * 18 + 5 * 17);
    market_trade t;
    assert_int_equal(market_trade_get(f->c, REALM, s.fill[0].trade_id, &t), MARKET_OK);
    assert_string_equal(t.buyer, "B");
    assert_string_equal(t.seller, "S");
    assert_int_equal(t.price, 19);
    market_book bk;
    assert_int_equal(market_book_get(f->c, REALM, "ore", 10, &bk), MARKET_OK);
    assert_int_equal(bk.n_bids, 2);
    assert_int_equal(bk.bids[0].price, 18);
    assert_int_equal(bk.bids[0].units, 3);
    assert_int_equal(bk.bids[1].price, 17);
    assert_int_equal(bk.asks[0].price, 20);
    assert_int_equal(bk.asks[0].units, 10);
    assert_conserved(f->c, FUNDS_ALL, UNITS_ALL);
}

/* All or nothing is refused when the book wants fewer (how many it
 * wants); partly sells those; the seller's own order is never filled; a
 * seller without the units is refused. Refusals change nothing. */
static void test_sell_all_partial_own_and_refused(void **state) {
    th_market *f = *state;
    assert_int_equal(bid(f->c, "B", 4, 15, NULL, NULL), MARKET_OK);
    assert_int_equal(bid(f->c, "S", 50, 16, NULL, NULL), MARKET_OK); /* S's own, the best */
    market_sell_result s;
    assert_int_equal(sell(f->c, "S", 6, 15, 0, NULL, &s), MARKET_ERR_NOT_ENOUGH);
    assert_int_equal(s.available, 4);
    assert_int_equal(ore_of("S"), ORE_S);
    assert_int_equal(sell(f->c, "S", 6, 15, 1, NULL, &s), MARKET_OK);
    assert_int_equal(s.quantity, 4);
    assert_string_equal(s.fill[0].buyer, "B");
    assert_int_equal(sell(f->c, "S", 1, 15, 1, NULL, &s), MARKET_ERR_NOT_ENOUGH); /* own alone */
    assert_int_equal(s.available, 0);
    assert_int_equal(sell(f->c, "D", 1, 1, 1, NULL, &s), MARKET_ERR_NOT_HELD);
    assert_int_equal(s.held, 0);
    assert_int_equal(sell(f->c, "nobody", 1, 1, 1, NULL, &s), MARKET_ERR_NO_PLAYER);
    assert_int_equal(escrow_of(f->c, "S"), 50 * 16);
    assert_conserved(f->c, FUNDS_ALL, UNITS_ALL);
}

/* The buyer takes its order back: what is left of its escrow returns.
 * Another player cannot (no such order, to them), nor can it be taken back
 * twice; a partly filled order returns the rest only. */
static void test_cancel(void **state) {
    th_market *f = *state;
    market_buy_result b;
    assert_int_equal(bid(f->c, "B", 10, 15, NULL, &b), MARKET_OK);
    market_cancel_result cr;
    assert_int_equal(cancel(f->c, "D", b.order_id, &cr), MARKET_ERR_NO_ORDER);
    assert_int_equal(sell(f->c, "S", 4, 15, 0, NULL, NULL), MARKET_OK);
    assert_int_equal(cancel(f->c, "B", b.order_id, &cr), MARKET_OK);
    assert_int_equal(cr.bid.left, 6);
    assert_int_equal(cr.refund, 6 * 15);
    assert_int_equal(cr.buyer_funds, FUNDS - 4 * 15);
    assert_int_equal(th_fx_funds(f->c, "B"), FUNDS - 4 * 15);
    assert_int_equal(escrow_of(f->c, "B"), 0);
    assert_int_equal(cancel(f->c, "B", b.order_id, &cr), MARKET_ERR_NO_ORDER);
    assert_int_equal(cancel(f->c, "B", 999999, &cr), MARKET_ERR_NO_ORDER);
    market_book bk;
    assert_int_equal(market_book_get(f->c, REALM, "ore", 10, &bk), MARKET_OK);
    assert_int_equal(bk.n_bids, 0);
    assert_conserved(f->c, FUNDS_ALL, UNITS_ALL);
}

/* The realm's cut of a sale into the book comes out of the seller's part. */
static void test_sell_pays_the_cut(void **state) {
    th_market *f = *state;
    market_settings st = {.fee_bps = 1000};
    assert_int_equal(market_settings_set(f->c, REALM, &st), MARKET_OK);
    assert_int_equal(bid(f->c, "B", 3, 15, NULL, NULL), MARKET_OK);
    market_sell_result s;
    assert_int_equal(sell(f->c, "S", 3, 15, 0, NULL, &s), MARKET_OK);
    assert_int_equal(s.total, 45);
    assert_int_equal(s.fee, 4); /* 10% of 45, rounded down */
    assert_int_equal(th_fx_funds(f->c, "S"), FUNDS + 41);
    assert_int_equal(th_fx_funds(f->c, "game"), HOUSE + 4);
    market_trade t;
    assert_int_equal(market_trade_get(f->c, REALM, s.trade_id, &t), MARKET_OK);
    assert_int_equal(t.fee, 4);
    assert_conserved(f->c, FUNDS_ALL, UNITS_ALL);
}

/* One key, one order: a retry replays the first (the same order id, the
 * units filled), and the book holds it once; another body under the key is
 * refused. A refusal for funds is final, and changes nothing. */
static void test_orders_idempotent_and_refused(void **state) {
    th_market *f = *state;
    market_idem k = {"o-1", "fp-1"}, other = {"o-1", "fp-2"};
    market_buy_result r, again;
    assert_int_equal(bid(f->c, "D", 12, 25, &k, &r), MARKET_OK);
    assert_int_equal(bid(f->c, "D", 12, 25, &k, &again), MARKET_OK);
    assert_int_equal(again.replayed, 1);
    assert_int_equal(again.order_id, r.order_id);
    assert_int_equal(again.quantity, 10);
    assert_int_equal(again.rested, 2);
    assert_int_equal(bid(f->c, "D", 12, 26, &other, NULL), MARKET_ERR_IDEM_MISMATCH);
    market_bid *v = NULL;
    size_t n = 0;
    assert_int_equal(market_player_orders(f->c, REALM, "D", &v, &n), MARKET_OK);
    assert_int_equal(n, 1);
    free(v);
    market_idem kf = {"o-2", "fp-3"};
    assert_int_equal(bid(f->c, "B", 1000, 101, &kf, NULL), MARKET_ERR_INSUFFICIENT_FUNDS);
    assert_int_equal(th_fx_funds(f->c, "B"), FUNDS);
    assert_int_equal(escrow_of(f->c, "B"), 0);
    assert_conserved(f->c, FUNDS_ALL, UNITS_ALL);
}

/* Armed writes, as another server's commit would land between our batch's
 * decision and its commit: B's order (the best) is taken back; B's order
 * is filled by 2 units from T. */
static int64_t armed_id, armed_price;
static void b_cancels(void) {
    long long left = th_fx_num("HGET order:{main}:%lld left", (long long)armed_id);
    (void)th_fx_num("DEL order:{main}:%lld", (long long)armed_id);
    (void)th_fx_num("ZREM book:{main}:ore %020lld", (long long)armed_id);
    (void)th_fx_num("ZREM bids:{main}:B %lld", (long long)armed_id);
    (void)th_fx_num("HINCRBY users:{main}:B escrow %lld", -left * 16);
    (void)th_fx_num("HINCRBY users:{main}:B funds %lld", left * 16);
}
static void t_fills_b(void) {
    (void)th_fx_num("HSET order:{main}:%lld left 3", (long long)armed_id);
    (void)th_fx_num("HINCRBY users:{main}:B escrow %lld", -2 * (long long)armed_price);
    (void)th_fx_num("HINCRBY stacks:{main}:B ore 2");
    (void)th_fx_num("HINCRBY stacks:{main}:T ore -2");
    (void)th_fx_num("HINCRBY users:{main}:T funds %lld", 2 * (long long)armed_price);
}

/* A sale decided into B's order, which is taken back before it commits:
 * its commit is refused (the order is watched) and it is decided again,
 * into D's order. Without the watch B would get units it no longer paid
 * for. */
static void test_order_taken_back_before_a_sale_commits(void **state) {
    th_market *f = *state;
    market_buy_result b, d;
    assert_int_equal(bid(f->c, "B", 5, 16, NULL, &b), MARKET_OK);
    assert_int_equal(bid(f->c, "D", 5, 15, NULL, &d), MARKET_OK);
    armed_id = b.order_id;
    th_fx_arm(b_cancels);
    market_sell_result s;
    assert_int_equal(sell(f->c, "S", 3, 15, 0, NULL, &s), MARKET_OK);
    assert_false(th_fx_armed());
    assert_int_equal(s.n_fills, 1);
    assert_string_equal(s.fill[0].buyer, "D");
    assert_int_equal(s.total, 45);
    assert_int_equal(ore_of("B"), 0);
    assert_int_equal(th_fx_funds(f->c, "B"), FUNDS);
    assert_conserved(f->c, FUNDS_ALL, UNITS_ALL);
}

/* A sale decided into B's 5 at 16, of which another seller fills 2 before
 * it commits (a part: the book does not change, the order does): its
 * commit is refused (the order is watched) and it is decided again, B's 3
 * and 2 of D's. Without that watch B would get 7 units for 5 paid. */
static void test_order_filled_before_a_sale_commits(void **state) {
    th_market *f = *state;
    market_buy_result b, d;
    assert_int_equal(bid(f->c, "B", 5, 16, NULL, &b), MARKET_OK);
    assert_int_equal(bid(f->c, "D", 5, 15, NULL, &d), MARKET_OK);
    armed_id = b.order_id;
    armed_price = 16;
    th_fx_arm(t_fills_b);
    market_sell_result s;
    assert_int_equal(sell(f->c, "S", 5, 15, 0, NULL, &s), MARKET_OK);
    assert_false(th_fx_armed());
    assert_int_equal(s.n_fills, 2);
    assert_int_equal(s.fill[0].order_id, b.order_id);
    assert_int_equal(s.fill[0].quantity, 3);
    assert_int_equal(s.fill[1].order_id, d.order_id);
    assert_int_equal(s.total, 3 * 16 + 2 * 15);
    assert_int_equal(ore_of("B"), 5);
    assert_int_equal(escrow_of(f->c, "B"), 0);
    assert_conserved(f->c, FUNDS_ALL, UNITS_ALL);
}

/* A cancel decided on B's 5 left, and 2 of them filled before it commits:
 * its commit is refused and it is decided again: 3 come back, not 5. */
static void test_order_filled_before_a_cancel_commits(void **state) {
    th_market *f = *state;
    market_buy_result b;
    assert_int_equal(bid(f->c, "B", 5, 15, NULL, &b), MARKET_OK);
    armed_id = b.order_id;
    armed_price = 15;
    th_fx_arm(t_fills_b);
    market_cancel_result cr;
    assert_int_equal(cancel(f->c, "B", b.order_id, &cr), MARKET_OK);
    assert_false(th_fx_armed());
    assert_int_equal(cr.bid.left, 3);
    assert_int_equal(cr.refund, 45);
    assert_int_equal(th_fx_funds(f->c, "B"), FUNDS - 30);
    assert_int_equal(escrow_of(f->c, "B"), 0);
    assert_conserved(f->c, FUNDS_ALL, UNITS_ALL);
}

static int list(market_conn *c, const char *seller, int64_t q, int64_t price,
                market_list_result *r) {
    return market_list_units(c, REALM, seller, "ore", q, price, NULL, r);
}

/* A list at or under the best bid sells into the book first, at the bids'
 * prices, and lists the rest: all of it sold lists nothing; a part sold
 * lists the rest at its price; over every bid it only lists. The realm's
 * cut comes out of the part sold, the listing fee out of the part listed.
 * A list that would be refused listed whole (another price than the
 * seller's listing) sells nothing. */
static void test_list_sells_into_the_book_first(void **state) {
    th_market *f = *state;
    market_settings st = {.fee_bps = 1000, .list_fee_bps = 100};
    assert_int_equal(market_settings_set(f->c, REALM, &st), MARKET_OK);
    market_buy_result b, d;
    assert_int_equal(bid(f->c, "B", 5, 16, NULL, &b), MARKET_OK);
    assert_int_equal(bid(f->c, "D", 5, 15, NULL, &d), MARKET_OK);
    market_list_result r;
    assert_int_equal(list(f->c, "S", 8, 15, &r), MARKET_OK);
    assert_int_equal(r.sold, 8);
    assert_int_equal(r.total, 5 * 16 + 3 * 15);
    assert_int_equal(r.quantity, 0); /* nothing listed */
    assert_int_equal(r.fee, 0);
    assert_int_equal(r.n_fills, 2);
    assert_int_equal(r.fill[0].order_id, b.order_id);
    assert_int_equal(r.fill[1].order_id, d.order_id);
    assert_int_equal(r.fill[0].fee + r.fill[1].fee, 8 + 4);
    assert_true(r.trade_id[0]);
    assert_int_equal(th_fx_funds(f->c, "S"), FUNDS + 125 - 12);
    assert_int_equal(ore_of("S"), ORE_S - 8);
    assert_int_equal(ore_of("B"), 5);
    assert_int_equal(th_fx_num("ZSCORE market:{main} ore.S"), 0); /* not listed */
    assert_int_equal(list(f->c, "S", 10, 15, &r), MARKET_OK);     /* D's 2, then 8 listed */
    assert_int_equal(r.sold, 2);
    assert_int_equal(r.quantity, 8);
    assert_int_equal(r.fee, 1); /* 1% of 8 x 15 */
    assert_int_equal(th_fx_num("HGET market:{main}:units ore.S"), 8);
    assert_int_equal(list(f->c, "S", 2, 15, &r), MARKET_OK); /* no bid left: joins it */
    assert_int_equal(r.sold, 0);
    assert_int_equal(r.n_fills, 0);
    assert_int_equal(r.quantity, 10);
    assert_int_equal(bid(f->c, "B", 5, 14, NULL, NULL), MARKET_OK);
    assert_int_equal(list(f->c, "S", 3, 13, &r), MARKET_ERR_PRICE_CHANGED); /* S lists at 15 */
    assert_int_equal(r.price, 15);
    assert_int_equal(escrow_of(f->c, "B"), 5 * 14); /* nothing sold */
    market_book bk;
    assert_int_equal(market_book_get(f->c, REALM, "ore", 10, &bk), MARKET_OK);
    assert_int_equal(bk.n_bids, 1);
    assert_int_equal(bk.n_asks, 2);
    assert_int_equal(bk.asks[0].price, 15);
    assert_int_equal(bk.asks[0].units, 10);
    assert_conserved(f->c, FUNDS_ALL, UNITS_ALL);
}

/* A list decided into B's 5 at 16, of which another seller fills 2 before
 * it commits: its commit is refused and it is decided again: B's 3 sold,
 * the rest listed. */
static void test_order_filled_before_a_list_commits(void **state) {
    th_market *f = *state;
    market_buy_result b;
    assert_int_equal(bid(f->c, "B", 5, 16, NULL, &b), MARKET_OK);
    armed_id = b.order_id;
    armed_price = 16;
    th_fx_arm(t_fills_b);
    market_list_result r;
    assert_int_equal(list(f->c, "S", 5, 16, &r), MARKET_OK);
    assert_false(th_fx_armed());
    assert_int_equal(r.sold, 3);
    assert_int_equal(r.quantity, 2);
    assert_int_equal(ore_of("B"), 5);
    assert_int_equal(escrow_of(f->c, "B"), 0);
    assert_conserved(f->c, FUNDS_ALL, UNITS_ALL);
}

/* ---- one batch: a seller's last units, and units it buys ---- */

static volatile int gate, gate_entered;
static void hold_gate(void) {
    __atomic_store_n(&gate_entered, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&gate, __ATOMIC_SEQ_CST))
        usleep(1000);
}

static int answered;
static void count_done(market_order *o) {
    (void)o;
    __atomic_fetch_add(&answered, 1, __ATOMIC_SEQ_CST);
}

/* Runs a and b, queued while the worker is held inside another batch, so
 * that they are served as one batch. */
static void run_in_one_batch(th_market *f, market_order *a, market_order *b) {
    /* a buy order of B's that rests: a batch that commits, so the hook runs */
    market_order hold = {.type = MARKET_ORDER_BID,
                         .realm = REALM,
                         .player = "B",
                         .item = "ore",
                         .quantity = 1,
                         .price = 1,
                         .done = count_done};
    answered = 0;
    gate = 1;
    gate_entered = 0;
    th_fx_arm(hold_gate);
    assert_int_equal(market_order_submit(f->m, &hold), MARKET_OK);
    for (int ms = 0; !__atomic_load_n(&gate_entered, __ATOMIC_SEQ_CST); ms++) {
        assert_true(ms < 30000); /* the hook never ran: fail, not hang */
        usleep(1000);
    }
    a->done = b->done = count_done;
    assert_int_equal(market_order_submit(f->m, a), MARKET_OK);
    assert_int_equal(market_order_submit(f->m, b), MARKET_OK);
    __atomic_store_n(&gate, 0, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&answered, __ATOMIC_SEQ_CST) < 3)
        usleep(1000);
    assert_int_equal(hold.rc, MARKET_OK);
}

/* In one batch T sells 5 into S's order while S sells all its units: S's
 * stack is emptied (its field removed) and gets 5 back as a buyer. The
 * removal must come first, or the 5 units vanish. */
static void test_seller_buys_in_the_same_sale_batch(void **state) {
    th_market *f = *state;
    assert_int_equal(bid(f->c, "S", 5, 16, NULL, NULL), MARKET_OK);
    assert_int_equal(bid(f->c, "D", ORE_S, 15, NULL, NULL), MARKET_OK);
    market_order t = {.type = MARKET_ORDER_SELL,
                      .realm = REALM,
                      .player = "T",
                      .item = "ore",
                      .quantity = 5,
                      .price = 16};
    market_order s = {.type = MARKET_ORDER_SELL,
                      .realm = REALM,
                      .player = "S",
                      .item = "ore",
                      .quantity = ORE_S,
                      .price = 15};
    run_in_one_batch(f, &t, &s);
    assert_int_equal(t.rc, MARKET_OK);
    assert_int_equal(s.rc, MARKET_OK);
    assert_int_equal(ore_of("S"), 5);
    assert_conserved(f->c, FUNDS_ALL, UNITS_ALL);
}

/* The same with lists: T's list crosses S's order while S lists all its
 * units. */
static void test_seller_buys_in_the_same_list_batch(void **state) {
    th_market *f = *state;
    int64_t price, units;
    assert_int_equal(market_unlist_units(f->c, REALM, "T", "ore", &price, &units), MARKET_OK);
    assert_int_equal(bid(f->c, "S", 5, 16, NULL, NULL), MARKET_OK);
    market_order t = {.type = MARKET_ORDER_LIST,
                      .realm = REALM,
                      .player = "T",
                      .item = "ore",
                      .quantity = 5,
                      .price = 16};
    market_order s = {.type = MARKET_ORDER_LIST,
                      .realm = REALM,
                      .player = "S",
                      .item = "ore",
                      .quantity = ORE_S,
                      .price = 30};
    run_in_one_batch(f, &t, &s);
    assert_int_equal(t.rc, MARKET_OK);
    assert_int_equal(t.res.list.sold, 5);
    assert_int_equal(s.rc, MARKET_OK);
    assert_int_equal(ore_of("S"), 5);
    assert_conserved(f->c, FUNDS_ALL, UNITS_ALL);
}

/* ---- price-time priority, against a model ---- */

#define MP 4 /* the model's players, P0..P3 */
#define M_FUNDS 5000
#define M_ORE 300
#define M_ORDERS_MAX 24 /* kept under what one sale reads (MARKET_FILL_MAX) */

struct m_order {
    int64_t id, price, left;
    int buyer;
};

static struct {
    struct m_order o[512];
    size_t n;
    int64_t funds[MP], escrow[MP], ore[MP];
} M;

static uint64_t rnd_state;
static uint64_t rnd(uint64_t n) {
    rnd_state = rnd_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (rnd_state >> 33) % n;
}

static const char *pid(int p) {
    static const char *const ids[MP] = {"P0", "P1", "P2", "P3"};
    return ids[p];
}

/* The model's fills of its last sale: which orders, how many units. */
static struct {
    int64_t id[64], units[64];
    size_t n;
} MF;

/* The model's sale: the best price first, then the oldest; never one's own. */
static int m_sell(int s, int64_t q, int64_t min, int partial, int64_t *sold, int64_t *total) {
    MF.n = 0;
    int64_t want = 0;
    for (size_t k = 0; k < M.n; k++)
        if (M.o[k].buyer != s && M.o[k].price >= min) want += M.o[k].left;
    *sold = *total = 0;
    if (M.ore[s] < q) return MARKET_ERR_NOT_HELD;
    if ((!partial && want < q) || want == 0) return MARKET_ERR_NOT_ENOUGH;
    int64_t left = q;
    while (left > 0) {
        size_t best = SIZE_MAX;
        for (size_t k = 0; k < M.n; k++) {
            const struct m_order *o = &M.o[k];
            if (o->buyer == s || o->price < min || o->left == 0) continue;
            if (best == SIZE_MAX || o->price > M.o[best].price ||
                (o->price == M.o[best].price && o->id < M.o[best].id))
                best = k;
        }
        if (best == SIZE_MAX) break;
        struct m_order *o = &M.o[best];
        int64_t t = o->left < left ? o->left : left;
        MF.id[MF.n] = o->id;
        MF.units[MF.n++] = t;
        o->left -= t;
        left -= t;
        *sold += t;
        *total += t * o->price;
        M.escrow[o->buyer] -= t * o->price;
        M.ore[o->buyer] += t;
    }
    M.ore[s] -= *sold;
    M.funds[s] += *total;
    size_t kept = 0;
    for (size_t k = 0; k < M.n; k++)
        if (M.o[k].left) M.o[kept++] = M.o[k];
    M.n = kept;
    return MARKET_OK;
}

/* The model's buy order of q at price by p, resting whole (no listings in
 * the model's world) under id: its refusal, or MARKET_OK. */
static int m_bid(int p, int64_t q, int64_t price, int64_t id) {
    if (q * price > M.funds[p]) return MARKET_ERR_INSUFFICIENT_FUNDS;
    M.o[M.n++] = (struct m_order){id, price, q, p};
    M.funds[p] -= q * price;
    M.escrow[p] += q * price;
    return MARKET_OK;
}

/* The model's cancel of order id by p: *refund what came back. */
static int m_cancel(int p, int64_t id, int64_t *refund) {
    *refund = 0;
    for (size_t k = 0; k < M.n; k++) {
        if (M.o[k].id != id) continue;
        if (M.o[k].buyer != p) return MARKET_ERR_NO_ORDER;
        *refund = M.o[k].left * M.o[k].price;
        M.funds[p] += *refund;
        M.escrow[p] -= *refund;
        M.o[k] = M.o[--M.n];
        return MARKET_OK;
    }
    return MARKET_ERR_NO_ORDER;
}

/* A fresh store and model: MP players, each with M_FUNDS and M_ORE ore. */
static void model_world(th_market *f) {
    (void)th_fx_num("FLUSHALL");
    market_world *w = market_world_new();
    for (int p = 0; p < MP; p++) {
        assert_int_equal(market_world_add_player(w, pid(p), pid(p), M_FUNDS), MARKET_OK);
        assert_int_equal(market_world_add_stack(w, pid(p), "ore", M_ORE), MARKET_OK);
        M.funds[p] = M_FUNDS, M.escrow[p] = 0, M.ore[p] = M_ORE;
    }
    assert_int_equal(market_world_store(f->c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    M.n = 0;
}

/* Every player's funds, escrow, units and open orders are the model's. */
static void assert_model(th_market *f) {
    for (int p = 0; p < MP; p++) {
        market_player *pl = NULL;
        assert_int_equal(market_player_get(f->c, REALM, pid(p), &pl), MARKET_OK);
        assert_int_equal(pl->funds, M.funds[p]);
        assert_int_equal(pl->escrow, M.escrow[p]);
        assert_int_equal(pl->n_stacks ? pl->stacks[0].count : 0, M.ore[p]);
        market_player_free(pl);
        market_bid *v = NULL;
        size_t n = 0, mine = 0;
        assert_int_equal(market_player_orders(f->c, REALM, pid(p), &v, &n), MARKET_OK);
        for (size_t k = 0; k < M.n; k++) {
            if (M.o[k].buyer != p) continue;
            mine++;
            size_t j = 0;
            while (j < n && v[j].id != M.o[k].id)
                j++;
            assert_true(j < n);
            assert_int_equal(v[j].left, M.o[k].left);
            assert_int_equal(v[j].price, M.o[k].price);
        }
        assert_int_equal(n, mine);
        free(v);
    }
    assert_conserved(f->c, MP * M_FUNDS, MP * M_ORE);
}

/* 300 orders drawn at random - buy orders, sales all or nothing or partly,
 * cancels - run one by one against the service and the model; every
 * outcome, and then every player's funds, escrow, units and orders, must
 * be the model's. */
static void test_price_time_model(void **state) {
    th_market *f = *state;
    model_world(f);
    rnd_state = 42;
    for (int step = 0; step < 300; step++) {
        int p = (int)rnd(MP), what = (int)rnd(10);
        if (what < 5 && M.n < M_ORDERS_MAX) { /* a buy order, 1..9 at 10..14 */
            int64_t q = 1 + (int64_t)rnd(9), price = 10 + (int64_t)rnd(5);
            market_buy_result r;
            int got = bid(f->c, pid(p), q, price, NULL, &r);
            assert_int_equal(got, m_bid(p, q, price, r.order_id));
            if (got == MARKET_OK) assert_int_equal(r.rested, q);
        } else if (what < 8) { /* a sale, 1..12 at 10..14 or over */
            int64_t q = 1 + (int64_t)rnd(12), min = 10 + (int64_t)rnd(5), sold, total;
            int partial = (int)rnd(2);
            market_sell_result s;
            int want = m_sell(p, q, min, partial, &sold, &total);
            assert_int_equal(sell(f->c, pid(p), q, min, partial, NULL, &s), want);
            if (want == MARKET_OK) {
                assert_int_equal(s.quantity, sold);
                assert_int_equal(s.total, total);
            }
        } else if (M.n) { /* a cancel of some order, by its buyer or by another */
            size_t k = rnd(M.n);
            int by = rnd(4) ? M.o[k].buyer : p;
            int64_t id = M.o[k].id, refund;
            market_cancel_result cr;
            int want = m_cancel(by, id, &refund);
            assert_int_equal(cancel(f->c, pid(by), id, &cr), want);
            if (want == MARKET_OK) assert_int_equal(cr.refund, refund);
        }
    }
    assert_model(f);
}

/* ---- price-time priority under concurrency, replayed against the model ---- */

#define CM_OPS 120 /* each player's orders */

/* One order of the concurrent run, and what the service answered. */
struct cm_rec {
    market_order o; /* the order as submitted, its outcome in it */
    int seq;        /* its place among the answers: the order the service decided them in */
    atomic_int done;
};

static atomic_int cm_seq;

static void cm_done(market_order *o) {
    struct cm_rec *r = o->ud;
    r->seq = atomic_fetch_add(&cm_seq, 1); /* answers come from the one worker of the realm */
    atomic_store(&r->done, 1);
}

struct cm_player {
    th_market *f;
    int p;
    struct cm_rec *recs; /* CM_OPS */
};

/* Player p's orders, one at a time: a buy order (while it believes fewer than two of
 * its own rest), a sale, or a cancel of one of its own. */
static void *cm_main(void *arg) {
    struct cm_player *pl = arg;
    unsigned seed = 977u * (unsigned)pl->p + 1;
    int64_t open[CM_OPS];
    size_t n_open = 0;
    for (int i = 0; i < CM_OPS; i++) {
        struct cm_rec *r = &pl->recs[i];
        market_order *o = &r->o;
        int what = rand_r(&seed) % 10;
        *o = (market_order){
            .realm = REALM, .player = pid(pl->p), .item = "ore", .done = cm_done, .ud = r};
        if (what < 5 && n_open < 2) {
            o->type = MARKET_ORDER_BID;
            o->quantity = 1 + rand_r(&seed) % 5;
            o->price = 10 + rand_r(&seed) % 5;
        } else if (what < 8 || n_open == 0) {
            o->type = MARKET_ORDER_SELL;
            o->quantity = 1 + rand_r(&seed) % 6;
            o->price = 10 + rand_r(&seed) % 5;
            o->partial = rand_r(&seed) % 2;
        } else {
            size_t k = rand_r(&seed) % n_open;
            o->type = MARKET_ORDER_CANCEL;
            o->id = open[k];
            open[k] = open[--n_open];
        }
        if (market_order_submit(pl->f->m, o) != MARKET_OK) return NULL;
        while (!atomic_load(&r->done))
            usleep(200);
        if (o->type == MARKET_ORDER_BID && o->rc == MARKET_OK && o->res.buy.order_id)
            open[n_open++] = o->res.buy.order_id;
    }
    return NULL;
}

static int cmp_seq(const void *a, const void *b) {
    const struct cm_rec *x = *(const struct cm_rec *const *)a,
                        *y = *(const struct cm_rec *const *)b;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* The players place, sell and cancel at once; then their orders are
 * replayed one by one through the model in the order the service decided
 * them (the order of its answers, which come from the realm's one worker):
 * every outcome - each order's id, each sale's fills, order by order, each
 * refund - and then every player's funds, escrow, units and orders, must
 * be the model's. */
static void test_price_time_model_concurrent(void **state) {
    th_market *f = *state;
    model_world(f);
    atomic_store(&cm_seq, 0);
    static struct cm_rec recs[MP][CM_OPS];
    struct cm_player pl[MP];
    pthread_t t[MP];
    memset(recs, 0, sizeof recs);
    for (int p = 0; p < MP; p++) {
        pl[p] = (struct cm_player){f, p, recs[p]};
        assert_int_equal(pthread_create(&t[p], NULL, cm_main, &pl[p]), 0);
    }
    for (int p = 0; p < MP; p++)
        assert_int_equal(pthread_join(t[p], NULL), 0);
    static struct cm_rec *all[MP * CM_OPS];
    size_t n = 0;
    for (int p = 0; p < MP; p++)
        for (int i = 0; i < CM_OPS; i++) {
            assert_true(atomic_load(&recs[p][i].done));
            all[n++] = &recs[p][i];
        }
    qsort(all, n, sizeof *all, cmp_seq);
    int64_t next_id = 0;
    for (size_t k = 0; k < n; k++) {
        const market_order *o = &all[k]->o;
        int p = o->player[1] - '0';
        if (o->type == MARKET_ORDER_BID) {
            int want = m_bid(p, o->quantity, o->price, next_id + 1);
            assert_int_equal(o->rc, want);
            if (want != MARKET_OK) continue;
            assert_int_equal(o->res.buy.order_id, ++next_id);
            assert_int_equal(o->res.buy.rested, o->quantity);
        } else if (o->type == MARKET_ORDER_SELL) {
            int64_t sold, total;
            int want = m_sell(p, o->quantity, o->price, o->partial, &sold, &total);
            assert_int_equal(o->rc, want);
            if (want != MARKET_OK) continue;
            const market_sell_result *sr = &o->res.sell;
            assert_int_equal(sr->quantity, sold);
            assert_int_equal(sr->total, total);
            assert_int_equal(sr->n_fills, MF.n);
            for (size_t j = 0; j < MF.n; j++) { /* the same orders, in the same order */
                assert_int_equal(sr->fill[j].order_id, MF.id[j]);
                assert_int_equal(sr->fill[j].quantity, MF.units[j]);
            }
        } else {
            int64_t refund;
            assert_int_equal(o->rc, m_cancel(p, o->id, &refund));
            if (o->rc == MARKET_OK) assert_int_equal(o->res.cancel.refund, refund);
        }
    }
    assert_model(f);
}

/* ---- many players at once ---- */

#define THREADS 8
#define ROUNDS 60

struct worker {
    th_market *f;
    int id;
    int64_t placed[ROUNDS];
    size_t n_placed;
};

static void *worker_main(void *arg) {
    struct worker *wk = arg;
    market_conn *c = market_conn_new(wk->f->m, NULL);
    if (!c) return NULL;
    const char *me = wk->id % 2 ? "S" : wk->id % 4 ? "B" : "D";
    for (int i = 0; i < ROUNDS; i++) {
        if (wk->id % 2) { /* S sells into the book, partly */
            (void)sell(c, me, 1 + i % 3, 10 + i % 5, 1, NULL, NULL);
        } else { /* B and D place orders, and take some back */
            market_buy_result r;
            if (bid(c, me, 1 + i % 4, 10 + i % 7, NULL, &r) == MARKET_OK && r.order_id)
                wk->placed[wk->n_placed++] = r.order_id;
            if (i % 5 == 4 && wk->n_placed) (void)cancel(c, me, wk->placed[--wk->n_placed], NULL);
        }
    }
    market_conn_free(c);
    return NULL;
}

/* Four placing and taking back, four selling, at once: afterwards funds
 * and escrow are conserved, every unit is in one place, every order's
 * escrow is its buyer's, and taking every order back leaves no escrow. */
static void test_many_at_once_conserved(void **state) {
    th_market *f = *state;
    struct worker wk[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        wk[i] = (struct worker){.f = f, .id = i};
        assert_int_equal(pthread_create(&t[i], NULL, worker_main, &wk[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_conserved(f->c, FUNDS_ALL, UNITS_ALL);
    const char *buyers[] = {"B", "D"};
    for (size_t b = 0; b < 2; b++) {
        market_bid *v = NULL;
        size_t n = 0;
        assert_int_equal(market_player_orders(f->c, REALM, buyers[b], &v, &n), MARKET_OK);
        for (size_t k = 0; k < n; k++)
            assert_int_equal(cancel(f->c, buyers[b], v[k].id, NULL), MARKET_OK);
        free(v);
        assert_int_equal(escrow_of(f->c, buyers[b]), 0);
    }
    market_audit_report a;
    assert_int_equal(market_audit(f->c, REALM, &a), MARKET_OK);
    assert_int_equal(a.orders, 0);
    assert_int_equal(a.total_funds, FUNDS_ALL);
    assert_conserved(f->c, FUNDS_ALL, UNITS_ALL);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_order_fills_listings_then_rests),
        T(test_sell_in_price_time_priority),
        T(test_sell_all_partial_own_and_refused),
        T(test_cancel),
        T(test_sell_pays_the_cut),
        T(test_orders_idempotent_and_refused),
        T(test_order_taken_back_before_a_sale_commits),
        T(test_order_filled_before_a_sale_commits),
        T(test_order_filled_before_a_cancel_commits),
        T(test_list_sells_into_the_book_first),
        T(test_order_filled_before_a_list_commits),
        T(test_seller_buys_in_the_same_sale_batch),
        T(test_seller_buys_in_the_same_list_batch),
        T(test_price_time_model),
        T(test_price_time_model_concurrent),
        T(test_many_at_once_conserved),
    };
    return th_run_strategies("market book", tests, sizeof tests / sizeof *tests);
}
