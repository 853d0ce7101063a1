/* test_api_auth.c - player tokens and the Authorization check of api/ (no Redis). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/cmocka_all.h"

#include "api/api.h"
#include "lock/lock.h"
#include "market/market.h"

struct fx {
    lock_client *lock;
    market *m;
    market_conn *c;
};

static const char *header_value;

static const char *lookup(void *ud, enum api_arg_kind kind, const char *name) {
    (void)ud;
    if (kind == API_ARG_HEADER && strcmp(name, "Authorization") == 0) return header_value;
    return NULL;
}

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof *f);
    market_config cfg = {.redis_timeout_ms = 100, .lock_ttl_ms = 1000, .acquire_timeout_ms = 100};
    if (!f || lock_redis_addr_parse("redis://127.0.0.1:1/0", &cfg.redis) < 0) return -1;
    f->lock = lock_local_new(NULL);
    f->m = market_new(&cfg, f->lock, NULL);
    f->c = market_conn_new(f->m, NULL);
    *state = f;
    return f->c ? 0 : -1;
}

static int teardown(void **state) {
    struct fx *f = *state;
    market_conn_free(f->c);
    market_free(f->m);
    lock_free(f->lock);
    free(f);
    return 0;
}

static int post(struct fx *f, const char *path, const char *body, const char *header,
                api_response *resp) {
    header_value = header;
    api_request req = {"POST", path, body, strlen(body), lookup, NULL, "s3cret"};
    api_handle(f->c, &req, resp);
    return resp->status;
}

static void test_api_token_make_format_and_binding(void **state) {
    (void)state;
    char a[API_TOKEN_MAX + 1], a2[API_TOKEN_MAX + 1], b[API_TOKEN_MAX + 1], o[API_TOKEN_MAX + 1];
    assert_int_equal(api_token_make("s3cret", NULL, "A", a, sizeof a), MARKET_OK);
    assert_int_equal(api_token_make("s3cret", NULL, "A", a2, sizeof a2), MARKET_OK);
    assert_int_equal(api_token_make("s3cret", NULL, "B", b, sizeof b), MARKET_OK);
    assert_int_equal(api_token_make("other", NULL, "A", o, sizeof o), MARKET_OK);
    assert_string_equal(a, a2);
    assert_int_equal(strlen(a), 2 + 64);
    assert_memory_equal(a, "A.", 2);
    assert_string_not_equal(a + 2, b + 2);
    assert_string_not_equal(a, o);
    assert_int_equal(api_token_make("", NULL, "A", a, sizeof a), MARKET_ERR_INVALID);
    assert_int_equal(api_token_make("s3cret", NULL, "bad id", a, sizeof a), MARKET_ERR_INVALID);
    assert_int_equal(api_token_make("s3cret", NULL, "A", a, 10), MARKET_ERR_INVALID);
}

/* A realm's token names its realm; it cannot be moved to another realm or
 * player, nor pass for the default realm's. */
static void test_api_token_realm_binding(void **state) {
    struct fx *f = *state;
    static const char body[] = "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}";
    char eu[API_TOKEN_MAX + 1], main_[API_TOKEN_MAX + 1], m2[API_TOKEN_MAX + 1], h[400];
    assert_int_equal(api_token_make("s3cret", "eu-1", "B", eu, sizeof eu), MARKET_OK);
    assert_memory_equal(eu, "eu-1/B.", 7);
    assert_int_equal(strlen(eu), 7 + 64);
    assert_int_equal(api_token_make("s3cret", MARKET_REALM_DEFAULT, "B", main_, sizeof main_),
                     MARKET_OK);
    assert_int_equal(api_token_make("s3cret", NULL, "B", m2, sizeof m2), MARKET_OK);
    assert_string_equal(main_, m2); /* the default realm's tokens have no realm part */
    assert_int_equal(api_token_make("s3cret", "eu 1", "B", m2, sizeof m2), MARKET_ERR_INVALID);
    /* the realm part moved to another realm, or dropped: not ours */
    char moved[API_TOKEN_MAX + 8];
    snprintf(moved, sizeof moved, "eu-2/B.%s", strchr(eu, '.') + 1);
    const char *forged[] = {moved, strchr(eu, '/') + 1};
    for (size_t i = 0; i < 2; i++) {
        api_response resp = {0};
        snprintf(h, sizeof h, "Bearer %s", forged[i]);
        assert_int_equal(post(f, "/realms/eu-2/purchase", body, h, &resp), 401);
        api_response_cleanup(&resp);
        assert_int_equal(post(f, "/purchase", body, h, &resp), 401);
        api_response_cleanup(&resp);
    }
    api_response resp = {0};
    snprintf(h, sizeof h, "Bearer %s", eu);
    assert_int_equal(post(f, "/purchase", body, h, &resp), 403);
    assert_non_null(strstr(resp.body, "another realm"));
    api_response_cleanup(&resp);
    /* the right realm gets past authentication to the (absent) store: 503 */
    assert_int_equal(post(f, "/realms/eu-1/purchase", body, h, &resp), 503);
    assert_string_equal(resp.realm, "eu-1");
    api_response_cleanup(&resp);
}

