/* test_api.c - unit tests for api/: routing, validation, the status table, fixtures.
 *
 * No Redis is needed. Every test gets a market whose store is a closed
 * loopback port (127.0.0.1:1) and whose lock is lock_local: validation
 * errors answer before the store is touched, and a valid request reaches
 * market/ and comes back as 503 store_unavailable, which tests the mapping.
 * The rest of the status table is tested directly through api__reply_market().
 *
 * Three groups run: the unit tests, api_fixture_parse(), and one test per
 * folder of fixtures/api (or $API_FIXTURES_DIR): request.json, status,
 * response.json (the keys it holds must match) and optionally headers.json
 * ({"allow": ..., "retry_after_s": ...}). Run from the repository root.
 */
#include "api/api.h"

#include "tests/helpers/cmocka_all.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "api/api_impl.h"
#include "lock/lock.h"
#include "rconn/rconn.h"
#include "market/market.h"

#define CLOSED_STORE "redis://127.0.0.1:1/0"
#define PATH_LEN 1024

/* ---- the environment ---- */

typedef struct env {
    lock_client *lock;
    market *m;
    market_conn *conn;
    char dir[PATH_LEN]; /* the fixture case folder, for the data-driven tests */
} env;

/* Builds a market over a closed port. *state may hold a case folder. */
static int env_setup(void **state) {
    env *e = calloc(1, sizeof *e);
    if (!e) return -1;
    if (*state) snprintf(e->dir, sizeof e->dir, "%s", (const char *)*state);
    market_config cfg = {0};
    int err = 0;
    if (rconn_addr_parse(CLOSED_STORE, &cfg.redis) != 0) goto fail;
    cfg.redis_timeout_ms = 200;
    cfg.lock_ttl_ms = 2000;
    cfg.acquire_timeout_ms = 200;
    if (!(e->lock = lock_local_new(&err))) goto fail;
    if (!(e->m = market_new(&cfg, e->lock, &err))) goto fail;
    if (!(e->conn = market_conn_new(e->m, &err))) goto fail;
    *state = e;
    return 0;
fail:
    market_free(e->m);
    lock_free(e->lock);
    free(e);
    return -1;
}

static int env_teardown(void **state) {
    env *e = *state;
    if (!e) return 0;
    market_conn_free(e->conn);
    market_free(e->m);
    lock_free(e->lock);
    free(e);
    *state = NULL;
    return 0;
}

/* ---- requests and answers ---- */

/* Query arguments: a NULL-terminated list of name, value pairs. */
static const char *pairs_lookup(void *ud, enum api_arg_kind kind, const char *name) {
    const char *const *kv = ud;
    if (kind != API_ARG_QUERY) return NULL;
    for (; kv && kv[0]; kv += 2)
        if (strcmp(kv[0], name) == 0) return kv[1];
    return NULL;
}

static void call_q(const env *e, const char *method, const char *path, const char *body,
                   const char *const *query, api_response *r) {
    api_request req = {method, path, body, body ? strlen(body) : 0, pairs_lookup, (void *)query};
    api_handle(e->conn, &req, r);
}

static void call(const env *e, const char *method, const char *path, const char *body,
                 api_response *r) {
    call_q(e, method, path, body, NULL, r);
}

/* Parses r's body, checking the response is well-formed. New reference. */
static json_t *body_json(const api_response *r) {
    assert_non_null(r->body);
    assert_int_equal(strlen(r->body), r->body_len);
    json_error_t jerr;
    json_t *b = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!b) fail_msg("body is not JSON: %s (%s)", r->body, jerr.text);
    assert_true(json_is_object(b));
    return b;
}

static void assert_member(json_t *obj, const char *key, const char *want) {
    const char *got = json_string_value(json_object_get(obj, key));
    if (!got) fail_msg("no string member '%s'", key);
    assert_string_equal(got, want);
}

/* Asserts r is status with {"error": code}, and that its detail contains
 * detail_has (when not NULL). Releases r's body. */
static void expect_error(api_response *r, int status, const char *code, const char *detail_has) {
    assert_int_equal(r->status, status);
    json_t *b = body_json(r);
    assert_member(b, "error", code);
    if (detail_has) {
        const char *d = json_string_value(json_object_get(b, "detail"));
        if (!d) fail_msg("no detail in %s", r->body);
        if (!strstr(d, detail_has)) fail_msg("detail '%s' lacks '%s'", d, detail_has);
    }
    json_decref(b);
    api_response_cleanup(r);
}

static void expect_bad(const env *e, const char *path, const char *body, const char *detail_has) {
    api_response r;
    call(e, "POST", path, body, &r);
    expect_error(&r, 400, "bad_request", detail_has);
    assert_int_equal(r.retry_after_s, 0);
    assert_null(r.allow);
}

/* ---- bodies: JSON ---- */

static void test_api_body_malformed_json_400(void **state) {
    expect_bad(*state, "/purchase", "{\"buyer\": \"B\",", "not valid JSON");
    expect_bad(*state, "/purchase", "{buyer: \"B\"}", "not valid JSON");
    expect_bad(*state, "/purchase", "{'buyer': 'B'}", "not valid JSON");
    expect_bad(*state, "/list", "{\"seller\":\"A\" \"item\":\"x\"}", "not valid JSON");
}

static void test_api_body_trailing_garbage_400(void **state) {
    expect_bad(*state, "/purchase", "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"} x",
               "not valid JSON");
    expect_bad(*state, "/purchase", "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}{}",
               "not valid JSON");
}

static void test_api_body_duplicate_key_400(void **state) {
    expect_bad(*state, "/purchase",
               "{\"buyer\":\"B\",\"buyer\":\"C\",\"seller\":\"A\",\"item\":\"x\"}",
               "duplicate key");
    expect_bad(*state, "/unlist", "{\"seller\":\"A\",\"item\":\"x\",\"z\":{\"k\":1,\"k\":2}}",
               "duplicate key");
}

static void test_api_body_empty_400(void **state) {
    env *e = *state;
    api_response r;
    api_request req = {"POST", "/purchase", NULL, 0, NULL, NULL};
    api_handle(e->conn, &req, &r);
    expect_error(&r, 400, "bad_request", "request body is empty");
    req.body = "";
    api_handle(e->conn, &req, &r);
    expect_error(&r, 400, "bad_request", "request body is empty");
    req.body = "{\"buyer\":\"B\"}"; /* a length of 0 wins over the pointer */
    api_handle(e->conn, &req, &r);
    expect_error(&r, 400, "bad_request", "request body is empty");
    expect_bad(e, "/list", "  \r\n", "not valid JSON");
}

static void test_api_body_nul_byte_400(void **state) {
    env *e = *state;
    static const char body[] = "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}\0";
    api_response r;
    api_request req = {"POST", "/purchase", body, sizeof body - 1, NULL, NULL};
    api_handle(e->conn, &req, &r);
    expect_error(&r, 400, "bad_request", "NUL byte at offset 39");
    /* an escaped NUL inside a string is refused by the parser */
    expect_bad(e, "/purchase", "{\"buyer\":\"B\\u0000\",\"seller\":\"A\",\"item\":\"axe\"}",
               "not valid JSON");
}

static void test_api_body_not_object_400(void **state) {
    expect_bad(*state, "/purchase", "[{\"buyer\":\"B\"}]", "must be a JSON object, not an array");
    expect_bad(*state, "/purchase", "42", "must be a JSON object, not a number");
    expect_bad(*state, "/purchase", "\"buyer\"", "must be a JSON object, not a string");
    expect_bad(*state, "/purchase", "true", "must be a JSON object, not a boolean");
    expect_bad(*state, "/purchase", "null", "must be a JSON object, not null");
}

static void test_api_body_invalid_utf8_400(void **state) {
    expect_bad(*state, "/purchase", "{\"buyer\":\"B\xff\",\"seller\":\"A\",\"item\":\"x\"}",
               "not valid JSON");
    expect_bad(*state, "/purchase", "{\"buyer\":\"\xc0\xaf\",\"seller\":\"A\",\"item\":\"x\"}",
               "not valid JSON");
}

static void test_api_body_deep_nesting_400(void **state) {
    size_t depth = 5000;
    char *body = malloc(2 * depth + 1);
    assert_non_null(body);
    memset(body, '[', depth);
    memset(body + depth, ']', depth);
    body[2 * depth] = '\0';
    expect_bad(*state, "/purchase", body, "not valid JSON");
    free(body);
}

static void test_api_body_too_large_413(void **state) {
    env *e = *state;
    size_t len = API_BODY_MAX + 1;
    char *body = malloc(len);
    assert_non_null(body);
    memset(body, ' ', len);
    api_response r;
    api_request req = {"POST", "/purchase", body, len, NULL, NULL};
    api_handle(e->conn, &req, &r);
    expect_error(&r, 413, "payload_too_large", "exceeds");
    free(body);
}

/* ---- bodies: fields ---- */

static void test_api_purchase_missing_field_400(void **state) {
    expect_bad(*state, "/purchase", "{\"seller\":\"A\",\"item\":\"axe\"}", "missing field 'buyer'");
    expect_bad(*state, "/purchase", "{\"buyer\":\"B\",\"item\":\"axe\"}", "missing field 'seller'");
    expect_bad(*state, "/purchase", "{\"buyer\":\"B\",\"item\":\"axe\"}", "or 'max_price'");
    expect_bad(*state, "/purchase",
               "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"potion\",\"max_price\":3}",
               "field 'max_price' is for a purchase without 'seller'");
    expect_bad(*state, "/purchase",
               "{\"buyer\":\"B\",\"item\":\"potion\",\"price\":3,\"max_price\":5}",
               "field 'price' needs a 'seller'");
    expect_bad(*state, "/purchase",
               "{\"buyer\":\"B\",\"item\":\"potion\",\"max_price\":3,\"quantity\":0}",
               "field 'quantity' must be an integer in 1..1000000000");
    expect_bad(*state, "/purchase",
               "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"potion\",\"quantity\":1000000001}",
               "field 'quantity' must be an integer in 1..1000000000");
    expect_bad(*state, "/list", "{\"seller\":\"A\",\"item\":\"potion\",\"price\":3,\"quantity\":-1}",
               "field 'quantity' must be an integer in 1..1000000000");
    expect_bad(*state, "/purchase", "{\"buyer\":\"B\",\"seller\":\"A\"}", "missing field 'item'");
    expect_bad(*state, "/purchase", "{}", "missing field 'buyer'");
}

