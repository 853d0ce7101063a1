/* test_market_world.c - market/'s readers and writers for tools against a real
 * redis-server: market_players_scan() (players and funds, over many SCAN pages, filtered,
 * through AUTH and SELECT), market_store_info() (the store's counters), and
 * market_world_store() writing and resetting a large world in bounded steps, the realm
 * refused while a seed is under way or was stopped half-way.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"
#include "rconn/rconn.h"
#include "market/market.h"
#include "tests/helpers/redis_proc.h"

#define REALM MARKET_REALM_DEFAULT /* the realm these tests use */

#define MANY 2500 /* players: several SCAN pages (COUNT 1000) */

static th_redis redis;

struct fx {
    lock_client *lock;
    market *m;
    market_conn *c;
};

/* ---- helpers ---- */

static void fx_open(struct fx *f, const char *url) {
    market_config cfg = {.redis_timeout_ms = 5000, .lock_ttl_ms = 1000, .acquire_timeout_ms = 1000};
    assert_int_equal(rconn_addr_parse(url, &cfg.redis), RCONN_OK);
    int err = 0;
    assert_non_null(f->lock = lock_local_new(&err));
    assert_non_null(f->m = market_new(&cfg, f->lock, &err));
    assert_non_null(f->c = market_conn_new(f->m, &err));
}

static void fx_close(struct fx *f) {
    market_conn_free(f->c);
    market_free(f->m);
    lock_free(f->lock);
    memset(f, 0, sizeof *f);
}

/* Player i of a world of n: id "p<i>", funds 3 * i + 1 (each its own). */
static int64_t funds_of(size_t i) {
    return 3 * (int64_t)i + 1;
}

/* Replaces the store with n players p0.. (funds_of) and one listing. */
static void seed_players(market_conn *c, size_t n) {
    market_world *w = market_world_new();
    assert_non_null(w);
    char id[32];
    for (size_t i = 0; i < n; i++) {
        snprintf(id, sizeof id, "p%zu", i);
        assert_int_equal(market_world_add_player(w, id, NULL, funds_of(i)), MARKET_OK);
    }
    assert_int_equal(market_world_add_listing(w, "p0", "axe", 5), MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
}

/* Runs one command on the test's redis-server, without market/. */
static void raw(const char *const *argv, int argc) {
    redisContext *r = redisConnect("127.0.0.1", redis.port);
    assert_true(r && !r->err);
    redisReply *rep = redisCommandArgv(r, argc, (const char **)argv, NULL);
    assert_non_null(rep);
    assert_int_not_equal(rep->type, REDIS_REPLY_ERROR);
    freeReplyObject(rep);
    redisFree(r);
}

/* Checks that got[0..n) are exactly the players p<i> (i < world) whose id
 * matches match (NULL: all), each once and with its own funds. */
static void assert_players(const market_player_funds *got, size_t n, size_t world,
                           const char *match) {
    unsigned char *seen = calloc(world, 1);
    assert_non_null(seen);
    for (size_t k = 0; k < n; k++) {
        char *end;
        assert_int_equal(got[k].id[0], 'p');
        unsigned long i = strtoul(got[k].id + 1, &end, 10);
        assert_true(*end == '\0' && i < world);
        if (seen[i]) fail_msg("player %s read twice", got[k].id);
        seen[i] = 1;
        assert_true(got[k].funds == funds_of(i));
    }
    size_t want = 0;
    char id[32];
    for (size_t i = 0; i < world; i++) {
        snprintf(id, sizeof id, "p%zu", i);
        if (!match || fnmatch(match, id, 0) == 0) {
            want++;
            if (!seen[i]) fail_msg("player %s not read", id);
        }
    }
    assert_int_equal(n, want);
    free(seen);
}

/* Opens f on the test's store with cfg.test_seed_steps = steps (0: no hook). */
static void fx_open_steps(struct fx *f, uint32_t steps) {
    market_config cfg = {.redis_timeout_ms = 5000, .lock_ttl_ms = 1000, .acquire_timeout_ms = 1000,
                         .test_seed_steps = steps};
    assert_int_equal(rconn_addr_parse(redis.url, &cfg.redis), RCONN_OK);
    int err = 0;
    assert_non_null(f->lock = lock_local_new(&err));
    assert_non_null(f->m = market_new(&cfg, f->lock, &err));
    assert_non_null(f->c = market_conn_new(f->m, &err));
}

#define BIG_PLAYERS 300
#define BIG_LISTINGS 30000 /* four entries each (market, units or not, two indexes): ~30 steps */
#define STEP_MOST (2048 + 256) /* a step's keys and fields, at most (market_world.c) */

/* A world of BIG_PLAYERS players (funds 1000 each) and BIG_LISTINGS listings. */
static market_world *big_world(void) {
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_generate(w, BIG_PLAYERS, BIG_LISTINGS, 1000, 1, 1000, 7),
                     MARKET_OK);
    return w;
}

