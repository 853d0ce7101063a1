/* market_fx.h - the fixture market/'s integration tests share: a market on
 * a test's redis-server (its lock client, the market and one connection)
 * under the strategy of the group being run, every group run once per
 * strategy on a fresh redis-server, a command's answer as a number, a
 * player's funds, and the hook that writes between a batch's decision and
 * its commit. */
#ifndef GM_TESTS_MARKET_FX_H
#define GM_TESTS_MARKET_FX_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"
#include "market/market.h"
#include "tests/helpers/redis_proc.h"

typedef struct th_market {
    lock_client *lock;
    market *m;
    market_conn *c;
} th_market;

extern th_redis th_fx_redis;                /* the group's redis-server */
extern enum market_strategy th_fx_strategy; /* the group's strategy */

th_market *th_market_new(market_config cfg);
void th_market_free(th_market *f);
redisReply *th_fx_cmd(const char *fmt, ...);
long long th_fx_num(const char *fmt, ...);
long long th_fx_calls(const char *cmd);
int64_t th_fx_funds(market_conn *c, const char *id);
int th_run_strategies(const char *what, const struct CMUnitTest *tests, size_t n);

/* The test hook between a batch's decision and its commit (give th_fx_on_decided as
 * market_config.test_decided): once armed with fn, it runs fn - a write straight into the
 * store, as another server's would land there - once. th_fx_armed() says it has not run
 * yet; th_fx_decided() counts the hook's calls since the last th_fx_arm(). */
void th_fx_on_decided(void *arg);
void th_fx_arm(void (*fn)(void));
int th_fx_armed(void);
int th_fx_decided(void);

#endif /* GM_TESTS_MARKET_FX_H */
