/* test_market_search.c - searching the market against a real redis-server: filters and
 * orders, cursor pages while the market changes, the indexes after concurrent purchases
 * under each strategy, reseeding, and market_reindex() (also while purchases run).
 *
 * Every test starts from a freshly seeded world in a throwaway redis-server, with the
 * redis lock backend on the same server; the whole list runs once per strategy.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <hiredis.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"
#include "rconn/rconn.h"
#include "market/market.h"
#include "tests/helpers/redis_proc.h"

#define REALM MARKET_REALM_DEFAULT

static th_redis redis;
static enum market_strategy strategy; /* the group being run */

struct fx {
    lock_client *lock;
    market *m;
    market_conn *c;
    market_config cfg;
};

/* ---- helpers ---- */

/* A small world: sellers A, B, C list ten items at known prices; D buys. */
static const struct {
    const char *seller, *item;
    int64_t price;
} shop[] = {
    {"A", "axe", 500},   {"A", "bow", 50},       {"A", "cap", 50}, {"B", "dagger", 300},
    {"B", "elixir", 50}, {"B", "flail", 900},    {"C", "gem", 10}, {"C", "helm", 300},
    {"C", "ink", 75},    {"C", "javelin", 1200},
};
#define SHOP (sizeof shop / sizeof *shop)

static void seed_shop(market_conn *c) {
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "A", "Alice", 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "B", "Bob", 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "C", "Carol", 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "D", "Dave", 1000000), MARKET_OK);
    assert_int_equal(market_world_add_item(w, "A", "spare"), MARKET_OK);
    for (size_t i = 0; i < SHOP; i++)
        assert_int_equal(market_world_add_listing(w, shop[i].seller, shop[i].item, shop[i].price),
                         MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
}

static int fx_setup(void **state) {
    struct fx *f = calloc(1, sizeof *f);
    int err;
    f->cfg = (market_config){.redis_timeout_ms = 2000,
                             .lock_ttl_ms = 5000,
                             .acquire_timeout_ms = 4000,
                             .strategy = strategy};
    if (rconn_addr_parse(redis.url, &f->cfg.redis) != RCONN_OK) return -1;
    f->lock = lock_redis_new(&f->cfg.redis, 1000, &err);
    f->m = f->lock ? market_new(&f->cfg, f->lock, &err) : NULL;
    f->c = f->m ? market_conn_new(f->m, &err) : NULL;
    if (!f->c) return -1;
    seed_shop(f->c);
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

/* The search q, which must succeed; returns its result (caller cleans up). */
static market_search_result search(market_conn *c, market_search_query q) {
    market_search_result r;
    int rc = market_search(c, REALM, &q, &r);
    if (rc != MARKET_OK)
        fail_msg("search failed: %s (%s)", market_strerror(rc), market_conn_errstr(c));
    return r;
}

/* "item.seller:price,..." of r's page. */
static void page_text(const market_search_result *r, char *out, size_t outlen) {
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->n && at < outlen; i++)
        at += (size_t)snprintf(out + at, outlen - at, "%s%s.%s:%lld", i ? "," : "",
                               r->listings[i].item, r->listings[i].seller,
                               (long long)r->listings[i].price);
}

static void expect_page(market_conn *c, market_search_query q, const char *want, size_t total,
                        int more) {
    market_search_result r = search(c, q);
    char got[1024];
    page_text(&r, got, sizeof got);
    if (strcmp(got, want) != 0) fail_msg("page\n  got  %s\n  want %s", got, want);
    assert_int_equal(r.total, total);
    assert_int_equal(r.next_cursor[0] != '\0', more);
    market_search_result_cleanup(&r);
}

static void assert_indexed(market_conn *c) {
    market_audit_report a;
    assert_int_equal(market_audit(c, REALM, &a), MARKET_OK);
    assert_int_equal(a.items_misplaced, 0);
    assert_int_equal(a.index_mismatch, 0);
}

/* Runs the command fmt (hiredis's format) with ap, which must not fail, and writes its
 * reply into out as text: a string's, an integer's digits, "nil", or "" for other replies. */
static void redis_vtext(char *out, size_t outlen, const char *fmt, va_list ap) {
    redisContext *rc = redisConnect("127.0.0.1", redis.port);
    assert_non_null(rc);
    redisReply *r = redisvCommand(rc, fmt, ap);
    assert_non_null(r);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    if (r->type == REDIS_REPLY_STRING)
        snprintf(out, outlen, "%s", r->str);
    else if (r->type == REDIS_REPLY_INTEGER)
        snprintf(out, outlen, "%lld", r->integer);
    else
        snprintf(out, outlen, "%s", r->type == REDIS_REPLY_NIL ? "nil" : "");
    freeReplyObject(r);
    redisFree(rc);
}

/* The reply of command fmt, as text (see redis_vtext()). */
static void redis_text(char *out, size_t outlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redis_vtext(out, outlen, fmt, ap);
    va_end(ap);
}

static void redis_do(const char *fmt, ...) {
    char ignored[8];
    va_list ap;
    va_start(ap, fmt);
    redis_vtext(ignored, sizeof ignored, fmt, ap);
    va_end(ap);
}

