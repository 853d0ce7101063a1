/* market_impl.h - the market object that every file of market/ reads: its
 * configuration, its lock client, its counters, and the sizes of names.
 * Included only by market/ and its tests; the layers' own headers
 * (market_store.h, market_txn.h, market_combine.h) build on it. */
#ifndef GM_MARKET_MARKET_IMPL_H
#define GM_MARKET_MARKET_IMPL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "market/market.h"

#define MARKET__TAG_MAX (MARKET_REALM_MAX + 3)         /* "{<realm>}" */
#define MARKET__KEY_MAX (MARKET_ID_MAX + MARKET__TAG_MAX + 16) /* "inventory:{<realm>}:<id>" */
#define MARKET__MEMBER_MAX (2 * MARKET_ID_MAX + 2)     /* "<item>.<seller>" */
#define MARKET__BATCH_MAX 256                          /* upper bound of cfg.batch_max */
#define MARKET__HELD_MAX LOCK_MULTI_MAX                /* leases one transaction may hold */
#define MARKET__ITEM_BATCH_MAX (MARKET__HELD_MAX / 2)  /* item strategy: 2 locks a purchase */
#define MARKET__LOCK_KEY_MAX (MARKET__MEMBER_MAX + MARKET__TAG_MAX + 16) /* lock:item:{r}:<m> */
#define MARKET__FENCED_MAX (MARKET__LOCK_KEY_MAX + 8) /* "<lock key>:fenced" */
#define MARKET__HOLD_MAX_MS 20 /* most the worker keeps the market lock across batches */
#define MARKET__HOLD_IDLE_MS 2 /* and across an empty queue, waiting for the next order */
#define MARKET__TXN_ABORTED 1  /* an attempt's EXEC was aborted: a watched key changed */
#define MARKET__UNRECORDED 2   /* a commit applied all but its trade script (NOSCRIPT) */
#define MARKET__CHOOSE_AGAIN (-101) /* a batch's locks no longer cover what it must read:
                                      * its kind names them again (market_combine.h) */
#define MARKET__REDIRECTED (-100) /* cluster: a pipeline that relied on an earlier WATCH met a
                                   * slot on the move (nothing applied): read again; or a
                                   * lane's batch met a split slot or a failing lock store:
                                   * set it aside (market_lane.c) */
#define MARKET__NOTED_MAX 64      /* realms a market remembers having noted as ending */
#define MARKET__NODES_MAX 16   /* cluster: masters a market_conn keeps a connection to */
#define MARKET__MASTERS_MAX 64 /* cluster: masters health and INFO reach (a slot map's most) */

#define MARKET__IDEM_REDIS_MAX (8 + MARKET__TAG_MAX + MARKET_ID_MAX + MARKET_IDEM_KEY_MAX)
                                                               /* idem:{<r>}:<p>:<k> */
#define MARKET__IDEM_RECORD_MAX (MARKET_IDEM_FP_MAX + 120) /* "<fp> <a> <b> <c> <trade id>" */
#define MARKET__IDEM_TTL "86400"                                         /* MARKET_IDEM_TTL_S */
#define MARKET__IDEM_CLAIM_SLACK_MS 100 /* a claim outlives its attempt's budget by this */
#define MARKET__TOKEN_LEN 32            /* a claim token: 128 random bits in hex */

struct market__combiner; /* lanes of orders and their workers: market_combine.c's alone */
struct market__sweeper;  /* the thread that settles endings: market_sweep.c's alone */

struct market {
    market_config cfg;
    lock_client *lock; /* borrowed; outlives the market */
    /* The lock's keys live in the store (the redis lock backend on the same
     * server): every read under WATCH also reads them, and a commit needs
     * each to still hold our token, whoever else speaks the lock protocol. */
    int lock_in_store;
    struct market__combiner *queue; /* owned: lanes of all but sale buys (market_order.c) */
    struct market__combiner *sales; /* owned: flash-sale buys' lanes (market_order.c) */
    struct market__sweeper *sweeper; /* owned; NULL until market_sweeper_start() */
    /* the realms market_ending_note() wrote to the realms whose listings may end (the last
     * MARKET__NOTED_MAX), each written again by the sweeper every round (market_sweep.c) */
    pthread_mutex_t noted_mu;
    char noted[MARKET__NOTED_MAX][MARKET_REALM_MAX + 1];
    size_t n_noted, noted_next;
    rconn_sentinel *sentinel;     /* owned; NULL unless cfg.redis is a Sentinel group */
    rconn_cluster *cluster;       /* owned; NULL unless cfg.redis is a Redis Cluster */

    struct {
        _Atomic uint64_t purchases, purchased, batches, txn_aborts, lock_busy, lease_lost,
            store_errors, lock_acquired, lock_waits, lock_wait_us, not_replicated, cluster_tryagain,
            cluster_down, sale_buys, sale_bought, sale_units, sale_batches, expired, sweeps,
            settled, late_ms, auctions_ended;
        _Atomic uint64_t late_bucket[MARKET_LATE_BUCKETS];
        _Atomic uint64_t lock_wait_bucket[MARKET_WAIT_BUCKETS];
    } stats;
};

void market__sweeper_stop(market *m);

#define MARKET__COUNT(m, field)                                                                    \
    atomic_fetch_add_explicit(&(m)->stats.field, 1, memory_order_relaxed)

/* ---- text without printf: the names and numbers every purchase makes ---- */

/* Writes v in decimal into out (24 bytes hold any int64_t) and returns its
 * length. Can't fail. */
static inline size_t market__i64_str(char out[24], int64_t v) {
    char tmp[20];
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    size_t n = 0, k = 0;
    do tmp[n++] = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    if (v < 0) out[k++] = '-';
    while (n) out[k++] = tmp[--n];
    out[k] = '\0';
    return k;
}

/* Writes the strings after outlen, up to a NULL, one after another into
 * out (outlen > 0 bytes), cut to fit and NUL-terminated: snprintf(out,
 * outlen, "%s%s...") at a fraction of its cost. Can't fail. */
static inline void market__join(char *out, size_t outlen, ...) {
    va_list ap;
    size_t at = 0;
    va_start(ap, outlen);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;) {
        size_t l = strlen(s);
        if (l > outlen - 1 - at) l = outlen - 1 - at;
        memcpy(out + at, s, l);
        at += l;
    }
    va_end(ap);
    out[at] = '\0';
}

#endif /* GM_MARKET_MARKET_IMPL_H */
