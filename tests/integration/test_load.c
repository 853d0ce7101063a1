/* test_load.c - bin/market-load against the in-process server and a real redis-server.
 *
 * Every test seeds a generated world, starts the HTTP server in-process on
 * port 0 with one purchase strategy, runs the load tool binary
 * ($MARKET_LOAD_BIN, default bin/market-load) with --json, and reads the
 * report back: the tool must exit 0 (4 when every answer is a 401), the
 * invariants must hold (the tool audits the store before and after), and only
 * the expected statuses may appear. The contended world gives every buyer funds for a few of the
 * cheapest items only, so both 402 and 404 must show up. Each strategy runs
 * the same tests (the strategy name is the test's initial state).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>
#include <jansson.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"
#include "rconn/rconn.h"
#include "market/market.h"
#include "server/server.h"
#include "tests/helpers/http_client.h"
#include "tests/helpers/redis_proc.h"

#define REALM MARKET_REALM_DEFAULT /* the realm these tests use */

#define TOOL_TIMEOUT_S 300 /* generous: the whole suite may run under valgrind */

static th_redis redis;

struct fx {
    const char *strategy; /* borrowed from the test table */
    const char *secret;   /* the server's auth secret; NULL: --no-auth */
    const char *players;  /* the tool's --players GLOB; NULL: none */
    uint32_t stall_ms;    /* the server's --test-stall-ms */
    uint64_t history;     /* the server's --trade-history; 0: its default */
    server *srv;
    int port;
    char json[64]; /* the tool's report, a mkstemp file */
    char text[64]; /* the tool's stdout (the text report), a mkstemp file */
};

/* ---- helpers ---- */

/* Adds two players of the demo's kind (A lists an axe B can pay for) to
 * the store, deleting nothing else. */
static void seed_two_demo_players(void) {
    market_config cfg = {.redis_timeout_ms = 5000, .lock_ttl_ms = 1000, .acquire_timeout_ms = 1000};
    assert_int_equal(rconn_addr_parse(redis.url, &cfg.redis), RCONN_OK);
    int err = 0;
    lock_client *l = lock_local_new(&err);
    assert_non_null(l);
    market *m = market_new(&cfg, l, &err);
    assert_non_null(m);
    market_conn *c = market_conn_new(m, &err);
    assert_non_null(c);
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_add_player(w, "A", "Alice", 100), MARKET_OK);
    assert_int_equal(market_world_add_player(w, "B", "Bob", 800), MARKET_OK);
    assert_int_equal(market_world_add_listing(w, "A", "axe", 500), MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 0), MARKET_OK);
    market_world_free(w);
    market_conn_free(c);
    market_free(m);
    lock_free(l);
}

/* The reply of one Redis command as a string ("" for nil), in out. */
static void redis_get(char *out, size_t outlen, const char *cmd, const char *key,
                      const char *field) {
    redisContext *r = redisConnect("127.0.0.1", redis.port);
    assert_true(r && !r->err);
    redisReply *rep = redisCommand(r, "%s %s %s", cmd, key, field);
    assert_non_null(rep);
    assert_true(rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_NIL);
    snprintf(out, outlen, "%s", rep->type == REDIS_REPLY_STRING ? rep->str : "");
    freeReplyObject(rep);
    redisFree(r);
}

