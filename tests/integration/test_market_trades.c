/* test_market_trades.c - trade records (market/market_trade.c) against a real
 * redis-server, under each strategy: every purchase that commits records
 * its trade in the same MULTI/EXEC, nothing else does, a replay answers the
 * same trade id, and the histories page newest first.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "market/market_trade.h"
#include "tests/helpers/market_fx.h"

#define REALM MARKET_REALM_DEFAULT
#define TRADES "trades:{main}"

/* ---- helpers ---- */

static th_market *fx_new(uint32_t ttl_ms, uint32_t stall_ms, uint64_t history, uint64_t index) {
    th_market *f = th_market_new((market_config){.redis_timeout_ms = 1000,
                                                 .lock_ttl_ms = ttl_ms,
                                                 .acquire_timeout_ms = 2000,
                                                 .test_stall_ms = stall_ms,
                                                 .trade_history = history,
                                                 .trade_index = index,
                                                 .test_decided = th_fx_on_decided});
    assert_non_null(f);
    return f;
}

/* A shop listing n gems at 100 + i, A and its axe at 500, buyers B (800) and
 * a rich D. Every key of the store is deleted first. */
static void seed(market_conn *c, int n) {
    redisReply *r = th_fx_cmd("FLUSHALL");
    freeReplyObject(r);
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "A", "Alice", 100), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "B", "Bob", 800), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "D", "Dave", 100000000), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "shop", NULL, 0), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "A", "axe", 500), MARKET_OK);
    for (int i = 0; i < n; i++) {
        char item[24];
        snprintf(item, sizeof item, "gem%d", i);
        assert_int_equal(market_world_add_listing(w, "shop", item, 100 + i), MARKET_OK);
    }
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int fx_setup(void **state) {
    th_market *f = fx_new(5000, 0, 0, 0);
    seed(f->c, 40);
    *state = f;
    return 0;
}

static int fx_teardown(void **state) {
    th_market_free(*state);
    return 0;
}

/* ---- tests ---- */

/* A purchase answers its trade id; the record says who, what, how much,
 * under which fence and when, and is in the buyer's, the seller's and the
 * item's histories. */
static void test_purchase_records_its_trade(void **state) {
    th_market *f = *state;
    int64_t t0 = now_ms();
    market_purchase_result r = {0};
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", -1, &r), MARKET_OK);
    assert_true(market_trade_id_valid(r.trade_id));
    market_trade t;
    assert_int_equal(market_trade_get(f->c, REALM, r.trade_id, &t), MARKET_OK);
    assert_string_equal(t.id, r.trade_id);
    assert_string_equal(t.buyer, "B");
    assert_string_equal(t.seller, "A");
    assert_string_equal(t.item, "axe");
    assert_int_equal(t.quantity, 1);
    assert_int_equal(t.price, 500);
    assert_int_equal(t.total, 500);
    if (th_fx_strategy == MARKET_STRATEGY_OPTIMISTIC)
        assert_int_equal(t.fence, 0);
    else
        assert_true(t.fence > 0);
    assert_true(t.time_ms >= t0 - 5000 && t.time_ms <= now_ms() + 5000);
    assert_int_equal(th_fx_num("XLEN %s", TRADES), 1);

    static const char *const who[2] = {"B", "A"};
    for (int i = 0; i < 2; i++) {
        market_trade *v = NULL;
        size_t n = 0;
        char next[MARKET_TRADE_ID_MAX + 1];
        assert_int_equal(market_trades_player(f->c, REALM, who[i], NULL, 10, &v, &n, next),
                         MARKET_OK);
        assert_int_equal(n, 1);
        assert_string_equal(v[0].id, r.trade_id);
        assert_int_equal(v[0].price, 500);
        assert_string_equal(next, "");
        free(v);
    }
    market_trade *v = NULL;
    size_t n = 0;
    assert_int_equal(market_trades_item(f->c, REALM, "axe", 10, &v, &n), MARKET_OK);
    assert_int_equal(n, 1);
    assert_string_equal(v[0].id, r.trade_id);
    assert_string_equal(v[0].buyer, "B");
    free(v);
}

/* Reads item's history (limit up to 10) into ids[0..*n), newest first. */
static void item_ids(market_conn *c, const char *item, size_t limit,
                     char ids[][MARKET_TRADE_ID_MAX + 1], size_t *n) {
    market_trade *v = NULL;
    assert_int_equal(market_trades_item(c, REALM, item, limit, &v, n), MARKET_OK);
    for (size_t i = 0; i < *n; i++) memcpy(ids[i], v[i].id, sizeof v[i].id);
    free(v);
}

