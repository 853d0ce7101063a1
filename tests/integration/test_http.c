/* test_http.c - the whole service over HTTP against a real redis-server.
 *
 * The server runs in-process (server_start on port 0) with the redis lock;
 * a few tests run the real bin/market-server binary to check flags and the
 * graceful stop. Every refused request must leave the store exactly as it
 * was (compared by a full fingerprint of the market keys).
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <hiredis.h>
#include <jansson.h>

#include "tests/helpers/cmocka_all.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include "api/api.h"
#include "api/api_impl.h"
#include "lock/lock.h"
#include "rconn/rconn.h"
#include "market/market.h"
#include "server/server.h"
#include "tests/helpers/http_client.h"
#include "tests/helpers/demo_world.h"
#include "tests/helpers/redis_proc.h"
#include "tests/helpers/server_proc.h"

#define REALM MARKET_REALM_DEFAULT /* the realm these tests use */

static th_redis redis;

struct fx {
    server *srv;
    int port;
};

/* ---- helpers ---- */

static void seed_demo_in(const char *realm) { th_world_store(redis.url, realm, th_demo_world()); }

static void seed_demo(void) { seed_demo_in(REALM); }

static uint32_t next_stall_ms; /* test hook for the next server started */
static char next_strategy[16]; /* strategy of the next server started; "": the default */
static unsigned next_threads;   /* event-loop threads of the next server started; 0: 4 */
static const char *next_auth_key; /* an --auth-key of the next server started, or NULL */
static const char *next_audience; /* the --auth-audience of the next server started, or NULL */
static const char *next_admin;    /* the --admin-secret of the next server started, or NULL */
static int next_public_parties;   /* --public-trade-parties for the next server started */

static server *start_with(uint32_t acquire_ms, const char *secret, int *port) {
    server_config cfg;
    server_config_defaults(&cfg);
    cfg.test_stall_ms = next_stall_ms;
    next_stall_ms = 0;
    if (next_strategy[0]) snprintf(cfg.strategy, sizeof cfg.strategy, "%s", next_strategy);
    next_strategy[0] = '\0';
    if (secret)
        snprintf(cfg.auth_secret, sizeof cfg.auth_secret, "%s", secret);
    else
        cfg.no_auth = 1;
    if (next_auth_key) snprintf(cfg.auth_keys, sizeof cfg.auth_keys, "%s\n", next_auth_key);
    if (next_audience) snprintf(cfg.auth_audience, sizeof cfg.auth_audience, "%s", next_audience);
    next_auth_key = next_audience = NULL;
    if (next_admin) snprintf(cfg.admin_secret, sizeof cfg.admin_secret, "%s", next_admin);
    cfg.trade_parties_public = next_public_parties;
    next_admin = NULL;
    next_public_parties = 0;
    snprintf(cfg.listen, sizeof cfg.listen, "127.0.0.1:0");
    snprintf(cfg.redis, sizeof cfg.redis, "%s", redis.url);
    cfg.threads = next_threads ? next_threads : 4;
    next_threads = 0;
    cfg.acquire_timeout_ms = acquire_ms;
    cfg.log_level = SERVER_LOG_ERROR;
    int err;
    char why[256];
    server *s = server_start(&cfg, &err, why, sizeof why);
    assert_non_null(s);
    *port = server_port(s);
    assert_true(*port > 0);
    return s;
}

static server *start(uint32_t acquire_ms, int *port) { return start_with(acquire_ms, NULL, port); }

/* Sends a request and asserts its status; returns the parsed body (new
 * reference; caller decrefs). */
static json_t *call(int port, const char *method, const char *path, const char *body,
                    long status) {
    return th_http_json(port, method, path, NULL, body, status);
}

static void assert_error(json_t *j, const char *code) {
    const char *got = json_string_value(json_object_get(j, "error"));
    assert_non_null(got);
    assert_string_equal(got, code);
}

static const char purchase_axe[] = "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}";

/* Sends raw request bytes req[0..len) (see th_http_raw) and asserts the
 * status; returns the parsed JSON body (new reference; caller decrefs). */
static json_t *call_raw(int port, const char *req, size_t len, long status) {
    th_http r;
    assert_int_equal(th_http_raw(port, req, len, &r), 0);
    return th_http_json_of(&r, status, "raw request");
}

/* Formats "<method> <target> HTTP/1.1" + headers + purchase_axe (POST) into
 * out; target is tlen bytes (it may hold a NUL). Returns the length. */
static size_t raw_request(char *out, size_t outlen, const char *method, const char *target,
                          size_t tlen, const char *headers) {
    int post = strcmp(method, "POST") == 0;
    int n = snprintf(out, outlen, "%s ", method);
    assert_true(n > 0 && (size_t)n + tlen < outlen);
    memcpy(out + n, target, tlen);
    size_t len = (size_t)n + tlen;
    n = snprintf(out + len, outlen - len,
                 " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s"
                 "Content-Length: %zu\r\n\r\n%s",
                 headers ? headers : "", post ? strlen(purchase_axe) : (size_t)0,
                 post ? purchase_axe : "");
    assert_true(n > 0 && (size_t)n < outlen - len);
    return len + (size_t)n;
}

static int fx_setup(void **state) {
    struct fx *f = calloc(1, sizeof *f);
    seed_demo();
    f->srv = start(1000, &f->port);
    *state = f;
    return 0;
}

static int fx_teardown(void **state) {
    struct fx *f = *state;
    server_stop(f->srv);
    free(f);
    return 0;
}

/* ---- the classic trade ---- */

static void test_http_classic_trade_then_not_listed(void **state) {
    struct fx *f = *state;
    json_t *j = call(f->port, "POST", "/purchase", purchase_axe, 200);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "purchased");
    assert_int_equal(json_integer_value(json_object_get(j, "buyer_funds")), 300);
    assert_int_equal(json_integer_value(json_object_get(j, "price")), 500);
    assert_string_equal(json_string_value(json_object_get(j, "item")), "axe");
    json_decref(j);

    j = call(f->port, "POST", "/purchase", purchase_axe, 404);
    assert_error(j, "item_not_listed");
    json_decref(j);

    j = call(f->port, "GET", "/players/B", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "funds")), 300);
    json_t *inv = json_object_get(j, "inventory");
    assert_int_equal(json_array_size(inv), 1);
    assert_string_equal(json_string_value(json_array_get(inv, 0)), "axe");
    json_decref(j);

    j = call(f->port, "GET", "/players/A", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "funds")), 600);
    json_decref(j);
}

/* GET /items/{item}/history: C lists arrows, B buys some twice: one
 * candle (or two, across a minute's end) of the units, at their price; a
 * unique item has none; what is no history is a 400. */
static void test_http_price_history(void **state) {
    struct fx *f = *state;
    json_t *j = call(f->port, "POST", "/list",
                     "{\"seller\":\"C\",\"item\":\"arrow\",\"price\":2,\"quantity\":30}", 201);
    json_decref(j);
    static const char buy[] =
        "{\"buyer\":\"B\",\"seller\":\"C\",\"item\":\"arrow\",\"quantity\":4}";
    for (int i = 0; i < 2; i++)
        json_decref(call(f->port, "POST", "/purchase", buy, 200));
    json_decref(call(f->port, "POST", "/purchase", purchase_axe, 200));
    j = call(f->port, "GET", "/items/arrow/history", NULL, 200);
    assert_string_equal(json_string_value(json_object_get(j, "interval")), "1m");
    json_t *k = json_object_get(j, "candles");
    assert_true(json_array_size(k) == 1 || json_array_size(k) == 2);
    json_int_t volume = 0;
    for (size_t i = 0; i < json_array_size(k); i++) {
        json_t *c = json_array_get(k, i);
        assert_int_equal(json_integer_value(json_object_get(c, "open")), 2);
        assert_int_equal(json_integer_value(json_object_get(c, "close")), 2);
        volume += json_integer_value(json_object_get(c, "volume"));
    }
    assert_int_equal(volume, 8);
    json_decref(j);
    j = call(f->port, "GET", "/items/arrow/history?interval=1d", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "candles")), 1);
    json_decref(j);
    j = call(f->port, "GET", "/items/axe/history?interval=1h", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "candles")), 0);
    json_decref(j);
    static const char *const bad[] = {"/items/arrow/history?interval=5m",
                                      "/items/arrow/history?from=10&to=9",
                                      "/items/arrow/history?from=0&to=86400000",
                                      "/items/arrow/history?to=x", "/items/a.b/history"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        j = call(f->port, "GET", bad[i], NULL, 400);
        assert_error(j, "bad_request");
        json_decref(j);
    }
}

static void test_http_insufficient_funds_402_nothing_moved(void **state) {
    struct fx *f = *state;
    char *before = th_store_fingerprint(redis.port);
    json_t *j = call(f->port, "POST", "/purchase",
                     "{\"buyer\":\"D\",\"seller\":\"A\",\"item\":\"axe\"}", 402);
    assert_error(j, "insufficient_funds");
    json_decref(j);
    char *after = th_store_fingerprint(redis.port);
    assert_string_equal(before, after);
    free(before);
    free(after);
}

static void test_http_price_changed_409_with_price(void **state) {
    struct fx *f = *state;
    json_t *j = call(f->port, "POST", "/purchase",
                     "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\",\"price\":450}", 409);
    assert_error(j, "price_changed");
    assert_int_equal(json_integer_value(json_object_get(j, "price")), 500);
    json_decref(j);
}

static void test_http_list_unlist_and_market(void **state) {
    struct fx *f = *state;
    json_t *j = call(f->port, "POST", "/list",
                     "{\"seller\":\"C\",\"item\":\"sword-1\",\"price\":99}", 201);
    json_decref(j);
    j = call(f->port, "POST", "/list", "{\"seller\":\"B\",\"item\":\"sword-1\",\"price\":99}", 404);
    assert_error(j, "item_not_held");
    json_decref(j);
    j = call(f->port, "GET", "/market?limit=2&offset=0", NULL, 200);
    json_t *l = json_object_get(j, "listings");
    assert_int_equal(json_array_size(l), 2);
    assert_int_equal(json_integer_value(json_object_get(j, "total")), 7);
    /* cheapest first: potion-1 at 25, then sword-1 at 99 */
    assert_string_equal(json_string_value(json_object_get(json_array_get(l, 0), "item")),
                        "potion-1");
    assert_string_equal(json_string_value(json_object_get(json_array_get(l, 1), "item")),
                        "sword-1");
    json_decref(j);
    j = call(f->port, "POST", "/unlist", "{\"seller\":\"C\",\"item\":\"sword-1\"}", 200);
    assert_int_equal(json_integer_value(json_object_get(j, "price")), 99);
    json_decref(j);
    j = call(f->port, "POST", "/unlist", "{\"seller\":\"C\",\"item\":\"sword-1\"}", 404);
    assert_error(j, "item_not_listed");
    json_decref(j);
}

/* ---- searches and a player's listings ---- */

/* "item.seller:price,..." of a page body's listings. */
static void listings_text(json_t *j, char *out, size_t outlen) {
    size_t at = 0, i;
    json_t *e;
    out[0] = '\0';
    json_array_foreach(json_object_get(j, "listings"), i, e) {
        at += (size_t)snprintf(out + at, outlen - at, "%s%s.%s:%lld", i ? "," : "",
                               json_string_value(json_object_get(e, "item")),
                               json_string_value(json_object_get(e, "seller")),
                               (long long)json_integer_value(json_object_get(e, "price")));
        if (at >= outlen) break;
    }
}

/* GETs path, checks its listings, total and whether a next page is offered; returns the
 * next_cursor (static, "" when null). */
static const char *expect_listings(int port, const char *path, const char *want, long total) {
    static char next[256];
    json_t *j = call(port, "GET", path, NULL, 200);
    char got[1024];
    listings_text(j, got, sizeof got);
    if (strcmp(got, want) != 0) fail_msg("%s\n  got  %s\n  want %s", path, got, want);
    assert_int_equal(json_integer_value(json_object_get(j, "total")), total);
    json_t *c = json_object_get(j, "next_cursor");
    assert_non_null(c); /* present on every page, null on the last */
    snprintf(next, sizeof next, "%s", json_is_string(c) ? json_string_value(c) : "");
    if (!json_is_string(c)) assert_true(json_is_null(c));
    json_decref(j);
    return next;
}

