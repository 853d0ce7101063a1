/* test_redis_acl.c - the service as the least-privileged Redis user of deploy/redis/market.acl.
 *
 * A throwaway redis-server gets the user `market` from deploy/redis/market.acl (the file compose
 * and make run-ha load), exactly as OPERATIONS.md tells an operator to create it. The service
 * then runs as redis://market:<pass>@... under each lock path it has on one server (strategies
 * market, item and optimistic with the redis lock; market over Redlock with that server as its
 * one master) and does what a client does: a purchase, an idempotent retry, list and unlist,
 * searches, the trade history, stackable goods bought from a seller and without one, a flash
 * sale buy, the health check. The results are checked, and so is Redis's ACL LOG: the service
 * was refused nothing (a refusal that it swallowed, a script's pcall, would show there). Last,
 * the user is shown to be refused what it must not do: FLUSHALL, CONFIG, KEYS, SCAN, a key or a
 * channel outside its patterns, and a script that writes outside them.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <curl/curl.h>
#include <hiredis.h>
#include <jansson.h>

#include "tests/helpers/cmocka_all.h"

#include "api/api.h"
#include "lock/lock.h"
#include "rconn/rconn.h"
#include "market/market.h"
#include "server/server.h"
#include "tests/helpers/http_client.h"
#include "tests/helpers/demo_world.h"
#include "tests/helpers/redis_proc.h"

#define ACL_FILE "deploy/redis/market.acl"
#define USER "market"
#define PASS "acl-test-pass-0123456789"
#define REALM MARKET_REALM_DEFAULT
#define ACL_ARGS_MAX 256

static th_redis redis;

/* ---- helpers ---- */

/* The admin connection: the default user, which seeds and checks. */
static redisContext *admin(void) {
    redisContext *c = redisConnect("127.0.0.1", redis.port);
    assert_non_null(c);
    assert_int_equal(c->err, 0);
    return c;
}

/* A connection authenticated as the service's user. */
static redisContext *as_market(void) {
    redisContext *c = admin();
    redisReply *r = redisCommand(c, "AUTH %s %s", USER, PASS);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    return c;
}

/* Runs argv on c and asserts an error reply starting with "NOPERM". */
static void assert_noperm(redisContext *c, int argc, const char **argv) {
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    assert_non_null(r);
    if (r->type != REDIS_REPLY_ERROR || strncmp(r->str, "NOPERM", 6) != 0)
        fprintf(stderr, "%s: expected NOPERM, got type %d %s\n", argv[0], r->type,
                r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS ? r->str : "");
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    assert_memory_equal(r->str, "NOPERM", 6);
    freeReplyObject(r);
}

static long long admin_int(const char *fmt, const char *arg) {
    redisContext *c = admin();
    redisReply *r = redisCommand(c, fmt, arg);
    assert_non_null(r);
    long long v = -1;
    if (r->type == REDIS_REPLY_INTEGER) v = r->integer;
    if (r->type == REDIS_REPLY_STRING) v = strtoll(r->str, NULL, 10);
    if (r->type == REDIS_REPLY_ARRAY) v = (long long)r->elements;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

/* Creates the user from ACL_FILE, as an operator would: ACL SETUSER market reset on >PASS
 * followed by the file's tokens (comments dropped). */
static void acl_user_create(void) {
    FILE *f = fopen(ACL_FILE, "r");
    assert_non_null(f);
    static char words[ACL_ARGS_MAX][128];
    const char *argv[ACL_ARGS_MAX + 6] = {"ACL", "SETUSER", USER, "reset", "on", ">" PASS};
    int argc = 6;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        for (char *save = NULL, *w = strtok_r(line, " \t\r\n", &save); w;
             w = strtok_r(NULL, " \t\r\n", &save)) {
            assert_true(argc - 6 < ACL_ARGS_MAX);
            assert_true(strlen(w) < sizeof words[0]);
            snprintf(words[argc - 6], sizeof words[0], "%s", w);
            argv[argc] = words[argc - 6];
            argc++;
        }
    }
    fclose(f);
    assert_true(argc > 20); /* keys, channels, commands */
    redisContext *c = admin();
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR) fprintf(stderr, "ACL SETUSER: %s\n", r->str);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(c);
}

/* The demo world, every key deleted first, and ACL LOG emptied. */
static void seed(void) {
    redisContext *rc = admin();
    freeReplyObject(redisCommand(rc, "FLUSHALL"));
    freeReplyObject(redisCommand(rc, "ACL LOG RESET"));
    redisFree(rc);
    th_world_store(redis.url, REALM, th_demo_world());
    rc = admin(); /* items' latest trades a trim never saw, more than it keeps: its sample
                   * finds them */
    freeReplyObject(redisCommand(rc, "HSET trades:{main}:items g0 1-1 g1 1-2 g2 1-3"));
    redisFree(rc);
}

