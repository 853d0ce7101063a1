/* market_combine.c - the combiner: orders that arrive together share one lock hold.
 *
 * DESIGN
 * Orders do not each take the Redis lock: they join an in-process queue
 * (market__combine_submit(), or market__combine_wait() which submits and
 * waits), one of cfg.workers lanes chosen by their realm and group (a sale,
 * or "" for a realm's market), and each lane's worker thread serves its
 * queue in batches of one kind, realm and group (flat combining), so that a
 * batch touches one hash slot and realms on different lanes proceed in
 * parallel. For each batch the worker
 *   1. lets the kind name what the batch reads, writes and locks
 *      (kind->prepare);
 *   2. takes the locks by the kind's policy: MARKET__POLICY_HOLD takes one
 *      lock and keeps it from one batch to the next while orders of its
 *      group keep coming (up to MARKET__HOLD_MAX_MS, never past half the
 *      lease), so a busy market pays for one acquire and one release per
 *      hold, not per batch; an idle one keeps it MARKET__HOLD_IDLE_MS more
 *      for the next order (at low load the next order of a client comes
 *      within a round trip or two), then releases it, at once when its
 *      last read saw another process wait for it (the lock's ":wanted");
 *      MARKET__POLICY_EACH takes every lock the batch names in one
 *      all-or-nothing round trip (no deadlock, no partial hold), with the
 *      kind's read already sent (answered while the locks are taken), and
 *      hands them to a releaser thread after the commit, so that the next
 *      batch does not wait for the release's round trip; MARKET__POLICY_NONE
 *      takes no lock at all, and an attempt whose EXEC a watched key
 *      aborted reads again after a random pause (the optimistic strategy);
 *   3. runs attempts (market__attempts: read again when a watched key
 *      changed) of read, decide, commit - the kind's three ops;
 *   4. takes the next batch, and hands every order its outcome once that
 *      batch's read is sent, while Redis works on it: the next batch loses
 *      nothing by it, since none of these callers can ask again before it is
 *      answered (answered at once when no batch follows, or before a lock is
 *      taken or waited for). Stored outcomes a batch replays are first
 *      confirmed on enough replicas (market__replicated);
 *   5. with cfg.min_replicas_ack, leaves the WAIT behind a commit to the
 *      lane's acker thread, which reads it (market__wait_recv) and answers
 *      the batch the moment it returns (in step 4's place), while the worker
 *      serves the next batch on a second connection: the replicas confirm
 *      one batch while the next is read, decided and committed. A WAIT holds
 *      up its own connection only, and counts that connection's writes: so
 *      one batch in flight a connection, two connections a lane, and a
 *      batch's commit waits for the WAIT of the batch before it only when
 *      that is still out.
 * An order still queued when its wait budget ends is answered
 * MARKET_ERR_BUSY (by the worker when it reaches it, or by a waiting caller
 * at once); one already taken into a batch waits for it. Outcomes and
 * invariants are those of serial execution in queue order.
 * On a Redis Cluster, a batch whose realm's slot is split by a migration, or
 * whose lock store keeps failing, is not waited for in place: it goes back
 * to the head of the queue and its group rests while the lane serves the
 * others (market_lane.c).
 */
#include "market/market_combine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "market/market_lane.h"
#include "market/market_trade.h"

enum {
    REQ_WAITING, /* queued */
    REQ_TAKEN,   /* taken by the worker: it will be answered, whatever its budget */
};

/* One lane: a queue of orders and the worker thread that serves it. Every
 * order of a realm and group goes to the same lane (lane_of), so they are
 * served in the order they came. */
struct market__lane {
    market__combiner *q;
    pthread_cond_t cv;            /* signalled when an order is queued here, or at stop */
    market_queued *qhead, *qtail; /* orders waiting, oldest first */
    pthread_t worker;
    int started;
    /* MARKET__POLICY_HOLD: the lock of the group last served, kept from one
     * batch to the next while its orders keep coming (the worker's alone). */
    lock_handle hold;
    int holding;
    int64_t hold_since_ms;
    int64_t idle_since_ms; /* when the queue last ran empty under the hold; 0: not idle */
    int hold_wanted;       /* the last batch's read saw another process wait for the lock */
    /* The last batch's orders, decided, handed their outcomes once the next
     * batch's read is on its way to Redis (answer_now). */
    market_queued *answer[MARKET__BATCH_MAX];
    size_t n_answer;
    market__rest rest; /* groups set aside (the worker's alone) */
};

/* A batch's locks, waiting for the releaser thread. */
struct market__release {
    lock_handle h[MARKET__HELD_MAX];
    size_t n;
    struct market__release *next;
};

struct market__combiner {
    market *m;
    const market__order_ops *ops;
    pthread_mutex_t qmu; /* guards every lane's queue and the threads' state */
    int stop;
    size_t nlanes; /* 1..MARKET_WORKERS_MAX */
    struct market__lane lane[MARKET_WORKERS_MAX];
    /* MARKET__POLICY_EACH: a batch's locks are released by the releaser
     * thread, so the worker goes on to its next batch at once. */
    pthread_cond_t rcv; /* signalled when a release is queued or at stop */
    struct market__release *rhead, *rtail;
    pthread_t releaser;
    int releaser_started, releaser_stop;
};