static void test_api_purchase_mistyped_field_400(void **state) {
    expect_bad(*state, "/purchase", "{\"buyer\":7,\"seller\":\"A\",\"item\":\"axe\"}",
               "field 'buyer' must be a string, not a number");
    expect_bad(*state, "/purchase", "{\"buyer\":\"B\",\"seller\":[\"A\"],\"item\":\"axe\"}",
               "field 'seller' must be a string, not an array");
    expect_bad(*state, "/purchase", "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":null}",
               "field 'item' must be a string, not null");
    expect_bad(*state, "/purchase", "{\"buyer\":\"B\",\"seller\":{\"a\":[1,{}]},\"item\":\"x\"}",
               "field 'seller' must be a string, not an object");
    expect_bad(*state, "/purchase", "{\"buyer\":false,\"seller\":\"A\",\"item\":\"x\"}",
               "field 'buyer' must be a string, not a boolean");
}

static void test_api_purchase_unknown_field_400(void **state) {
    expect_bad(*state, "/purchase",
               "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\",\"prize\":5}",
               "unknown field 'prize'");
    /* unknown fields are reported before missing ones: a typo is named */
    expect_bad(*state, "/purchase", "{\"buyr\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}",
               "unknown field 'buyr'");
    expect_bad(*state, "/purchase", "{\"\":1}", "unknown field ''");
}

static void test_api_unknown_field_long_name_is_shortened(void **state) {
    env *e = *state;
    char body[400];
    char name[201];
    memset(name, 'x', 200);
    name[200] = '\0';
    snprintf(body, sizeof body, "{\"%s\":1}", name);
    api_response r;
    call(e, "POST", "/purchase", body, &r);
    assert_int_equal(r.status, 400);
    json_t *b = body_json(&r);
    const char *d = json_string_value(json_object_get(b, "detail"));
    assert_non_null(d);
    assert_non_null(strstr(d, "...'"));
    assert_true(strlen(d) < 100);
    json_decref(b);
    api_response_cleanup(&r);
    /* cut inside a multi-byte character: the detail stays valid UTF-8 */
    char key[200] = "";
    for (int i = 0; i < 40; i++)
        strcat(key, "\xc3\xa9"); /* U+00E9, 80 bytes */
    snprintf(body, sizeof body, "{\"%s\":1}", key);
    call(e, "POST", "/list", body, &r);
    expect_error(&r, 400, "bad_request", "\xc3\xa9...'");
}

static void test_api_purchase_bad_ids_400(void **state) {
    env *e = *state;
    char body[256], id65[66];
    memset(id65, 'b', 65);
    id65[65] = '\0';
    snprintf(body, sizeof body, "{\"buyer\":\"%s\",\"seller\":\"A\",\"item\":\"axe\"}", id65);
    expect_bad(e, "/purchase", body, "field 'buyer' must match [A-Za-z0-9_-]{1,64}");
    expect_bad(e, "/purchase", "{\"buyer\":\"B\",\"seller\":\"\",\"item\":\"axe\"}",
               "field 'seller' must match");
    expect_bad(e, "/purchase", "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe.A\"}",
               "field 'item' must match");
    expect_bad(e, "/purchase", "{\"buyer\":\"B b\",\"seller\":\"A\",\"item\":\"axe\"}",
               "field 'buyer' must match");
    expect_bad(e, "/purchase", "{\"buyer\":\"B\",\"seller\":\"A:\",\"item\":\"axe\"}",
               "field 'seller' must match");
    expect_bad(e, "/purchase", "{\"buyer\":\"B\xc3\xb6\",\"seller\":\"A\",\"item\":\"axe\"}",
               "field 'buyer' must match");
    expect_bad(e, "/list", "{\"seller\":\"A\",\"item\":\"*\",\"price\":1}",
               "field 'item' must match");
}

static void test_api_purchase_longest_id_reaches_store_503(void **state) {
    env *e = *state;
    char body[256], id64[65];
    memset(id64, 'b', 64);
    id64[64] = '\0';
    snprintf(body, sizeof body, "{\"buyer\":\"%s\",\"seller\":\"A_-9\",\"item\":\"axe\"}", id64);
    api_response r;
    call(e, "POST", "/purchase", body, &r);
    expect_error(&r, 503, "store_unavailable", NULL);
}

static void test_api_purchase_buyer_is_seller_400(void **state) {
    expect_bad(*state, "/purchase", "{\"buyer\":\"A\",\"seller\":\"A\",\"item\":\"axe\"}",
               "fields 'buyer' and 'seller' must differ");
}

static void test_api_purchase_bad_price_400(void **state) {
    static const char *const prices[] = {
        "0",     "-1",   "-500",  "1000000000001", "9223372036854775807",
        "500.0", "5e2",  "1.5",   "\"500\"",       "true",
        "false", "null", "[500]", "{\"v\":500}",
    };
    char body[256];
    for (size_t i = 0; i < sizeof prices / sizeof prices[0]; i++) {
        snprintf(body, sizeof body,
                 "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\",\"price\":%s}", prices[i]);
        expect_bad(*state, "/purchase", body,
                   "field 'price' must be an integer in 1..1000000000000");
    }
    expect_bad(*state, "/purchase",
               "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\",\"price\":99999999999999999999}",
               "not valid JSON");
}

static void test_api_purchase_price_bounds_reach_store_503(void **state) {
    env *e = *state;
    api_response r;
    call(e, "POST", "/purchase", "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\",\"price\":1}",
         &r);
    expect_error(&r, 503, "store_unavailable", NULL);
    call(e, "POST", "/purchase",
         "{\"price\":1000000000000,\"item\":\"axe\",\"seller\":\"A\",\"buyer\":\"B\"}", &r);
    expect_error(&r, 503, "store_unavailable", NULL);
}

static void test_api_purchase_store_down_503(void **state) {
    env *e = *state;
    api_response r;
    call(e, "POST", "/purchase", "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}", &r);
    assert_int_equal(r.retry_after_s, 1);
    assert_null(r.allow);
    expect_error(&r, 503, "store_unavailable", NULL);
}

static void test_api_list_validation_400(void **state) {
    expect_bad(*state, "/list", "{\"seller\":\"A\",\"item\":\"axe\"}", "missing field 'price'");
    expect_bad(*state, "/list", "{\"seller\":\"A\",\"item\":\"axe\",\"price\":0}",
               "field 'price' must be an integer in 1..1000000000000");
    expect_bad(*state, "/list", "{\"seller\":\"A\",\"item\":\"axe\",\"price\":2.0}",
               "field 'price' must be an integer");
    expect_bad(*state, "/list", "{\"seller\":\"A\",\"item\":\"axe\",\"price\":5,\"buyer\":\"B\"}",
               "unknown field 'buyer'");
    expect_bad(*state, "/list", "{\"item\":\"axe\",\"price\":5}", "missing field 'seller'");
}

static void test_api_list_store_down_503(void **state) {
    env *e = *state;
    api_response r;
    call(e, "POST", "/list", "{\"seller\":\"A\",\"item\":\"axe\",\"price\":500}", &r);
    assert_int_equal(r.retry_after_s, 1);
    expect_error(&r, 503, "store_unavailable", NULL);
}

static void test_api_unlist_validation_400(void **state) {
    expect_bad(*state, "/unlist", "{\"seller\":\"A\",\"item\":\"axe\",\"price\":500}",
               "unknown field 'price'");
    expect_bad(*state, "/unlist", "{\"item\":\"axe\"}", "missing field 'seller'");
    expect_bad(*state, "/unlist", "{\"seller\":\"A\",\"item\":1}",
               "field 'item' must be a string, not a number");
}

static void test_api_unlist_store_down_503(void **state) {
    env *e = *state;
    api_response r;
    call(e, "POST", "/unlist", "{\"seller\":\"A\",\"item\":\"axe\"}", &r);
    expect_error(&r, 503, "store_unavailable", NULL);
}

/* ---- GET routes ---- */

static void test_api_players_bad_id_400(void **state) {
    env *e = *state;
    api_response r;
    char path[128] = "/players/";
    memset(path + 9, 'p', 65);
    path[9 + 65] = '\0';
    call(e, "GET", path, NULL, &r);
    expect_error(&r, 400, "bad_request", "player id must match");
    call(e, "GET", "/players/a.b", NULL, &r);
    expect_error(&r, 400, "bad_request", "player id must match");
    call(e, "GET", "/players/%41", NULL, &r); /* the server decodes; we see it raw */
    expect_error(&r, 400, "bad_request", "player id must match");
}

static void test_api_players_empty_or_nested_id_404(void **state) {
    env *e = *state;
    api_response r;
    call(e, "GET", "/players/", NULL, &r);
    expect_error(&r, 404, "not_found", NULL);
    call(e, "GET", "/players", NULL, &r);
    expect_error(&r, 404, "not_found", NULL);
    call(e, "GET", "/players/A/", NULL, &r);
    expect_error(&r, 404, "not_found", NULL);
    call(e, "GET", "/players/A/inventory", NULL, &r);
    expect_error(&r, 404, "not_found", NULL);
    call(e, "GET", "/players//A", NULL, &r);
    expect_error(&r, 404, "not_found", NULL);
}

static void test_api_players_store_down_503(void **state) {
    env *e = *state;
    api_response r;
    call(e, "GET", "/players/A", NULL, &r);
    assert_int_equal(r.retry_after_s, 1);
    expect_error(&r, 503, "store_unavailable", NULL);
}

static void test_api_market_bad_query_400(void **state) {
    env *e = *state;
    static const char *const bad_limits[] = {"0",
                                             "1001",
                                             "-1",
                                             "+5",
                                             " 5",
                                             "5 ",
                                             "ten",
                                             "",
                                             "1e2",
                                             "0x10",
                                             "99999999999999999999999999"};
    static const char *const bad_offsets[] = {"-1", "1000000001", "abc",
                                              "",   "1.0",        "18446744073709551617"};
    api_response r;
    for (size_t i = 0; i < sizeof bad_limits / sizeof bad_limits[0]; i++) {
        const char *const q[] = {"limit", bad_limits[i], NULL};
        call_q(e, "GET", "/market", NULL, q, &r);
        expect_error(&r, 400, "bad_request",
                     "query parameter 'limit' must be an integer in 1..1000");
    }
    for (size_t i = 0; i < sizeof bad_offsets / sizeof bad_offsets[0]; i++) {
        const char *const q[] = {"limit", "10", "offset", bad_offsets[i], NULL};
        call_q(e, "GET", "/market", NULL, q, &r);
        expect_error(&r, 400, "bad_request",
                     "query parameter 'offset' must be an integer in 0..1000000000");
    }
}

