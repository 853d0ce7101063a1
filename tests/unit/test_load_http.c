/* test_load_http.c - market-load's HTTP bytes without a socket: the requests it
 * writes (with and without the buyer's token) and the answer heads it reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/helpers/cmocka_all.h"

#include "api/api.h"
#include "tools/load/load.h"

/* ---- requests ---- */

static void test_purchase_without_token(void **state) {
    (void)state;
    char out[LOAD_OUT_MAX];
    int n = load_http_purchase(out, sizeof out, "127.0.0.1:8080", NULL, "B", "A", "axe", NULL);
    static const char want[] = "POST /purchase HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
                               "Content-Type: application/json\r\nContent-Length: 39\r\n\r\n"
                               "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}";
    assert_int_equal(n, (int)strlen(want));
    assert_string_equal(out, want);
}

/* Reads the bearer token of request out and checks that "s3cret" signed it for
 * player of realm, valid now. */
static void assert_token_of(const char *out, const char *realm, const char *player) {
    const char *h = strstr(out, "\r\nAuthorization: Bearer ");
    assert_non_null(h);
    h += strlen("\r\nAuthorization: Bearer ");
    const char *end = strstr(h, "\r\n");
    assert_non_null(end);
    char token[API_TOKEN_MAX + 1], at[MARKET_REALM_MAX + 1], who[MARKET_ID_MAX + 1];
    assert_true((size_t)(end - h) < sizeof token);
    snprintf(token, sizeof token, "%.*s", (int)(end - h), h);
    api_auth *a = api_auth_new();
    assert_non_null(a);
    assert_int_equal(api_auth_set_secret(a, "s3cret", NULL, 0), API_AUTH_OK);
    assert_int_equal(api_auth_verify(a, token, (int64_t)time(NULL), at, who), API_AUTH_OK);
    /* dated now, for an hour */
    assert_int_equal(api_auth_verify(a, token, (int64_t)time(NULL) + 3600 + 61, at, who),
                     API_AUTH_ERR_EXPIRED);
    assert_string_equal(at, realm);
    assert_string_equal(who, player);
    api_auth_free(a);
}

static void test_purchase_carries_the_buyers_token(void **state) {
    (void)state;
    char out[LOAD_OUT_MAX];
    int n = load_http_purchase(out, sizeof out, "h", NULL, "B", "A", "axe", "s3cret");
    assert_true(n > 0);
    assert_token_of(out, MARKET_REALM_DEFAULT, "B");
    assert_non_null(strstr(out, "\r\n\r\n{\"buyer\":\"B\","));
}

static void test_purchase_in_a_realm_goes_to_its_route_with_its_token(void **state) {
    (void)state;
    char out[LOAD_OUT_MAX];
    int n = load_http_purchase(out, sizeof out, "h", "eu-1", "B", "A", "axe", "s3cret");
    assert_true(n > 0);
    assert_memory_equal(out, "POST /realms/eu-1/purchase HTTP/1.1\r\n", 37);
    assert_token_of(out, "eu-1", "B");
    /* the default realm keeps the plain route */
    n = load_http_purchase(out, sizeof out, "h", MARKET_REALM_DEFAULT, "B", "A", "axe", NULL);
    assert_memory_equal(out, "POST /purchase HTTP/1.1\r\n", 25);
}

static void test_purchase_errors(void **state) {
    (void)state;
    char out[64];
    assert_int_equal(load_http_purchase(out, sizeof out, "h", NULL, "B", "A", "axe", NULL),
                     LOAD_HTTP_ERR_FIT);
    char big[LOAD_OUT_MAX];
    assert_int_equal(load_http_purchase(big, sizeof big, "h", NULL, "not a player!", "A", "axe", "k"),
                     LOAD_HTTP_ERR_TOKEN);
}

static void test_health(void **state) {
    (void)state;
    char out[LOAD_OUT_MAX];
    int n = load_http_health(out, sizeof out, "[::1]:80");
    assert_string_equal(out, "GET /healthz HTTP/1.1\r\nHost: [::1]:80\r\n\r\n");
    assert_int_equal(n, (int)strlen(out));
    char small[8];
    assert_int_equal(load_http_health(small, sizeof small, "h"), LOAD_HTTP_ERR_FIT);
}

/* ---- answer heads ---- */

static int parse(const char *text, load_http_head *h) {
    *h = (load_http_head){0, -1, 0, 0};
    return load_http_parse_head(text, strlen(text), h);
}

