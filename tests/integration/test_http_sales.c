/* test_http_sales.c - the admin's routes over HTTP against a real
 * redis-server. Flash sales: the admin credential of POST /sales (apart
 * from player tokens, checked even with --no-auth), GET /sales/{id}, POST
 * /sales/{id}/buy with the buyer's token and an Idempotency-Key, the stacks
 * of GET /players/{id}, bad input answered 4xx with the store unchanged,
 * and 300 concurrent buyers over HTTP (suspended connections, one worker)
 * checked exactly. The realm's settings: GET /config for anyone, PUT
 * /config for the admin alone, its refusals, and the cut on a purchase's
 * receipt, its trade and the house's funds.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <hiredis.h>
#include <jansson.h>

#include "tests/helpers/cmocka_all.h"

#include "api/api.h"
#include "lock/lock.h"
#include "market/market.h"
#include "server/server.h"
#include "tests/helpers/http_client.h"
#include "tests/helpers/demo_world.h"
#include "tests/helpers/redis_proc.h"

#define SECRET "player-secret"
#define ADMIN "admin-secret"
#define NBUYERS 300

static th_redis redis;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The demo world (which has the house "game"), and players q0..q<NBUYERS-1>
 * with 100 each; every key is deleted first. */
static void seed(void) {
    market_world *w = th_demo_world();
    for (int i = 0; i < NBUYERS; i++) {
        char id[16];
        snprintf(id, sizeof id, "q%d", i);
        assert_int_equal(market_world_add_player(w, id, NULL, 100), MARKET_OK);
    }
    redisContext *rc = redisConnect("127.0.0.1", redis.port);
    assert_non_null(rc);
    freeReplyObject(redisCommand(rc, "FLUSHALL"));
    redisFree(rc);
    th_world_store(redis.url, MARKET_REALM_DEFAULT, w);
}

/* A server with player tokens (secret, or none: --no-auth) and admin secret
 * admin (NULL: none). */
static server *start(const char *secret, const char *admin, int *port) {
    server_config cfg;
    server_config_defaults(&cfg);
    if (secret)
        snprintf(cfg.auth_secret, sizeof cfg.auth_secret, "%s", secret);
    else
        cfg.no_auth = 1;
    if (admin) snprintf(cfg.admin_secret, sizeof cfg.admin_secret, "%s", admin);
    snprintf(cfg.listen, sizeof cfg.listen, "127.0.0.1:0");
    snprintf(cfg.redis, sizeof cfg.redis, "%s", redis.url);
    cfg.threads = 2;
    cfg.log_level = SERVER_LOG_ERROR;
    int err;
    char why[256];
    server *s = server_start(&cfg, &err, why, sizeof why);
    assert_non_null(s);
    *port = server_port(s);
    return s;
}

/* Sends a request with an optional header, asserts its status, returns the
 * parsed body (new reference). */
static json_t *call(int port, const char *method, const char *path, const char *header,
                    const char *body, long status) {
    return th_http_json(port, method, path, header, body, status);
}

static void bearer(char *out, size_t outlen, const char *player) {
    char tok[API_TOKEN_MAX + 1];
    api_token_spec spec = {SECRET, NULL, NULL, NULL, player, (int64_t)time(NULL), 3600};
    assert_int_equal(api_token_make(&spec, tok, sizeof tok), MARKET_OK);
    int n = snprintf(out, outlen, "Authorization: Bearer %s", tok);
    assert_true(n > 0 && (size_t)n < outlen);
}

static void admin_bearer(char *out, size_t outlen, const char *secret) {
    char tok[API_ADMIN_TOKEN_MAX + 1];
    assert_int_equal(api_admin_token_make(secret, tok, sizeof tok), MARKET_OK);
    snprintf(out, outlen, "Authorization: Bearer %s", tok);
}

static int64_t jint(json_t *j, const char *key) {
    json_t *v = json_object_get(j, key);
    assert_true(json_is_integer(v));
    return (int64_t)json_integer_value(v);
}

static void assert_error(json_t *j, const char *code) {
    const char *got = json_string_value(json_object_get(j, "error"));
    assert_non_null(got);
    assert_string_equal(got, code);
}

/* A request that must be refused, and how. */
struct refusal {
    const char *method, *path, *auth, *body;
    long status;
    const char *error;
};

/* Sends each of r[0..n) to port, asserts its status and error code, and that none of them
 * changed the store. */
static void assert_refused(int port, const struct refusal *r, size_t n) {
    char *before = th_store_fingerprint(redis.port);
    for (size_t i = 0; i < n; i++) {
        json_t *j = call(port, r[i].method, r[i].path, r[i].auth, r[i].body, r[i].status);
        assert_error(j, r[i].error);
        json_decref(j);
    }
    char *after = th_store_fingerprint(redis.port);
    assert_string_equal(after, before);
    free(before);
    free(after);
}