/* Replaces the store with a generated world. */
static void seed_world(size_t players, size_t items, int64_t funds, int64_t lo, int64_t hi) {
    market_config cfg = {.redis_timeout_ms = 5000, .lock_ttl_ms = 1000, .acquire_timeout_ms = 1000};
    assert_int_equal(rconn_addr_parse(redis.url, &cfg.redis), RCONN_OK);
    int err = 0;
    lock_client *l = lock_local_new(&err);
    assert_non_null(l);
    market *m = market_new(&cfg, l, &err);
    assert_non_null(m);
    market_conn *c = market_conn_new(m, &err);
    assert_non_null(c);
    market_world *w = market_world_new();
    assert_non_null(w);
    assert_int_equal(market_world_generate(w, players, items, funds, lo, hi, 7), MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    market_conn_free(c);
    market_free(m);
    lock_free(l);
}

static void start_server(struct fx *f) {
    server_config cfg;
    server_config_defaults(&cfg);
    snprintf(cfg.listen, sizeof cfg.listen, "127.0.0.1:0");
    snprintf(cfg.redis, sizeof cfg.redis, "%s", redis.url);
    snprintf(cfg.strategy, sizeof cfg.strategy, "%s", f->strategy);
    cfg.threads = 8;
    cfg.acquire_timeout_ms = 10000; /* no 503 even when valgrind slows every holder */
    cfg.log_level = SERVER_LOG_ERROR;
    cfg.test_stall_ms = f->stall_ms;
    if (f->history) cfg.trade_history = f->history;
    if (f->secret)
        snprintf(cfg.auth_secret, sizeof cfg.auth_secret, "%s", f->secret);
    else
        cfg.no_auth = 1;
    int err = 0;
    char why[256] = "";
    f->srv = server_start(&cfg, &err, why, sizeof why);
    if (!f->srv) fprintf(stderr, "server_start(%s): %s\n", f->strategy, why);
    assert_non_null(f->srv);
    f->port = server_port(f->srv);
    assert_true(f->port > 0);
}

/* Runs the tool with argv (NULL-terminated, without the program name), its
 * stdout into the file out (NULL: inherited), and returns its exit status, or
 * 128 + signal; kills it after TOOL_TIMEOUT_S. */
static int run_tool_to(const char *const *args, const char *out) {
    const char *bin = getenv("MARKET_LOAD_BIN");
    if (!bin || !*bin) bin = "bin/market-load";
    const char *argv[32];
    size_t n = 0;
    argv[n++] = bin;
    while (*args && n < sizeof argv / sizeof *argv - 1)
        argv[n++] = *args++;
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (out && !freopen(out, "w", stdout)) {
            fprintf(stderr, "cannot write %s: %s\n", out, strerror(errno));
            _exit(127);
        }
        execv(bin, (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    assert_true(pid > 0);
    int st = 0;
    for (int waited_ms = 0;; waited_ms += 20) {
        pid_t got = waitpid(pid, &st, WNOHANG);
        if (got == pid) break;
        assert_true(got == 0 || errno == EINTR);
        if (waited_ms > TOOL_TIMEOUT_S * 1000) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fail_msg("%s did not finish in %d s", bin, TOOL_TIMEOUT_S);
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int run_tool(const char *const *args) {
    return run_tool_to(args, NULL);
}

/* The whole of a small text file, NUL-terminated (caller frees). */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *buf = calloc(1, 65536);
    assert_non_null(buf);
    size_t n = fread(buf, 1, 65535, f);
    assert_false(ferror(f));
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* Runs the tool against the fixture's server, sending tokens made with
 * secret (NULL: none), and checks that it exits want; returns its JSON
 * report (new reference; caller decrefs). The text report is in f->text. */
static json_t *load_as(struct fx *f, const char *secret, const char *mix, const char *buyers,
                       const char *requests, int want) {
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", f->port);
    const char *args[] = {"--url",  url,        "--redis", redis.url,      "--mix",
                          mix,      "--buyers", buyers,    "--requests",   requests,
                          "--json", f->json,    "--quiet", "--timeout-ms", "60000",
                          NULL,     NULL,       NULL,      NULL,           NULL};
    size_t n = 15;
    if (secret) {
        args[n++] = "--auth-secret";
        args[n++] = secret;
    }
    if (f->players) {
        args[n++] = "--players";
        args[n++] = f->players;
    }
    int rc = run_tool_to(args, f->text);
    if (rc != want) {
        char *text = slurp(f->text);
        fprintf(stderr, "market-load (%s, %s mix) exited %d, not %d:\n%s", f->strategy, mix, rc,
                want, text);
        free(text);
    }
    assert_int_equal(rc, want);
    json_error_t e;
    json_t *j = json_load_file(f->json, 0, &e);
    if (!j) fprintf(stderr, "%s: %s\n", f->json, e.text);
    assert_non_null(j);
    return j;
}

static json_t *load(struct fx *f, const char *mix, const char *buyers, const char *requests) {
    return load_as(f, NULL, mix, buyers, requests, 0);
}

static long long num(json_t *j, const char *obj, const char *key) {
    json_t *o = json_object_get(j, obj);
    assert_non_null(o);
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) fail_msg("no integer %s.%s in the report", obj, key);
    return (long long)json_integer_value(v);
}

static void assert_invariants(json_t *j) {
    json_t *inv = json_object_get(j, "invariants");
    assert_non_null(inv);
    static const char *const keys[] = {"ok",
                                       "funds_conserved",
                                       "no_negative_funds",
                                       "items_in_one_place",
                                       "items_total_unchanged",
                                       "purchases_match",
                                       "trades_match",
                                       "indexes_match"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        if (!json_is_true(json_object_get(inv, keys[i]))) fail_msg("invariant %s broke", keys[i]);
    }
}

/* ---- fixtures ---- */

static int fx_setup(void **state) {
    struct fx *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->strategy = *state;
    snprintf(f->json, sizeof f->json, "/tmp/gm-load-XXXXXX");
    snprintf(f->text, sizeof f->text, "/tmp/gm-load-XXXXXX");
    int fd = mkstemp(f->json);
    if (fd < 0) {
        free(f);
        return -1;
    }
    close(fd);
    if ((fd = mkstemp(f->text)) < 0) {
        unlink(f->json);
        free(f);
        return -1;
    }
    close(fd);
    *state = f;
    return 0;
}

static int fx_teardown(void **state) {
    struct fx *f = *state;
    server_stop(f->srv);
    unlink(f->json);
    unlink(f->text);
    free(f);
    return 0;
}

/* ---- tests ---- */

/* 64 buyers with funds for a few cheap items fight over the ~16 cheapest. */
static void test_load_contended_only_200_402_404(void **state) {
    struct fx *f = *state;
    seed_world(128, 4000, 1000, 100, 1000);
    start_server(f);
    json_t *j = load(f, "contended", "64", "2000");
    assert_invariants(j);
    long long ok = num(j, "status", "200"), poor = num(j, "status", "402"),
              gone = num(j, "status", "404");
    assert_true(ok > 0);
    assert_true(poor > 0);
    assert_true(gone > 0);
    assert_int_equal(num(j, "status", "409"), 0);
    assert_int_equal(num(j, "status", "503"), 0);
    assert_int_equal(num(j, "status", "other"), 0);
    assert_int_equal(num(j, "status", "transport_errors"), 0);
    assert_int_equal(ok + poor + gone, 2000);
    assert_int_equal(num(j, "run", "requests"), 2000);
    assert_int_equal(num(j, "invariants", "items_left_market"), ok);
    json_decref(j);
}

/* --mix direct: 32 connections propose funds-for-funds trades between 40 players with 12
 * each, and accept or decline them as the players offered them, both ways round at once;
 * every answer is the market's (201, 200, or a refusal: 402 funds short, 409 closed), the
 * funds are conserved and none is negative. */
static void test_load_direct_trades_conserve_funds(void **state) {
    struct fx *f = *state;
    seed_world(40, 10, 12, 1, 1000);
    start_server(f);
    json_t *j = load(f, "direct", "32", "3000");
    assert_invariants(j);
    json_t *created =
        json_object_get(json_object_get(json_object_get(j, "status"), "by_code"), "201");
    long long proposed = json_integer_value(created), closed = num(j, "status", "200");
    assert_true(proposed > 0);
    assert_true(closed > 0);
    assert_int_equal(num(j, "status", "503"), 0);
    assert_int_equal(num(j, "status", "other"), 0);
    assert_int_equal(num(j, "status", "transport_errors"), 0);
    assert_int_equal(proposed + closed + num(j, "status", "402") + num(j, "status", "404") +
                         num(j, "status", "409"),
                     3000);
    json_decref(j);
}

/* Every request buys a different item that its buyer can afford. */
static void test_load_distinct_all_200(void **state) {
    struct fx *f = *state;
    seed_world(100, 2000, 1000000, 1, 1000);
    start_server(f);
    json_t *j = load(f, "distinct", "8", "500");
    assert_invariants(j);
    assert_int_equal(num(j, "status", "200"), 500);
    assert_int_equal(num(j, "run", "requests"), 500);
    assert_int_equal(num(j, "invariants", "items_left_market"), 500);
    json_t *trades = json_object_get(json_object_get(j, "invariants"), "trades");
    assert_int_equal(json_integer_value(json_object_get(trades, "recorded")), 500);
    assert_int_equal(json_integer_value(json_object_get(trades, "players_checked")), 100);
    assert_int_equal(json_integer_value(json_object_get(trades, "players_mismatched")), 0);
    assert_true(num(j, "redis", "commands") > 0);
    json_decref(j);
}

/* Against a server that checks tokens, the tool sends each buyer's own:
 * with the server's secret every purchase is a 200; with another secret
 * every one is a 401, nothing moves, and the run fails (exit 4). */
static void test_load_sends_buyer_tokens(void **state) {
    struct fx *f = *state;
    f->secret = "load-test-secret";
    seed_world(50, 400, 1000000, 1, 1000);
    start_server(f);
    json_t *j = load_as(f, "some-other-secret", "distinct", "4", "100", 4);
    assert_invariants(j);
    assert_int_equal(num(j, "status", "200"), 0);
    assert_int_equal(num(j, "status", "401"), 100);
    json_t *by = json_object_get(json_object_get(j, "status"), "by_code");
    assert_int_equal(json_integer_value(json_object_get(by, "401")), 100);
    assert_int_equal(num(j, "invariants", "items_left_market"), 0);
    json_decref(j);
    j = load_as(f, f->secret, "distinct", "4", "100", 0);
    assert_invariants(j);
    assert_int_equal(num(j, "status", "200"), 100);
    assert_int_equal(num(j, "invariants", "items_left_market"), 100);
    json_decref(j);
}

/* Without a secret against a server that wants tokens, every answer is a
 * 401: the run fails (exit 4, not 0), and both reports say 401 rather than
 * "other", the text one with what to do about it. */
static void test_load_without_secret_exits_4_names_401(void **state) {
    struct fx *f = *state;
    f->secret = "load-test-secret";
    seed_world(50, 400, 1000000, 1, 1000);
    start_server(f);
    json_t *j = load_as(f, NULL, "distinct", "4", "200", 4);
    assert_invariants(j);
    assert_int_equal(num(j, "status", "200"), 0);
    assert_int_equal(num(j, "status", "401"), 200);
    assert_int_equal(num(j, "status", "other"), 0);
    assert_int_equal(num(j, "status", "errors"), 200);
    assert_int_equal(num(j, "result", "exit"), 4);
    assert_true(json_is_string(json_object_get(json_object_get(j, "result"), "failed")));
    assert_false(json_is_true(json_object_get(json_object_get(j, "config"), "tokens")));
    json_decref(j);
    char *text = slurp(f->text);
    assert_non_null(strstr(text, " 401: 200 "));
    assert_non_null(strstr(text, "other: 0 "));
    assert_non_null(strstr(text, "--auth-secret"));
    assert_non_null(strstr(text, "FAILED: no purchase succeeded"));
    assert_non_null(strstr(text, "(exit 4)"));
    free(text);
}

/* With --players, the run buys only as the players chosen and only what
 * they list: the demo's players and the axe are left as they were. */
static void test_load_players_leaves_others_alone(void **state) {
    struct fx *f = *state;
    seed_world(50, 400, 1000000, 1, 1000);
    seed_two_demo_players();
    start_server(f);
    f->players = "p[0-9]*";
    json_t *j = load_as(f, NULL, "distinct", "8", "300", 0);
    assert_invariants(j);
    assert_int_equal(num(j, "status", "200"), 300);
    assert_int_equal(num(j, "setup", "players"), 50);
    assert_int_equal(num(j, "setup", "listed"), 400);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "config"), "players")),
                        "p[0-9]*");
    json_decref(j);
    char v[64];
    redis_get(v, sizeof v, "ZSCORE", "market:{main}", "axe.A");
    assert_string_equal(v, "500");
    redis_get(v, sizeof v, "HGET", "users:{main}:A", "funds");
    assert_string_equal(v, "100");
    redis_get(v, sizeof v, "HGET", "users:{main}:B", "funds");
    assert_string_equal(v, "800");
}