/* ---- for the kinds ---- */

/* Draws the batch's claim token unless it holds one (a getrandom() call:
 * only when a kind needs it). Returns MARKET_OK, or MARKET_ERR_STORE. */
int market__cbatch_token(market__cbatch *cb) {
    if (cb->token_set) return MARKET_OK;
    if (market__token_new(cb->token) < 0) return MARKET_ERR_STORE;
    cb->token_set = 1;
    return MARKET_OK;
}

/* Adds the lock "lock:<kind>:{<realm>}:<id>" to the batch's locks unless it
 * is there. The caller keeps within MARKET__HELD_MAX. This function can't
 * fail. */
void market__cbatch_lock(market__cbatch *cb, const char *kind, const char *id) {
    char key[MARKET__LOCK_KEY_MAX];
    market__lock_key(key, kind, cb->realm, id);
    market__cbatch_lock_key(cb, key);
}

/* Adds lock key (MARKET__LOCK_KEY_MAX bytes at the most) to the batch's
 * locks unless it is there. This function can't fail. */
void market__cbatch_lock_key(market__cbatch *cb, const char *key) {
    for (size_t i = 0; i < cb->n_locks; i++)
        if (strcmp(cb->lock_key[i], key) == 0) return;
    snprintf(cb->lock_key[cb->n_locks], sizeof cb->lock_key[cb->n_locks], "%s", key);
    cb->lock_keys[cb->n_locks] = cb->lock_key[cb->n_locks];
    cb->n_locks++;
}

/* A kind's policy (market__kind.policy) for orders that no per-item lock
 * serialises: the realm's market lock under the market strategy, kept from
 * one batch to the next as the purchases' batches keep it, and none under
 * the others, where the WATCH of what they change guards them alone. */
int market__policy_realm_or_none(const market *m) {
    return m->cfg.strategy == MARKET_STRATEGY_MARKET ? MARKET__POLICY_HOLD : MARKET__POLICY_NONE;
}

/* Kind k's lock policy on m: its own, or else the market's lock strategy's,
 * for the kinds whose orders lock as a realm's purchases do: the realm's
 * market lock (market), each listing's and buyer's locks (item), none
 * (optimistic). */
static int kind_policy(const struct market__kind *k, const market *m) {
    if (k->policy) return k->policy(m);
    switch (m->cfg.strategy) {
    case MARKET_STRATEGY_ITEM: return MARKET__POLICY_EACH;
    case MARKET_STRATEGY_OPTIMISTIC: return MARKET__POLICY_NONE;
    default: return MARKET__POLICY_HOLD;
    }
}

/* ---- the locks ---- */

/* How long one worker keeps a lock across batches while orders keep
 * coming: amortises acquire and release, bounded so that other processes
 * sharing the lock get their turn. */
static int64_t hold_max_ms(const market *m) {
    if (m->cfg.test_hold_ms) return m->cfg.test_hold_ms;
    int64_t quarter = m->cfg.lock_ttl_ms / 4;
    return quarter < MARKET__HOLD_MAX_MS ? quarter : MARKET__HOLD_MAX_MS;
}

/* While ln's queue is empty under a kept lock: until when its worker keeps the lock for
 * the next order (MARKET__HOLD_IDLE_MS after the queue ran empty, and within the hold's
 * bounds), or 0 when it is time to release it: at once when the last batch's read saw
 * another process wait for the lock (market__held_wanted). At low load this saves the next
 * order an acquire and a release, two of a batch's four round trips. */
static int64_t idle_until(struct market__lane *ln, int64_t now) {
    if (ln->hold_wanted) return 0; /* another process waits: its turn now */
    if (!ln->idle_since_ms) ln->idle_since_ms = now;
    const market *m = ln->q->m;
    int64_t until = ln->idle_since_ms + (m->cfg.test_hold_ms ? m->cfg.test_hold_ms
                                                              : MARKET__HOLD_IDLE_MS);
    int64_t bound = ln->hold_since_ms + hold_max_ms(m);
    if (until > bound) until = bound;
    return now < until ? until : 0;
}

static void hold_drop(struct market__lane *ln) {
    if (!ln->holding) return;
    /* a lease we cannot release (the store failing over) expires, or our next acquire of the
     * key takes it over: the lock knows its own tokens (lock.h) */
    (void)lock_release(ln->q->m->lock, &ln->hold);
    ln->holding = 0;
}

/* Releases h[0..n) soon: hands them to the releaser thread, or releases them
 * here when it cannot (no memory, no thread). A lease that is not released
 * expires. This function can't fail. */
static void release_later(market__combiner *q, const lock_handle *h, size_t n) {
    struct market__release *r = malloc(sizeof *r);
    if (r) {
        memcpy(r->h, h, n * sizeof *h);
        r->n = n;
        r->next = NULL;
        pthread_mutex_lock(&q->qmu);
        int queued = q->releaser_started && !q->releaser_stop;
        if (queued) {
            if (q->rtail)
                q->rtail->next = r;
            else
                q->rhead = r;
            q->rtail = r;
            pthread_cond_signal(&q->rcv);
        }
        pthread_mutex_unlock(&q->qmu);
        if (queued) return;
        free(r);
    }
    (void)lock_release_multi(q->m->lock, h, n);
}

