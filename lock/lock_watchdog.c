/* lock_watchdog.c - renews leases in the background while their holders work, up to a limit.
 *
 * Works with every backend that has an extend op: the renewals go through
 * c->ops->extend, exactly like lock_extend().
 *
 * DESIGN
 * One thread per lock_client, started with its first watchdog and joined by
 * lock_free(), serves all of that client's watchdogs: it sleeps on a
 * CLOCK_MONOTONIC condition variable until the earliest renewal is due,
 * renews that lease with the client mutex released (a renewal is a network
 * round trip), and goes back to sleep. A renewal is due ttl/3 after the
 * previous one, so two renewals can fail before the lease runs out; the first
 * one comes sooner when the handle's lease is shorter than that. Renewals
 * never reach past start + max_hold_ms: the last one is cut to end exactly
 * there, after which the watchdog is "done" and the lease lapses.
 *
 * A renewal that the store refuses, or answers only after the renewed lease
 * ran out (LEASE_LOST), ends the watchdog: the lease is gone. One that fails
 * on a store error is retried sooner, until the lease's deadline passes.
 * lock_release() marks a matching watchdog released, so no renewal follows it
 * (one already in flight then fails harmlessly: the key is gone or has
 * another token).
 *
 * Thread-safety: a watchdog's state and deadline are C11 atomics written by
 * the thread under the mutex and read by lock_watchdog_check() without it;
 * the text of the last failed renewal (why, for lock_last_error()) is
 * written and read under the mutex, and read only once the lease is lost.
 * The watchdog renews its own copy of the handle; the caller's handle is
 * written only by lock_watchdog_stop(), on the caller's thread. Stopping
 * waits for a renewal of that watchdog in flight, so its memory is never
 * freed under the thread.
 */
#include "lock/lock.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "lock/lock_impl.h"

enum {
    WD_ACTIVE,   /* renewing */
    WD_DONE,     /* max_hold_ms reached: no more renewals; valid until its deadline */
    WD_LOST,     /* a renewal was refused, or the deadline passed while renewals failed */
    WD_RELEASED, /* lock_release() of the handle */
};

struct lock_watchdog {
    lock_client *c;                 /* borrowed; outlives the watchdog */
    lock_handle h;                  /* own copy; written by the thread under c->wd.mu */
    uint32_t ttl_ms;                /* each renewal's lease */
    int64_t period_ms;              /* between renewals: ttl/3 */
    int64_t hold_until_ms;          /* no lease past this instant */
    int64_t next_ms;                /* when the next renewal is due */
    _Atomic int64_t valid_until_ms; /* the live deadline */
    _Atomic int state;              /* WD_* */
    int in_flight;                  /* the thread is renewing it, without the mutex */
    char why[LOCK__WHY_MAX];        /* the last failed renewal's reason; "" none */
    struct lock_watchdog *next;     /* c->wd.list */
};

/* ---- private ---- */

static int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* Unlinks w from set's list, if there. Called with set->mu held. */
static void wd_unlink(struct lock__wdset *set, lock_watchdog *w) {
    for (lock_watchdog **pp = &set->list; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            w->next = NULL;
            return;
        }
    }
}

/* Renews w once. Called by the thread with set->mu held; releases it during the round trip. */
static void wd_renew(lock_client *c, lock_watchdog *w) {
    struct lock__wdset *set = &c->wd;
    int64_t now = rconn_now_ms();
    if (now >= w->hold_until_ms) {
        atomic_store(&w->state, WD_DONE);
        return;
    }
    uint32_t ttl = w->ttl_ms;
    int last = 0;
    if (now + (int64_t)ttl >= w->hold_until_ms) {
        ttl = (uint32_t)(w->hold_until_ms - now);
        last = 1;
    }
    lock_handle copy = w->h;
    w->in_flight = 1;
    pthread_mutex_unlock(&set->mu);
    lock__why_begin(); /* this thread's reason under way: what the renewal's store says */
    int rc = c->ops->extend(c->impl, &copy, ttl);
    pthread_mutex_lock(&set->mu);
    w->in_flight = 0;
    if (rc != LOCK_OK) /* kept for lock_watchdog_check() on the holder's thread */
        snprintf(w->why, sizeof w->why, "%s%s%.200s", lock_strerror(rc),
                 lock__why_now()[0] ? ": " : "", lock__why_now());
    now = rconn_now_ms();
    if (atomic_load(&w->state) == WD_ACTIVE) {
        if (rc == LOCK_OK) {
            w->h.valid_until_ms = copy.valid_until_ms;
            atomic_store(&w->valid_until_ms, copy.valid_until_ms);
            w->next_ms = now + w->period_ms;
            if (last) atomic_store(&w->state, WD_DONE);
        } else if (rc == LOCK_ERR_LEASE_LOST || rc == LOCK_ERR_NOT_OWNER ||
                   now >= w->h.valid_until_ms) {
            atomic_store(&w->state, WD_LOST);
        } else { /* a store error: try again well before the deadline */
            int64_t retry = min64(w->period_ms / 3, (w->h.valid_until_ms - now) / 2);
            w->next_ms = now + (retry < 1 ? 1 : retry);
        }
    }
    pthread_cond_broadcast(&set->cv); /* a stopper may wait for this renewal */
}