static void test_head_keep_alive_with_length(void **state) {
    (void)state;
    load_http_head h;
    const char *a = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    "content-LENGTH:  12\r\n\r\n{\"status\":1}";
    assert_int_equal(parse(a, &h), 1);
    assert_int_equal(h.status, 200);
    assert_int_equal(h.body_len, 12);
    assert_int_equal(h.hdr_len, strlen(a) - 12);
    assert_int_equal(h.close_after, 0);
}

static void test_head_connection_rules(void **state) {
    (void)state;
    load_http_head h;
    assert_int_equal(parse("HTTP/1.1 404 x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", &h),
                     1);
    assert_int_equal(h.status, 404);
    assert_int_equal(h.close_after, 1);
    assert_int_equal(parse("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n", &h), 1);
    assert_int_equal(h.close_after, 1); /* HTTP/1.0 without keep-alive */
    assert_int_equal(
        parse("HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: Keep-Alive\r\n\r\n", &h), 1);
    assert_int_equal(h.close_after, 0);
    assert_int_equal(parse("HTTP/1.1 200 OK\r\nServer: x\r\n\r\n", &h), 1);
    assert_int_equal(h.body_len, -1); /* until the server closes */
    assert_int_equal(h.close_after, 1);
    assert_int_equal(parse("HTTP/1.1 204 No Content\r\n\r\n", &h), 1);
    assert_int_equal(h.body_len, 0);
    assert_int_equal(h.close_after, 0);
}

static void test_head_incomplete_then_complete(void **state) {
    (void)state;
    const char *a = "HTTP/1.1 402 Payment Required\r\nContent-Length: 5\r\n\r\n";
    load_http_head h;
    for (size_t cut = 0; cut < strlen(a); cut++) {
        char *part = malloc(cut ? cut : 1); /* exactly cut bytes: no terminator to lean on */
        assert_non_null(part);
        memcpy(part, a, cut);
        h = (load_http_head){0, -1, 0, 0};
        assert_int_equal(load_http_parse_head(part, cut, &h), 0);
        assert_int_equal(h.hdr_len, 0);
        free(part);
    }
    assert_int_equal(parse(a, &h), 1);
    assert_int_equal(h.status, 402);
}

static void test_head_refused(void **state) {
    (void)state;
    static const char *const bad[] = {
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/1.1 2x0 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        "SSH-2.0\r\n\r\n",
    };
    load_http_head h;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (parse(bad[i], &h) != -1) fail_msg("took '%s'", bad[i]);
    /* A head that never ends is refused once it passes half the answer limit. */
    size_t n = LOAD_IN_MAX / 2 + 2;
    char *junk = malloc(n);
    assert_non_null(junk);
    memset(junk, 'x', n);
    assert_int_equal(load_http_parse_head(junk, n, &h), -1);
    assert_int_equal(load_http_parse_head(junk, LOAD_IN_MAX / 2, &h), 0);
    free(junk);
}

/* A buy from a flash sale: its route (per realm), one unit, the buyer's token. */
static void test_sale_buy(void **state) {
    (void)state;
    char out[LOAD_OUT_MAX];
    int n = load_http_sale_buy(out, sizeof out, "h", NULL, "flash-1", "B", 1, NULL);
    assert_true(n > 0);
    assert_non_null(strstr(out, "POST /sales/flash-1/buy HTTP/1.1\r\n"));
    assert_non_null(strstr(out, "\r\n\r\n{\"buyer\":\"B\",\"quantity\":1}"));
    assert_null(strstr(out, "Authorization"));
    n = load_http_sale_buy(out, sizeof out, "h", "eu-1", "flash-1", "B", 2, "s3cret");
    assert_true(n > 0);
    assert_non_null(strstr(out, "POST /realms/eu-1/sales/flash-1/buy HTTP/1.1\r\n"));
    assert_token_of(out, "eu-1", "B");
    assert_int_equal(load_http_sale_buy(out, 40, "h", NULL, "flash-1", "B", 1, NULL),
                     LOAD_HTTP_ERR_FIT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_purchase_without_token),
        cmocka_unit_test(test_purchase_carries_the_buyers_token),
        cmocka_unit_test(test_purchase_in_a_realm_goes_to_its_route_with_its_token),
        cmocka_unit_test(test_purchase_errors),
        cmocka_unit_test(test_health),
        cmocka_unit_test(test_sale_buy),
        cmocka_unit_test(test_head_keep_alive_with_length),
        cmocka_unit_test(test_head_connection_rules),
        cmocka_unit_test(test_head_incomplete_then_complete),
        cmocka_unit_test(test_head_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
