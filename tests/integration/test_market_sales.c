/* test_market_sales.c - flash sales (market/market_sale.c) against a real
 * redis-server: 1,000 buyers at once checked exactly (units, limits, funds,
 * trades, stacks), two markets over one Redis selling the same sale, a
 * sale whose end passes while buyers keep coming, every refusal, an
 * idempotent retry charged once, a holder stalled past its lease, and the
 * audit's units.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <string.h>
#include <time.h>

#include <hiredis.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"
#include "rconn/rconn.h"
#include "market/market.h"
#include "tests/helpers/redis_proc.h"

#define REALM MARKET_REALM_DEFAULT
#define BUYERS 1000
#define FUNDS 1000
#define PRICE 7

static th_redis redis;

struct fx {
    lock_client *lock;
    market *m;
    market_conn *c;
};

/* ---- helpers ---- */

static redisReply *redis_cmd(const char *fmt, ...) {
    redisContext *rc = redisConnect("127.0.0.1", redis.port);
    assert_non_null(rc);
    assert_int_equal(rc->err, 0);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    redisFree(rc);
    return r;
}

static long long redis_int(const char *fmt, ...) {
    redisContext *rc = redisConnect("127.0.0.1", redis.port);
    assert_non_null(rc);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    redisFree(rc);
    return v;
}

/* A whole number that a string reply holds (HGET). */
static long long redis_num(const char *fmt, ...) {
    redisContext *rc = redisConnect("127.0.0.1", redis.port);
    assert_non_null(rc);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    long long v = atoll(r->str);
    freeReplyObject(r);
    redisFree(rc);
    return v;
}

static struct fx *fx_new(uint32_t ttl_ms, uint32_t stall_ms) {
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    market_config cfg = {.redis_timeout_ms = 2000, .lock_ttl_ms = ttl_ms,
                         .acquire_timeout_ms = 5000, .test_stall_ms = stall_ms};
    int err;
    assert_int_equal(rconn_addr_parse(redis.url, &cfg.redis), RCONN_OK);
    f->lock = lock_redis_new(&cfg.redis, 2000, &err);
    assert_non_null(f->lock);
    f->m = market_new(&cfg, f->lock, &err);
    assert_non_null(f->m);
    f->c = market_conn_new(f->m, &err);
    assert_non_null(f->c);
    return f;
}

static void fx_free(struct fx *f) {
    market_conn_free(f->c);
    market_free(f->m);
    lock_free(f->lock);
    free(f);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The house "game", buyers b0..b<BUYERS-1> with FUNDS each, a poor one and
 * an axe listed on the market. Every key is deleted first. */
static void seed(market_conn *c) {
    redisReply *r = redis_cmd("FLUSHALL");
    freeReplyObject(r);
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "game", "The game", 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "poor", NULL, 3), MARKET_OK);
    for (int i = 0; i < BUYERS; i++) {
        char id[16];
        snprintf(id, sizeof id, "b%d", i);
        assert_int_equal(market_world_add_player(w, id, NULL, FUNDS), MARKET_OK);
    }
    assert_int_equal(market_world_add_listing(w, "poor", "axe", 500), MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
}

static void sale_new(market_conn *c, const char *id, int64_t stock, int64_t limit,
                     int64_t start_ms, int64_t end_ms) {
    market_sale s = {.price = PRICE, .initial = stock, .limit = limit, .start_ms = start_ms,
                     .end_ms = end_ms};
    snprintf(s.id, sizeof s.id, "%s", id);
    snprintf(s.item, sizeof s.item, "potion");
    assert_int_equal(market_sale_create(c, REALM, &s), MARKET_OK);
}

static int64_t funds_of(market_conn *c, const char *id) {
    market_player *p = NULL;
    assert_int_equal(market_player_get(c, REALM, id, &p), MARKET_OK);
    int64_t v = p->funds;
    market_player_free(p);
    return v;
}

/* Units of item in player id's stack (0 when none). */
static int64_t stack_of(market_conn *c, const char *id, const char *item) {
    market_player *p = NULL;
    assert_int_equal(market_player_get(c, REALM, id, &p), MARKET_OK);
    int64_t v = 0;
    for (size_t i = 0; i < p->n_stacks; i++)
        if (strcmp(p->stacks[i].item, item) == 0) v = p->stacks[i].count;
    market_player_free(p);
    return v;
}

static int fx_setup(void **state) {
    struct fx *f = fx_new(5000, 0);
    seed(f->c);
    *state = f;
    return 0;
}