/* Deletes every key matching pattern (KEYS, in a script). */
static void redis_unlink_matching(const char *pattern) {
    redis_do("EVAL %s 0 %s",
             "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('UNLINK', k) end",
             pattern);
}

/* ---- filters and orders ---- */

static void test_search_every_listing_cheapest_then_dearest(void **state) {
    struct fx *f = *state;
    expect_page(f->c, (market_search_query){.limit = 50},
                "gem.C:10,bow.A:50,cap.A:50,elixir.B:50,ink.C:75,dagger.B:300,helm.C:300,"
                "axe.A:500,flail.B:900,javelin.C:1200",
                SHOP, 0);
    expect_page(f->c, (market_search_query){.limit = 50, .desc = 1},
                "javelin.C:1200,flail.B:900,axe.A:500,helm.C:300,dagger.B:300,ink.C:75,"
                "elixir.B:50,cap.A:50,bow.A:50,gem.C:10",
                SHOP, 0);
    expect_page(f->c, (market_search_query){.limit = 3}, "gem.C:10,bow.A:50,cap.A:50", SHOP, 1);
    assert_indexed(f->c);
}

static void test_search_filters_by_item_seller_and_price(void **state) {
    struct fx *f = *state;
    expect_page(f->c, (market_search_query){.seller = "C", .limit = 50},
                "gem.C:10,ink.C:75,helm.C:300,javelin.C:1200", 4, 0);
    expect_page(f->c, (market_search_query){.seller = "C", .limit = 50, .desc = 1},
                "javelin.C:1200,helm.C:300,ink.C:75,gem.C:10", 4, 0);
    expect_page(f->c, (market_search_query){.item = "axe", .limit = 50}, "axe.A:500", 1, 0);
    expect_page(f->c, (market_search_query){.item = "ax", .limit = 50}, "", 0, 0);
    expect_page(f->c, (market_search_query){.item = "spare", .limit = 50}, "", 0, 0);
    expect_page(f->c, (market_search_query){.min_price = 50, .max_price = 300, .limit = 50},
                "bow.A:50,cap.A:50,elixir.B:50,ink.C:75,dagger.B:300,helm.C:300", 6, 0);
    expect_page(f->c, (market_search_query){.min_price = 51, .max_price = 299, .limit = 50},
                "ink.C:75", 1, 0);
    expect_page(f->c, (market_search_query){.min_price = 1000, .limit = 50}, "javelin.C:1200", 1,
                0);
    expect_page(f->c, (market_search_query){.max_price = 10, .limit = 50}, "gem.C:10", 1, 0);
    expect_page(f->c,
                (market_search_query){
                    .seller = "B", .min_price = 100, .max_price = 900, .desc = 1, .limit = 1},
                "flail.B:900", 2, 1);
    expect_page(f->c, (market_search_query){.item = "helm", .seller = "C", .limit = 5},
                "helm.C:300", 1, 0);
    expect_page(f->c, (market_search_query){.item = "helm", .seller = "A", .limit = 5}, "", 0, 0);
    expect_page(f->c,
                (market_search_query){.item = "helm", .seller = "C", .min_price = 301, .limit = 5},
                "", 0, 0);
}

static void test_search_seller_exists_reported(void **state) {
    struct fx *f = *state;
    market_search_result r = search(f->c, (market_search_query){.seller = "D", .limit = 5});
    assert_int_equal(r.total, 0);
    assert_true(r.seller_exists); /* D lists nothing, but is a player */
    market_search_result_cleanup(&r);
    r = search(f->c, (market_search_query){.seller = "ghost", .limit = 5});
    assert_false(r.seller_exists);
    market_search_result_cleanup(&r);
    r = search(f->c, (market_search_query){.item = "axe", .seller = "ghost", .limit = 5});
    assert_false(r.seller_exists);
    assert_int_equal(r.n, 0);
    market_search_result_cleanup(&r);
}

/* Every kind of search reads each listing's units with its page (a stack's count, 1 for
 * a unique item); a count that is not one fails the search rather than showing it. */
static void test_search_reads_units_and_refuses_unreadable_ones(void **state) {
    struct fx *f = *state;
    redis_do("HSET market:{main}:units bow.A %s", "7"); /* bow.A: a stack of 7 */
    static const market_search_query qs[] = {
        {NULL, NULL, 50, 50, 0, 10, NULL}, /* the market */
        {"bow", NULL, 0, 0, 0, 10, NULL},  /* the item's index */
        {NULL, "A", 0, 0, 0, 10, NULL},    /* the seller's */
        {"bow", "A", 0, 0, 0, 10, NULL},   /* the one listing */
    };
    for (size_t i = 0; i < sizeof qs / sizeof *qs; i++) {
        market_search_result r = search(f->c, qs[i]);
        size_t seen = 0;
        for (size_t k = 0; k < r.n; k++) {
            int bow = strcmp(r.listings[k].item, "bow") == 0;
            seen += bow;
            assert_int_equal(r.listings[k].stack, bow);
            assert_int_equal(r.listings[k].quantity, bow ? 7 : 1);
        }
        assert_int_equal(seen, 1);
        market_search_result_cleanup(&r);
    }
    redis_do("HSET market:{main}:units bow.A %s", "x");
    for (size_t i = 0; i < sizeof qs / sizeof *qs; i++) {
        market_search_result r;
        assert_int_equal(market_search(f->c, REALM, &qs[i], &r), MARKET_ERR_STORE);
        assert_non_null(strstr(market_conn_errstr(f->c), "units of bow.A"));
        assert_int_equal(r.n, 0);
    }
}

