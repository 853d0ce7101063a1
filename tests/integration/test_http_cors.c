/* test_http_cors.c - CORS over HTTP against a real redis-server: a preflight
 * of an allowed origin gets 204 with the route's methods and the headers the
 * API reads (and changes nothing in the store), answers to an allowed origin
 * carry Access-Control-Allow-Origin and the exposed headers (a purchase too),
 * another origin gets none, "*" allows any origin, and a server without
 * --cors-origin sends no CORS header at all and answers OPTIONS 405.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tests/helpers/cmocka_all.h"

#include "api/api.h"
#include "lock/lock.h"
#include "market/market.h"
#include "server/server.h"
#include "tests/helpers/http_client.h"
#include "tests/helpers/demo_world.h"
#include "tests/helpers/redis_proc.h"

static th_redis redis;

/* The demo world, in place of the realm's keys. */
static void seed(void) { th_world_store(redis.url, MARKET_REALM_DEFAULT, th_demo_world()); }

/* A --no-auth server allowing the origins of list (a comma list; NULL: none). */
static server *start(const char *list, int *port) {
    server_config cfg;
    server_config_defaults(&cfg);
    cfg.no_auth = 1;
    snprintf(cfg.listen, sizeof cfg.listen, "127.0.0.1:0");
    snprintf(cfg.redis, sizeof cfg.redis, "%s", redis.url);
    cfg.log_level = SERVER_LOG_ERROR;
    if (list) {
        char flag[512];
        snprintf(flag, sizeof flag, "--cors-origin=%s", list);
        char prog[] = "market-server";
        char *argv[] = {prog, flag, NULL};
        char why[256];
        assert_int_equal(server_config_parse(&cfg, 2, argv, why, sizeof why), SERVER_OK);
    }
    int err;
    char why[256];
    server *s = server_start(&cfg, &err, why, sizeof why);
    assert_non_null(s);
    *port = server_port(s);
    return s;
}

/* Sends method path with the extra header lines hdrs ("Name: v\r\n"...) and
 * body, over a connection it then closes; fills r (the caller cleans up). */
static void send_req(int port, const char *method, const char *path, const char *hdrs,
                     const char *body, th_http *r) {
    char req[4096];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%sContent-Length: %zu\r\n\r\n%s",
                     method, path, hdrs, body ? strlen(body) : 0, body ? body : "");
    assert_true(n > 0 && (size_t)n < sizeof req);
    assert_int_equal(th_http_raw(port, req, (size_t)n, r), 0);
}

/* The value of header name in r's raw headers (copied into out), or NULL. */
static const char *header(const th_http *r, const char *name, char *out, size_t outlen) {
    size_t n = strlen(name);
    for (const char *p = strstr(r->headers, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ') v++;
            size_t len = strcspn(v, "\r\n");
            if (len >= outlen) len = outlen - 1;
            memcpy(out, v, len);
            out[len] = '\0';
            return out;
        }
    }
    return NULL;
}

#define PREFLIGHT(origin, method) "Origin: " origin "\r\nAccess-Control-Request-Method: " method "\r\n"