static char *sale_body(const char *id, int64_t stock, int64_t limit) {
    static char b[512];
    int64_t t = now_ms();
    snprintf(b, sizeof b,
             "{\"id\":\"%s\",\"item\":\"potion\",\"stock\":%lld,\"price\":10,\"limit\":%lld,"
             "\"start\":%lld,\"end\":%lld}",
             id, (long long)stock, (long long)limit, (long long)(t - 1000),
             (long long)(t + 3600000));
    return b;
}

/* ---- tests ---- */

/* Only the admin token creates a sale: no admin secret is 403, a player
 * token or none is 401, also with --no-auth; the admin's is 201, once. */
static void test_http_sales_admin_credential(void **state) {
    (void)state;
    seed();
    char adm[256], bob[256], other[256];
    admin_bearer(adm, sizeof adm, ADMIN);
    admin_bearer(other, sizeof other, "not-the-admin-secret");
    bearer(bob, sizeof bob, "B");
    int port;
    server *s = start(SECRET, NULL, &port);
    json_t *j = call(port, "POST", "/sales", adm, sale_body("s1", 10, 2), 403);
    assert_error(j, "admin_disabled");
    json_decref(j);
    server_stop(s);

    s = start(SECRET, ADMIN, &port);
    j = call(port, "POST", "/sales", bob, sale_body("s1", 10, 2), 401);
    assert_error(j, "unauthorized");
    json_decref(j);
    j = call(port, "POST", "/sales", NULL, sale_body("s1", 10, 2), 401);
    json_decref(j);
    j = call(port, "POST", "/sales", other, sale_body("s1", 10, 2), 401);
    json_decref(j);
    j = call(port, "GET", "/sales/s1", NULL, NULL, 404);
    assert_error(j, "sale_not_found");
    json_decref(j);
    j = call(port, "POST", "/sales", adm, sale_body("s1", 10, 2), 201);
    assert_string_equal(json_string_value(json_object_get(j, "id")), "s1");
    assert_int_equal(jint(j, "stock_left"), 10);
    assert_true(json_is_true(json_object_get(j, "active")));
    assert_string_equal(json_string_value(json_object_get(j, "house")), "game");
    json_decref(j);
    j = call(port, "POST", "/sales", adm, sale_body("s1", 10, 2), 409);
    assert_error(j, "sale_exists");
    json_decref(j);
    char nohouse[600];
    snprintf(nohouse, sizeof nohouse, "%.*s,\"house\":\"nobody\"}",
             (int)strlen(sale_body("s2", 10, 2)) - 1, sale_body("s2", 10, 2));
    j = call(port, "POST", "/sales", adm, nohouse, 404);
    assert_error(j, "player_not_found");
    json_decref(j);
    j = call(port, "GET", "/sales/s2", NULL, NULL, 404);
    json_decref(j);
    /* an id is drawn when none is given */
    j = call(port, "POST", "/sales", adm,
             "{\"item\":\"gem\",\"stock\":1,\"price\":1,\"limit\":1,\"start\":0,\"end\":1}", 201);
    assert_true(market_id_valid(json_string_value(json_object_get(j, "id"))));
    assert_true(json_is_false(json_object_get(j, "active")));
    json_decref(j);
    server_stop(s);

    s = start(NULL, ADMIN, &port); /* --no-auth: players act freely, the admin route does not */
    j = call(port, "POST", "/sales", NULL, sale_body("s3", 10, 2), 401);
    json_decref(j);
    j = call(port, "POST", "/sales", adm, sale_body("s3", 10, 2), 201);
    json_decref(j);
    j = call(port, "POST", "/sales/s3/buy", NULL, "{\"buyer\":\"B\",\"quantity\":1}", 200);
    json_decref(j);
    server_stop(s);
}

/* A buy with the buyer's token: 200 with the trade, the player's stack and
 * the sale show it; a retry with the same Idempotency-Key replays it; the
 * refusals say why; bad input changes nothing. */
