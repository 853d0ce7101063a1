/* market_sweep.c - the sweeper: a thread of every server that settles what
 * falls due at a time, not on a request (listings and auctions whose end
 * has come), exactly once, whichever server is alive.
 *
 * DESIGN
 * The realms whose listings may end are a set in the store
 * (MARKET__ENDING_KEY), written before the first listing with an end is
 * (market_ending_note(), or a realm's default duration: market_settings.c).
 * Every cfg.sweep_interval_ms the sweeper reads the set, and for each realm
 * the store's clock and the first SWEEP_BATCH ends of market:{r}:ends: a
 * realm with nothing due costs that read alone. When some are due it tries
 * the realm's sweep lease (lock:sweep:{r}) with the lock layer, without
 * waiting: a realm another server sweeps is left to it. Holding the lease
 * (a watchdog renews it, up to SWEEP_HOLD_MS), it queues an ending for
 * each one due (a listing's MARKET_ORDER_EXPIRE, an auction's "@<id>"
 * MARKET_ORDER_AUCTION_END), waits for their outcomes, and goes on while a
 * whole batch was due; then it gives the lease up.
 *
 * An ending is an order of the listing or the auction kind: it is
 * decided against the end as read under the batch's guard, so it commits at
 * most once, whoever queued it and however often, and it carries the
 * lease's token, which the commit checks (when the lock lives in the store):
 * a sweeper paused past its lease commits nothing after another took over.
 * A sweeper that dies leaves its lease to lapse; the next to try takes it.
 * So an ending is settled within about sweep_interval_ms after it falls due
 * while one server sweeps, and within sweep_lease_ms + sweep_interval_ms
 * after the sweeper holding it died or paused (OPERATIONS.md).
 */
#include "market/market_order.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "market/market_store.h"

#define SWEEP_BATCH 256     /* endings read and queued at once */
#define SWEEP_HOLD_MS 60000 /* most a sweeper keeps a realm's lease */

struct market__sweeper {
    market *m;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled: stop, or an ending answered */
    int stop;
    size_t pending; /* endings queued and not answered yet */
    market_order order[SWEEP_BATCH];
    char item[SWEEP_BATCH][MARKET_ID_MAX + 1];
    char seller[SWEEP_BATCH][MARKET_ID_MAX + 1];
    int64_t auction[SWEEP_BATCH]; /* an auction's ending (its id), or 0: a listing's */
    char realm[MARKET_REALM_MAX + 1];
    char token[LOCK_TOKEN_LEN + 1];
};

/* ---- the realms whose listings may end ---- */

/* Makes sure realm is among the realms whose listings may end (the sweepers
 * look there), before a listing of it with an end is queued: written (and
 * confirmed by the replicas, as a commit is) the first time for each of the
 * realms c's market remembers (the last MARKET__NOTED_MAX), and written again
 * by its sweeper every round, should the set have been deleted. Returns
 * MARKET_OK, or ERR_INVALID, ERR_NOT_REPLICATED, ERR_STORE, ERR_NOMEM. */
int market_ending_note(market_conn *c, const char *realm) {
    if (!c || !market_id_valid(realm)) return MARKET_ERR_INVALID;
    market *m = c->m;
    pthread_mutex_lock(&m->noted_mu);
    int known = 0;
    for (size_t i = 0; i < m->n_noted && !known; i++)
        known = strcmp(m->noted[i], realm) == 0;
    pthread_mutex_unlock(&m->noted_mu);
    if (known) return MARKET_OK;
    int rc = market__ending_add(c, realm);
    if (rc != MARKET_OK) return rc;
    pthread_mutex_lock(&m->noted_mu);
    memcpy(m->noted[m->noted_next], realm, strlen(realm) + 1);
    m->noted_next = (m->noted_next + 1) % MARKET__NOTED_MAX;
    if (m->n_noted < MARKET__NOTED_MAX) m->n_noted++;
    pthread_mutex_unlock(&m->noted_mu);
    return MARKET_OK;
}

/* Whether set, the realms whose listings may end as SMEMBERS read them, holds realm. */
static int in_set(const redisReply *set, const char *realm) {
    for (size_t i = 0; i < market__reply_len(set); i++)
        if (market__reply_is(market__reply_at(set, i), realm)) return 1;
    return 0;
}

/* Writes again each realm c's market noted (see market_ending_note()) that set, the realms
 * as read, lacks (it was deleted); none when all are there, as they are but after a
 * FLUSHALL. */
static void renote(market_conn *c, const redisReply *set) {
    market *m = c->m;
    char realm[MARKET__NOTED_MAX][MARKET_REALM_MAX + 1];
    pthread_mutex_lock(&m->noted_mu);
    size_t n = m->n_noted;
    memcpy(realm, m->noted, n * sizeof realm[0]);
    pthread_mutex_unlock(&m->noted_mu);
    for (size_t i = 0; i < n; i++)
        if (!in_set(set, realm[i]) && market__ending_add(c, realm[i]) != MARKET_OK)
            return; /* the next round */
}