/* Creates the running flash sale "potions" (100 potions at 10, 5 a player) through the store
 * as the service's user, the way POST /sales does (the same script). */
static void sale_create_as_market(void) {
    market_config cfg = {.redis_timeout_ms = 1000, .lock_ttl_ms = 1000, .acquire_timeout_ms = 1000};
    char url[128];
    snprintf(url, sizeof url, "redis://%s:%s@127.0.0.1:%d/0", USER, PASS, redis.port);
    assert_int_equal(rconn_addr_parse(url, &cfg.redis), RCONN_OK);
    int err;
    lock_client *l = lock_local_new(&err);
    market *m = market_new(&cfg, l, &err);
    market_conn *c = market_conn_new(m, &err);
    assert_non_null(c);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    market_sale s = {.id = "potions",
                     .item = "potion",
                     .price = 10,
                     .initial = 100,
                     .limit = 5,
                     .start_ms = now - 1000,
                     .end_ms = now + 3600000};
    assert_int_equal(market_sale_create(c, REALM, &s), MARKET_OK);
    market_conn_free(c);
    market_free(m);
    lock_free(l);
}

static server *start(const char *strategy, const char *lock, int *port) {
    server_config cfg;
    server_config_defaults(&cfg);
    snprintf(cfg.listen, sizeof cfg.listen, "127.0.0.1:0");
    snprintf(cfg.redis, sizeof cfg.redis, "redis://%s:%s@127.0.0.1:%d/0", USER, PASS, redis.port);
    snprintf(cfg.strategy, sizeof cfg.strategy, "%s", strategy);
    snprintf(cfg.lock, sizeof cfg.lock, "%s", lock);
    if (strcmp(lock, "redlock") == 0)
        snprintf(cfg.lock_redis, sizeof cfg.lock_redis, "%s", cfg.redis);
    cfg.trade_index = 2;   /* the players' and items' trade lists get trimmed (LTRIM) */
    cfg.trade_history = 4; /* and the stream, with its items' latest trades */
    cfg.no_auth = 1;
    cfg.threads = 2;
    cfg.log_level = SERVER_LOG_ERROR;
    int err;
    char why[256];
    server *s = server_start(&cfg, &err, why, sizeof why);
    if (!s) fprintf(stderr, "server_start: %s\n", why);
    assert_non_null(s);
    *port = server_port(s);
    return s;
}

/* Sends a request (header may be NULL), asserts its status, returns the body (new reference);
 * *replayed (may be NULL) says whether it carried Idempotent-Replayed: true. */
static json_t *call_h(int port, const char *method, const char *path, const char *header,
                      const char *body, long status, int *replayed) {
    th_http r;
    assert_int_equal(
        th_http_do_header(port, method, path, header, body, body ? strlen(body) : 0, &r), 0);
    if (replayed) *replayed = strstr(r.headers, "Idempotent-Replayed: true") != NULL;
    return th_http_json_of(&r, status, path);
}

static json_t *call(int port, const char *method, const char *path, const char *body, long status) {
    return call_h(port, method, path, NULL, body, status, NULL);
}

static long long jint(json_t *j, const char *key) {
    json_t *v = json_object_get(j, key);
    assert_true(json_is_integer(v));
    return (long long)json_integer_value(v);
}

/* Asserts that ACL LOG has no entry: nothing the service sent was refused. */
static void assert_acl_log_empty(void) {
    redisContext *c = admin();
    redisReply *r = redisCommand(c, "ACL LOG");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        for (size_t k = 0; k + 1 < e->elements; k += 2)
            if (e->element[k + 1]->type == REDIS_REPLY_STRING)
                fprintf(stderr, "ACL LOG %zu: %s=%s\n", i, e->element[k]->str,
                        e->element[k + 1]->str);
    }
    assert_int_equal(r->elements, 0);
    freeReplyObject(r);
    redisFree(c);
}

/* Opens GET /events (HTTP/1.0: unchunked) and waits for its first bytes; the
 * realm's follower then reads the store as `market` too. Returns the socket. */