static void test_search_bad_query_invalid(void **state) {
    struct fx *f = *state;
    static const market_search_query bad[] = {
        {.limit = 0},
        {.limit = MARKET_SEARCH_LIMIT_MAX + 1},
        {.item = "a.b", .limit = 1},
        {.seller = "", .limit = 1},
        {.min_price = 10, .max_price = 9, .limit = 1},
        {.min_price = MARKET_PRICE_MAX + 1, .limit = 1},
        {.cursor = "0000000000010", .limit = 1},
        {.cursor = "0000000000010:gem.C", .seller = "A", .limit = 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        market_search_result r;
        r.n = 99;
        assert_int_equal(market_search(f->c, REALM, &bad[i], &r), MARKET_ERR_INVALID);
        assert_int_equal(r.n, 0);
        assert_null(r.listings);
    }
    market_search_query ok = {.limit = 1};
    market_search_result r;
    assert_int_equal(market_search(f->c, "bad realm", &ok, &r), MARKET_ERR_INVALID);
    assert_int_equal(market_search(NULL, REALM, &ok, &r), MARKET_ERR_INVALID);
    assert_int_equal(market_search(f->c, REALM, NULL, &r), MARKET_ERR_INVALID);
    assert_int_equal(market_search(f->c, REALM, &ok, NULL), MARKET_ERR_INVALID);
    market_search_result_cleanup(NULL);
}

/* The indexes follow list, unlist and purchases, in the same transaction. */
static void test_search_follows_list_unlist_purchase(void **state) {
    struct fx *f = *state;
    assert_int_equal(market_list(f->c, REALM, "A", "spare", 60), MARKET_OK);
    expect_page(f->c, (market_search_query){.seller = "A", .limit = 50},
                "bow.A:50,cap.A:50,spare.A:60,axe.A:500", 4, 0);
    int64_t price = 0;
    assert_int_equal(market_unlist(f->c, REALM, "A", "bow", &price), MARKET_OK);
    assert_int_equal(price, 50);
    market_purchase_result res;
    assert_int_equal(market_purchase(f->c, REALM, "D", "A", "axe", -1, &res), MARKET_OK);
    expect_page(f->c, (market_search_query){.seller = "A", .limit = 50}, "cap.A:50,spare.A:60", 2,
                0);
    expect_page(f->c, (market_search_query){.item = "axe", .limit = 50}, "", 0, 0);
    expect_page(f->c, (market_search_query){.min_price = 400, .max_price = 600, .limit = 50}, "", 0,
                0);
    assert_indexed(f->c);
}

/* ---- by item prefix ---- */

/* Adds, without a reset, sellers P and Q listing potions and near names beside the shop. */
static void seed_potions(market_conn *c) {
    static const struct {
        const char *seller, *item;
        int64_t price;
    } more[] = {{"P", "potion-1", 30}, {"P", "potion-2", 20}, {"P", "potion-10", 5},
                {"Q", "potion-3", 25}, {"Q", "poison", 7},    {"Q", "pot", 1}};
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "P", NULL, 0), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "Q", NULL, 0), MARKET_OK);
    for (size_t i = 0; i < sizeof more / sizeof *more; i++)
        assert_int_equal(market_world_add_listing(w, more[i].seller, more[i].item, more[i].price),
                         MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 0), MARKET_OK);
    market_world_free(w);
}

/* A prefix finds the listings whose item starts with it, in (item, seller) byte order
 * whatever their prices, a page of at most limit at a time, pages joined by cursors. */