/* Runs argv on the test's redis-server and returns its integer reply. */
static long long raw_int(const char *const *argv, int argc) {
    redisContext *r = redisConnect("127.0.0.1", redis.port);
    assert_true(r && !r->err);
    redisReply *rep = redisCommandArgv(r, argc, (const char **)argv, NULL);
    assert_non_null(rep);
    assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
    long long v = rep->integer;
    freeReplyObject(rep);
    redisFree(r);
    return v;
}

static long long dbsize(void) {
    const char *argv[] = {"DBSIZE"};
    return raw_int(argv, 1);
}

static void flushall(void) {
    const char *argv[] = {"FLUSHALL"};
    raw(argv, 1);
}

/* Checks that every kind of operation of REALM is refused while it is being seeded. */
static void assert_realm_refused(market_conn *c) {
    market_listing *l = NULL;
    size_t n = 0, total = 0;
    assert_int_equal(market_listings(c, REALM, 0, 10, &l, &n, &total),
                     MARKET_ERR_REALM_UNAVAILABLE);
    assert_null(l);
    assert_non_null(strstr(market_conn_errstr(c), "being seeded"));
    market_player *p = NULL;
    assert_int_equal(market_player_get(c, REALM, "p0", &p), MARKET_ERR_REALM_UNAVAILABLE);
    assert_null(p);
    market_purchase_result r;
    assert_int_equal(market_purchase(c, REALM, "p1", "p0", "i0", 0, &r),
                     MARKET_ERR_REALM_UNAVAILABLE);
    assert_int_equal(market_list(c, REALM, "p1", "i1", 5), MARKET_ERR_REALM_UNAVAILABLE);
    /* a batch reads the mark in its leases' MGET, or by an EXISTS when it holds none */
    static const enum market_strategy others[] = {MARKET_STRATEGY_ITEM, MARKET_STRATEGY_OPTIMISTIC};
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
        market_config cfg = {.redis_timeout_ms = 5000,
                             .lock_ttl_ms = 1000,
                             .acquire_timeout_ms = 1000,
                             .strategy = others[i]};
        assert_int_equal(rconn_addr_parse(redis.url, &cfg.redis), RCONN_OK);
        int err = 0;
        lock_client *lock = lock_local_new(&err);
        market *m = market_new(&cfg, lock, &err);
        market_conn *o = m ? market_conn_new(m, &err) : NULL;
        assert_non_null(o);
        assert_int_equal(market_purchase(o, REALM, "p1", "p0", "i0", 0, &r),
                         MARKET_ERR_REALM_UNAVAILABLE);
        market_conn_free(o);
        market_free(m);
        lock_free(lock);
    }
}

/* Checks that REALM holds the big world, whole, and is served. */
static void assert_big_world(market_conn *c) {
    market_audit_report a;
    assert_int_equal(market_audit(c, REALM, &a), MARKET_OK);
    assert_int_equal(a.players, BIG_PLAYERS);
    assert_int_equal(a.total_funds, 1000 * BIG_PLAYERS);
    assert_int_equal(a.items_listed, BIG_LISTINGS);
    assert_int_equal(a.items_held, 0);
    assert_int_equal(a.index_mismatch, 0);
    assert_int_equal(a.items_misplaced, 0);
    market_listing *l = NULL;
    size_t n = 0, total = 0;
    assert_int_equal(market_listings(c, REALM, 0, 10, &l, &n, &total), MARKET_OK);
    assert_int_equal(total, BIG_LISTINGS);
    free(l);
}

