/* market_txn.h - the transaction layer (market_txn.c): the leases a write
 * holds and the attempts of a guarded transaction. It calls the store layer and the lock layer, nothing above. */
#ifndef GM_MARKET_MARKET_TXN_H
#define GM_MARKET_MARKET_TXN_H

#include <stddef.h>
#include <stdint.h>

#include "market/market_store.h"

/* The leases a guarded transaction holds, and their fencing records: the
 * commit refuses to run when "<lock key>:fenced" holds a fence newer than
 * ours (a newer holder has committed), or, when the lock keys live in the
 * store, when a lock key no longer holds our token; it stores our fence in
 * the same MULTI/EXEC as the transfer. */
typedef struct market__held {
    size_t n;
    int tokens; /* 1: the lock keys are read too, and must hold token[] (m->lock_in_store) */
    const char *key[MARKET__HELD_MAX];
    char fenced[MARKET__HELD_MAX][MARKET__FENCED_MAX]; /* "<lock key>:fenced" */
    char wanted[MARKET__HELD_MAX][MARKET__FENCED_MAX]; /* "<lock key>" LOCK_WANTED_SUFFIX */
    char fence[MARKET__HELD_MAX][24];                  /* our fence, decimal */
    uint64_t fence_v[MARKET__HELD_MAX];
    char token[MARKET__HELD_MAX][LOCK_TOKEN_LEN + 1];
} market__held;

/* One attempt of a guarded transaction: read under WATCH, decide, commit.
 * Returns MARKET_OK (decided; committed if it had anything to write),
 * MARKET__TXN_ABORTED, or a negative market code. */
typedef int (*market__attempt)(market_conn *c, const market__held *held, void *ud);

/* leases */
int market__lock(market_conn *c, const char *key, int64_t by, lock_handle *h);
int market__lock_multi(market_conn *c, const char *const *keys, size_t n, int64_t by,
                       lock_handle *h);
void market__held_set(market__held *hd, size_t k, const char *key, const lock_handle *h);
void market__held_name(market__held *hd, size_t k, const char *key);
void market__held_read_buf(const market__held *held, const char *also, market__buf *w);
size_t market__held_read_len(const market__held *held);
int market__held_lost(const market__held *held, const redisReply *mget, size_t also);
int market__held_wanted(const market__held *held, const redisReply *mget, size_t also);
void market__held_drop(const market__held *held, const char *kind, const char *realm,
                       const char *id, market__buf *w);

/* the attempts */
int market__attempts(market_conn *c, lock_handle *h, const market__held *hd, market__attempt fn,
                     void *ud);
int market__unwatch_later(market_conn *c, int rc);
void market__count_result(market *m, int rc);
void market__stall(uint32_t ms);

#endif /* GM_MARKET_MARKET_TXN_H */
