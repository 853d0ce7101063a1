/* market_impl.h - what the files of market/ share: the structs and the Redis plumbing.
 * Included only by market/ and its tests. */
#ifndef GM_MARKET_MARKET_IMPL_H
#define GM_MARKET_MARKET_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#include "market/market.h"
#include "market/market_rules.h"

#define MARKET__KEY_MAX (MARKET_ID_MAX + 16)   /* "inventory:" + id */
#define MARKET__MEMBER_MAX (2 * MARKET_ID_MAX + 2) /* "<item>.<seller>" */
#define MARKET__PIPE_MAX 16                     /* commands in one fixed pipeline */
#define MARKET__BATCH_MAX 256                   /* upper bound of cfg.batch_max */
#define MARKET__ITEM_BATCH_MAX (MARKET__HELD_MAX / 2) /* item strategy: 2 locks a purchase */
#define MARKET__LOCK_KEY_MAX (MARKET__MEMBER_MAX + 16)     /* "lock:item:<item>.<seller>" */
#define MARKET__LOCK_HASHED "lock:item:#" /* + SHA-256 hex: a listing lock too long to name */
#define MARKET__FENCED_MAX (MARKET__MEMBER_MAX + 24) /* "<lock key>:fenced" */
#define MARKET__HOLD_MAX_MS 20 /* most the worker keeps the market lock across batches */
#define MARKET__TXN_ABORTED 1 /* an attempt's EXEC was aborted: a watched key changed */

#define MARKET__IDEM_REDIS_MAX (8 + MARKET_ID_MAX + MARKET_IDEM_KEY_MAX) /* idem:<p>:<k> */
#define MARKET__IDEM_RECORD_MAX (MARKET_IDEM_FP_MAX + 48) /* "<fp> <a> <b>" */
#define MARKET__IDEM_TTL "86400"                         /* MARKET_IDEM_TTL_S */
#define MARKET__IDEM_FREE 2 /* market__idem_judge(): no outcome yet; ours to decide */
#define MARKET__IDEM_DONE 3 /* market__idem_judge(): a final outcome is stored */
#define MARKET__IDEM_CLAIM_SLACK_MS 100 /* a claim outlives its attempt's budget by this */
#define MARKET__TOKEN_LEN 32            /* a claim token: 128 random bits in hex */

struct market {
    market_config cfg;
    lock_client *lock; /* borrowed; outlives the market */

    /* Purchases of the lock strategies queue here and one worker thread
     * serves them in batches (market_batch.c). */
    pthread_mutex_t qmu;                 /* guards the queue and the threads' state */
    pthread_cond_t qcv;                  /* signalled when a purchase is queued or at stop */
    market_pending *qhead, *qtail;       /* purchases waiting, oldest first */
    pthread_t worker;
    int worker_started, worker_stop;
    /* Item strategy: a batch's locks are released by a releaser thread, so
     * the worker goes on to its next batch at once. */
    pthread_cond_t rcv;                  /* signalled when a release is queued or at stop */
    struct market__release *rhead, *rtail;
    pthread_t releaser;
    int releaser_started, releaser_stop;
    /* The market lock, kept from one batch to the next while purchases keep
     * coming (the market strategy's one worker's alone). */
    lock_handle hold;
    int holding;
    int64_t hold_since_ms;
    /* The lock's keys live in the store (the redis lock backend on the same
     * server): every read under WATCH also reads them, and a commit needs
     * each to still hold our token, whoever else speaks the lock protocol. */
    int lock_in_store;

    struct {
        _Atomic uint64_t purchases, purchased, batches, txn_aborts, lock_busy, lease_lost,
            store_errors, lock_acquired, lock_waits, lock_wait_us;
        _Atomic uint64_t lock_wait_bucket[MARKET_WAIT_BUCKETS];
    } stats;
};

struct market_conn {
    market *m;
    redisContext *ctx; /* NULL while disconnected; reconnected on next use */
    int unwatch;       /* a WATCH is pending: send UNWATCH before the next pipeline */
    int unwatch_sent;  /* market__pipeline_send() sent one: its reply comes first */
    int closed;        /* the last pipeline failed because the server had closed c */
};

/* One command of a pipeline: argv/len as redisAppendCommandArgv takes them. */
typedef struct market__cmd {
    int argc;
    const char *argv[10];
    size_t len[10];
} market__cmd;

/* The leases a guarded transaction holds, and their fencing records: the
 * commit refuses to run when "<lock key>:fenced" holds a fence newer than
 * ours (a newer holder has committed), and stores ours, in the same
 * MULTI/EXEC as the transfer. */
#define MARKET__HELD_MAX LOCK_MULTI_MAX /* leases one transaction may hold */
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

int market__held_lost(const market__held *held, const redisReply *mget);
size_t market__held_read(const market__held *held, const char **argv);

int market__guarded(market_conn *c, const char *lock_key, int64_t deadline_ms, market__attempt fn,
                    void *ud);
int market__lock(market *m, const char *key, int64_t by, lock_handle *h);
int market__lock_multi(market *m, const char *const *keys, size_t n, int64_t by, lock_handle *h);
void market__held_set(market__held *hd, size_t k, const char *key, const lock_handle *h);
void market__held_name(market__held *hd, size_t k, const char *key);
int market__attempts(market_conn *c, lock_handle *h, const market__held *hd, market__attempt fn,
                     void *ud);
void market__count_result(market *m, int rc);
int market__refuse(market_conn *c, int rc);
void market__stall(uint32_t ms);
int market__batch_init(market *m);
void market__batch_free(market *m);
int market__purchase_batched(market *m, const char *buyer, const char *seller, const char *item,
                             int64_t expect_price, const market_idem *idem,
                             market_purchase_result *res);

/* market_keys.c: lock key names, idempotency records and claims (pure). */
int market__lock_key(char *out, const char *prefix, const char *id);
void market__idem_key(char *out, size_t outlen, const char *player, const market_idem *idem);
int market__idem_final(int rc);
void market__idem_record(char *out, size_t outlen, const market_idem *idem, int rc, int64_t a,
                         int64_t b);
void market__idem_claim(char *out, size_t outlen, const market_idem *idem, const char *token);
void market__idem_claim_ttl(char *out, size_t outlen, int64_t deadline_ms);
int market__idem_judge(const redisReply *r, const market_idem *idem, const char *token, int *rc,
                       int64_t *a, int64_t *b);
int market__token_new(char out[MARKET__TOKEN_LEN + 1]);
#define MARKET__COUNT(m, field) atomic_fetch_add_explicit(&(m)->stats.field, 1, memory_order_relaxed)

int market__connect(market_conn *c);
void market__drop(market_conn *c);
int market__pipeline(market_conn *c, const market__cmd *cmds, size_t n, redisReply **replies);
int market__pipeline_argv(market_conn *c, size_t n, const int *argc, const char **const *argv,
                          redisReply **replies);
int market__pipeline_send(market_conn *c, size_t n, const int *argc, const char **const *argv);
int market__pipeline_recv(market_conn *c, size_t n, redisReply **replies);
void market__replies_free(redisReply **replies, size_t n);
redisReply *market__command(market_conn *c, int argc, const char **argv, const size_t *len);
void market__cmd_set(market__cmd *cmd, int argc, ...);
int market__parse_i64(const char *s, size_t len, int64_t *out);
int market__parse_price(const char *s, size_t len, int64_t *out);
int64_t market__reply_price(const redisReply *r);
market__party market__reply_party(const redisReply *r);
void market__key(char *out, size_t outlen, const char *prefix, const char *id);

#endif /* GM_MARKET_MARKET_IMPL_H */