static int fx_setup(void **state) {
    struct fx *f = calloc(1, sizeof *f);
    if (!f) return -1;
    fx_open(f, redis.url);
    *state = f;
    return 0;
}

static int fx_teardown(void **state) {
    struct fx *f = *state;
    fx_close(f);
    free(f);
    return 0;
}

/* ---- market_players_scan ---- */

static void test_players_scan_reads_every_player_once_with_funds(void **state) {
    struct fx *f = *state;
    seed_players(f->c, MANY);
    market_player_funds *got = NULL;
    size_t n = 0;
    assert_int_equal(market_players_scan(f->c, REALM, NULL, &got, &n), MARKET_OK);
    assert_players(got, n, MANY, NULL);
    free(got);
}

/* Only the players chosen are read, and only their funds (and escrow) are
 * asked for. */
static void test_players_scan_match_reads_only_matching_funds(void **state) {
    struct fx *f = *state;
    seed_players(f->c, MANY);
    char *before = NULL, *after = NULL;
    assert_int_equal(market_store_info(f->c, "commandstats", &before), MARKET_OK);
    market_player_funds *got = NULL;
    size_t n = 0;
    assert_int_equal(market_players_scan(f->c, REALM, "p1*", &got, &n), MARKET_OK);
    assert_int_equal(n, 1 + 10 + 100 + 1000); /* p1, p1x, p1xx, p1xxx */
    assert_players(got, n, MANY, "p1*");
    assert_int_equal(market_store_info(f->c, "commandstats", &after), MARKET_OK);
    assert_int_equal(th_calls_in(after, "hmget") - th_calls_in(before, "hmget"), (long long)n);
    assert_true(th_calls_in(after, "scan") - th_calls_in(before, "scan") >=
                2); /* more than a page */
    free(got);
    free(before);
    free(after);
}

static void test_players_scan_no_match_and_empty_store(void **state) {
    struct fx *f = *state;
    seed_players(f->c, 10);
    market_player_funds *got = (void *)1;
    size_t n = 99;
    assert_int_equal(market_players_scan(f->c, REALM, "nobody*", &got, &n), MARKET_OK);
    assert_null(got);
    assert_int_equal(n, 0);
    market_world *empty = market_world_new(); /* stored with reset: an empty store */
    assert_non_null(empty);
    assert_int_equal(market_world_store(f->c, REALM, empty, 1), MARKET_OK);
    market_world_free(empty);
    assert_int_equal(market_players_scan(f->c, REALM, NULL, &got, &n), MARKET_OK);
    assert_null(got);
    assert_int_equal(n, 0);
}

/* Keys that are not a valid player id are ignored, a hash without funds
 * (a player going away) is left out, and the others are read. */
static void test_players_scan_skips_bad_ids_and_fundless(void **state) {
    struct fx *f = *state;
    seed_players(f->c, 3);
    const char *bad_id[] = {"HSET", "users:{main}:not.an.id", "funds", "7"};
    const char *no_funds[] = {"HSET", "users:{main}:ghost", "name", "Ghost"};
    raw(bad_id, 4);
    raw(no_funds, 4);
    market_player_funds *got = NULL;
    size_t n = 0;
    assert_int_equal(market_players_scan(f->c, REALM, NULL, &got, &n), MARKET_OK);
    assert_players(got, n, 3, NULL);
    free(got);
}

static void test_players_scan_garbage_funds_is_store_error(void **state) {
    struct fx *f = *state;
    seed_players(f->c, 3);
    const char *garbage[] = {"HSET", "users:{main}:p1", "funds", "12abc"};
    raw(garbage, 4);
    market_player_funds *got = (void *)1;
    size_t n = 99;
    assert_int_equal(market_players_scan(f->c, REALM, NULL, &got, &n), MARKET_ERR_STORE);
    assert_null(got);
    assert_int_equal(n, 0);
    const char *wrongtype[] = {"SET", "users:{main}:p1", "x"};
    raw(wrongtype, 3);
    assert_int_equal(market_players_scan(f->c, REALM, NULL, &got, &n), MARKET_ERR_STORE);
    assert_null(got);
}