static void *wd_main(void *arg) {
    lock_client *c = arg;
    (void)prctl(PR_SET_NAME, "lock-watchdog", 0, 0, 0); /* for top -H and perf; cosmetic */
    struct lock__wdset *set = &c->wd;
    pthread_mutex_lock(&set->mu);
    while (!set->quit) {
        int64_t now = rconn_now_ms(), soonest = INT64_MAX;
        lock_watchdog *due = NULL;
        for (lock_watchdog *w = set->list; w != NULL && due == NULL; w = w->next) {
            if (atomic_load(&w->state) != WD_ACTIVE) continue;
            if (w->next_ms <= now)
                due = w;
            else
                soonest = min64(soonest, w->next_ms);
        }
        if (due != NULL) {
            wd_renew(c, due);
        } else if (soonest == INT64_MAX) {
            pthread_cond_wait(&set->cv, &set->mu);
        } else {
            struct timespec ts;
            rconn_timespec_at(soonest, &ts);
            pthread_cond_timedwait(&set->cv, &set->mu, &ts);
        }
    }
    pthread_mutex_unlock(&set->mu);
    return NULL;
}

/* Writes why w's lease is lost into the calling thread's reason under way (lock__why()). */
static void wd_why(const lock_watchdog *w) {
    struct lock__wdset *set = &w->c->wd;
    pthread_mutex_lock(&set->mu);
    int st = atomic_load(&w->state);
    if (st == WD_RELEASED)
        lock__why("the lease was released");
    else if (w->why[0] != '\0')
        lock__why("%s renewal: %s", st == WD_LOST ? "last" : "a", w->why);
    else
        lock__why("the lease ran out%s", st == WD_DONE ? " after max_hold_ms" : "");
    pthread_mutex_unlock(&set->mu);
}

/* LOCK_OK while w's lease is held by what w knows, else LOCK_ERR_LEASE_LOST. */
static int wd_status(const lock_watchdog *w, int64_t *valid_until_ms) {
    int st = atomic_load(&w->state);
    int64_t until = atomic_load(&w->valid_until_ms);
    if (valid_until_ms != NULL) *valid_until_ms = until;
    if ((st == WD_ACTIVE || st == WD_DONE) && rconn_now_ms() < until) return LOCK_OK;
    return LOCK_ERR_LEASE_LOST;
}

/* ---- API ---- */

/* Starts renewing the lease h describes (h is copied; the caller's handle is never written by
 * the watchdog) to ttl_ms every ttl_ms/3, never past max_hold_ms from now; see lock.h. On
 * success *out is a new watchdog; caller ends it with lock_watchdog_stop() before lock_free(c).
 * Fails with LOCK_ERR_INVALID (NULL c/h/out, a malformed handle, ttl_ms or max_hold_ms 0),
 * LOCK_ERR_UNSUPPORTED (the backend cannot extend), LOCK_ERR_NOMEM or LOCK_ERR_BACKEND (the
 * thread cannot be started); *out (when out is non-NULL) is then NULL. */
int lock_watchdog_start(lock_client *c, const lock_handle *h, uint32_t ttl_ms, uint32_t max_hold_ms,
                        lock_watchdog **out) {
    lock__why_begin();
    if (out != NULL) *out = NULL;
    if (c == NULL || out == NULL || !lock__handle_ok(h) || ttl_ms == 0 || max_hold_ms == 0)
        return lock__why_end(LOCK_ERR_INVALID);
    if (c->ops->extend == NULL) return lock__why_end(LOCK_ERR_UNSUPPORTED);
    lock_watchdog *w = calloc(1, sizeof *w);
    if (w == NULL) return lock__why_end(LOCK_ERR_NOMEM);
    int64_t now = rconn_now_ms();
    w->c = c;
    w->h = *h;
    w->ttl_ms = ttl_ms;
    w->period_ms = ttl_ms / 3 > 0 ? ttl_ms / 3 : 1;
    w->hold_until_ms = now + max_hold_ms;
    int64_t first = min64(w->period_ms, (h->valid_until_ms - now) / 2);
    w->next_ms = now + (first > 0 ? first : 0);
    atomic_init(&w->valid_until_ms, h->valid_until_ms);
    atomic_init(&w->state, WD_ACTIVE);

    struct lock__wdset *set = &c->wd;
    if (pthread_mutex_lock(&set->mu) != 0) {
        free(w);
        lock__why("cannot lock the watchdogs' mutex");
        return lock__why_end(LOCK_ERR_BACKEND);
    }
    if (!set->running) {
        set->quit = 0;
        int e = pthread_create(&set->thread, NULL, wd_main, c);
        if (e != 0) {
            pthread_mutex_unlock(&set->mu);
            free(w);
            lock__why("cannot start the watchdog thread: %s", strerror(e));
            return lock__why_end(LOCK_ERR_BACKEND);
        }
        set->running = 1;
    }
    w->next = set->list;
    set->list = w;
    pthread_cond_broadcast(&set->cv);
    pthread_mutex_unlock(&set->mu);
    *out = w;
    return LOCK_OK;
}