static void test_api_market_good_query_reaches_store_503(void **state) {
    env *e = *state;
    static const char *const queries[][5] = {
        {NULL},
        {"limit", "1", NULL},
        {"limit", "1000", "offset", "1000000000", NULL},
        {"offset", "0", NULL},
        {"limit", "007", "offset", "0000", NULL},
    };
    api_response r;
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
        call_q(e, "GET", "/market", NULL, queries[i], &r);
        expect_error(&r, 503, "store_unavailable", NULL);
    }
    /* no lookup hook at all: the defaults */
    api_request req = {"GET", "/market", NULL, 0, NULL, NULL};
    api_handle(e->conn, &req, &r);
    expect_error(&r, 503, "store_unavailable", NULL);
}

static void test_api_market_search_bad_query_400(void **state) {
    env *e = *state;
    static const struct {
        const char *q[9];
        const char *detail;
    } rows[] = {
        {{"item", "", NULL}, "query parameter 'item' must match [A-Za-z0-9_-]{1,64}"},
        {{"item", "a.x", NULL}, "query parameter 'item' must match"},
        {{"seller", "A B", NULL}, "query parameter 'seller' must match"},
        {{"min_price", "0", NULL},
         "query parameter 'min_price' must be an integer in 1..1000000000000"},
        {{"min_price", "-5", NULL}, "query parameter 'min_price' must be an integer"},
        {{"max_price", "1000000000001", NULL}, "query parameter 'max_price' must be an integer"},
        {{"max_price", "1e3", NULL}, "query parameter 'max_price' must be an integer"},
        {{"min_price", "10", "max_price", "9", NULL},
         "query parameter 'min_price' must not exceed max_price"},
        {{"sort", "name", NULL}, "query parameter 'sort' must be 'price' or '-price'"},
        {{"sort", "", NULL}, "query parameter 'sort' must be"},
        {{"sort", "PRICE", NULL}, "query parameter 'sort' must be"},
        {{"cursor", "", NULL}, "query parameter 'cursor' must not be empty"},
        {{"cursor", "abc", NULL}, "query parameter 'cursor' is not a cursor this service gave"},
        {{"cursor", "0000000000500:axe.A.B", NULL}, "query parameter 'cursor' is not a cursor"},
        {{"cursor", "0000000000500:axe.A", "seller", "B", NULL},
         "query parameter 'cursor' belongs to another search"},
        {{"cursor", "0000000000500:axe.A", "max_price", "499", NULL},
         "query parameter 'cursor' belongs to another search"},
        {{"cursor", "0000000000500:axe.A", "offset", "0", NULL},
         "query parameters 'offset' and 'cursor' cannot be combined"},
        {{"item", "axe", "offset", "10", NULL}, "query parameter 'offset' cannot be combined"},
        {{"sort", "price", "offset", "0", NULL}, "query parameter 'offset' cannot be combined"},
        {{"limit", "0", "item", "axe", NULL},
         "query parameter 'limit' must be an integer in 1..1000"},
    };
    api_response r;
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        call_q(e, "GET", "/market", NULL, rows[i].q, &r);
        expect_error(&r, 400, "bad_request", rows[i].detail);
        call_q(e, "GET", "/realms/eu-1/market", NULL, rows[i].q, &r);
        expect_error(&r, 400, "bad_request", rows[i].detail);
    }
}

static void test_api_market_search_good_query_reaches_store_503(void **state) {
    env *e = *state;
    static const char *const queries[][13] = {
        {"item", "axe", NULL},
        {"seller", "A", "sort", "-price", NULL},
        {"min_price", "1", "max_price", "1000000000000", NULL},
        {"min_price", "7", "max_price", "7", "limit", "1000", NULL},
        {"sort", "price", NULL},
        {"cursor", "0000000000500:axe.A", NULL},
        {"item", "axe", "seller", "A", "cursor", "0000000000500:axe.A", "sort", "-price", NULL},
        {"offset", "3", "limit", "2", "unknown", "x", NULL},
    };
    api_response r;
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
        call_q(e, "GET", "/market", NULL, queries[i], &r);
        expect_error(&r, 503, "store_unavailable", NULL);
    }
}

static void test_api_player_listings_routes(void **state) {
    env *e = *state;
    api_response r;
    call(e, "GET", "/players/A/listings", NULL, &r);
    assert_string_equal(r.route, "/players/{id}/listings");
    assert_string_equal(r.player, "A");
    expect_error(&r, 503, "store_unavailable", NULL);
    call(e, "HEAD", "/realms/eu-1/players/A/listings", NULL, &r);
    assert_string_equal(r.realm, "eu-1");
    expect_error(&r, 503, "store_unavailable", NULL);
    call(e, "GET", "/players/a.b/listings", NULL, &r);
    expect_error(&r, 400, "bad_request", "player id must match");
    const char *const other[] = {"cursor", "0000000000500:axe.B", NULL};
    call_q(e, "GET", "/players/A/listings", NULL, other, &r);
    expect_error(&r, 400, "bad_request", "query parameter 'cursor' belongs to another search");
    const char *const mine[] = {"cursor", "0000000000500:axe.A", "limit", "1", NULL};
    call_q(e, "GET", "/players/A/listings", NULL, mine, &r);
    expect_error(&r, 503, "store_unavailable", NULL);
    const char *const bad_limit[] = {"limit", "1001", NULL};
    call_q(e, "GET", "/players/A/listings", NULL, bad_limit, &r);
    expect_error(&r, 400, "bad_request", "query parameter 'limit' must be an integer in 1..1000");
    const char *const ignored[] = {"item", "a.b", "sort", "x", NULL}; /* not this route's */
    call_q(e, "GET", "/players/A/listings", NULL, ignored, &r);
    expect_error(&r, 503, "store_unavailable", NULL);
    call(e, "POST", "/players/A/listings", "{}", &r);
    assert_string_equal(r.allow, "GET, HEAD");
    expect_error(&r, 405, "method_not_allowed", NULL);
    static const char *const not_found[] = {"/players/A/listings/", "/players//listings",
                                            "/players/A/listing", "/players/A/listings/x"};
    for (size_t i = 0; i < sizeof not_found / sizeof *not_found; i++) {
        call(e, "GET", not_found[i], NULL, &r);
        expect_error(&r, 404, "not_found", NULL);
    }
    int i = api_route_index("/players/{id}/listings");
    assert_true(i >= 0 && i < API_ROUTES);
    assert_string_equal(api_route_name(i), "/players/{id}/listings");
}

static void test_api_healthz_store_down_503(void **state) {
    env *e = *state;
    api_response r;
    call(e, "GET", "/healthz", NULL, &r);
    assert_int_equal(r.retry_after_s, 1);
    expect_error(&r, 503, "store_unavailable", NULL);
}

/* ---- routing ---- */

static void test_api_unknown_path_404(void **state) {
    static const char *const paths[] = {"/",          "",          "/buy",         "/purchase/",
                                        "/purchases", "/Purchase", "/market/",     "/healthz/",
                                        "purchase",   "/list/x",   "/purchase?x=1"};
    env *e = *state;
    api_response r;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        call(e, "POST", paths[i], "{}", &r);
        assert_null(r.allow);
        expect_error(&r, 404, "not_found", NULL);
        call(e, "GET", paths[i], NULL, &r);
        expect_error(&r, 404, "not_found", NULL);
    }
}

static void test_api_wrong_method_405_with_allow(void **state) {
    static const struct {
        const char *method, *path, *allow;
    } cases[] = {
        {"GET", "/purchase", "POST"},
        {"PUT", "/purchase", "POST"},
        {"HEAD", "/purchase", "POST"},
        {"post", "/purchase", "POST"},
        {"GET", "/list", "POST"},
        {"DELETE", "/unlist", "POST"},
        {"POST", "/market", "GET, HEAD"},
        {"POST", "/healthz", "GET, HEAD"},
        {"DELETE", "/players/A", "GET, HEAD"},
        {"OPTIONS", "/market", "GET, HEAD"},
        {"", "/healthz", "GET, HEAD"},
    };
    env *e = *state;
    api_response r;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        call(e, cases[i].method, cases[i].path, "{}", &r);
        assert_non_null(r.allow);
        assert_string_equal(r.allow, cases[i].allow);
        assert_int_equal(r.retry_after_s, 0);
        expect_error(&r, 405, "method_not_allowed", NULL);
    }
}

/* Which requests api/ defers (api_route_deferrable()), row by row of its
 * route table, with the paths a suffix match would take for a purchase. Each
 * row is also begun with a body valid for the route it names: a request is
 * begun (api_handle_begin() returns non-zero) exactly when it is deferrable. */
static void test_api_route_deferrable_follows_route_table(void **state) {
    static const char purchase[] = "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}";
    static const char sale_buy[] = "{\"buyer\":\"B\",\"quantity\":1}";
    static const char list[] = "{\"seller\":\"A\",\"item\":\"axe\",\"price\":5}";
    static const char unlist[] = "{\"seller\":\"A\",\"item\":\"axe\"}";
    static const struct {
        const char *method, *path;
        int deferrable;
        const char *body; /* valid for the route, when it is one */
    } cases[] = {
        /* the deferred routes, with their realms */
        {"POST", "/purchase", 1, purchase},
        {"POST", "/realms/eu-1/purchase", 1, purchase},
        {"POST", "/sales/s1/buy", 1, sale_buy},
        {"POST", "/realms/eu/sales/s1/buy", 1, sale_buy},
        {"POST", "/list", 1, list},
        {"POST", "/realms/eu/list", 1, list},
        {"POST", "/unlist", 1, unlist},
        {"POST", "/realms/eu/unlist", 1, unlist},
        /* the same paths with another method */
        {"GET", "/purchase", 0, purchase},
        {"HEAD", "/purchase", 0, purchase},
        {"PUT", "/purchase", 0, purchase},
        {"post", "/purchase", 0, purchase},
        {"", "/purchase", 0, purchase},
        {"GET", "/sales/s1/buy", 0, sale_buy},
        {"DELETE", "/realms/eu/sales/s1/buy", 0, sale_buy},
        {"GET", "/list", 0, list},
        {"DELETE", "/unlist", 0, unlist},
        /* every other route of the table, with the method it serves */
        {"GET", "/players/A", 0, NULL},
        {"GET", "/market", 0, NULL},
        {"GET", "/healthz", 0, NULL},
        {"GET", "/players/A/listings", 0, NULL},
        {"GET", "/trades/t1", 0, NULL},
        {"GET", "/players/A/trades", 0, NULL},
        {"GET", "/items/axe/trades", 0, NULL},
        {"POST", "/sales", 0, "{}"},
        {"GET", "/sales/s1", 0, NULL},
        {"POST", "/sales/s1", 0, sale_buy},
        /* suffix tricks: not routes of the table, or routes that are not deferred */
        {"POST", "/x/purchase", 0, purchase},
        {"POST", "/players/A/purchase", 0, purchase},
        {"POST", "/sales/s1/purchase", 0, purchase},
        {"POST", "/purchase/", 0, purchase},
        {"POST", "/purchase/purchase", 0, purchase},
        {"POST", "/realms/eu/x/purchase", 0, purchase},
        {"POST", "/realms/eu", 0, purchase},
        {"POST", "/realms/bad!/purchase", 0, purchase},
        {"POST", "/realms//purchase", 0, purchase},
        {"POST", "/realms/purchase", 0, purchase},
        {"POST", "/buy", 0, sale_buy},
        {"POST", "/x/buy", 0, sale_buy},
        {"POST", "/sales/buy", 0, sale_buy},
        {"POST", "/sales//buy", 0, sale_buy},
        {"POST", "/sales/s1/x/buy", 0, sale_buy},
        {"POST", "/sales/s1/buy/", 0, sale_buy},
        {"POST", "/players/A/list", 0, list},
        {"POST", "/list/", 0, list},
        {"POST", "/x/unlist", 0, unlist},
        {"POST", "/items/axe/buy", 0, sale_buy},
        {"POST", "/realms/bad!/sales/s1/buy", 0, sale_buy},
        {"POST", "", 0, purchase},
        {"POST", "/", 0, purchase},
    };
    env *e = *state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = api_route_deferrable(cases[i].method, cases[i].path);
        if (got != cases[i].deferrable)
            fail_msg("%s '%s': deferrable %d, want %d", cases[i].method, cases[i].path, got,
                     cases[i].deferrable);
        const char *body = cases[i].body;
        api_request req = {cases[i].method, cases[i].path, body, body ? strlen(body) : 0};
        api_response r;
        api_deferred d;
        int kind = api_handle_begin(e->conn, &req, &r, &d);
        if ((kind != 0) != cases[i].deferrable)
            fail_msg("%s '%s': begun as %d (status %d)", cases[i].method, cases[i].path, kind,
                     r.status);
        if (kind) assert_null(r.body);
        api_response_cleanup(&r);
    }
    assert_int_equal(api_route_deferrable(NULL, "/purchase"), 0);
    assert_int_equal(api_route_deferrable("POST", NULL), 0);
}