static void test_http_market_search_filters_sorts_and_cursors(void **state) {
    struct fx *f = *state;
    char path[512];
    const char *next =
        expect_listings(f->port, "/market?seller=C", "potion-1.C:25,sword-2.C:1200", 2);
    assert_string_equal(next, "");
    expect_listings(f->port, "/market?seller=E&sort=-price", "staff-6.E:4000,cloak-5.E:750", 2);
    expect_listings(f->port, "/market?item=axe", "axe.A:500", 1);
    expect_listings(f->port, "/market?item=axe&seller=C", "", 0);
    expect_listings(f->port, "/market?min_price=300&max_price=750",
                    "shield-8.D:300,axe.A:500,cloak-5.E:750", 3);
    expect_listings(f->port, "/realms/main/market?max_price=300&sort=-price",
                    "shield-8.D:300,potion-1.C:25", 2);
    /* pages of 2, dearest first, with the cursor each page gives */
    next =
        expect_listings(f->port, "/market?sort=-price&limit=2", "staff-6.E:4000,sword-2.C:1200", 6);
    assert_string_equal(next, "0000000001200:sword-2.C");
    snprintf(path, sizeof path, "/market?sort=-price&limit=2&cursor=%s", next);
    next = expect_listings(f->port, path, "cloak-5.E:750,axe.A:500", 6);
    json_t *j = call(f->port, "POST", "/purchase", purchase_axe, 200); /* bought meanwhile */
    json_decref(j);
    snprintf(path, sizeof path, "/market?sort=-price&limit=2&cursor=%s", next);
    next = expect_listings(f->port, path, "shield-8.D:300,potion-1.C:25", 5);
    assert_string_equal(next, ""); /* nothing after potion-1 */
    /* the pages by offset, as before, also give the cursor to go on with */
    j = call(f->port, "GET", "/market?limit=2", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "offset")), 0);
    assert_string_equal(json_string_value(json_object_get(j, "next_cursor")),
                        "0000000000300:shield-8.D");
    json_decref(j);
    expect_listings(f->port, "/market?cursor=0000000000300:shield-8.D&limit=2",
                    "cloak-5.E:750,sword-2.C:1200", 5);
    j = call(f->port, "GET", "/market?limit=2&offset=4", NULL, 200);
    assert_true(json_is_null(json_object_get(j, "next_cursor"))); /* the last page */
    json_decref(j);
    j = call(f->port, "GET", "/market?item=sword-2", NULL, 200);
    assert_null(json_object_get(j, "offset")); /* a search has no offset */
    assert_int_equal(json_integer_value(json_object_get(j, "limit")), 50);
    json_decref(j);
}

/* GET /market?item_prefix=: the listings whose item starts with it, by name, limit a page,
 * cursors joining the pages; a bad prefix is a 400 JSON error that changes nothing. */
static void test_http_market_search_by_item_prefix(void **state) {
    struct fx *f = *state;
    char path[512];
    const char *next = expect_listings(f->port, "/market?item_prefix=s&limit=2",
                                       "shield-8.D:300,staff-6.E:4000", 3);
    assert_string_equal(next, "0000000004000:staff-6.E");
    snprintf(path, sizeof path, "/market?item_prefix=s&limit=2&cursor=%s", next);
    next = expect_listings(f->port, path, "sword-2.C:1200", 3);
    assert_string_equal(next, "");
    expect_listings(f->port, "/market?item_prefix=potion", "potion-1.C:25", 1);
    expect_listings(f->port, "/realms/main/market?item_prefix=sw", "sword-2.C:1200", 1);
    expect_listings(f->port, "/market?item_prefix=x", "", 0);
    static const struct {
        const char *path, *detail;
    } bad[] = {
        {"/market?item_prefix=", "query parameter 'item_prefix' must match [A-Za-z0-9_-]{1,64}"},
        {"/market?item_prefix=po%2Ft",
         "query parameter 'item_prefix' must match [A-Za-z0-9_-]{1,64}"},
        {"/market?item_prefix=s&sort=-price",
         "query parameter 'item_prefix' cannot be combined with item, seller, min_price, "
         "max_price or sort (a prefix search is in item order)"},
        {"/market?item_prefix=s&limit=1001",
         "query parameter 'limit' must be an integer in 1..1000"},
        {"/market?item_prefix=s&cursor=0000000000500:axe.A",
         "query parameter 'cursor' belongs to another search (its listing is outside this "
         "search's item, seller or prices)"},
    };
    char *before = th_store_fingerprint(redis.port);
    assert_non_null(before);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *j = call(f->port, "GET", bad[i].path, NULL, 400);
        assert_error(j, "bad_request");
        assert_string_equal(json_string_value(json_object_get(j, "detail")), bad[i].detail);
        json_decref(j);
    }
    char *after = th_store_fingerprint(redis.port);
    assert_string_equal(before, after);
    free(before);
    free(after);
}

static void test_http_player_listings_and_player_body(void **state) {
    struct fx *f = *state;
    const char *next = expect_listings(f->port, "/players/C/listings?limit=1", "potion-1.C:25", 2);
    char path[256];
    snprintf(path, sizeof path, "/players/C/listings?limit=1&cursor=%s", next);
    next = expect_listings(f->port, path, "sword-2.C:1200", 2);
    assert_string_equal(next, "");
    expect_listings(f->port, "/players/B/listings", "", 0); /* B lists nothing */
    json_t *j = call(f->port, "GET", "/players/E/listings", NULL, 200);
    assert_string_equal(json_string_value(json_object_get(j, "id")), "E");
    assert_int_equal(json_integer_value(json_object_get(j, "limit")), 50);
    json_decref(j);
    j = call(f->port, "GET", "/players/ghost/listings", NULL, 404);
    assert_error(j, "player_not_found");
    json_decref(j);
    j = call(f->port, "GET", "/players/C/listings?cursor=0000000000500:axe.A", NULL, 400);
    assert_error(j, "bad_request");
    json_decref(j);
    /* GET /players/{id} says what the player lists */
    j = call(f->port, "GET", "/players/C", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "listings_total")), 2);
    json_t *l = json_object_get(j, "listings");
    assert_int_equal(json_array_size(l), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(l, 0), "item")),
                        "potion-1");
    assert_int_equal(json_array_size(json_object_get(j, "inventory")), 2); /* not the listed */
    json_decref(j);
    j = call(f->port, "POST", "/list", "{\"seller\":\"C\",\"item\":\"sword-1\",\"price\":99}", 201);
    json_decref(j);
    j = call(f->port, "GET", "/players/C", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "listings_total")), 3);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(j, "listings"), 1), "item")),
                        "sword-1");
    json_decref(j);
}

/* ---- bad input: 4xx with a JSON body, and the store untouched ---- */

static void test_http_bad_inputs_4xx_store_unchanged(void **state) {
    struct fx *f = *state;
    static const struct {
        const char *method, *path, *body;
        long status;
        const char *error;
    } cases[] = {
        {"POST", "/purchase", "{\"buyer\":\"B\",\"seller\":\"A\"", 400, "bad_request"},
        {"POST", "/purchase", "", 400, "bad_request"},
        {"POST", "/purchase", "[]", 400, "bad_request"},
        {"POST", "/purchase", "{\"buyer\":\"B\",\"buyer\":\"C\",\"seller\":\"A\",\"item\":\"axe\"}",
         400, "bad_request"},
        {"POST", "/purchase", "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"} x", 400,
         "bad_request"},
        {"POST", "/purchase", "{\"buyer\":\"B\",\"seller\":\"A\"}", 400, "bad_request"},
        {"POST", "/purchase", "{\"buyer\":7,\"seller\":\"A\",\"item\":\"axe\"}", 400, "bad_request"},
        {"POST", "/purchase", "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\",\"x\":1}", 400,
         "bad_request"},
        {"POST", "/purchase", "{\"buyer\":\"B b\",\"seller\":\"A\",\"item\":\"axe\"}", 400,
         "bad_request"},
        {"POST", "/purchase", "{\"buyer\":\"A\",\"seller\":\"A\",\"item\":\"axe\"}", 400,
         "bad_request"},
        {"POST", "/purchase", "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\",\"price\":-5}",
         400, "bad_request"},
        {"POST", "/purchase", "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\",\"price\":5.5}",
         400, "bad_request"},
        {"POST", "/purchase",
         "{\"buyer\":\"Bxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\","
         "\"seller\":\"A\",\"item\":\"axe\"}",
         400, "bad_request"},
        {"POST", "/list", "{\"seller\":\"C\",\"item\":\"sword-1\",\"price\":0}", 400, "bad_request"},
        {"POST", "/list", "{\"seller\":\"C\",\"item\":\"sword-1\",\"price\":1000000000001}", 400,
         "bad_request"},
        {"POST", "/unlist", "{\"seller\":\"C\"}", 400, "bad_request"},
        {"GET", "/purchase", NULL, 405, "method_not_allowed"},
        {"DELETE", "/players/A", NULL, 405, "method_not_allowed"},
        {"GET", "/nowhere", NULL, 404, "not_found"},
        {"GET", "/players/bad.id", NULL, 400, "bad_request"},
        {"GET", "/players/ghost", NULL, 404, "player_not_found"},
        {"GET", "/market?limit=0", NULL, 400, "bad_request"},
        {"GET", "/market?limit=abc", NULL, 400, "bad_request"},
        {"GET", "/market?sort=name", NULL, 400, "bad_request"},
        {"GET", "/market?min_price=0", NULL, 400, "bad_request"},
        {"GET", "/market?min_price=9&max_price=8", NULL, 400, "bad_request"},
        {"GET", "/market?item=a.b", NULL, 400, "bad_request"},
        {"GET", "/market?cursor=", NULL, 400, "bad_request"},
        {"GET", "/market?cursor=0000000000500:axe", NULL, 400, "bad_request"},
        {"GET", "/market?seller=C&cursor=0000000000500:axe.A", NULL, 400, "bad_request"},
        {"GET", "/market?offset=1&cursor=0000000000500:axe.A", NULL, 400, "bad_request"},
        {"GET", "/market?offset=1&seller=C", NULL, 400, "bad_request"},
        {"GET", "/market?item_prefix=a.b", NULL, 400, "bad_request"},
        {"GET", "/market?item_prefix=a&min_price=5", NULL, 400, "bad_request"},
        {"GET", "/market?offset=1&item_prefix=a", NULL, 400, "bad_request"},
        {"GET", "/players/C/listings?limit=0", NULL, 400, "bad_request"},
        {"GET", "/players/ghost/listings", NULL, 404, "player_not_found"},
        {"POST", "/players/C/listings", "{}", 405, "method_not_allowed"},
        {"POST", "/purchase", "{\"buyer\":\"ghost\",\"seller\":\"A\",\"item\":\"axe\"}", 404,
         "player_not_found"},
    };
    char *before = th_store_fingerprint(redis.port);
    assert_non_null(before);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *j = call(f->port, cases[i].method, cases[i].path, cases[i].body, cases[i].status);
        assert_error(j, cases[i].error);
        json_decref(j);
    }
    char *after = th_store_fingerprint(redis.port);
    assert_string_equal(before, after);
    free(before);
    free(after);
}

static void test_http_body_over_64k_413(void **state) {
    struct fx *f = *state;
    size_t n = 70000;
    char *big = malloc(n + 1);
    memset(big, ' ', n);
    big[0] = '{';
    big[n - 1] = '}';
    big[n] = '\0';
    th_http r;
    assert_int_equal(th_http_do(f->port, "POST", "/purchase", big, n, &r), 0);
    assert_int_equal(r.status, 413);
    assert_non_null(strstr(r.body, "payload_too_large"));
    th_http_cleanup(&r);
    free(big);
}

/* The default --connection-memory (16 KiB, libmicrohttpd's buffer, zeroed after every
 * request) still takes a request with 12 KiB of headers: a purchase behind them is served. */
static void test_http_12k_of_headers_served(void **state) {
    struct fx *f = *state;
    enum { PAD = 12 * 1024 };
    char *header = malloc(PAD + 16);
    assert_non_null(header);
    memcpy(header, "X-Pad: ", 7);
    memset(header + 7, 'p', PAD);
    header[7 + PAD] = '\0';
    th_http r;
    assert_int_equal(th_http_do_header(f->port, "POST", "/purchase", header, purchase_axe,
                                       strlen(purchase_axe), &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"status\":\"purchased\""));
    th_http_cleanup(&r);
    free(header);
}

/* A request's state is kept for the next request of its thread (server/conn.c), with its
 * body's buffer: on one keep-alive connection, a bad body (20 KB: a buffer too large to
 * keep, so freed when the state is given back), then a body too large (413), then a
 * purchase, then no body at all are each judged alone. Were the state's head kept (the
 * 413's mark, or the bad body's length), the purchase would be refused; were the freed
 * buffer still named, the purchase's body would be written into it (ASan). */