/* Moves one coin from p0 to p1 outside any trade, once the run's first
 * trade is in (the run is slowed by the server's stall, so this lands
 * mid-run). Total funds stay the same: only the trade audit can tell. */
static void *skim(void *arg) {
    (void)arg;
    redisContext *r = redisConnect("127.0.0.1", redis.port);
    if (!r || r->err) return NULL;
    for (int i = 0; i < 2000; i++) {
        redisReply *x = redisCommand(r, "XLEN trades:{main}");
        int started = x && x->type == REDIS_REPLY_INTEGER && x->integer > 0;
        freeReplyObject(x);
        if (started) break;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    redisReply *x = redisCommand(r, "MULTI");
    freeReplyObject(x);
    x = redisCommand(r, "HINCRBY users:{main}:p0 funds -1");
    freeReplyObject(x);
    x = redisCommand(r, "HINCRBY users:{main}:p1 funds 1");
    freeReplyObject(x);
    x = redisCommand(r, "EXEC");
    freeReplyObject(x);
    redisFree(r);
    return NULL;
}

/* Funds that move without a trade record break the run's invariants (exit
 * 3), though the total is conserved and every 200 is in the store. */
static void test_load_funds_moved_without_trade_exit_3(void **state) {
    struct fx *f = *state;
    seed_world(50, 400, 1000000, 1, 1000);
    f->stall_ms = 100; /* 20 batches of one: the run lasts about 2 s */
    start_server(f);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, skim, NULL), 0);
    json_t *j = load_as(f, NULL, "distinct", "1", "20", 3);
    pthread_join(t, NULL);
    json_t *inv = json_object_get(j, "invariants");
    assert_true(json_is_true(json_object_get(inv, "funds_conserved")));
    assert_true(json_is_true(json_object_get(inv, "purchases_match")));
    assert_true(json_is_false(json_object_get(inv, "trades_match")));
    json_t *trades = json_object_get(inv, "trades");
    assert_int_equal(json_integer_value(json_object_get(trades, "recorded")), 20);
    assert_int_equal(json_integer_value(json_object_get(trades, "players_mismatched")), 2);
    json_decref(j);
    char *text = slurp(f->text);
    assert_non_null(strstr(text, "players' funds moved otherwise"));
    free(text);
}