/* The paths server/ answers itself (api_endpoint_find()): /metrics, and the
 * event stream of a realm, with what server/ once matched by suffix. */
static void test_api_endpoint_find_names_server_paths(void **state) {
    static const char long_realm[] = "/realms/"
                                     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                                     "/x/events";
    static const struct {
        const char *path;
        int want;
        const char *realm; /* with API_ENDPOINT_EVENTS: "" for a realm that is not an id */
    } cases[] = {
        {"/metrics", API_ENDPOINT_METRICS, NULL},
        {"/events", API_ENDPOINT_EVENTS, MARKET_REALM_DEFAULT},
        {"/realms/eu-1/events", API_ENDPOINT_EVENTS, "eu-1"},
        {"/realms/bad!/events", API_ENDPOINT_EVENTS, ""},
        {long_realm, API_ENDPOINT_EVENTS, ""}, /* longer than any id, as before */
        {"/realms/eu/x/events", API_ENDPOINT_ROUTE, NULL},
        {"/realms//events", API_ENDPOINT_ROUTE, NULL},
        {"/realms/events", API_ENDPOINT_ROUTE, NULL},
        {"/realms/eu/metrics", API_ENDPOINT_ROUTE, NULL},
        {"/metrics/", API_ENDPOINT_ROUTE, NULL},
        {"/events/", API_ENDPOINT_ROUTE, NULL},
        {"/x/events", API_ENDPOINT_ROUTE, NULL},
        {"/purchase", API_ENDPOINT_ROUTE, NULL},
        {"/", API_ENDPOINT_ROUTE, NULL},
        {"", API_ENDPOINT_ROUTE, NULL},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char realm[MARKET_REALM_MAX + 1] = "?";
        int got = api_endpoint_find(cases[i].path, realm);
        if (got != cases[i].want)
            fail_msg("'%s': endpoint %d, want %d", cases[i].path, got, cases[i].want);
        if (cases[i].realm) assert_string_equal(realm, cases[i].realm);
    }
    assert_int_equal(api_endpoint_find(NULL, NULL), API_ENDPOINT_ROUTE);
}

/* What an answer says of the store (api_response_store_up()). */
static void test_api_response_store_up_by_answer(void **state) {
    static const struct {
        const char *route;
        int status, market_rc, want;
    } cases[] = {
        {"/healthz", 200, 0, 1},
        {"/healthz", 503, MARKET_ERR_STORE, 0},
        {"/purchase", 200, 0, 1},
        {"/purchase", 404, MARKET_ERR_NOT_LISTED, 1},
        {"/purchase", 503, MARKET_ERR_STORE, 0},
        {"/purchase", 503, MARKET_ERR_NOT_REPLICATED, 0},
        {"/purchase", 500, MARKET_ERR_NOMEM, -1},
        {"/purchase", 400, 0, -1},
        {NULL, 404, 0, -1},
        {NULL, 200, 0, -1},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        api_response r = {.route = cases[i].route, .status = cases[i].status,
                          .market_rc = cases[i].market_rc};
        assert_int_equal(api_response_store_up(&r), cases[i].want);
    }
}

/* Counts the calls of api_deferred_submit()'s done callback. */
static void count_done(void *ud) {
    ++*(int *)ud;
}

/* api_deferred_submit() hands every deferred route's order to the market;
 * one the market refuses (here: stopped) is answered through the callback,
 * before the call returns. */
static void test_api_deferred_submit_refused_calls_done_once(void **state) {
    static const struct {
        const char *path, *body, *route, *player;
    } cases[] = {
        {"/purchase", "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}", "/purchase",
         "B"},
        {"/sales/s1/buy", "{\"buyer\":\"B\",\"quantity\":1}", "/sales/{id}/buy", "B"},
        {"/list", "{\"seller\":\"A\",\"item\":\"axe\",\"price\":5}", "/list", "A"},
        {"/unlist", "{\"seller\":\"A\",\"item\":\"axe\"}", "/unlist", "A"},
    };
    env *e = *state;
    market_shutdown(e->m);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        api_request req = {"POST", cases[i].path, cases[i].body, strlen(cases[i].body)};
        api_response r;
        api_deferred d;
        assert_int_equal(api_handle_begin(e->conn, &req, &r, &d), 1);
        int calls = 0;
        api_deferred_submit(e->m, &d, count_done, &calls);
        assert_int_equal(calls, 1);
        assert_int_equal(d.order.rc, MARKET_ERR_BUSY);
        api_deferred_end(&d, &r);
        assert_string_equal(r.route, cases[i].route);
        assert_string_equal(r.player, cases[i].player);
        expect_error(&r, 503, "market_busy", NULL);
    }
}

static void test_api_head_served_like_get(void **state) {
    env *e = *state;
    api_response r;
    call(e, "HEAD", "/healthz", NULL, &r);
    expect_error(&r, 503, "store_unavailable", NULL);
    call(e, "HEAD", "/players/A", NULL, &r);
    expect_error(&r, 503, "store_unavailable", NULL);
    const char *const q[] = {"limit", "0", NULL};
    call_q(e, "HEAD", "/market", NULL, q, &r);
    expect_error(&r, 400, "bad_request", "limit");
}

static void test_api_get_ignores_body(void **state) {
    env *e = *state;
    api_response r;
    call(e, "GET", "/healthz", "not json at all", &r);
    expect_error(&r, 503, "store_unavailable", NULL);
}

static void test_api_incomplete_request_500(void **state) {
    env *e = *state;
    api_response r;
    api_handle(e->conn, NULL, &r);
    expect_error(&r, 500, "internal_error", NULL);
    api_request req = {NULL, "/healthz", NULL, 0, NULL, NULL};
    api_handle(e->conn, &req, &r);
    expect_error(&r, 500, "internal_error", NULL);
    req = (api_request){"GET", NULL, NULL, 0, NULL, NULL};
    api_handle(e->conn, &req, &r);
    expect_error(&r, 500, "internal_error", NULL);
    api_handle(e->conn, &req, NULL); /* nowhere to answer: ignored */
}

static void test_api_null_conn_validates_then_500(void **state) {
    (void)state;
    api_response r;
    api_request req = {"POST", "/purchase", "{\"buyer\":\"B\"}", 13, NULL, NULL};
    api_handle(NULL, &req, &r);
    expect_error(&r, 400, "bad_request", "missing field 'item'");
    req.body = "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"x\"}";
    req.body_len = strlen(req.body);
    api_handle(NULL, &req, &r);
    expect_error(&r, 500, "internal_error", "no store connection");
    static const char *const gets[] = {"/healthz", "/market", "/players/A", "/players/A/listings"};
    for (size_t i = 0; i < sizeof gets / sizeof *gets; i++) {
        req = (api_request){"GET", gets[i], NULL, 0, NULL, NULL};
        api_handle(NULL, &req, &r);
        expect_error(&r, 500, "internal_error", NULL);
    }
    req = (api_request){"POST", "/list", "{\"seller\":\"A\",\"item\":\"x\",\"price\":3}",
                        0,      NULL,    NULL};
    req.body_len = strlen(req.body);
    api_handle(NULL, &req, &r);
    expect_error(&r, 500, "internal_error", NULL);
    req.path = "/unlist";
    req.body = "{\"seller\":\"A\",\"item\":\"x\"}";
    req.body_len = strlen(req.body);
    api_handle(NULL, &req, &r);
    expect_error(&r, 500, "internal_error", NULL);
}

/* ---- the status table ---- */