static void test_http_kept_request_state_starts_clean(void **state) {
    struct fx *f = *state;
    enum { PAD = 20000, BIG = 70000 };
    static const char bad[] = "{\"buyer\":\"B\"";
    size_t cap = 4 * 1024 + PAD + BIG;
    char *req = malloc(cap);
    assert_non_null(req);
    int n = snprintf(req, cap,
                     "POST /purchase HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %zu\r\n\r\n",
                     PAD + strlen(bad));
    assert_true(n > 0);
    size_t len = (size_t)n;
    memset(req + len, ' ', PAD); /* whitespace before the JSON text */
    len += PAD;
    n = snprintf(req + len, cap - len,
                 "%sPOST /purchase HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n", bad,
                 BIG);
    assert_true(n > 0 && len + (size_t)n + BIG < cap);
    len += (size_t)n;
    memset(req + len, ' ', BIG);
    len += BIG;
    n = snprintf(req + len, cap - len,
                 "POST /purchase HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %zu\r\n\r\n%s"
                 "POST /purchase HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                 "Content-Length: 0\r\n\r\n",
                 strlen(purchase_axe), purchase_axe);
    assert_true(n > 0 && (size_t)n < cap - len);
    len += (size_t)n;
    th_http r;
    assert_int_equal(th_http_raw(f->port, req, len, &r), 0);
    assert_int_equal(r.status, 400);
    /* the answers after the first, in order */
    static const char *const next[] = {"HTTP/1.1 413", "\"status\":\"purchased\"", "HTTP/1.1 400"};
    const char *at = r.body;
    for (size_t i = 0; i < sizeof next / sizeof *next; i++) {
        const char *hit = strstr(at, next[i]);
        if (!hit) fail_msg("answer %zu of 4 is not %s: %s", i + 2, next[i], r.body);
        at = hit + 1;
    }
    assert_null(strstr(at, "HTTP/1.1 200"));
    th_http_cleanup(&r);
    free(req);
    json_t *b = call(f->port, "GET", "/players/B", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(b, "funds")), 300);
    json_decref(b);
}

static void test_http_405_carries_allow(void **state) {
    struct fx *f = *state;
    th_http r;
    assert_int_equal(th_http_do(f->port, "GET", "/purchase", NULL, 0, &r), 0);
    assert_int_equal(r.status, 405);
    assert_non_null(strstr(r.headers, "Allow: POST"));
    th_http_cleanup(&r);
}

/* ---- request framing: what libmicrohttpd would let through ---- */

/* A NUL in the path, decoded from %00 or sent raw, used to cut the path
 * short before routing: "POST /purchase%00x" bought, "GET /players/B%00zz"
 * read B. Every control byte in the path, raw or escaped, is now a 400
 * invalid_path, and the store is untouched. */
static void test_http_control_bytes_in_path_400_store_unchanged(void **state) {
    struct fx *f = *state;
    static const struct {
        const char *method, *target;
        size_t tlen; /* 0: strlen(target) */
    } cases[] = {
        {"POST", "/purchase%00x", 0},
        {"POST", "/purchase%00", 0},
        {"POST", "/purchase\0x", 11}, /* a raw NUL */
        {"POST", "/purchase%0a", 0},
        {"POST", "/purchase\x01", 0},
        {"GET", "/players/B%00zz", 0},
        {"GET", "/players/B%00zz?x=1", 0},
        {"GET", "/players/B\0zz", 13},
        {"GET", "/players/B%1F", 0},
        {"GET", "/players/B%7f", 0},
        {"GET", "/players/B\x7f", 0},
        {"GET", "/players/B\t", 0},
        {"GET", "/healthz%00", 0},
        {"GET", "/metrics%00x", 0},
    };
    char *before = th_store_fingerprint(redis.port);
    assert_non_null(before);
    char req[512];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t tlen = cases[i].tlen ? cases[i].tlen : strlen(cases[i].target);
        size_t len = raw_request(req, sizeof req, cases[i].method, cases[i].target, tlen, NULL);
        json_t *j = call_raw(f->port, req, len, 400);
        assert_error(j, "invalid_path");
        assert_non_null(strstr(json_string_value(json_object_get(j, "detail")), "control byte"));
        json_decref(j);
    }
    char *after = th_store_fingerprint(redis.port);
    assert_string_equal(before, after);
    free(before);
    free(after);
    /* Escapes of anything else are still decoded, and the same raw request
     * with a clean path buys. */
    size_t len = raw_request(req, sizeof req, "GET", "/players/%42", 12, NULL);
    json_t *j = call_raw(f->port, req, len, 200);
    assert_string_equal(json_string_value(json_object_get(j, "id")), "B");
    json_decref(j);
    len = raw_request(req, sizeof req, "POST", "/purchase", 9, NULL);
    j = call_raw(f->port, req, len, 200);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "purchased");
    json_decref(j);
}

/* POSTs the axe purchase once per framing, each a printf format of its
 * headers taking the body's length as %1$zu, over a raw socket: every one must
 * be answered 400 with error code (and detail holding detail, when not
 * NULL), and the store must be as it was. */
static void raw_purchases_refused(int port, const char *const *framings, size_t n,
                                  const char *code, const char *detail) {
    const size_t blen = strlen(purchase_axe);
    char *before = th_store_fingerprint(redis.port);
    assert_non_null(before);
    th_http_timeout_ms = 5000;
    for (size_t i = 0; i < n; i++) {
        char hdr[160], req[512];
        snprintf(hdr, sizeof hdr, framings[i], blen);
        int len = snprintf(req, sizeof req,
                           "POST /purchase HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n%s", hdr,
                           purchase_axe);
        assert_true(len > 0 && (size_t)len < sizeof req);
        json_t *j = call_raw(port, req, (size_t)len, 400);
        assert_error(j, code);
        if (detail)
            assert_non_null(strstr(json_string_value(json_object_get(j, "detail")), detail));
        json_decref(j);
    }
    th_http_timeout_ms = 20000;
    char *after = th_store_fingerprint(redis.port);
    assert_string_equal(before, after);
    free(before);
    free(after);
}

/* POSTs the axe purchase framed by headers (as raw_purchases_refused) and
 * body (a printf format taking the body's length as %1$zu or %1$zx and the body as
 * %2$s; positional throughout): it buys. */
static void raw_purchase_buys(int port, const char *headers, const char *body) {
    char fmt[256], req[512];
    snprintf(fmt, sizeof fmt,
             "POST /purchase HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s\r\n%s",
             headers, body);
    int len = snprintf(req, sizeof req, fmt, strlen(purchase_axe), purchase_axe);
    assert_true(len > 0 && (size_t)len < sizeof req);
    json_t *j = call_raw(port, req, (size_t)len, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "buyer_funds")), 300);
    json_decref(j);
}

/* Two Content-Length headers used to be accepted, the first one framing the
 * body (a proxy in front may frame by the other: request smuggling). Any
 * repeat is refused, equal values included, before the body is read, and
 * the server closes the connection (th_http_raw() reads until it does; the
 * requests do not ask for it). */
static void test_http_duplicate_content_length_400(void **state) {
    struct fx *f = *state;
    static const char *const twice[] = {
        "Content-Length: %1$zu\r\nContent-Length: 5\r\n",
        "Content-Length: 5\r\nContent-Length: %1$zu\r\n",
        "Content-Length: %1$zu\r\nContent-Length: %1$zu\r\n",
        "content-length: %1$zu\r\nCONTENT-LENGTH: %1$zu\r\n",
    };
    raw_purchases_refused(f->port, twice, 4, "bad_request", "Content-Length");
    raw_purchase_buys(f->port, "Content-Length: %1$zu\r\n", "%2$s"); /* one: it buys */
}

/* The query string is part of the target: a NUL there would cut a value
 * short as it cut the path. And a body framed two ways (Transfer-Encoding
 * beside Content-Length, or an encoding other than "chunked") is refused,
 * as a proxy in front could frame it otherwise; plain chunked still works. */
static void test_http_query_control_and_transfer_encoding_400(void **state) {
    struct fx *f = *state;
    static const char nul_query[] = "GET /market?limit=5%00x HTTP/1.1\r\nHost: a\r\n\r\n";
    th_http_timeout_ms = 5000;
    json_t *j = call_raw(f->port, nul_query, strlen(nul_query), 400);
    th_http_timeout_ms = 20000;
    assert_error(j, "invalid_path");
    json_decref(j);
    static const char *const framings[] = {
        "Transfer-Encoding: chunked\r\nContent-Length: %1$zu\r\n",
        "Content-Length: %1$zu\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: gzip\r\nX-Len: %1$zu\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\nX-Len: %1$zu\r\n",
    };
    raw_purchases_refused(f->port, framings, 4, "bad_request", "Transfer-Encoding");
    /* One "chunked", framed right: the purchase goes through. */
    raw_purchase_buys(f->port, "Transfer-Encoding: chunked\r\n", "%1$zx\r\n%2$s\r\n0\r\n\r\n");
}

/* ---- dependencies down ---- */

/* Asserts a /healthz 503: store_unavailable, "status":"unavailable", a
 * detail holding want, and Retry-After. */
static void assert_unhealthy(int port, const char *want) {
    th_http r;
    assert_int_equal(th_http_do(port, "GET", "/healthz", NULL, 0, &r), 0);
    if (r.status != 503 || !strstr(r.body, want))
        fprintf(stderr, "healthz -> %ld %s (want 503 '%s')\n", r.status, r.body, want);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.headers, "Retry-After: 1"));
    json_error_t e;
    json_t *j = json_loads(r.body, 0, &e);
    th_http_cleanup(&r);
    assert_non_null(j);
    assert_error(j, "store_unavailable");
    assert_string_equal(json_string_value(json_object_get(j, "status")), "unavailable");
    const char *detail = json_string_value(json_object_get(j, "detail"));
    assert_non_null(detail);
    assert_non_null(strstr(detail, want));
    json_decref(j);
}

static void assert_healthy(int port) {
    json_t *j = call(port, "GET", "/healthz", NULL, 200);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "ok");
    json_decref(j);
}

/* Runs one command on the test Redis and asserts it answered OK. */
static void redis_ok(const char *fmt, ...) {
    redisContext *c = redisConnect("127.0.0.1", redis.port);
    assert_non_null(c);
    assert_int_equal(c->err, 0);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    if (r->type != REDIS_REPLY_STATUS) fprintf(stderr, "redis: %s\n", r->str ? r->str : "?");
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(c);
}

/* Puts the test Redis back as the other tests expect it, whatever a test
 * that changed it left: a master that takes writes. */
static int fx_teardown_redis(void **state) {
    redisContext *c = redisConnect("127.0.0.1", redis.port);
    if (c && !c->err) {
        static const char *const undo[] = {"REPLICAOF NO ONE", "CONFIG SET min-replicas-to-write 0",
                                           "CONFIG SET maxmemory 0"};
        for (size_t i = 0; i < sizeof undo / sizeof *undo; i++) {
            redisReply *r = redisCommand(c, undo[i]);
            if (r) freeReplyObject(r);
        }
    }
    if (c) redisFree(c);
    return fx_teardown(state);
}

/* /healthz used to PING only, and said 200 while the store was a replica
 * on which every purchase failed. */
static void test_http_healthz_503_when_redis_is_a_replica(void **state) {
    struct fx *f = *state;
    th_redis master = {0};
    assert_int_equal(th_redis_start(&master), 0);
    assert_healthy(f->port);
    redis_ok("REPLICAOF 127.0.0.1 %d", master.port);
    assert_unhealthy(f->port, "redis is a replica");
    json_t *j = call(f->port, "POST", "/purchase", purchase_axe, 503); /* as health said */
    json_decref(j);
    assert_unhealthy(f->port, "redis is a replica"); /* still, whatever the sync did */
    redis_ok("REPLICAOF NO ONE");
    assert_healthy(f->port);
    th_redis_stop(&master);
}

/* A master that answers PING but refuses writes cannot serve purchases
 * either: min-replicas-to-write not met (-NOREPLICAS), maxmemory reached
 * (-OOM). The check's write probe changes nothing. */
static void test_http_healthz_503_when_writes_refused(void **state) {
    struct fx *f = *state;
    char *before = th_store_fingerprint(redis.port);
    assert_non_null(before);
    assert_healthy(f->port);

    redis_ok("CONFIG SET min-replicas-to-write 1");
    assert_unhealthy(f->port, "min-replicas-to-write");
    json_t *j = call(f->port, "POST", "/purchase", purchase_axe, 503);
    json_decref(j);
    redis_ok("CONFIG SET min-replicas-to-write 0");
    assert_healthy(f->port);

    redis_ok("CONFIG SET maxmemory 1");
    assert_unhealthy(f->port, "maxmemory");
    redis_ok("CONFIG SET maxmemory 0");
    assert_healthy(f->port);

    char *after = th_store_fingerprint(redis.port);
    assert_string_equal(before, after); /* nothing was bought, the probes wrote nothing */
    free(before);
    free(after);
}