/* Tells whether w's lease is still held: LOCK_OK while renewals succeed (or, after max_hold_ms,
 * until the last deadline), LOCK_ERR_LEASE_LOST once a renewal was refused, the deadline passed,
 * or the handle was released. When valid_until_ms is non-NULL it receives the live deadline
 * (monotonic). Safe from any thread while w is not stopped. Fails with LOCK_ERR_INVALID for a
 * NULL w. */
int lock_watchdog_check(const lock_watchdog *w, int64_t *valid_until_ms) {
    lock__why_begin();
    if (w == NULL) return lock__why_end(LOCK_ERR_INVALID);
    int rc = wd_status(w, valid_until_ms);
    if (rc != LOCK_OK) wd_why(w);
    return lock__why_end(rc);
}

/* Stops w's renewals (waiting for one in flight), frees w, and when h is non-NULL and names
 * the same lease, writes the last deadline into h->valid_until_ms. Does not release the lease.
 * Returns LOCK_OK if the lease was held at that moment, LOCK_ERR_LEASE_LOST if not, or
 * LOCK_ERR_INVALID for a NULL w (nothing happens). w is invalid afterwards. */
int lock_watchdog_stop(lock_watchdog *w, lock_handle *h) {
    lock__why_begin();
    if (w == NULL) return lock__why_end(LOCK_ERR_INVALID);
    struct lock__wdset *set = &w->c->wd;
    pthread_mutex_lock(&set->mu);
    wd_unlink(set, w);
    while (w->in_flight)
        pthread_cond_wait(&set->cv, &set->mu);
    pthread_mutex_unlock(&set->mu);
    int64_t until;
    int rc = wd_status(w, &until);
    if (rc != LOCK_OK) wd_why(w);
    if (h != NULL && strcmp(h->key, w->h.key) == 0 && strcmp(h->token, w->h.token) == 0)
        h->valid_until_ms = until;
    free(w);
    return lock__why_end(rc);
}

/* ---- module-internal hooks ---- */

/* Initialises the caller's *set: no watchdog, no thread yet. Returns LOCK_OK, or
 * LOCK_ERR_BACKEND when the mutex or condition variable cannot be created. */
int lock__watchdog_init(struct lock__wdset *set) {
    memset(set, 0, sizeof *set);
    if (pthread_mutex_init(&set->mu, NULL) != 0) return LOCK_ERR_BACKEND;
    if (rconn_cond_init_monotonic(&set->cv) != RCONN_OK) {
        pthread_mutex_destroy(&set->mu);
        return LOCK_ERR_BACKEND;
    }
    return LOCK_OK;
}

/* Marks c's watchdogs of h's lease (same key and token) released: no more renewals. This
 * function can't fail. */
void lock__watchdog_forget(lock_client *c, const lock_handle *h) {
    struct lock__wdset *set = &c->wd;
    if (pthread_mutex_lock(&set->mu) != 0) return;
    for (lock_watchdog *w = set->list; w != NULL; w = w->next)
        if (strcmp(w->h.key, h->key) == 0 && strcmp(w->h.token, h->token) == 0)
            atomic_store(&w->state, WD_RELEASED);
    pthread_mutex_unlock(&set->mu);
}

/* Ends c's watchdog thread (waiting for a renewal in flight) and frees the watchdogs still
 * listed. This function can't fail. */
void lock__watchdog_shutdown(lock_client *c) {
    struct lock__wdset *set = &c->wd;
    pthread_mutex_lock(&set->mu);
    set->quit = 1;
    pthread_cond_broadcast(&set->cv);
    int running = set->running;
    set->running = 0;
    pthread_mutex_unlock(&set->mu);
    if (running) pthread_join(set->thread, NULL);
    while (set->list != NULL) {
        lock_watchdog *w = set->list;
        set->list = w->next;
        free(w);
    }
}
