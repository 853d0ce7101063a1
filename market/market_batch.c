/* market_batch.c - the market strategy: purchases that arrive together share one lock hold.
 *
 * DESIGN
 * A single market lock serialises every purchase, so what matters is the work
 * per lock hold and how waiters wait. Threads of one process do not each spin
 * on the Redis lock: a purchase joins an in-process queue, and one thread at a
 * time (the combiner) takes the lock for everything queued (flat combining):
 *   1. one pipeline: WATCH the lock key, market:, every user involved, the
 *      lock's fencing record and any idempotency records; ZMSCORE market: for
 *      every listing; GET the fencing record; HGET funds of every user; MGET
 *      the idempotency records;
 *   2. decide each purchase in queue order against an in-memory copy of what
 *      was read, exactly as if they ran one at a time (an item sold earlier in
 *      the batch is not listed any more; a buyer's funds fall as it buys; a
 *      repeated idempotency key replays the first outcome);
 *   3. one MULTI/EXEC: our fence into the fencing record, HINCRBY each user's
 *      net change, SADD each buyer's new items, one ZREM of every sold
 *      listing, the idempotency records - aborted by Redis if anything
 *      watched changed or the lock key expired;
 *   4. wake every waiter with its own result and hand the combiner role to
 *      the oldest request still queued. While requests keep coming the lock
 *      is handed over with the role (up to MARKET__HOLD_MAX_MS, and never
 *      past half the lease), so a busy market pays for one acquire and one
 *      release per hold, not per batch; an idle one releases at once.
 * A queued request that is still waiting when its wait budget ends leaves the
 * queue with MARKET_ERR_BUSY; one already taken into a batch waits for it.
 * The combiner uses its own thread's connection and the market's one batch
 * scratch space (only one thread combines at a time). Outcomes and invariants
 * are those of serial execution in queue order.
 */
#include "market/market.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "market/market_impl.h"

#define USERS_MAX (2 * MARKET__BATCH_MAX)

enum {
    REQ_WAITING, /* queued */
    REQ_TAKEN,   /* in a batch being served: it waits for the outcome, whatever its budget */
    REQ_DONE,    /* outcome in rc */
    REQ_COMBINE, /* queued at the head, and chosen to serve the queue */
};

struct market__req {
    const char *buyer, *seller, *item;
    int64_t expect_price;
    const market_idem *idem; /* may be NULL */
    market_purchase_result *res;
    int rc;
    int state;          /* REQ_*; guarded by market.qmu */
    int64_t deadline_ms; /* lock_now_ms() after which it gives up waiting in the queue */
    pthread_cond_t cv;  /* signalled when state changes */
    struct market__req *next;
};

struct market__batch {
    struct market__req *req[MARKET__BATCH_MAX];
    size_t n;
    char member[MARKET__BATCH_MAX][MARKET__MEMBER_MAX];
    size_t first[MARKET__BATCH_MAX];   /* index of the first purchase of the same listing */
    int sold[MARKET__BATCH_MAX];       /* on the first purchase of a listing: sold in batch */
    int64_t price[MARKET__BATCH_MAX];  /* listing price, 0 when not listed */
    char k_idem[MARKET__BATCH_MAX][MARKET__IDEM_REDIS_MAX]; /* "" without a key */
    char record[MARKET__BATCH_MAX][MARKET__IDEM_RECORD_MAX];
    int idem_state[MARKET__BATCH_MAX]; /* market__idem_parse() of the stored record */
    int64_t idem_a[MARKET__BATCH_MAX], idem_b[MARKET__BATCH_MAX];
    size_t n_idem;
    size_t buyer[MARKET__BATCH_MAX], seller[MARKET__BATCH_MAX]; /* user indexes */

    size_t n_users;
    const char *user[USERS_MAX];
    char k_user[USERS_MAX][MARKET__KEY_MAX];
    char k_inv[USERS_MAX][MARKET__KEY_MAX];
    int exists[USERS_MAX];
    int64_t funds[USERS_MAX], read_funds[USERS_MAX];
    char delta[USERS_MAX][24];