static void test_api_auth_missing_or_bad_token_401(void **state) {
    struct fx *f = *state;
    static const char body[] = "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}";
    char good[API_TOKEN_MAX + 1], h[300];
    assert_int_equal(api_token_make("s3cret", NULL, "B", good, sizeof good), MARKET_OK);
    snprintf(h, sizeof h, "Bearer %s", good);
    h[strlen(h) - 1] = h[strlen(h) - 1] == '0' ? '1' : '0';
    const char *bad[] = {NULL, "", "Bearer", "Bearer ", "Bearer B", "Bearer B.", "Bearer .abc",
                         "Basic QjpC", "bearer B.00", h};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        api_response resp = {0};
        assert_int_equal(post(f, "/purchase", body, bad[i], &resp), 401);
        assert_non_null(strstr(resp.body, "\"unauthorized\""));
        assert_string_equal(resp.auth_challenge, "Bearer");
        api_response_cleanup(&resp);
    }
}

static void test_api_auth_other_players_token_403(void **state) {
    struct fx *f = *state;
    char tok[API_TOKEN_MAX + 1], h[300];
    assert_int_equal(api_token_make("s3cret", NULL, "A", tok, sizeof tok), MARKET_OK);
    snprintf(h, sizeof h, "Bearer %s", tok);
    api_response resp = {0};
    assert_int_equal(post(f, "/purchase", "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}", h,
                          &resp),
                     403);
    assert_non_null(strstr(resp.body, "\"forbidden\""));
    api_response_cleanup(&resp);
    assert_int_equal(post(f, "/list", "{\"seller\":\"B\",\"item\":\"x\",\"price\":5}", h, &resp),
                     403);
    api_response_cleanup(&resp);
    assert_int_equal(post(f, "/unlist", "{\"seller\":\"B\",\"item\":\"x\"}", h, &resp), 403);
    api_response_cleanup(&resp);
}

static void test_api_auth_own_token_reaches_store(void **state) {
    struct fx *f = *state;
    char tok[API_TOKEN_MAX + 1], h[300];
    assert_int_equal(api_token_make("s3cret", NULL, "A", tok, sizeof tok), MARKET_OK);
    snprintf(h, sizeof h, "Bearer %s", tok);
    api_response resp = {0};
    /* The store is a closed port: getting past the check means 503. */
    assert_int_equal(post(f, "/list", "{\"seller\":\"A\",\"item\":\"x\",\"price\":5}", h, &resp),
                     503);
    api_response_cleanup(&resp);
    /* Validation still comes first: a bad body is 400 even without a token. */
    assert_int_equal(post(f, "/purchase", "{\"buyer\":1}", NULL, &resp), 400);
    api_response_cleanup(&resp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_token_make_format_and_binding),
        cmocka_unit_test_setup_teardown(test_api_token_realm_binding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_auth_missing_or_bad_token_401, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_auth_other_players_token_403, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_auth_own_token_reaches_store, setup, teardown),
    };
    return cmocka_run_group_tests_name("api auth", tests, NULL, NULL);
}