static int fx_teardown(void **state) {
    fx_free(*state);
    return 0;
}

/* Many buys submitted at once (market_order_submit), each answered. */
struct wave {
    market_order *p;
    char (*buyer)[16];
    size_t n;
    atomic_size_t done;
    int64_t *done_ms; /* when each was answered (Unix ms), may be NULL */
};

static void wave_done(market_order *p) {
    struct wave *w = p->ud;
    if (w->done_ms) w->done_ms[p - w->p] = now_ms();
    atomic_fetch_add(&w->done, 1);
}

/* Submits tries buys of quantity 1 for each of BUYERS buyers (interleaved)
 * of sale on m, half of them on m2 when not NULL, all before the first
 * answer can be waited for; waits for every answer. */
static struct wave *wave_start(market *m, market *m2, const char *sale, int tries) {
    struct wave *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->n = (size_t)BUYERS * (size_t)tries;
    w->p = calloc(w->n, sizeof *w->p);
    w->buyer = calloc(BUYERS, sizeof *w->buyer);
    assert_non_null(w->p);
    assert_non_null(w->buyer);
    for (int i = 0; i < BUYERS; i++)
        snprintf(w->buyer[i], sizeof w->buyer[i], "b%d", i);
    for (size_t k = 0; k < w->n; k++) {
        market_order *p = &w->p[k];
        *p = (market_order){.type = MARKET_ORDER_SALE_BUY, .realm = REALM, .sale = sale,
                             .player = w->buyer[k % BUYERS], .quantity = 1,
                             .done = wave_done, .ud = w};
        market *on = m2 && (k % 2) ? m2 : m;
        assert_int_equal(market_order_submit(on, p), MARKET_OK);
    }
    return w;
}

static void wave_wait(struct wave *w) {
    while (atomic_load(&w->done) < w->n)
        sleep_ms(5);
}

static struct wave *wave_run(market *m, market *m2, const char *sale, int tries) {
    struct wave *w = wave_start(m, m2, sale, tries);
    wave_wait(w);
    return w;
}

static void wave_free(struct wave *w) {
    free(w->p);
    free(w->buyer);
    free(w->done_ms);
    free(w);
}

/* Checks the store after a sale of stock units (limit each) that buyers of
 * w fought over: exactly the units answered 200 were sold, none twice, no
 * buyer above the limit, each buyer's funds and stack and the house's funds
 * match what they got, one trade per success. Returns the units sold. */
static int64_t check_exact(market_conn *c, const struct wave *w, const char *sale, int64_t stock,
                           int64_t limit) {
    int64_t got[BUYERS] = {0}, ok = 0;
    for (size_t k = 0; k < w->n; k++) {
        const market_order *p = &w->p[k];
        if (p->rc == MARKET_OK) {
            got[k % BUYERS] += 1;
            ok++;
            assert_true(market_trade_id_valid(p->res.sale_buy.trade_id));
            assert_int_equal(p->res.sale_buy.total, PRICE);
        } else if (p->rc != MARKET_ERR_SOLD_OUT && p->rc != MARKET_ERR_LIMIT_EXCEEDED &&
                   p->rc != MARKET_ERR_SALE_NOT_ACTIVE) {
            fail_msg("buy %zu: unexpected %d (%s)", k, p->rc, market_strerror(p->rc));
        }
    }
    market_sale s;
    assert_int_equal(market_sale_get(c, REALM, sale, &s), MARKET_OK);
    assert_int_equal(s.sold, ok);
    assert_int_equal(s.left + s.sold, stock);
    assert_true(s.sold <= stock);
    market_sale_buyer *v = NULL;
    size_t n = 0;
    assert_int_equal(market_sale_buyers(c, REALM, sale, &v, &n), MARKET_OK);
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        int idx = atoi(v[i].player + 1);
        assert_true(v[i].units <= limit);
        assert_int_equal(v[i].units, got[idx]);
        sum += v[i].units;
    }
    free(v);
    assert_int_equal(sum, ok);
    for (int i = 0; i < BUYERS; i++) {
        assert_int_equal(funds_of(c, w->buyer[i]), FUNDS - got[i] * PRICE);
        assert_int_equal(stack_of(c, w->buyer[i], "potion"), got[i]);
    }
    assert_int_equal(redis_int("XLEN trades:{main}"), ok);
    market_audit_report a;
    assert_int_equal(market_audit(c, REALM, &a), MARKET_OK);
    assert_int_equal(a.total_funds, (int64_t)BUYERS * FUNDS + 3);
    assert_int_equal(a.negative_funds, 0);
    assert_int_equal(a.sales_oversold, 0);
    assert_int_equal(a.sales_unbalanced, 0);
    assert_int_equal(a.units_in_stacks, a.units_sold_by_sales);
    assert_int_equal(a.sale_units_in_stacks, ok);
    return ok;
}