    /* pipeline scratch */
    const char *args_watch[3 + 2 * MARKET__HELD_MAX + USERS_MAX + MARKET__BATCH_MAX];
    const char *args_mget[1 + MARKET__BATCH_MAX];
    const char *args_setidem[MARKET__BATCH_MAX][5];
    const char *args_fence[1 + MARKET__HELD_MAX];
    const char *args_setfence[MARKET__HELD_MAX][3];
    const char *args_zmscore[2 + MARKET__BATCH_MAX];
    const char *args_hget[USERS_MAX][3];
    const char *args_sadd[2 * USERS_MAX + MARKET__BATCH_MAX]; /* every SADD, back to back */
    const char *args_zrem[2 + MARKET__BATCH_MAX];
    const char *args_hincr[USERS_MAX][4];
    const char **argv[6 + MARKET__HELD_MAX + 2 * USERS_MAX + MARKET__BATCH_MAX];
    int argc[6 + MARKET__HELD_MAX + 2 * USERS_MAX + MARKET__BATCH_MAX];
    redisReply *rep[6 + MARKET__HELD_MAX + 2 * USERS_MAX + MARKET__BATCH_MAX];

    /* item strategy: the batch's locks, each listing and each buyer once */
    char lock_key[MARKET__HELD_MAX][MARKET__LOCK_KEY_MAX];
    const char *lock_keys[MARKET__HELD_MAX];
    lock_handle lock_h[MARKET__HELD_MAX];
    size_t n_locks;
};

/* Returns new, uninitialised scratch space for one combiner (caller frees
 * with free()), or NULL on out-of-memory. */
struct market__batch *market__batch_new(void) { return malloc(sizeof(struct market__batch)); }

/* ---- building the batch ---- */

static size_t user_index(struct market__batch *b, const char *id) {
    for (size_t i = 0; i < b->n_users; i++)
        if (strcmp(b->user[i], id) == 0) return i;
    size_t i = b->n_users++;
    b->user[i] = id;
    market__key(b->k_user[i], sizeof b->k_user[i], "users:", id);
    market__key(b->k_inv[i], sizeof b->k_inv[i], "inventory:", id);
    return i;
}

static void batch_index(struct market__batch *b) {
    b->n_users = b->n_idem = 0;
    for (size_t i = 0; i < b->n; i++) {
        const struct market__req *r = b->req[i];
        snprintf(b->member[i], sizeof b->member[i], "%s.%s", r->item, r->seller);
        b->k_idem[i][0] = '\0';
        if (r->idem) {
            market__idem_key(b->k_idem[i], sizeof b->k_idem[i], r->buyer, r->idem);
            b->n_idem++;
        }
        b->first[i] = i;
        for (size_t j = 0; j < i; j++)
            if (strcmp(b->member[j], b->member[i]) == 0) {
                b->first[i] = j;
                break;
            }
        b->buyer[i] = user_index(b, r->buyer);
        b->seller[i] = user_index(b, r->seller);
    }
}

/* ---- one attempt: read, decide, commit ---- */

