/* test_market_auction.c - auctions against a real redis-server, under each
 * strategy: a new auction takes its goods, and what is refused; bids
 * escrowed, the topped one given back, and the refusals (too low, one's
 * own, without funds, after the end); a buyout sells at once with the
 * realm's cut and a trade; an ending sells to the highest bidder, or gives
 * the goods back, once however often it is queued; a lot of units; the
 * sweeper ending an auction; and 32 bidders on one auction at once: the
 * highest wins, every other bid went back. The store is audited after each.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/helpers/market_fx.h"

#define REALM MARKET_REALM_DEFAULT
#define FUNDS 10000
#define PLAYERS 36 /* A, B, C, D, and b0..b31 */

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A holds an axe and 50 ore; B, C and the bidders b0.. have FUNDS; D has 10; the house. */
static void seed(market_conn *c) {
    (void)th_fx_num("FLUSHALL");
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "A", NULL, 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "B", NULL, FUNDS), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "C", NULL, FUNDS), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "D", NULL, 10), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "game", NULL, 0), MARKET_OK);
    for (int i = 0; i < 32; i++) {
        char id[16];
        snprintf(id, sizeof id, "b%d", i);
        assert_int_equal(market_world_add_player(w, id, NULL, FUNDS), MARKET_OK);
    }
    assert_int_equal(market_world_add_item(w, "A", "axe"), MARKET_OK);
    assert_int_equal(market_world_add_stack(w, "A", "ore", 50), MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
}

#define FUNDS_ALL (2 * FUNDS + 10 + 32 * FUNDS)