static void test_search_by_item_prefix_pages_by_name(void **state) {
    struct fx *f = *state;
    seed_potions(f->c);
    expect_page(f->c, (market_search_query){.item_prefix = "potion", .limit = 50},
                "potion-1.P:30,potion-10.P:5,potion-2.P:20,potion-3.Q:25", 4, 0);
    expect_page(f->c, (market_search_query){.item_prefix = "po", .limit = 50},
                "poison.Q:7,pot.Q:1,potion-1.P:30,potion-10.P:5,potion-2.P:20,potion-3.Q:25", 6,
                0);
    expect_page(f->c, (market_search_query){.item_prefix = "axe", .limit = 50}, "axe.A:500", 1, 0);
    expect_page(f->c, (market_search_query){.item_prefix = "potion-10", .limit = 50},
                "potion-10.P:5", 1, 0);
    expect_page(f->c, (market_search_query){.item_prefix = "Potion", .limit = 50}, "", 0, 0);
    expect_page(f->c, (market_search_query){.item_prefix = "spare", .limit = 50}, "", 0, 0);
    /* the limit bounds a page; the cursor goes on strictly after its listing */
    market_search_result r = search(f->c, (market_search_query){.item_prefix = "po", .limit = 4});
    assert_int_equal(r.n, 4);
    assert_int_equal(r.total, 6);
    assert_string_equal(r.next_cursor, "0000000000005:potion-10.P");
    market_search_result_cleanup(&r);
    expect_page(f->c,
                (market_search_query){
                    .item_prefix = "po", .limit = 4, .cursor = "0000000000005:potion-10.P"},
                "potion-2.P:20,potion-3.Q:25", 6, 0);
    /* a cursor whose listing went meanwhile still starts after it */
    market_purchase_result res;
    assert_int_equal(market_purchase(f->c, REALM, "D", "P", "potion-10", -1, &res), MARKET_OK);
    expect_page(f->c,
                (market_search_query){
                    .item_prefix = "po", .limit = 1, .cursor = "0000000000005:potion-10.P"},
                "potion-2.P:20", 5, 1);
    expect_page(f->c, (market_search_query){.item_prefix = "potion", .limit = 50},
                "potion-1.P:30,potion-2.P:20,potion-3.Q:25", 3, 0);
    int64_t price = 0;
    assert_int_equal(market_unlist(f->c, REALM, "Q", "pot", &price), MARKET_OK);
    assert_int_equal(price, 1);
    assert_int_equal(market_list(f->c, REALM, "A", "spare", 60), MARKET_OK);
    expect_page(f->c, (market_search_query){.item_prefix = "p", .limit = 50},
                "poison.Q:7,potion-1.P:30,potion-2.P:20,potion-3.Q:25", 4, 0);
    expect_page(f->c, (market_search_query){.item_prefix = "sp", .limit = 50}, "spare.A:60", 1, 0);
    assert_indexed(f->c);
}

/* A prefix must be an id's characters, alone with limit and cursor, and a cursor of its
 * search; anything else is refused before Redis is asked. */
