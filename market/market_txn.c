/* market_txn.c - the transaction layer: leases and the attempts of a
 * guarded transaction (the combiner's kinds run them: market_combine.c).
 *
 * DESIGN
 * Every write runs as a guarded transaction:
 *   1. take the lock(s) of the strategy (market__lock*, through lock/lock.h);
 *   2. one pipeline: WATCH the keys the decision depends on plus the leases
 *      (their fencing records and, when the lock keys live in the store, the
 *      keys themselves), and read them;
 *   3. decide (market_rules.c);
 *   4. one pipeline: MULTI, the writes, our fences, EXEC. Redis aborts the
 *      EXEC when any watched key changed or expired, so a holder whose lease
 *      lapsed or was taken over cannot write;
 *   5. release the lock (compare-and-delete inside the lock layer).
 * When EXEC aborts, lock_extend() tells the two causes apart: if the lease is
 * still ours, someone outside the lock changed the data and the attempt is
 * read again (a few times); if not, the operation fails with LEASE_LOST.
 * On a Redis Cluster, an attempt whose slot moved between its read and its
 * commit (MARKET__REDIRECTED: nothing applied) is read again, on the slot's
 * new master, within the same budget; a slot split by a migration is handed
 * back to a lane instead (market_lane.c).
 * A refusal after WATCH leaves the connection watching; the UNWATCH rides in
 * front of the connection's next pipeline instead of costing a round trip
 * (market__unwatch_later).
 */
#include "market/market_txn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TXN_ABORTED MARKET__TXN_ABORTED
#define TXN_RETRIES 32            /* reads again after an abort while the lease is still ours */
#define OPTIMISTIC_BACKOFF_US 500 /* optimistic strategy: most random sleep between tries */

/* ---- leases ---- */

static int from_lock_err(int lrc) {
    switch (lrc) {
    case LOCK_ERR_BUSY: return MARKET_ERR_BUSY;
    case LOCK_ERR_NOMEM: return MARKET_ERR_NOMEM;
    case LOCK_ERR_NOT_OWNER:
    case LOCK_ERR_LEASE_LOST: return MARKET_ERR_LEASE_LOST;
    case LOCK_ERR_INVALID: return MARKET_ERR_INVALID;
    default: return MARKET_ERR_STORE;
    }
}