static int batch_read(market_conn *c, const market__held *held, struct market__batch *b) {
    size_t nc = 0, k = 0;
    b->args_watch[k++] = "WATCH";
    /* The market lock guards market: as a whole, so it is watched; listing
     * locks guard their own listings, and every purchase changes market:. */
    if (c->m->cfg.strategy == MARKET_STRATEGY_MARKET) b->args_watch[k++] = "market:";
    for (size_t i = 0; i < held->n; i++) {
        b->args_watch[k++] = held->key[i];
        b->args_watch[k++] = held->fenced[i];
    }
    for (size_t u = 0; u < b->n_users; u++) b->args_watch[k++] = b->k_user[u];
    for (size_t i = 0; i < b->n; i++)
        if (b->k_idem[i][0]) b->args_watch[k++] = b->k_idem[i];
    b->argv[nc] = b->args_watch;
    b->argc[nc++] = (int)k;

    k = 0;
    b->args_zmscore[k++] = "ZMSCORE";
    b->args_zmscore[k++] = "market:";
    for (size_t i = 0; i < b->n; i++) b->args_zmscore[k++] = b->member[i];
    b->argv[nc] = b->args_zmscore;
    b->argc[nc++] = (int)k;

    k = 0;
    b->args_fence[k++] = "MGET";
    for (size_t i = 0; i < held->n; i++) b->args_fence[k++] = held->fenced[i];
    b->argv[nc] = b->args_fence;
    b->argc[nc++] = (int)k;
    for (size_t u = 0; u < b->n_users; u++) {
        b->args_hget[u][0] = "HGET";
        b->args_hget[u][1] = b->k_user[u];
        b->args_hget[u][2] = "funds";
        b->argv[nc] = b->args_hget[u];
        b->argc[nc++] = 3;
    }
    size_t i_mget = nc;
    if (b->n_idem) {
        k = 0;
        b->args_mget[k++] = "MGET";
        for (size_t i = 0; i < b->n; i++)
            if (b->k_idem[i][0]) b->args_mget[k++] = b->k_idem[i];
        b->argv[nc] = b->args_mget;
        b->argc[nc++] = (int)k;
    }
    int rc = market__pipeline_argv(c, nc, b->argc, b->argv, b->rep);
    if (rc < 0) return rc;

    const redisReply *w = b->rep[0], *z = b->rep[1], *f = b->rep[2];
    if (b->n_idem) {
        const redisReply *mg = b->rep[i_mget];
        if (mg->type != REDIS_REPLY_ARRAY || mg->elements != b->n_idem) {
            rc = MARKET_ERR_STORE;
            goto out;
        }
        for (size_t i = 0, j = 0; i < b->n; i++) {
            b->idem_state[i] = MARKET__IDEM_NONE;
            if (!b->k_idem[i][0]) continue;
            b->idem_state[i] = market__idem_parse(mg->element[j++], b->req[i]->idem->fingerprint,
                                                  &b->idem_a[i], &b->idem_b[i]);
            if (b->idem_state[i] == MARKET_ERR_STORE) {
                rc = MARKET_ERR_STORE;
                goto out;
            }
        }
    }
    if (w->type != REDIS_REPLY_STATUS || z->type != REDIS_REPLY_ARRAY || z->elements != b->n) {
        rc = MARKET_ERR_STORE;
        goto out;
    }
    if (market__fence_stale(held, f)) {
        rc = MARKET_ERR_LEASE_LOST; /* a newer holder has committed */
        goto out;
    }
    for (size_t i = 0; i < b->n; i++) {
        const redisReply *e = z->element[i];
        b->price[i] = 0;
        if (e->type == REDIS_REPLY_NIL) continue;
        if (e->type != REDIS_REPLY_STRING ||
            market__parse_price(e->str, e->len, &b->price[i]) < 0) {
            rc = MARKET_ERR_STORE;
            goto out;
        }
    }
    for (size_t u = 0; u < b->n_users; u++) {
        const redisReply *e = b->rep[3 + u];
        b->exists[u] = e->type == REDIS_REPLY_STRING;
        b->funds[u] = 0;
        if (e->type == REDIS_REPLY_NIL) continue;
        if (!b->exists[u] || market__parse_i64(e->str, e->len, &b->funds[u]) < 0) {
            rc = MARKET_ERR_STORE;
            goto out;
        }
    }
out:
    market__replies_free(b->rep, nc);
    return rc;
}

/* Settles purchase i from its idempotency key: a stored outcome, or an
 * earlier purchase of this batch under the same key. Returns 1 when settled. */
static int idem_decided(struct market__batch *b, size_t i) {
    struct market__req *r = b->req[i];
    int st = b->idem_state[i];
    int64_t a = b->idem_a[i], bb = b->idem_b[i];
    if (st == MARKET__IDEM_NONE) {
        for (size_t j = 0; j < i; j++) {
            const struct market__req *q = b->req[j];
            if (q->rc != MARKET_OK || strcmp(b->k_idem[j], b->k_idem[i]) != 0) continue;
            st = strcmp(q->idem->fingerprint, r->idem->fingerprint) == 0 ? MARKET_OK
                                                                          : MARKET_ERR_IDEM_MISMATCH;
            a = q->res->price;
            bb = q->res->buyer_funds;
            break;
        }
        if (st == MARKET__IDEM_NONE) return 0;
    }
    r->rc = st;
    if (st == MARKET_OK) {
        r->res->replayed = 1;
        r->res->price = a;
        r->res->buyer_funds = bb;
    }
    return 1;
}

