/* market_combine.h - the combiner (market_combine.c): every kind of order
 * queues on one of cfg.workers lanes, and each lane's worker serves its
 * orders in batches of one kind, realm and group under one lock hold. An
 * order kind is an ops table (struct market__kind), as a lock backend is a
 * struct lock_ops: how its batch names its locks, reads, decides, commits
 * and answers. The combiner writes once what every kind shares: the queue,
 * the workers, the lock policy (one lock kept across batches, or every
 * order's locks per batch), answers handed over once the next batch is on
 * its way, wait budgets, stop while queued, resting realms on a Redis
 * Cluster (market_lane.c), replays confirmed on the replicas, and the
 * synchronous wait. It calls the transaction layer, nothing above. */
#ifndef GM_MARKET_MARKET_COMBINE_H
#define GM_MARKET_MARKET_COMBINE_H

#include <pthread.h>

#include "market/market_txn.h"

/* How a kind's batches hold their locks. */
enum {
    MARKET__POLICY_HOLD, /* one lock (cb->lock_keys[0]), kept from one batch to the next */
    MARKET__POLICY_EACH, /* every lock its orders name, all or none, released after the batch */
    MARKET__POLICY_NONE, /* no lock: the read's WATCH alone guards the commit (optimistic) */
};

/* A batch as the combiner sees it: orders of one kind, realm and group,
 * oldest first, and what every kind shares. */
typedef struct market__cbatch {
    const struct market__kind *kind;
    void *ks; /* the kind's state on this lane (kind->state_size bytes), kept across batches */
    market_queued *req[MARKET__BATCH_MAX];
    size_t n;      /* orders taken */
    size_t n_open; /* req[0..n_open) wait for the batch's outcome; kind->prepare may
                      answer the others early, after moving them behind */
    const char *realm, *group;
    int policy;
    char token[MARKET__TOKEN_LEN + 1]; /* the batch's idempotency claims (market__cbatch_token) */
    int token_set;                     /* token holds one: drawn, or kept by a rest */
    /* its locks, named by kind->prepare (market__cbatch_lock) */
    char lock_key[MARKET__HELD_MAX][MARKET__LOCK_KEY_MAX];
    const char *lock_keys[MARKET__HELD_MAX];
    size_t n_locks;
    lock_handle lock_h[MARKET__HELD_MAX]; /* MARKET__POLICY_EACH: the leases taken */
    int64_t now_ms; /* our clock when the attempt began: an order past its budget then is
                       answered busy, not decided */
    int lock_wanted; /* its read saw another process wait for a lock it holds (":wanted") */
} market__cbatch;

/* The head of every kind's state on a lane (cb->ks): the read's and the
 * commit's buffers, kept from one batch to the next so that their memory
 * is reused. The state is zeroed when the lane's first batch of the kind
 * comes, and freed with the lane. */
typedef struct market__kstate {
    market__buf rb, wb;
} market__kstate;

/* An order kind. Every op is called on the lane's worker thread; cb->ks is
 * the kind's state. An attempt is read, decide, commit: read under WATCH,
 * decide in queue order over what was read as if the orders ran one at a
 * time (setting each open order's outcome), and commit what was decided in
 * one MULTI/EXEC guarded by the leases. */
struct market__kind {
    const char *name;
    unsigned slot; /* this kind's index in a worker's states: < MARKET__KINDS_MAX */
    int (*policy)(const market *m); /* optional: when absent, the lock strategy's:
                                       HOLD (market), EACH (item), NONE (optimistic) */
    /* Optional: the most orders one batch of this kind takes under policy
     * (cfg.batch_max, or half the locks a transaction holds under
     * MARKET__POLICY_EACH, when absent). */
    size_t (*most)(const market *m, int policy);
    size_t state_size; /* its state on a lane: a struct that begins with a market__kstate */
    /* Names what the batch reads, writes and locks (market__cbatch_lock). May
     * answer orders early (see n_open). Returns MARKET_OK or the error every
     * open order is given. A kind whose locks follow from a read (made here)
     * may have read return MARKET__CHOOSE_AGAIN when what it read under them
     * no longer fits: the locks are released and prepare is called again,
     * within the batch's wait budget (spent: MARKET_ERR_CONFLICT). Under
     * MARKET__POLICY_HOLD, a batch that names no lock holds the realm's
     * market lock. */
    int (*prepare)(market_conn *c, market__cbatch *cb);
    /* MARKET__POLICY_EACH, optional: sends the read before the locks are
     * asked for (held names them, without tokens); read_recv then takes its
     * replies in (locked) or drops them. */
    void (*read_send)(market_conn *c, const market__held *held, market__cbatch *cb);
    void (*read_recv)(market_conn *c, market__cbatch *cb, int locked);
    int (*read)(market_conn *c, const market__held *held, market__cbatch *cb);
    size_t (*decide)(market__cbatch *cb); /* pure; returns how many orders it commits */
    int (*commit)(market_conn *c, const market__held *held, market__cbatch *cb);
};

int market__policy_realm_or_none(const market *m);

/* What a combiner does with any order it queued, whatever its kind. */
typedef struct market__order_ops {
    void (*reset)(market_queued *q);             /* clears its result: queued again */
    void (*answer)(market *m, market_queued *q); /* hands q its outcome; q is gone after */
} market__order_ops;

#define MARKET__KINDS_MAX 8

typedef struct market__combiner market__combiner;

/* A caller waiting for one order (market__combine_wait). */
typedef struct market__waiter {
    market__combiner *q;
    pthread_cond_t cv;
    int ready; /* cv is made */
    int done;
} market__waiter;

market__combiner *market__combine_new(market *m, const market__order_ops *ops);
void market__combine_stop(market__combiner *q);
void market__combine_free(market__combiner *q);
int market__combine_submit(market__combiner *q, market_queued *o);
int market__waiter_init(market__waiter *w, market__combiner *q);
int market__combine_wait(market__waiter *w, market_queued *o, int rc);
void market__combine_wake(market__waiter *w);

/* for the kinds */
int market__cbatch_token(market__cbatch *cb);
void market__cbatch_lock(market__cbatch *cb, const char *kind, const char *id);
void market__cbatch_lock_key(market__cbatch *cb, const char *key);

#endif /* GM_MARKET_MARKET_COMBINE_H */