static void test_api_status_table_maps_every_market_code(void **state) {
    static const struct {
        int rc, status;
        const char *code;
        int retry;
    } rows[] = {
        {MARKET_ERR_NOT_LISTED, 404, "item_not_listed", 0},
        {MARKET_ERR_INSUFFICIENT_FUNDS, 402, "insufficient_funds", 0},
        {MARKET_ERR_PRICE_CHANGED, 409, "price_changed", 0},
        {MARKET_ERR_NO_PLAYER, 404, "player_not_found", 0},
        {MARKET_ERR_NOT_HELD, 404, "item_not_held", 0},
        {MARKET_ERR_OVERFLOW, 409, "funds_overflow", 0},
        {MARKET_ERR_BUSY, 503, "market_busy", 1},
        {MARKET_ERR_STORE, 503, "store_unavailable", 1},
        {MARKET_ERR_LEASE_LOST, 503, "lease_lost", 1},
        {MARKET_ERR_CONFLICT, 503, "conflict", 1},
        {MARKET_ERR_INVALID, 400, "bad_request", 0},
        {MARKET_ERR_DUPLICATE, 409, "duplicate", 0},
        {MARKET_ERR_NOMEM, 500, "internal_error", 0},
        {MARKET_ERR_IDEM_MISMATCH, 422, "idempotency_key_reused", 0},
        {MARKET_ERR_IN_PROGRESS, 409, "request_in_progress", 1},
        {MARKET_ERR_NOT_REPLICATED, 503, "not_replicated", 1},
        {MARKET_ERR_NO_TRADE, 404, "trade_not_found", 0},
        {MARKET_ERR_NOT_ENOUGH, 409, "not_enough_units", 0},
        {MARKET_ERR_NO_SALE, 404, "sale_not_found", 0},
        {MARKET_ERR_SALE_NOT_ACTIVE, 409, "sale_not_active", 0},
        {MARKET_ERR_SOLD_OUT, 409, "sold_out", 0},
        {MARKET_ERR_LIMIT_EXCEEDED, 409, "limit_exceeded", 0},
        {MARKET_ERR_REALM_UNAVAILABLE, 503, "realm_unavailable", 1},
        {MARKET_ERR_NO_ORDER, 404, "order_not_found", 0},
        {MARKET_ERR_NO_AUCTION, 404, "auction_not_found", 0},
        {MARKET_ERR_AUCTION_CLOSED, 409, "auction_closed", 0},
        {MARKET_ERR_BID_TOO_LOW, 409, "bid_too_low", 0},
        {MARKET_ERR_OWN_AUCTION, 409, "own_auction", 0},
        {MARKET_ERR_NO_DIRECT, 404, "direct_trade_not_found", 0},
        {MARKET_ERR_TRADE_CLOSED, 409, "trade_closed", 0},
        {MARKET_ERR_OWN_TRADE, 409, "own_trade", 0},
        {-32, 500, "internal_error", 0},
        {-1000, 500, "internal_error", 0},
        {MARKET_OK, 500, "internal_error", 0},
        {7, 500, "internal_error", 0},
    };
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        api_response r = {.allow = "junk", .retry_after_s = 9};
        api__reply_market(rows[i].rc, 777, &r);
        assert_int_equal(r.status, rows[i].status);
        assert_int_equal(r.retry_after_s, rows[i].retry);
        assert_null(r.allow);
        json_t *b = body_json(&r);
        assert_member(b, "error", rows[i].code);
        json_t *price = json_object_get(b, "price");
        if (rows[i].rc == MARKET_ERR_PRICE_CHANGED) {
            assert_true(json_is_integer(price));
            assert_int_equal(json_integer_value(price), 777);
        } else {
            assert_null(price);
        }
        json_decref(b);
        api_response_cleanup(&r);
    }
}

/* A purchase that failed in the store carries the store's reason to the
 * server's log (resp->why), not to the client's body. */
static void test_api_deferred_end_store_reason_for_logs(void **state) {
    (void)state;
    api_deferred p;
    memset(&p, 0, sizeof p);
    p.route = api_route_index("/purchase");
    p.order.type = MARKET_ORDER_PURCHASE;
    snprintf(p.player, sizeof p.player, "B");
    snprintf(p.seller, sizeof p.seller, "A");
    snprintf(p.item, sizeof p.item, "axe");
    p.order.rc = MARKET_ERR_STORE;
    snprintf(p.order.why, sizeof p.order.why, "commit refused: READONLY replica");
    api_response r = {0};
    api_deferred_end(&p, &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(r.why, "commit refused: READONLY replica");
    assert_null(strstr(r.body, "READONLY"));
    api_response_cleanup(&r);
    p.order.rc = MARKET_ERR_BUSY; /* only a store failure has a reason to log */
    api_response r2 = {0};
    api_deferred_end(&p, &r2);
    assert_int_equal(r2.status, 503);
    assert_string_equal(r2.why, "");
    api_response_cleanup(&r2);
}

static void test_api_status_table_price_is_64_bit(void **state) {
    (void)state;
    api_response r;
    api__reply_market(MARKET_ERR_PRICE_CHANGED, MARKET_PRICE_MAX, &r);
    assert_int_equal(r.status, 409);
    assert_non_null(strstr(r.body, "\"price\":1000000000000"));
    api_response_cleanup(&r);
}

/* A flat answer is the text json_dumpb() writes for the same members: keys
 * in order, every escape jansson makes, integers at both ends of 64 bits, a
 * string long enough to grow the buffer, and the empty object. */
static void test_api_flat_matches_jansson(void **state) {
    (void)state;
    char lng[1500];
    memset(lng, 'x', sizeof lng - 1);
    lng[sizeof lng - 1] = '\0';
    const char *strs[] = {"purchased",   "", "q\"uote\\back/slash", "\b\f\n\r\t\x01\x1f\x7f",
                          "caf\xc3\xa9", lng};
    const int64_t ints[] = {0, -1, 42, INT64_MAX, INT64_MIN};
    api__flat f = {0};
    json_t *o = json_object();
    assert_non_null(o);
    char key[16];
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        snprintf(key, sizeof key, "s%zu", i);
        api__flat_str(&f, key, strs[i]);
        assert_int_equal(json_object_set_new(o, key, json_string(strs[i])), 0);
        snprintf(key, sizeof key, "i%zu", i);
        int64_t v = ints[i % (sizeof ints / sizeof ints[0])];
        api__flat_int(&f, key, v);
        assert_int_equal(json_object_set_new(o, key, json_integer((json_int_t)v)), 0);
    }
    api_response r = {0};
    api__reply_flat(&r, 200, &f);
    api_response want = {0};
    api__reply(&want, 200, o);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, want.body_len);
    assert_string_equal(r.body, want.body);
    assert_null(f.text); /* the text is the response's now */
    api_response_cleanup(&r);
    api_response_cleanup(&want);
    api__flat none = {0};
    api__reply_flat(&r, 201, &none);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, "{}");
    assert_int_equal(r.body_len, 2);
    api_response_cleanup(&r);
}

/* ---- api_error and api_response_cleanup ---- */

static void test_api_error_builds_body(void **state) {
    (void)state;
    api_response r;
    api_error(413, "payload_too_large", NULL, &r);
    assert_int_equal(r.status, 413);
    assert_string_equal(r.body, "{\"error\":\"payload_too_large\"}");
    assert_int_equal(r.body_len, strlen(r.body));
    assert_int_equal(r.retry_after_s, 0);
    assert_null(r.allow);
    api_response_cleanup(&r);

    api_error(500, "internal_error", "it \"broke\"\n", &r);
    json_t *b = body_json(&r);
    assert_member(b, "error", "internal_error");
    assert_member(b, "detail", "it \"broke\"\n");
    assert_int_equal(json_object_size(b), 2);
    json_decref(b);
    api_response_cleanup(&r);
}

static void test_api_error_odd_input_is_made_safe(void **state) {
    (void)state;
    api_response r;
    api_error(503, NULL, "bad \xff byte, cut \xe2\x82", &r); /* not UTF-8 */
    assert_int_equal(r.status, 503);
    json_t *b = body_json(&r);
    assert_member(b, "error", "internal_error");
    assert_member(b, "detail", "bad ? byte, cut ??");
    json_decref(b);
    api_response_cleanup(&r);
    api_error(42, "weird", NULL, &r); /* not an HTTP status */
    assert_int_equal(r.status, 500);
    api_response_cleanup(&r);
    api_error(404, "\xed\xa0\x80x", "\xf4\x90\x80\x80", &r); /* a surrogate, above U+10FFFF */
    b = body_json(&r);
    assert_member(b, "error", "???x");
    assert_member(b, "detail", "????");
    json_decref(b);
    api_response_cleanup(&r);
    api_error(404, "x", NULL, NULL); /* nowhere to answer: ignored */
}

static void test_api_response_cleanup_twice_is_safe(void **state) {
    (void)state;
    api_response r;
    api_error(400, "bad_request", "x", &r);
    assert_non_null(r.body);
    api_response_cleanup(&r);
    assert_null(r.body);
    assert_int_equal(r.body_len, 0);
    assert_int_equal(r.status, 400);
    api_response_cleanup(&r);
    assert_null(r.body);
    api_response_cleanup(NULL);
}

static void test_api_quote_cuts_on_character_boundary(void **state) {
    (void)state;
    char out[API__QUOTE_MAX + 4];
    api__quote(out, sizeof out, "short");
    assert_string_equal(out, "short");
    char in[200];
    memset(in, 'a', sizeof in - 1);
    in[sizeof in - 1] = '\0';
    api__quote(out, sizeof out, in);
    assert_int_equal(strlen(out), API__QUOTE_MAX);
    assert_string_equal(out + API__QUOTE_MAX - 3, "...");
    char small[8];
    api__quote(small, sizeof small, "abcdefghij");
    assert_string_equal(small, "abcd...");
}

/* ---- out of memory: fail the Nth jansson allocation ---- */

static size_t chaos_count, chaos_fail_at;

static void *chaos_malloc(size_t n) {
    if (++chaos_count == chaos_fail_at) return NULL;
    return malloc(n);
}

static void chaos_free(void *p) {
    free(p);
}

/* Runs req with the 1st, 2nd, ... jansson allocation failing until a run
 * needs no more. Every answer must be the normal one or a 500 (with a
 * well-formed body, or none); or a 400, since jansson 2.14 reports some
 * failed allocations inside its parser as syntax errors. */
static void chaos_run(const env *e, const api_request *req, int status, const char *code) {
    for (chaos_fail_at = 1;; chaos_fail_at++) {
        api_response r;
        chaos_count = 0;
        json_set_alloc_funcs(chaos_malloc, chaos_free);
        api_handle(e->conn, req, &r);
        json_set_alloc_funcs(malloc, free);
        int done = chaos_count < chaos_fail_at;
        if (r.status == 500) {
            if (r.body) expect_error(&r, 500, "internal_error", NULL);
        } else if (r.status == 400 && !done) {
            expect_error(&r, 400, "bad_request", NULL);
        } else {
            expect_error(&r, status, code, NULL);
        }
        api_response_cleanup(&r);
        if (done) {
            assert_int_equal(r.status, status);
            break;
        }
    }
}

static void test_api_out_of_memory_500_or_normal(void **state) {
    env *e = *state;
    api_request req = {"POST", "/purchase", "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}",
                       0,      NULL,        NULL};
    req.body_len = strlen(req.body);
    chaos_run(e, &req, 503, "store_unavailable");
    req.body = "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\",\"x\":[1,2,{\"y\":\"z\"}]}";
    req.body_len = strlen(req.body);
    chaos_run(e, &req, 400, "bad_request");
    req = (api_request){"GET", "/nowhere", NULL, 0, NULL, NULL};
    chaos_run(e, &req, 404, "not_found");
    req = (api_request){"GET", "/purchase", NULL, 0, NULL, NULL};
    chaos_run(e, &req, 405, "method_not_allowed");
    req = (api_request){"GET", "/market", NULL, 0, NULL, NULL};
    chaos_run(e, &req, 503, "store_unavailable");
}