/* ---- tests ---- */

/* 1,000 buyers, three buys each at once, for 100 units with a limit of 2:
 * exactly 100 sold, nobody above 2, everything accounted for. */
static void test_sale_1000_buyers_small_stock_exact(void **state) {
    struct fx *f = *state;
    int64_t t = now_ms();
    sale_new(f->c, "flash", 100, 2, t - 1000, t + 600000);
    /* the sale's lock held while they queue: its worker then serves them in full batches */
    lock_handle h;
    assert_int_equal(lock_acquire(f->lock, "lock:sale:{main}:flash", 60000, 0, &h), LOCK_OK);
    struct wave *w = wave_start(f->m, NULL, "flash", 3);
    assert_int_equal(lock_release(f->lock, &h), LOCK_OK);
    wave_wait(w);
    assert_int_equal(check_exact(f->c, w, "flash", 100, 2), 100);
    assert_int_equal(funds_of(f->c, "game"), 100 * PRICE);
    size_t sold_out = 0;
    for (size_t k = 0; k < w->n; k++)
        sold_out += w->p[k].rc == MARKET_ERR_SOLD_OUT;
    assert_true(sold_out > 0);
    market_stats st;
    market_stats_get(f->m, &st);
    assert_int_equal(st.sale_units, 100);
    assert_true(st.sale_batches < w->n / 4); /* batched: not one lock round trip a buyer
                                                (queued behind the lock: full batches) */
    wave_free(w);
}

/* Two markets over one Redis (two server processes) sell the same sale at
 * once: the lock and WATCH keep it exact. */
static void test_sale_two_markets_same_sale_exact(void **state) {
    struct fx *f = *state;
    struct fx *g = fx_new(5000, 0);
    int64_t t = now_ms();
    sale_new(f->c, "twice", 300, 1, t - 1000, t + 600000);
    struct wave *w = wave_run(f->m, g->m, "twice", 2);
    assert_int_equal(check_exact(f->c, w, "twice", 300, 1), 300);
    assert_int_equal(funds_of(f->c, "game"), 300 * PRICE);
    wave_free(w);
    fx_free(g);
}

/* A sale whose end passes while buyers keep coming: nothing is sold after
 * it by the store's clock (the decision's), trades commit right after their
 * decision, and the units sold are accounted for exactly. */
static void test_sale_end_passes_mid_run_nothing_after(void **state) {
    struct fx *f = *state;
    int64_t t = now_ms();
    int64_t end = t + 300;
    sale_new(f->c, "brief", 100000, 1000, t - 1000, end);
    enum { WAVES = 12 };
    int64_t last_ok_answer = 0, first_refused_sent = 0;
    int64_t got[BUYERS] = {0}, ok = 0;
    for (int wv = 0; wv < WAVES; wv++) {
        struct wave *w = calloc(1, sizeof *w);
        assert_non_null(w);
        w->n = BUYERS / 10;
        w->p = calloc(w->n, sizeof *w->p);
        w->buyer = calloc(BUYERS, sizeof *w->buyer);
        w->done_ms = calloc(w->n, sizeof *w->done_ms);
        int64_t sent = now_ms();
        for (size_t k = 0; k < w->n; k++) {
            snprintf(w->buyer[k], sizeof w->buyer[k], "b%d", (int)k);
            w->p[k] = (market_order){.type = MARKET_ORDER_SALE_BUY, .realm = REALM,
                                     .sale = "brief", .player = w->buyer[k], .quantity = 1,
                                     .done = wave_done, .ud = w};
            assert_int_equal(market_order_submit(f->m, &w->p[k]), MARKET_OK);
        }
        while (atomic_load(&w->done) < w->n)
            sleep_ms(1);
        for (size_t k = 0; k < w->n; k++) {
            if (w->p[k].rc == MARKET_OK) {
                ok++;
                got[k]++;
                if (w->done_ms[k] > last_ok_answer) last_ok_answer = w->done_ms[k];
                market_trade tr;
                assert_int_equal(market_trade_get(f->c, REALM, w->p[k].res.sale_buy.trade_id, &tr),
                                 MARKET_OK);
                /* decided before the end; committed within its batch's round trip */
                assert_true(tr.time_ms <= end + 100);
                assert_true(sent <= end + 5); /* none sent after the end was sold */
            } else {
                assert_int_equal(w->p[k].rc, MARKET_ERR_SALE_NOT_ACTIVE);
                if (!first_refused_sent) first_refused_sent = sent;
            }
        }
        wave_free(w);
        sleep_ms(50);
    }
    assert_true(ok > 0);
    assert_true(first_refused_sent >= end - 100); /* not refused before its end */
    market_sale s;
    assert_int_equal(market_sale_get(f->c, REALM, "brief", &s), MARKET_OK);
    assert_int_equal(s.sold, ok);
    assert_true(s.now_ms >= s.end_ms);
    for (int i = 0; i < BUYERS / 10; i++) {
        char id[16];
        snprintf(id, sizeof id, "b%d", i);
        assert_int_equal(funds_of(f->c, id), FUNDS - got[i] * PRICE);
    }
    assert_int_equal(funds_of(f->c, "game"), ok * PRICE);
}