static void test_search_by_item_prefix_bad_query_invalid(void **state) {
    struct fx *f = *state;
    static const market_search_query bad[] = {
        {.item_prefix = "", .limit = 1},
        {.item_prefix = "po.t", .limit = 1},
        {.item_prefix = "p*", .limit = 1},
        {.item_prefix = "p", .item = "pot", .limit = 1},
        {.item_prefix = "p", .seller = "Q", .limit = 1},
        {.item_prefix = "p", .min_price = 1, .limit = 1},
        {.item_prefix = "p", .max_price = 9, .limit = 1},
        {.item_prefix = "p", .desc = 1, .limit = 1},
        {.item_prefix = "p", .limit = MARKET_SEARCH_LIMIT_MAX + 1},
        {.item_prefix = "p", .limit = 1, .cursor = "0000000000500:axe.A"},
        {.item_prefix = "p", .limit = 1, .cursor = "potion"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        market_search_result r;
        const char *field = NULL;
        assert_int_equal(market_search(f->c, REALM, &bad[i], &r), MARKET_ERR_INVALID);
        assert_int_equal(r.n, 0);
        assert_null(r.listings);
        assert_int_equal(market_search_check(&bad[i], &field, NULL), MARKET_ERR_INVALID);
        assert_string_equal(field, i < 8 ? "item_prefix" : i == 8 ? "limit" : "cursor");
    }
}

/* The names index is rebuilt like the others: missing members put back, stale ones gone. */
static void test_reindex_rebuilds_the_names_index(void **state) {
    struct fx *f = *state;
    char t[32];
    seed_potions(f->c);
    redis_do("DEL %s", "idx:{main}:names");
    redis_do("ZADD idx:{main}:names 0 %s", "potion-9.X"); /* no such listing */
    expect_page(f->c, (market_search_query){.item_prefix = "potion-1", .limit = 5}, "", 0, 0);
    market_search_result r;
    market_search_query q = {.item_prefix = "potion-9", .limit = 5};
    assert_int_equal(market_search(f->c, REALM, &q, &r), MARKET_ERR_STORE); /* not a listing */
    assert_non_null(strstr(market_conn_errstr(f->c), "market-seed --reindex"));
    size_t n = 0;
    assert_int_equal(market_reindex(f->c, REALM, &n), MARKET_OK);
    assert_int_equal(n, SHOP + 6);
    redis_text(t, sizeof t, "ZSCORE idx:{main}:names %s", "potion-9.X");
    assert_string_equal(t, "nil");
    redis_text(t, sizeof t, "ZCARD %s", "idx:{main}:names");
    assert_string_equal(t, "16");
    expect_page(f->c, (market_search_query){.item_prefix = "potion-1", .limit = 5},
                "potion-1.P:30,potion-10.P:5", 2, 0);
    expect_page(f->c, (market_search_query){.item_prefix = "potion-9", .limit = 5}, "", 0, 0);
}

/* ---- cursor pages while the market changes ---- */

#define WALK_ITEMS 120

/* Seeds WALK_ITEMS listings w0.. over sellers s0..s4 at prices that repeat, and a buyer. */
static void seed_walk(market_conn *c) {
    market_world *w = market_world_new();
    assert_non_null(w);
    char id[32], item[32];
    for (int s = 0; s < 5; s++) {
        snprintf(id, sizeof id, "s%d", s);
        assert_int_equal(market_world_add_player(w, id, NULL, 0), MARKET_OK);
        for (int k = 0; k < 10; k++) {
            snprintf(item, sizeof item, "new%d-%d", s, k);
            assert_int_equal(market_world_add_item(w, id, item), MARKET_OK);
        }
    }
    assert_int_equal(market_world_add_player(w, "buyer", NULL, 1000000000), MARKET_OK);
    for (int i = 0; i < WALK_ITEMS; i++) {
        snprintf(id, sizeof id, "s%d", i % 5);
        snprintf(item, sizeof item, "w%d", i);
        assert_int_equal(market_world_add_listing(w, id, item, 10 + (i * 37) % 25), MARKET_OK);
    }
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
}

/* Pages through q (limit 7) and, between pages, buys a listing ahead of the cursor and one
 * behind it, unlists one, and lists new items at prices on both sides of it. Every listing
 * that was there throughout must come exactly once; pages keep their price order. */
static void walk_while_changing(market_conn *c, market_search_query q) {
    int there_throughout[WALK_ITEMS], seen[WALK_ITEMS] = {0};
    for (int i = 0; i < WALK_ITEMS; i++)
        there_throughout[i] = 1;
    char cursor[MARKET_CURSOR_MAX + 1] = "";
    int64_t last = q.desc ? MARKET_PRICE_MAX : 0;
    int pages = 0, listed_new = 0, step = 0;
    for (;;) {
        q.cursor = cursor;
        market_search_result r = search(c, q);
        for (size_t k = 0; k < r.n; k++) {
            const market_listing *l = &r.listings[k];
            assert_true(q.desc ? l->price <= last : l->price >= last);
            last = l->price;
            if (l->item[0] != 'w') continue; /* listed during the walk: may come or not */
            int i = atoi(l->item + 1);
            assert_in_range(i, 0, WALK_ITEMS - 1);
            assert_int_equal(seen[i]++, 0);
        }
        snprintf(cursor, sizeof cursor, "%s", r.next_cursor);
        market_search_result_cleanup(&r);
        pages++;
        if (!cursor[0]) break;
        if (step % 2 == 0) { /* every other page, the cursor's own listing goes: the next page
                              * starts where it was (the script's search by price and member) */
            const char *colon = strchr(cursor, ':'), *dot = strchr(cursor, '.');
            assert_non_null(colon);
            assert_non_null(dot);
            char item[MARKET_ID_MAX + 1], seller[MARKET_ID_MAX + 1];
            snprintf(item, sizeof item, "%.*s", (int)(dot - colon - 1), colon + 1);
            snprintf(seller, sizeof seller, "%s", dot + 1);
            market_purchase_result res;
            assert_int_equal(market_purchase(c, REALM, "buyer", seller, item, -1, &res), MARKET_OK);
            if (item[0] == 'w') there_throughout[atoi(item + 1)] = 0;
        }
        /* change the market: buy two listings, unlist one, list one (on either side) */
        for (int t = 0; t < 3; t++) {
            int i = (step * 13 + t * 41) % WALK_ITEMS;
            char item[32], seller[32];
            snprintf(item, sizeof item, "w%d", i);
            snprintf(seller, sizeof seller, "s%d", i % 5);
            int rc;
            if (t < 2) {
                market_purchase_result res;
                rc = market_purchase(c, REALM, "buyer", seller, item, -1, &res);
            } else {
                rc = market_unlist(c, REALM, seller, item, NULL);
            }
            if (rc == MARKET_OK)
                there_throughout[i] = 0;
            else
                assert_int_equal(rc, MARKET_ERR_NOT_LISTED); /* gone already */
        }
        if (listed_new < 50) {
            char item[32], seller[32];
            snprintf(seller, sizeof seller, "s%d", listed_new % 5);
            snprintf(item, sizeof item, "new%d-%d", listed_new % 5, listed_new / 5);
            assert_int_equal(market_list(c, REALM, seller, item, 5 + (listed_new * 7) % 40),
                             MARKET_OK);
            listed_new++;
        }
        step++;
    }
    assert_true(pages > 5);
    for (int i = 0; i < WALK_ITEMS; i++)
        if (there_throughout[i] && !seen[i]) fail_msg("w%d was listed throughout, never shown", i);
    assert_indexed(c);
}

static void test_cursor_pages_ascending_while_market_changes(void **state) {
    struct fx *f = *state;
    seed_walk(f->c);
    walk_while_changing(f->c, (market_search_query){.limit = 7});
}

static void test_cursor_pages_descending_while_market_changes(void **state) {
    struct fx *f = *state;
    seed_walk(f->c);
    walk_while_changing(f->c, (market_search_query){.limit = 7, .desc = 1});
}

static void test_cursor_pages_of_a_seller_with_prices(void **state) {
    struct fx *f = *state;
    seed_walk(f->c);
    /* s2's listings priced 12..30, both orders, a page at a time */
    for (int desc = 0; desc < 2; desc++) {
        market_search_query q = {
            .seller = "s2", .min_price = 12, .max_price = 30, .limit = 1, .desc = desc};
        char cursor[MARKET_CURSOR_MAX + 1] = "";
        size_t n = 0, total = 0;
        int64_t last = desc ? 31 : 0;
        do {
            q.cursor = cursor;
            market_search_result r = search(f->c, q);
            total = r.total;
            for (size_t k = 0; k < r.n; k++) {
                assert_string_equal(r.listings[k].seller, "s2");
                assert_true(desc ? r.listings[k].price <= last : r.listings[k].price >= last);
                assert_in_range(r.listings[k].price, 12, 30);
                last = r.listings[k].price;
                n++;
            }
            snprintf(cursor, sizeof cursor, "%s", r.next_cursor);
            market_search_result_cleanup(&r);
        } while (cursor[0]);
        assert_int_equal(n, total);
        assert_true(total > 5);
    }
}

/* ---- concurrent purchases: the indexes stay the market's ---- */

#define BUYERS 64
#define RUSH_ITEMS 96

struct buyer {
    market *m;
    char id[16];
    int first, ok;
};

/* Buys every listing of the rush, from its own first one on: half of them race. */
static void *buy_all(void *arg) {
    struct buyer *b = arg;
    market_conn *c = market_conn_new(b->m, NULL);
    if (!c) return NULL;
    for (int k = 0; k < 8; k++) {
        int i = (b->first + k * 11) % RUSH_ITEMS;
        char item[32], seller[32];
        snprintf(item, sizeof item, "r%d", i);
        snprintf(seller, sizeof seller, "v%d", i % 8);
        market_purchase_result res;
        b->ok += market_purchase(c, REALM, b->id, seller, item, -1, &res) == MARKET_OK;
    }
    market_conn_free(c);
    return NULL;
}

/* Seeds the rush: sellers v0..v7 list items r0..r<RUSH_ITEMS-1> at prices 1..9, and the
 * BUYERS buyers of b, made here, have funds. */
static void seed_rush(struct fx *f, struct buyer *b) {
    market_world *w = market_world_new();
    assert_non_null(w);
    char id[32], item[32];
    for (int v = 0; v < 8; v++) {
        snprintf(id, sizeof id, "v%d", v);
        assert_int_equal(market_world_add_player(w, id, NULL, 0), MARKET_OK);
    }
    for (int i = 0; i < RUSH_ITEMS; i++) {
        snprintf(id, sizeof id, "v%d", i % 8);
        snprintf(item, sizeof item, "r%d", i);
        assert_int_equal(market_world_add_listing(w, id, item, 1 + i % 9), MARKET_OK);
    }
    for (int i = 0; i < BUYERS; i++) {
        b[i] = (struct buyer){.m = f->m, .first = (i * 5) % RUSH_ITEMS};
        snprintf(b[i].id, sizeof b[i].id, "b%d", i);
        assert_int_equal(market_world_add_player(w, b[i].id, NULL, 100000), MARKET_OK);
    }
    assert_int_equal(market_world_store(f->c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
}

/* Runs the buyers of b at once, and meanwhile(f) (NULL: nothing) while they buy. Returns
 * how many purchases they made. */
static int rush(struct fx *f, struct buyer *b, void (*meanwhile)(struct fx *)) {
    pthread_t t[BUYERS];
    for (int i = 0; i < BUYERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, buy_all, &b[i]), 0);
    if (meanwhile) meanwhile(f);
    int ok = 0;
    for (int i = 0; i < BUYERS; i++) {
        pthread_join(t[i], NULL);
        ok += b[i].ok;
    }
    return ok;
}

static void test_indexes_match_market_after_concurrent_purchases(void **state) {
    struct fx *f = *state;
    static struct buyer b[BUYERS];
    char id[32];
    seed_rush(f, b);
    int ok = rush(f, b, NULL);
    market_audit_report a;
    assert_int_equal(market_audit(f->c, REALM, &a), MARKET_OK);
    assert_int_equal(a.index_mismatch, 0);
    assert_int_equal(a.items_misplaced, 0);
    assert_int_equal(RUSH_ITEMS - (int)a.items_listed, ok);
    assert_true(ok > 0);
    /* every search agrees with what is left */
    market_search_result r = search(f->c, (market_search_query){.limit = 1000});
    assert_int_equal(r.total, a.items_listed);
    assert_int_equal(r.n, a.items_listed);
    market_search_result_cleanup(&r);
    size_t by_seller = 0;
    for (int v = 0; v < 8; v++) {
        snprintf(id, sizeof id, "v%d", v);
        r = search(f->c, (market_search_query){.seller = id, .limit = 1000});
        by_seller += r.total;
        market_search_result_cleanup(&r);
    }
    assert_int_equal(by_seller, a.items_listed);
}

/* ---- seeding and rebuilding ---- */

static void test_reseed_without_reset_moves_the_index_entry(void **state) {
    struct fx *f = *state;
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "A", "Alice", 0), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "A", "axe", 700), MARKET_OK); /* was 500 */
    assert_int_equal(market_world_add_listing(w, "A", "bow", 50), MARKET_OK);  /* unchanged */
    assert_int_equal(market_world_store(f->c, REALM, w, 0), MARKET_OK);
    market_world_free(w);
    expect_page(f->c, (market_search_query){.item = "axe", .limit = 5}, "axe.A:700", 1, 0);
    expect_page(f->c, (market_search_query){.min_price = 500, .max_price = 500, .limit = 5}, "", 0,
                0);
    assert_indexed(f->c);
}