/* An item's history is a chain through the realm's stream: a unique item
 * sold, listed again and sold again shows both trades, newest first; a
 * trade trimmed from the stream ends it; an item whose trades were indexed
 * by an earlier version (a list of ids, records without a chain) still
 * shows them, behind the newer ones. */
static void test_item_history_chains_its_trades(void **state) {
    th_market *f = *state;
    market_purchase_result r1 = {0}, r2 = {0}, r3 = {0};
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", -1, &r1), MARKET_OK);
    assert_int_equal(market_list(f->c, REALM, "B", "axe", 600), MARKET_OK);
    assert_int_equal(market_purchase(f->c, REALM, "D", "B", "axe", -1, &r2), MARKET_OK);
    char ids[10][MARKET_TRADE_ID_MAX + 1];
    size_t n = 0;
    item_ids(f->c, "axe", 10, ids, &n);
    assert_int_equal(n, 2);
    assert_string_equal(ids[0], r2.trade_id);
    assert_string_equal(ids[1], r1.trade_id);
    item_ids(f->c, "axe", 1, ids, &n);
    assert_int_equal(n, 1);
    assert_string_equal(ids[0], r2.trade_id);
    redisReply *h = th_fx_cmd("HGET %s:items axe", TRADES);
    assert_string_equal(h->str, r2.trade_id); /* the item's latest trade */
    freeReplyObject(h);
    item_ids(f->c, "gem7", 10, ids, &n); /* never traded */
    assert_int_equal(n, 0);

    /* a trade trimmed from the stream ends the chain */
    assert_int_equal(th_fx_num("XDEL %s %s", TRADES, r1.trade_id), 1);
    item_ids(f->c, "axe", 10, ids, &n);
    assert_int_equal(n, 1);
    assert_string_equal(ids[0], r2.trade_id);

    /* an earlier version's list: its trades follow the chain's first */
    redisReply *x = th_fx_cmd("XADD %s * buyer D seller shop item gem0 quantity 1 price 100 "
                              "total 100 fence 3",
                              TRADES);
    assert_int_equal(x->type, REDIS_REPLY_STRING);
    char old[MARKET_TRADE_ID_MAX + 1];
    snprintf(old, sizeof old, "%s", x->str);
    freeReplyObject(x);
    x = th_fx_cmd("LPUSH %s:item:gem0 %s", TRADES, old);
    freeReplyObject(x);
    item_ids(f->c, "gem0", 10, ids, &n);
    assert_int_equal(n, 1);
    assert_string_equal(ids[0], old);
    assert_int_equal(market_purchase(f->c, REALM, "D", "shop", "gem0", -1, &r3), MARKET_OK);
    item_ids(f->c, "gem0", 10, ids, &n);
    assert_int_equal(n, 2);
    assert_string_equal(ids[0], r3.trade_id);
    assert_string_equal(ids[1], old);
    market_trade t;
    assert_int_equal(market_trade_get(f->c, REALM, old, &t), MARKET_OK); /* no prev: read */
    assert_string_equal(t.item, "gem0");
}

/* A refusal records nothing, nor does a lapsed lease's commit. */
static void test_refusals_record_nothing(void **state) {
    th_market *f = *state;
    market_purchase_result r = {0};
    assert_int_equal(market_purchase(f->c, REALM, "B", "shop", "nope", -1, &r),
                     MARKET_ERR_NOT_LISTED);
    assert_int_equal(market_purchase(f->c, REALM, "A", "shop", "gem5", -1, &r),
                     MARKET_ERR_INSUFFICIENT_FUNDS);
    assert_int_equal(market_purchase(f->c, REALM, "B", "A", "axe", 499, &r),
                     MARKET_ERR_PRICE_CHANGED);
    assert_int_equal(market_purchase(f->c, REALM, "ghost", "A", "axe", -1, &r),
                     MARKET_ERR_NO_PLAYER);
    assert_int_equal(th_fx_num("EXISTS %s", TRADES), 0);
    if (th_fx_strategy == MARKET_STRATEGY_OPTIMISTIC) return; /* no lease to lose */
    /* a holder stalled past its lease between its read and its commit */
    th_market *slow = fx_new(100, 300, 0, 0);
    assert_int_equal(market_purchase(slow->c, REALM, "B", "A", "axe", -1, &r),
                     MARKET_ERR_LEASE_LOST);
    th_market_free(slow);
    assert_int_equal(th_fx_num("EXISTS %s", TRADES), 0);
    assert_int_equal(th_fx_funds(f->c, "B"), 800);
}