/* Before its start and from its end a sale sells nothing; an unknown sale
 * is no_sale. */
static void test_sale_not_active_before_start_after_end(void **state) {
    struct fx *f = *state;
    int64_t t = now_ms();
    sale_new(f->c, "later", 10, 2, t + 60000, t + 120000);
    sale_new(f->c, "over", 10, 2, t - 120000, t - 60000);
    market_sale_result r;
    assert_int_equal(market_sale_buy(f->c, REALM, "later", "b1", 1, NULL, &r),
                     MARKET_ERR_SALE_NOT_ACTIVE);
    assert_int_equal(market_sale_buy(f->c, REALM, "over", "b1", 1, NULL, &r),
                     MARKET_ERR_SALE_NOT_ACTIVE);
    assert_int_equal(market_sale_buy(f->c, REALM, "nope", "b1", 1, NULL, &r),
                     MARKET_ERR_NO_SALE);
    market_sale s;
    assert_int_equal(market_sale_get(f->c, REALM, "later", &s), MARKET_OK);
    assert_int_equal(s.left, 10);
    assert_int_equal(s.sold, 0);
    assert_true(s.now_ms < s.start_ms);
    assert_int_equal(market_sale_get(f->c, REALM, "nope", &s), MARKET_ERR_NO_SALE);
    assert_int_equal(funds_of(f->c, "b1"), FUNDS);
    assert_int_equal(redis_int("EXISTS trades:{main}"), 0);
}

/* sold_out says how many are left, limit_exceeded how many more the buyer
 * may buy; insufficient funds, an unknown buyer and the house itself are
 * refused; none of them writes anything. */
static void test_sale_refusals_say_why(void **state) {
    struct fx *f = *state;
    int64_t t = now_ms();
    sale_new(f->c, "few", 5, 3, t - 1000, t + 600000);
    market_sale_result r;
    assert_int_equal(market_sale_buy(f->c, REALM, "few", "b1", 2, NULL, &r), MARKET_OK);
    assert_int_equal(r.quantity, 2);
    assert_int_equal(r.price, PRICE);
    assert_int_equal(r.total, 2 * PRICE);
    assert_int_equal(r.buyer_funds, FUNDS - 2 * PRICE);
    assert_int_equal(r.left, 3);
    market_trade tr;
    assert_int_equal(market_trade_get(f->c, REALM, r.trade_id, &tr), MARKET_OK);
    assert_string_equal(tr.buyer, "b1");
    assert_string_equal(tr.seller, "game");
    assert_string_equal(tr.item, "potion");
    assert_int_equal(tr.quantity, 2);
    assert_int_equal(tr.total, 2 * PRICE);
    assert_true(tr.fence > 0);
    assert_int_equal(market_sale_buy(f->c, REALM, "few", "b1", 2, NULL, &r),
                     MARKET_ERR_LIMIT_EXCEEDED);
    assert_int_equal(r.may_buy, 1);
    assert_int_equal(market_sale_buy(f->c, REALM, "few", "b2", 3, NULL, &r), MARKET_OK);
    assert_int_equal(market_sale_buy(f->c, REALM, "few", "b3", 1, NULL, &r),
                     MARKET_ERR_SOLD_OUT);
    assert_int_equal(r.left, 0);
    sale_new(f->c, "more", 100, 50, t - 1000, t + 600000);
    assert_int_equal(market_sale_buy(f->c, REALM, "more", "poor", 1, NULL, &r),
                     MARKET_ERR_INSUFFICIENT_FUNDS);
    assert_int_equal(market_sale_buy(f->c, REALM, "more", "ghost", 1, NULL, &r),
                     MARKET_ERR_NO_PLAYER);
    assert_int_equal(market_sale_buy(f->c, REALM, "more", "game", 1, NULL, &r),
                     MARKET_ERR_INVALID);
    assert_int_equal(market_sale_buy(f->c, REALM, "more", "b4", 0, NULL, &r),
                     MARKET_ERR_INVALID);
    assert_int_equal(funds_of(f->c, "poor"), 3);
    assert_int_equal(funds_of(f->c, "game"), 5 * PRICE);
    assert_int_equal(redis_int("XLEN trades:{main}"), 2);
    assert_int_equal(redis_num("HGET sale:{main}:more stock"), 100);
    assert_int_equal(redis_int("EXISTS sale:{main}:more:bought"), 0);
}