static int events_open(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    static const char req[] = "GET /events HTTP/1.0\r\nHost: x\r\n\r\n";
    assert_int_equal(send(fd, req, sizeof req - 1, MSG_NOSIGNAL), (ssize_t)(sizeof req - 1));
    struct timeval tv = {5, 0};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    char buf[512];
    assert_true(recv(fd, buf, sizeof buf, 0) > 0);
    struct timespec ts = {0, 400 * 1000 * 1000}; /* the follower starts from what is there */
    nanosleep(&ts, NULL);
    return fd;
}

/* Reads the stream until it has shown a trade and a listing change (5 s at most each read). */
static void events_expect_trade_and_listing(int fd) {
    static char buf[1 << 16];
    size_t n = 0;
    while (n < sizeof buf - 1 &&
           (!strstr(buf, "event: trade\n") || !strstr(buf, "event: listing\n"))) {
        ssize_t k = recv(fd, buf + n, sizeof buf - 1 - n, 0);
        assert_true(k > 0);
        n += (size_t)k;
        buf[n] = '\0';
    }
    assert_non_null(strstr(buf, "event: trade\n"));
    assert_non_null(strstr(buf, "event: listing\n"));
    close(fd);
}

/* ---- the service as `market`, per lock path ---- */

/* Everything a client does, on a fresh demo world; every answer and the end state checked. */
static void run_as_market(const char *strategy, const char *lock) {
    seed();
    sale_create_as_market();
    int port;
    server *s = start(strategy, lock, &port);

    json_t *j = call(port, "GET", "/healthz", NULL, 200);
    json_decref(j);
    int events = events_open(port);

    /* a purchase, then the same one again: the axe is Bob's now */
    static const char axe[] = "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"axe\"}";
    j = call(port, "POST", "/purchase", axe, 200);
    assert_int_equal(jint(j, "buyer_funds"), 300);
    const char *tid = json_string_value(json_object_get(j, "trade_id"));
    assert_non_null(tid);
    char trade[64], path[128];
    snprintf(trade, sizeof trade, "%s", tid);
    json_decref(j);
    snprintf(path, sizeof path, "/trades/%s", trade);
    j = call(port, "GET", path, NULL, 200);
    assert_string_equal(json_string_value(json_object_get(j, "item")), "axe");
    json_decref(j);
    j = call(port, "POST", "/purchase", axe, 404);
    json_decref(j);

    /* idempotency: a retry with the same key is replayed, charged once */
    static const char potion[] =
        "{\"buyer\":\"B\",\"seller\":\"C\",\"item\":\"potion-1\",\"price\":25}";
    for (int i = 0; i < 2; i++) {
        int replayed;
        j = call_h(port, "POST", "/purchase", "Idempotency-Key: acl-k1", potion, 200, &replayed);
        assert_int_equal(replayed, i == 1);
        assert_int_equal(jint(j, "buyer_funds"), 275);
        json_decref(j);
    }

    /* list and unlist (a listing with a key too) */
    static const char list[] = "{\"seller\":\"C\",\"item\":\"potion-3\",\"price\":40}";
    j = call_h(port, "POST", "/list", "Idempotency-Key: acl-l1", list, 201, NULL);
    json_decref(j);
    j = call(port, "POST", "/unlist", "{\"seller\":\"C\",\"item\":\"potion-3\"}", 200);
    assert_int_equal(jint(j, "price"), 40);
    json_decref(j);

    /* searches: by item, by seller, by price */
    j = call(port, "GET", "/market?item=sword-2", NULL, 200);
    assert_int_equal(jint(j, "total"), 1);
    json_decref(j);
    j = call(port, "GET", "/market?seller=E&sort=-price", NULL, 200);
    assert_int_equal(jint(j, "total"), 2);
    json_decref(j);
    j = call(port, "GET", "/market?min_price=300&max_price=1200&limit=2", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "listings")), 2);
    json_decref(j);
    j = call(port, "GET", "/market?limit=2", NULL, 200); /* all of it, paged: 6 less 2 sold */
    assert_int_equal(jint(j, "total"), 4);
    json_decref(j);

    /* stackable goods: A lists 50 arrows, B buys 10 of hers, E 5 from whoever is cheapest */
    j = call(port, "POST", "/list",
             "{\"seller\":\"A\",\"item\":\"arrow\",\"price\":3,\"quantity\":50}", 201);
    json_decref(j);
    j = call(port, "POST", "/purchase",
             "{\"buyer\":\"B\",\"seller\":\"A\",\"item\":\"arrow\",\"quantity\":10}", 200);
    assert_int_equal(jint(j, "total"), 30);
    json_decref(j);
    j = call(port, "POST", "/purchase",
             "{\"buyer\":\"E\",\"item\":\"arrow\",\"quantity\":5,\"max_price\":3}", 200);
    assert_int_equal(jint(j, "total"), 15);
    json_decref(j);
    j = call(port, "POST", "/unlist", "{\"seller\":\"A\",\"item\":\"arrow\"}", 200);
    assert_int_equal(jint(j, "quantity"), 35);
    json_decref(j);

    /* the flash sale: Bob buys 2 potions */
    j = call_h(port, "POST", "/sales/potions/buy", "Idempotency-Key: acl-s1",
               "{\"buyer\":\"B\",\"quantity\":2}", 200, NULL);
    json_decref(j);
    j = call(port, "GET", "/sales/potions", NULL, 200);
    assert_int_equal(jint(j, "stock_left"), 98);
    json_decref(j);

    /* the trade history: --trade-history 4 trimmed the axe's trade (the fifth trade did),
     * and the axe's latest trade with it */
    j = call(port, "GET", path, NULL, 404);
    json_decref(j);
    j = call(port, "GET", "/items/axe/trades?limit=5", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "trades")), 0);
    json_decref(j);
    /* B made 4 trades (axe, potion, arrows, sale); --trade-index 2 keeps the last 2, read
     * a page at a time */
    j = call(port, "GET", "/players/B/trades?limit=10", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "trades")), 2);
    json_decref(j);
    j = call(port, "GET", "/players/B/trades?limit=1", NULL, 200);
    const char *next = json_string_value(json_object_get(j, "next_cursor"));
    assert_non_null(next);
    snprintf(path, sizeof path, "/players/B/trades?limit=1&cursor=%s", next);
    json_decref(j);
    j = call(port, "GET", path, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "trades")), 1);
    assert_true(json_is_null(json_object_get(j, "next_cursor")));
    json_decref(j);
    j = call(port, "GET", "/items/arrow/trades?limit=5", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "trades")), 2);
    json_decref(j);
    j = call(port, "GET", "/players/A/listings", NULL, 200);
    json_decref(j);

    /* Bob: 800 - 500 (axe) - 25 (potion, once) - 30 (arrows) - 20 (sale) */
    j = call(port, "GET", "/players/B", NULL, 200);
    assert_int_equal(jint(j, "funds"), 225);
    json_t *stacks = json_object_get(j, "stacks");
    assert_int_equal(json_integer_value(json_object_get(stacks, "arrow")), 10);
    assert_int_equal(json_integer_value(json_object_get(stacks, "potion")), 2);
    json_decref(j);
    events_expect_trade_and_listing(events); /* GET /events followed it all as `market` */
    server_stop(s);

    /* the store agrees, read as the administrator */
    assert_int_equal(admin_int("HGET users:{main}:%s funds", "A"), 100 + 500 + 30 + 15);
    assert_int_equal(admin_int("HGET stacks:{main}:A %s", "arrow"), 200 - 15);
    assert_int_equal(admin_int("HGET users:{main}:%s funds", "game"), 20);
    assert_int_equal(admin_int("SISMEMBER inventory:{main}:B %s", "axe"), 1);
    assert_int_equal(admin_int("XLEN trades:{main}%s", ""), 4);
    assert_int_equal(admin_int("HEXISTS trades:{main}:items %s", "axe"), 0);
    assert_int_equal(admin_int("HEXISTS trades:{main}:items %s", "g0"), 0);
    assert_acl_log_empty();
}