/* The integer reply of one Redis command with one argument. */
static long long redis_int(const char *cmd, const char *key) {
    redisContext *r = redisConnect("127.0.0.1", redis.port);
    assert_true(r && !r->err);
    redisReply *rep = redisCommand(r, "%s %s", cmd, key);
    assert_non_null(rep);
    assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
    long long v = rep->integer;
    freeReplyObject(rep);
    redisFree(r);
    return v;
}

/* GET path from the server: asserts status, returns the body (new reference). */
static json_t *get_json(const struct fx *f, const char *path, long status) {
    return th_http_json(f->port, "GET", path, NULL, NULL, status);
}

/* A server that keeps 8 trades a realm trims the trade the run started at:
 * the tool says it cannot account for the trades (naming --trade-history)
 * instead of calling the funds unaccounted for (exit 0, not 3); the items'
 * latest trades stay within the history, and what it keeps reads whole. */
/* The load's verdict on a server that keeps 8 trades a realm (see below). */
static void load_trimmed_says_cannot_account(struct fx *f) {
    json_t *j = load_as(f, NULL, "distinct", "4", "60", 0);
    json_t *inv = json_object_get(j, "invariants");
    assert_true(json_is_true(json_object_get(inv, "ok")));
    assert_true(json_is_true(json_object_get(inv, "trades_trimmed")));
    assert_true(json_is_null(json_object_get(inv, "trades_match")));
    json_decref(j);
    char *text = slurp(f->text);
    assert_non_null(strstr(text, "cannot account for the trades"));
    assert_non_null(strstr(text, "--trade-history"));
    assert_null(strstr(text, "BAD"));
    free(text);
}