/* A retry under the same idempotency key is charged once and answers the
 * same trade; a refusal replays as a refusal, even once it would pass. */
static void test_sale_idempotent_retry_charged_once(void **state) {
    struct fx *f = *state;
    int64_t t = now_ms();
    sale_new(f->c, "idem", 10, 5, t - 1000, t + 600000);
    market_idem k = {"order-1", "fp-a"};
    market_sale_result r, again;
    assert_int_equal(market_sale_buy(f->c, REALM, "idem", "b1", 3, &k, &r), MARKET_OK);
    assert_int_equal(market_sale_buy(f->c, REALM, "idem", "b1", 3, &k, &again), MARKET_OK);
    assert_int_equal(again.replayed, 1);
    assert_string_equal(again.trade_id, r.trade_id);
    assert_int_equal(again.total, 3 * PRICE);
    assert_int_equal(again.buyer_funds, FUNDS - 3 * PRICE);
    assert_int_equal(funds_of(f->c, "b1"), FUNDS - 3 * PRICE);
    assert_int_equal(stack_of(f->c, "b1", "potion"), 3);
    market_idem other = {"order-1", "fp-b"};
    assert_int_equal(market_sale_buy(f->c, REALM, "idem", "b1", 3, &other, &again),
                     MARKET_ERR_IDEM_MISMATCH);
    market_idem big = {"order-2", "fp-c"};
    assert_int_equal(market_sale_buy(f->c, REALM, "idem", "b1", 3, &big, &again),
                     MARKET_ERR_LIMIT_EXCEEDED);
    assert_int_equal(again.may_buy, 2);
    assert_int_equal(market_sale_buy(f->c, REALM, "idem", "b1", 3, &big, &again),
                     MARKET_ERR_LIMIT_EXCEEDED);
    assert_int_equal(again.replayed, 1);
    assert_int_equal(again.may_buy, 2);
    assert_int_equal(redis_int("XLEN trades:{main}"), 1);
    /* twelve repeats of one request at once: one trade */
    market_idem rep = {"order-3", "fp-d"};
    market_order p[12];
    struct wave w = {.p = p, .n = 12};
    for (int i = 0; i < 12; i++) {
        p[i] = (market_order){.type = MARKET_ORDER_SALE_BUY, .realm = REALM, .sale = "idem",
                               .player = "b2", .quantity = 1, .idem = &rep,
                               .done = wave_done, .ud = &w};
        assert_int_equal(market_order_submit(f->m, &p[i]), MARKET_OK);
    }
    while (atomic_load(&w.done) < w.n)
        sleep_ms(2);
    for (int i = 0; i < 12; i++) {
        if (p[i].rc == MARKET_ERR_IN_PROGRESS) continue;
        assert_int_equal(p[i].rc, MARKET_OK);
        assert_string_equal(p[i].res.sale_buy.trade_id, p[0].res.sale_buy.trade_id);
    }
    assert_int_equal(funds_of(f->c, "b2"), FUNDS - PRICE);
    assert_int_equal(redis_int("XLEN trades:{main}"), 2);
}

/* A sale worker stalled between its read and its commit past its lease
 * cannot commit: lease_lost, nothing written. */