static void test_http_sales_buy_and_refusals(void **state) {
    (void)state;
    seed();
    char adm[256], bob[256], carol[256], key[300];
    admin_bearer(adm, sizeof adm, ADMIN);
    bearer(bob, sizeof bob, "B");
    bearer(carol, sizeof carol, "C");
    int port;
    server *s = start(SECRET, ADMIN, &port);
    json_t *j = call(port, "POST", "/sales", adm, sale_body("s1", 5, 3), 201);
    json_decref(j);
    char *before = th_store_fingerprint(redis.port);
    j = call(port, "POST", "/sales/s1/buy", NULL, "{\"buyer\":\"B\",\"quantity\":1}", 401);
    json_decref(j);
    j = call(port, "POST", "/sales/s1/buy", carol, "{\"buyer\":\"B\",\"quantity\":1}", 403);
    json_decref(j);
    j = call(port, "POST", "/sales/s1/buy", bob, "{\"buyer\":\"B\",\"quantity\":0}", 400);
    json_decref(j);
    j = call(port, "POST", "/sales/s1/buy", bob, "{\"buyer\":\"B\",\"quantity\":1,\"x\":1}", 400);
    json_decref(j);
    j = call(port, "POST", "/sales/s1/buy", bob, "{\"buyer\":\"B\"}", 400);
    json_decref(j);
    j = call(port, "POST", "/sales/a.b/buy", bob, "{\"buyer\":\"B\",\"quantity\":1}", 400);
    json_decref(j);
    j = call(port, "POST", "/sales", adm, "{\"item\":\"potion\"}", 400);
    json_decref(j);
    j = call(port, "GET", "/sales/s1/buy", NULL, NULL, 405);
    json_decref(j);
    char *after = th_store_fingerprint(redis.port);
    assert_string_equal(before, after);
    free(before);
    free(after);

    snprintf(key, sizeof key, "%s\r\nIdempotency-Key: buy-1", bob);
    j = call(port, "POST", "/sales/s1/buy", key, "{\"buyer\":\"B\",\"quantity\":2}", 200);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "bought");
    assert_int_equal(jint(j, "quantity"), 2);
    assert_int_equal(jint(j, "total"), 20);
    assert_int_equal(jint(j, "buyer_funds"), 780);
    assert_int_equal(jint(j, "stock_left"), 3);
    char trade[64];
    snprintf(trade, sizeof trade, "%s", json_string_value(json_object_get(j, "trade_id")));
    json_decref(j);
    j = call(port, "POST", "/sales/s1/buy", key, "{\"buyer\":\"B\",\"quantity\":2}", 200);
    assert_string_equal(json_string_value(json_object_get(j, "trade_id")), trade);
    json_decref(j);
    j = call(port, "GET", "/players/B", NULL, NULL, 200);
    assert_int_equal(jint(j, "funds"), 780);
    assert_int_equal(jint(json_object_get(j, "stacks"), "potion"), 2);
    json_decref(j);
    j = call(port, "GET", "/players/D", NULL, NULL, 200); /* holds no goods */
    assert_true(json_is_object(json_object_get(j, "stacks")));
    assert_int_equal(json_object_size(json_object_get(j, "stacks")), 0);
    json_decref(j);
    char path[128];
    snprintf(path, sizeof path, "/trades/%s", trade);
    j = call(port, "GET", path, NULL, NULL, 200); /* anyone: the trade, not its parties */
    assert_null(json_object_get(j, "seller"));
    assert_null(json_object_get(j, "buyer"));
    assert_int_equal(jint(j, "quantity"), 2);
    json_decref(j);
    j = call(port, "GET", path, bob, NULL, 200); /* its buyer */
    assert_string_equal(json_string_value(json_object_get(j, "buyer")), "B");
    assert_string_equal(json_string_value(json_object_get(j, "seller")), "game");
    json_decref(j);
    j = call(port, "POST", "/sales/s1/buy", bob, "{\"buyer\":\"B\",\"quantity\":2}", 409);
    assert_error(j, "limit_exceeded");
    assert_int_equal(jint(j, "may_buy"), 1);
    json_decref(j);
    j = call(port, "POST", "/sales/s1/buy", carol, "{\"buyer\":\"C\",\"quantity\":4}", 409);
    assert_error(j, "sold_out");
    assert_int_equal(jint(j, "stock_left"), 3);
    json_decref(j);
    j = call(port, "GET", "/sales/s1", NULL, NULL, 200);
    assert_int_equal(jint(j, "stock_left"), 3);
    assert_int_equal(jint(j, "sold"), 2);
    assert_int_equal(jint(j, "stock"), 5);
    assert_int_equal(jint(j, "limit"), 3);
    assert_int_equal(jint(j, "price"), 10);
    assert_string_equal(json_string_value(json_object_get(j, "item")), "potion");
    json_decref(j);
    j = call(port, "POST", "/sales/nope/buy", bob, "{\"buyer\":\"B\",\"quantity\":1}", 404);
    assert_error(j, "sale_not_found");
    json_decref(j);
    j = call(port, "GET", "/players/game", NULL, NULL, 200);
    assert_int_equal(jint(j, "funds"), 20);
    json_decref(j);
    server_stop(s);
}

struct buyer {
    int port;
    char id[16];
    long status[3];
};

