/* test_sweep_faults.c - endings settled exactly once while the servers that
 * settle them fail.
 *
 * Under each strategy: 20 sellers' 10,000 listings (5,000 unique items and
 * 5,000 lots of 10 units) fall due within the same six seconds, and so do
 * 10,000 auctions of gems, half of them with a bid; three market-server
 * processes (sweep leases of 1 s, a sweep every 50 ms) settle them while,
 * every half second, one of them is killed (-9) and started again, or
 * paused (SIGSTOP) past its lease and resumed. When every end is gone the
 * store is audited: every item back with its seller (or with the highest
 * bidder) and in one place, every unit back in its seller's stack and none
 * twice (an ending of a lot settled twice would add its 10 units again), no
 * listing, index entry, open auction or escrow left, and every seller paid
 * its sold auctions' bids exactly once.
 *
 * And 200 bidders on one auction, over HTTP across the three servers, until it
 * ends: the highest bid taken wins, the item and the funds where they
 * belong, every other bidder's escrow back.
 */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <hiredis.h>

#include "tests/helpers/cmocka_all.h"

#include <jansson.h>

#include "lock/lock.h"
#include "market/market.h"
#include "rconn/rconn.h"
#include "tests/helpers/http_client.h"
#include "tests/helpers/redis_proc.h"
#include "tests/helpers/server_proc.h"

#define REALM MARKET_REALM_DEFAULT
#define SERVERS 3
#define SELLERS 20
#define ITEMS 5000 /* unique items listed, and as many lots of units */
#define LOT 10     /* units a lot */
#define FUNDS 1000
#define AUCTIONS 10000 /* gems auctioned, each by seller s<i mod SELLERS> */
#define BIDDERS 20
#define BIDDER_FUNDS 100000
#define SETTLE_MS 180000 /* the most the test waits for every ending */

static th_redis redis;

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static long long num(redisContext *rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    long long v = r->type == REDIS_REPLY_INTEGER  ? r->integer
                  : r->type == REDIS_REPLY_STRING ? atoll(r->str)
                                                  : 0;
    freeReplyObject(r);
    return v;
}

/* Seeds the sellers and their listings, then gives every listing an end in the two
 * seconds from start_ms, as lists with durations would have (the store's keys). */
static void seed(market_conn *c, redisContext *rc) {
    market_world *w = market_world_new();
    assert_non_null(w);
    char id[16], item[24];
    for (int s = 0; s < SELLERS; s++) {
        snprintf(id, sizeof id, "s%d", s);
        assert_int_equal(market_world_add_player(w, id, NULL, FUNDS), MARKET_OK);
    }
    for (int b = 0; b < BIDDERS; b++) {
        snprintf(id, sizeof id, "b%d", b);
        assert_int_equal(market_world_add_player(w, id, NULL, BIDDER_FUNDS), MARKET_OK);
    }
    for (int i = 0; i < AUCTIONS; i++) {
        snprintf(id, sizeof id, "s%d", i % SELLERS);
        snprintf(item, sizeof item, "gem%d", i);
        assert_int_equal(market_world_add_item(w, id, item), MARKET_OK);
    }
    for (int i = 0; i < ITEMS; i++) {
        snprintf(id, sizeof id, "s%d", i % SELLERS);
        snprintf(item, sizeof item, "sword%d", i);
        assert_int_equal(market_world_add_listing(w, id, item, 100 + i % 50), MARKET_OK);
        snprintf(item, sizeof item, "ore%d", i);
        assert_int_equal(market_world_add_stack(w, id, item, LOT), MARKET_OK);
        assert_int_equal(market_world_add_units_listing(w, id, item, 7, LOT), MARKET_OK);
    }
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    redisReply *t = redisCommand(rc, "TIME");
    assert_non_null(t);
    long long now = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    freeReplyObject(t);
    long long start = now + 4000;
    for (int i = 0; i < ITEMS; i++) {
        redisAppendCommand(rc, "ZADD market:{main}:ends %lld sword%d.s%d %lld ore%d.s%d",
                           start + (i * 6000LL) / ITEMS, i, i % SELLERS,
                           start + (i * 6000LL) / ITEMS, i, i % SELLERS);
    }
    for (int i = 0; i < ITEMS; i++) {
        redisReply *r = NULL;
        assert_int_equal(redisGetReply(rc, (void **)&r), REDIS_OK);
        assert_int_equal(r->type, REDIS_REPLY_INTEGER);
        freeReplyObject(r);
    }
    assert_int_equal(num(rc, "ZCARD market:{main}:ends"), 2 * ITEMS);
    (void)num(rc, "SADD market:{.ending}:realms main");
}