static void test_sale_holder_stalled_past_lease_cannot_commit(void **state) {
    struct fx *f = *state;
    int64_t t = now_ms();
    sale_new(f->c, "slow", 10, 5, t - 1000, t + 600000);
    struct fx *slow = fx_new(100, 300);
    market_sale_result r;
    assert_int_equal(market_sale_buy(slow->c, REALM, "slow", "b1", 1, NULL, &r),
                     MARKET_ERR_LEASE_LOST);
    fx_free(slow);
    assert_int_equal(funds_of(f->c, "b1"), FUNDS);
    assert_int_equal(redis_num("HGET sale:{main}:slow stock"), 10);
    assert_int_equal(redis_int("EXISTS trades:{main}"), 0);
    assert_int_equal(market_sale_buy(f->c, REALM, "slow", "b1", 1, NULL, &r), MARKET_OK);
}

/* Creating: an existing id is a duplicate, the house must be a player,
 * arguments are checked; nothing is written for a refusal. */
static void test_sale_create_checks(void **state) {
    struct fx *f = *state;
    int64_t t = now_ms();
    sale_new(f->c, "s1", 10, 2, t, t + 1000);
    market_sale s = {.id = "s1", .item = "potion", .price = 1, .initial = 5, .limit = 1,
                     .start_ms = t, .end_ms = t + 10};
    assert_int_equal(market_sale_create(f->c, REALM, &s), MARKET_ERR_DUPLICATE);
    snprintf(s.id, sizeof s.id, "s2");
    snprintf(s.house, sizeof s.house, "nobody");
    assert_int_equal(market_sale_create(f->c, REALM, &s), MARKET_ERR_NO_PLAYER);
    snprintf(s.house, sizeof s.house, "poor");
    s.limit = 6;
    assert_int_equal(market_sale_create(f->c, REALM, &s), MARKET_ERR_INVALID);
    assert_int_equal(redis_int("EXISTS sale:{main}:s2"), 0);
    s.limit = 5;
    assert_int_equal(market_sale_create(f->c, REALM, &s), MARKET_OK);
    market_sale g;
    assert_int_equal(market_sale_get(f->c, REALM, "s2", &g), MARKET_OK);
    assert_string_equal(g.house, "poor");
    assert_string_equal(g.item, "potion");
    assert_int_equal(g.initial, 5);
    assert_int_equal(g.left, 5);
    assert_int_equal(g.limit, 5);
    assert_int_equal(g.end_ms, t + 10);
}

/* bin/market-seed --sale ($MARKET_SEED_BIN) creates a running sale straight in the store,
 * refuses the same id again (exit 1) and a bad spec (exit 2). */
static void test_seed_tool_sale(void **state) {
    struct fx *f = *state;
    const char *bin = getenv("MARKET_SEED_BIN");
    if (!bin || !*bin) bin = "bin/market-seed";
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "%s --redis %s --sale id=demo,item=potion,stock=30,price=7,limit=4,hours=2 "
             "| grep -q '^created sale demo of realm main'",
             bin, redis.url);
    assert_int_equal(system(cmd), 0);
    market_sale s;
    assert_int_equal(market_sale_get(f->c, REALM, "demo", &s), MARKET_OK);
    assert_string_equal(s.item, "potion");
    assert_int_equal(s.initial, 30);
    assert_int_equal(s.left, 30);
    assert_int_equal(s.price, 7);
    assert_int_equal(s.limit, 4);
    assert_string_equal(s.house, "game");
    assert_int_equal(s.end_ms - s.start_ms, 2 * 3600000);
    assert_true(s.now_ms >= s.start_ms && s.now_ms < s.end_ms); /* running */
    snprintf(cmd, sizeof cmd, "%s --redis %s --sale id=demo,item=potion,stock=3,price=7 2>/dev/null",
             bin, redis.url);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    snprintf(cmd, sizeof cmd,
             "%s --redis %s --sale id=x,item=potion,stock=3,price=7,limit=4 2>/dev/null", bin,
             redis.url);
    st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2); /* limit above the stock */
}

int main(void) {
    if (th_redis_start(&redis) < 0) {
        fprintf(stderr, "cannot start redis-server\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sale_1000_buyers_small_stock_exact, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_sale_two_markets_same_sale_exact, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_sale_end_passes_mid_run_nothing_after, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_sale_not_active_before_start_after_end, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_sale_refusals_say_why, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_sale_idempotent_retry_charged_once, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_sale_holder_stalled_past_lease_cannot_commit,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_sale_create_checks, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_seed_tool_sale, fx_setup, fx_teardown),
    };
    int rc = cmocka_run_group_tests_name("market flash sales (integration)", tests, NULL, NULL);
    th_redis_stop(&redis);
    return rc;
}
