/* market_bulk.h - the bulk layer (market_bulk.c): what the files that read or write a
 * whole realm for tools (market_world.c, market_audit.c, market_reindex.c, market_info.c)
 * share: arrays that grow, pipelines of many commands, SCANs into key lists, strings kept
 * end to end, and the search indexes' keys read whole. It calls the store layer
 * (market_store.h) and nothing above it. */
#ifndef GM_MARKET_MARKET_BULK_H
#define GM_MARKET_MARKET_BULK_H

#include <stddef.h>

#include <hiredis.h>

#include "market/market_store.h"

#define MARKET__KEYS_CHUNK                                                                         \
    1000 /* index keys read per round trip by the audit and market_reindex() */

/* A bulk write: a growing pipeline of commands, its replies checked at the
 * end (not the purchase batches of market_purchase.c). */
struct market__bulk {
    market_conn *c;
    size_t sent;
    int failed;
    int last_nil; /* market__bulk_finish(): the last reply was nil (an EXEC aborted) */
};

/* Keys that market__scan_keys() collected, each a new string. */
struct market__keylist {
    char **keys;
    size_t n, cap;
};

/* Strings kept end to end in one buffer: the index entries the audit compares, the market
 * members market_reindex() looks up. */
struct market__strs {
    char *buf;
    size_t len, cap;
    size_t *at; /* where each string starts in buf */
    size_t n, cap_at;
    char **p; /* market__strs_index()'s pointers */
    size_t cap_p;
};

/* A pipeline that reads index keys whole: [WATCH market:{r} <keys>,] the whole zset of each
 * key (market__idx_read()). Zeroed: empty; freed with market__idx_read_free(). */
struct market__idx_read {
    market__buf b;    /* the commands */
    redisReply **rep; /* their replies, after market__idx_read() */
    size_t n;         /* the replies rep holds */
};

/* ---- arrays and strings ---- */
int market__grow(void **arr, size_t *cap, size_t need, size_t elem);
int market__strs_add(struct market__strs *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int market__strs_index(struct market__strs *s);
void market__strs_free(struct market__strs *s);

/* ---- pipelines of many commands ---- */
int market__bulk_finish(struct market__bulk *b);
void market__bulk_add_buf(struct market__bulk *b, market__buf *cmds);

/* ---- keys ---- */
int market__scan_keys(market_conn *c, const char *pattern, struct market__keylist *out);
void market__keylist_free(struct market__keylist *k);

/* ---- the market and its search indexes ---- */
void market__idx_legacy_keys(const char *realm, char out[3][MARKET__KEY_MAX]);
const char *market__idx_key_id(const char *realm, const char *key, int *kind);
int market__idx_keys_scan(market_conn *c, const char *realm, struct market__keylist *keys);
int market__idx_read(market_conn *c, struct market__idx_read *r, const char *watch,
                     char *const *keys, size_t n);
void market__idx_read_free(struct market__idx_read *r);

#endif /* GM_MARKET_MARKET_BULK_H */