/* A replay under the same idempotency key answers the first trade id, and
 * nothing more is recorded. */
static void test_idem_replay_same_trade_id(void **state) {
    th_market *f = *state;
    market_idem k = {"order-7", "fp-axe"};
    market_purchase_result r = {0}, again = {0};
    assert_int_equal(market_purchase_idem(f->c, REALM, "B", "A", "axe", -1, &k, &r), MARKET_OK);
    assert_true(market_trade_id_valid(r.trade_id));
    assert_int_equal(market_purchase_idem(f->c, REALM, "B", "A", "axe", -1, &k, &again),
                     MARKET_OK);
    assert_int_equal(again.replayed, 1);
    assert_string_equal(again.trade_id, r.trade_id);
    assert_int_equal(th_fx_num("XLEN %s", TRADES), 1);
}

struct buyer {
    market *m;
    const char *buyer, *item;
    const market_idem *idem;
    pthread_barrier_t *start;
    int rc;
    market_purchase_result res;
};

static void *buy(void *arg) {
    struct buyer *b = arg;
    int err;
    market_conn *c = market_conn_new(b->m, &err);
    pthread_barrier_wait(b->start);
    b->rc = market_purchase_idem(c, REALM, b->buyer, "shop", b->item, -1, b->idem, &b->res);
    market_conn_free(c);
    return NULL;
}

/* Concurrent repeats of one request (one batch, or racing attempts) all
 * answer the one trade they made. */
static void test_idem_concurrent_repeats_one_trade(void **state) {
    th_market *f = *state;
    enum { N = 12 };
    market_idem k = {"order-9", "fp-gem3"};
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, N);
    struct buyer b[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        b[i] = (struct buyer){f->m, "D", "gem3", &k, &start, 0, {0}};
        assert_int_equal(pthread_create(&t[i], NULL, buy, &b[i]), 0);
    }
    const char *id = NULL;
    int ok = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        if (b[i].rc == MARKET_ERR_IN_PROGRESS) continue; /* another attempt was deciding it */
        assert_int_equal(b[i].rc, MARKET_OK);
        assert_true(market_trade_id_valid(b[i].res.trade_id));
        if (!id) id = b[i].res.trade_id;
        assert_string_equal(b[i].res.trade_id, id);
        ok++;
    }
    pthread_barrier_destroy(&start);
    assert_true(ok >= 1);
    assert_int_equal(th_fx_num("XLEN %s", TRADES), 1);
    assert_int_equal(th_fx_funds(f->c, "D"), 100000000 - 103);
}

/* 32 buyers at once (batches under the lock strategies): every purchase
 * that succeeded has its own record, with its own item and price, and the
 * records add up to the funds that moved. */
static void test_concurrent_purchases_each_recorded(void **state) {
    th_market *f = *state;
    enum { N = 32 };
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, N);
    struct buyer b[N];
    pthread_t t[N];
    char items[N][24];
    for (int i = 0; i < N; i++) {
        snprintf(items[i], sizeof items[i], "gem%d", i);
        b[i] = (struct buyer){f->m, "D", items[i], NULL, &start, 0, {0}};
        assert_int_equal(pthread_create(&t[i], NULL, buy, &b[i]), 0);
    }
    int64_t spent = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(b[i].rc, MARKET_OK);
        market_trade tr;
        assert_int_equal(market_trade_get(f->c, REALM, b[i].res.trade_id, &tr), MARKET_OK);
        assert_string_equal(tr.item, items[i]);
        assert_int_equal(tr.price, 100 + i);
        spent += tr.total;
        for (int j = 0; j < i; j++) assert_string_not_equal(b[j].res.trade_id, b[i].res.trade_id);
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(th_fx_num("XLEN %s", TRADES), N);
    assert_int_equal(th_fx_funds(f->c, "shop"), spent);
    assert_int_equal(th_fx_funds(f->c, "D"), 100000000 - spent);
    assert_int_equal(th_fx_num("LLEN trades:{main}:player:shop"), N);
}

/* A player's history pages newest first: every trade once, pages joined by
 * next_cursor, the last page without one; a trade made between two pages
 * does not shift the later ones. */