static void test_http_redis_down_503_then_recovers(void **state) {
    struct fx *f = *state;
    json_t *j = call(f->port, "GET", "/healthz", NULL, 200);
    json_decref(j);
    th_redis_signal(&redis, SIGKILL);
    int64_t t0 = rconn_now_ms();
    j = call(f->port, "POST", "/purchase", purchase_axe, 503);
    assert_error(j, "store_unavailable");
    json_decref(j);
    assert_unhealthy(f->port, "redis does not answer");
    assert_true(rconn_now_ms() - t0 < 3000); /* prompt: no hang */
    assert_int_equal(th_redis_restart(&redis), 0);
    assert_healthy(f->port);
    seed_demo();
    j = call(f->port, "POST", "/purchase", purchase_axe, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "buyer_funds")), 300);
    json_decref(j);
}

static void test_http_lock_held_503_market_busy(void **state) {
    struct fx *f = *state;
    int port;
    server *quick = start(200, &port);
    rconn_addr addr;
    assert_int_equal(rconn_addr_parse(redis.url, &addr), RCONN_OK);
    int err;
    lock_client *l = lock_redis_new(&addr, 1000, &err);
    lock_handle h;
    assert_int_equal(lock_acquire(l, "lock:market:{" MARKET_REALM_DEFAULT "}", 30000, 30000, &h), LOCK_OK);
    th_http r;
    assert_int_equal(th_http_do(port, "POST", "/purchase", purchase_axe, strlen(purchase_axe), &r),
                     0);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "market_busy"));
    assert_non_null(strstr(r.headers, "Retry-After:"));
    th_http_cleanup(&r);
    assert_int_equal(lock_release(l, &h), LOCK_OK);
    json_t *j = call(port, "POST", "/purchase", purchase_axe, 200);
    json_decref(j);
    lock_free(l);
    server_stop(quick);
    (void)f;
}

/* ---- concurrency ---- */

struct pending_buy {
    int port;
    long status;
    atomic_int finished;
};

static void *pending_buy_main(void *arg) {
    struct pending_buy *b = arg;
    th_http r;
    if (th_http_do(b->port, "POST", "/purchase", purchase_axe, strlen(purchase_axe), &r) == 0)
        b->status = r.status;
    th_http_cleanup(&r);
    atomic_store(&b->finished, 1);
    return NULL;
}

/* With one event-loop thread, a purchase waiting for the market lock holds
 * its connection, not the thread: reads on other connections are answered
 * meanwhile, and the purchase completes once the lock is free. */
static void test_http_waiting_purchase_holds_no_thread(void **state) {
    struct fx *f = *state;
    int port;
    next_threads = 1;
    server *one = start(20000, &port);
    rconn_addr addr;
    assert_int_equal(rconn_addr_parse(redis.url, &addr), RCONN_OK);
    int err;
    lock_client *l = lock_redis_new(&addr, 1000, &err);
    assert_non_null(l);
    lock_handle h;
    assert_int_equal(lock_acquire(l, "lock:market:{" MARKET_REALM_DEFAULT "}", 30000, 30000, &h), LOCK_OK);
    struct pending_buy b = {.port = port};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, pending_buy_main, &b), 0);
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    for (int i = 0; i < 5; i++) {
        json_t *j = call(port, "GET", "/players/B", NULL, 200);
        json_decref(j);
        j = call(port, "GET", "/healthz", NULL, 200);
        json_decref(j);
    }
    assert_int_equal(atomic_load(&b.finished), 0); /* still waiting for the lock */
    assert_int_equal(lock_release(l, &h), LOCK_OK);
    pthread_join(th, NULL);
    assert_int_equal(b.status, 200);
    lock_free(l);
    server_stop(one);
    (void)f;
}

struct buyer {
    int port;
    char body[128];
    long status;
    pthread_barrier_t *start;
};

static void *buy(void *arg) {
    struct buyer *b = arg;
    th_http r;
    pthread_barrier_wait(b->start);
    if (th_http_do(b->port, "POST", "/purchase", b->body, strlen(b->body), &r) == 0)
        b->status = r.status;
    th_http_cleanup(&r);
    return NULL;
}

#define BUYERS 16

static void test_http_many_buyers_one_item_one_200(void **state) {
    struct fx *f = *state;
    static const char *const who[] = {"B", "C"}; /* both can afford it */
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, BUYERS);
    struct buyer b[BUYERS];
    pthread_t t[BUYERS];
    for (int i = 0; i < BUYERS; i++) {
        b[i] = (struct buyer){f->port, "", 0, &start};
        snprintf(b[i].body, sizeof b[i].body,
                 "{\"buyer\":\"%s\",\"seller\":\"E\",\"item\":\"cloak-5\"}", who[i % 2]);
        assert_int_equal(pthread_create(&t[i], NULL, buy, &b[i]), 0);
    }
    int ok = 0, gone = 0;
    for (int i = 0; i < BUYERS; i++) {
        pthread_join(t[i], NULL);
        ok += b[i].status == 200;
        gone += b[i].status == 404;
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(ok, 1);
    assert_int_equal(gone, BUYERS - 1);
}

/* Our monotonic clock, in ms. */
static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct lister {
    int port;
    long status;
    long long quantity; /* the units the listing held after this list */
    pthread_barrier_t *start;
};

static void *list_one(void *arg) {
    static const char body[] =
        "{\"seller\":\"A\",\"item\":\"arrow\",\"price\":3,\"quantity\":1}";
    struct lister *l = arg;
    th_http r;
    pthread_barrier_wait(l->start);
    if (th_http_do(l->port, "POST", "/list", body, strlen(body), &r) == 0) {
        l->status = r.status;
        json_t *j = json_loads(r.body ? r.body : "", 0, NULL);
        l->quantity = j ? json_integer_value(json_object_get(j, "quantity")) : -1;
        json_decref(j);
    }
    th_http_cleanup(&r);
    return NULL;
}

#define LISTERS 24
#define LIST_STALL_MS 100

/* Many POST /list at once on one event-loop thread are deferred to the
 * market, not run on the thread: with a pause of LIST_STALL_MS in every
 * batch, run one at a time they would take LISTERS pauses; deferred, they
 * are served in a few batches. Each is answered 201 with the units the
 * listing held after it (1..LISTERS, each once), and the listing holds them
 * all. */
static void test_http_many_lists_deferred(void **state) {
    (void)state;
    int port;
    next_threads = 1;
    next_stall_ms = LIST_STALL_MS;
    server *s = start(20000, &port);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, LISTERS + 1);
    struct lister l[LISTERS];
    pthread_t t[LISTERS];
    for (int i = 0; i < LISTERS; i++) {
        l[i] = (struct lister){port, 0, -1, &start};
        assert_int_equal(pthread_create(&t[i], NULL, list_one, &l[i]), 0);
    }
    pthread_barrier_wait(&start);
    int64_t t0 = mono_ms();
    int seen[LISTERS + 1] = {0};
    for (int i = 0; i < LISTERS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(l[i].status, 201);
        assert_true(l[i].quantity >= 1 && l[i].quantity <= LISTERS);
        seen[l[i].quantity]++;
    }
    int64_t took = mono_ms() - t0;
    pthread_barrier_destroy(&start);
    for (int q = 1; q <= LISTERS; q++) assert_int_equal(seen[q], 1);
    if (took >= LISTERS * LIST_STALL_MS / 2)
        fail_msg("%d lists took %lld ms: not batched", LISTERS, (long long)took);
    json_t *j = call(port, "GET", "/market?item=arrow&seller=A", NULL, 200);
    json_t *first = json_array_get(json_object_get(j, "listings"), 0);
    assert_int_equal(json_integer_value(json_object_get(first, "quantity")), LISTERS);
    json_decref(j);
    server_stop(s);
}

/* ---- the real binary ---- */

static pid_t spawn_server(int port, const char *extra) {
    const char *flags[] = {extra ? extra : "--threads", extra ? "500" : "2", NULL};
    return th_server_spawn(port, redis.url, flags);
}

static int wait_healthy(int port) {
    return th_server_healthy(port, 5000);
}

static int exit_code(pid_t pid) {
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_binary_sigterm_exits_zero(void **state) {
    (void)state;
    int port = th_free_port();
    pid_t pid = spawn_server(port, NULL);
    assert_true(pid > 0);
    assert_int_equal(wait_healthy(port), 0);
    kill(pid, SIGTERM);
    assert_int_equal(exit_code(pid), 0);
}

struct slow_call {
    int port;
    long status;
};

static void *slow_purchase(void *arg) {
    struct slow_call *s = arg;
    th_http r;
    if (th_http_do(s->port, "POST", "/purchase", purchase_axe, strlen(purchase_axe), &r) == 0)
        s->status = r.status;
    th_http_cleanup(&r);
    return NULL;
}

/* A purchase in flight when SIGTERM arrives still completes with 200. */
static void test_binary_sigterm_finishes_in_flight(void **state) {
    (void)state;
    int port = th_free_port();
    pid_t pid = spawn_server(port, "--test-stall-ms");
    assert_int_equal(wait_healthy(port), 0);
    struct slow_call s = {port, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_purchase, &s), 0);
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL); /* the purchase is inside its 500 ms stall */
    kill(pid, SIGTERM);
    pthread_join(t, NULL);
    assert_int_equal(exit_code(pid), 0);
    assert_int_equal(s.status, 200);
}

/* Starts bin/market-server with args (NULL-terminated, after the program
 * name), adding env ("NAME=value") to its environment when not NULL; its
 * stderr goes to a pipe whose read end is put in *errfd. */
static pid_t spawn_args(const char *const *args, const char *env, int *errfd) {
    const char *bin = getenv("MARKET_SERVER_BIN");
    if (!bin) bin = "bin/market-server";
    const char *argv[24] = {bin};
    size_t n = 1;
    while (args[n - 1] && n + 1 < sizeof argv / sizeof *argv) {
        argv[n] = args[n - 1];
        n++;
    }
    argv[n] = NULL;
    int p[2];
    if (pipe(p) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* not left behind by a failed test */
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        if (env) putenv((char *)env);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    *errfd = p[0];
    return pid;
}

/* Reads fd into buf (NUL-terminated) until it holds want, or EOF, or
 * timeout_ms pass. Returns 0 when want was read, else -1. */
static int read_until(int fd, char *buf, size_t buflen, const char *want, int timeout_ms) {
    size_t have = strlen(buf);
    int64_t deadline = rconn_now_ms() + timeout_ms;
    while (!strstr(buf, want)) {
        int64_t left = deadline - rconn_now_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0 || have + 1 >= buflen) return -1;
        ssize_t n = read(fd, buf + have, buflen - have - 1);
        if (n <= 0) return -1;
        have += (size_t)n;
        buf[have] = '\0';
    }
    return 0;
}

/* Waits up to timeout_ms for pid to exit; returns its exit code, or -1
 * after killing it when it would not. */
static int exit_code_within(pid_t pid, int timeout_ms) {
    int st = 0;
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

/* A second server on an address another one listens on used to start (the
 * daemon asked for SO_REUSEPORT), and the two split the traffic silently.
 * It is refused now, naming the address; a restart after a crash is not;
 * servers that are all given --reuse-port (or MARKET_REUSE_PORT=1) share it. */
static void test_binary_busy_address_refused_unless_reuse_port(void **state) {
    (void)state;
    int port = th_free_port();
    char listen[32], err[4096] = "";
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    const char *plain[] = {"--listen", listen, "--redis", redis.url, "--no-auth",
                           "--log-level", "error", NULL};
    const char *shared[] = {"--listen", listen, "--redis", redis.url, "--no-auth",
                            "--log-level", "info", "--reuse-port", NULL};
    const char *by_env[] = {"--listen", listen, "--redis", redis.url, "--no-auth",
                            "--log-level", "info", NULL};
    int fd_a, fd_b, fd_c;

    /* Without the flag: the second one exits 1 and says where and why. */
    pid_t a = spawn_args(plain, NULL, &fd_a);
    assert_true(a > 0);
    assert_int_equal(wait_healthy(port), 0);
    pid_t b = spawn_args(plain, NULL, &fd_b);
    assert_true(b > 0);
    assert_int_equal(exit_code_within(b, 10000), 1);
    (void)read_until(fd_b, err, sizeof err, "\n", 1000);
    close(fd_b);
    if (!strstr(err, listen)) fprintf(stderr, "stderr: %s\n", err);
    assert_non_null(strstr(err, listen));
    assert_non_null(strstr(err, "already in use"));
    assert_non_null(strstr(err, "--reuse-port"));

    /* Refusing a busy address must not refuse a restart: killed while a
     * client holds a connection, the server leaves it in TIME_WAIT, and a
     * new one starts on the address at once. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    static const char ping[] = "GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    char buf[1024];
    size_t got = 0;
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(send(fd, ping, sizeof ping - 1, 0), (ssize_t)(sizeof ping - 1));
    for (;;) { /* the whole answer, so that our close is a FIN, not a reset */
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        assert_true(n > 0);
        got += (size_t)n;
        buf[got] = '\0';
        const char *end = strstr(buf, "\r\n\r\n"), *cl = strstr(buf, "Content-Length: ");
        if (end && cl && got - (size_t)(end + 4 - buf) >= strtoul(cl + 16, NULL, 10)) break;
    }
    kill(a, SIGKILL);
    assert_int_equal(exit_code_within(a, 15000), 128 + SIGKILL);
    close(fd);
    close(fd_a);
    a = spawn_args(plain, NULL, &fd_a);
    assert_true(a > 0);
    assert_int_equal(wait_healthy(port), 0);
    kill(a, SIGTERM);
    assert_int_equal(exit_code_within(a, 15000), 0);
    close(fd_a);

    /* Given --reuse-port (or MARKET_REUSE_PORT=1), both serve on it; one
     * without it is still refused. */
    a = spawn_args(shared, NULL, &fd_a);
    assert_true(a > 0);
    err[0] = '\0';
    assert_int_equal(read_until(fd_a, err, sizeof err, "msg=listening", 10000), 0);
    b = spawn_args(by_env, "MARKET_REUSE_PORT=1", &fd_b);
    assert_true(b > 0);
    err[0] = '\0';
    if (read_until(fd_b, err, sizeof err, "msg=listening", 10000) != 0)
        fprintf(stderr, "stderr: %s\n", err);
    assert_non_null(strstr(err, "msg=listening"));
    assert_non_null(strstr(err, "--reuse-port"));
    assert_int_equal(wait_healthy(port), 0);
    pid_t c = spawn_args(plain, NULL, &fd_c);
    assert_true(c > 0);
    assert_int_equal(exit_code_within(c, 10000), 1);
    close(fd_c);
    kill(a, SIGTERM);
    kill(b, SIGTERM);
    assert_int_equal(exit_code_within(a, 15000), 0);
    assert_int_equal(exit_code_within(b, 15000), 0);
    close(fd_a);
    close(fd_b);
}

