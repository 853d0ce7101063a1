/* market_fx.c - the fixture market/'s integration tests share (market_fx.h). */
#include "tests/helpers/market_fx.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "rconn/rconn.h"

th_redis th_fx_redis;
enum market_strategy th_fx_strategy;

/* Returns a market on the group's redis-server, as cfg says (its address and
 * strategy are the group's), with a lock client and a connection; NULL when
 * it cannot be made. */
th_market *th_market_new(market_config cfg) {
    th_market *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    cfg.strategy = th_fx_strategy;
    int err;
    if (rconn_addr_parse(th_fx_redis.url, &cfg.redis) == RCONN_OK &&
        (f->lock = lock_redis_new(&cfg.redis, 1000, &err)) &&
        (f->m = market_new(&cfg, f->lock, &err)) && (f->c = market_conn_new(f->m, &err)))
        return f;
    th_market_free(f);
    return NULL;
}

/* Frees f and what it holds; NULL is a no-op. */
void th_market_free(th_market *f) {
    if (!f) return;
    market_conn_free(f->c);
    market_free(f->m);
    lock_free(f->lock);
    free(f);
}

/* Runs a command on the group's redis-server (hiredis's format) and returns
 * its answer (the caller frees it); fails the test on no answer. */
static redisReply *vcmd(const char *fmt, va_list ap) {
    redisContext *rc = redisConnect("127.0.0.1", th_fx_redis.port);
    assert_non_null(rc);
    assert_int_equal(rc->err, 0);
    redisReply *r = redisvCommand(rc, fmt, ap);
    assert_non_null(r);
    redisFree(rc);
    return r;
}

redisReply *th_fx_cmd(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = vcmd(fmt, ap);
    va_end(ap);
    return r;
}

/* th_fx_cmd()'s answer as a number: an integer, a string's number, 0 for
 * nil or a status; fails the test on an error. */
long long th_fx_num(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = vcmd(fmt, ap);
    va_end(ap);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    long long v = r->type == REDIS_REPLY_INTEGER  ? r->integer
                  : r->type == REDIS_REPLY_STRING ? atoll(r->str)
                                                  : 0;
    freeReplyObject(r);
    return v;
}

/* The calls of Redis command cmd the group's redis-server has counted (th_redis_calls());
 * fails the test when they cannot be read. */
long long th_fx_calls(const char *cmd) {
    redisContext *rc = redisConnect("127.0.0.1", th_fx_redis.port);
    assert_non_null(rc);
    assert_int_equal(rc->err, 0);
    long long v = th_redis_calls(rc, cmd);
    redisFree(rc);
    assert_true(v >= 0);
    return v;
}

/* Returns player id's funds in the default realm; fails the test when it
 * cannot be read. */
int64_t th_fx_funds(market_conn *c, const char *id) {
    market_player *p = NULL;
    assert_int_equal(market_player_get(c, MARKET_REALM_DEFAULT, id, &p), MARKET_OK);
    int64_t v = p->funds;
    market_player_free(p);
    return v;
}

static int group_setup(void **state) {
    (void)state;
    return th_redis_start(&th_fx_redis);
}

static int group_teardown(void **state) {
    (void)state;
    th_redis_stop(&th_fx_redis);
    return 0;
}

/* Runs tests[0..n) once under each strategy, each run on a redis-server of
 * its own, named "<what> (integration, strategy <s>)". Returns how many
 * failed in all. */
int th_run_strategies(const char *what, const struct CMUnitTest *tests, size_t n) {
    static const enum market_strategy all[] = {MARKET_STRATEGY_MARKET, MARKET_STRATEGY_ITEM,
                                               MARKET_STRATEGY_OPTIMISTIC};
    int failed = 0;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        char name[128];
        th_fx_strategy = all[i];
        snprintf(name, sizeof name, "%s (integration, strategy %s)", what,
                 market_strategy_name(all[i]));
        failed += _cmocka_run_group_tests(name, tests, n, group_setup, group_teardown);
    }
    return failed;
}

static void (*volatile fx_armed)(void);
static int fx_calls;

void th_fx_on_decided(void *arg) {
    (void)arg;
    __atomic_fetch_add(&fx_calls, 1, __ATOMIC_SEQ_CST);
    void (*fn)(void) = __atomic_exchange_n(&fx_armed, NULL, __ATOMIC_SEQ_CST);
    if (fn) fn();
}

void th_fx_arm(void (*fn)(void)) {
    __atomic_store_n(&fx_calls, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&fx_armed, fn, __ATOMIC_SEQ_CST);
}

int th_fx_armed(void) {
    return __atomic_load_n(&fx_armed, __ATOMIC_SEQ_CST) != NULL;
}

int th_fx_decided(void) {
    return __atomic_load_n(&fx_calls, __ATOMIC_SEQ_CST);
}