static void test_api_fixture_parse_out_of_memory_fails_cleanly(void **state) {
    static const char fx[] = "{\"players\":[{\"id\":\"A\",\"funds\":1,\"inventory\":[\"x\",\"y\"]},"
                             "{\"id\":\"B\",\"name\":\"Bob\",\"funds\":2}],"
                             "\"listings\":[{\"item\":\"z\",\"seller\":\"B\",\"price\":3}]}";
    (void)state;
    for (chaos_fail_at = 1;; chaos_fail_at++) {
        market_world *w = (market_world *)&chaos_count; /* must be overwritten */
        char why[256];
        chaos_count = 0;
        json_set_alloc_funcs(chaos_malloc, chaos_free);
        int rc = api_fixture_parse(fx, sizeof fx - 1, &w, why, sizeof why);
        json_set_alloc_funcs(malloc, free);
        int done = chaos_count < chaos_fail_at;
        if (rc == MARKET_OK) {
            assert_non_null(w);
            market_world_free(w);
        } else { /* INVALID too: jansson's parser blurs some failed allocations */
            if (rc != MARKET_ERR_NOMEM && rc != MARKET_ERR_INVALID) fail_msg("rc %d: %s", rc, why);
            assert_true(why[0] != '\0');
            assert_null(w);
        }
        if (done) {
            assert_int_equal(rc, MARKET_OK);
            break;
        }
    }
}

/* ---- api_fixture_parse ---- */

static int fixture_rc(const char *text, char *why, size_t whylen) {
    market_world *w = (market_world *)why; /* must be overwritten */
    int rc = api_fixture_parse(text, strlen(text), &w, why, whylen);
    if (rc == MARKET_OK) {
        assert_non_null(w);
        market_world_free(w);
    } else {
        assert_true(rc < 0);
        assert_null(w);
        assert_true(why == NULL || why[0] != '\0');
    }
    return rc;
}

static void expect_fixture_refused(const char *text, int rc, const char *why_has) {
    char why[256];
    int got = fixture_rc(text, why, sizeof why);
    if (got == MARKET_OK) fail_msg("fixture accepted: %s", text);
    if (!strstr(why, why_has)) fail_msg("message '%s' lacks '%s'", why, why_has);
    assert_int_equal(got, rc);
}

static void test_api_fixture_parse_good_gives_world(void **state) {
    char why[256];
    (void)state;
    assert_int_equal(fixture_rc("{\"players\":[{\"id\":\"A\",\"name\":\"Alice\",\"funds\":100,"
                                "\"inventory\":[\"sword-1\"]},{\"id\":\"B\",\"funds\":0}],"
                                "\"listings\":[{\"item\":\"axe\",\"seller\":\"A\",\"price\":500}]}",
                                why, sizeof why),
                     MARKET_OK);
    assert_string_equal(why, "");
    assert_int_equal(fixture_rc("{\"players\":[]}", why, sizeof why), MARKET_OK);
    assert_int_equal(fixture_rc("{\"players\":[{\"id\":\"A\",\"funds\":9223372036854775807,"
                                "\"inventory\":[]}],\"listings\":[{\"item\":\"x\",\"seller\":"
                                "\"A\",\"price\":1000000000000}]}",
                                NULL, 0),
                     MARKET_OK);
}

/* Stackable goods: stacks held by several players, listings of units by
 * several sellers; an id that is both a unique item and a good, units out
 * of range, or a second listing of a good by the same seller, refused. */
/* Buy orders: each shaped, by a player, escrowed out of its funds, and not
 * filled by a listing of its good. */
static void test_api_fixture_parse_orders(void **state) {
    char why[256];
    (void)state;
    assert_int_equal(fixture_rc("{\"players\":[{\"id\":\"B\",\"funds\":10}],\"orders\":["
                                "{\"buyer\":\"B\",\"item\":\"ore\",\"quantity\":2,"
                                "\"max_price\":5}]}",
                                why, sizeof why),
                     MARKET_OK);
    expect_fixture_refused("{\"players\":[],\"orders\":{}}", MARKET_ERR_INVALID,
                           "orders: must be an array");
    expect_fixture_refused("{\"players\":[{\"id\":\"B\",\"funds\":10}],\"orders\":[{"
                           "\"buyer\":\"Z\",\"item\":\"ore\",\"quantity\":1,\"max_price\":1}]}",
                           MARKET_ERR_INVALID, "orders[0].buyer: unknown player 'Z'");
    expect_fixture_refused("{\"players\":[{\"id\":\"B\",\"funds\":10}],\"orders\":[{"
                           "\"buyer\":\"B\",\"item\":\"ore\",\"quantity\":0,\"max_price\":1}]}",
                           MARKET_ERR_INVALID, "orders[0].quantity: must be an integer in 1..");
    expect_fixture_refused("{\"players\":[{\"id\":\"B\",\"funds\":10}],\"orders\":[{"
                           "\"buyer\":\"B\",\"item\":\"ore\",\"quantity\":1,\"max_price\":1,"
                           "\"side\":1}]}",
                           MARKET_ERR_INVALID, "orders[0]: unknown field 'side'");
    expect_fixture_refused("{\"players\":[{\"id\":\"B\",\"funds\":10}],\"orders\":[{"
                           "\"buyer\":\"B\",\"item\":\"ore\",\"quantity\":3,\"max_price\":4}]}",
                           MARKET_ERR_INSUFFICIENT_FUNDS, "cannot escrow its buy orders");
    expect_fixture_refused("{\"players\":[{\"id\":\"B\",\"funds\":10,\"stacks\":{\"ore\":"
                           "5}}],\"listings\":[{\"item\":\"ore\",\"seller\":\"B\",\"price\":2,"
                           "\"quantity\":1}],\"orders\":[{\"buyer\":\"B\",\"item\":\"ore\","
                           "\"quantity\":1,\"max_price\":2}]}",
                           MARKET_ERR_INVALID, "would fill it");
}

/* Auctions in a fixture: of a unique item its seller holds, or units of a good it holds
 * enough of for all of its auctions; refused with its place: an unknown seller, a field out
 * of range or unknown, goods the seller does not hold (or lists) there. */
static void test_api_fixture_parse_auctions(void **state) {
    char why[256];
    (void)state;
    const char *ok = "{\"players\":[{\"id\":\"A\",\"funds\":1,\"inventory\":[\"axe\"],"
                     "\"stacks\":{\"ore\":5}}],\"auctions\":[{\"seller\":\"A\",\"item\":"
                     "\"axe\",\"start_bid\":10,\"duration_s\":60,\"buyout\":90,"
                     "\"min_increment\":5},{\"seller\":\"A\",\"item\":\"ore\","
                     "\"quantity\":3,\"start_bid\":2,\"duration_s\":60},{\"seller\":\"A\","
                     "\"item\":\"ore\",\"quantity\":2,\"start_bid\":2,\"duration_s\":60}]}";
    assert_int_equal(fixture_rc(ok, why, sizeof why), MARKET_OK);
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"auctions\":[{"
                           "\"seller\":\"Z\",\"item\":\"axe\",\"start_bid\":1,"
                           "\"duration_s\":60}]}",
                           MARKET_ERR_INVALID, "auctions[0].seller: unknown player 'Z'");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"auctions\":[{"
                           "\"seller\":\"A\",\"item\":\"axe\",\"start_bid\":1,"
                           "\"duration_s\":0}]}",
                           MARKET_ERR_INVALID, "auctions[0].duration_s: must be an integer in 1..");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"auctions\":[{"
                           "\"seller\":\"A\",\"item\":\"axe\",\"start_bid\":1,"
                           "\"duration_s\":60,\"reserve\":5}]}",
                           MARKET_ERR_INVALID, "auctions[0]: unknown field 'reserve'");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1,\"inventory\":"
                           "[\"axe\"]}],\"auctions\":[{\"seller\":\"A\",\"item\":\"axe\","
                           "\"start_bid\":10,\"duration_s\":60,\"buyout\":9}]}",
                           MARKET_ERR_INVALID, "auctions[0]: invalid argument");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1,\"stacks\":{\"ore\":"
                           "5}}],\"auctions\":[{\"seller\":\"A\",\"item\":\"ore\","
                           "\"quantity\":3,\"start_bid\":2,\"duration_s\":60},{\"seller\":"
                           "\"A\",\"item\":\"ore\",\"quantity\":3,\"start_bid\":2,"
                           "\"duration_s\":60}]}",
                           MARKET_ERR_NOT_HELD,
                           "auction of ore by 'A': it does not hold that much");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"listings\":[{"
                           "\"item\":\"axe\",\"seller\":\"A\",\"price\":9}],\"auctions\":"
                           "[{\"seller\":\"A\",\"item\":\"axe\",\"start_bid\":1,"
                           "\"duration_s\":60}]}",
                           MARKET_ERR_NOT_HELD, "auction of axe by 'A'");
}

/* Listings that end: a duration in 1..MARKET_DURATION_MAX_S on a listing, of an item or of
 * units; out of range or of the wrong type, refused with its place. */
static void test_api_fixture_parse_durations(void **state) {
    char why[256];
    (void)state;
    assert_int_equal(fixture_rc("{\"players\":[{\"id\":\"A\",\"funds\":1,\"stacks\":{\"ore\":"
                                "5}}],\"listings\":[{\"item\":\"axe\",\"seller\":\"A\",\"price\":"
                                "9,\"duration_s\":600},{\"item\":\"ore\",\"seller\":\"A\","
                                "\"price\":2,\"quantity\":3,\"duration_s\":2592000}]}",
                                why, sizeof why),
                     MARKET_OK);
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"listings\":[{"
                           "\"item\":\"axe\",\"seller\":\"A\",\"price\":9,\"duration_s\":0}]}",
                           MARKET_ERR_INVALID, "listings[0].duration_s: must be an integer in 1..");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"listings\":[{"
                           "\"item\":\"axe\",\"seller\":\"A\",\"price\":9,"
                           "\"duration_s\":2592001}]}",
                           MARKET_ERR_INVALID, "listings[0].duration_s: must be an integer in 1..");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"listings\":[{"
                           "\"item\":\"axe\",\"seller\":\"A\",\"price\":9,\"duration_s\":"
                           "\"60\"}]}",
                           MARKET_ERR_INVALID, "listings[0].duration_s: must be an integer");
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "A", NULL, 1), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "A", "axe", 9), MARKET_OK);
    assert_int_equal(market_world_end_listing(w, "A", "axe", 60), MARKET_OK);
    assert_int_equal(market_world_end_listing(w, "A", "bow", 60), MARKET_ERR_INVALID);
    assert_int_equal(market_world_end_listing(w, "A", "axe", 0), MARKET_ERR_INVALID);
    assert_int_equal(market_world_generate_ends(w, MARKET_DURATION_MAX_S + 1), MARKET_ERR_INVALID);
    assert_int_equal(market_world_generate_ends(w, 5), MARKET_OK);
    market_world_free(w);
}