/* The releaser: releases queued batches' locks, oldest first; at stop it
 * releases what is queued first. */
static void *releaser_main(void *arg) {
    market__combiner *q = arg;
    (void)prctl(PR_SET_NAME, "market-release", 0, 0, 0); /* for top -H and perf; cosmetic */
    pthread_mutex_lock(&q->qmu);
    for (;;) {
        struct market__release *r = q->rhead;
        if (!r) {
            if (q->releaser_stop) break;
            pthread_cond_wait(&q->rcv, &q->qmu);
            continue;
        }
        q->rhead = r->next;
        if (!q->rhead) q->rtail = NULL;
        pthread_mutex_unlock(&q->qmu);
        (void)lock_release_multi(q->m->lock, r->h, r->n);
        free(r);
        pthread_mutex_lock(&q->qmu);
    }
    pthread_mutex_unlock(&q->qmu);
    return NULL;
}

/* ---- one batch ---- */

/* The lock wait of a batch ends with the latest budget among its orders:
 * the others are answered MARKET_ERR_BUSY when their turn to be decided
 * comes after their own. */
static int64_t batch_deadline(const market__cbatch *cb) {
    int64_t by = 0;
    for (size_t i = 0; i < cb->n_open; i++)
        if (cb->req[i]->deadline_ms > by) by = cb->req[i]->deadline_ms;
    return by;
}

/* Gives every open order of cb the batch's failure rc, counted per order
 * like the 503s it causes. */
static void batch_fail(market *m, market__cbatch *cb, int rc) {
    for (size_t i = 0; i < cb->n_open; i++) {
        *cb->req[i]->rc = rc;
        market__count_result(m, rc);
    }
}

/* MARKET__POLICY_EACH: whether a lease of the batch has run out by our
 * clock (valid_until_ms errs early). Its read did not watch the lock keys
 * (it went out before they were taken), so a lapse is caught here, right
 * before the commit; another holder's commit meanwhile is caught by the
 * fencing records and data keys the read did watch. */
static int lease_lapsed(const market__cbatch *cb) {
    int64_t now = rconn_now_ms();
    for (size_t k = 0; k < cb->n_locks; k++)
        if (now >= cb->lock_h[k].valid_until_ms) return 1;
    return 0;
}

/* One attempt: the kind's read, decision and commit. */
static int batch_attempt(market_conn *c, const market__held *held, void *ud) {
    market__cbatch *cb = ud;
    const struct market__kind *k = cb->kind;
    cb->now_ms = rconn_now_ms();
    int rc = k->read(c, held, cb); /* with the realm's seeding mark (market__frame_watched) */
    if (rc < 0) return market__unwatch_later(c, rc);
    if (k->decide(cb) == 0) return market__unwatch_later(c, MARKET_OK);
    if (c->m->cfg.test_stall_ms) market__stall(c->m->cfg.test_stall_ms);
    if (c->m->cfg.test_decided) c->m->cfg.test_decided(c->m->cfg.test_decided_arg);
    if (cb->policy == MARKET__POLICY_EACH && lease_lapsed(cb))
        return market__unwatch_later(c, MARKET_ERR_LEASE_LOST);
    return k->commit(c, held, cb);
}

/* Hands the last batch's orders their outcomes (see DESIGN, step 4). */
static void answer_now(struct market__lane *ln) {
    for (size_t i = 0; i < ln->n_answer; i++) ln->q->ops->answer(ln->q->m, ln->answer[i]);
    ln->n_answer = 0;
}

/* market_conn's sent hook: the next batch's read is on its way. */
static void answer_sent(void *ud) { answer_now(ud); }

/* Gives the first n_acked of orders[0..n) the verdict of the WAIT deferred behind their
 * commit on c (reading it, which may wait): when it did not confirm the commit, they are
 * answered MARKET_ERR_NOT_REPLICATED (what a retry with its idempotency key finds), as when
 * the WAIT is read with the commit. */
static void ack_judge(market_conn *c, market_queued *const *orders, size_t n_acked) {
    char why[MARKET_WHY_MAX];
    int rc = market__wait_recv(c, why, sizeof why);
    for (size_t i = 0; rc < 0 && i < n_acked; i++) {
        *orders[i]->rc = rc;
        snprintf(orders[i]->why, MARKET_WHY_MAX, "%s", why);
    }
}

/* ---- the acker (see DESIGN, step 5) ---- */

/* A lane's acker: the thread that reads a commit's deferred WAIT and answers its batch,
 * while the worker serves the next batch on its other connection. One job at a time. */
struct acker {
    market__combiner *q;
    pthread_t t;
    int ready, started, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    market_conn *c; /* the job's connection; NULL: no job */
    market_queued *orders[MARKET__BATCH_MAX];
    size_t n, n_acked; /* the job's orders; the first n_acked decided by its commit */
};