static int fx_setup(void **state) {
    th_market *f = th_market_new((market_config){.redis_timeout_ms = 1000,
                                                 .lock_ttl_ms = 5000,
                                                 .acquire_timeout_ms = 5000,
                                                 .sweep_interval_ms = 20,
                                                 .sweep_lease_ms = 1000,
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

/* Auctions quantity units (0: the axe) of item by seller at start, buyout, 1 s steps of
 * step, for duration_s. */
static int auction(market_conn *c, const char *seller, const char *item, int64_t quantity,
                   int64_t start, int64_t buyout, int64_t duration_s, market_auction_result *res) {
    market_order o = {.type = MARKET_ORDER_AUCTION,
                      .realm = REALM,
                      .player = seller,
                      .item = item,
                      .quantity = quantity,
                      .price = start,
                      .buyout = buyout,
                      .step = 5,
                      .duration_s = duration_s};
    int rc = market_order_run(c, &o);
    if (res) *res = o.res.auction;
    return rc;
}

static int bid(market_conn *c, const char *bidder, int64_t id, int64_t amount,
               market_auction_result *res) {
    market_order o = {.type = MARKET_ORDER_AUCTION_BID,
                      .realm = REALM,
                      .player = bidder,
                      .id = id,
                      .price = amount};
    int rc = market_order_run(c, &o);
    if (res) *res = o.res.auction;
    return rc;
}

static int end(market_conn *c, int64_t id, market_auction_result *res) {
    market_order o = {.type = MARKET_ORDER_AUCTION_END, .realm = REALM, .id = id};
    int rc = market_order_run(c, &o);
    if (res) *res = o.res.auction;
    return rc;
}

/* Makes auction id's end come now (as time passing would). */
static void end_now(int64_t id) {
    (void)th_fx_num("HSET auction:{main}:%lld ends 1000", (long long)id);
    (void)th_fx_num("ZADD market:{main}:ends 1000 @%lld", (long long)id);
}

static int holds(market_conn *c, const char *id, const char *item) {
    market_player *p = NULL;
    assert_int_equal(market_player_get(c, REALM, id, &p), MARKET_OK);
    int found = 0;
    for (size_t i = 0; i < p->n_inventory; i++)
        found |= strcmp(p->inventory[i], item) == 0;
    market_player_free(p);
    return found;
}

static int64_t escrow_of(const char *id) {
    return th_fx_num("HGET users:{main}:%s escrow", id);
}

/* Funds with escrow conserved, none negative; every item in one place; the auctions' bids
 * are the escrow; returns the audit. */
static market_audit_report assert_whole(market_conn *c) {
    market_audit_report a;
    assert_int_equal(market_audit(c, REALM, &a), MARKET_OK);
    assert_int_equal(a.total_funds + a.total_escrow, FUNDS_ALL);
    assert_int_equal(a.negative_funds, 0);
    assert_int_equal(a.negative_escrow, 0);
    assert_int_equal(a.items_misplaced, 0);
    assert_int_equal(a.auctions_unreadable, 0);
    assert_int_equal(a.orders_escrow + a.auctions_escrow, a.total_escrow);
    assert_int_equal(a.items_held + a.items_listed + a.items_in_auctions, 1); /* the axe */
    assert_int_equal(a.units_in_stacks + a.units_listed + a.units_in_auctions, 50);
    return a;
}

/* ---- tests ---- */

/* A new auction takes the axe from A; one of what A does not hold, by no player, or with
 * bad terms is refused and moves nothing. */
static void test_auction_takes_the_goods(void **state) {
    th_market *f = *state;
    market_auction_result r;
    assert_int_equal(auction(f->c, "A", "axe", 0, 100, 500, 60, &r), MARKET_OK);
    assert_int_equal(r.a.id, 1);
    assert_int_equal(r.a.state, MARKET_AUCTION_OPEN);
    assert_false(holds(f->c, "A", "axe"));
    market_auction got;
    assert_int_equal(market_auction_get(f->c, REALM, 1, &got), MARKET_OK);
    assert_string_equal(got.seller, "A");
    assert_string_equal(got.item, "axe");
    assert_int_equal(got.start_bid, 100);
    assert_int_equal(got.buyout, 500);
    assert_int_equal(got.step, 5);
    assert_true(got.ends_ms == r.a.ends_ms && got.ends_ms > 0);
    assert_int_equal(th_fx_num("ZSCORE market:{main}:ends @1"), got.ends_ms);
    assert_int_equal(th_fx_num("ZCARD auctions:{main}:open"), 1);
    assert_int_equal(th_fx_num("ZCARD auctions:{main}:i:axe"), 1);
    assert_int_equal(th_fx_num("ZCARD auctions:{main}:s:A"), 1);
    assert_int_equal(auction(f->c, "A", "axe", 0, 100, 0, 60, NULL), MARKET_ERR_NOT_HELD);
    assert_int_equal(auction(f->c, "A", "ore", 51, 1, 0, 60, NULL), MARKET_ERR_NOT_HELD);
    assert_int_equal(auction(f->c, "Z", "axe", 0, 1, 0, 60, NULL), MARKET_ERR_NO_PLAYER);
    assert_int_equal(auction(f->c, "A", "ore", 1, 0, 0, 60, NULL), MARKET_ERR_INVALID);
    assert_int_equal(auction(f->c, "A", "ore", 1, 10, 5, 60, NULL), MARKET_ERR_INVALID);
    assert_int_equal(auction(f->c, "A", "ore", 1, 10, 0, 0, NULL), MARKET_ERR_INVALID);
    assert_int_equal(market_auction_get(f->c, REALM, 2, &got), MARKET_ERR_NO_AUCTION);
    assert_int_equal(th_fx_num("HGET stacks:{main}:A ore"), 50);
    assert_whole(f->c);
}

/* Bids escrow; the topped bid goes back; too low, one's own, without funds and on no such
 * auction are refused, nothing moved. */
static void test_bids_escrow_and_give_back(void **state) {
    th_market *f = *state;
    market_auction_result r;
    assert_int_equal(auction(f->c, "A", "axe", 0, 100, 0, 60, &r), MARKET_OK);
    int64_t id = r.a.id;
    assert_int_equal(bid(f->c, "B", id, 99, &r), MARKET_ERR_BID_TOO_LOW);
    assert_int_equal(r.min_bid, 100);
    assert_int_equal(bid(f->c, "B", id, 100, &r), MARKET_OK);
    assert_int_equal(r.funds, FUNDS - 100);
    assert_int_equal(escrow_of("B"), 100);
    assert_int_equal(bid(f->c, "C", id, 104, &r), MARKET_ERR_BID_TOO_LOW); /* a step of 5 */
    assert_int_equal(r.min_bid, 105);
    assert_int_equal(bid(f->c, "C", id, 105, &r), MARKET_OK);
    assert_string_equal(r.outbid, "B");
    assert_int_equal(r.refund, 100);
    assert_int_equal(th_fx_funds(f->c, "B"), FUNDS);
    assert_int_equal(escrow_of("B"), 0);
    assert_int_equal(escrow_of("C"), 105);
    assert_int_equal(th_fx_num("ZCARD auctions:{main}:b:C"), 1);
    assert_int_equal(th_fx_num("ZCARD auctions:{main}:b:B"), 0);
    assert_int_equal(bid(f->c, "C", id, 200, &r), MARKET_OK); /* raising its own */
    assert_int_equal(r.funds, FUNDS - 200);
    assert_int_equal(escrow_of("C"), 200);
    assert_int_equal(bid(f->c, "A", id, 1000, NULL), MARKET_ERR_OWN_AUCTION);
    assert_int_equal(bid(f->c, "D", id, 205, NULL), MARKET_ERR_INSUFFICIENT_FUNDS);
    assert_int_equal(bid(f->c, "B", 99, 205, NULL), MARKET_ERR_NO_AUCTION);
    assert_int_equal(bid(f->c, "Z", id, 205, NULL), MARKET_ERR_NO_PLAYER);
    market_audit_report a = assert_whole(f->c);
    assert_int_equal(a.auctions_escrow, 200);
    assert_int_equal(a.auctions, 1);
    end_now(id); /* no bid after the end */
    assert_int_equal(bid(f->c, "B", id, 300, NULL), MARKET_ERR_AUCTION_CLOSED);
    assert_int_equal(th_fx_funds(f->c, "B"), FUNDS);
}

/* A bid at the buyout sells at once: the axe to the bidder, the seller paid less the cut
 * (5%), the house its cut, a trade recorded; the topped bid went back; later bids closed. */
static void test_buyout_sells_at_once(void **state) {
    th_market *f = *state;
    market_settings st = {.fee_bps = 500};
    assert_int_equal(market_settings_set(f->c, REALM, &st), MARKET_OK);
    market_auction_result r;
    assert_int_equal(auction(f->c, "A", "axe", 0, 100, 400, 60, &r), MARKET_OK);
    int64_t id = r.a.id;
    assert_int_equal(bid(f->c, "B", id, 150, NULL), MARKET_OK);
    assert_int_equal(bid(f->c, "C", id, 450, &r), MARKET_OK);
    assert_int_equal(r.a.state, MARKET_AUCTION_SOLD);
    assert_int_equal(r.a.fee, 22);
    assert_true(r.trade_id[0]);
    assert_true(holds(f->c, "C", "axe"));
    assert_int_equal(th_fx_funds(f->c, "C"), FUNDS - 450);
    assert_int_equal(escrow_of("C"), 0);
    assert_int_equal(th_fx_funds(f->c, "B"), FUNDS);
    assert_int_equal(th_fx_funds(f->c, "A"), 450 - 22);
    assert_int_equal(th_fx_funds(f->c, "game"), 22);
    market_trade t;
    assert_int_equal(market_trade_get(f->c, REALM, r.trade_id, &t), MARKET_OK);
    assert_string_equal(t.buyer, "C");
    assert_string_equal(t.seller, "A");
    assert_int_equal(t.price, 450);
    assert_int_equal(t.fee, 22);
    assert_int_equal(bid(f->c, "B", id, 500, NULL), MARKET_ERR_AUCTION_CLOSED);
    assert_int_equal(th_fx_num("EXISTS market:{main}:ends"), 0);
    assert_int_equal(th_fx_num("ZCARD auctions:{main}:open"), 0);
    assert_true(th_fx_num("TTL auction:{main}:%lld", (long long)id) > 0); /* kept a while */
    assert_whole(f->c);
}

/* An ending before the end does nothing; at it, it sells to the highest bidder once (a
 * second ending finds it closed); one without a bid gives the goods back. */
static void test_end_sells_once_or_gives_back(void **state) {
    th_market *f = *state;
    market_auction_result r;
    assert_int_equal(auction(f->c, "A", "axe", 0, 100, 0, 60, &r), MARKET_OK);
    int64_t sold = r.a.id;
    assert_int_equal(auction(f->c, "A", "ore", 10, 5, 0, 60, &r), MARKET_OK); /* a lot */
    int64_t lot = r.a.id;
    assert_int_equal(th_fx_num("HGET stacks:{main}:A ore"), 40);
    assert_int_equal(bid(f->c, "B", sold, 120, NULL), MARKET_OK);
    assert_int_equal(end(f->c, sold, &r), MARKET_ERR_NOT_LISTED); /* not yet */
    end_now(sold);
    end_now(lot);
    assert_int_equal(end(f->c, sold, &r), MARKET_OK);
    assert_int_equal(r.a.state, MARKET_AUCTION_SOLD);
    assert_true(r.late_ms > 0);
    assert_int_equal(end(f->c, sold, NULL), MARKET_ERR_AUCTION_CLOSED);
    assert_true(holds(f->c, "B", "axe"));
    assert_int_equal(th_fx_funds(f->c, "A"), 120);
    assert_int_equal(escrow_of("B"), 0);
    assert_int_equal(th_fx_funds(f->c, "B"), FUNDS - 120);
    assert_int_equal(end(f->c, lot, &r), MARKET_OK);
    assert_int_equal(r.a.state, MARKET_AUCTION_UNSOLD);
    assert_int_equal(th_fx_num("HGET stacks:{main}:A ore"), 50);
    assert_int_equal(th_fx_num("EXISTS market:{main}:ends"), 0);
    market_audit_report a = assert_whole(f->c);
    assert_int_equal(a.auctions, 0);
}

/* A lot of units: bids are per unit, escrowed times the units; the winner gets the lot. */
static void test_a_lot_of_units(void **state) {
    th_market *f = *state;
    market_auction_result r;
    assert_int_equal(auction(f->c, "A", "ore", 50, 5, 0, 60, &r), MARKET_OK);
    int64_t id = r.a.id;
    assert_int_equal(th_fx_num("HEXISTS stacks:{main}:A ore"), 0); /* all of it */
    assert_int_equal(bid(f->c, "B", id, 6, NULL), MARKET_OK);
    assert_int_equal(escrow_of("B"), 300);
    assert_int_equal(bid(f->c, "D", id, 11, NULL), MARKET_ERR_INSUFFICIENT_FUNDS); /* 550 > 10 */
    market_audit_report a = assert_whole(f->c);
    assert_int_equal(a.units_in_auctions, 50);
    end_now(id);
    assert_int_equal(end(f->c, id, &r), MARKET_OK);
    assert_int_equal(th_fx_num("HGET stacks:{main}:B ore"), 50);
    assert_int_equal(th_fx_funds(f->c, "A"), 300);
    assert_whole(f->c);
}

/* The sweeper ends an auction when its end comes. */
static void test_sweeper_ends_auctions(void **state) {
    th_market *f = *state;
    market_auction_result r;
    assert_int_equal(auction(f->c, "A", "axe", 0, 100, 0, 1, &r), MARKET_OK);
    int64_t id = r.a.id;
    assert_int_equal(bid(f->c, "C", id, 100, NULL), MARKET_OK);
    assert_int_equal(market_sweeper_start(f->m), MARKET_OK);
    market_auction got = {0};
    for (int i = 0; i < 3000; i++) {
        assert_int_equal(market_auction_get(f->c, REALM, id, &got), MARKET_OK);
        if (got.state != MARKET_AUCTION_OPEN) break;
        sleep_ms(10);
    }
    assert_int_equal(got.state, MARKET_AUCTION_SOLD);
    assert_true(holds(f->c, "C", "axe"));
    market_stats s;
    for (int i = 0; i < 3000; i++) { /* counted after the ending's answer */
        market_stats_get(f->m, &s);
        if (s.auctions_ended == 1) break;
        sleep_ms(10);
    }
    assert_int_equal(s.auctions_ended, 1);
    assert_whole(f->c);
}

/* Armed: C spends all but 50 of its funds elsewhere, as another server's commit would. */
static void c_spends(void) {
    long long f = th_fx_num("HGET users:{main}:C funds");
    (void)th_fx_num("HINCRBY users:{main}:C funds %lld", 50 - f);
    (void)th_fx_num("HINCRBY users:{main}:game funds %lld", f - 50);
}

/* C's funds change between its bid's decision and its commit: the commit aborts, the bid
 * is decided again on what is there now and refused; nothing is escrowed, nothing goes
 * negative. A bid under an Idempotency-Key replays, once moved. */
static void test_funds_spent_before_a_bid_commits(void **state) {
    th_market *f = *state;
    market_auction_result r;
    assert_int_equal(auction(f->c, "A", "axe", 0, 100, 0, 60, &r), MARKET_OK);
    int64_t id = r.a.id;
    th_fx_arm(c_spends);
    assert_int_equal(bid(f->c, "C", id, 300, &r), MARKET_ERR_INSUFFICIENT_FUNDS);
    assert_false(th_fx_armed());
    /* decided OK first (C had the funds): the refusal is the decision made again */
    assert_int_equal(th_fx_funds(f->c, "C"), 50);
    assert_int_equal(escrow_of("C"), 0);
    market_auction got;
    assert_int_equal(market_auction_get(f->c, REALM, id, &got), MARKET_OK);
    assert_int_equal(got.bid, 0);
    assert_whole(f->c);
    market_idem k = {"bid-1", "fp-1"}, other = {"bid-1", "fp-2"};
    market_order o = {.type = MARKET_ORDER_AUCTION_BID,
                      .realm = REALM,
                      .player = "B",
                      .id = id,
                      .price = 150,
                      .idem = &k};
    assert_int_equal(market_order_run(f->c, &o), MARKET_OK);
    assert_int_equal(o.res.auction.replayed, 0);
    o.res = (__typeof__(o.res)){0};
    assert_int_equal(market_order_run(f->c, &o), MARKET_OK);
    assert_int_equal(o.res.auction.replayed, 1);
    assert_int_equal(o.res.auction.a.id, id);
    assert_int_equal(escrow_of("B"), 150); /* once */
    o.idem = &other;
    assert_int_equal(market_order_run(f->c, &o), MARKET_ERR_IDEM_MISMATCH);
    assert_whole(f->c);
}

/* Armed: C's bid of 400 on auction 1 lands, as another server's commit would. */
static void c_outbids(void) {
    (void)th_fx_num("HSET auction:{main}:1 bidder C bid 400 bids 1");
    (void)th_fx_num("HINCRBY users:{main}:C funds -400");
    (void)th_fx_num("HINCRBY users:{main}:C escrow 400");
}

/* The auction changes between a bid's decision and its commit (the frame watches the
 * batch's deals): the commit aborts, the bid is decided again against C's bid and refused
 * as too low; B keeps its funds, C leads. */
static void test_outbid_before_a_bid_commits(void **state) {
    th_market *f = *state;
    market_auction_result r;
    assert_int_equal(auction(f->c, "A", "axe", 0, 100, 0, 60, &r), MARKET_OK);
    assert_int_equal(r.a.id, 1);
    int64_t funds = th_fx_funds(f->c, "B");
    th_fx_arm(c_outbids);
    assert_int_equal(bid(f->c, "B", 1, 150, &r), MARKET_ERR_BID_TOO_LOW);
    assert_false(th_fx_armed());
    assert_int_equal(r.min_bid, 405);
    assert_int_equal(th_fx_funds(f->c, "B"), funds);
    assert_int_equal(escrow_of("B"), 0);
    market_auction got;
    assert_int_equal(market_auction_get(f->c, REALM, 1, &got), MARKET_OK);
    assert_string_equal(got.bidder, "C");
    assert_int_equal(got.bid, 400);
    assert_whole(f->c);
}

/* Finding open auctions: by item, by seller, both, ending before a time, a page at a time,
 * soonest to end first; a player's auctions and those it leads. */
static void test_find_auctions(void **state) {
    th_market *f = *state;
    market_auction_result r;
    int64_t id[4];
    for (int i = 0; i < 3; i++) { /* lots of ore ending in 100, 200, 300 s */
        assert_int_equal(auction(f->c, "A", "ore", 5, 5, 0, 100 * (i + 1), &r), MARKET_OK);
        id[i] = r.a.id;
    }
    assert_int_equal(auction(f->c, "A", "axe", 0, 100, 0, 50, &r), MARKET_OK);
    id[3] = r.a.id;
    market_auction_query q = {.limit = 10};
    market_auction_page p;
    assert_int_equal(market_auctions_find(f->c, REALM, &q, &p), MARKET_OK);
    assert_int_equal(p.n, 4);
    assert_int_equal(p.total, 4);
    assert_int_equal(p.auctions[0].id, id[3]); /* the soonest first */
    assert_int_equal(p.next_offset, 0);
    market_auction_page_free(&p);
    q = (market_auction_query){.item = "ore", .limit = 2};
    assert_int_equal(market_auctions_find(f->c, REALM, &q, &p), MARKET_OK);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.total, 3);
    assert_int_equal(p.auctions[0].id, id[0]);
    assert_int_equal(p.next_offset, 2);
    q.offset = p.next_offset;
    market_auction_page_free(&p);
    assert_int_equal(market_auctions_find(f->c, REALM, &q, &p), MARKET_OK);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.auctions[0].id, id[2]);
    assert_int_equal(p.next_offset, 0);
    market_auction_page_free(&p);
    /* the axe ends at +50 s, the lots at +100, +200 and +300: before +210, two lots */
    q = (market_auction_query){
        .item = "ore", .seller = "A", .limit = 10, .ending_before_ms = r.a.ends_ms + 160000};
    assert_int_equal(market_auctions_find(f->c, REALM, &q, &p), MARKET_OK);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.auctions[1].id, id[1]);
    market_auction_page_free(&p);
    q = (market_auction_query){.seller = "B", .limit = 10};
    assert_int_equal(market_auctions_find(f->c, REALM, &q, &p), MARKET_OK);
    assert_int_equal(p.n, 0);
    market_auction_page_free(&p);
    q = (market_auction_query){.limit = 0};
    assert_int_equal(market_auctions_find(f->c, REALM, &q, &p), MARKET_ERR_INVALID);
    assert_int_equal(bid(f->c, "B", id[3], 100, NULL), MARKET_OK);
    static market_player_auctions_result pa;
    assert_int_equal(market_player_auctions(f->c, REALM, "A", &pa), MARKET_OK);
    assert_int_equal(pa.n_selling, 4);
    assert_int_equal(pa.n_leading, 0);
    assert_int_equal(market_player_auctions(f->c, REALM, "B", &pa), MARKET_OK);
    assert_int_equal(pa.n_selling, 0);
    assert_int_equal(pa.n_leading, 1);
    assert_int_equal(pa.leading[0], id[3]);
}