/* The same with no trade before the run (a fresh world, as make run's): the run's first
 * trades are the ones trimmed. */
static void test_load_history_trimmed_from_the_first_trade(void **state) {
    struct fx *f = *state;
    seed_world(50, 400, 1000000, 1, 1000);
    f->history = 8;
    start_server(f);
    load_trimmed_says_cannot_account(f);
}

static void test_load_history_trimmed_cannot_account(void **state) {
    struct fx *f = *state;
    seed_world(50, 400, 1000000, 1, 1000);
    seed_two_demo_players();
    f->history = 8;
    start_server(f);
    th_http r; /* a trade before the run: its mark */
    static const char axe[] = "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}";
    assert_int_equal(th_http_do(f->port, "POST", "/purchase", axe, strlen(axe), &r), 0);
    assert_int_equal(r.status, 200);
    th_http_cleanup(&r);
    load_trimmed_says_cannot_account(f);
    json_t *j;

    long long len = redis_int("XLEN", "trades:{main}");
    assert_true(len >= 8 && len <= 9); /* 8, and an eighth more at most */
    assert_true(redis_int("HLEN", "trades:{main}:items") <= len);
    assert_true(redis_int("LLEN", "trades:{main}:order") <= len);
    char id[64], path[128];
    redis_get(id, sizeof id, "HGET", "trades:{main}:items", "axe");
    assert_string_equal(id, ""); /* its trade was trimmed, and its head with it */
    j = get_json(f, "/items/axe/trades", 200);
    assert_int_equal(json_array_size(json_object_get(j, "trades")), 0);
    json_decref(j);
    redisContext *rc = redisConnect("127.0.0.1", redis.port); /* the newest trade reads */
    assert_true(rc && !rc->err);
    redisReply *x = redisCommand(rc, "XREVRANGE trades:{main} + - COUNT 1");
    assert_true(x && x->type == REDIS_REPLY_ARRAY && x->elements == 1);
    snprintf(id, sizeof id, "%s", x->element[0]->element[0]->str);
    freeReplyObject(x);
    redisFree(rc);
    snprintf(path, sizeof path, "/trades/%s", id);
    j = get_json(f, path, 200);
    char item[64];
    snprintf(item, sizeof item, "%s", json_string_value(json_object_get(j, "item")));
    json_decref(j);
    snprintf(path, sizeof path, "/items/%s/trades", item);
    j = get_json(f, path, 200);
    json_t *t = json_array_get(json_object_get(j, "trades"), 0);
    assert_non_null(t);
    assert_string_equal(json_string_value(json_object_get(t, "trade_id")), id);
    json_decref(j);
}