/* Returns the text of path (new; caller frees), or NULL when it cannot be read. */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static const size_t cap = 1 << 20;
    char *buf = malloc(cap);
    size_t n = buf ? fread(buf, 1, cap - 1, f) : 0;
    fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

/* Waits up to timeout_ms for path to hold want. Returns 0 or -1. */
static int file_has_within(const char *path, const char *want, int timeout_ms) {
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        char *text = slurp(path);
        int found = text && strstr(text, want);
        free(text);
        if (found) return 0;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

/* --log-file: the log goes there (start and stop at info, a request line
 * with its client and request id); logrotate's rename then SIGHUP makes the
 * server write a new file at the same path, and it keeps serving. */
static void test_binary_sighup_reopens_log_file(void **state) {
    (void)state;
    int port = th_free_port();
    char dir[] = "/tmp/gm-logfile.XXXXXX", log[64], rotated[64], listen[32], err[1024] = "";
    assert_non_null(mkdtemp(dir));
    snprintf(log, sizeof log, "%s/market.log", dir);
    snprintf(rotated, sizeof rotated, "%s/market.log.1", dir);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    const char *args[] = {"--listen", listen, "--redis", redis.url, "--no-auth", "--log-level",
                          "info", "--log-file", log, NULL};
    int fd;
    pid_t pid = spawn_args(args, NULL, &fd);
    assert_true(pid > 0);
    assert_int_equal(wait_healthy(port), 0);
    assert_int_equal(file_has_within(log, "level=info msg=listening", 5000), 0);
    th_http r;
    assert_int_equal(
        th_http_do_header(port, "GET", "/nowhere", "X-Request-Id: before-hup", NULL, 0, &r), 0);
    th_http_cleanup(&r);
    assert_int_equal(file_has_within(log, "status=404 error=not_found", 5000), 0);
    assert_int_equal(file_has_within(log, "client=127.0.0.1 request_id=before-hup", 5000), 0);

    assert_int_equal(rename(log, rotated), 0);
    assert_int_equal(kill(pid, SIGHUP), 0);
    assert_int_equal(file_has_within(log, "msg=\"log file reopened\"", 5000), 0);
    assert_int_equal(
        th_http_do_header(port, "GET", "/nowhere", "X-Request-Id: after-hup", NULL, 0, &r), 0);
    assert_int_equal(r.status, 404); /* still serving */
    th_http_cleanup(&r);
    assert_int_equal(file_has_within(log, "request_id=after-hup", 5000), 0);
    char *old = slurp(rotated);
    assert_non_null(old);
    assert_null(strstr(old, "after-hup")); /* the rotated file gets nothing more */
    free(old);
    assert_int_equal(kill(pid, 0), 0);

    kill(pid, SIGTERM);
    assert_int_equal(exit_code_within(pid, 15000), 0);
    assert_int_equal(file_has_within(log, "level=info msg=stopped", 1000), 0);
    (void)read_until(fd, err, sizeof err, "\n", 100); /* nothing on stderr: it is the file */
    assert_null(strstr(err, "msg=request"));
    close(fd);
    unlink(log);
    unlink(rotated);
    rmdir(dir);
}

/* Starts the binary on the test's Redis with its log in a file, waits until
 * it serves, stops it, and returns what it logged (caller frees). */
static char *started_log(void) {
    int port = th_free_port();
    char dir[] = "/tmp/gm-durable.XXXXXX", log[64], listen[32];
    assert_non_null(mkdtemp(dir));
    snprintf(log, sizeof log, "%s/market.log", dir);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    const char *args[] = {"--listen",    listen, "--redis",    redis.url, "--no-auth",
                          "--log-level", "info", "--log-file", log,       NULL};
    int fd;
    pid_t pid = spawn_args(args, NULL, &fd);
    assert_true(pid > 0);
    assert_int_equal(wait_healthy(port), 0);
    kill(pid, SIGTERM);
    assert_int_equal(exit_code_within(pid, 15000), 0);
    close(fd);
    char *text = slurp(log);
    assert_non_null(text);
    unlink(log);
    rmdir(dir);
    return text;
}

/* Sets a parameter of the test's Redis. */
static void redis_config_set(const char *name, const char *value) {
    redisContext *rc = redisConnect("127.0.0.1", redis.port);
    assert_non_null(rc);
    redisReply *r = redisCommand(rc, "CONFIG SET %s %s", name, value);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(rc);
}

/* At start the server says what a Redis crash can take back of the
 * purchases it answers 200: a warning for a store without an append-only
 * file and for appendfsync everysec, nothing for always. */
static void test_binary_warns_of_a_store_that_can_lose_purchases(void **state) {
    (void)state;
    redis_config_set("appendonly", "no");
    char *text = started_log();
    assert_non_null(strstr(text, "level=warn msg=\"the store keeps no append-only file"));
    free(text);
    redis_config_set("appendonly", "yes");
    redis_config_set("appendfsync", "everysec");
    text = started_log();
    assert_non_null(strstr(text, "level=warn msg=\"the store runs appendfsync everysec"));
    free(text);
    redis_config_set("appendfsync", "always");
    text = started_log();
    assert_null(strstr(text, "append-only"));
    assert_null(strstr(text, "appendfsync"));
    assert_non_null(strstr(text, "msg=listening"));
    free(text);
    redis_config_set("appendfsync", "everysec"); /* as the other tests have it */
    redis_config_set("appendonly", "no");
}

static void test_binary_flags_help_and_bad(void **state) {
    (void)state;
    const char *bin = getenv("MARKET_SERVER_BIN");
    if (!bin) bin = "bin/market-server";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --help | grep -q -- --lock-ttl-ms", bin);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s --lock-ttl-ms 0 2>/dev/null", bin);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    snprintf(cmd, sizeof cmd, "MARKET_LOCK=bogus %s 2>/dev/null", bin);
    st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    snprintf(cmd, sizeof cmd, "%s --help | grep -q -- '--reuse-port .*MARKET_REUSE_PORT'", bin);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "MARKET_REUSE_PORT=yes %s --no-auth 2>/dev/null", bin);
    st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    /* No secret and no --no-auth: it refuses to start. */
    snprintf(cmd, sizeof cmd, "MARKET_AUTH_SECRET= %s --listen 127.0.0.1:0 2>/dev/null", bin);
    st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    /* A key file it cannot read: it refuses to start, and says which. */
    snprintf(cmd, sizeof cmd,
             "MARKET_AUTH_SECRET= %s --listen 127.0.0.1:0 --auth-key k1:rs256:/nonexistent.pem "
             "2>&1 | grep -q 'cannot read the key file /nonexistent.pem'",
             bin);
    assert_int_equal(system(cmd), 0);
}

/* ---- idempotency ---- */

/* A client whose purchase times out retries it with the same Idempotency-Key
 * ten times: it is charged once, and every 200 it gets says the same. */
static void test_http_idempotent_retries_charged_once(void **state) {
    (void)state;
    int port;
    next_stall_ms = 300; /* every commit takes longer than the client waits */
    server *s = start(5000, &port);
    th_http_timeout_ms = 150;
    int ok = 0, timeouts = 0;
    char first[256] = "";
    for (int i = 0; i < 10; i++) {
        th_http r;
        int rc = th_http_do_header(port, "POST", "/purchase", "Idempotency-Key: retry-42",
                                   purchase_axe, strlen(purchase_axe), &r);
        if (rc != 0) {
            timeouts++;
        } else {
            assert_int_equal(r.status, 200);
            if (!first[0]) snprintf(first, sizeof first, "%s", r.body);
            assert_string_equal(r.body, first);
            ok++;
        }
        th_http_cleanup(&r);
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    th_http_timeout_ms = 20000;
    assert_true(timeouts >= 1); /* the first attempt gave up */
    assert_true(ok >= 1);       /* a later one got the stored answer */
    assert_non_null(strstr(first, "\"buyer_funds\":300"));
    json_t *j = call(port, "GET", "/players/B", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "funds")), 300);
    json_decref(j);
    /* The same key on another request: 422. */
    th_http r;
    const char other[] = "{\"buyer\":\"B\",\"seller\":\"C\",\"item\":\"sword-2\"}";
    assert_int_equal(th_http_do_header(port, "POST", "/purchase", "Idempotency-Key: retry-42",
                                       other, strlen(other), &r),
                     0);
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "idempotency_key_reused"));
    th_http_cleanup(&r);
    assert_int_equal(th_http_do_header(port, "POST", "/purchase", "Idempotency-Key: bad key!",
                                       other, strlen(other), &r),
                     0);
    assert_int_equal(r.status, 400);
    th_http_cleanup(&r);
    server_stop(s);
}

/* Issue 9.2 over HTTP: while one attempt of a key is deciding (its commit
 * paused by the test hook), another attempt of the same key on a second
 * server gets 409 request_in_progress with Retry-After, and changes
 * nothing; after the first has committed, the retry replays its 200. */
static void test_http_idempotent_second_attempt_409_then_replay(void **state) {
    (void)state;
    int p1, p2;
    next_stall_ms = 600;
    snprintf(next_strategy, sizeof next_strategy, "optimistic"); /* no lock: both run */
    server *s1 = start(5000, &p1);
    snprintf(next_strategy, sizeof next_strategy, "optimistic");
    server *s2 = start(5000, &p2);
    th_http_timeout_ms = 150;
    th_http r;
    assert_int_not_equal(th_http_do_header(p1, "POST", "/purchase", "Idempotency-Key: k-409",
                                           purchase_axe, strlen(purchase_axe), &r),
                         0); /* the client gives up: the commit is paused */
    th_http_cleanup(&r);
    th_http_timeout_ms = 20000;
    assert_int_equal(th_http_do_header(p2, "POST", "/purchase", "Idempotency-Key: k-409",
                                       purchase_axe, strlen(purchase_axe), &r),
                     0);
    assert_int_equal(r.status, 409);
    assert_non_null(strstr(r.body, "request_in_progress"));
    assert_non_null(strstr(r.headers, "Retry-After: 1"));
    th_http_cleanup(&r);
    struct timespec ts = {0, 700 * 1000 * 1000};
    nanosleep(&ts, NULL); /* the first attempt has committed */
    assert_int_equal(th_http_do_header(p2, "POST", "/purchase", "Idempotency-Key: k-409",
                                       purchase_axe, strlen(purchase_axe), &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.headers, "Idempotent-Replayed: true"));
    assert_non_null(strstr(r.body, "\"buyer_funds\":300"));
    th_http_cleanup(&r);
    json_t *j = call(p2, "GET", "/players/B", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "funds")), 300);
    json_decref(j);
    server_stop(s2);
    server_stop(s1);
}

/* A refusal under an Idempotency-Key is final: replayed (with the header)
 * even after the purchase became possible. */