/* Armed: A's axe goes to D, as another server's commit would move it. */
static void axe_to_d(void) {
    (void)th_fx_num("SMOVE inventory:{main}:A inventory:{main}:D axe");
}

/* The axe leaves A between a new auction's decision and its commit: the commit aborts,
 * the auction is decided again and refused (not held); no auction, no end, the counter
 * untouched, the axe D's alone. */
static void test_goods_moved_before_an_auction_commits(void **state) {
    th_market *f = *state;
    th_fx_arm(axe_to_d);
    market_auction_result r;
    assert_int_equal(auction(f->c, "A", "axe", 0, 100, 0, 60, &r), MARKET_ERR_NOT_HELD);
    assert_false(th_fx_armed());
    assert_true(holds(f->c, "D", "axe"));
    assert_false(holds(f->c, "A", "axe"));
    assert_int_equal(th_fx_num("EXISTS auction:{main}:1"), 0);
    assert_int_equal(th_fx_num("EXISTS market:{main}:ends"), 0);
    assert_int_equal(th_fx_num("EXISTS market:{main}:auctions"), 0);
    assert_whole(f->c);
}

struct bidder {
    th_market *f;
    int64_t id;
    int who;
    int won;     /* bids it got in */
    int64_t top; /* its highest taken */
};