static void test_reindex_rebuilds_deleted_indexes(void **state) {
    struct fx *f = *state;
    char t[32];
    redis_unlink_matching("idx:{main}:*");
    redis_do("ZADD idx:{main}:seller:X 1 %s", "stale"); /* a stray entry */
    redis_do("ZADD idx:{main}:all 0 %s", "0000000000001:stale.X"); /* the former layout */
    market_audit_report a;
    assert_int_equal(market_audit(f->c, REALM, &a), MARKET_OK);
    assert_int_equal(a.index_mismatch, 3 * SHOP + 2); /* item, seller and names entries */
    expect_page(f->c, (market_search_query){.seller = "A", .limit = 5}, "", 0, 0);
    size_t n = 0;
    assert_int_equal(market_reindex(f->c, REALM, &n), MARKET_OK);
    assert_int_equal(n, SHOP);
    assert_indexed(f->c);
    redis_text(t, sizeof t, "EXISTS idx:{main}:all %s", "idx:{main}:seller:X");
    assert_string_equal(t, "0");
    expect_page(f->c, (market_search_query){.seller = "A", .limit = 5},
                "bow.A:50,cap.A:50,axe.A:500", 3, 0);
    expect_page(f->c, (market_search_query){.limit = 2}, "gem.C:10,bow.A:50", SHOP, 1);
    /* an emptied market empties its indexes; a bad realm is refused */
    redis_do("DEL %s", "market:{main}");
    assert_int_equal(market_reindex(f->c, REALM, &n), MARKET_OK);
    assert_int_equal(n, 0);
    assert_indexed(f->c);
    expect_page(f->c, (market_search_query){.limit = 5}, "", 0, 0);
    assert_int_equal(market_reindex(f->c, "a b", &n), MARKET_ERR_INVALID);
}