static void *buy_main(void *arg) {
    struct buyer *b = arg;
    char body[64];
    snprintf(body, sizeof body, "{\"buyer\":\"%s\",\"quantity\":1}", b->id);
    for (int i = 0; i < 3; i++) {
        th_http r;
        if (th_http_do(b->port, "POST", "/realms/main/sales/hot/buy", body, strlen(body), &r) ==
            0)
            b->status[i] = r.status;
        th_http_cleanup(&r);
    }
    return NULL;
}

/* 300 buyers at once over HTTP (--no-auth), three buys each, for 50 units
 * with a limit of 2: exactly 50 answered 200, nobody above 2. */
static void test_http_sales_concurrent_buyers_exact(void **state) {
    (void)state;
    seed();
    char adm[256];
    admin_bearer(adm, sizeof adm, ADMIN);
    int port;
    server *s = start(NULL, ADMIN, &port);
    json_t *j = call(port, "POST", "/realms/main/sales", adm, sale_body("hot", 50, 2), 201);
    json_decref(j);
    static struct buyer b[NBUYERS];
    pthread_t t[NBUYERS];
    for (int i = 0; i < NBUYERS; i++) {
        b[i] = (struct buyer){.port = port};
        snprintf(b[i].id, sizeof b[i].id, "q%d", i);
        assert_int_equal(pthread_create(&t[i], NULL, buy_main, &b[i]), 0);
    }
    long ok = 0;
    for (int i = 0; i < NBUYERS; i++) {
        pthread_join(t[i], NULL);
        long mine = 0;
        for (int k = 0; k < 3; k++) {
            assert_true(b[i].status[k] == 200 || b[i].status[k] == 409);
            mine += b[i].status[k] == 200;
        }
        assert_true(mine <= 2);
        ok += mine;
        char path[128];
        snprintf(path, sizeof path, "/players/%s", b[i].id);
        j = call(port, "GET", path, NULL, NULL, 200);
        assert_int_equal(jint(j, "funds"), 100 - 10 * mine);
        json_decref(j);
    }
    assert_int_equal(ok, 50);
    j = call(port, "GET", "/sales/hot", NULL, NULL, 200);
    assert_int_equal(jint(j, "sold"), 50);
    assert_int_equal(jint(j, "stock_left"), 0);
    assert_true(json_is_false(json_object_get(j, "active")));
    json_decref(j);
    j = call(port, "GET", "/players/game", NULL, NULL, 200);
    assert_int_equal(jint(j, "funds"), 500);
    json_decref(j);
    server_stop(s);
}

/* GET /config is anyone's; PUT /config the admin's alone, with its
 * refusals changing nothing; a purchase then pays the cut: its receipt, its
 * trade and the house's funds say so. */