static void test_players_scan_invalid_arguments(void **state) {
    struct fx *f = *state;
    market_player_funds *got = NULL;
    size_t n = 0;
    assert_int_equal(market_players_scan(NULL, REALM, NULL, &got, &n), MARKET_ERR_INVALID);
    assert_int_equal(market_players_scan(f->c, REALM, NULL, NULL, &n), MARKET_ERR_INVALID);
    assert_int_equal(market_players_scan(f->c, REALM, NULL, &got, NULL), MARKET_ERR_INVALID);
    char *info = NULL;
    assert_int_equal(market_store_info(NULL, "commandstats", &info), MARKET_ERR_INVALID);
    assert_int_equal(market_store_info(f->c, "commandstats", NULL), MARKET_ERR_INVALID);
}

/* A store nobody answers on: a prompt store error, nothing handed out. */
static void test_readers_store_down(void **state) {
    (void)state;
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", th_free_port());
    struct fx f = {0};
    fx_open(&f, url);
    market_player_funds *got = (void *)1;
    size_t n = 99;
    assert_int_equal(market_players_scan(f.c, REALM, NULL, &got, &n), MARKET_ERR_STORE);
    assert_null(got);
    assert_int_equal(n, 0);
    char *info = (void *)1;
    assert_int_equal(market_store_info(f.c, "commandstats", &info), MARKET_ERR_STORE);
    assert_null(info);
    fx_close(&f);
}

/* The readers connect as market/ does: AUTH with the URL's password and
 * SELECT its db, so a world in db 3 of a guarded server is read, and db 0's
 * emptiness is not mistaken for it. */
static void test_readers_auth_and_select(void **state) {
    (void)state;
    th_redis guarded = {0};
    snprintf(guarded.extra, sizeof guarded.extra, "--requirepass pw");
    assert_int_equal(th_redis_start(&guarded), 0);
    char url3[96], url0[96];
    snprintf(url3, sizeof url3, "redis://:pw@127.0.0.1:%d/3", guarded.port);
    snprintf(url0, sizeof url0, "redis://:pw@127.0.0.1:%d/0", guarded.port);
    struct fx f = {0};
    fx_open(&f, url3);
    seed_players(f.c, 20);
    market_player_funds *got = NULL;
    size_t n = 0;
    assert_int_equal(market_players_scan(f.c, REALM, NULL, &got, &n), MARKET_OK);
    assert_players(got, n, 20, NULL);
    free(got);
    char *info = NULL;
    assert_int_equal(market_store_info(f.c, "keyspace", &info), MARKET_OK);
    assert_non_null(strstr(info, "db3:keys="));
    free(info);
    fx_close(&f);
    fx_open(&f, url0);
    assert_int_equal(market_players_scan(f.c, REALM, NULL, &got, &n), MARKET_OK);
    assert_int_equal(n, 0);
    fx_close(&f);
    th_redis_stop(&guarded);
}

/* ---- market_store_info ---- */

static void test_store_info_counts_commands(void **state) {
    struct fx *f = *state;
    seed_players(f->c, 5);
    char *a = NULL, *b = NULL;
    assert_int_equal(market_store_info(f->c, "commandstats", &a), MARKET_OK);
    assert_non_null(strstr(a, "# Commandstats"));
    assert_int_equal(market_ping(f->c), MARKET_OK);
    assert_int_equal(market_ping(f->c), MARKET_OK);
    assert_int_equal(market_store_info(f->c, "commandstats", &b), MARKET_OK);
    assert_int_equal(th_calls_in(b, "ping") - th_calls_in(a, "ping"), 2);
    assert_int_equal(th_calls_in(b, "info") - th_calls_in(a, "info"), 1);
    free(a);
    free(b);
}

/* ---- market_world_store in steps ---- */