static void test_preflight_of_allowed_origin(void **state) {
    (void)state;
    int port;
    server *s = start("https://game.example,http://localhost:3000", &port);
    char *before = th_store_fingerprint(redis.port);
    char v[256];
    th_http r;

    send_req(port, "OPTIONS", "/purchase",
             PREFLIGHT("https://game.example", "POST")
             "Access-Control-Request-Headers: authorization, content-type, idempotency-key\r\n",
             NULL, &r);
    assert_int_equal(r.status, 204);
    assert_int_equal(r.len, 0);
    assert_string_equal(header(&r, "Access-Control-Allow-Origin", v, sizeof v), "https://game.example");
    assert_string_equal(header(&r, "Access-Control-Allow-Methods", v, sizeof v), "POST");
    assert_non_null(strstr(header(&r, "Access-Control-Allow-Headers", v, sizeof v), "Idempotency-Key"));
    assert_non_null(strstr(v, "Authorization"));
    assert_string_equal(header(&r, "Access-Control-Max-Age", v, sizeof v), "600");
    assert_string_equal(header(&r, "Vary", v, sizeof v), "Origin");
    assert_null(header(&r, "Access-Control-Allow-Credentials", v, sizeof v));
    th_http_cleanup(&r);

    /* a GET route under a realm, and /metrics (served by server/ itself) */
    send_req(port, "OPTIONS", "/realms/eu-1/market", PREFLIGHT("http://localhost:3000", "GET"), NULL, &r);
    assert_int_equal(r.status, 204);
    assert_string_equal(header(&r, "Access-Control-Allow-Methods", v, sizeof v), "GET, HEAD");
    assert_string_equal(header(&r, "Access-Control-Allow-Origin", v, sizeof v), "http://localhost:3000");
    th_http_cleanup(&r);
    send_req(port, "OPTIONS", "/metrics", PREFLIGHT("https://game.example", "GET"), NULL, &r);
    assert_int_equal(r.status, 204);
    assert_string_equal(header(&r, "Access-Control-Allow-Methods", v, sizeof v), "GET, HEAD");
    th_http_cleanup(&r);

    /* a path no route serves: its 404, with the origin's headers */
    send_req(port, "OPTIONS", "/nope", PREFLIGHT("https://game.example", "GET"), NULL, &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(header(&r, "Access-Control-Allow-Origin", v, sizeof v), "https://game.example");
    th_http_cleanup(&r);

    /* another origin: the route's 405, no Access-Control-* */
    send_req(port, "OPTIONS", "/purchase", PREFLIGHT("https://evil.example", "POST"), NULL, &r);
    assert_int_equal(r.status, 405);
    assert_null(header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    assert_null(header(&r, "Access-Control-Allow-Methods", v, sizeof v));
    assert_string_equal(header(&r, "Vary", v, sizeof v), "Origin");
    th_http_cleanup(&r);

    /* OPTIONS without Access-Control-Request-Method is no preflight: 405 */
    send_req(port, "OPTIONS", "/purchase", "Origin: https://game.example\r\n", NULL, &r);
    assert_int_equal(r.status, 405);
    th_http_cleanup(&r);

    char *after = th_store_fingerprint(redis.port);
    assert_string_equal(before, after); /* preflights change nothing */
    free(before);
    free(after);
    server_stop(s);
}

static void test_answers_to_allowed_origin(void **state) {
    (void)state;
    int port;
    server *s = start("https://game.example", &port);
    char v[256];
    th_http r;

    send_req(port, "POST", "/purchase", "Origin: https://game.example\r\n",
             "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"purchased\""));
    assert_string_equal(header(&r, "Access-Control-Allow-Origin", v, sizeof v), "https://game.example");
    assert_non_null(strstr(header(&r, "Access-Control-Expose-Headers", v, sizeof v), "Retry-After"));
    assert_non_null(strstr(v, "Idempotent-Replayed"));
    assert_null(header(&r, "Access-Control-Allow-Methods", v, sizeof v)); /* not a preflight */
    th_http_cleanup(&r);

    /* a refusal gets them too (a browser must read the error), Origin matched without case */
    send_req(port, "POST", "/purchase", "Origin: HTTPS://Game.Example\r\n",
             "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}", &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(header(&r, "Access-Control-Allow-Origin", v, sizeof v), "HTTPS://Game.Example");
    th_http_cleanup(&r);

    send_req(port, "GET", "/metrics", "Origin: https://game.example\r\n", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(header(&r, "Access-Control-Allow-Origin", v, sizeof v), "https://game.example");
    th_http_cleanup(&r);

    /* another origin, a longer one, no Origin at all: no Access-Control-*, Vary still */
    const char *others[] = {"Origin: https://evil.example\r\n", "Origin: https://game.example.evil\r\n",
                            "Origin: null\r\n", ""};
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
        send_req(port, "GET", "/players/B", others[i], NULL, &r);
        assert_int_equal(r.status, 200);
        assert_null(header(&r, "Access-Control-Allow-Origin", v, sizeof v));
        assert_null(header(&r, "Access-Control-Expose-Headers", v, sizeof v));
        assert_string_equal(header(&r, "Vary", v, sizeof v), "Origin");
        th_http_cleanup(&r);
    }
    server_stop(s);

    /* "*": any origin, answered "*", no Vary */
    s = start("*", &port);
    send_req(port, "GET", "/players/B", "Origin: https://anyone.example\r\n", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(header(&r, "Access-Control-Allow-Origin", v, sizeof v), "*");
    assert_null(header(&r, "Vary", v, sizeof v));
    th_http_cleanup(&r);
    server_stop(s);
}

static void test_no_cors_without_origins(void **state) {
    (void)state;
    int port;
    server *s = start(NULL, &port);
    char v[256];
    th_http r;
    send_req(port, "OPTIONS", "/purchase", PREFLIGHT("https://game.example", "POST"), NULL, &r);
    assert_int_equal(r.status, 405);
    assert_string_equal(header(&r, "Allow", v, sizeof v), "POST");
    assert_null(header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    th_http_cleanup(&r);
    send_req(port, "GET", "/players/B", "Origin: https://game.example\r\n", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_null(header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    assert_null(header(&r, "Vary", v, sizeof v));
    th_http_cleanup(&r);
    server_stop(s);
}

static int setup(void **state) {
    (void)state;
    if (th_redis_start(&redis) != 0) return -1;
    seed();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    th_redis_stop(&redis);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_preflight_of_allowed_origin),
        cmocka_unit_test(test_answers_to_allowed_origin),
        cmocka_unit_test(test_no_cors_without_origins),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