static void test_http_settings_and_the_cut(void **state) {
    (void)state;
    seed();
    char adm[256], bob[256];
    admin_bearer(adm, sizeof adm, ADMIN);
    bearer(bob, sizeof bob, "B");
    int port;
    server *s = start(SECRET, ADMIN, &port);
    json_t *j = call(port, "GET", "/config", NULL, NULL, 200);
    assert_int_equal(jint(j, "fee_bps"), 0);
    assert_string_equal(json_string_value(json_object_get(j, "house")), "game");
    assert_string_equal(json_string_value(json_object_get(j, "realm")), "main");
    json_decref(j);
    /* refusals: bad bodies, no house, no token, a player's, another method; none changes
     * the store */
    const struct refusal refused[] = {
        {"PUT", "/config", adm, "{\"fee_bps\":10001}", 400, "bad_request"},
        {"PUT", "/config", adm, "{\"fee_bps\":-1}", 400, "bad_request"},
        {"PUT", "/config", adm, "{\"fee_bps\":\"5\"}", 400, "bad_request"},
        {"PUT", "/config", adm, "{\"fee_bps\":5,\"cut\":1}", 400, "bad_request"},
        {"PUT", "/config", adm, "{\"house\":\"game\"}", 400, "bad_request"},
        {"PUT", "/config", adm, "{\"fee_bps\":5,\"house\":\"no one\"}", 400, "bad_request"},
        {"PUT", "/config", adm, "{\"fee_bps\":500,\"house\":\"nobody\"}", 404, "player_not_found"},
        {"PUT", "/config", bob, "{\"fee_bps\":500}", 401, "unauthorized"},
        {"PUT", "/config", NULL, "{\"fee_bps\":500}", 401, "unauthorized"},
        {"POST", "/config", adm, "{\"fee_bps\":500}", 405, "method_not_allowed"},
    };
    assert_refused(port, refused, sizeof refused / sizeof *refused);
    j = call(port, "GET", "/realms/main/config", NULL, NULL, 200);
    assert_int_equal(jint(j, "fee_bps"), 0); /* nothing above changed it */
    json_decref(j);
    j = call(port, "PUT", "/realms/main/config", adm, "{\"fee_bps\":500,\"list_fee_bps\":100}",
             200);
    assert_int_equal(jint(j, "fee_bps"), 500);
    assert_int_equal(jint(j, "list_fee_bps"), 100);
    assert_string_equal(json_string_value(json_object_get(j, "house")), "game");
    json_decref(j);
    /* B buys A's axe at 500: A is paid 475, the house 25 */
    j = call(port, "POST", "/purchase", bob, "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}",
             200);
    assert_int_equal(jint(j, "total"), 500);
    assert_int_equal(jint(j, "fee"), 25);
    char path[128];
    snprintf(path, sizeof path, "/trades/%s", json_string_value(json_object_get(j, "trade_id")));
    json_decref(j);
    j = call(port, "GET", path, NULL, NULL, 200);
    assert_int_equal(jint(j, "fee"), 25);
    json_decref(j);
    j = call(port, "GET", "/players/A", NULL, NULL, 200);
    assert_int_equal(jint(j, "funds"), 100 + 475);
    json_decref(j);
    j = call(port, "GET", "/players/game", NULL, NULL, 200);
    assert_int_equal(jint(j, "funds"), 25);
    json_decref(j);
    /* C lists potion-3 at 400 and pays the house 1% of it */
    char carol[256];
    bearer(carol, sizeof carol, "C");
    j = call(port, "POST", "/list", carol, "{\"seller\":\"C\",\"item\":\"potion-3\",\"price\":400}",
             201);
    assert_int_equal(jint(j, "fee"), 4);
    json_decref(j);
    j = call(port, "GET", "/players/game", NULL, NULL, 200);
    assert_int_equal(jint(j, "funds"), 29);
    json_decref(j);
    server_stop(s);
    s = start(SECRET, NULL, &port); /* no admin secret: nobody sets the cut */
    j = call(port, "PUT", "/config", adm, "{\"fee_bps\":0}", 403);
    assert_error(j, "admin_disabled");
    json_decref(j);
    server_stop(s);
}

/* A list with a duration (POST /list "duration_s") answers its end, and the server's
 * sweeper gives the item back when it comes; the realm's default duration is a setting
 * (PUT /config "list_duration_s"); durations out of range are refused, nothing written. */
static void test_http_listing_durations(void **state) {
    (void)state;
    seed();
    char adm[256], carol[256];
    admin_bearer(adm, sizeof adm, ADMIN);
    bearer(carol, sizeof carol, "C");
    int port;
    server *s = start(SECRET, ADMIN, &port);
    const struct refusal refused[] = {
        {"POST", "/list", carol,
         "{\"seller\":\"C\",\"item\":\"potion-3\",\"price\":4,\"duration_s\":0}", 400,
         "bad_request"},
        {"POST", "/list", carol,
         "{\"seller\":\"C\",\"item\":\"potion-3\",\"price\":4,\"duration_s\":-5}", 400,
         "bad_request"},
        {"POST", "/list", carol,
         "{\"seller\":\"C\",\"item\":\"potion-3\",\"price\":4,\"duration_s\":\"60\"}", 400,
         "bad_request"},
        {"POST", "/list", carol,
         "{\"seller\":\"C\",\"item\":\"potion-3\",\"price\":4,\"duration_s\":2592001}", 400,
         "bad_request"},
        {"PUT", "/config", adm, "{\"fee_bps\":0,\"list_duration_s\":2592001}", 400, "bad_request"},
        {"PUT", "/config", adm, "{\"fee_bps\":0,\"list_duration_s\":-1}", 400, "bad_request"},
    };
    assert_refused(port, refused, sizeof refused / sizeof *refused);
    int64_t t0 = now_ms();
    json_t *j = call(port, "POST", "/list", carol,
                     "{\"seller\":\"C\",\"item\":\"potion-3\",\"price\":4,\"duration_s\":1}", 201);
    int64_t ends = jint(j, "ends_ms");
    assert_true(ends >= t0 + 1000 - 50 && ends <= now_ms() + 1000 + 50); /* the store's clock */
    json_decref(j);
    int back = 0;
    for (int i = 0; i < 3000 && !back; i++) { /* the sweeper looks every second */
        j = call(port, "GET", "/players/C", NULL, NULL, 200);
        json_t *inv = json_object_get(j, "inventory");
        for (size_t k = 0; k < json_array_size(inv); k++)
            back |= strcmp(json_string_value(json_array_get(inv, k)), "potion-3") == 0;
        json_decref(j);
        if (!back) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    assert_true(back);
    j = call(port, "GET", "/market?item=potion-3", NULL, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "listings")), 0);
    json_decref(j);
    /* the realm's default: a list that names no duration ends after it */
    j = call(port, "PUT", "/config", adm, "{\"fee_bps\":0,\"list_duration_s\":3600}", 200);
    assert_int_equal(jint(j, "list_duration_s"), 3600);
    json_decref(j);
    j = call(port, "GET", "/config", NULL, NULL, 200);
    assert_int_equal(jint(j, "list_duration_s"), 3600);
    json_decref(j);
    t0 = now_ms();
    j = call(port, "POST", "/list", carol, "{\"seller\":\"C\",\"item\":\"potion-3\",\"price\":4}",
             201);
    ends = jint(j, "ends_ms");
    assert_true(ends >= t0 + 3600000 - 1000 && ends <= now_ms() + 3600000 + 1000);
    json_decref(j);
    /* the market shows when it ends; a listing without an end shows none */
    j = call(port, "GET", "/market?item=potion-3", NULL, NULL, 200);
    assert_int_equal(jint(json_array_get(json_object_get(j, "listings"), 0), "ends_ms"), ends);
    json_decref(j);
    j = call(port, "GET", "/market?item=sword-2", NULL, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "listings")), 1);
    assert_null(json_object_get(json_array_get(json_object_get(j, "listings"), 0), "ends_ms"));
    json_decref(j);
    server_stop(s);
}

