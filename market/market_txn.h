/* market_txn.h - the transaction layer (market_txn.c): the leases a write
 * holds, the guarded commit, and what the operations that run one at a time
 * share. It calls the store layer and the lock layer, nothing above. */
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
    char fence[MARKET__HELD_MAX][24];                  /* our fence, decimal */
    uint64_t fence_v[MARKET__HELD_MAX];
    char token[MARKET__HELD_MAX][LOCK_TOKEN_LEN + 1];
} market__held;

/* One attempt of a guarded transaction: read under WATCH, decide, commit.
 * Returns MARKET_OK (decided; committed if it had anything to write),
 * MARKET__TXN_ABORTED, or a negative market code. */
typedef int (*market__attempt)(market_conn *c, const market__held *held, void *ud);

/* What an attempt watches besides the keys it reads: the strategy's lock and
 * market keys, and the fencing records of the leases held. */
struct market__watchset {
    const char *keys[6];
    size_t n;
};

/* What an operation that runs one at a time shares: its deadline, what it
 * watches besides its own reads, and its idempotency key with its claim. */
struct market__single {
    const market_idem *idem; /* may be NULL */
    int64_t deadline_ms;     /* decided after this: MARKET_ERR_BUSY */
    struct market__watchset watch;
    char k_idem[MARKET__IDEM_REDIS_MAX];
    char token[MARKET__TOKEN_LEN + 1];
    char claim[MARKET__IDEM_RECORD_MAX];
    char claim_ttl[24];
    char record[MARKET__IDEM_RECORD_MAX];
    /* set when market__single_read() finds a stored outcome */
    int replayed, stored_rc;
    int64_t stored_a, stored_b;
    char stored_trade[MARKET_TRADE_ID_MAX + 1];
};

/* leases */
int market__lock(market_conn *c, const char *key, int64_t by, lock_handle *h);
int market__lock_multi(market_conn *c, const char *const *keys, size_t n, int64_t by,
                       lock_handle *h);
void market__held_set(market__held *hd, size_t k, const char *key, const lock_handle *h);
void market__held_name(market__held *hd, size_t k, const char *key);
size_t market__held_read(const market__held *held, const char **argv);
void market__held_read_buf(const market__held *held, market__buf *w);
int market__held_lost(const market__held *held, const redisReply *mget);
void market__held_fences(const market__held *held, market__buf *w);

/* the guarded transaction */
int market__guarded(market_conn *c, const char *lock_key, int64_t deadline_ms, market__attempt fn,
                    void *ud);
int market__attempts(market_conn *c, lock_handle *h, const market__held *hd, market__attempt fn,
                     void *ud);
int market__commit_buf(market_conn *c, market__buf *w, redisReply **exec);
int market__unwatch_later(market_conn *c, int rc);
void market__strategy_guard(const market *m, const market__realm *r, const char *member,
                            char keybuf[MARKET__LOCK_KEY_MAX], struct market__watchset *w,
                            const char **lock_key);
void market__count_result(market *m, int rc);
void market__stall(uint32_t ms);

/* one operation at a time */
int market__single_init(struct market__single *s, const char *realm, const char *player,
                        const market_idem *idem, int64_t deadline_ms);
void market__single_read_begin(struct market__single *s, const market__held *held,
                               const char *a, const char *b, market__buf *r);
int market__single_read(market_conn *c, const market__held *held, struct market__single *s,
                        market__buf *r);
void market__single_record(struct market__single *s, int rc, int64_t a, int64_t b,
                           market__buf *w);
int market__single_refuse(market_conn *c, const market__held *held, struct market__single *s,
                          int rc, int64_t a);

#endif /* GM_MARKET_MARKET_TXN_H */