static void *acker_main(void *arg) {
    struct acker *a = arg;
    (void)prctl(PR_SET_NAME, "market-acker", 0, 0, 0);
    pthread_mutex_lock(&a->mu);
    for (;;) {
        if (!a->c && a->stop) break;
        if (!a->c) {
            pthread_cond_wait(&a->cv, &a->mu);
            continue;
        }
        pthread_mutex_unlock(&a->mu);
        ack_judge(a->c, a->orders, a->n_acked);
        for (size_t i = 0; i < a->n; i++) a->q->ops->answer(a->q->m, a->orders[i]);
        pthread_mutex_lock(&a->mu);
        a->c = NULL;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* Waits until a has no job: its connection is free again. */
static void ack_idle(struct acker *a) {
    if (!a->ready) return;
    pthread_mutex_lock(&a->mu);
    while (a->c) pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
}

/* Hands a the job of orders[0..n), committed on c with their WAIT deferred (the first
 * n_acked decided by the commit), once its last job is done. Returns 0, or -1 when a has no
 * thread (then the caller judges and answers them). */
static int ack_hand(struct acker *a, market_conn *c, market_queued *const *orders, size_t n,
                    size_t n_acked) {
    if (!a->ready) return -1;
    ack_idle(a);
    if (!a->started && pthread_create(&a->t, NULL, acker_main, a) != 0) return -1;
    a->started = 1;
    pthread_mutex_lock(&a->mu);
    memcpy(a->orders, orders, n * sizeof *orders);
    a->n = n;
    a->n_acked = n_acked;
    a->c = c;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return 0;
}

/* Ends a: its job done, its thread joined. */
static void acker_end(struct acker *a) {
    if (!a->ready) return;
    ack_idle(a);
    pthread_mutex_lock(&a->mu);
    a->stop = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    if (a->started) pthread_join(a->t, NULL);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
}

/* MARKET__POLICY_EACH: every lock the batch names, taken all or none in one
 * round trip, one read, one commit, released all at once. Another process's
 * order waits only if it shares a lock with this batch. The read goes out
 * before the locks are asked for, and is answered while they are taken: its
 * WATCH covers everything it reads, so a change made before the locks were
 * ours aborts the commit, and it is read again. (Not with the stall hook,
 * which sleeps before the read.) */
static int run_each(market_conn *c, struct market__lane *ln, market__cbatch *cb) {
    market *m = c->m;
    const struct market__kind *k = cb->kind;
    answer_now(ln); /* the locks are taken first, which may wait */
    market__held hd;
    hd.n = 0;
    hd.tokens = 0;
    for (size_t i = 0; i < cb->n_locks; i++)
        market__held_name(&hd, i, cb->lock_keys[i]);
    int early = k->read_send && !m->cfg.test_stall_read_ms;
    if (early) k->read_send(c, &hd, cb);
    int rc = market__lane_lock(c, cb->lock_keys, cb->n_locks, batch_deadline(cb), cb->lock_h);
    if (early) k->read_recv(c, cb, rc == MARKET_OK);
    if (rc != MARKET_OK) return rc;
    if (m->cfg.test_stall_read_ms) market__stall(m->cfg.test_stall_read_ms);
    hd.tokens = !early && m->lock_in_store; /* read after the locks: it can check them */
    for (size_t i = 0; i < cb->n_locks; i++)
        market__held_set(&hd, i, cb->lock_keys[i], &cb->lock_h[i]);
    rc = market__attempts(c, cb->lock_h, &hd, batch_attempt, cb);
    release_later(ln->q, cb->lock_h, cb->n_locks);
    return rc;
}

/* MARKET__POLICY_HOLD: the batch's one lock, kept from the last batch when
 * it is the same and still young (see DESIGN, step 2). */
static int run_hold(market_conn *c, struct market__lane *ln, market__cbatch *cb) {
    market *m = c->m;
    const char *key = cb->lock_keys[0];
    int64_t now = rconn_now_ms();
    int keep = ln->holding && strcmp(ln->hold.key, key) == 0 &&
               now - ln->hold_since_ms < hold_max_ms(m) &&
               ln->hold.valid_until_ms - now >= (int64_t)m->cfg.lock_ttl_ms / 2;
    if (!keep) answer_now(ln); /* releasing and taking the lock may wait */
    if (ln->holding && !keep) hold_drop(ln);
    int rc = MARKET_OK;
    if (!ln->holding) {
        rc = market__lane_lock(c, &key, 1, batch_deadline(cb), &ln->hold);
        if (rc != MARKET_OK) return rc;
        ln->holding = 1;
        ln->hold_since_ms = now;
        if (m->cfg.test_stall_read_ms) market__stall(m->cfg.test_stall_read_ms);
    }
    market__held hd = {0};
    hd.tokens = m->lock_in_store;
    market__held_set(&hd, 0, key, &ln->hold);
    cb->lock_wanted = 0;
    rc = market__attempts(c, &ln->hold, &hd, batch_attempt, cb);
    ln->hold_wanted = cb->lock_wanted;
    if (rc < 0) hold_drop(ln); /* whatever went wrong, start the next batch afresh */
    return rc;
}

/* Serves batch cb of lane ln (see DESIGN). Returns MARKET_OK (every open
 * order decided), MARKET__REDIRECTED (to be set aside: nothing applied,
 * nobody answered), or the error every open order was given. */
static int batch_run(market_conn *c, struct market__lane *ln, market__cbatch *cb) {
    market *m = c->m;
    if (m->cfg.test_stall_lock_ms) market__stall(m->cfg.test_stall_lock_ms);
    int rc, again = 0;
    do {
        cb->n_locks = 0;
        rc = cb->kind->prepare(c, cb);
        if (rc == MARKET_OK && cb->n_open == 0) return MARKET_OK; /* every one answered early */
        if (rc == MARKET_OK && cb->policy == MARKET__POLICY_HOLD && cb->n_locks == 0) {
            char key[MARKET__KEY_MAX];
            market__key_market_lock(key, cb->realm);
            market__cbatch_lock_key(cb, key);
        }
        /* a batch that names no lock (under EACH: its orders name nothing there is to lock,
         * e.g. trades that are not) runs on its WATCH alone */
        if (rc == MARKET_OK && (cb->policy == MARKET__POLICY_NONE || cb->n_locks == 0)) {
            answer_now(ln); /* an abort's backoff may wait */
            market__held none = {0};
            rc = market__attempts(c, NULL, &none, batch_attempt, cb);
        } else if (rc == MARKET_OK) {
            rc = cb->policy == MARKET__POLICY_EACH ? run_each(c, ln, cb) : run_hold(c, ln, cb);
        }
        again |= rc == MARKET__CHOOSE_AGAIN;
        if (rc == MARKET__CHOOSE_AGAIN && rconn_now_ms() >= batch_deadline(cb))
            rc = MARKET_ERR_CONFLICT; /* what it locks keeps going */
    } while (rc == MARKET__CHOOSE_AGAIN);
    if (again && rc == MARKET_ERR_BUSY) rc = MARKET_ERR_CONFLICT; /* the budget went choosing */
    if (rc < 0 && rc != MARKET__REDIRECTED) batch_fail(m, cb, rc);
    return rc;
}

/* Makes sure the stored outcomes this batch replays are on enough replicas
 * (market__replicated: their commit may have been answered not_replicated);
 * when that fails, they are answered with its error instead. */
static void confirm_replays(market_conn *c, market__cbatch *cb) {
    const char *keys[MARKET__BATCH_MAX];
    size_t n = 0;
    for (size_t i = 0; i < cb->n; i++)
        if (cb->req[i]->replayed && *cb->req[i]->replayed) keys[n++] = cb->req[i]->k_idem;
    int rc = market__replicated(c, keys, n);
    if (rc == MARKET_OK) return;
    for (size_t i = 0; i < cb->n; i++)
        if (cb->req[i]->replayed && *cb->req[i]->replayed) {
            *cb->req[i]->replayed = 0;
            *cb->req[i]->rc = rc;
            market__count_result(c->m, rc);
        }
}

/* ---- the lanes and their workers ---- */

/* Makes a combiner of m's cfg.workers lanes, handling its orders with ops
 * (borrowed); each lane's worker starts with its first order. Returns NULL
 * on out-of-memory. */
market__combiner *market__combine_new(market *m, const market__order_ops *ops) {
    market__combiner *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->m = m;
    q->ops = ops;
    q->nlanes = m->cfg.workers;
    if (pthread_mutex_init(&q->qmu, NULL) != 0) goto fail_q;
    if (pthread_cond_init(&q->rcv, NULL) != 0) goto fail_mu;
    size_t k = 0;
    for (; k < q->nlanes; k++) {
        q->lane[k].q = q;
        if (rconn_cond_init_monotonic(&q->lane[k].cv) != RCONN_OK) break;
    }
    if (k == q->nlanes) return q;
    while (k-- > 0)
        pthread_cond_destroy(&q->lane[k].cv);
    pthread_cond_destroy(&q->rcv);
fail_mu:
    pthread_mutex_destroy(&q->qmu);
fail_q:
    free(q);
    return NULL;
}

/* Returns the lane that serves o's realm and group: always the same one
 * (FNV-1a of "<realm>", or of "<realm>/<group>"). */
static unsigned lane_of(const market__combiner *q, const market_queued *o) {
    uint32_t h = 2166136261u;
    for (const unsigned char *s = (const unsigned char *)o->realm; *s; s++)
        h = (h ^ *s) * 16777619u;
    if (o->group[0]) {
        h = (h ^ '/') * 16777619u;
        for (const unsigned char *s = (const unsigned char *)o->group; *s; s++)
            h = (h ^ *s) * 16777619u;
    }
    return (unsigned)(h % q->nlanes);
}

/* Whether a and b go into one batch: one kind, realm and group. */
static int same_batch(const market_queued *a, const market_queued *b) {
    return a->kind == b->kind && strcmp(a->realm, b->realm) == 0 &&
           strcmp(a->group, b->group) == 0;
}

/* Orders one batch of o's kind takes at the most. */
static size_t batch_most(const market *m, const market_queued *o) {
    int policy = kind_policy(o->kind, m);
    if (o->kind->most) return o->kind->most(m, policy);
    size_t most = m->cfg.batch_max;
    if (policy == MARKET__POLICY_EACH && most > MARKET__ITEM_BATCH_MAX)
        most = MARKET__ITEM_BATCH_MAX; /* two locks an order, at the most */
    return most;
}

/* Takes from ln's queue (under qmu) the orders of one batch, the batch of
 * the oldest order still in its budget whose group is not resting
 * (market__rest_due), into cb->req, keeping the order they came in; orders
 * of other batches stay queued in theirs. Orders past their budget (or all
 * of them, when nomem) are taken too and put on *refused with their answer.
 * Returns how many went into cb. */
static size_t batch_take(struct market__lane *ln, market__cbatch *cb, int nomem,
                         market_queued **refused) {
    int64_t now = rconn_now_ms();
    const market_queued *first = NULL;
    size_t n = 0, most = 0;
    market_queued **pp = &ln->qhead, *prev = NULL;
    while (*pp && (!first || n < most || nomem)) {
        market_queued *p = *pp;
        int late = nomem || now >= p->deadline_ms;
        if (!late && (first ? !same_batch(p, first)
                            : !market__rest_due(&ln->rest, p->realm, p->group, now))) {
            prev = p;
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        p->state = REQ_TAKEN;
        if (!late) {
            if (!first) most = batch_most(ln->q->m, first = p);
            cb->req[n++] = p;
            continue;
        }
        *p->rc = nomem ? MARKET_ERR_NOMEM : MARKET_ERR_BUSY;
        p->next = *refused;
        *refused = p;
    }
    if (!*pp) ln->qtail = prev; /* walked to the end: the last order kept is the tail */
    return n;
}

/* Makes o, queued on q, an order not yet served: as it is submitted, or put back. */
static void order_reset(const market__combiner *q, market_queued *o) {
    q->ops->reset(o);
    *o->rc = MARKET_ERR_STORE;
    if (o->replayed) *o->replayed = 0;
    o->why[0] = '\0';
    o->k_idem = "";
    o->state = REQ_WAITING;
    o->next = NULL;
}

/* Sets batch cb aside (see market_lane.c): its group rests, and its orders
 * go back to the head of ln's queue in their order, as if never taken.
 * Returns 0, or -1 when too many of ln's groups rest already (then cb is
 * left as it was). */
static int set_aside(struct market__lane *ln, market__cbatch *cb) {
    if (market__rest_begin(&ln->rest, cb->realm, cb->group, cb->token_set ? cb->token : NULL,
                           rconn_now_ms()) < 0)
        return -1;
    pthread_mutex_lock(&ln->q->qmu);
    for (size_t i = cb->n; i-- > 0;) {
        market_queued *p = cb->req[i];
        order_reset(ln->q, p);
        p->next = ln->qhead;
        ln->qhead = p;
        if (!ln->qtail) ln->qtail = p;
    }
    pthread_mutex_unlock(&ln->q->qmu);
    return 0;
}

/* A worker's kind states, made at a kind's first batch. */
struct worker {
    struct market__lane *ln;
    market_conn *c;
    market_conn *c2;   /* cfg.min_replicas_ack: the next batch's while c's WAIT is outstanding */
    struct acker ack; /* ... and who reads that WAIT */
    market__cbatch *cb;
    struct {
        void *ks;
    } state[MARKET__KINDS_MAX]; /* by kind->slot */
};

/* Serves the n orders taken into w->cb (see DESIGN) and lists them to be
 * answered. Returns 1 when the batch was set aside instead. */
static int serve(struct worker *w, size_t n) {
    struct market__lane *ln = w->ln;
    market *m = ln->q->m;
    market__cbatch *cb = w->cb;
    market_conn *c = w->c;
    const struct market__kind *k = cb->req[0]->kind;
    cb->kind = k;
    cb->n = cb->n_open = n;
    cb->realm = cb->req[0]->realm;
    cb->group = cb->req[0]->group;
    cb->policy = kind_policy(k, m);
    cb->token_set = market__rest_token(&ln->rest, cb->realm, cb->group, cb->token);
    if (!w->state[k->slot].ks) w->state[k->slot].ks = calloc(1, k->state_size);
    cb->ks = w->state[k->slot].ks;
    c->sent = ln->n_answer ? answer_sent : NULL;
    c->sent_ud = ln;
    int rc = cb->ks ? market__route(c, cb->realm) : MARKET_ERR_NOMEM;
    /* its commit names the recording script: its read asks whether it is cached */
    market__ask_script(c, market__trades_sha());
    c->defer_wait = w->c2 != NULL;
    if (rc == MARKET_OK)
        rc = batch_run(c, ln, cb);
    else if (rc != MARKET__REDIRECTED)
        batch_fail(m, cb, rc);
    c->defer_wait = 0;
    int deferred = c->wait_pending || c->wait_judged; /* its commit's WAIT: see DESIGN */
    market__ask_script(c, NULL);
    c->sent = NULL;
    answer_now(ln); /* when this batch sent nothing */
    if (rc == MARKET__REDIRECTED && set_aside(ln, cb) == 0) return 1;
    if (rc == MARKET__REDIRECTED) batch_fail(m, cb, MARKET_ERR_STORE); /* no room */
    market__rest_end(&ln->rest, cb->realm, cb->group);
    confirm_replays(c, cb);
    for (size_t i = 0; i < n; i++) {
        market_queued *p = cb->req[i];
        if (MARKET_ERR_HAS_REASON(*p->rc)) snprintf(p->why, MARKET_WHY_MAX, "%s", c->errstr);
    }
    if (deferred && ack_hand(&w->ack, c, cb->req, n, cb->n_open) == 0) {
        w->c = w->c2; /* the next batch goes out on the other connection meanwhile */
        w->c2 = c;
        return 0;
    }
    if (deferred) ack_judge(c, cb->req, cb->n_open); /* no acker: here */
    memcpy(ln->answer, cb->req, n * sizeof *cb->req);
    ln->n_answer = n;
    return 0;
}

/* Sets up worker w of its lane: its batch, its connections (a second one for the acker
 * under --min-replicas-ack, off a cluster). Returns 0, or -1 when it has no batch or
 * connection (then every order it takes fails). */
static int worker_begin(struct worker *w) {
    market *m = w->ln->q->m;
    w->cb = malloc(sizeof *w->cb);
    w->c = w->cb ? market_conn_new(m, NULL) : NULL;
    if (w->c && m->cfg.min_replicas_ack && !m->cluster) w->c2 = market_conn_new(m, NULL);
    w->ack.q = w->ln->q;
    w->ack.ready = w->c2 && pthread_mutex_init(&w->ack.mu, NULL) == 0;
    if (w->ack.ready && pthread_cond_init(&w->ack.cv, NULL) != 0) {
        pthread_mutex_destroy(&w->ack.mu);
        w->ack.ready = 0;
    }
    if (w->c) w->c->set_aside = m->cluster != NULL; /* see market_lane.c */
    return w->cb && w->c ? 0 : -1;
}

/* Frees what worker_begin() and the kinds' states of w hold. */
static void worker_end(struct worker *w) {
    acker_end(&w->ack);
    market_conn_free(w->c);
    market_conn_free(w->c2);
    for (size_t k = 0; k < MARKET__KINDS_MAX; k++) {
        market__kstate *ks = w->state[k].ks;
        if (!ks) continue;
        market__buf_free(&ks->rb);
        market__buf_free(&ks->wb);
        free(ks);
    }
    free(w->cb);
}

/* A lane's worker: takes a batch at a time (batch_take), answers those
 * whose wait budget ran out while queued with MARKET_ERR_BUSY, serves the
 * rest under one lock hold (see DESIGN), hands each its outcome, and
 * releases a kept lock once its queue stayed empty MARKET__HOLD_IDLE_MS
 * (idle_until), or holds only orders of resting groups. At stop it serves
 * what is queued first. */
static void *worker_main(void *arg) {
    struct worker w = {.ln = arg};
    (void)prctl(PR_SET_NAME, "market-worker", 0, 0, 0);
    struct market__lane *ln = w.ln;
    market__combiner *q = ln->q;
    market *m = q->m;
    int nomem = worker_begin(&w) < 0;
    pthread_mutex_lock(&q->qmu);
    for (;;) {
        if (!ln->qhead && ln->n_answer) { /* nothing to overlap them with */
            pthread_mutex_unlock(&q->qmu);
            answer_now(ln);
            pthread_mutex_lock(&q->qmu);
            continue;
        }
        if (!ln->qhead) {
            if (ln->holding && !q->stop) { /* idle: the next order may be a moment away */
                int64_t until = idle_until(ln, rconn_now_ms());
                if (until > 0) {
                    market__lane_wait(&ln->cv, &q->qmu, until);
                    continue;
                }
            }
            if (ln->holding) { /* idle: free the group for other processes */
                pthread_mutex_unlock(&q->qmu);
                hold_drop(ln);
                pthread_mutex_lock(&q->qmu);
                continue;
            }
            if (q->stop) break;
            pthread_cond_wait(&ln->cv, &q->qmu);
            continue;
        }
        market_queued *refused = NULL;
        int64_t now = rconn_now_ms();
        ln->idle_since_ms = 0;
        size_t n = batch_take(ln, w.cb, nomem, &refused);
        if (!n && !refused && !ln->n_answer && !ln->holding) {
            /* every order queued is of a resting group: until the first rest ends */
            market__lane_wait(&ln->cv, &q->qmu, market__rest_next(&ln->rest, now));
            continue;
        }
        pthread_mutex_unlock(&q->qmu);
        while (refused) {
            market_queued *p = refused;
            refused = p->next;
            if (*p->rc == MARKET_ERR_BUSY) MARKET__COUNT(m, lock_busy);
            q->ops->answer(m, p);
        }
        if (!n) { /* nothing to serve now: as when idle */
            answer_now(ln);
            hold_drop(ln);
        } else {
            (void)serve(&w, n);
        }
        pthread_mutex_lock(&q->qmu);
    }
    pthread_mutex_unlock(&q->qmu);
    answer_now(ln);
    worker_end(&w);
    return NULL;
}

/* Queues order o (arguments already checked; o->kind, order, realm, group,
 * rc and why set, and replayed unless its kind never replays) on its lane
 * and returns at once. Returns MARKET_OK when o is queued (its kind's answer will be called
 * exactly once, from the lane's worker), MARKET_ERR_BUSY after
 * market__combine_stop(), or MARKET_ERR_NOMEM (the worker cannot start). */
int market__combine_submit(market__combiner *q, market_queued *o) {
    market *m = q->m;
    order_reset(q, o);
    o->deadline_ms = rconn_now_ms() + m->cfg.acquire_timeout_ms;
    o->lane = lane_of(q, o);
    struct market__lane *ln = &q->lane[o->lane];
    pthread_mutex_lock(&q->qmu);
    if (q->stop) {
        pthread_mutex_unlock(&q->qmu);
        return MARKET_ERR_BUSY;
    }
    if (!ln->started) {
        if (pthread_create(&ln->worker, NULL, worker_main, ln) != 0) {
            pthread_mutex_unlock(&q->qmu);
            return MARKET_ERR_NOMEM;
        }
        ln->started = 1;
    }
    /* Without a releaser, the workers release their locks themselves. */
    if (kind_policy(o->kind, m) == MARKET__POLICY_EACH && !q->releaser_started &&
        pthread_create(&q->releaser, NULL, releaser_main, q) == 0)
        q->releaser_started = 1;
    if (ln->qtail)
        ln->qtail->next = o;
    else
        ln->qhead = o;
    ln->qtail = o;
    pthread_cond_signal(&ln->cv);
    pthread_mutex_unlock(&q->qmu);
    return MARKET_OK;
}

/* Stops taking orders: every queued one is served first, then the workers
 * end and their locks are released; later submissions answer
 * MARKET_ERR_BUSY. Idempotent; this function can't fail. */
void market__combine_stop(market__combiner *q) {
    if (!q) return;
    pthread_mutex_lock(&q->qmu);
    q->stop = 1;
    for (size_t k = 0; k < q->nlanes; k++)
        pthread_cond_signal(&q->lane[k].cv);
    pthread_mutex_unlock(&q->qmu);
    for (size_t k = 0; k < q->nlanes; k++) {
        struct market__lane *ln = &q->lane[k];
        pthread_mutex_lock(&q->qmu);
        int was = ln->started;
        ln->started = 0;
        pthread_mutex_unlock(&q->qmu);
        if (was) pthread_join(ln->worker, NULL);
    }
    /* the workers are gone: release what they left */
    pthread_mutex_lock(&q->qmu);
    q->releaser_stop = 1;
    pthread_cond_signal(&q->rcv);
    int was = q->releaser_started;
    q->releaser_started = 0;
    pthread_mutex_unlock(&q->qmu);
    if (was) pthread_join(q->releaser, NULL);
    for (size_t k = 0; k < q->nlanes; k++)
        hold_drop(&q->lane[k]);
}

/* Stops q and frees it. NULL: a no-op. This function can't fail. */
void market__combine_free(market__combiner *q) {
    if (!q) return;
    market__combine_stop(q);
    for (size_t k = 0; k < q->nlanes; k++)
        pthread_cond_destroy(&q->lane[k].cv);
    pthread_cond_destroy(&q->rcv);
    pthread_mutex_destroy(&q->qmu);
    free(q);
}

/* ---- waiting for one order ---- */

/* Wakes the caller waiting on w: the order's kind calls it from the done
 * callback of the order it made for market__combine_wait(). */
void market__combine_wake(market__waiter *w) {
    pthread_mutex_lock(&w->q->qmu);
    w->done = 1;
    pthread_cond_signal(&w->cv); /* under the mutex: the waiter cannot free w before this */
    pthread_mutex_unlock(&w->q->qmu);
}

/* Readies w to wait for an order of q. Returns MARKET_OK or MARKET_ERR_NOMEM. */
int market__waiter_init(market__waiter *w, market__combiner *q) {
    w->q = q;
    w->done = 0;
    w->ready = rconn_cond_init_monotonic(&w->cv) == RCONN_OK;
    return w->ready ? MARKET_OK : MARKET_ERR_NOMEM;
}

/* Waits on w (market__waiter_init, then MARKET_OK) for the outcome of order
 * o, submitted with a done callback that wakes w (market__combine_wake),
 * and returns it (*o->rc); or, with o NULL, returns rc, the failure to make
 * w or to submit. An order still queued when its wait budget ends leaves the
 * queue with MARKET_ERR_BUSY; one the worker has taken is waited for. Ends
 * w either way. */
int market__combine_wait(market__waiter *w, market_queued *o, int rc) {
    market__combiner *q = w->q;
    if (!o) {
        if (w->ready) pthread_cond_destroy(&w->cv);
        return rc;
    }
    struct timespec until;
    rconn_timespec_at(o->deadline_ms, &until);
    pthread_mutex_lock(&q->qmu);
    while (!w->done) {
        if (o->state == REQ_TAKEN) {
            pthread_cond_wait(&w->cv, &q->qmu);
            continue;
        }
        if (pthread_cond_timedwait(&w->cv, &q->qmu, &until) != ETIMEDOUT ||
            o->state != REQ_WAITING)
            continue;
        /* Still queued when its budget ran out: leave the queue, busy. */
        struct market__lane *ln = &q->lane[o->lane];
        market_queued **pp = &ln->qhead, *prev = NULL;
        while (*pp != o) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        *pp = o->next;
        if (ln->qtail == o) ln->qtail = prev;
        *o->rc = MARKET_ERR_BUSY;
        MARKET__COUNT(q->m, lock_busy);
        break;
    }
    pthread_mutex_unlock(&q->qmu);
    pthread_cond_destroy(&w->cv);
    return *o->rc;
}