/* Auctions over HTTP: refusals (bad bodies, tokens, ids, a bid too low, one's own) answered
 * 4xx with nothing written; C auctions its sword, B bids, E buys it out; the auction, the
 * players' auctions and bids, the search of auctions and the trade read back. */
static void test_http_auctions(void **state) {
    (void)state;
    seed();
    char bob[256], carol[256], erin[256];
    bearer(bob, sizeof bob, "B");
    bearer(carol, sizeof carol, "C");
    bearer(erin, sizeof erin, "E");
    int port;
    server *s = start(SECRET, ADMIN, &port);
    const char *sword = "{\"seller\":\"C\",\"item\":\"sword-1\",\"start_bid\":100,"
                        "\"duration_s\":600,\"buyout\":900,\"min_increment\":10}";
    const struct refusal refused[] = {
        {"POST", "/auctions", carol, "{\"seller\":\"C\",\"item\":\"sword-1\",\"start_bid\":100}",
         400, "bad_request"},
        {"POST", "/auctions", carol,
         "{\"seller\":\"C\",\"item\":\"sword-1\",\"start_bid\":0,\"duration_s\":60}", 400,
         "bad_request"},
        {"POST", "/auctions", carol,
         "{\"seller\":\"C\",\"item\":\"sword-1\",\"start_bid\":100,\"duration_s\":60,"
         "\"buyout\":50}",
         400, "bad_request"},
        {"POST", "/auctions", carol,
         "{\"seller\":\"C\",\"item\":\"sword-1\",\"start_bid\":100,\"duration_s\":60,"
         "\"reserve\":1}",
         400, "bad_request"},
        {"POST", "/auctions", NULL, sword, 401, "unauthorized"},
        {"POST", "/auctions", bob, sword, 403, "forbidden"},
        {"POST", "/auctions/abc/bid", bob, "{\"bidder\":\"B\",\"amount\":100}", 400, "bad_request"},
        {"POST", "/auctions/1/bid", carol, "{\"bidder\":\"B\",\"amount\":100}", 403, "forbidden"},
        {"POST", "/auctions/1/bid", bob, "{\"bidder\":\"B\",\"amount\":100}", 404,
         "auction_not_found"},
        {"GET", "/auctions/7", NULL, NULL, 404, "auction_not_found"},
        {"GET", "/auctions?limit=0", NULL, NULL, 400, "bad_request"},
        {"GET", "/auctions?item=a.b", NULL, NULL, 400, "bad_request"},
        {"DELETE", "/auctions", bob, NULL, 405, "method_not_allowed"},
    };
    assert_refused(port, refused, sizeof refused / sizeof *refused);
    json_t *j = call(port, "POST", "/auctions", carol, sword, 201);
    json_t *a = json_object_get(j, "auction");
    assert_int_equal(jint(a, "id"), 1);
    assert_string_equal(json_string_value(json_object_get(a, "state")), "open");
    assert_int_equal(jint(a, "buyout"), 900);
    assert_true(jint(a, "ends_ms") > now_ms());
    json_decref(j);
    j = call(port, "GET", "/players/C", NULL, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "auctions")), 1);
    assert_int_equal(json_array_size(json_object_get(j, "inventory")), 1); /* potion-3 left */
    json_decref(j);
    /* refusals of bids: too low (with the least it takes), the seller's own; nothing moves */
    const struct refusal bids[] = {
        {"POST", "/auctions/1/bid", bob, "{\"bidder\":\"B\",\"amount\":99}", 409, "bid_too_low"},
        {"POST", "/auctions/1/bid", carol, "{\"bidder\":\"C\",\"amount\":500}", 409, "own_auction"},
    };
    assert_refused(port, bids, 2);
    j = call(port, "POST", "/auctions/1/bid", bob, "{\"bidder\":\"B\",\"amount\":99}", 409);
    assert_int_equal(jint(j, "min_bid"), 100);
    json_decref(j);
    j = call(port, "POST", "/auctions/1/bid", bob, "{\"bidder\":\"B\",\"amount\":120}", 200);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "leading");
    assert_int_equal(jint(j, "bidder_funds"), 800 - 120);
    json_decref(j);
    j = call(port, "GET", "/players/B", NULL, NULL, 200);
    assert_int_equal(jint(j, "escrow"), 120);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(j, "bids"), 0)), 1);
    json_decref(j);
    j = call(port, "GET", "/auctions?item=sword-1", NULL, NULL, 200);
    assert_int_equal(jint(j, "total"), 1);
    assert_int_equal(jint(json_array_get(json_object_get(j, "auctions"), 0), "bid"), 120);
    json_decref(j);
    j = call(port, "POST", "/auctions/1/bid", erin, "{\"bidder\":\"E\",\"amount\":900}", 200);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "sold");
    assert_string_equal(json_string_value(json_object_get(j, "outbid")), "B");
    assert_int_equal(jint(j, "refund"), 120);
    char path[128];
    snprintf(path, sizeof path, "/trades/%s", json_string_value(json_object_get(j, "trade_id")));
    json_decref(j);
    j = call(port, "GET", path, NULL, NULL, 200);
    assert_int_equal(jint(j, "total"), 900);
    json_decref(j);
    j = call(port, "GET", "/auctions/1", NULL, NULL, 200);
    assert_string_equal(json_string_value(json_object_get(j, "state")), "sold");
    assert_string_equal(json_string_value(json_object_get(j, "bidder")), "E");
    json_decref(j);
    j = call(port, "GET", "/players/B", NULL, NULL, 200);
    assert_int_equal(jint(j, "escrow"), 0);
    assert_int_equal(jint(j, "funds"), 800);
    json_decref(j);
    j = call(port, "POST", "/auctions/1/bid", bob, "{\"bidder\":\"B\",\"amount\":950}", 409);
    assert_error(j, "auction_closed");
    json_decref(j);
    server_stop(s);
}