/* ---- one realm's sweep ---- */

static void ending_done(market_order *o) {
    struct market__sweeper *sw = o->ud;
    pthread_mutex_lock(&sw->mu);
    sw->pending--;
    pthread_cond_broadcast(&sw->cv);
    pthread_mutex_unlock(&sw->mu);
}

/* Reads the store's clock and the first SWEEP_BATCH ends of realm rl, and
 * fills sw's endings with those due. Returns how many, or a market error. */
static int due_read(market_conn *c, struct market__sweeper *sw, const market__realm *rl) {
    market__buf b = {0};
    market__rd_time(&b);
    market__rd_ends_first(&b, rl, SWEEP_BATCH);
    int rc = market__read_buf(c, rl->id, &b); /* frees b on failure */
    if (rc < 0) return rc;
    int64_t now;
    const redisReply *z = b.rep[1];
    int n = 0;
    if (market__reply_time(b.rep[0], &now) < 0 || !market__reply_array(z, SIZE_MAX, 1))
        rc = market__fail(c, "reading the ends of realm %s", rl->id);
    for (size_t k = 0; rc == MARKET_OK && k < market__reply_len(z) / 2; k++) {
        int64_t end;
        int bad = market__reply_ending(z, k, &end, &sw->auction[n], sw->item[n], sw->seller[n]);
        if (end < 0 || end > now) break; /* sorted by end: the rest are later */
        if (!bad) n++;
    }
    market__replies_free(b.rep, b.n);
    market__buf_free(&b);
    return rc < 0 ? rc : n;
}

/* Queues sw's first n endings (realm sw->realm, under token, or none
 * checked) and waits for every outcome. Returns MARKET_OK, or the first
 * failure that is not "nothing due" (MARKET_ERR_LEASE_LOST: stop). */
static int endings_run(struct market__sweeper *sw, int n, const char *token) {
    market *m = sw->m;
    static const int64_t bounds[MARKET_LATE_BUCKETS - 1] = {MARKET_LATE_BUCKETS_MS};
    int rc = MARKET_OK;
    for (int i = 0; i < n; i++) {
        sw->order[i] = sw->auction[i] ? (market_order){.type = MARKET_ORDER_AUCTION_END,
                                                       .realm = sw->realm,
                                                       .id = sw->auction[i],
                                                       .token = token,
                                                       .done = ending_done,
                                                       .ud = sw}
                                      : (market_order){.type = MARKET_ORDER_EXPIRE,
                                                       .realm = sw->realm,
                                                       .player = sw->seller[i],
                                                       .item = sw->item[i],
                                                       .token = token,
                                                       .done = ending_done,
                                                       .ud = sw};
        pthread_mutex_lock(&sw->mu);
        sw->pending++;
        pthread_mutex_unlock(&sw->mu);
        int q = market__order_submit(m, &sw->order[i]);
        if (q != MARKET_OK) { /* not queued: never answered */
            sw->order[i].rc = q;
            pthread_mutex_lock(&sw->mu);
            sw->pending--;
            pthread_mutex_unlock(&sw->mu);
        }
    }
    pthread_mutex_lock(&sw->mu);
    while (sw->pending)
        pthread_cond_wait(&sw->cv, &sw->mu);
    pthread_mutex_unlock(&sw->mu);
    for (int i = 0; i < n; i++) {
        const market_order *o = &sw->order[i];
        if (o->rc == MARKET_OK) {
            int auction = o->type == MARKET_ORDER_AUCTION_END;
            int64_t late = auction ? o->res.auction.late_ms : o->res.unlist.late_ms;
            size_t b = 0;
            while (b < MARKET_LATE_BUCKETS - 1 && late > bounds[b])
                b++;
            if (!auction && o->res.unlist.units) MARKET__COUNT(m, expired);
            if (auction) MARKET__COUNT(m, auctions_ended);
            MARKET__COUNT(m, settled);
            atomic_fetch_add_explicit(&m->stats.late_ms, (uint64_t)late, memory_order_relaxed);
            atomic_fetch_add_explicit(&m->stats.late_bucket[b], 1, memory_order_relaxed);
        } else if (o->rc != MARKET_ERR_NOT_LISTED && o->rc != MARKET_ERR_AUCTION_CLOSED &&
                   o->rc != MARKET_ERR_NO_AUCTION && rc == MARKET_OK) { /* not: nothing due */
            rc = o->rc;
        }
    }
    return rc;
}