/* The sweep: an entry whose listing is gone goes, one at another price takes its listing's,
 * and a key no listing has goes. */
static void test_reindex_removes_stale_member_and_fixes_wrong_score(void **state) {
    struct fx *f = *state;
    char t[32];
    redis_do("ZADD idx:{main}:item:axe 500 %s", "Z");   /* no listing axe.Z */
    redis_do("ZADD idx:{main}:seller:A 999 %s", "bow"); /* bow.A is listed at 50 */
    redis_do("ZADD idx:{main}:item:ghost 5 %s", "A");   /* nobody lists ghost */
    redis_do("ZADD idx:{main}:names 0 %s", "ghost.A");  /* nor in the names index */
    redis_do("ZREM idx:{main}:names %s", "axe.A");      /* which lacks a listing's */
    market_audit_report a;
    assert_int_equal(market_audit(f->c, REALM, &a), MARKET_OK);
    assert_int_equal(a.index_mismatch, 6); /* bow.A: missing at 50, extra at 999 */
    size_t n = 0;
    assert_int_equal(market_reindex(f->c, REALM, &n), MARKET_OK);
    assert_int_equal(n, SHOP);
    assert_indexed(f->c);
    redis_text(t, sizeof t, "ZSCORE idx:{main}:item:axe %s", "Z");
    assert_string_equal(t, "nil");
    redis_text(t, sizeof t, "ZSCORE idx:{main}:seller:A %s", "bow");
    assert_string_equal(t, "50");
    redis_text(t, sizeof t, "EXISTS %s", "idx:{main}:item:ghost");
    assert_string_equal(t, "0");
    redis_text(t, sizeof t, "ZSCORE idx:{main}:names %s", "ghost.A");
    assert_string_equal(t, "nil");
    redis_text(t, sizeof t, "ZSCORE idx:{main}:names %s", "axe.A");
    assert_string_equal(t, "0");
    expect_page(f->c, (market_search_query){.seller = "A", .limit = 5},
                "bow.A:50,cap.A:50,axe.A:500", 3, 0);
    expect_page(f->c, (market_search_query){.item = "axe", .limit = 5}, "axe.A:500", 1, 0);
}

/* Rebuilds the indexes, again while the market keeps changing too fast for it (ERR_CONFLICT:
 * the purchases end in the meantime). */
static void reindex_meanwhile(struct fx *f) {
    size_t n = 0;
    int rc, tries = 0;
    while ((rc = market_reindex(f->c, REALM, &n)) == MARKET_ERR_CONFLICT && ++tries < 1000) {
    }
    if (rc != MARKET_OK)
        fail_msg("reindex: %s (%s)", market_strerror(rc), market_conn_errstr(f->c));
    assert_true(n <= RUSH_ITEMS);
}

/* market_reindex() while purchases run: each of its rounds commits only what the market
 * holds at that moment, so when the purchases are done the indexes are the market's. */