/* Decides every purchase in order; returns how many succeed. */
static size_t batch_decide(struct market__batch *b) {
    size_t won = 0;
    memcpy(b->read_funds, b->funds, b->n_users * sizeof *b->funds);
    for (size_t i = 0; i < b->n; i++) b->sold[i] = 0;
    for (size_t i = 0; i < b->n; i++) {
        struct market__req *r = b->req[i];
        size_t f = b->first[i], bu = b->buyer[i], se = b->seller[i];
        int64_t price = b->price[f];
        r->res->replayed = 0;
        if (b->k_idem[i][0] && idem_decided(b, i)) continue;
        if (price == 0 || b->sold[f]) {
            r->rc = MARKET_ERR_NOT_LISTED;
        } else if (r->expect_price > 0 && r->expect_price != price) {
            r->res->price = price;
            r->rc = MARKET_ERR_PRICE_CHANGED;
        } else if (!b->exists[bu]) {
            r->rc = MARKET_ERR_NO_PLAYER;
        } else if (b->funds[bu] < price) {
            r->rc = MARKET_ERR_INSUFFICIENT_FUNDS;
        } else if (b->funds[se] > INT64_MAX - price) {
            r->rc = MARKET_ERR_OVERFLOW;
        } else {
            b->funds[bu] -= price;
            b->funds[se] += price;
            b->sold[f] = 1;
            r->res->price = price;
            r->res->buyer_funds = b->funds[bu];
            r->rc = MARKET_OK;
            won++;
        }
    }
    return won;
}

/* Purchase i succeeded in this batch (not a replay): it has writes. */
static int won(const struct market__batch *b, size_t i) {
    return b->req[i]->rc == MARKET_OK && !b->req[i]->res->replayed;
}

static int batch_commit(market_conn *c, const market__held *held, struct market__batch *b) {
    static const char *const multi[1] = {"MULTI"}, *const exec[1] = {"EXEC"};
    size_t nc = 0, k;
    b->argv[nc] = (const char **)multi;
    b->argc[nc++] = 1;
    for (size_t i = 0; i < held->n; i++) {
        b->args_setfence[i][0] = "SET";
        b->args_setfence[i][1] = held->fenced[i];
        b->args_setfence[i][2] = held->fence[i];
        b->argv[nc] = b->args_setfence[i];
        b->argc[nc++] = 3;
    }
    for (size_t u = 0; u < b->n_users; u++) {
        if (b->funds[u] == b->read_funds[u]) continue;
        snprintf(b->delta[u], sizeof b->delta[u], "%lld",
                 (long long)(b->funds[u] - b->read_funds[u]));
        const char **a = b->args_hincr[u];
        a[0] = "HINCRBY";
        a[1] = b->k_user[u];
        a[2] = "funds";
        a[3] = b->delta[u];
        b->argv[nc] = a;
        b->argc[nc++] = 4;
    }
    const char **sadd = b->args_sadd;
    for (size_t u = 0; u < b->n_users; u++) {
        k = 0;
        sadd[k++] = "SADD";
        sadd[k++] = b->k_inv[u];
        for (size_t i = 0; i < b->n; i++)
            if (won(b, i) && b->buyer[i] == u) sadd[k++] = b->req[i]->item;
        if (k == 2) continue;
        b->argv[nc] = sadd;
        b->argc[nc++] = (int)k;
        sadd += k;
    }
    k = 0;
    b->args_zrem[k++] = "ZREM";
    b->args_zrem[k++] = "market:";
    for (size_t i = 0; i < b->n; i++)
        if (won(b, i)) b->args_zrem[k++] = b->member[i];
    b->argv[nc] = b->args_zrem;
    b->argc[nc++] = (int)k;
    for (size_t i = 0; i < b->n; i++) {
        if (!won(b, i) || !b->k_idem[i][0]) continue;
        const struct market__req *r = b->req[i];
        market__idem_record(b->record[i], sizeof b->record[i], r->idem, r->res->price,
                            r->res->buyer_funds);
        const char **a = b->args_setidem[i];
        a[0] = "SET";
        a[1] = b->k_idem[i];
        a[2] = b->record[i];
        a[3] = "EX";
        a[4] = MARKET__IDEM_TTL;
        b->argv[nc] = a;
        b->argc[nc++] = 5;
    }
    b->argv[nc] = (const char **)exec;
    b->argc[nc++] = 1;

    int rc = market__pipeline_argv(c, nc, b->argc, b->argv, b->rep);
    if (rc < 0) return rc;
    c->unwatch = 0; /* EXEC ends every WATCH */
    const redisReply *r = b->rep[nc - 1];
    if (r->type == REDIS_REPLY_NIL) {
        rc = MARKET__TXN_ABORTED;
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements != nc - 2) {
        rc = MARKET_ERR_STORE; /* EXECABORT: a queued command was refused */
    } else {
        for (size_t i = 0; i < r->elements; i++)
            if (r->element[i]->type == REDIS_REPLY_ERROR) rc = MARKET_ERR_STORE;
    }
    market__replies_free(b->rep, nc);
    return rc;
}