static void test_api_fixture_parse_stacks(void **state) {
    char why[256];
    (void)state;
    assert_int_equal(
        fixture_rc("{\"players\":[{\"id\":\"A\",\"funds\":1,\"stacks\":{\"potion\":20,"
                   "\"ore\":1}},{\"id\":\"B\",\"funds\":1,\"stacks\":{\"potion\":1000000000}}],"
                   "\"listings\":[{\"item\":\"potion\",\"seller\":\"A\",\"price\":25,"
                   "\"quantity\":5},{\"item\":\"potion\",\"seller\":\"B\",\"price\":20,"
                   "\"quantity\":1}]}",
                   why, sizeof why),
        MARKET_OK);
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1,\"stacks\":[1]}]}",
                           MARKET_ERR_INVALID, "players[0].stacks: must be an object");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1,\"stacks\":{\"ore\":0}}]}",
                           MARKET_ERR_INVALID, "'ore' must be an id matching");
    expect_fixture_refused(
        "{\"players\":[{\"id\":\"A\",\"funds\":1,\"stacks\":{\"a.b\":1}}]}",
        MARKET_ERR_INVALID, "players[0].stacks: 'a.b'");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"listings\":[{"
                           "\"item\":\"ore\",\"seller\":\"A\",\"price\":2,\"quantity\":0}]}",
                           MARKET_ERR_INVALID, "listings[0].quantity: must be an integer in 1..");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1,\"inventory\":[\"ore\"],"
                           "\"stacks\":{\"ore\":3}}]}",
                           MARKET_ERR_DUPLICATE, "both a unique item and a stackable good");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"listings\":["
                           "{\"item\":\"ore\",\"seller\":\"A\",\"price\":2,\"quantity\":1},"
                           "{\"item\":\"ore\",\"seller\":\"A\",\"price\":3,\"quantity\":1}]}",
                           MARKET_ERR_DUPLICATE, "a listing of 'ore' by 'A' appears twice");
}

static void test_api_fixture_parse_demo_file(void **state) {
    const char *path = getenv("API_DEMO_FIXTURE");
    (void)state;
    if (!path || !*path) path = "fixtures/demo.json";
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) fail_msg("%s: %s", path, jerr.text);
    char *text = json_dumps(root, JSON_COMPACT);
    assert_non_null(text);
    char why[256];
    int rc = fixture_rc(text, why, sizeof why);
    if (rc != MARKET_OK) fail_msg("%s: %s", path, why);
    free(text);
    /* the demo the README walks through: A lists an axe at 500, B has 800 */
    size_t i;
    json_t *v, *axe = NULL, *bob = NULL;
    json_array_foreach(json_object_get(root, "listings"), i, v) {
        if (strcmp(json_string_value(json_object_get(v, "item")), "axe") == 0) axe = v;
    }
    json_array_foreach(json_object_get(root, "players"), i, v) {
        if (strcmp(json_string_value(json_object_get(v, "id")), "B") == 0) bob = v;
        json_t *it;
        size_t j;
        json_array_foreach(json_object_get(v, "inventory"), j, it) {
            assert_string_not_equal(json_string_value(it), "axe");
        }
    }
    assert_non_null(axe);
    assert_member(axe, "seller", "A");
    assert_int_equal(json_integer_value(json_object_get(axe, "price")), 500);
    assert_non_null(bob);
    assert_member(bob, "name", "Bob");
    assert_int_equal(json_integer_value(json_object_get(bob, "funds")), 800);
    assert_int_equal(json_array_size(json_object_get(bob, "inventory")), 0);
    json_decref(root);
}

static void test_api_fixture_parse_not_json_refused(void **state) {
    (void)state;
    expect_fixture_refused("players: A", MARKET_ERR_INVALID, "fixture is not valid JSON (line 1");
    expect_fixture_refused("", MARKET_ERR_INVALID, "fixture is empty");
    expect_fixture_refused("[]", MARKET_ERR_INVALID, "fixture must be a JSON object, not an array");
    expect_fixture_refused("{\"players\":[]} {}", MARKET_ERR_INVALID, "not valid JSON");
    expect_fixture_refused("{\"players\":[],\"players\":[]}", MARKET_ERR_INVALID, "duplicate key");
    char why[64];
    market_world *w = NULL;
    assert_int_equal(api_fixture_parse("{\"players\":[]}\0", 15, &w, why, sizeof why),
                     MARKET_ERR_INVALID);
    assert_null(w);
    assert_non_null(strstr(why, "NUL byte at offset 14"));
    assert_int_equal(api_fixture_parse(NULL, 3, &w, why, sizeof why), MARKET_ERR_INVALID);
    assert_int_equal(api_fixture_parse("{}", 2, NULL, why, sizeof why), MARKET_ERR_INVALID);
}

static void test_api_fixture_parse_shape_refused(void **state) {
    (void)state;
    expect_fixture_refused("{}", MARKET_ERR_INVALID, "fixture: missing field 'players'");
    expect_fixture_refused("{\"players\":{}}", MARKET_ERR_INVALID, "players: must be an array");
    expect_fixture_refused("{\"players\":[],\"listings\":7}", MARKET_ERR_INVALID,
                           "listings: must be an array");
    expect_fixture_refused("{\"players\":[],\"items\":[]}", MARKET_ERR_INVALID,
                           "fixture: unknown field 'items'");
    expect_fixture_refused("{\"players\":[7]}", MARKET_ERR_INVALID,
                           "players[0]: must be an object");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1,\"age\":3}]}",
                           MARKET_ERR_INVALID, "players[0]: unknown field 'age'");
    expect_fixture_refused("{\"players\":[{\"funds\":1}]}", MARKET_ERR_INVALID,
                           "players[0]: missing field 'id'");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\"}]}", MARKET_ERR_INVALID,
                           "players[0]: missing field 'funds'");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1},{\"id\":\"B\",\"name\":5,"
                           "\"funds\":1}]}",
                           MARKET_ERR_INVALID, "players[1].name: must be a string of 1..128 bytes");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"name\":\"\",\"funds\":1}]}",
                           MARKET_ERR_INVALID, "players[0].name: must be a string");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1,\"inventory\":\"x\"}]}",
                           MARKET_ERR_INVALID, "players[0].inventory: must be an array");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1,\"inventory\":[\"x\",3]}]}",
                           MARKET_ERR_INVALID,
                           "players[0].inventory[1]: must be a string matching");
    expect_fixture_refused("{\"players\":[],\"listings\":[[]]}", MARKET_ERR_INVALID,
                           "listings[0]: must be an object");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"listings\":[{\"item\":"
                           "\"x\",\"seller\":\"A\"}]}",
                           MARKET_ERR_INVALID, "listings[0]: missing field 'price'");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"listings\":[{\"item\":"
                           "\"x\",\"seller\":\"A\",\"price\":1,\"buyer\":\"B\"}]}",
                           MARKET_ERR_INVALID, "listings[0]: unknown field 'buyer'");
}

static void test_api_fixture_parse_bad_values_refused(void **state) {
    char big_name[200];
    (void)state;
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1},{\"id\":\"B\",\"funds\":1},"
                           "{\"id\":\"C\",\"funds\":-1}]}",
                           MARKET_ERR_INVALID, "players[2].funds: must be an integer >= 0");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1.0}]}", MARKET_ERR_INVALID,
                           "players[0].funds: must be an integer >= 0");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":\"1\"}]}", MARKET_ERR_INVALID,
                           "players[0].funds: must be an integer >= 0");
    expect_fixture_refused("{\"players\":[{\"id\":\"A.B\",\"funds\":1}]}", MARKET_ERR_INVALID,
                           "players[0].id: must be a string matching [A-Za-z0-9_-]{1,64}");
    expect_fixture_refused("{\"players\":[{\"id\":\"\",\"funds\":1}]}", MARKET_ERR_INVALID,
                           "players[0].id: must be a string matching");
    expect_fixture_refused("{\"players\":[{\"id\":1,\"funds\":1}]}", MARKET_ERR_INVALID,
                           "players[0].id: must be a string matching");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1,\"inventory\":[\"a b\"]}]}",
                           MARKET_ERR_INVALID,
                           "players[0].inventory[0]: must be a string matching");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"listings\":[{\"item\":"
                           "\"x\",\"seller\":\"A\",\"price\":0}]}",
                           MARKET_ERR_INVALID,
                           "listings[0].price: must be an integer in 1..1000000000000");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"listings\":[{\"item\":"
                           "\"x\",\"seller\":\"A\",\"price\":1000000000001}]}",
                           MARKET_ERR_INVALID, "listings[0].price: must be an integer in");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"listings\":[{\"item\":"
                           "\"x/y\",\"seller\":\"A\",\"price\":1}]}",
                           MARKET_ERR_INVALID, "listings[0].item: must be a string matching");
    memset(big_name, 'n', 129);
    big_name[129] = '\0';
    char text[400];
    snprintf(text, sizeof text, "{\"players\":[{\"id\":\"A\",\"name\":\"%s\",\"funds\":1}]}",
             big_name);
    expect_fixture_refused(text, MARKET_ERR_INVALID, "players[0].name: must be a string of 1..128");
    big_name[128] = '\0'; /* exactly MARKET_NAME_MAX bytes is fine */
    snprintf(text, sizeof text, "{\"players\":[{\"id\":\"A\",\"name\":\"%s\",\"funds\":1}]}",
             big_name);
    char why[256];
    assert_int_equal(fixture_rc(text, why, sizeof why), MARKET_OK);
}