static void test_acl_user_strategy_market_redis_lock(void **state) {
    (void)state;
    run_as_market("market", "redis");
}

static void test_acl_user_strategy_item_redis_lock(void **state) {
    (void)state;
    run_as_market("item", "redis");
}

static void test_acl_user_strategy_optimistic(void **state) {
    (void)state;
    run_as_market("optimistic", "redis");
}

static void test_acl_user_strategy_market_redlock_one_master(void **state) {
    (void)state;
    run_as_market("market", "redlock");
}

/* ---- the lock across processes: waiters, release notices, extension ---- */

struct waiter {
    lock_client *c;
    lock_handle h;
    int rc;
    int64_t got_ms; /* when the lease was granted */
};

static void *waiter_main(void *arg) {
    struct waiter *w = arg;
    w->rc = lock_acquire(w->c, "lock:market:{main}", 5000, 10000, &w->h);
    w->got_ms = rconn_now_ms();
    return NULL;
}

static lock_client *lock_as_market(void) {
    char url[128];
    snprintf(url, sizeof url, "redis://%s:%s@127.0.0.1:%d/0", USER, PASS, redis.port);
    rconn_addr a;
    assert_int_equal(rconn_addr_parse(url, &a), RCONN_OK);
    int err;
    lock_client *c = lock_redis_new(&a, 1000, &err);
    assert_non_null(c);
    return c;
}