static void test_player_history_pages_newest_first(void **state) {
    th_market *f = *state;
    char ids[25][MARKET_TRADE_ID_MAX + 1];
    for (int i = 0; i < 25; i++) {
        char item[24];
        snprintf(item, sizeof item, "gem%d", i);
        market_purchase_result r = {0};
        assert_int_equal(market_purchase(f->c, REALM, "D", "shop", item, -1, &r), MARKET_OK);
        memcpy(ids[i], r.trade_id, sizeof ids[i]);
    }
    char cursor[MARKET_TRADE_ID_MAX + 1] = "";
    int seen = 0, pages = 0;
    do {
        market_trade *v = NULL;
        size_t n = 0;
        char next[MARKET_TRADE_ID_MAX + 1];
        assert_int_equal(market_trades_player(f->c, REALM, "D", cursor, 10, &v, &n, next),
                         MARKET_OK);
        for (size_t i = 0; i < n; i++, seen++)
            assert_string_equal(v[i].id, ids[24 - seen]); /* newest first */
        free(v);
        if (pages++ == 0) { /* a newer trade meanwhile: not on the later pages */
            market_purchase_result r = {0};
            assert_int_equal(market_purchase(f->c, REALM, "D", "shop", "gem30", -1, &r),
                             MARKET_OK);
        }
        memcpy(cursor, next, sizeof cursor);
    } while (cursor[0]);
    assert_int_equal(seen, 25);
    assert_int_equal(pages, 3);
}

/* Ids, cursors, limits and out-pointers are checked; an unknown trade is ERR_NO_TRADE. */
static void test_bad_arguments_and_unknown_trade(void **state) {
    th_market *f = *state;
    market_trade t;
    market_trade *v = NULL;
    size_t n = 0;
    char next[MARKET_TRADE_ID_MAX + 1];
    static const char *const bad[] = {"", "1", "1-", "-1", "1-2-3", "a-1", "1-1 ", "+1-1",
                                      "18446744073709551616-0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_false(market_trade_id_valid(bad[i]));
        assert_int_equal(market_trade_get(f->c, REALM, bad[i], &t), MARKET_ERR_INVALID);
    }
    assert_int_equal(market_trade_get(f->c, REALM, "1-1", &t), MARKET_ERR_NO_TRADE);
    assert_int_equal(market_trade_get(f->c, "bad realm", "1-1", &t), MARKET_ERR_INVALID);
    assert_int_equal(market_trades_player(f->c, REALM, "D", "x", 10, &v, &n, next),
                     MARKET_ERR_INVALID);
    assert_int_equal(market_trades_player(f->c, REALM, "D", NULL, 0, &v, &n, next),
                     MARKET_ERR_INVALID);
    assert_int_equal(
        market_trades_player(f->c, REALM, "D", NULL, MARKET_TRADES_PAGE_MAX + 1, &v, &n, next),
        MARKET_ERR_INVALID);
    assert_int_equal(market_trades_item(f->c, REALM, "a.b", 10, &v, &n), MARKET_ERR_INVALID);
    /* the realm's pages of trades and listing changes need somewhere to put them, and a limit */
    market_feed feed;
    char last[MARKET_FEEDS][MARKET_TRADE_ID_MAX + 1];
    const char *bad_change[MARKET_FEEDS] = {NULL, "x", NULL}, *one[MARKET_FEEDS] = {"1-1"};
    const char *bad_bid[MARKET_FEEDS] = {NULL, NULL, "1-"};
    assert_int_equal(market_trades_after(f->c, REALM, NULL, 10, NULL, &n), MARKET_ERR_INVALID);
    assert_int_equal(market_feed_after(f->c, REALM, NULL, 10, NULL), MARKET_ERR_INVALID);
    assert_int_equal(market_trades_after(f->c, REALM, NULL, 0, &v, &n), MARKET_ERR_INVALID);
    assert_int_equal(market_feed_after(f->c, REALM, NULL, 0, &feed), MARKET_ERR_INVALID);
    assert_int_equal(market_feed_after(f->c, REALM, bad_change, 10, &feed), MARKET_ERR_INVALID);
    assert_int_equal(market_feed_after(f->c, REALM, bad_bid, 10, &feed), MARKET_ERR_INVALID);
    assert_null(feed.changes);
    assert_null(feed.trades);
    assert_null(feed.auctions);
    assert_int_equal(market_feed_after(f->c, REALM, one, MARKET_TRADES_PAGE_MAX + 1, &feed),
                     MARKET_ERR_INVALID);
    assert_int_equal(market_feed_last(f->c, "bad realm", last), MARKET_ERR_INVALID);
    assert_int_equal(market_feed_last(f->c, REALM, NULL), MARKET_ERR_INVALID);
    /* nobody's history is an empty page */
    assert_int_equal(market_trades_player(f->c, REALM, "nobody", NULL, 10, &v, &n, next),
                     MARKET_OK);
    assert_int_equal(n, 0);
    assert_null(v);
    assert_string_equal(next, "");
}