/* A large world is written in many short steps, not one transaction: a MULTI/EXEC a step
 * (each guarded by the run's lease), of a few thousand keys and fields at most, and each
 * ZADD holds a chunk of the listings. What it wrote is the world, whole, and the lease is
 * gone with the mark. */
static void test_world_store_large_in_steps(void **state) {
    struct fx *f = *state;
    flushall();
    char *a = NULL, *b = NULL;
    assert_int_equal(market_store_info(f->c, "commandstats", &a), MARKET_OK);
    market_world *w = big_world();
    assert_int_equal(market_world_store(f->c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    assert_int_equal(market_store_info(f->c, "commandstats", &b), MARKET_OK);
    long long execs = th_calls_in(b, "exec") - th_calls_in(a, "exec");
    /* four entries a listing (market, names, two indexes) and a player's five, a step of
     * STEP_MOST at most: every EXEC is a step, and there are that many steps at least */
    assert_true(execs >= (4LL * BIG_LISTINGS + 5LL * BIG_PLAYERS) / STEP_MOST);
    assert_int_equal(th_calls_in(b, "multi") - th_calls_in(a, "multi"), execs);
    /* market:{r} and the two indexes: BIG_LISTINGS members each, 256 a ZADD at most */
    assert_true(th_calls_in(b, "zadd") - th_calls_in(a, "zadd") >= 3 * BIG_LISTINGS / 256);
    free(a);
    free(b);
    assert_big_world(f->c);
    const char *ex[] = {"EXISTS", "market:{" REALM "}:building", "market:{" REALM "}:seeding"};
    assert_int_equal(raw_int(ex, 3), 0);
}

/* A world's buy orders rest in their books, escrowed out of their buyers'
 * funds, with ids after the realm's last; the world is refused whole for a
 * buyer who is no player or cannot pay, an order of a unique item, and one
 * that a listing would fill. Seeding again without a reset keeps the
 * escrow of the orders already there. Generated orders all rest. */
static void test_world_orders(void **state) {
    struct fx *f = *state;
    flushall();
    market_world *w = market_world_new();
    assert_int_equal(market_world_add_player(w, "A", NULL, 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "B", NULL, 100), MARKET_OK);
    assert_int_equal(market_world_add_stack(w, "A", "ore", 10), MARKET_OK);
    assert_int_equal(market_world_add_units_listing(w, "A", "ore", 20, 5), MARKET_OK);
    assert_int_equal(market_world_add_item(w, "A", "axe"), MARKET_OK);
    assert_int_equal(market_world_add_order(w, "B", "ore", 4, 19), MARKET_OK);
    assert_int_equal(market_world_add_order(w, "B", "ore", 0, 19), MARKET_ERR_INVALID);
    assert_int_equal(market_world_check(w, NULL, 0), MARKET_OK);
    assert_int_equal(market_world_store(f->c, REALM, w, 1), MARKET_OK);
    market_book bk;
    assert_int_equal(market_book_get(f->c, REALM, "ore", 5, &bk), MARKET_OK);
    assert_int_equal(bk.n_bids, 1);
    assert_int_equal(bk.bids[0].units, 4);
    assert_int_equal(bk.bids[0].price, 19);
    market_bid *v = NULL;
    size_t n = 0;
    assert_int_equal(market_player_orders(f->c, REALM, "B", &v, &n), MARKET_OK);
    assert_int_equal(n, 1);
    assert_int_equal(v[0].id, 1);
    free(v);
    market_audit_report a;
    assert_int_equal(market_audit(f->c, REALM, &a), MARKET_OK);
    assert_int_equal(a.total_funds, 100 - 76);
    assert_int_equal(a.total_escrow, 76);
    assert_int_equal(a.orders_escrow, 76);
    assert_int_equal(a.orders_misbooked, 0);
    /* again, without a reset: the new order comes after, and both are escrowed */
    assert_int_equal(market_world_store(f->c, REALM, w, 0), MARKET_OK);
    assert_int_equal(market_player_orders(f->c, REALM, "B", &v, &n), MARKET_OK);
    assert_int_equal(n, 2);
    assert_int_equal(v[1].id, 2);
    free(v);
    assert_int_equal(market_audit(f->c, REALM, &a), MARKET_OK);
    assert_int_equal(a.total_escrow, 2 * 76);
    assert_int_equal(a.orders_escrow, a.total_escrow);
    char why[200];
    assert_int_equal(market_world_add_order(w, "B", "ore", 1, 20), MARKET_OK); /* A lists at 20 */
    assert_int_equal(market_world_check(w, why, sizeof why), MARKET_ERR_INVALID);
    assert_non_null(strstr(why, "would fill it"));
    market_world_free(w);
    const struct {
        const char *buyer, *item;
        int64_t q, price;
        int rc;
    } bad[] = {{"Z", "ore", 1, 1, MARKET_ERR_NO_PLAYER},
               {"B", "ore", 6, 19, MARKET_ERR_INSUFFICIENT_FUNDS},
               {"B", "axe", 1, 1, MARKET_ERR_INVALID}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        w = market_world_new();
        assert_int_equal(market_world_add_player(w, "A", NULL, 0), MARKET_OK);
        assert_int_equal(market_world_add_player(w, "B", NULL, 100), MARKET_OK);
        assert_int_equal(market_world_add_item(w, "A", "axe"), MARKET_OK);
        assert_int_equal(
            market_world_add_order(w, bad[i].buyer, bad[i].item, bad[i].q, bad[i].price),
            MARKET_OK);
        assert_int_equal(market_world_store(f->c, REALM, w, 1), bad[i].rc);
        market_world_free(w);
    }
    w = market_world_new();
    assert_int_equal(market_world_generate(w, 50, 0, 1000, 10, 100, 7), MARKET_OK);
    assert_int_equal(market_world_generate_goods(w, 50, 3, 10, 100, 7), MARKET_OK);
    assert_int_equal(market_world_generate_orders(w, 50, 3, 40, 7), MARKET_OK);
    assert_int_equal(market_world_store(f->c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    assert_int_equal(market_audit(f->c, REALM, &a), MARKET_OK);
    assert_true(a.orders > 0);
    assert_int_equal(a.orders_escrow, a.total_escrow);
    assert_int_equal(a.total_funds + a.total_escrow, 50 * 1000);
    for (int g = 0; g < 3; g++) { /* every one rests: under the cheapest listing */
        char good[8];
        snprintf(good, sizeof good, "g%d", g);
        assert_int_equal(market_book_get(f->c, REALM, good, 1, &bk), MARKET_OK);
        assert_true(bk.n_bids == 0 || bk.bids[0].price < bk.asks[0].price);
    }
}

/* A seed stopped after a few steps (as by a crash) wrote no more than those steps hold,
 * and leaves the realm refused, not half-there; a run to the end serves it whole. */
static void test_world_store_stopped_refused_until_rerun(void **state) {
    (void)state;
    flushall();
    struct fx f;
    fx_open_steps(&f, 3); /* the mark, then two steps */
    market_world *w = big_world();
    assert_int_equal(market_world_store(f.c, REALM, w, 0), MARKET_ERR_STORE);
    assert_non_null(strstr(market_conn_errstr(f.c), "test hook"));
    long long keys = dbsize();
    assert_true(keys > 1 && keys <= 1 + 2 * STEP_MOST);
    assert_realm_refused(f.c);
    fx_close(&f);
    fx_open_steps(&f, 0);
    assert_realm_refused(f.c);
    assert_int_equal(market_world_store(f.c, REALM, w, 0), MARKET_OK);
    assert_big_world(f.c);
    market_purchase_result r;
    assert_int_equal(market_purchase(f.c, REALM, "p1", "p0", "i0", 0, &r), MARKET_OK);
    market_world_free(w);
    fx_close(&f);
}

/* A reset of a large realm deletes its keys in steps (UNLINK a chunk at a time): stopped
 * half-way, the realm is refused; run again, it holds only the new world. */
static void test_world_store_reset_large_in_steps(void **state) {
    struct fx *f = *state;
    flushall();
    market_world *w = big_world();
    assert_int_equal(market_world_store(f->c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    long long before = dbsize();
    assert_true(before > BIG_LISTINGS);
    struct fx g;
    fx_open_steps(&g, 4); /* the mark, then three steps of the reset */
    assert_non_null(w = market_world_new());
    assert_int_equal(market_world_add_player(w, "q0", NULL, 7), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "q0", "axe", 5), MARKET_OK);
    char *a = NULL, *b = NULL;
    assert_int_equal(market_store_info(g.c, "commandstats", &a), MARKET_OK);
    assert_int_equal(market_world_store(g.c, REALM, w, 1), MARKET_ERR_STORE);
    assert_int_equal(market_store_info(g.c, "commandstats", &b), MARKET_OK);
    long long gone = before - dbsize(),
              unlinks = th_calls_in(b, "unlink") - th_calls_in(a, "unlink");
    assert_true(gone > 0 && gone <= 3 * STEP_MOST);
    assert_true(unlinks >= 3 && unlinks <= 3 * (STEP_MOST / 256 + 1));
    free(a);
    free(b);
    assert_realm_refused(g.c);
    fx_close(&g);
    assert_int_equal(market_world_store(f->c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    market_audit_report r;
    assert_int_equal(market_audit(f->c, REALM, &r), MARKET_OK);
    assert_int_equal(r.players, 1);
    assert_int_equal(r.items_listed, 1);
    assert_int_equal(r.total_funds, 7);
    assert_int_equal(r.index_mismatch, 0);
    assert_true(dbsize() < 10);
}

struct stalled_buy {
    market *m;
    int rc;
};

static void *stalled_buy_main(void *arg) {
    struct stalled_buy *b = arg;
    int err = 0;
    market_conn *c = market_conn_new(b->m, &err);
    market_purchase_result r;
    b->rc = c ? market_purchase(c, REALM, "p1", "p0", "i0", 0, &r) : MARKET_ERR_NOMEM;
    market_conn_free(c);
    return NULL;
}

/* A seed that starts between a purchase's read and its commit (the holder
 * stalled there by the test hook) aborts that commit: the batch's read
 * watched the realm's mark, in the same pipeline, so the purchase reads
 * again, finds the mark and is refused, and nothing of it is written. */
static void test_seed_starting_after_a_read_aborts_its_commit(void **state) {
    struct fx *f = *state;
    flushall();
    market_world *w = big_world();
    assert_int_equal(market_world_store(f->c, REALM, w, 0), MARKET_OK);
    market_world_free(w);
    market_config cfg = {.redis_timeout_ms = 5000, .lock_ttl_ms = 10000,
                         .acquire_timeout_ms = 10000, .test_stall_ms = 2000};
    assert_int_equal(rconn_addr_parse(redis.url, &cfg.redis), RCONN_OK);
    int err = 0;
    lock_client *lock = lock_local_new(&err);
    market *m = market_new(&cfg, lock, &err);
    assert_non_null(m);
    char *info = NULL;
    assert_int_equal(market_store_info(f->c, "commandstats", &info), MARKET_OK);
    long long marks = th_calls_in(info, "exists") + th_calls_in(info, "mget");
    free(info);
    struct stalled_buy b = {m, 1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stalled_buy_main, &b), 0);
    for (;;) { /* its read went out (the mark rides in the leases' MGET, or in an EXISTS of
                * its own when no lease is held): it stalls now */
        assert_int_equal(market_store_info(f->c, "commandstats", &info), MARKET_OK);
        long long now = th_calls_in(info, "exists") + th_calls_in(info, "mget");
        free(info);
        if (now > marks) break;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    redisContext *rc0 = redisConnect("127.0.0.1", redis.port);
    assert_non_null(rc0);
    freeReplyObject(redisCommand(rc0, "SET market:{%s}:building test", REALM));
    pthread_join(t, NULL);
    assert_int_equal(b.rc, MARKET_ERR_REALM_UNAVAILABLE);
    freeReplyObject(redisCommand(rc0, "DEL market:{%s}:building", REALM));
    redisFree(rc0);
    assert_big_world(f->c); /* nothing of it written */
    market_free(m);
    lock_free(lock);
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

/* ---- one seeding run a realm ---- */

/* A run is refused while another holds the realm's lease, and writes nothing; once the
 * lease is gone, a run seeds the realm. */
static void test_seed_refused_while_another_run_holds_the_realm(void **state) {
    struct fx *f = *state;
    flushall();
    const char *hold[] = {"SET", "market:{" REALM "}:seeding", "another-run", "PX", "60000"};
    raw(hold, 5);
    market_world *w = big_world();
    assert_int_equal(market_world_store(f->c, REALM, w, 1), MARKET_ERR_REALM_UNAVAILABLE);
    assert_non_null(strstr(market_conn_errstr(f->c), "another run is seeding realm"));
    assert_int_equal(dbsize(), 1); /* the other run's lease alone: no mark, nothing reset */
    const char *del[] = {"DEL", "market:{" REALM "}:seeding"};
    raw(del, 2);
    assert_int_equal(market_world_store(f->c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    assert_big_world(f->c);
}

/* The child of test_seed_paused_past_its_lease_writes_nothing_more: seeds the big world,
 * and exits 0 when the run stopped because its lease was taken. It frees what it made
 * first: under valgrind (make valgrind) a leak would make its exit status 99. */
static void seed_child(void) {
    struct fx f;
    fx_open_steps(&f, 0);
    market_world *w = big_world();
    int rc = market_world_store(f.c, REALM, w, 0);
    int lost = rc == MARKET_ERR_STORE && strstr(market_conn_errstr(f.c), "seeding lease");
    if (!lost) fprintf(stderr, "seed child: %d %s\n", rc, market_conn_errstr(f.c));
    market_world_free(w);
    fx_close(&f);
    _exit(lost ? 0 : 1);
}

static long long raw_exists(const char *key) {
    const char *ex[] = {"EXISTS", key};
    return raw_int(ex, 2);
}

/* A run paused (SIGSTOP) in the middle of its steps, whose lease another run takes
 * meanwhile (as when the pause outlasts it), writes nothing more once it goes on: the step
 * it was in is aborted by its lease's WATCH, and the next is not begun. The realm stays
 * refused (its mark stays). */
static void test_seed_paused_past_its_lease_writes_nothing_more(void **state) {
    (void)state;
    flushall();
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) seed_child();
    while (!raw_exists("market:{" REALM "}:building")) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(kill(pid, SIGSTOP), 0);
    int st;
    assert_int_equal(waitpid(pid, &st, WUNTRACED), pid); /* stopped */
    assert_true(WIFSTOPPED(st));
    const char *take[] = {"SET", "market:{" REALM "}:seeding", "another-run", "PX", "60000"};
    raw(take, 5);
    long long keys = dbsize();
    assert_int_equal(kill(pid, SIGCONT), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0); /* it stopped for its lease */
    assert_int_equal(dbsize(), keys);     /* and wrote nothing after it was taken */
    assert_int_equal(raw_exists("market:{" REALM "}:building"), 1);
    struct fx f;
    fx_open_steps(&f, 0);
    assert_realm_refused(f.c);
    fx_close(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_players_scan_reads_every_player_once_with_funds,
                                        fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_players_scan_match_reads_only_matching_funds, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_players_scan_no_match_and_empty_store, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_players_scan_skips_bad_ids_and_fundless, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_players_scan_garbage_funds_is_store_error, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_players_scan_invalid_arguments, fx_setup, fx_teardown),
        cmocka_unit_test(test_readers_store_down),
        cmocka_unit_test(test_readers_auth_and_select),
        cmocka_unit_test_setup_teardown(test_store_info_counts_commands, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_world_store_large_in_steps, fx_setup, fx_teardown),
        cmocka_unit_test(test_world_store_stopped_refused_until_rerun),
        cmocka_unit_test_setup_teardown(test_world_orders, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_seed_starting_after_a_read_aborts_its_commit, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_world_store_reset_large_in_steps, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_seed_refused_while_another_run_holds_the_realm,
                                        fx_setup, fx_teardown),
        cmocka_unit_test(test_seed_paused_past_its_lease_writes_nothing_more),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
