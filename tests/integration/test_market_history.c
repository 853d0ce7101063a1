/* test_market_history.c - an item's price history against a real
 * redis-server, under each strategy: the candles of every interval are
 * what the trade records say (first, highest, lowest and last price, units,
 * by the trades' times), with buyers of a listing, of units across sellers
 * and of a flash sale at once; a unique item has none; a slot holding an
 * older turn of the ring is not a candle; with the history off nothing is
 * written; ranges and intervals that are no history are refused.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/helpers/market_fx.h"

#define REALM MARKET_REALM_DEFAULT

static int history_off; /* the next fixture's market writes none */

/* C and G sell potions (units) at 20..29, A an axe (a unique item); B and
 * D buy; the house "game" sells potions in a flash sale. */
static void seed(market_conn *c) {
    (void)th_fx_num("FLUSHALL");
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "A", NULL, 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "B", NULL, 10000000), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "C", NULL, 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "D", NULL, 10000000), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "G", NULL, 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "game", NULL, 0), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "A", "axe", 500), MARKET_OK);
    assert_int_equal(market_world_add_units_listing(w, "C", "potion", 23, 400), MARKET_OK);
    assert_int_equal(market_world_add_units_listing(w, "G", "potion", 27, 400), MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
}

static int fx_setup(void **state) {
    th_market *f = th_market_new((market_config){.redis_timeout_ms = 1000,
                                                 .lock_ttl_ms = 5000,
                                                 .acquire_timeout_ms = 5000,
                                                 .no_price_history = history_off});
    if (!f) return -1;
    seed(f->c);
    *state = f;
    return 0;
}

static int fx_teardown(void **state) {
    th_market_free(*state);
    return 0;
}

/* ---- the model: candles from the trade records ---- */

#define MODEL_MAX 4096

/* Candles of item by interval iv built from every trade record of the
 * realm, in commit order (the stream's): *n of them, oldest first. */
static void model(market_conn *c, const char *item, int iv, market_candle *k, size_t *n) {
    int64_t len = market_interval_ms(iv);
    char after[MARKET_TRADE_ID_MAX + 1] = "";
    market_trade *t = NULL;
    size_t got;
    *n = 0;
    do {
        assert_int_equal(market_trades_after(c, REALM, after, 500, &t, &got), MARKET_OK);
        for (size_t i = 0; i < got; i++) {
            if (strcmp(t[i].item, item) != 0) continue;
            int64_t start = t[i].time_ms - t[i].time_ms % len;
            if (*n == 0 || k[*n - 1].t_ms != start) {
                assert_true(*n < MODEL_MAX);
                assert_true(*n == 0 || k[*n - 1].t_ms < start); /* commit order is time order */
                k[(*n)++] =
                    (market_candle){start, t[i].price, t[i].price, t[i].price, t[i].price, 0};
            }
            market_candle *m = &k[*n - 1];
            if (t[i].price > m->high) m->high = t[i].price;
            if (t[i].price < m->low) m->low = t[i].price;
            m->close = t[i].price;
            m->volume += t[i].quantity;
        }
        if (got) memcpy(after, t[got - 1].id, sizeof after);
        free(t);
    } while (got > 0);
}

/* The history of item by every interval, over the last candles the model
 * has, is the model's. Returns how many candles the 1m history had. */
static size_t assert_history_is_the_trades(market_conn *c, const char *item) {
    static market_candle want[MODEL_MAX];
    size_t minutes = 0;
    for (int iv = 0; iv < MARKET_INTERVALS; iv++) {
        size_t n;
        model(c, item, iv, want, &n);
        assert_true(n > 0);
        market_candle *got = NULL;
        size_t m = 0;
        int64_t from = want[0].t_ms, to = want[n - 1].t_ms + market_interval_ms(iv) - 1;
        assert_int_equal(market_history(c, REALM, item, iv, from, to, &got, &m), MARKET_OK);
        if (m != n) fprintf(stderr, "interval %d: %zu candles, the trades make %zu\n", iv, m, n);
        assert_int_equal(m, n);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(got[i].t_ms, want[i].t_ms);
            assert_int_equal(got[i].open, want[i].open);
            assert_int_equal(got[i].high, want[i].high);
            assert_int_equal(got[i].low, want[i].low);
            assert_int_equal(got[i].close, want[i].close);
            assert_int_equal(got[i].volume, want[i].volume);
        }
        free(got);
        if (iv == MARKET_INTERVAL_1M) minutes = n;
    }
    return minutes;
}