/* Orders handed to the market at once, and the wait for their outcomes. */
#define WINDOW 256
struct window {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t left;
    market_order o[WINDOW];
    char player[WINDOW][16], item[WINDOW][24];
};

static void window_done(market_order *o) {
    struct window *w = o->ud;
    pthread_mutex_lock(&w->mu);
    w->left--;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Submits w's first n orders (market_order_submit()) and waits for every outcome. */
static void window_run(market *m, struct window *w, size_t n) {
    w->left = n;
    for (size_t k = 0; k < n; k++) {
        w->o[k].done = window_done;
        w->o[k].ud = w;
        assert_int_equal(market_order_submit(m, &w->o[k]), MARKET_OK);
    }
    pthread_mutex_lock(&w->mu);
    while (w->left)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

/* Auctions every gem for 6 s (so they end while the listings do), WINDOW at a time, and
 * bids on every other one; what each auction was bid is kept in bid[] (0: none taken). */
static void auction_gems(market *m, int64_t *bid) {
    static struct window w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
    static int64_t id[AUCTIONS];
    for (int at = 0; at < AUCTIONS; at += WINDOW) {
        size_t n = AUCTIONS - at < WINDOW ? (size_t)(AUCTIONS - at) : WINDOW;
        for (size_t k = 0; k < n; k++) {
            int i = at + (int)k;
            snprintf(w.player[k], sizeof w.player[k], "s%d", i % SELLERS);
            snprintf(w.item[k], sizeof w.item[k], "gem%d", i);
            w.o[k] = (market_order){.type = MARKET_ORDER_AUCTION,
                                    .realm = REALM,
                                    .player = w.player[k],
                                    .item = w.item[k],
                                    .price = 10,
                                    .step = 1,
                                    .duration_s = 6};
        }
        window_run(m, &w, n);
        for (size_t k = 0; k < n; k++) {
            assert_int_equal(w.o[k].rc, MARKET_OK);
            id[at + (int)k] = w.o[k].res.auction.a.id;
        }
    }
    for (int at = 0; at < AUCTIONS; at += 2 * WINDOW) {
        size_t n = 0;
        for (int i = at; i < AUCTIONS && i < at + 2 * WINDOW; i += 2, n++) {
            snprintf(w.player[n], sizeof w.player[n], "b%d", i % BIDDERS);
            w.o[n] = (market_order){.type = MARKET_ORDER_AUCTION_BID,
                                    .realm = REALM,
                                    .player = w.player[n],
                                    .id = id[i],
                                    .price = 10 + i % 7};
        }
        window_run(m, &w, n);
        for (size_t k = 0; k < n; k++) {
            int rc = w.o[k].rc, i = at + 2 * (int)k;
            assert_true(rc == MARKET_OK || rc == MARKET_ERR_AUCTION_CLOSED); /* a slow machine */
            bid[i] = rc == MARKET_OK ? w.o[k].price : 0;
        }
    }
}

static pid_t spawn(int *port, const char *strategy) {
    *port = th_free_port();
    const char *flags[] = {"--strategy",
                           strategy,
                           "--lock-ttl-ms",
                           "1000",
                           "--sweep-lease-ms",
                           "1000",
                           "--sweep-interval-ms",
                           "50",
                           "--acquire-timeout-ms",
                           "3000",
                           NULL};
    pid_t p = th_server_spawn(*port, redis.url, flags);
    assert_true(p > 0);
    assert_int_equal(th_server_healthy(*port, 20000), 0);
    return p;
}

static void test_endings_settled_once_while_servers_fail(void **state) {
    const char *strategy = *state;
    redisContext *rc = redisConnect("127.0.0.1", redis.port);
    assert_non_null(rc);
    assert_int_equal(rc->err, 0);
    (void)num(rc, "FLUSHALL");
    market_config cfg = {.redis_timeout_ms = 5000, .lock_ttl_ms = 5000, .acquire_timeout_ms = 5000};
    assert_int_equal(rconn_addr_parse(redis.url, &cfg.redis), RCONN_OK);
    int err;
    lock_client *l = lock_local_new(&err);
    market *m = market_new(&cfg, l, &err);
    market_conn *c = market_conn_new(m, &err);
    assert_non_null(c);
    seed(c, rc);
    static int64_t bid[AUCTIONS];
    memset(bid, 0, sizeof bid);
    auction_gems(m, bid);

    pid_t pid[SERVERS];
    int port[SERVERS];
    for (int i = 0; i < SERVERS; i++)
        pid[i] = spawn(&port[i], strategy);
    int64_t t0 = rconn_now_ms();
    int kills = 0, pauses = 0;
    long long left = 2 * ITEMS;
    for (int round = 0; (left = num(rc, "ZCARD market:{main}:ends")) > 0; round++) {
        assert_true(rconn_now_ms() - t0 < SETTLE_MS);
        int i = round % SERVERS;
        if (round % 2 == 0) { /* killed mid-sweep, whatever it was doing, and started again */
            kill(pid[i], SIGKILL);
            assert_int_equal(waitpid(pid[i], NULL, 0), pid[i]);
            pid[i] = spawn(&port[i], strategy);
            kills++;
            sleep_ms(500);
        } else { /* paused past its lease, then resumed */
            kill(pid[i], SIGSTOP);
            sleep_ms(1500);
            kill(pid[i], SIGCONT);
            pauses++;
        }
    }
    int64_t took = rconn_now_ms() - t0;
    for (int i = 0; i < SERVERS; i++) {
        kill(pid[i], SIGTERM);
        assert_int_equal(waitpid(pid[i], NULL, 0), pid[i]);
    }

    market_audit_report a;
    assert_int_equal(market_audit(c, REALM, &a), MARKET_OK);
    int64_t paid[SELLERS] = {0}, sold = 0;
    for (int i = 0; i < AUCTIONS; i++) {
        paid[i % SELLERS] += bid[i];
        sold += bid[i] != 0;
    }
    fprintf(stderr,
            "# %s: %d listings' and %d auctions' endings (%lld sold) settled in %lld ms, %d kills "
            "and %d pauses; %zu items held, %lld units in stacks\n",
            strategy, 2 * ITEMS, AUCTIONS, (long long)sold, (long long)took, kills, pauses,
            a.items_held, (long long)a.units_in_stacks);
    assert_int_equal(a.items_listed, 0);
    assert_int_equal(a.items_held, ITEMS + AUCTIONS);
    assert_int_equal(a.auctions, 0);
    assert_int_equal(a.auctions_unreadable, 0);
    assert_int_equal(a.total_escrow, 0);
    assert_int_equal(a.negative_escrow, 0);
    assert_int_equal(a.items_misplaced, 0);
    assert_int_equal(a.units_listed, 0);
    assert_int_equal(a.units_in_stacks, (int64_t)ITEMS * 2 * LOT); /* held, and what came back */
    assert_int_equal(a.index_mismatch, 0);
    assert_int_equal(a.total_funds, (int64_t)SELLERS * FUNDS + (int64_t)BIDDERS * BIDDER_FUNDS);
    assert_int_equal(a.negative_funds, 0);
    for (int s = 0; s < SELLERS; s++) /* each sold auction paid once */
        assert_int_equal(num(rc, "HGET users:{main}:s%d funds", s), FUNDS + paid[s]);
    for (int i = 0; i < AUCTIONS; i += 13) { /* with the highest bidder, or back */
        if (bid[i])
            assert_int_equal(num(rc, "SISMEMBER inventory:{main}:b%d gem%d", i % BIDDERS, i), 1);
        else
            assert_int_equal(num(rc, "SISMEMBER inventory:{main}:s%d gem%d", i % SELLERS, i), 1);
    }
    for (int i = 0; i < ITEMS; i += 97) { /* each with its own seller */
        assert_int_equal(num(rc, "SISMEMBER inventory:{main}:s%d sword%d", i % SELLERS, i), 1);
        assert_int_equal(num(rc, "HGET stacks:{main}:s%d ore%d", i % SELLERS, i), 2 * LOT);
    }
    market_conn_free(c);
    market_free(m);
    lock_free(l);
    redisFree(rc);
}

#define HOT_BIDDERS 200 /* b0..b199, HOT_THREADS threads of HOT_BIDDERS / HOT_THREADS each */
#define HOT_THREADS 50

struct hot {
    int ports[SERVERS];
    int64_t id; /* the auction */
};

struct hot_thread {
    struct hot *h;
    int t;
    int taken;      /* its 200s */
    int64_t top;    /* the highest bid of its a 200 took (0: none) */
    int top_bidder; /* and whose */
};

/* Thread t's bidders b<t*4..t*4+3> bid in turn, each bid the least the auction takes (or
 * more), on the servers in turn, until the auction answers auction_closed. */
static void *hot_bidding(void *arg) {
    struct hot_thread *x = arg;
    struct hot *h = x->h;
    int64_t amount = 10 + x->t % 7;
    for (int k = 0;; k++) {
        int who = x->t * (HOT_BIDDERS / HOT_THREADS) + k % (HOT_BIDDERS / HOT_THREADS);
        char path[64], body[96];
        snprintf(path, sizeof path, "/auctions/%lld/bid", (long long)h->id);
        snprintf(body, sizeof body, "{\"bidder\":\"b%d\",\"amount\":%lld}", who, (long long)amount);
        th_http r;
        if (th_http_do(h->ports[(x->t + k) % SERVERS], "POST", path, body, strlen(body), &r) < 0)
            continue;
        json_t *j = r.body ? json_loads(r.body, 0, NULL) : NULL;
        const char *err = json_string_value(json_object_get(j, "error"));
        if (r.status == 200) {
            x->taken++;
            x->top = amount; /* its bids grow */
            x->top_bidder = who;
            amount += 1 + x->t % 5;
        } else if (r.status == 409 && err && strcmp(err, "bid_too_low") == 0) {
            amount = json_integer_value(json_object_get(j, "min_bid")) + x->t % 5;
        }
        int closed = r.status == 409 && err && strcmp(err, "auction_closed") == 0;
        assert_true(r.status == 200 || r.status == 409 || r.status == 503);
        json_decref(j);
        th_http_cleanup(&r);
        if (closed) break;
    }
    return NULL;
}

/* 200 bidders on one auction across three servers until it ends (see the top). */
static void test_200_bidders_highest_wins(void **state) {
    const char *strategy = *state;
    redisContext *rc = redisConnect("127.0.0.1", redis.port);
    assert_non_null(rc);
    (void)num(rc, "FLUSHALL");
    market_config cfg = {.redis_timeout_ms = 5000, .lock_ttl_ms = 5000, .acquire_timeout_ms = 5000};
    assert_int_equal(rconn_addr_parse(redis.url, &cfg.redis), RCONN_OK);
    int err;
    lock_client *l = lock_local_new(&err);
    market *m = market_new(&cfg, l, &err);
    market_conn *c = market_conn_new(m, &err);
    assert_non_null(c);
    market_world *w = market_world_new();
    assert_non_null(w);
    char id[16];
    assert_int_equal(market_world_add_player(w, "s0", NULL, 0), MARKET_OK);
    assert_int_equal(market_world_add_item(w, "s0", "crown"), MARKET_OK);
    for (int i = 0; i < HOT_BIDDERS; i++) {
        snprintf(id, sizeof id, "b%d", i);
        assert_int_equal(market_world_add_player(w, id, NULL, BIDDER_FUNDS), MARKET_OK);
    }
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    struct hot h = {0};
    pid_t pid[SERVERS];
    for (int i = 0; i < SERVERS; i++)
        pid[i] = spawn(&h.ports[i], strategy);
    market_order o = {.type = MARKET_ORDER_AUCTION,
                      .realm = REALM,
                      .player = "s0",
                      .item = "crown",
                      .price = 10,
                      .step = 1,
                      .duration_s = 3};
    assert_int_equal(market_order_run(c, &o), MARKET_OK);
    h.id = o.res.auction.a.id;
    struct hot_thread x[HOT_THREADS];
    pthread_t t[HOT_THREADS];
    for (int i = 0; i < HOT_THREADS; i++) {
        x[i] = (struct hot_thread){&h, i, 0, 0, 0};
        assert_int_equal(pthread_create(&t[i], NULL, hot_bidding, &x[i]), 0);
    }
    int taken = 0, top_bidder = -1;
    int64_t top = 0;
    for (int i = 0; i < HOT_THREADS; i++) {
        pthread_join(t[i], NULL);
        taken += x[i].taken;
        if (x[i].top > top) {
            top = x[i].top;
            top_bidder = x[i].top_bidder;
        }
    }
    market_auction a = {0};
    for (int i = 0; i < 3000; i++) { /* the sweeper settles it */
        assert_int_equal(market_auction_get(c, REALM, h.id, &a), MARKET_OK);
        if (a.state != MARKET_AUCTION_OPEN) break;
        sleep_ms(10);
    }
    for (int i = 0; i < SERVERS; i++) {
        kill(pid[i], SIGTERM);
        assert_int_equal(waitpid(pid[i], NULL, 0), pid[i]);
    }
    fprintf(stderr, "# %s: %d bids taken of %d bidders across %d servers; %s won at %lld\n",
            strategy, taken, HOT_BIDDERS, SERVERS, a.bidder, (long long)a.bid);
    assert_int_equal(a.state, MARKET_AUCTION_SOLD);
    assert_int_equal(a.bids, taken);
    assert_int_equal(a.bid, top); /* the highest bid taken won */
    snprintf(id, sizeof id, "b%d", top_bidder);
    assert_string_equal(a.bidder, id);
    assert_int_equal(num(rc, "SISMEMBER inventory:{main}:%s crown", a.bidder), 1);
    assert_int_equal(num(rc, "HGET users:{main}:s0 funds"), a.bid);
    for (int i = 0; i < HOT_BIDDERS; i++) { /* every other bid went back */
        snprintf(id, sizeof id, "b%d", i);
        int won = strcmp(id, a.bidder) == 0;
        assert_int_equal(num(rc, "HGET users:{main}:%s funds", id),
                         BIDDER_FUNDS - (won ? a.bid : 0));
        assert_int_equal(num(rc, "HGET users:{main}:%s escrow", id), 0);
    }
    market_conn_free(c);
    market_free(m);
    lock_free(l);
    redisFree(rc);
}

static int group_setup(void **state) {
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return th_redis_start(&redis);
}

static int group_teardown(void **state) {
    (void)state;
    th_redis_stop(&redis);
    curl_global_cleanup();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        {"test_endings_settled_once_while_servers_fail[market]",
         test_endings_settled_once_while_servers_fail, NULL, NULL, (void *)"market"},
        {"test_endings_settled_once_while_servers_fail[item]",
         test_endings_settled_once_while_servers_fail, NULL, NULL, (void *)"item"},
        {"test_endings_settled_once_while_servers_fail[optimistic]",
         test_endings_settled_once_while_servers_fail, NULL, NULL, (void *)"optimistic"},
        {"test_200_bidders_highest_wins[market]", test_200_bidders_highest_wins, NULL, NULL,
         (void *)"market"},
        {"test_200_bidders_highest_wins[item]", test_200_bidders_highest_wins, NULL, NULL,
         (void *)"item"},
        {"test_200_bidders_highest_wins[optimistic]", test_200_bidders_highest_wins, NULL, NULL,
         (void *)"optimistic"},
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