/* Bidder b<who> bids 100 + 10 * k + who for k = 0..9, each in a thread of its own. */
static void *bidding(void *arg) {
    struct bidder *x = arg;
    int err;
    market_conn *c = market_conn_new(x->f->m, &err);
    assert_non_null(c);
    char me[16];
    snprintf(me, sizeof me, "b%d", x->who);
    for (int k = 0; k < 10; k++) {
        int rc = bid(c, me, x->id, 100 + 40 * k + x->who, NULL);
        assert_true(rc == MARKET_OK || rc == MARKET_ERR_BID_TOO_LOW || rc == MARKET_ERR_CONFLICT ||
                    rc == MARKET_ERR_BUSY);
        x->won += rc == MARKET_OK;
        if (rc == MARKET_OK) x->top = 100 + 40 * k + x->who;
    }
    market_conn_free(c);
    return NULL;
}

/* 32 bidders on one auction at once: the highest bid leads, escrowed once; every other bid
 * went back. */
static void test_32_bidders_at_once(void **state) {
    th_market *f = *state;
    market_auction_result r;
    assert_int_equal(auction(f->c, "A", "axe", 0, 100, 0, 600, &r), MARKET_OK);
    struct bidder x[32];
    pthread_t t[32];
    for (int i = 0; i < 32; i++) {
        x[i] = (struct bidder){f, r.a.id, i, 0};
        assert_int_equal(pthread_create(&t[i], NULL, bidding, &x[i]), 0);
    }
    int taken = 0;
    int64_t top = 0;
    for (int i = 0; i < 32; i++) {
        pthread_join(t[i], NULL);
        taken += x[i].won;
        if (x[i].top > top) top = x[i].top;
    }
    market_auction got;
    assert_int_equal(market_auction_get(f->c, REALM, r.a.id, &got), MARKET_OK);
    assert_int_equal(got.bids, taken);
    assert_int_equal(got.bid, top); /* the highest bid taken leads */
    assert_int_equal(escrow_of(got.bidder), got.bid);
    int64_t escrowed = 0;
    for (int i = 0; i < 32; i++) {
        char id[16];
        snprintf(id, sizeof id, "b%d", i);
        escrowed += escrow_of(id);
        if (strcmp(id, got.bidder) != 0) assert_int_equal(th_fx_funds(f->c, id), FUNDS);
    }
    assert_int_equal(escrowed, got.bid);
    fprintf(stderr, "# 32 bidders: %d bids taken, %s leads at %lld\n", taken, got.bidder,
            (long long)got.bid);
    market_audit_report a = assert_whole(f->c);
    assert_int_equal(a.auctions_escrow, got.bid);
}