static void test_reindex_while_purchases_run(void **state) {
    struct fx *f = *state;
    static struct buyer b[BUYERS];
    seed_rush(f, b);
    redis_unlink_matching("idx:{main}:*");
    redis_do("ZADD idx:{main}:seller:v0 1 %s", "gone"); /* a stray entry */
    int ok = rush(f, b, reindex_meanwhile);
    market_audit_report a;
    assert_int_equal(market_audit(f->c, REALM, &a), MARKET_OK);
    assert_int_equal(a.index_mismatch, 0);
    assert_int_equal(a.items_misplaced, 0);
    assert_int_equal(RUSH_ITEMS - (int)a.items_listed, ok);
}

/* More listings than one round trip of the rebuild reads. */
static void test_reindex_many_listings_in_chunks(void **state) {
    struct fx *f = *state;
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_generate(w, 50, 2500, 1000, 1, 100, 9), MARKET_OK);
    assert_int_equal(market_world_store(f->c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    assert_indexed(f->c);
    redis_unlink_matching("idx:{main}:item:*");
    size_t n = 0;
    assert_int_equal(market_reindex(f->c, REALM, &n), MARKET_OK);
    assert_int_equal(n, 2500);
    assert_indexed(f->c);
    market_search_result r = search(f->c, (market_search_query){.item = "i2499", .limit = 5});
    assert_int_equal(r.n, 1);
    assert_string_equal(r.listings[0].seller, "p49");
    market_search_result_cleanup(&r);
    /* all of them at one price: more than a round reads, taken whole */
    w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_generate(w, 50, 2500, 1000, 7, 7, 9), MARKET_OK);
    assert_int_equal(market_world_store(f->c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    redis_unlink_matching("idx:{main}:seller:*");
    assert_int_equal(market_reindex(f->c, REALM, &n), MARKET_OK);
    assert_int_equal(n, 2500);
    assert_indexed(f->c);
    r = search(f->c, (market_search_query){.seller = "p3", .limit = 100});
    assert_int_equal(r.total, 50);
    market_search_result_cleanup(&r);
}

static void test_reindex_refuses_a_market_entry_that_is_no_listing(void **state) {
    struct fx *f = *state;
    redis_do("ZADD market:{main} 5 %s", "nodot");
    size_t n = 7;
    assert_int_equal(market_reindex(f->c, REALM, &n), MARKET_ERR_STORE);
    assert_non_null(strstr(market_conn_errstr(f->c), "not a listing"));
    assert_int_equal(n, 0);
    redis_do("ZREM market:{main} %s", "nodot");
    assert_indexed(f->c); /* the indexes were left as they were */
}

/* bin/market-seed --reindex ($MARKET_SEED_BIN): rebuilds, says so, exits 0; refuses to be
 * mixed with a fixture or --generate (exit 2). */
static void test_seed_tool_reindex(void **state) {
    struct fx *f = *state;
    const char *bin = getenv("MARKET_SEED_BIN");
    if (!bin || !*bin) bin = "bin/market-seed";
    redis_unlink_matching("idx:{main}:*");
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "%s --redis %s --reindex | grep -q '^reindexed .* realm main: 10 listings'", bin,
             redis.url);
    assert_int_equal(system(cmd), 0);
    assert_indexed(f->c);
    expect_page(f->c, (market_search_query){.item = "gem", .limit = 5}, "gem.C:10", 1, 0);
    snprintf(cmd, sizeof cmd, "%s --redis %s --reindex fixtures/demo.json 2>/dev/null", bin,
             redis.url);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    snprintf(cmd, sizeof cmd, "%s --redis %s --realm 'a b' --reindex 2>/dev/null", bin, redis.url);
    st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_search_every_listing_cheapest_then_dearest),
        T(test_search_filters_by_item_seller_and_price),
        T(test_search_seller_exists_reported),
        T(test_search_reads_units_and_refuses_unreadable_ones),
        T(test_search_bad_query_invalid),
        T(test_search_follows_list_unlist_purchase),
        T(test_search_by_item_prefix_pages_by_name),
        T(test_search_by_item_prefix_bad_query_invalid),
        T(test_reindex_rebuilds_the_names_index),
        T(test_cursor_pages_ascending_while_market_changes),
        T(test_cursor_pages_descending_while_market_changes),
        T(test_cursor_pages_of_a_seller_with_prices),
        T(test_indexes_match_market_after_concurrent_purchases),
        T(test_reseed_without_reset_moves_the_index_entry),
        T(test_reindex_rebuilds_deleted_indexes),
        T(test_reindex_removes_stale_member_and_fixes_wrong_score),
        T(test_reindex_while_purchases_run),
        T(test_reindex_many_listings_in_chunks),
        T(test_reindex_refuses_a_market_entry_that_is_no_listing),
        T(test_seed_tool_reindex),
    };
    static const enum market_strategy all[] = {MARKET_STRATEGY_MARKET, MARKET_STRATEGY_ITEM,
                                               MARKET_STRATEGY_OPTIMISTIC};
    int failed = 0;
    for (size_t s = 0; s < 3; s++) {
        char name[64];
        strategy = all[s];
        snprintf(name, sizeof name, "market search (integration, strategy %s)",
                 market_strategy_name(strategy));
        failed += _cmocka_run_group_tests(name, tests, sizeof tests / sizeof *tests, group_setup,
                                          group_teardown);
    }
    return failed;
}