/* Sweeps realm on c when its sweep lease is free (see DESIGN). */
static void sweep_realm(struct market__sweeper *sw, market_conn *c, const char *realm) {
    market *m = sw->m;
    uint32_t lease = m->cfg.sweep_lease_ms ? m->cfg.sweep_lease_ms : MARKET_SWEEP_LEASE_MS;
    market__realm rl;
    memcpy(sw->realm, realm, strlen(realm) + 1);
    market__realm_init(&rl, sw->realm);
    int n = due_read(c, sw, &rl); /* nothing due: no lease asked for, nothing written */
    if (n <= 0) return;
    lock_handle h;
    if (lock_acquire(m->lock, rl.sweep, lease, 0, &h) != LOCK_OK) return; /* another sweeps */
    lock_watchdog *wd = NULL;
    if (lock_watchdog_start(m->lock, &h, lease, SWEEP_HOLD_MS, &wd) != LOCK_OK) {
        (void)lock_release(m->lock, &h);
        return;
    }
    MARKET__COUNT(m, sweeps);
    memcpy(sw->token, h.token, sizeof sw->token);
    const char *token = m->lock_in_store ? sw->token : NULL;
    /* what was due before the lease (an ending decides on what it reads: queueing one that
     * another sweeper settled meanwhile does nothing), then more while whole batches were */
    while (n > 0 && lock_watchdog_check(wd, NULL) == LOCK_OK &&
           endings_run(sw, n, token) == MARKET_OK && n == SWEEP_BATCH && !sw->stop)
        n = due_read(c, sw, &rl);
    (void)lock_watchdog_stop(wd, &h);
    (void)lock_release(m->lock, &h);
}

/* Reads the realms whose listings may end and sweeps each (see DESIGN). */
static void sweep_all(struct market__sweeper *sw, market_conn *c) {
    market__buf b = {0};
    market__rd_ending(&b);
    redisReply *r = NULL;
    int rc = market__read_one(c, MARKET__ENDING_TAG, &b, &r);
    market__buf_free(&b);
    if (rc < 0) return; /* the store is down: the next round tries again */
    renote(c, r);
    for (size_t i = 0; i < market__reply_len(r) && !sw->stop; i++) {
        char realm[MARKET_REALM_MAX + 1];
        if (market__reply_text(market__reply_at(r, i), realm, sizeof realm) == 0 &&
            market_id_valid(realm))
            sweep_realm(sw, c, realm);
    }
    freeReplyObject(r);
}

static void *sweeper_main(void *arg) {
    struct market__sweeper *sw = arg;
    market *m = sw->m;
    uint32_t every = m->cfg.sweep_interval_ms ? m->cfg.sweep_interval_ms : MARKET_SWEEP_INTERVAL_MS;
    int err;
    market_conn *c = market_conn_new(m, &err);
    pthread_mutex_lock(&sw->mu);
    while (!sw->stop) {
        pthread_mutex_unlock(&sw->mu);
        if (c) sweep_all(sw, c);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += every / 1000;
        ts.tv_nsec += (long)(every % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&sw->mu);
        while (!sw->stop && pthread_cond_timedwait(&sw->cv, &sw->mu, &ts) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&sw->mu);
    market_conn_free(c);
    return NULL;
}

/* ---- the sweeper's life ---- */

/* Starts m's sweeper (see DESIGN): a thread that settles the endings of
 * every realm's listings until market_shutdown(). Returns MARKET_OK (also
 * when it runs already), or ERR_INVALID (m NULL), ERR_NOMEM (no thread). */
int market_sweeper_start(market *m) {
    if (!m) return MARKET_ERR_INVALID;
    if (m->sweeper) return MARKET_OK;
    struct market__sweeper *sw = calloc(1, sizeof *sw);
    if (!sw) return MARKET_ERR_NOMEM;
    sw->m = m;
    pthread_condattr_t ca;
    int ok = 0;
    if (pthread_condattr_init(&ca) == 0) {
        ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
             pthread_cond_init(&sw->cv, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    if (ok && pthread_mutex_init(&sw->mu, NULL) != 0) {
        pthread_cond_destroy(&sw->cv);
        ok = 0;
    }
    if (!ok) {
        free(sw);
        return MARKET_ERR_NOMEM;
    }
    if (pthread_create(&sw->thread, NULL, sweeper_main, sw) != 0) {
        pthread_cond_destroy(&sw->cv);
        pthread_mutex_destroy(&sw->mu);
        free(sw);
        return MARKET_ERR_NOMEM;
    }
    m->sweeper = sw;
    return MARKET_OK;
}

/* Stops m's sweeper, if it runs: its endings under way are answered first,
 * its lease given up. Idempotent; this function can't fail. */
void market__sweeper_stop(market *m) {
    struct market__sweeper *sw = m ? m->sweeper : NULL;
    if (!sw) return;
    pthread_mutex_lock(&sw->mu);
    sw->stop = 1;
    pthread_cond_broadcast(&sw->cv);
    pthread_mutex_unlock(&sw->mu);
    pthread_join(sw->thread, NULL);
    pthread_cond_destroy(&sw->cv);
    pthread_mutex_destroy(&sw->mu);
    free(sw);
    m->sweeper = NULL;
}