/* ---- tests ---- */

/* Units of one listing, then of the other, then across both: the candles
 * are the trades'; the axe (a unique item) has no history. */
static void test_candles_are_the_trades(void **state) {
    th_market *f = *state;
    market_purchase_result r;
    assert_int_equal(market_purchase_units(f->c, REALM, "B", "C", "potion", 5, -1, NULL, &r),
                     MARKET_OK);
    assert_int_equal(market_purchase_units(f->c, REALM, "D", "G", "potion", 2, -1, NULL, &r),
                     MARKET_OK);
    market_buy_result b;
    assert_int_equal(market_buy_units(f->c, REALM, "B", "potion", 400, 30, NULL, &b), MARKET_OK);
    assert_int_equal(b.n_fills, 2);
    assert_int_equal(market_purchase(f->c, REALM, "D", "A", "axe", -1, &r), MARKET_OK);
    assert_history_is_the_trades(f->c, "potion");
    assert_int_equal(th_fx_num("EXISTS hist:{main}:axe"), 0);
    assert_int_equal(th_fx_num("EXISTS hist:{main}:potion"), 1);
    market_candle *k = NULL;
    size_t n = 9;
    int64_t now = (int64_t)time(NULL) * 1000;
    assert_int_equal(
        market_history(f->c, REALM, "axe", MARKET_INTERVAL_1M, now - 3600000, now, &k, &n),
        MARKET_OK);
    assert_int_equal(n, 0);
    assert_null(k);
}

struct buyer {
    market *m;
    const char *id;
    int kind;
    int ok;
};

static void *buy_run(void *arg) {
    struct buyer *b = arg;
    int err;
    market_conn *c = market_conn_new(b->m, &err);
    if (!c) return NULL;
    for (int i = 0; i < 20; i++) {
        market_purchase_result r;
        market_buy_result br;
        market_sale_result sr;
        int rc = b->kind == 0 ? market_purchase_units(c, REALM, b->id, i % 2 ? "C" : "G", "potion",
                                                      1 + i % 3, -1, NULL, &r)
                 : b->kind == 1 ? market_buy_units(c, REALM, b->id, "potion", 3, 30, NULL, &br)
                                : market_sale_buy(c, REALM, "flash", b->id, 1, NULL, &sr);
        b->ok += rc == MARKET_OK;
    }
    market_conn_free(c);
    return NULL;
}

/* 24 buyers at once, of listings, across sellers and from a flash sale,
 * while the sellers list more at other prices: every interval's candles
 * are what the trade records say. */
static void test_24_buyers_candles_are_the_trades(void **state) {
    th_market *f = *state;
    enum { N = 24 };
    market_sale s = {
        .price = 25, .initial = 500, .limit = 500, .start_ms = 0, .end_ms = INT64_C(4102444800000)};
    snprintf(s.id, sizeof s.id, "flash");
    snprintf(s.item, sizeof s.item, "potion");
    assert_int_equal(market_sale_create(f->c, REALM, &s), MARKET_OK);
    struct buyer b[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        b[i] = (struct buyer){.m = f->m, .id = i % 2 ? "B" : "D", .kind = i % 3};
        assert_int_equal(pthread_create(&t[i], NULL, buy_run, &b[i]), 0);
    }
    market_list_result lr;
    for (int p = 0; p < 6; p++) { /* C moves its price while they buy */
        (void)th_fx_num("HINCRBY stacks:{main}:C potion 10");
        int rc = market_list_units(f->c, REALM, "C", "potion", 10, 23, NULL, &lr);
        assert_true(rc == MARKET_OK || rc == MARKET_ERR_PRICE_CHANGED);
    }
    int ok = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        ok += b[i].ok;
    }
    assert_true(ok > 0);
    assert_history_is_the_trades(f->c, "potion");
}

/* A ring slot that holds an older turn (the same slot, a day earlier) is
 * no candle of today; the next trade in that slot overwrites it. A slot
 * that is no candle is unreadable. */