static void test_http_idempotent_refusal_replayed(void **state) {
    struct fx *f = *state;
    const char dear[] = "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\",\"price\":400}";
    th_http r;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(th_http_do_header(f->port, "POST", "/purchase", "Idempotency-Key: p-1",
                                           dear, strlen(dear), &r),
                         0);
        assert_int_equal(r.status, 409);
        assert_non_null(strstr(r.body, "price_changed"));
        assert_non_null(strstr(r.body, "\"price\":500"));
        assert_true((strstr(r.headers, "Idempotent-Replayed: true") != NULL) == (i == 1));
        th_http_cleanup(&r);
    }
    json_t *j = call(f->port, "GET", "/players/B", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "funds")), 800);
    json_decref(j);
}

static void test_http_idempotent_replay_header(void **state) {
    struct fx *f = *state;
    th_http r;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(th_http_do_header(f->port, "POST", "/purchase", "Idempotency-Key: k1",
                                           purchase_axe, strlen(purchase_axe), &r),
                         0);
        assert_int_equal(r.status, 200);
        if (i == 0) assert_null(strstr(r.headers, "Idempotent-Replayed"));
        if (i == 1) assert_non_null(strstr(r.headers, "Idempotent-Replayed: true"));
        th_http_cleanup(&r);
    }
}

/* ---- hostile clients and secured Redis ---- */

/* 200 connections that send half a request and stall (slow-loris) do not
 * starve a real client. */
static void test_http_slow_clients_do_not_starve_others(void **state) {
    struct fx *f = *state;
    enum { SLOW = 200 };
    int fds[SLOW];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    static const char half[] = "POST /purchase HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n";
    for (int i = 0; i < SLOW; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fds[i] >= 0);
        assert_int_equal(connect(fds[i], (struct sockaddr *)&a, sizeof a), 0);
        assert_int_equal(send(fds[i], half, sizeof half - 1, 0), (ssize_t)(sizeof half - 1));
    }
    int64_t t0 = rconn_now_ms();
    json_t *j = call(f->port, "POST", "/purchase", purchase_axe, 200);
    json_decref(j);
    fprintf(stderr, "# with %d stalled clients, a purchase took %lld ms\n", SLOW,
            (long long)(rconn_now_ms() - t0));
    for (int i = 0; i < SLOW; i++) close(fds[i]);
}

/* Redis with an ACL user: redis://user:pass@host:port/db works end to end;
 * a wrong password is a 503, not a crash or a hang. */
static void test_http_redis_acl_user_end_to_end(void **state) {
    (void)state;
    redisContext *rc = redisConnect("127.0.0.1", redis.port);
    assert_non_null(rc);
    redisReply *r = redisCommand(rc, "ACL SETUSER trader on >pa55 ~* &* +@all");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    server_config cfg;
    server_config_defaults(&cfg);
    snprintf(cfg.listen, sizeof cfg.listen, "127.0.0.1:0");
    snprintf(cfg.redis, sizeof cfg.redis, "redis://trader:pa55@127.0.0.1:%d/0", redis.port);
    cfg.no_auth = 1;
    cfg.threads = 2;
    cfg.log_level = SERVER_LOG_ERROR;
    int err;
    char why[256];
    server *s = server_start(&cfg, &err, why, sizeof why);
    assert_non_null(s);
    json_t *j = call(server_port(s), "POST", "/purchase", purchase_axe, 200);
    json_decref(j);
    server_stop(s);

    snprintf(cfg.redis, sizeof cfg.redis, "redis://trader:wrong@127.0.0.1:%d/0", redis.port);
    s = server_start(&cfg, &err, why, sizeof why);
    assert_non_null(s);
    j = call(server_port(s), "GET", "/healthz", NULL, 503);
    json_decref(j);
    j = call(server_port(s), "POST", "/purchase", purchase_axe, 503);
    assert_error(j, "store_unavailable");
    json_decref(j);
    server_stop(s);
    r = redisCommand(rc, "ACL DELUSER trader");
    if (r) freeReplyObject(r);
    redisFree(rc);
}

/* ---- observability ---- */

static void test_http_metrics_count_requests_and_locks(void **state) {
    struct fx *f = *state;
    json_t *j = call(f->port, "POST", "/purchase", purchase_axe, 200);
    json_decref(j);
    j = call(f->port, "POST", "/purchase", purchase_axe, 404);
    json_decref(j);
    j = call(f->port, "GET", "/nowhere", NULL, 404);
    json_decref(j);
    th_http r;
    assert_int_equal(th_http_do(f->port, "GET", "/metrics", NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.headers, "text/plain"));
    static const char *const want[] = {
        "market_http_requests_total{route=\"/purchase\",method=\"POST\",code=\"200\"} 1\n",
        "market_http_requests_total{route=\"/purchase\",method=\"POST\",code=\"404\"} 1\n",
        "market_http_requests_total{route=\"none\",method=\"GET\",code=\"404\"} 1\n",
        "market_purchase_duration_seconds_count{outcome=\"ok\"} 1\n",
        "market_purchase_duration_seconds_count{outcome=\"refused\"} 1\n",
        "market_purchase_duration_seconds_count{outcome=\"unavailable\"} 0\n",
        "market_purchase_duration_seconds_bucket{outcome=\"ok\",le=\"+Inf\"} 1\n",
        /* the new families, with their types */
        "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total ",
        "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes ",
        "# TYPE process_open_fds gauge\nprocess_open_fds ",
        "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds ",
        "# TYPE market_build_info gauge\nmarket_build_info{version=\"",
        "# TYPE market_http_connections gauge\nmarket_http_connections ",
        "# TYPE market_http_requests_in_flight gauge\nmarket_http_requests_in_flight ",
        "# TYPE market_purchases_in_flight gauge\nmarket_purchases_in_flight ",
        "# TYPE market_purchase_queue_depth gauge\nmarket_purchase_queue_depth 0\n",
        "# TYPE market_redis_up gauge\nmarket_redis_up 1\n",
        "market_lock_wait_seconds_bucket{le=\"+Inf\"}",
        "market_lock_acquisitions_total ",
        "market_lock_busy_total 0\n",
        "market_purchases_committed_total 1\n",
        "# TYPE market_redis_errors_total counter\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        if (!strstr(r.body, want[i])) fprintf(stderr, "missing: %s\n%s", want[i], r.body);
        assert_non_null(strstr(r.body, want[i]));
    }
    th_http_cleanup(&r);
    assert_int_equal(th_http_do(f->port, "POST", "/metrics", "", 0, &r), 0);
    assert_int_equal(r.status, 405);
    th_http_cleanup(&r);
}

/* The /metrics answer of a server that has served a few requests passes
 * `promtool check metrics` (Prometheus's own linter), when promtool is
 * installed (Debian's prometheus package; scripts/ci_deps.sh promtool). */
static void test_http_metrics_pass_promtool(void **state) {
    struct fx *f = *state;
    if (system("command -v promtool >/dev/null 2>&1") != 0) {
        fprintf(stderr, "skipped: promtool is not installed (scripts/ci_deps.sh promtool)\n");
        return;
    }
    json_t *j = call(f->port, "POST", "/purchase", purchase_axe, 200);
    json_decref(j);
    j = call(f->port, "GET", "/nowhere", NULL, 404);
    json_decref(j);
    th_http r;
    assert_int_equal(th_http_do(f->port, "GET", "/metrics", NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    char dir[] = "/tmp/gm-promtool.XXXXXX", file[64], cmd[256];
    assert_non_null(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/metrics.txt", dir);
    FILE *out = fopen(file, "w");
    assert_non_null(out);
    assert_int_equal(fwrite(r.body, 1, r.len, out), r.len);
    fclose(out);
    th_http_cleanup(&r);
    snprintf(cmd, sizeof cmd, "promtool check metrics <%s", file);
    int rc = system(cmd);
    unlink(file);
    rmdir(dir);
    assert_int_equal(rc, 0);
}

/* X-Request-Id: a sane one from the client is echoed; none, or one too
 * long or with a space or a quote, gets a new 16-hex-digit id. */
static void test_http_request_id_echoed_or_made(void **state) {
    struct fx *f = *state;
    th_http r;
    assert_int_equal(
        th_http_do_header(f->port, "GET", "/healthz", "X-Request-Id: client-id_42.x", NULL, 0, &r),
        0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.headers, "X-Request-Id: client-id_42.x\r\n"));
    th_http_cleanup(&r);
    char long_id[128] = "X-Request-Id: ";
    memset(long_id + strlen(long_id), 'a', 65);
    const char *bad[] = {NULL, long_id, "X-Request-Id: a\"b", "X-Request-Id: a b"};
    char seen[4][17] = {{0}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (bad[i])
            assert_int_equal(th_http_do_header(f->port, "GET", "/nowhere", bad[i], NULL, 0, &r), 0);
        else
            assert_int_equal(th_http_do(f->port, "GET", "/nowhere", NULL, 0, &r), 0);
        assert_int_equal(r.status, 404);
        const char *h = strstr(r.headers, "X-Request-Id: ");
        assert_non_null(h);
        h += strlen("X-Request-Id: ");
        assert_int_equal(strspn(h, "0123456789abcdef"), 16);
        assert_true(h[16] == '\r');
        memcpy(seen[i], h, 16);
        for (size_t k = 0; k < i; k++) assert_string_not_equal(seen[k], seen[i]);
        th_http_cleanup(&r);
    }
    /* /metrics answers carry one too */
    assert_int_equal(th_http_do_header(f->port, "GET", "/metrics", "X-Request-Id: scrape-1", NULL,
                                       0, &r),
                     0);
    assert_non_null(strstr(r.headers, "X-Request-Id: scrape-1\r\n"));
    th_http_cleanup(&r);
}

/* ---- authentication ---- */

static long auth_call(int port, const char *path, const char *header, const char *body,
                      th_http *r) {
    assert_int_equal(th_http_do_header(port, "POST", path, header, body, strlen(body), r), 0);
    return r->status;
}

/* Writes an HS256 JWT of player of realm (NULL: the default) under "s3cret", issued
 * now for an hour, into tok (API_TOKEN_MAX + 1 bytes). */
static void jwt_for(const char *realm, const char *player, char *tok, size_t len) {
    api_token_spec spec = {"s3cret", NULL, NULL, realm, player, (int64_t)time(NULL), 3600};
    assert_int_equal(api_token_make(&spec, tok, len), MARKET_OK);
}

/* Writes "Authorization: Bearer <JWT>" into out: header and payload as given (JSON
 * text), signed with HMAC-SHA256 under secret, or with an empty signature when
 * secret is NULL. */
static void jwt_raw(const char *header, const char *payload, const char *secret, char *out,
                    size_t outlen) {
    char tok[API_TOKEN_MAX + 1];
    size_t h = api__b64url_encode((const unsigned char *)header, strlen(header), tok, sizeof tok);
    assert_true(h > 0);
    tok[h++] = '.';
    size_t p = api__b64url_encode((const unsigned char *)payload, strlen(payload), tok + h,
                                  sizeof tok - h);
    assert_true(p > 0);
    tok[h + p] = '.';
    tok[h + p + 1] = '\0';
    if (secret) {
        unsigned char mac[32];
        unsigned int maclen = 0;
        assert_non_null(HMAC(EVP_sha256(), secret, (int)strlen(secret), (unsigned char *)tok,
                             h + p, mac, &maclen));
        assert_true(api__b64url_encode(mac, maclen, tok + h + p + 1, sizeof tok - h - p - 1) > 0);
    }
    snprintf(out, outlen, "Authorization: Bearer %s", tok);
}

/* POSTs a purchase with header and asserts a 401 whose detail is detail. */
static void expect_401(int port, const char *path, const char *header, const char *detail) {
    th_http r;
    assert_int_equal(th_http_do_header(port, "POST", path, header, purchase_axe,
                                       strlen(purchase_axe), &r),
                     0);
    if (r.status != 401 || !strstr(r.body, detail))
        fprintf(stderr, "%s -> %ld %s (want 401 %s)\n", header ? header : "(none)", r.status,
                r.body, detail);
    assert_int_equal(r.status, 401);
    json_error_t e;
    json_t *j = json_loads(r.body, 0, &e);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "error")), "unauthorized");
    assert_string_equal(json_string_value(json_object_get(j, "detail")), detail);
    assert_non_null(strstr(r.headers, "WWW-Authenticate: Bearer"));
    json_decref(j);
    th_http_cleanup(&r);
}

/* Every refused JWT gets a 401 naming the check that failed, and changes nothing;
 * a token of the rotation key (by kid) and one of the --auth-secret (no kid) both
 * buy. */