static void test_api_fixture_parse_whole_refused(void **state) {
    (void)state;
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1},{\"id\":\"B\",\"funds\":1},"
                           "{\"id\":\"A\",\"funds\":2}]}",
                           MARKET_ERR_DUPLICATE,
                           "player 'A' appears twice (players[0].id and players[2].id)");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1,\"inventory\":[\"axe\"]},"
                           "{\"id\":\"B\",\"funds\":1,\"inventory\":[\"bow\",\"axe\"]}]}",
                           MARKET_ERR_DUPLICATE,
                           "item 'axe' appears twice (players[0].inventory[0] and "
                           "players[1].inventory[1])");
    expect_fixture_refused(
        "{\"players\":[{\"id\":\"A\",\"funds\":1,\"inventory\":[\"axe\",\"axe\"]}]}",
        MARKET_ERR_DUPLICATE, "item 'axe' appears twice");
    expect_fixture_refused(
        "{\"listings\":[{\"item\":\"axe\",\"seller\":\"A\",\"price\":5}],"
        "\"players\":[{\"id\":\"A\",\"funds\":1,\"inventory\":[\"axe\"]}]}",
        MARKET_ERR_DUPLICATE,
        "item 'axe' appears twice (players[0].inventory[0] and listings[0].item)");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"listings\":["
                           "{\"item\":\"axe\",\"seller\":\"A\",\"price\":5},"
                           "{\"item\":\"axe\",\"seller\":\"A\",\"price\":6}]}",
                           MARKET_ERR_DUPLICATE, "item 'axe' appears twice");
    expect_fixture_refused("{\"players\":[{\"id\":\"A\",\"funds\":1}],\"listings\":["
                           "{\"item\":\"axe\",\"seller\":\"A\",\"price\":5},"
                           "{\"item\":\"bow\",\"seller\":\"Z\",\"price\":5}]}",
                           MARKET_ERR_NO_PLAYER, "listings[1].seller: unknown player 'Z'");
}

/* ---- fixtures/api: one test per folder ---- */

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    char chunk[4096];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *p = realloc(buf, cap);
            if (!p) break;
            buf = p;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    return buf;
}

static json_t *load_case_file(const env *e, const char *name, size_t flags, int required) {
    char path[PATH_LEN + 32];
    snprintf(path, sizeof path, "%s/%s", e->dir, name);
    json_error_t jerr;
    json_t *j = json_load_file(path, flags | JSON_REJECT_DUPLICATES, &jerr);
    if (!j && (required || jerr.line != -1)) fail_msg("%s: %s", path, jerr.text);
    return j;
}

static const char *json_lookup(void *ud, enum api_arg_kind kind, const char *name) {
    return kind == API_ARG_QUERY ? json_string_value(json_object_get(ud, name)) : NULL;
}

static void test_api_fixture_case(void **state) {
    env *e = *state;
    json_t *req_j = load_case_file(e, "request.json", JSON_ALLOW_NUL, 1);
    json_t *want = load_case_file(e, "response.json", JSON_DECODE_ANY, 1);
    json_t *headers = load_case_file(e, "headers.json", 0, 0);
    char path[PATH_LEN + 32];
    snprintf(path, sizeof path, "%s/status", e->dir);
    char *status_text = read_text(path);
    if (!status_text) fail_msg("%s: cannot read", path);
    int status = atoi(status_text);
    free(status_text);

    const char *method = json_string_value(json_object_get(req_j, "method"));
    const char *rpath = json_string_value(json_object_get(req_j, "path"));
    if (!method || !rpath) fail_msg("%s/request.json: needs \"method\" and \"path\"", e->dir);
    json_t *body_j = json_object_get(req_j, "body"), *query = json_object_get(req_j, "query");
    char *dumped = NULL;
    api_request req = {method, rpath, NULL, 0, query ? json_lookup : NULL, query};
    if (json_is_string(body_j)) { /* sent verbatim: may be malformed, may hold a NUL */
        req.body = json_string_value(body_j);
        req.body_len = json_string_length(body_j);
    } else if (body_j) {
        dumped = json_dumps(body_j, JSON_COMPACT | JSON_ENCODE_ANY);
        assert_non_null(dumped);
        req.body = dumped;
        req.body_len = strlen(dumped);
    }

    api_response r;
    api_handle(e->conn, &req, &r);
    if (r.status != status)
        fail_msg("%s: status %d, want %d; body %s", e->dir, r.status, status,
                 r.body ? r.body : "(null)");
    json_t *got = body_json(&r);
    if (json_is_object(want)) { /* only the keys the expected file holds */
        const char *key;
        json_t *v;
        json_object_foreach(want, key, v) {
            if (!json_equal(v, json_object_get(got, key)))
                fail_msg("%s: member '%s' differs; body %s", e->dir, key, r.body);
        }
    } else if (!json_equal(want, got)) {
        fail_msg("%s: body %s differs", e->dir, r.body);
    }
    const char *allow = json_string_value(json_object_get(headers, "allow"));
    if (allow) {
        assert_non_null(r.allow);
        assert_string_equal(r.allow, allow);
    } else {
        assert_null(r.allow);
    }
    assert_int_equal(r.retry_after_s,
                     json_integer_value(json_object_get(headers, "retry_after_s")));

    json_decref(got);
    api_response_cleanup(&r);
    free(dumped);
    json_decref(headers);
    json_decref(want);
    json_decref(req_j);
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs one test per folder under the fixture root. Returns the failures. */
static int run_fixture_cases(void) {
    const char *root = getenv("API_FIXTURES_DIR");
    if (!root || !*root) root = "fixtures/api";
    DIR *d = opendir(root);
    if (!d) {
        fprintf(stderr,
                "[  ERROR   ] %s: cannot open (run from the repository root, or set "
                "API_FIXTURES_DIR)\n",
                root);
        return 1;
    }
    char **names = NULL, **paths = NULL;
    size_t n = 0, cap = 0;
    int failed = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char path[PATH_LEN];
        struct stat st;
        if (de->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", root, de->d_name);
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **p = realloc(names, cap * sizeof *p);
            if (!p) break;
            names = p;
        }
        if (!(names[n] = strdup(de->d_name))) break;
        n++;
    }
    closedir(d);
    if (n == 0) {
        fprintf(stderr, "[  ERROR   ] %s: no test cases\n", root);
        free(names);
        return 1;
    }
    qsort(names, n, sizeof *names, cmp_names);
    struct CMUnitTest *tests = calloc(n, sizeof *tests);
    paths = calloc(n, sizeof *paths);
    if (!tests || !paths) {
        failed = 1;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(root) + strlen(names[i]) + 2;
        if (!(paths[i] = malloc(len))) {
            failed = 1;
            goto out;
        }
        snprintf(paths[i], len, "%s/%s", root, names[i]);
        tests[i] =
            (struct CMUnitTest){names[i], test_api_fixture_case, env_setup, env_teardown, paths[i]};
    }
    failed = _cmocka_run_group_tests("api_fixtures", tests, n, NULL, NULL);
out:
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
        if (paths) free(paths[i]);
    }
    free(names);
    free(paths);
    free(tests);
    return failed;
}

/* ---- main ---- */

#define T(f) cmocka_unit_test_setup_teardown(f, env_setup, env_teardown)

int main(void) {
    const struct CMUnitTest unit[] = {
        T(test_api_body_malformed_json_400),
        T(test_api_body_trailing_garbage_400),
        T(test_api_body_duplicate_key_400),
        T(test_api_body_empty_400),
        T(test_api_body_nul_byte_400),
        T(test_api_body_not_object_400),
        T(test_api_body_invalid_utf8_400),
        T(test_api_body_deep_nesting_400),
        T(test_api_body_too_large_413),
        T(test_api_purchase_missing_field_400),
        T(test_api_purchase_mistyped_field_400),
        T(test_api_purchase_unknown_field_400),
        T(test_api_unknown_field_long_name_is_shortened),
        T(test_api_purchase_bad_ids_400),
        T(test_api_purchase_longest_id_reaches_store_503),
        T(test_api_purchase_buyer_is_seller_400),
        T(test_api_purchase_bad_price_400),
        T(test_api_purchase_price_bounds_reach_store_503),
        T(test_api_purchase_store_down_503),
        T(test_api_list_validation_400),
        T(test_api_list_store_down_503),
        T(test_api_unlist_validation_400),
        T(test_api_unlist_store_down_503),
        T(test_api_players_bad_id_400),
        T(test_api_players_empty_or_nested_id_404),
        T(test_api_players_store_down_503),
        T(test_api_market_bad_query_400),
        T(test_api_market_good_query_reaches_store_503),
        T(test_api_market_search_bad_query_400),
        T(test_api_market_search_good_query_reaches_store_503),
        T(test_api_player_listings_routes),
        T(test_api_healthz_store_down_503),
        T(test_api_unknown_path_404),
        T(test_api_wrong_method_405_with_allow),
        T(test_api_route_deferrable_follows_route_table),
        cmocka_unit_test(test_api_endpoint_find_names_server_paths),
        cmocka_unit_test(test_api_response_store_up_by_answer),
        T(test_api_deferred_submit_refused_calls_done_once),
        T(test_api_head_served_like_get),
        T(test_api_get_ignores_body),
        T(test_api_incomplete_request_500),
        cmocka_unit_test(test_api_null_conn_validates_then_500),
        cmocka_unit_test(test_api_status_table_maps_every_market_code),
        cmocka_unit_test(test_api_status_table_price_is_64_bit),
        cmocka_unit_test(test_api_flat_matches_jansson),
        cmocka_unit_test(test_api_deferred_end_store_reason_for_logs),
        cmocka_unit_test(test_api_error_builds_body),
        cmocka_unit_test(test_api_error_odd_input_is_made_safe),
        cmocka_unit_test(test_api_response_cleanup_twice_is_safe),
        cmocka_unit_test(test_api_quote_cuts_on_character_boundary),
        T(test_api_out_of_memory_500_or_normal),
    };
    const struct CMUnitTest fixture_parse[] = {
        cmocka_unit_test(test_api_fixture_parse_good_gives_world),
        cmocka_unit_test(test_api_fixture_parse_demo_file),
        cmocka_unit_test(test_api_fixture_parse_stacks),
        cmocka_unit_test(test_api_fixture_parse_orders),
        cmocka_unit_test(test_api_fixture_parse_durations),
        cmocka_unit_test(test_api_fixture_parse_auctions),
        cmocka_unit_test(test_api_fixture_parse_not_json_refused),
        cmocka_unit_test(test_api_fixture_parse_shape_refused),
        cmocka_unit_test(test_api_fixture_parse_bad_values_refused),
        cmocka_unit_test(test_api_fixture_parse_whole_refused),
        cmocka_unit_test(test_api_fixture_parse_out_of_memory_fails_cleanly),
    };
    int failed = cmocka_run_group_tests_name("api", unit, NULL, NULL);
    failed += cmocka_run_group_tests_name("api_fixture_parse", fixture_parse, NULL, NULL);
    failed += run_fixture_cases();
    return failed ? 1 : 0;
}