static void test_an_older_turn_of_the_ring_is_no_candle(void **state) {
    th_market *f = *state;
    market_purchase_result r;
    assert_int_equal(market_purchase_units(f->c, REALM, "B", "C", "potion", 1, -1, NULL, &r),
                     MARKET_OK);
    market_trade t;
    assert_int_equal(market_trade_get(f->c, REALM, r.trade_id, &t), MARKET_OK);
    int64_t len = market_interval_ms(MARKET_INTERVAL_1M), start = t.time_ms - t.time_ms % len;
    long long slot = (long long)((start / len) % (int64_t)market_interval_kept(0));
    /* a day ago, the slot of the next minute held a candle */
    long long next = (slot + 1) % (long long)market_interval_kept(0);
    char v[96];
    snprintf(v, sizeof v, "%lld 1 9 1 5 77", (long long)(start + len - 86400000));
    (void)th_fx_num("HSET hist:{main}:potion m%lld %s", next, v);
    market_candle *k = NULL;
    size_t n = 0;
    assert_int_equal(
        market_history(f->c, REALM, "potion", MARKET_INTERVAL_1M, start, start + len, &k, &n),
        MARKET_OK);
    assert_int_equal(n, 1);
    assert_int_equal(k[0].t_ms, start);
    assert_int_equal(k[0].volume, 1);
    free(k);
    /* a slot that holds no candle at all */
    snprintf(v, sizeof v, "%lld 5 1 9 5 1", (long long)start); /* its low above its high */
    (void)th_fx_num("HSET hist:{main}:potion m%lld %s", slot, v);
    assert_int_equal(
        market_history(f->c, REALM, "potion", MARKET_INTERVAL_1M, start, start, &k, &n),
        MARKET_ERR_STORE);
    assert_null(k);
}

/* What is no history is refused: an interval, a range backwards or longer
 * than the ring, a bad item. */
static void test_bad_ranges_refused(void **state) {
    th_market *f = *state;
    market_candle *k = NULL;
    size_t n = 0;
    int64_t day = 86400000;
    assert_int_equal(market_history(f->c, REALM, "potion", 3, 0, 1, &k, &n), MARKET_ERR_INVALID);
    assert_int_equal(market_history(f->c, REALM, "potion", -1, 0, 1, &k, &n), MARKET_ERR_INVALID);
    assert_int_equal(market_history(f->c, REALM, "potion", 0, 10, 9, &k, &n), MARKET_ERR_INVALID);
    assert_int_equal(market_history(f->c, REALM, "potion", 0, -1, 9, &k, &n), MARKET_ERR_INVALID);
    assert_int_equal(market_history(f->c, REALM, "potion", 0, 0, day, &k, &n),
                     MARKET_ERR_INVALID); /* 1,441 minutes */
    assert_int_equal(market_history(f->c, REALM, "potion", 0, 0, day - 1, &k, &n), MARKET_OK);
    assert_int_equal(market_history(f->c, REALM, "a.b", 0, 0, 1, &k, &n), MARKET_ERR_INVALID);
    assert_int_equal(market_history(f->c, REALM, "potion", 2, 0, 729 * day, &k, &n), MARKET_OK);
    assert_int_equal(market_history(f->c, REALM, "potion", 2, 0, 730 * day, &k, &n),
                     MARKET_ERR_INVALID);
    assert_int_equal(market_history(f->c, REALM, "potion", 0, 0, 1, NULL, &n), MARKET_ERR_INVALID);
}

/* With the history off, trades of goods write none. */
static void test_history_off_writes_none(void **state) {
    th_market *f = *state;
    market_purchase_result r;
    assert_int_equal(market_purchase_units(f->c, REALM, "B", "C", "potion", 5, -1, NULL, &r),
                     MARKET_OK);
    market_buy_result b;
    assert_int_equal(market_buy_units(f->c, REALM, "B", "potion", 10, 30, NULL, &b), MARKET_OK);
    assert_int_equal(th_fx_num("EXISTS hist:{main}:potion"), 0);
    assert_int_equal(th_fx_num("XLEN trades:{main}"), 2);
}

static int off_setup(void **state) {
    history_off = 1;
    int rc = fx_setup(state);
    history_off = 0;
    return rc;
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_candles_are_the_trades),
        T(test_24_buyers_candles_are_the_trades),
        T(test_an_older_turn_of_the_ring_is_no_candle),
        T(test_bad_ranges_refused),
        cmocka_unit_test_setup_teardown(test_history_off_writes_none, off_setup, fx_teardown),
    };
    return th_run_strategies("market history", tests, sizeof tests / sizeof *tests);
}