/* --mix flash: 200 buyers at once empty a sale of 500 units (limit 5)
 * that the tool creates; the report says it sold out, exactly, with no
 * limit broken, and the invariants (trades, funds to the house) hold. */
static void test_load_flash_sells_out_exactly(void **state) {
    struct fx *f = *state;
    seed_world(300, 10, 1000, 1, 10);
    start_server(f);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", f->port);
    const char *args[] = {"--url",        url,   "--redis",      redis.url, "--mix",
                          "flash",        "--buyers", "200",     "--sale-stock", "500",
                          "--sale-limit", "5",   "--sale-price", "3",       "--json",
                          f->json,        "--quiet", NULL};
    int rc = run_tool_to(args, f->text);
    char *text = slurp(f->text);
    if (rc != 0) fprintf(stderr, "market-load --mix flash exited %d:\n%s", rc, text);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(text, "sold out in"));
    free(text);
    json_error_t e;
    json_t *j = json_load_file(f->json, 0, &e);
    assert_non_null(j);
    assert_invariants(j);
    assert_int_equal(num(j, "status", "200"), 500);
    assert_int_equal(num(j, "flash", "sold"), 500);
    assert_int_equal(num(j, "flash", "left"), 0);
    assert_int_equal(num(j, "flash", "oversold"), 0);
    assert_int_equal(num(j, "flash", "limit_violations"), 0);
    assert_int_equal(num(j, "flash", "stacked"), 500);
    assert_true(json_is_true(json_object_get(json_object_get(j, "flash"), "sold_out")));
    json_t *trades = json_object_get(json_object_get(j, "invariants"), "trades");
    assert_int_equal(json_integer_value(json_object_get(trades, "recorded")), 500);
    json_decref(j);
}

/* --mix auctions: 40 auctions that all end in the same second, 2 s after they open, and
 * 32 bidders racing on them for 4 s (bids at the least each takes, one in twenty at the
 * buyout); the tool waits for the server's sweeper to settle them: every one sold or back
 * with its seller, none left open past its end, a trade record for each one sold, the
 * escrow the open bids', funds and units conserved. */
static void test_load_auctions_all_settled(void **state) {
    struct fx *f = *state;
    seed_world(60, 10, 500, 1, 10);
    start_server(f);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", f->port);
    const char *args[] = {"--url",
                          url,
                          "--redis",
                          redis.url,
                          "--mix",
                          "auctions",
                          "--buyers",
                          "32",
                          "--duration",
                          "4",
                          "--auctions",
                          "40",
                          "--auction-seconds",
                          "2",
                          "--buyout",
                          "60",
                          "--json",
                          f->json,
                          "--quiet",
                          NULL};
    int rc = run_tool_to(args, f->text);
    char *text = slurp(f->text);
    if (rc != 0) fprintf(stderr, "market-load --mix auctions exited %d:\n%s", rc, text);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(text, "ending in the same second"));
    free(text);
    json_error_t e;
    json_t *j = json_load_file(f->json, 0, &e);
    assert_non_null(j);
    assert_invariants(j);
    long long sold = num(j, "auctions", "sold");
    assert_true(num(j, "status", "200") > 40);
    assert_true(sold > 0);
    assert_int_equal(sold + num(j, "auctions", "unsold"), 40);
    assert_int_equal(num(j, "auctions", "open"), 0);
    assert_int_equal(num(j, "auctions", "unsettled_past_end"), 0);
    json_t *trades = json_object_get(json_object_get(j, "invariants"), "trades");
    assert_int_equal(json_integer_value(json_object_get(trades, "recorded")), sold);
    assert_int_equal(json_integer_value(json_object_get(trades, "players_mismatched")), 0);
    json_decref(j);
}