/* Direct trades over HTTP: refusals (bad sides, oneself, nothing, tokens, a stranger's or the
 * proposer's accept, goods one lacks) answered 4xx with nothing written; C offers D its sword
 * and 10 arrows for D's shield and 20; only D and C read the trade; D accepts; both sides
 * moved; a second accept is refused. */
static void test_http_direct_trades(void **state) {
    (void)state;
    seed();
    char carol[256], dave[256], erin[256];
    bearer(carol, sizeof carol, "C");
    bearer(dave, sizeof dave, "D");
    bearer(erin, sizeof erin, "E");
    int port;
    server *s = start(SECRET, ADMIN, &port);
    const char *offer = "{\"from\":\"C\",\"to\":\"D\",\"give\":{\"items\":[\"sword-1\"],"
                        "\"units\":{\"arrow\":10}},\"get\":{\"items\":[\"shield-7\"],"
                        "\"funds\":20},\"duration_s\":600}";
    const struct refusal refused[] = {
        {"POST", "/trades/direct", carol, "{\"from\":\"C\",\"to\":\"D\"}", 400, "bad_request"},
        {"POST", "/trades/direct", carol, "{\"from\":\"C\",\"to\":\"C\",\"give\":{\"funds\":1}}",
         400, "bad_request"},
        {"POST", "/trades/direct", carol,
         "{\"from\":\"C\",\"to\":\"D\",\"give\":{\"items\":[\"sword-1\",\"sword-1\"]}}", 400,
         "bad_request"},
        {"POST", "/trades/direct", carol,
         "{\"from\":\"C\",\"to\":\"D\",\"give\":{\"units\":{\"arrow\":0}}}", 400, "bad_request"},
        {"POST", "/trades/direct", carol, "{\"from\":\"C\",\"to\":\"D\",\"give\":{\"gold\":1}}",
         400, "bad_request"},
        {"POST", "/trades/direct", carol, "{\"from\":\"C\",\"to\":\"D\",\"give\":[1]}", 400,
         "bad_request"},
        {"POST", "/trades/direct", NULL, offer, 401, "unauthorized"},
        {"POST", "/trades/direct", dave, offer, 403, "forbidden"},
        {"POST", "/trades/direct", carol,
         "{\"from\":\"C\",\"to\":\"D\",\"give\":{\"items\":[\"bow-2\"]}}", 404, "item_not_held"},
        {"POST", "/trades/direct", carol,
         "{\"from\":\"C\",\"to\":\"nobody\",\"give\":{\"funds\":1}}", 404, "player_not_found"},
        {"POST", "/trades/direct/x/accept", dave, "{\"player\":\"D\"}", 400, "bad_request"},
        {"POST", "/trades/direct/1/accept", dave, "{\"player\":\"D\"}", 404,
         "direct_trade_not_found"},
        {"GET", "/trades/direct/1", dave, NULL, 404, "direct_trade_not_found"},
        {"GET", "/trades/direct", dave, NULL, 405, "method_not_allowed"},
    };
    assert_refused(port, refused, sizeof refused / sizeof *refused);
    json_t *j = call(port, "POST", "/trades/direct", carol, offer, 201);
    json_t *t = json_object_get(j, "trade");
    assert_int_equal(jint(t, "id"), 1);
    assert_string_equal(json_string_value(json_object_get(t, "state")), "open");
    assert_int_equal(jint(json_object_get(json_object_get(t, "give"), "units"), "arrow"), 10);
    assert_int_equal(jint(t, "expires_ms") - jint(t, "made_ms"), 600000);
    json_decref(j);
    const struct refusal closing[] = {
        {"POST", "/trades/direct/1/accept", erin, "{\"player\":\"E\"}", 404,
         "direct_trade_not_found"},
        {"POST", "/trades/direct/1/cancel", erin, "{\"player\":\"E\"}", 404,
         "direct_trade_not_found"},
        {"POST", "/trades/direct/1/accept", carol, "{\"player\":\"C\"}", 409, "own_trade"},
        {"POST", "/trades/direct/1/accept", carol, "{\"player\":\"D\"}", 403, "forbidden"},
        {"GET", "/trades/direct/1", erin, NULL, 404, "direct_trade_not_found"},
        {"GET", "/trades/direct/1", NULL, NULL, 404, "direct_trade_not_found"},
        {"GET", "/players/D/direct", erin, NULL, 403, "forbidden"},
    };
    assert_refused(port, closing, sizeof closing / sizeof *closing);
    j = call(port, "GET", "/players/D/direct", dave, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "trades")), 1);
    json_decref(j);
    j = call(port, "GET", "/trades/direct/1", carol, NULL, 200);
    assert_string_equal(json_string_value(json_object_get(j, "to")), "D");
    json_decref(j);
    /* a refusal names who lacks what */
    j = call(port, "POST", "/trades/direct", dave,
             "{\"from\":\"D\",\"to\":\"C\",\"give\":{\"funds\":60}}", 402);
    assert_error(j, "insufficient_funds");
    assert_string_equal(json_string_value(json_object_get(j, "player")), "D");
    json_decref(j);
    j = call(port, "POST", "/trades/direct/1/accept", dave, "{\"player\":\"D\"}", 200);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "done");
    assert_int_equal(jint(j, "funds"), 40 - 20); /* the demo's D has 40 (and 10 escrowed) */
    json_decref(j);
    j = call(port, "GET", "/players/D", NULL, NULL, 200);
    json_t *inv = json_object_get(j, "inventory");
    assert_int_equal(json_array_size(inv), 1);
    assert_string_equal(json_string_value(json_array_get(inv, 0)), "sword-1");
    assert_int_equal(jint(json_object_get(j, "stacks"), "arrow"), 10);
    json_decref(j);
    j = call(port, "GET", "/players/C", NULL, NULL, 200);
    assert_int_equal(jint(j, "funds"), 2520);
    assert_int_equal(jint(json_object_get(j, "stacks"), "arrow"), 30);
    json_decref(j);
    j = call(port, "POST", "/trades/direct/1/accept", dave, "{\"player\":\"D\"}", 409);
    assert_error(j, "trade_closed");
    assert_string_equal(json_string_value(json_object_get(j, "state")), "done");
    json_decref(j);
    j = call(port, "GET", "/players/D/direct", dave, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "trades")), 0);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_sales_admin_credential),
        cmocka_unit_test(test_http_sales_buy_and_refusals),
        cmocka_unit_test(test_http_sales_concurrent_buyers_exact),
        cmocka_unit_test(test_http_settings_and_the_cut),
        cmocka_unit_test(test_http_listing_durations),
        cmocka_unit_test(test_http_auctions),
        cmocka_unit_test(test_http_direct_trades),
    };
    return cmocka_run_group_tests_name("the admin's routes over HTTP (integration)", tests,
                                       group_setup, group_teardown);
}