/* The realm's history is trimmed to about cfg.trade_history entries, a
 * player's and an item's index to cfg.trade_index ids (up to an eighth
 * more), newest kept; a cursor trimmed away ends the history. */
static void test_history_is_bounded(void **state) {
    th_market *f = *state;
    redisReply *r = th_fx_cmd("CONFIG SET stream-node-max-entries 4");
    freeReplyObject(r);
    th_market *g = fx_new(5000, 0, 5, 16);
    char first[MARKET_TRADE_ID_MAX + 1] = "", latest[MARKET_TRADE_ID_MAX + 1] = "";
    for (int i = 0; i < 40; i++) {
        char item[24];
        snprintf(item, sizeof item, "gem%d", i);
        market_purchase_result res = {0};
        assert_int_equal(market_purchase(g->c, REALM, "D", "shop", item, -1, &res), MARKET_OK);
        if (i == 0) memcpy(first, res.trade_id, sizeof first);
        memcpy(latest, res.trade_id, sizeof latest);
    }
    long long kept = th_fx_num("LLEN trades:{main}:player:D");
    assert_true(kept >= 16 && kept <= 18);
    redisReply *head = th_fx_cmd("LINDEX trades:{main}:player:D 0");
    assert_string_equal(head->str, latest);
    freeReplyObject(head);
    market_trade *v = NULL;
    size_t n = 0;
    char next[MARKET_TRADE_ID_MAX + 1];
    assert_int_equal(market_trades_player(g->c, REALM, "D", first, 10, &v, &n, next), MARKET_OK);
    assert_int_equal(n, 0);
    assert_string_equal(next, "");
    th_market_free(g);
    r = th_fx_cmd("CONFIG SET stream-node-max-entries 100");
    freeReplyObject(r);
    long long len = th_fx_num("XLEN %s", TRADES);
    assert_true(len >= 5 && len <= 12); /* MAXLEN ~ 5 keeps whole nodes of 4 */
    (void)f;
}

/* The realm's trades hold at most most entries, trades:{r}:items and
 * trades:{r}:order no more than that, and each head names a trade still in
 * the stream. */
static void assert_heads_in_history(long long most) {
    long long len = th_fx_num("XLEN %s", TRADES);
    assert_true(len <= most);
    assert_true(th_fx_num("LLEN %s:order", TRADES) <= len);
    redisReply *h = th_fx_cmd("HGETALL %s:items", TRADES);
    assert_int_equal(h->type, REDIS_REPLY_ARRAY);
    assert_true((long long)h->elements / 2 <= len);
    for (size_t i = 1; i < h->elements; i += 2) {
        const char *id = h->element[i]->str;
        redisReply *e = th_fx_cmd("XRANGE %s %s %s", TRADES, id, id);
        assert_int_equal(e->elements, 1);
        freeReplyObject(e);
    }
    freeReplyObject(h);
}

/* With a history of 4 trades, an item's latest trade leaves
 * trades:{r}:items when the stream trims it: the axe sold twice shows both
 * trades, then only its latest once the first is trimmed, then none; 40
 * unique items sold one at a time, then 32 at once (several trades a commit
 * under the lock strategies), leave at most 4 heads, each a trade in the
 * stream; what the stream keeps still reads. */