/* bin/market-seed --generate ...,auctions=A ($MARKET_SEED_BIN) opens A auctions of a unit of
 * "lot" each, held by the generated players round robin, ending with the listings; its reset
 * deletes every realm key first (a direct trades' counter too). */
static void test_seed_tool_generates_auctions(void **state) {
    th_market *f = *state;
    const char *bin = getenv("MARKET_SEED_BIN");
    if (!bin || !*bin) bin = "bin/market-seed";
    (void)th_fx_num("SET market:{main}:directs 9");
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "%s --redis %s --reset --generate players=5,items=3,auctions=12,ends=600 >/dev/null",
             bin, th_fx_redis.url);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(th_fx_num("EXISTS market:{main}:directs"), 0);
    market_audit_report a;
    assert_int_equal(market_audit(f->c, REALM, &a), MARKET_OK);
    assert_int_equal(a.auctions, 12);
    assert_int_equal(a.units_in_auctions, 12);
    assert_int_equal(a.auctions_unreadable, 0);
    assert_int_equal(a.items_listed, 3);
    assert_int_equal(th_fx_num("ZCARD auctions:{main}:open"), 12);
    assert_int_equal(th_fx_num("ZCARD auctions:{main}:s:p0"), 3); /* 12 round robin over 5 */
    assert_int_equal(th_fx_num("ZCARD auctions:{main}:s:p4"), 2);
    assert_int_equal(th_fx_num("SISMEMBER market:{.ending}:realms main"), 1);
    market_auction x;
    assert_int_equal(market_auction_get(f->c, REALM, 12, &x), MARKET_OK);
    assert_string_equal(x.item, "lot");
    assert_int_equal(x.quantity, 1);
    assert_int_equal(x.state, MARKET_AUCTION_OPEN);
    int64_t end = th_fx_num("ZSCORE market:{main}:ends @12");
    assert_true(end == x.ends_ms && x.ends_ms > 1000);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_auction_takes_the_goods),
        T(test_bids_escrow_and_give_back),
        T(test_buyout_sells_at_once),
        T(test_end_sells_once_or_gives_back),
        T(test_a_lot_of_units),
        T(test_sweeper_ends_auctions),
        T(test_funds_spent_before_a_bid_commits),
        T(test_goods_moved_before_an_auction_commits),
        T(test_outbid_before_a_bid_commits),
        T(test_find_auctions),
        T(test_32_bidders_at_once),
        T(test_seed_tool_generates_auctions),
    };
    return th_run_strategies("market auctions", tests, sizeof tests / sizeof *tests);
}