static int batch_attempt(market_conn *c, const market__held *held, void *ud) {
    struct market__batch *b = ud;
    int rc = batch_read(c, held, b);
    if (rc < 0) return market__refuse(c, rc);
    if (batch_decide(b) == 0) return market__refuse(c, MARKET_OK);
    if (c->m->cfg.test_stall_ms) market__stall(c->m->cfg.test_stall_ms);
    return batch_commit(c, held, b);
}

/* ---- the queue ---- */

/* How long one thread keeps the market lock across batches while purchases
 * keep coming: amortises acquire and release, bounded so that other
 * processes sharing the lock get their turn. */
static int64_t hold_max_ms(const market *m) {
    int64_t quarter = m->cfg.lock_ttl_ms / 4;
    return quarter < MARKET__HOLD_MAX_MS ? quarter : MARKET__HOLD_MAX_MS;
}

static void hold_drop(market *m) {
    if (!m->holding) return;
    (void)lock_release(m->lock, &m->hold); /* a lease we cannot release expires */
    m->holding = 0;
}

static void lock_key_add(struct market__batch *b, const char *prefix, const char *id) {
    char key[MARKET__LOCK_KEY_MAX];
    snprintf(key, sizeof key, "%s%s", prefix, id);
    for (size_t i = 0; i < b->n_locks; i++)
        if (strcmp(b->lock_key[i], key) == 0) return;
    memcpy(b->lock_key[b->n_locks], key, sizeof key);
    b->lock_keys[b->n_locks] = b->lock_key[b->n_locks];
    b->n_locks++;
}

/* The item strategy's batch: every listing's lock and every buyer's lock,
 * taken all or none in one round trip (no deadlock, no partial hold), one
 * read, one commit, released all at once. Another process's purchase waits
 * only if it shares a listing or a buyer with this batch. */
static void batch_run_item(market_conn *c, struct market__batch *b) {
    market *m = c->m;
    MARKET__COUNT(m, batches);
    batch_index(b);
    b->n_locks = 0;
    for (size_t i = 0; i < b->n; i++) {
        lock_key_add(b, "lock:item:", b->member[i]);
        lock_key_add(b, "lock:player:", b->req[i]->buyer);
    }
    int rc = market__lock_multi(m, b->lock_keys, b->n_locks, b->req[0]->deadline_ms, b->lock_h);
    if (rc == MARKET_OK) {
        if (m->cfg.test_stall_read_ms) market__stall(m->cfg.test_stall_read_ms);
        market__held hd = {0};
        for (size_t k = 0; k < b->n_locks; k++)
            market__held_set(&hd, k, b->lock_keys[k], &b->lock_h[k]);
        rc = market__attempts(c, b->lock_h, &hd, batch_attempt, b);
        (void)lock_release_multi(m->lock, b->lock_h, b->n_locks); /* a lease not released expires */
    }
    if (rc < 0)
        for (size_t i = 0; i < b->n; i++) {
            b->req[i]->rc = rc;
            market__count_result(m, rc);
        }
}

static void batch_run(market_conn *c, struct market__batch *b) {
    market *m = c->m;
    if (m->cfg.strategy == MARKET_STRATEGY_ITEM) {
        batch_run_item(c, b);
        return;
    }
    MARKET__COUNT(m, batches);
    batch_index(b);
    int64_t now = lock_now_ms();
    if (m->holding && (now - m->hold_since_ms >= hold_max_ms(m) ||
                       m->hold.valid_until_ms - now < (int64_t)m->cfg.lock_ttl_ms / 2))
        hold_drop(m);
    int rc = MARKET_OK;
    if (!m->holding) {
        /* The oldest request's budget bounds the lock wait of the whole batch. */
        rc = market__lock(m, MARKET_LOCK_KEY, b->req[0]->deadline_ms, &m->hold);
        if (rc == MARKET_OK) {
            m->holding = 1;
            m->hold_since_ms = now;
            if (m->cfg.test_stall_read_ms) market__stall(m->cfg.test_stall_read_ms);
        }
    }
    if (rc == MARKET_OK) {
        market__held hd = {0};
        market__held_set(&hd, 0, MARKET_LOCK_KEY, &m->hold);
        rc = market__attempts(c, &m->hold, &hd, batch_attempt, b);
        if (rc < 0) hold_drop(m); /* whatever went wrong, start the next batch afresh */
    }
    if (rc < 0)
        for (size_t i = 0; i < b->n; i++) {
            b->req[i]->rc = rc;
            market__count_result(m, rc); /* counted per request, like the 503s it causes */
        }
}