static void test_item_heads_bounded_by_history(void **state) {
    th_market *f = *state;
    th_market *g = fx_new(5000, 0, 4, 16);
    market_purchase_result r1 = {0}, r2 = {0}, res = {0};
    assert_int_equal(market_purchase(g->c, REALM, "B", "A", "axe", -1, &r1), MARKET_OK);
    assert_int_equal(market_list(g->c, REALM, "B", "axe", 600), MARKET_OK);
    assert_int_equal(market_purchase(g->c, REALM, "D", "B", "axe", -1, &r2), MARKET_OK);
    char ids[10][MARKET_TRADE_ID_MAX + 1], item[24];
    size_t n = 0;
    item_ids(g->c, "axe", 10, ids, &n);
    assert_int_equal(n, 2);
    for (int i = 0; i < 8; i++) {
        snprintf(item, sizeof item, "gem%d", i);
        assert_int_equal(market_purchase(g->c, REALM, "D", "shop", item, -1, &res), MARKET_OK);
        assert_heads_in_history(4);
        item_ids(g->c, "axe", 10, ids, &n); /* r1 goes with the third gem, r2 the fourth */
        assert_int_equal(n, i < 2 ? 2 : i < 3 ? 1 : 0);
        if (n) assert_string_equal(ids[0], r2.trade_id);
        item_ids(g->c, item, 10, ids, &n);
        assert_int_equal(n, 1);
        assert_string_equal(ids[0], res.trade_id);
    }
    market_trade t;
    assert_int_equal(market_trade_get(g->c, REALM, r2.trade_id, &t), MARKET_ERR_NO_TRADE);
    assert_int_equal(th_fx_num("HEXISTS %s:items axe", TRADES), 0);
    enum { N = 32 };
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, N);
    struct buyer b[N];
    pthread_t th[N];
    char items[N][24];
    for (int i = 0; i < N; i++) {
        snprintf(items[i], sizeof items[i], "gem%d", 8 + i);
        b[i] = (struct buyer){g->m, "D", items[i], NULL, &start, 0, {0}};
        assert_int_equal(pthread_create(&th[i], NULL, buy, &b[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(b[i].rc, MARKET_OK);
    }
    pthread_barrier_destroy(&start);
    assert_heads_in_history(4);
    assert_int_equal(th_fx_num("XLEN %s", TRADES), 4);
    for (int i = 0; i < N; i++) { /* the 4 kept read whole, the others are gone */
        int kept = market_trade_get(g->c, REALM, b[i].res.trade_id, &t) == MARKET_OK;
        item_ids(g->c, items[i], 10, ids, &n);
        assert_int_equal(n, (size_t)kept);
        if (kept) assert_string_equal(ids[0], b[i].res.trade_id);
        if (kept) assert_string_equal(t.item, items[i]);
        assert_int_equal(th_fx_num("HEXISTS %s:items %s", TRADES, items[i]), kept);
    }
    th_market_free(g);
    (void)f;
}

/* Heads a trim never saw (written while the trim dropped whole nodes, or
 * left by an earlier version) go once the hash has more fields than the
 * stream has trades: the first trim checks them against the oldest trade
 * kept. */
static void test_stale_heads_swept(void **state) {
    th_market *f = *state;
    th_market *g = fx_new(5000, 0, 4, 16);
    for (int i = 0; i < 50; i++) {
        redisReply *r = th_fx_cmd("HSET %s:items ghost%d 0-%d", TRADES, i, i + 1);
        freeReplyObject(r);
    }
    redisReply *r = th_fx_cmd("HSET %s:items blank \"\"", TRADES);
    freeReplyObject(r);
    char item[24];
    for (int i = 0; i < 5; i++) { /* the fifth is the first over the history */
        snprintf(item, sizeof item, "gem%d", i);
        market_purchase_result res = {0};
        assert_int_equal(market_purchase(g->c, REALM, "D", "shop", item, -1, &res), MARKET_OK);
    }
    assert_heads_in_history(4);
    assert_int_equal(th_fx_num("HLEN %s:items", TRADES), 4);
    th_market_free(g);
    (void)f;
}

/* A trade record that cannot be written (trades:{r} is not a stream: the
 * script fails inside the EXEC, whose other commands still apply) leaves
 * the purchase done and answered as the store's failure; its idempotency
 * record says done, so a retry replays it instead of buying again. */
static void test_record_failure_purchase_done_once(void **state) {
    th_market *f = *state;
    redisReply *r = th_fx_cmd("SET %s not-a-stream", TRADES);
    freeReplyObject(r);
    market_idem k = {"order-x", "fp-axe"};
    market_purchase_result res = {0}, again = {0};
    assert_int_equal(market_purchase_idem(f->c, REALM, "B", "A", "axe", -1, &k, &res),
                     MARKET_ERR_STORE);
    assert_int_equal(th_fx_funds(f->c, "B"), 300); /* committed all the same */
    assert_int_equal(market_purchase_idem(f->c, REALM, "B", "A", "axe", -1, &k, &again),
                     MARKET_OK);
    assert_int_equal(again.replayed, 1);
    assert_int_equal(again.price, 500);
    assert_int_equal(again.buyer_funds, 300);
    assert_string_equal(again.trade_id, ""); /* the script that would name it failed */
    assert_int_equal(th_fx_funds(f->c, "B"), 300);
    r = th_fx_cmd("DEL %s", TRADES);
    freeReplyObject(r);
}

/* Armed: an operator empties Redis's script cache. */
static void flush_scripts(void) {
    redisReply *r = th_fx_cmd("SCRIPT FLUSH");
    freeReplyObject(r);
}

/* B buys A's axe (500 of its 800) with Idempotency-Key order, hook arm armed between the
 * batch's decision and its commit (NULL: none): the purchase answers its trade id, the
 * record holds it, the trade stream then has trades entries, B's history has it, B paid
 * once, and a retry replays that one trade. */
static void axe_bought_recorded_once(th_market *f, const char *order, void (*arm)(void),
                                     long long trades) {
    market_purchase_result r = {0}, again = {0};
    market_idem k = {order, "fp-axe"};
    if (arm) th_fx_arm(arm);
    assert_int_equal(market_purchase_idem(f->c, REALM, "B", "A", "axe", -1, &k, &r), MARKET_OK);
    assert_false(th_fx_armed());
    assert_true(market_trade_id_valid(r.trade_id));
    market_trade t;
    assert_int_equal(market_trade_get(f->c, REALM, r.trade_id, &t), MARKET_OK);
    assert_string_equal(t.buyer, "B");
    assert_string_equal(t.item, "axe");
    assert_int_equal(t.price, 500);
    assert_int_equal(th_fx_num("XLEN %s", TRADES), trades);
    assert_int_equal(th_fx_num("LLEN trades:{main}:player:B"), 1);
    assert_int_equal(th_fx_funds(f->c, "B"), 300);
    assert_int_equal(market_purchase_idem(f->c, REALM, "B", "A", "axe", -1, &k, &again), MARKET_OK);
    assert_int_equal(again.replayed, 1);
    assert_string_equal(again.trade_id, r.trade_id);
    assert_int_equal(th_fx_num("XLEN %s", TRADES), trades);
}

/* The commit names the recording script by its SHA-1 once its connection knows it cached;
 * a SCRIPT FLUSH between the batch's read and the commit makes the script alone fail inside the
 * EXEC (NOSCRIPT) while the transfer commits. The trade is then recorded at once, with its
 * idempotency record: the purchase answers its trade id, the record and the histories hold
 * it, and a retry replays that one trade. */
static void test_script_flushed_before_commit_trade_recorded(void **state) {
    th_market *f = *state;
    market_purchase_result warm = {0};
    /* the first commit on this store sends the script whole, which caches it */
    assert_int_equal(market_purchase(f->c, REALM, "D", "shop", "gem1", -1, &warm), MARKET_OK);
    redisReply *cached = th_fx_cmd("SCRIPT EXISTS %s", market__trades_sha());
    assert_int_equal(cached->element[0]->integer, 1);
    freeReplyObject(cached);
    axe_bought_recorded_once(f, "order-f", flush_scripts, 2);
    market_purchase_result next = {0}; /* and the next commit caches the script again */
    assert_int_equal(market_purchase(f->c, REALM, "D", "shop", "gem2", -1, &next), MARKET_OK);
    assert_true(market_trade_id_valid(next.trade_id));
    assert_int_equal(th_fx_num("XLEN %s", TRADES), 3);
}

/* Once a commit has run the recording script, its connection knows the server has it: the
 * batches after it ask no more (SCRIPT EXISTS) and name it. A SCRIPT FLUSH between two
 * batches then fails the next commit's script alone, and its trade is recorded at once, as
 * when the flush comes between a batch's read and its commit. */
static void test_script_known_asked_no_more_flush_between_batches(void **state) {
    th_market *f = *state;
    market_purchase_result warm = {0};
    assert_int_equal(market_purchase(f->c, REALM, "D", "shop", "gem1", -1, &warm), MARKET_OK);
    long long asked = th_fx_calls("script|exists");
    assert_true(asked > 0); /* the first batch's read asked */
    for (int i = 2; i <= 4; i++) {
        char item[16];
        snprintf(item, sizeof item, "gem%d", i);
        market_purchase_result p = {0};
        assert_int_equal(market_purchase(f->c, REALM, "D", "shop", item, -1, &p), MARKET_OK);
        assert_true(market_trade_id_valid(p.trade_id));
    }
    assert_int_equal(th_fx_calls("script|exists"), asked);
    assert_int_equal(th_fx_num("XLEN %s", TRADES), 4);
    flush_scripts();
    axe_bought_recorded_once(f, "order-h", NULL, 5);
    redisReply *cached = th_fx_cmd("SCRIPT EXISTS %s", market__trades_sha());
    assert_int_equal(cached->element[0]->integer, 1); /* recorded with its text: cached again */
    freeReplyObject(cached);
}

/* Armed: the script cache is emptied and the trade stream broken, so that the commit's
 * script fails (NOSCRIPT) and so does recording its trades again (WRONGTYPE). */
static void flush_scripts_break_stream(void) {
    flush_scripts();
    redisReply *r = th_fx_cmd("SET %s not-a-stream", TRADES);
    freeReplyObject(r);
}

/* A new connection knows nothing of the script: once the market's connections are cut and
 * the script cache emptied, the next batch's read asks again (SCRIPT EXISTS), so that its
 * commit sends the text instead of naming a script the server lacks. (The lock's scripts
 * run by EVAL and EVALSHA too, so those counts do not tell the commit's apart.) */
static void test_script_asked_again_on_a_new_connection(void **state) {
    th_market *f = *state;
    market_purchase_result warm = {0}, p = {0};
    assert_int_equal(market_purchase(f->c, REALM, "D", "shop", "gem1", -1, &warm), MARKET_OK);
    redisReply *r = th_fx_cmd("CLIENT KILL TYPE normal"); /* every client but this one */
    freeReplyObject(r);
    flush_scripts();
    long long asked = th_fx_calls("script|exists");
    int rc;
    do /* the first try may meet its cut connection: nothing is committed then */
        rc = market_purchase(f->c, REALM, "D", "shop", "gem2", -1, &p);
    while (rc == MARKET_ERR_STORE);
    assert_int_equal(rc, MARKET_OK);
    assert_true(market_trade_id_valid(p.trade_id));
    assert_int_equal(th_fx_num("XLEN %s", TRADES), 2);
    assert_true(th_fx_calls("script|exists") > asked);
}

/* When recording the trades again fails too, the purchase is done once and answered as the
 * store's failure (its outcome unknown to the client); its idempotency record, written by
 * the commit itself, says done, so a retry replays it instead of buying again. */
static void test_script_flushed_and_record_fails_purchase_done_once(void **state) {
    th_market *f = *state;
    market_purchase_result warm = {0}, res = {0}, again = {0};
    assert_int_equal(market_purchase(f->c, REALM, "D", "shop", "gem1", -1, &warm), MARKET_OK);
    market_idem k = {"order-g", "fp-axe"};
    th_fx_arm(flush_scripts_break_stream);
    assert_int_equal(market_purchase_idem(f->c, REALM, "B", "A", "axe", -1, &k, &res),
                     MARKET_ERR_STORE);
    assert_false(th_fx_armed());
    assert_int_equal(th_fx_funds(f->c, "B"), 300); /* committed all the same, once */
    assert_int_equal(market_purchase_idem(f->c, REALM, "B", "A", "axe", -1, &k, &again), MARKET_OK);
    assert_int_equal(again.replayed, 1);
    assert_int_equal(again.price, 500);
    assert_int_equal(th_fx_funds(f->c, "B"), 300);
    redisReply *r = th_fx_cmd("DEL %s", TRADES);
    freeReplyObject(r);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_purchase_records_its_trade),
        T(test_item_history_chains_its_trades),
        T(test_refusals_record_nothing),
        T(test_idem_replay_same_trade_id),
        T(test_idem_concurrent_repeats_one_trade),
        T(test_concurrent_purchases_each_recorded),
        T(test_player_history_pages_newest_first),
        T(test_bad_arguments_and_unknown_trade),
        T(test_history_is_bounded),
        T(test_item_heads_bounded_by_history),
        T(test_stale_heads_swept),
        T(test_record_failure_purchase_done_once),
        T(test_script_flushed_before_commit_trade_recorded),
        T(test_script_flushed_and_record_fails_purchase_done_once),
        T(test_script_known_asked_no_more_flush_between_batches),
        T(test_script_asked_again_on_a_new_connection),
    };
    return th_run_strategies("market trades", tests, sizeof tests / sizeof *tests);
}