/* What only contention between two lock clients (two processes) runs: the waiter's ":wanted"
 * mark and SUBSCRIBE to the release notice, the holder's extend and its release's PUBLISH. The
 * service's processes do this when several share a Redis. */
static void test_acl_user_lock_waiter_woken_by_release(void **state) {
    (void)state;
    seed();
    redisContext *c = admin();
    freeReplyObject(redisCommand(c, "CONFIG RESETSTAT"));
    redisFree(c);
    lock_client *a = lock_as_market(), *b = lock_as_market();
    lock_handle h;
    assert_int_equal(lock_acquire(a, "lock:market:{main}", 5000, 0, &h), LOCK_OK);
    struct waiter w = {.c = b};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
    struct timespec nap = {0, 300 * 1000 * 1000};
    nanosleep(&nap, NULL);
    assert_int_equal(lock_extend(a, &h, 5000), LOCK_OK);
    int64_t released_ms = rconn_now_ms();
    assert_int_equal(lock_release(a, &h), LOCK_OK);
    pthread_join(th, NULL);
    assert_int_equal(w.rc, LOCK_OK);
    assert_true(w.h.fence > h.fence);
    fprintf(stderr, "# the waiter got the lease %lld ms after the release\n",
            (long long)(w.got_ms - released_ms));
    assert_int_equal(lock_release(b, &w.h), LOCK_OK);
    lock_free(a);
    lock_free(b);
    /* the notice went out and was listened for; nothing was refused */
    c = admin();
    redisReply *r = redisCommand(c, "INFO commandstats");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_non_null(strstr(r->str, "cmdstat_subscribe:calls="));
    assert_non_null(strstr(r->str, "cmdstat_publish:calls="));
    freeReplyObject(r);
    redisFree(c);
    assert_acl_log_empty();
}

/* ---- what the user may not do ---- */

static void test_acl_user_refused_outside_its_set(void **state) {
    (void)state;
    redisContext *c = admin();
    freeReplyObject(redisCommand(c, "FLUSHALL"));
    redisFree(c);
    c = as_market();
    const char *flushall[] = {"FLUSHALL"};
    const char *config[] = {"CONFIG", "GET", "maxmemory"};
    const char *keys[] = {"KEYS", "*"};
    const char *scan[] = {"SCAN", "0"};
    const char *shutdown[] = {"SHUTDOWN", "NOSAVE"};
    const char *acl[] = {"ACL", "SETUSER", USER, "+@all"};
    const char *set_other[] = {"SET", "other:key", "1"};
    const char *get_other[] = {"GET", "config"};
    const char *publish_other[] = {"PUBLISH", "news", "1"};
    const char *script_other[] = {"EVAL", "return redis.call('SET', 'other:key', '1')", "0"};
    assert_noperm(c, 1, flushall);
    assert_noperm(c, 3, config);
    assert_noperm(c, 2, keys);
    assert_noperm(c, 2, scan);
    assert_noperm(c, 2, shutdown);
    assert_noperm(c, 4, acl);
    assert_noperm(c, 3, set_other);
    assert_noperm(c, 2, get_other);
    assert_noperm(c, 3, publish_other);

    /* a script may not reach past the user's rights either */
    redisReply *r = redisCommandArgv(c, 3, script_other, NULL);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ERROR);
    fprintf(stderr, "# a script writing other:key: %s\n", r->str);
    freeReplyObject(r);

    /* while its own keys are fine */
    r = redisCommand(c, "SET lock:acl-test 1 PX 1000");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(c);
    assert_int_equal(admin_int("EXISTS %s", "other:key"), 0);
    assert_int_equal(admin_int("DBSIZE", NULL), 1);
}

/* ---- group ---- */

static int group_setup(void **state) {
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    signal(SIGPIPE, SIG_IGN);
    if (th_redis_start(&redis) != 0) return -1;
    acl_user_create();
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    th_redis_stop(&redis);
    curl_global_cleanup();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acl_user_strategy_market_redis_lock),
        cmocka_unit_test(test_acl_user_strategy_item_redis_lock),
        cmocka_unit_test(test_acl_user_strategy_optimistic),
        cmocka_unit_test(test_acl_user_strategy_market_redlock_one_master),
        cmocka_unit_test(test_acl_user_lock_waiter_woken_by_release),
        cmocka_unit_test(test_acl_user_refused_outside_its_set),
    };
    return cmocka_run_group_tests_name("redis acl user (integration)", tests, group_setup,
                                       group_teardown);
}