/* Sleeps ms milliseconds (the test hook between read and commit). */
void market__stall(uint32_t ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- the guarded transaction ---- */

/* Ends an attempt that read under WATCH and will not commit: the UNWATCH is
 * sent in front of the connection's next pipeline. Returns rc. */
int market__unwatch_later(market_conn *c, int rc) {
    c->unwatch = 1;
    return rc;
}

static void sleep_us(long us) {
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

static int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void count_wait(market *m, int64_t us, int acquired) {
    static const int64_t bounds[MARKET_WAIT_BUCKETS - 1] = {MARKET_WAIT_BUCKETS_US};
    size_t b = 0;
    while (b < MARKET_WAIT_BUCKETS - 1 && us > bounds[b])
        b++;
    atomic_fetch_add_explicit(&m->stats.lock_wait_bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->stats.lock_wait_us, (uint64_t)us, memory_order_relaxed);
    MARKET__COUNT(m, lock_waits);
    if (acquired) MARKET__COUNT(m, lock_acquired);
}

/* Takes the locks on keys[0..n) all or none (one key: lock_acquire),
 * waiting until the monotonic time by (ms), and counts the wait. A budget
 * already spent is not tried at all: a purchase is never attempted after
 * its deadline. Returns MARKET_OK, or ERR_BUSY, ERR_STORE (c->errstr says
 * the lock failed), ERR_NOMEM, ERR_INVALID. */
int market__lock_multi(market_conn *c, const char *const *keys, size_t n, int64_t by,
                       lock_handle *h) {
    market *m = c->m;
    int64_t t0 = now_us(), left = by - t0 / 1000;
    if (left <= 0) {
        count_wait(m, 0, 0);
        return MARKET_ERR_BUSY;
    }
    int lrc = n == 1 ? lock_acquire(m->lock, keys[0], m->cfg.lock_ttl_ms, (uint32_t)left, h)
                     : lock_acquire_multi(m->lock, keys, n, m->cfg.lock_ttl_ms, (uint32_t)left, h);
    count_wait(m, now_us() - t0, lrc == LOCK_OK);
    if (lrc == LOCK_OK) return MARKET_OK;
    int rc = from_lock_err(lrc);
    if (rc == MARKET_ERR_STORE) /* why, with what the lock's store said (lock_last_error()) */
        market__fail(c, "lock %s: %s", lock_name(m->lock), lock_last_error());
    return rc;
}

/* market__lock_multi() of the one key. */
int market__lock(market_conn *c, const char *key, int64_t by, lock_handle *h) {
    return market__lock_multi(c, &key, 1, by, h);
}

/* Describes lease h on key as entry k of hd (its fencing record, fence and token). */
void market__held_set(market__held *hd, size_t k, const char *key, const lock_handle *h) {
    market__held_name(hd, k, key);
    snprintf(hd->fence[k], sizeof hd->fence[k], "%llu", (unsigned long long)h->fence);
    hd->fence_v[k] = h->fence;
    memcpy(hd->token[k], h->token, sizeof hd->token[k]);
}

_Static_assert(MARKET__LOCK_KEY_MAX - 1 + sizeof LOCK_WANTED_SUFFIX <= MARKET__FENCED_MAX,
               "a lock key's waiters' mark fits market__held's wanted[]");

/* Names lease k of hd (key, fencing record, waiters' mark) before its fence is known. */
void market__held_name(market__held *hd, size_t k, const char *key) {
    hd->key[k] = key;
    snprintf(hd->fenced[k], sizeof hd->fenced[k], "%s:fenced", key);
    snprintf(hd->wanted[k], sizeof hd->wanted[k], "%s" LOCK_WANTED_SUFFIX, key);
    if (hd->n < k + 1) hd->n = k + 1;
}

/* Runs fn until it decides, under the leases h[0..hd->n) (none: optimistic).
 * When EXEC aborts, lock_extend() tells a lapsed lease (MARKET_ERR_LEASE_LOST)
 * from a write made without the lock (read again, up to TXN_RETRIES, within
 * the wait budget). Without leases it retries with a short random sleep
 * until the wait budget is spent (MARKET_ERR_CONFLICT). A slot on the move
 * is read again where it is now, after a pause when it is split (-ASK,
 * -TRYAGAIN), but on a lane's connection (c->set_aside) the split is handed
 * back at once: MARKET__REDIRECTED, nothing applied. Returns fn's result
 * or a lock error mapped to a market code; releases nothing. */
int market__attempts(market_conn *c, lock_handle *h, const market__held *hd, market__attempt fn,
                     void *ud) {
    market *m = c->m;
    int64_t deadline = rconn_now_ms() + m->cfg.acquire_timeout_ms;
    int rc;
    for (int i = 1;; i++) {
        rc = fn(c, hd, ud);
        if (rc == MARKET__REDIRECTED) { /* its slot moved under it: read again where it is */
            if (c->set_aside && c->redirect == 2) break; /* split: its lane tries it later */
            rc = MARKET_ERR_STORE;     /* if it keeps moving (c->errstr says how) */
            if (i >= TXN_RETRIES || rconn_now_ms() >= deadline) break;
            market__redirect_pause(c, i);
            continue;
        }
        if (rc != TXN_ABORTED) break;
        MARKET__COUNT(m, txn_aborts);
        rc = MARKET_ERR_CONFLICT;
        if (hd->n == 0) {
            if (rconn_now_ms() >= deadline) break;
            sleep_us(random() % OPTIMISTIC_BACKOFF_US);
            continue;
        }
        if (i >= TXN_RETRIES || rconn_now_ms() >= deadline) break;
        /* Aborted under the lock: our lease lapsed, or someone wrote without it. */
        for (size_t k = 0; k < hd->n; k++) {
            int lrc = lock_extend(m->lock, &h[k], m->cfg.lock_ttl_ms);
            if (lrc < 0 && lrc != LOCK_ERR_UNSUPPORTED) return from_lock_err(lrc);
        }
    }
    return rc;
}

/* Counts a guarded operation's failure in the stats. Can't fail. */
void market__count_result(market *m, int rc) {
    if (rc == MARKET_ERR_BUSY) MARKET__COUNT(m, lock_busy);
    if (rc == MARKET_ERR_LEASE_LOST) MARKET__COUNT(m, lease_lost);
    if (rc == MARKET_ERR_STORE) MARKET__COUNT(m, store_errors);
}

/* Appends to w the read (one MGET) of the fencing records of held and, when
 * held->tokens, of the lock keys themselves and their waiters' marks
 * (held->n > 0), then of the string key also, when not NULL: the caller's,
 * at element market__held_read_len(held) of the reply, so that it costs no
 * command of its own. Read under a WATCH of the fencing records and lock
 * keys, its reply tells market__held_lost() whether the leases are still
 * ours, and market__held_wanted() whether someone waits for them. */
void market__held_read_buf(const market__held *held, const char *also, market__buf *w) {
    market__rd_values_begin(w);
    for (size_t i = 0; i < held->n; i++) market__buf_arg(w, held->fenced[i]);
    for (size_t i = 0; held->tokens && i < held->n; i++) market__buf_arg(w, held->key[i]);
    for (size_t i = 0; held->tokens && i < held->n; i++) market__buf_arg(w, held->wanted[i]);
    if (also) market__buf_arg(w, also);
    market__buf_end(w, 1);
}

/* The elements of market__held_read_buf()'s reply that are held's: its caller's
 * key, if any, comes after them. This function can't fail. */
size_t market__held_read_len(const market__held *held) {
    return held->n * (held->tokens ? 3 : 1);
}

/* Given the reply to market__held_read_buf()'s read (with also keys of the caller's:
 * 0 or 1), returns 1 when, with held->tokens, another client waits for one of the leases
 * (its LOCK_WANTED_SUFFIX mark, lock.h), so its holder gives it up when it can instead of
 * keeping it for orders to come; else 0. */
int market__held_wanted(const market__held *held, const redisReply *mget, size_t also) {
    if (!held->tokens || !mget || !market__reply_array(mget, market__held_read_len(held) + also, 0))
        return 0;
    for (size_t i = 0; i < held->n; i++)
        if (!market__reply_nil(market__reply_at(mget, 2 * held->n + i))) return 1;
    return 0;
}

/* Given the reply to market__held_read_buf()'s read (with also keys of the
 * caller's: 0 or 1), returns 1 when a lease of held cannot commit: a newer
 * holder has committed (a stored fence above ours), or, when held->tokens, a
 * lock key no longer holds our token (the lease lapsed, or anyone speaking
 * the lock protocol took the key over); else 0. A missing or unreadable
 * fencing record counts as none. */
int market__held_lost(const market__held *held, const redisReply *mget, size_t also) {
    if (!mget || !market__reply_array(mget, SIZE_MAX, 0)) return held->tokens;
    if (!market__reply_array(mget, market__held_read_len(held) + also, 0)) return 1;
    for (size_t i = 0; i < held->n; i++) {
        int64_t seen;
        if (market__reply_i64(market__reply_at(mget, i), &seen) == 0 &&
            (uint64_t)seen > held->fence_v[i])
            return 1;
    }
    for (size_t i = 0; held->tokens && i < held->n; i++)
        if (!market__reply_is(market__reply_at(mget, held->n + i), held->token[i])) return 1;
    return 0;
}

/* Appends to w the removal of the fencing record of the lease
 * "lock:<kind>:{<realm>}:<id>" when held holds it, after our fences: what
 * it guarded (a listing) is gone, sold out or taken back, so its record goes
 * in the same commit instead of staying forever. No window reopens: a
 * holder with an older fence either read before this commit (its WATCH of
 * the record aborts it) or reads no listing there; a new listing is made
 * under a new lease of the key, whose fence (one counter for every key) is
 * above every earlier one and is what its commit writes. */
void market__held_drop(const market__held *held, const char *kind, const char *realm,
                       const char *id, market__buf *w) {
    char key[MARKET__LOCK_KEY_MAX];
    market__lock_key(key, kind, realm, id);
    for (size_t i = 0; i < held->n; i++)
        if (strcmp(held->key[i], key) == 0) market__fx_fence_drop(w, held->fenced[i]);
}

