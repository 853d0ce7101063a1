/* market_impl.h - what the files of market/ share: the structs and the Redis plumbing.
 * Included only by market/ and its tests. */
#ifndef GM_MARKET_MARKET_IMPL_H
#define GM_MARKET_MARKET_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#include "market/market.h"

#define MARKET__KEY_MAX (MARKET_ID_MAX + 16)   /* "inventory:" + id */
#define MARKET__MEMBER_MAX (2 * MARKET_ID_MAX + 2) /* "<item>.<seller>" */
#define MARKET__PIPE_MAX 16                     /* commands in one fixed pipeline */

struct market {
    market_config cfg;
    lock_client *lock; /* borrowed; outlives the market */
};

struct market_conn {
    market *m;
    redisContext *ctx; /* NULL while disconnected; reconnected on next use */
    int unwatch;       /* a WATCH is pending: send UNWATCH before the next pipeline */
};

/* One command of a pipeline: argv/len as redisAppendCommandArgv takes them. */
typedef struct market__cmd {
    int argc;
    const char *argv[8];
    size_t len[8];
} market__cmd;

int market__connect(market_conn *c);
void market__drop(market_conn *c);
int market__pipeline(market_conn *c, const market__cmd *cmds, size_t n, redisReply **replies);
void market__replies_free(redisReply **replies, size_t n);
redisReply *market__command(market_conn *c, int argc, const char **argv, const size_t *len);
void market__cmd_set(market__cmd *cmd, int argc, ...);
int market__parse_i64(const char *s, size_t len, int64_t *out);
int market__parse_price(const char *s, size_t len, int64_t *out);
void market__key(char *out, size_t outlen, const char *prefix, const char *id);

#endif /* GM_MARKET_MARKET_IMPL_H */