/* Queues one purchase and waits for its outcome; when no other thread is
 * serving the queue, this thread serves it (see DESIGN). Arguments are
 * already validated by market_purchase(). Returns the purchase's market code;
 * MARKET_ERR_NOMEM when the scratch space cannot be had. */
int market__purchase_batched(market_conn *c, const char *buyer, const char *seller,
                             const char *item, int64_t expect_price, const market_idem *idem,
                             market_purchase_result *res) {
    market *m = c->m;
    struct market__req r = {buyer, seller, item, expect_price, idem, res, MARKET_ERR_STORE,
                            REQ_WAITING, lock_now_ms() + m->cfg.acquire_timeout_ms};
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) return MARKET_ERR_NOMEM;
    int ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
             pthread_cond_init(&r.cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok) return MARKET_ERR_NOMEM;
    struct timespec until = {(time_t)(r.deadline_ms / 1000), (long)(r.deadline_ms % 1000) * 1000000L};

    pthread_mutex_lock(&m->qmu);
    if (m->qtail)
        m->qtail->next = &r;
    else
        m->qhead = &r;
    m->qtail = &r;
    if (!m->combining) {
        m->combining = 1;
        r.state = REQ_COMBINE;
    }
    while (r.state == REQ_WAITING || r.state == REQ_TAKEN) {
        if (r.state == REQ_TAKEN) {
            pthread_cond_wait(&r.cv, &m->qmu);
            continue;
        }
        if (pthread_cond_timedwait(&r.cv, &m->qmu, &until) != ETIMEDOUT || r.state != REQ_WAITING)
            continue;
        /* Still queued when its budget ran out: leave the queue, busy. */
        struct market__req **pp = &m->qhead, *prev = NULL;
        while (*pp != &r) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        *pp = r.next;
        if (m->qtail == &r) m->qtail = prev;
        r.rc = MARKET_ERR_BUSY;
        MARKET__COUNT(m, lock_busy);
        break;
    }
    if (r.state == REQ_COMBINE) {
        /* This request is the queue's head: serve it and those behind it. */
        struct market__batch *b = m->batch; /* ours while we combine */
        size_t most = m->cfg.strategy == MARKET_STRATEGY_ITEM && m->cfg.batch_max > MARKET__ITEM_BATCH_MAX
                          ? MARKET__ITEM_BATCH_MAX
                          : m->cfg.batch_max;
        b->n = 0;
        while (m->qhead && b->n < most) {
            b->req[b->n++] = m->qhead;
            m->qhead->state = REQ_TAKEN;
            m->qhead = m->qhead->next;
        }
        if (!m->qhead) m->qtail = NULL;
        pthread_mutex_unlock(&m->qmu);

        batch_run(c, b);

        pthread_mutex_lock(&m->qmu);
        for (size_t i = 0; i < b->n; i++) {
            b->req[i]->state = REQ_DONE;
            if (b->req[i] != &r) pthread_cond_signal(&b->req[i]->cv);
        }
        if (!m->qhead && m->holding) {
            /* Idle: release the lock, still combining so nobody else uses it. */
            pthread_mutex_unlock(&m->qmu);
            hold_drop(m);
            pthread_mutex_lock(&m->qmu);
        }
        if (m->qhead) {
            m->qhead->state = REQ_COMBINE; /* it inherits the lock if we kept it */
            pthread_cond_signal(&m->qhead->cv);
        } else {
            m->combining = 0;
        }
    }
    pthread_mutex_unlock(&m->qmu);
    pthread_cond_destroy(&r.cv);
    return r.rc;
}