/* A server that is not there is a prompt setup failure, not a hang. */
static void test_load_server_down_exits_1(void **state) {
    (void)state;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", th_free_port());
    const char *args[] = {"--url", url,          "--redis", redis.url, "--buyers",
                          "4",     "--duration", "30",      "--quiet", NULL};
    time_t t0 = time(NULL);
    assert_int_equal(run_tool(args), 1);
    assert_true(time(NULL) - t0 < 10);
}

static void test_load_bad_flags_exit_2(void **state) {
    (void)state;
    const char *no_stop[] = {"--buyers", "4", NULL};
    assert_int_equal(run_tool(no_stop), 2);
    const char *bad_mix[] = {"--buyers", "4", "--requests", "1", "--mix", "most", NULL};
    assert_int_equal(run_tool(bad_mix), 2);
    const char *flash_realms[] = {"--buyers", "4", "--mix", "flash", "--realms", "2", NULL};
    assert_int_equal(run_tool(flash_realms), 2);
    const char *flash_stock[] = {"--buyers", "4", "--mix", "flash", "--sale-stock", "0", NULL};
    assert_int_equal(run_tool(flash_stock), 2);
}

static int group_setup(void **state) {
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    /* The tool reads these as defaults; every test says what it wants. */
    unsetenv("MARKET_AUTH_SECRET");
    unsetenv("MARKET_LISTEN");
    unsetenv("MARKET_REDIS");
    unsetenv("MARKET_REDIS_PORT");
    return th_redis_start(&redis);
}

static int group_teardown(void **state) {
    (void)state;
    th_redis_stop(&redis);
    return 0;
}

/* The same two tests per strategy, named test_x[strategy]. */
#define PER_STRATEGY(s)                                                                            \
    {"test_load_contended_only_200_402_404[" s "]", test_load_contended_only_200_402_404,          \
     fx_setup, fx_teardown, (void *)(s)},                                                          \
        {"test_load_direct_trades_conserve_funds[" s "]", test_load_direct_trades_conserve_funds,  \
         fx_setup, fx_teardown, (void *)(s)},                                                      \
    {                                                                                              \
        "test_load_distinct_all_200[" s "]", test_load_distinct_all_200, fx_setup, fx_teardown,    \
            (void *)(s)                                                                            \
    }

int main(void) {
    const struct CMUnitTest tests[] = {
        PER_STRATEGY("market"),
        PER_STRATEGY("item"),
        PER_STRATEGY("optimistic"),
        {"test_load_sends_buyer_tokens", test_load_sends_buyer_tokens, fx_setup, fx_teardown,
         (void *)"market"},
        {"test_load_players_leaves_others_alone", test_load_players_leaves_others_alone, fx_setup,
         fx_teardown, (void *)"market"},
        {"test_load_without_secret_exits_4_names_401", test_load_without_secret_exits_4_names_401,
         fx_setup, fx_teardown, (void *)"market"},
        {"test_load_funds_moved_without_trade_exit_3", test_load_funds_moved_without_trade_exit_3,
         fx_setup, fx_teardown, (void *)"market"},
        {"test_load_flash_sells_out_exactly", test_load_flash_sells_out_exactly, fx_setup,
         fx_teardown, (void *)"market"},
        {"test_load_auctions_all_settled", test_load_auctions_all_settled, fx_setup, fx_teardown,
         (void *)"market"},
        {"test_load_history_trimmed_cannot_account", test_load_history_trimmed_cannot_account,
         fx_setup, fx_teardown, (void *)"market"},
        {"test_load_history_trimmed_from_the_first_trade",
         test_load_history_trimmed_from_the_first_trade, fx_setup, fx_teardown, (void *)"market"},
        cmocka_unit_test(test_load_server_down_exits_1),
        cmocka_unit_test(test_load_bad_flags_exit_2),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
