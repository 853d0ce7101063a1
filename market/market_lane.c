/* market_lane.c - a combiner lane's parts (market_combine.c): resting realms, the lane's
 * lock wait and its timed wait.
 *
 * DESIGN
 * A lane's worker serves one realm's batch at a time, so any wait in place
 * for one realm holds up every other realm of the lane. On a Redis Cluster a
 * realm's store can be in trouble that passes while the others are fine: its
 * slot split between two masters during a migration (-ASK, -TRYAGAIN to the
 * multi-key commands of every batch), or its master failing over
 * (-CLUSTERDOWN, -TRYAGAIN to the lock's script). A lane's connection hands
 * such trouble back at once instead of pausing (market_conn.set_aside:
 * MARKET__REDIRECTED, nothing applied), and so does its lock wait after
 * MARKET__LANE_SLICE_MS (market__lane_lock); the worker then puts the
 * batch's purchases back at the head of its queue, in order, and lets the
 * realm rest (market__rest_begin): 2, 4, 8 ... MARKET__REST_CAP_MS ms, longer
 * with each rest in a row. Meanwhile it serves other realms; a resting
 * realm's purchases, old and new, stay queued in their order (so outcomes
 * are still those of serial execution in queue order), and one whose wait
 * budget ends there is answered MARKET_ERR_BUSY, as any queued purchase is.
 * The realm's next batch reuses the token of the claims the set-aside batch
 * may have made (market__rest_token); its first batch without trouble ends
 * the rest (market__rest_end). A lock held elsewhere is contention, not
 * trouble: it is still waited for in place.
 */
#include "market/market_lane.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- resting realms ---- */

/* Returns the index of realm's (sale's) entry in r, or r->n when it has none. */
static size_t rest_find(const market__rest *r, const char *realm, const char *sale) {
    size_t i = 0;
    while (i < r->n && (strcmp(r->e[i].realm, realm) != 0 || strcmp(r->e[i].sale, sale) != 0))
        i++;
    return i;
}

/* Returns 1 when realm's (sale's; "" for purchases) batches may be served at now: it is
 * not resting, or its rest is over; else 0. This function can't fail. */
int market__rest_due(const market__rest *r, const char *realm, const char *sale, int64_t now) {
    size_t i = r->n ? rest_find(r, realm, sale) : 0;
    return i == r->n || now >= r->e[i].until_ms;
}

/* Lets realm (sale) rest from now, longer than its last rest when it rests again, and
 * keeps token (the claims of the batch set aside; NULL: none) for its next batch. When
 * every entry is taken, the one whose rest ended longest ago makes room. Returns 0, or -1
 * when all MARKET__REST_MAX realms are still resting (then the caller fails the batch). */
int market__rest_begin(market__rest *r, const char *realm, const char *sale, const char *token,
                       int64_t now) {
    size_t i = rest_find(r, realm, sale);
    struct market__rest_entry *e = i < r->n ? &r->e[i] : NULL;
    if (!e && r->n < MARKET__REST_MAX) {
        e = &r->e[r->n++];
        memset(e, 0, sizeof *e);
    } else if (!e) {
        for (size_t k = 0; k < r->n; k++)
            if (r->e[k].until_ms <= now && (!e || r->e[k].until_ms < e->until_ms)) e = &r->e[k];
        if (!e) return -1;
        memset(e, 0, sizeof *e);
    }
    if (!e->realm[0]) {
        snprintf(e->realm, sizeof e->realm, "%s", realm);
        snprintf(e->sale, sizeof e->sale, "%s", sale);
    }
    if (token && !e->has_token) {
        memcpy(e->token, token, sizeof e->token);
        e->has_token = 1;
    }
    e->tries++;
    int64_t ms = e->tries >= 6 ? MARKET__REST_CAP_MS : (int64_t)2 << (e->tries - 1);
    e->until_ms = now + (ms < MARKET__REST_CAP_MS ? ms : MARKET__REST_CAP_MS);
    return 0;
}

/* Ends realm's (sale's) rest, if any: its batch went through. This function can't fail. */
void market__rest_end(market__rest *r, const char *realm, const char *sale) {
    size_t i = r->n ? rest_find(r, realm, sale) : 0;
    if (i < r->n) r->e[i] = r->e[--r->n];
}

/* Copies into token the claims' token kept for realm (sale) by market__rest_begin().
 * Returns 1, or 0 when none is kept. This function can't fail. */
int market__rest_token(const market__rest *r, const char *realm, const char *sale,
                       char token[MARKET__TOKEN_LEN + 1]) {
    size_t i = r->n ? rest_find(r, realm, sale) : 0;
    if (i == r->n || !r->e[i].has_token) return 0;
    memcpy(token, r->e[i].token, MARKET__TOKEN_LEN + 1);
    return 1;
}

/* Returns when the next rest after now ends, or 0 when no realm rests past now. This
 * function can't fail. */
int64_t market__rest_next(const market__rest *r, int64_t now) {
    int64_t next = 0;
    for (size_t i = 0; i < r->n; i++)
        if (r->e[i].until_ms > now && (!next || r->e[i].until_ms < next)) next = r->e[i].until_ms;
    return next;
}

/* ---- a lane's waits ---- */

/* Takes the locks on keys[0..n) for a lane's batch, waiting until the monotonic time by
 * (ms) for a lock held elsewhere, as market__lock_multi() does; but when c hands trouble
 * back (c->set_aside) and the lock's store is still failing after MARKET__LANE_SLICE_MS
 * (a slot on the move, a failover under way: the lock layer retries those) while by is
 * ahead, it gives up early with MARKET__REDIRECTED, so the lane can set the batch aside.
 * Returns MARKET_OK, MARKET__REDIRECTED, or market__lock_multi()'s errors; with
 * MARKET__REDIRECTED and MARKET_ERR_STORE, c->errstr says why (the lock's reason). */
int market__lane_lock(market_conn *c, const char *const *keys, size_t n, int64_t by,
                      lock_handle *h) {
    if (!c->set_aside) return market__lock_multi(c, keys, n, by, h);
    int64_t t0 = rconn_now_ms(), slice = t0 + MARKET__LANE_SLICE_MS;
    int rc = market__lock_multi(c, keys, n, by < slice ? by : slice, h);
    int64_t now = rconn_now_ms();
    if (rc == MARKET_ERR_BUSY && now < by) /* held elsewhere: wait in place, as ever */
        return market__lock_multi(c, keys, n, by, h);
    if (rc == MARKET_ERR_STORE && now < by && now >= slice) {
        char why[sizeof c->errstr]; /* the lock's reason, kept for the batch set aside */
        snprintf(why, sizeof why, "%s", c->errstr);
        market__fail(c, "set aside after %lld ms: %s", (long long)(now - t0), why);
        return MARKET__REDIRECTED;
    }
    return rc;
}

/* Waits on cv (made by rconn_cond_init_monotonic(), mu held) until signalled or, when
 * until_ms > 0, until the monotonic time until_ms. This function can't fail. */
void market__lane_wait(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t until_ms) {
    if (until_ms <= 0) {
        pthread_cond_wait(cv, mu);
        return;
    }
    struct timespec ts;
    rconn_timespec_at(until_ms, &ts);
    (void)pthread_cond_timedwait(cv, mu, &ts); /* ETIMEDOUT, or woken: the caller looks again */
}