static void test_http_auth_jwt_refusals_name_the_check(void **state) {
    (void)state;
    int port;
    next_auth_key = "k2:hs256:n3w-secret";
    server *s = start_with(1000, "s3cret", &port);
    char h[API_TOKEN_MAX + 64], payload[256];
    long long now = (long long)time(NULL);
    char *before = th_store_fingerprint(redis.port);

    snprintf(payload, sizeof payload, "{\"sub\":\"B\",\"iat\":%lld,\"exp\":%lld}", now - 7200,
             now - 3600);
    jwt_raw("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", payload, "s3cret", h, sizeof h);
    expect_401(port, "/purchase", h, "token expired");
    snprintf(payload, sizeof payload, "{\"sub\":\"B\",\"iat\":%lld,\"exp\":%lld}", now, now + 600);
    jwt_raw("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", payload, "not-the-secret", h, sizeof h);
    expect_401(port, "/purchase", h, "signature does not verify");
    jwt_raw("{\"alg\":\"none\",\"typ\":\"JWT\"}", payload, NULL, h, sizeof h);
    expect_401(port, "/purchase", h, "algorithm none is refused");
    jwt_raw("{\"alg\":\"HS256\",\"kid\":\"k9\"}", payload, "s3cret", h, sizeof h);
    expect_401(port, "/purchase", h, "unknown key id");
    jwt_raw("{\"alg\":\"RS256\",\"kid\":\"k2\"}", payload, "n3w-secret", h, sizeof h);
    expect_401(port, "/purchase", h, "algorithm does not match the key");
    jwt_raw("{\"alg\":\"HS256\"}", "{\"sub\":\"B\"}", "s3cret", h, sizeof h);
    expect_401(port, "/purchase", h, "token has no exp");
    snprintf(payload, sizeof payload, "{\"sub\":\"B\",\"iat\":%lld,\"exp\":%lld}", now + 3600,
             now + 7200);
    jwt_raw("{\"alg\":\"HS256\"}", payload, "s3cret", h, sizeof h);
    expect_401(port, "/purchase", h, "token issued in the future");
    expect_401(port, "/purchase", "Authorization: Bearer B.0123abcd", "malformed token");
    expect_401(port, "/purchase", "Authorization: Bearer a.b.c", "malformed token");
    expect_401(port, "/purchase", "Authorization: Basic QjpC",
               "the Authorization header is not 'Bearer <token>'");
    expect_401(port, "/purchase", NULL, "missing 'Authorization: Bearer <token>'");
    char *after = th_store_fingerprint(redis.port);
    assert_string_equal(before, after); /* nothing moved */
    free(before);
    free(after);

    /* the rotation key's token, chosen by kid, buys */
    snprintf(payload, sizeof payload, "{\"sub\":\"B\",\"iat\":%lld,\"exp\":%lld,\"jti\":\"t-1\"}",
             now, now + 600);
    jwt_raw("{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"k2\"}", payload, "n3w-secret", h,
            sizeof h);
    th_http r;
    assert_int_equal(auth_call(port, "/purchase", h, purchase_axe, &r), 200);
    assert_non_null(strstr(r.body, "\"buyer_funds\":300"));
    th_http_cleanup(&r);
    server_stop(s);
}

/* With --auth-audience, a token needs that aud (a string, or an array holding it). */
static void test_http_auth_audience(void **state) {
    (void)state;
    int port;
    next_audience = "gamemarket";
    server *s = start_with(1000, "s3cret", &port);
    char tok[API_TOKEN_MAX + 1], h[API_TOKEN_MAX + 64], payload[256];
    jwt_for(NULL, "B", tok, sizeof tok); /* no aud */
    snprintf(h, sizeof h, "Authorization: Bearer %s", tok);
    expect_401(port, "/purchase", h, "wrong audience");
    long long now = (long long)time(NULL);
    snprintf(payload, sizeof payload, "{\"sub\":\"B\",\"iat\":%lld,\"exp\":%lld,\"aud\":\"other\"}",
             now, now + 600);
    jwt_raw("{\"alg\":\"HS256\"}", payload, "s3cret", h, sizeof h);
    expect_401(port, "/purchase", h, "wrong audience");
    api_token_spec spec = {"s3cret", NULL, "gamemarket", NULL, "B", now, 600};
    assert_int_equal(api_token_make(&spec, tok, sizeof tok), MARKET_OK);
    snprintf(h, sizeof h, "Authorization: Bearer %s", tok);
    th_http r;
    assert_int_equal(auth_call(port, "/purchase", h, purchase_axe, &r), 200);
    th_http_cleanup(&r);
    server_stop(s);
}

/* A studio's login service signs with ES256: the server reads its public key from a PEM
 * file (--auth-key KID:es256:FILE), a token of it buys, and an HS256 token of that kid
 * (the public key used as an HMAC secret) is refused. The key is made here. */
static void test_http_auth_es256_key_file(void **state) {
    (void)state;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    assert_non_null(key);
    char path[] = "/tmp/test_http_es256_XXXXXX", spec[128], pem[1024];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    BIO *b = BIO_new(BIO_s_mem());
    assert_non_null(b);
    assert_int_equal(PEM_write_bio_PUBKEY(b, key), 1);
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    assert_true(n > 0 && (size_t)n < sizeof pem);
    memcpy(pem, data, (size_t)n);
    pem[n] = '\0';
    BIO_free(b);
    assert_int_equal(write(fd, pem, (size_t)n), (ssize_t)n);
    close(fd);
    snprintf(spec, sizeof spec, "login-es:es256:%s", path);
    next_auth_key = spec;
    int port;
    server *s = start_with(1000, "s3cret", &port);
    unlink(path); /* read at start */

    /* header.payload, signed with ES256 (DER turned into JWS's r||s) */
    char tok[API_TOKEN_MAX + 1], h[API_TOKEN_MAX + 64], payload[128];
    static const char header[] = "{\"alg\":\"ES256\",\"typ\":\"JWT\",\"kid\":\"login-es\"}";
    long long now = (long long)time(NULL);
    snprintf(payload, sizeof payload, "{\"sub\":\"B\",\"iat\":%lld,\"exp\":%lld}", now, now + 300);
    size_t hl = api__b64url_encode((const unsigned char *)header, strlen(header), tok, sizeof tok);
    tok[hl++] = '.';
    size_t pl = api__b64url_encode((const unsigned char *)payload, strlen(payload), tok + hl,
                                   sizeof tok - hl);
    assert_true(hl > 1 && pl > 0);
    unsigned char der[128], rs[64];
    size_t dlen = sizeof der;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    assert_non_null(ctx);
    assert_int_equal(EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key), 1);
    assert_int_equal(EVP_DigestSign(ctx, der, &dlen, (unsigned char *)tok, hl + pl), 1);
    EVP_MD_CTX_free(ctx);
    const unsigned char *p = der;
    ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)dlen);
    assert_non_null(es);
    assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_r(es), rs, 32), 32);
    assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_s(es), rs + 32, 32), 32);
    ECDSA_SIG_free(es);
    tok[hl + pl] = '.';
    assert_true(api__b64url_encode(rs, 64, tok + hl + pl + 1, sizeof tok - hl - pl - 1) > 0);
    snprintf(h, sizeof h, "Authorization: Bearer %s", tok);
    th_http r;
    assert_int_equal(auth_call(port, "/purchase", h, purchase_axe, &r), 200);
    th_http_cleanup(&r);

    /* alg confusion: HS256 under that kid, the public key as the HMAC secret */
    jwt_raw("{\"alg\":\"HS256\",\"kid\":\"login-es\"}", payload, pem, h, sizeof h);
    expect_401(port, "/purchase", h, "algorithm does not match the key");
    server_stop(s);
    EVP_PKEY_free(key);
}

static void test_http_auth_tokens_bind_players(void **state) {
    (void)state;
    int port;
    server *s = start_with(1000, "s3cret", &port);
    char tok_b[API_TOKEN_MAX + 1], tok_a[API_TOKEN_MAX + 1];
    char hb[API_TOKEN_MAX + 64], ha[API_TOKEN_MAX + 64];
    jwt_for(NULL, "B", tok_b, sizeof tok_b);
    jwt_for(NULL, "A", tok_a, sizeof tok_a);
    snprintf(hb, sizeof hb, "Authorization: Bearer %s", tok_b);
    snprintf(ha, sizeof ha, "Authorization: Bearer %s", tok_a);
    char forged[API_TOKEN_MAX + 64];
    snprintf(forged, sizeof forged, "Authorization: Bearer %s", tok_b);
    size_t at = strlen(forged) - 2; /* a bit of the signature off */
    forged[at] = forged[at] == 'A' ? 'B' : 'A';
    char *before = th_store_fingerprint(redis.port);
    th_http r;

    assert_int_equal(auth_call(port, "/purchase", NULL, purchase_axe, &r), 401);
    assert_non_null(strstr(r.body, "unauthorized"));
    assert_non_null(strstr(r.headers, "WWW-Authenticate: Bearer"));
    th_http_cleanup(&r);
    assert_int_equal(auth_call(port, "/purchase", forged, purchase_axe, &r), 401);
    th_http_cleanup(&r);
    assert_int_equal(auth_call(port, "/purchase", "Authorization: Basic QjpC", purchase_axe, &r),
                     401);
    th_http_cleanup(&r);
    assert_int_equal(auth_call(port, "/purchase", ha, purchase_axe, &r), 403); /* A's token */
    assert_non_null(strstr(r.body, "forbidden"));
    th_http_cleanup(&r);
    assert_int_equal(auth_call(port, "/list", hb, "{\"seller\":\"C\",\"item\":\"sword-1\",\"price\":9}",
                               &r),
                     403);
    th_http_cleanup(&r);
    assert_int_equal(auth_call(port, "/unlist", hb, "{\"seller\":\"A\",\"item\":\"axe\"}", &r), 403);
    th_http_cleanup(&r);
    char *after = th_store_fingerprint(redis.port);
    assert_string_equal(before, after); /* nothing moved */
    free(before);
    free(after);

    assert_int_equal(auth_call(port, "/purchase", hb, purchase_axe, &r), 200);
    assert_non_null(strstr(r.body, "\"buyer_funds\":300"));
    th_http_cleanup(&r);
    server_stop(s);
}

/* Asserts that trade t names buyer and seller (NULL: names neither). */
static void assert_parties(const json_t *t, const char *buyer, const char *seller) {
    const json_t *b = json_object_get(t, "buyer"), *sl = json_object_get(t, "seller");
    if (!buyer) {
        assert_null(b);
        assert_null(sl);
        return;
    }
    assert_string_equal(json_string_value(b), buyer);
    assert_string_equal(json_string_value(sl), seller);
}

/* Asserts GET path (a trade, or "trades": [one trade]) as header reads it
 * names buyer and seller (NULL: neither). */
static void expect_parties(int port, const char *path, const char *header, const char *buyer,
                           const char *seller) {
    json_t *j = th_http_json(port, "GET", path, header, NULL, 200);
    json_t *list = json_object_get(j, "trades");
    if (list) assert_int_equal(json_array_size(list), 1);
    assert_parties(list ? json_array_get(list, 0) : j, buyer, seller);
    json_decref(j);
}

/* A purchase answers its trade_id; GET /trades/{id} shows it, the item's
 * trades list it publicly, and the player's own trades need the player's
 * token (401 without one, 403 with another's) or the admin's. Who bought
 * from whom is private to the two: anyone else sees the trade without its
 * buyer and seller, the admin sees them, and a token that is not valid is
 * refused rather than read as no token. */
static void test_http_trades_routes(void **state) {
    (void)state;
    int port;
    next_admin = "adm1n";
    server *s = start_with(1000, "s3cret", &port);
    char tok_b[API_TOKEN_MAX + 1], tok_a[API_TOKEN_MAX + 1], tok_c[API_TOKEN_MAX + 1], path[128];
    char adm[API_ADMIN_TOKEN_MAX + 1];
    char hb[API_TOKEN_MAX + 64], ha[API_TOKEN_MAX + 64], hc[API_TOKEN_MAX + 64];
    char hadm[API_ADMIN_TOKEN_MAX + 64];
    jwt_for(NULL, "B", tok_b, sizeof tok_b);
    jwt_for(NULL, "A", tok_a, sizeof tok_a);
    jwt_for(NULL, "C", tok_c, sizeof tok_c);
    assert_int_equal(api_admin_token_make("adm1n", adm, sizeof adm), MARKET_OK);
    snprintf(hb, sizeof hb, "Authorization: Bearer %s", tok_b);
    snprintf(ha, sizeof ha, "Authorization: Bearer %s", tok_a);
    snprintf(hc, sizeof hc, "Authorization: Bearer %s", tok_c);
    snprintf(hadm, sizeof hadm, "Authorization: Bearer %s", adm);
    th_http r;
    assert_int_equal(auth_call(port, "/purchase", hb, purchase_axe, &r), 200);
    json_error_t e;
    json_t *bought = json_loads(r.body, 0, &e);
    th_http_cleanup(&r);
    assert_non_null(bought);
    const char *id = json_string_value(json_object_get(bought, "trade_id"));
    assert_non_null(id);
    assert_true(market_trade_id_valid(id));

    snprintf(path, sizeof path, "/trades/%s", id);
    json_t *t = call(port, "GET", path, NULL, 200);
    assert_string_equal(json_string_value(json_object_get(t, "trade_id")), id);
    assert_parties(t, NULL, NULL);
    assert_string_equal(json_string_value(json_object_get(t, "item")), "axe");
    assert_int_equal(json_integer_value(json_object_get(t, "quantity")), 1);
    assert_int_equal(json_integer_value(json_object_get(t, "price")), 500);
    assert_int_equal(json_integer_value(json_object_get(t, "total")), 500);
    assert_true(json_integer_value(json_object_get(t, "fence")) > 0);
    assert_true(json_integer_value(json_object_get(t, "time_ms")) > 1700000000000LL);
    json_decref(t);
    expect_parties(port, path, hb, "B", "A");   /* the buyer */
    expect_parties(port, path, ha, "B", "A");   /* the seller */
    expect_parties(port, path, hc, NULL, NULL); /* a third player */
    expect_parties(port, path, hadm, "B", "A");
    json_t *bad = th_http_json(port, "GET", path, "Authorization: Bearer x", NULL, 401);
    assert_error(bad, "unauthorized");
    json_decref(bad);
    json_t *gone = call(port, "GET", "/trades/1-0", NULL, 404);
    assert_error(gone, "trade_not_found");
    json_decref(gone);

    json_t *chart = call(port, "GET", "/items/axe/trades?limit=5", NULL, 200);
    json_t *list = json_object_get(chart, "trades");
    assert_int_equal(json_array_size(list), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "trade_id")),
                        id);
    assert_parties(json_array_get(list, 0), NULL, NULL);
    json_decref(chart);
    expect_parties(port, "/items/axe/trades", hb, "B", "A");
    expect_parties(port, "/items/axe/trades", hc, NULL, NULL);
    expect_parties(port, "/items/axe/trades", hadm, "B", "A");

    assert_int_equal(th_http_do_header(port, "GET", "/players/B/trades", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 401);
    th_http_cleanup(&r);
    assert_int_equal(th_http_do_header(port, "GET", "/players/B/trades", ha, NULL, 0, &r), 0);
    assert_int_equal(r.status, 403);
    th_http_cleanup(&r);
    json_t *mine = th_http_json(port, "GET", "/players/B/trades?limit=1", hb, NULL, 200);
    list = json_object_get(mine, "trades");
    assert_int_equal(json_array_size(list), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "trade_id")),
                        id);
    assert_parties(json_array_get(list, 0), "B", "A");
    assert_true(json_is_null(json_object_get(mine, "next_cursor")));
    json_decref(mine);
    expect_parties(port, "/players/A/trades", hadm, "B", "A");
    json_decref(bought);
    server_stop(s);
}

/* --public-trade-parties: every reader sees who bought from whom. */
static void test_http_trades_public_parties(void **state) {
    (void)state;
    int port;
    next_public_parties = 1;
    server *s = start(1000, &port);
    json_t *j = call(port, "POST", "/purchase", purchase_axe, 200);
    char path[128];
    snprintf(path, sizeof path, "/trades/%s", json_string_value(json_object_get(j, "trade_id")));
    json_decref(j);
    expect_parties(port, path, NULL, "B", "A");
    expect_parties(port, "/items/axe/trades", NULL, "B", "A");
    server_stop(s);
}

/* Stackable goods over HTTP: units listed from a stack, part of a listing
 * bought (through the queued path), the cheapest units of any seller bought
 * (on the request's thread), and the refusals that say how many. The demo
 * world's A holds 200 arrows and C 40. */
static void test_http_stackable_goods(void **state) {
    (void)state;
    int port;
    server *s = start(1000, &port);
    json_t *j = call(port, "POST", "/list",
                     "{\"seller\":\"A\",\"item\":\"arrow\",\"price\":3,\"quantity\":50}", 201);
    assert_int_equal(json_integer_value(json_object_get(j, "quantity")), 50);
    json_decref(j);
    j = call(port, "POST", "/list",
             "{\"seller\":\"C\",\"item\":\"arrow\",\"price\":2,\"quantity\":20}", 201);
    json_decref(j);
    j = call(port, "POST", "/list",
             "{\"seller\":\"C\",\"item\":\"arrow\",\"price\":2,\"quantity\":21}", 404);
    assert_error(j, "item_not_held");
    assert_int_equal(json_integer_value(json_object_get(j, "held")), 20);
    json_decref(j);
    j = call(port, "GET", "/market?item=arrow", NULL, 200);
    json_t *first = json_array_get(json_object_get(j, "listings"), 0);
    assert_string_equal(json_string_value(json_object_get(first, "seller")), "C");
    assert_int_equal(json_integer_value(json_object_get(first, "quantity")), 20);
    json_decref(j);
    j = call(port, "POST", "/purchase",
             "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"arrow\",\"quantity\":10}", 200);
    assert_int_equal(json_integer_value(json_object_get(j, "quantity")), 10);
    assert_int_equal(json_integer_value(json_object_get(j, "total")), 30);
    assert_int_equal(json_integer_value(json_object_get(j, "buyer_funds")), 770);
    json_decref(j);
    j = call(port, "POST", "/purchase",
             "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"arrow\",\"quantity\":41}", 409);
    assert_error(j, "not_enough_units");
    assert_int_equal(json_integer_value(json_object_get(j, "available")), 40);
    json_decref(j);
    /* without a seller: 20 of C's at 2, then 5 of A's at 3 */
    j = call(port, "POST", "/purchase",
             "{\"buyer\":\"E\",\"item\":\"arrow\",\"quantity\":25,\"max_price\":3}", 200);
    assert_int_equal(json_integer_value(json_object_get(j, "total")), 20 * 2 + 5 * 3);
    json_t *fills = json_object_get(j, "fills");
    assert_int_equal(json_array_size(fills), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(fills, 0), "seller")), "C");
    json_decref(j);
    j = call(port, "POST", "/purchase",
             "{\"buyer\":\"E\",\"item\":\"arrow\",\"quantity\":36,\"max_price\":3}", 409);
    assert_error(j, "not_enough_units");
    assert_int_equal(json_integer_value(json_object_get(j, "available")), 35);
    json_decref(j);
    j = call(port, "POST", "/unlist", "{\"seller\":\"A\",\"item\":\"arrow\"}", 200);
    assert_int_equal(json_integer_value(json_object_get(j, "quantity")), 35);
    json_decref(j);
    server_stop(s);
}

/* Every route but /healthz is also served per realm under /realms/{realm}; a
 * token is good in its own realm only. */
static void test_http_realm_routes_and_tokens(void **state) {
    (void)state;
    seed_demo_in("eu-1");
    int port;
    server *s = start_with(1000, "s3cret", &port);
    char tok_main[API_TOKEN_MAX + 1], tok_eu[API_TOKEN_MAX + 1];
    char hm[API_TOKEN_MAX + 64], he[API_TOKEN_MAX + 64];
    jwt_for(NULL, "B", tok_main, sizeof tok_main);
    jwt_for("eu-1", "B", tok_eu, sizeof tok_eu);
    snprintf(hm, sizeof hm, "Authorization: Bearer %s", tok_main);
    snprintf(he, sizeof he, "Authorization: Bearer %s", tok_eu);
    char *before = th_store_fingerprint(redis.port);
    th_http r;
    assert_int_equal(auth_call(port, "/realms/eu-1/purchase", hm, purchase_axe, &r), 403);
    assert_non_null(strstr(r.body, "another realm"));
    th_http_cleanup(&r);
    assert_int_equal(auth_call(port, "/purchase", he, purchase_axe, &r), 403);
    th_http_cleanup(&r);
    assert_int_equal(auth_call(port, "/realms/eu-2/purchase", he, purchase_axe, &r), 403);
    th_http_cleanup(&r);
    assert_int_equal(auth_call(port, "/realms/{eu}/purchase", he, purchase_axe, &r), 400);
    assert_non_null(strstr(r.body, "realm id must match"));
    th_http_cleanup(&r);
    assert_int_equal(auth_call(port, "/realms//purchase", he, purchase_axe, &r), 400);
    th_http_cleanup(&r);
    assert_int_equal(auth_call(port, "/realms/eu-1", he, purchase_axe, &r), 404);
    th_http_cleanup(&r);
    char *after = th_store_fingerprint(redis.port);
    assert_string_equal(before, after); /* nothing moved */
    free(before);
    free(after);

    assert_int_equal(auth_call(port, "/realms/eu-1/purchase", he, purchase_axe, &r), 200);
    assert_non_null(strstr(r.body, "\"buyer_funds\":300"));
    th_http_cleanup(&r);
    assert_int_equal(auth_call(port, "/realms/eu-1/purchase", he, purchase_axe, &r), 404);
    th_http_cleanup(&r);
    /* the default realm still lists its axe; eu-1's market does not */
    json_t *j = call(port, "GET", "/market", NULL, 200);
    size_t before_n = json_array_size(json_object_get(j, "listings"));
    json_decref(j);
    j = call(port, "GET", "/realms/eu-1/market", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "listings")), before_n - 1);
    json_decref(j);
    j = call(port, "GET", "/realms/eu-1/players/B", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "funds")), 300);
    json_decref(j);
    j = call(port, "GET", "/players/B", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(j, "funds")), 800);
    json_decref(j);
    j = call(port, "GET", "/realms/eu-1/healthz", NULL, 404);
    json_decref(j);
    j = call(port, "GET", "/realms/eu-1/players/nobody", NULL, 404);
    json_decref(j);
    server_stop(s);
}

static int group_setup(void **state) {
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    signal(SIGPIPE, SIG_IGN);
    return th_redis_start(&redis);
}

static int group_teardown(void **state) {
    (void)state;
    th_redis_stop(&redis);
    curl_global_cleanup();
    return 0;
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_http_classic_trade_then_not_listed),
        T(test_http_price_history),
        T(test_http_insufficient_funds_402_nothing_moved),
        T(test_http_price_changed_409_with_price),
        T(test_http_list_unlist_and_market),
        T(test_http_market_search_filters_sorts_and_cursors),
        T(test_http_market_search_by_item_prefix),
        T(test_http_player_listings_and_player_body),
        T(test_http_bad_inputs_4xx_store_unchanged),
        T(test_http_body_over_64k_413),
        T(test_http_12k_of_headers_served),
        T(test_http_kept_request_state_starts_clean),
        T(test_http_405_carries_allow),
        T(test_http_control_bytes_in_path_400_store_unchanged),
        T(test_http_duplicate_content_length_400),
        T(test_http_query_control_and_transfer_encoding_400),
        T(test_http_redis_down_503_then_recovers),
        cmocka_unit_test_setup_teardown(test_http_healthz_503_when_redis_is_a_replica, fx_setup,
                                        fx_teardown_redis),
        cmocka_unit_test_setup_teardown(test_http_healthz_503_when_writes_refused, fx_setup,
                                        fx_teardown_redis),
        T(test_http_lock_held_503_market_busy),
        T(test_http_many_buyers_one_item_one_200),
        T(test_http_waiting_purchase_holds_no_thread),
        cmocka_unit_test(test_binary_sigterm_exits_zero),
        T(test_binary_sigterm_finishes_in_flight),
        cmocka_unit_test(test_binary_flags_help_and_bad),
        cmocka_unit_test(test_binary_busy_address_refused_unless_reuse_port),
        cmocka_unit_test(test_binary_sighup_reopens_log_file),
        cmocka_unit_test(test_binary_warns_of_a_store_that_can_lose_purchases),
        T(test_http_auth_tokens_bind_players),
        T(test_http_auth_jwt_refusals_name_the_check),
        T(test_http_auth_audience),
        T(test_http_auth_es256_key_file),
        T(test_http_realm_routes_and_tokens),
        T(test_http_trades_routes),
        T(test_http_trades_public_parties),
        T(test_http_stackable_goods),
        T(test_http_many_lists_deferred),
        T(test_http_idempotent_retries_charged_once),
        T(test_http_idempotent_replay_header),
        T(test_http_idempotent_second_attempt_409_then_replay),
        T(test_http_idempotent_refusal_replayed),
        T(test_http_metrics_count_requests_and_locks),
        T(test_http_metrics_pass_promtool),
        T(test_http_request_id_echoed_or_made),
        T(test_http_slow_clients_do_not_starve_others),
        T(test_http_redis_acl_user_end_to_end),
    };
    return cmocka_run_group_tests_name("http (integration)", tests, group_setup, group_teardown);
}
