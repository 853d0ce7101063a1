/* lock_local.c - in-process lock backend with Redis-like lease semantics.
 *
 * For tests and single-process use: it stands in for Redis in market/ tests and
 * obeys the same contract as lock_redis.c (tokens, fences, leases that expire).
 *
 * DESIGN
 * One mutex guards a fixed-size hash table of resources; one condition variable
 * (on CLOCK_MONOTONIC, so wall-clock jumps do not matter) wakes waiters. A
 * resource is held while its token is set and now < expires_at_ms; an expired
 * lease counts as free, exactly like a Redis key set with PX. A waiter sleeps
 * in pthread_cond_timedwait until the earlier of its own deadline and the
 * holder's expiry, so expiry needs no wake-up call and nobody spins; release
 * broadcasts. Resources are never removed while the client lives, which keeps
 * each key's fence counter growing and keeps a waiter's resource pointer valid
 * across waits. A key's fences start at the wall clock (microseconds), so a
 * restarted process still hands out fences above those it gave before.
 *
 * Several keys (lock_acquire_multi) are taken under the one mutex, all at once
 * when every one is free, else none: a waiter never holds some keys while it
 * waits for others, so no order of keys can deadlock. It sleeps until the
 * earliest expiry among the keys still held, or a release.
 *
 * A reentrant lease (lock_acquire_owned) is the same record with an owner and
 * a count of holds: its owner's next acquisition adds a hold (same token and
 * fence; the expiry moves later, never earlier) and each release takes one
 * away, the last freeing the record. A release or extend must name the
 * record's token and owner ("" for a plain lease).
 */
#include "lock/lock.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lock/lock_impl.h"

#define LOCAL_BUCKETS 64

struct local_res {
    char key[LOCK_KEY_MAX + 1];
    char token[LOCK_TOKEN_LEN + 1]; /* holder's token; empty when released */
    int64_t expires_at_ms;          /* monotonic; the lease is over at this instant */
    uint64_t fence;                 /* acquisitions so far; never reset */
    char owner[LOCK_OWNER_MAX + 1]; /* a reentrant lease's owner; "" for a plain lease */
    uint32_t holds;                 /* a reentrant lease's holds */
    struct local_res *next;         /* bucket chain */
};

struct local_impl {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC; broadcast on release */
    struct local_res *buckets[LOCAL_BUCKETS];
};

/* ---- private ---- */

static size_t key_hash(const char *key) {
    return lock__key_hash(key) % LOCAL_BUCKETS;
}

/* Returns key's resource, or NULL. Called with mu held. */
static struct local_res *res_find(struct local_impl *li, const char *key) {
    for (struct local_res *r = li->buckets[key_hash(key)]; r != NULL; r = r->next)
        if (strcmp(r->key, key) == 0) return r;
    return NULL;
}

/* Returns key's resource, creating it, or NULL when out of memory. Called with mu held. */
static struct local_res *res_get(struct local_impl *li, const char *key) {
    struct local_res *r = res_find(li, key);
    if (r != NULL) return r;
    r = calloc(1, sizeof *r);
    if (r == NULL) return NULL;
    strcpy(r->key, key); /* length checked by lock.c */
    /* Fences start at the wall clock in microseconds, so they keep growing
     * across restarts of the process (a store may remember the last one). */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r->fence = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
    size_t b = key_hash(key);
    r->next = li->buckets[b];
    li->buckets[b] = r;
    return r;
}

static int res_held(const struct local_res *r, int64_t now) {
    return r->token[0] != '\0' && now < r->expires_at_ms;
}

/* Returns 1 when h's token and owner hold r's unexpired lease. */
static int res_held_by(const struct local_res *r, const lock_handle *h, int64_t now) {
    return res_held(r, now) && strcmp(r->token, h->token) == 0 && strcmp(r->owner, h->owner) == 0;
}

/* Starts a new lease on r: token, expiry, the next fence, owner ("" for a plain lease). Called
 * with mu held. */
static void res_take(struct local_res *r, const char *token, int64_t now, uint32_t ttl_ms,
                     const char *owner) {
    memcpy(r->token, token, LOCK_TOKEN_LEN + 1);
    r->expires_at_ms = now + ttl_ms;
    r->fence++;
    strcpy(r->owner, owner); /* length checked by lock.c */
    r->holds = owner[0] != '\0' ? 1 : 0;
}

/* Fills *out with r's lease as seen by this acquisition, valid until until_ms. */
static void res_fill(const struct local_res *r, int64_t until_ms, lock_handle *out) {
    strcpy(out->key, r->key);
    memcpy(out->token, r->token, LOCK_TOKEN_LEN + 1);
    out->fence = r->fence;
    out->valid_until_ms = until_ms;
    strcpy(out->owner, r->owner);
    out->holds = r->holds;
}

/* Waits, with li->mu held, for a change of the leases until the monotonic time wake (never
 * past deadline) unless the deadline has come. Returns LOCK_OK (look again), LOCK_ERR_BUSY
 * (now is past the deadline) or LOCK_ERR_BACKEND (the wait failed). */
static int local_wait(struct local_impl *li, int64_t now, int64_t wake, int64_t deadline) {
    if (now >= deadline) return LOCK_ERR_BUSY;
    struct timespec until;
    rconn_timespec_at(wake < deadline ? wake : deadline, &until);
    int e = pthread_cond_timedwait(&li->cv, &li->mu, &until);
    if (e != 0 && e != ETIMEDOUT && e != EINTR) {
        lock__why("pthread_cond_timedwait: %s", strerror(e));
        return LOCK_ERR_BACKEND;
    }
    return LOCK_OK;
}

/* ---- ops ---- */

static int local_acquire_multi(void *impl, const char *const *keys, size_t n, uint32_t ttl_ms,
                               uint32_t wait_ms, lock_handle *out) {
    struct local_impl *li = impl;
    int64_t deadline = rconn_now_ms() + wait_ms; /* the budget runs from the call's start */
    struct local_res *res[LOCK_MULTI_MAX];
    char token[LOCK_TOKEN_LEN + 1];
    int rc = lock__token_new(token);
    if (rc != LOCK_OK) return rc;

    if (pthread_mutex_lock(&li->mu) != 0) return LOCK_ERR_BACKEND;
    for (size_t i = 0; i < n; i++) {
        res[i] = res_get(li, keys[i]);
        if (res[i] == NULL) {
            rc = LOCK_ERR_NOMEM;
            goto done;
        }
    }
    for (;;) {
        int64_t now = rconn_now_ms();
        int64_t wake = deadline; /* the earliest expiry among held keys, or the deadline */
        int held = 0;
        for (size_t i = 0; i < n; i++) {
            if (!res_held(res[i], now)) continue;
            held = 1;
            if (res[i]->expires_at_ms < wake) wake = res[i]->expires_at_ms;
        }
        if (!held) {
            for (size_t i = 0; i < n; i++) {
                res_take(res[i], token, now, ttl_ms, "");
                res_fill(res[i], res[i]->expires_at_ms, &out[i]);
            }
            rc = LOCK_OK;
            goto done;
        }
        rc = local_wait(li, now, wake, deadline);
        if (rc != LOCK_OK) goto done;
    }
done:
    pthread_mutex_unlock(&li->mu);
    return rc;
}

static int local_acquire(void *impl, const char *key, uint32_t ttl_ms, uint32_t wait_ms,
                         lock_handle *out) {
    return local_acquire_multi(impl, &key, 1, ttl_ms, wait_ms, out);
}

/* Takes key for owner: a new hold on the lease owner has, at once, or a new lease when the
 * key is free, waiting up to wait_ms for that. */
static int local_acquire_owned(void *impl, const char *key, const char *owner, uint32_t ttl_ms,
                               uint32_t wait_ms, lock_handle *out) {
    struct local_impl *li = impl;
    int64_t deadline = rconn_now_ms() + wait_ms;
    char token[LOCK_TOKEN_LEN + 1];
    int rc = lock__token_new(token);
    if (rc != LOCK_OK) return rc;

    if (pthread_mutex_lock(&li->mu) != 0) return LOCK_ERR_BACKEND;
    struct local_res *r = res_get(li, key);
    if (r == NULL) {
        rc = LOCK_ERR_NOMEM;
        goto done;
    }
    for (;;) {
        int64_t now = rconn_now_ms();
        if (res_held(r, now) && r->owner[0] != '\0' && strcmp(r->owner, owner) == 0) {
            if (r->holds == UINT32_MAX) {
                rc = LOCK_ERR_INVALID; /* more holds than can be counted */
                goto done;
            }
            r->holds++;
            if (now + ttl_ms > r->expires_at_ms) r->expires_at_ms = now + ttl_ms;
            res_fill(r, now + ttl_ms, out);
            rc = LOCK_OK;
            goto done;
        }
        if (!res_held(r, now)) {
            res_take(r, token, now, ttl_ms, owner);
            res_fill(r, r->expires_at_ms, out);
            rc = LOCK_OK;
            goto done;
        }
        rc = local_wait(li, now, r->expires_at_ms, deadline);
        if (rc != LOCK_OK) goto done;
    }
done:
    pthread_mutex_unlock(&li->mu);
    return rc;
}

/* Frees r's lease and wakes the waiters. Called with mu held. */
static void res_free(struct local_impl *li, struct local_res *r) {
    r->token[0] = '\0';
    r->expires_at_ms = 0;
    r->owner[0] = '\0';
    r->holds = 0;
    pthread_cond_broadcast(&li->cv);
}

static int local_release(void *impl, const lock_handle *h) {
    struct local_impl *li = impl;
    if (pthread_mutex_lock(&li->mu) != 0) return LOCK_ERR_BACKEND;
    int rc = LOCK_ERR_NOT_OWNER;
    struct local_res *r = res_find(li, h->key);
    if (r != NULL && res_held_by(r, h, rconn_now_ms())) {
        res_free(li, r);
        rc = LOCK_OK;
    }
    pthread_mutex_unlock(&li->mu);
    return rc;
}

static int local_release_owned(void *impl, const lock_handle *h, uint32_t *left) {
    struct local_impl *li = impl;
    if (pthread_mutex_lock(&li->mu) != 0) return LOCK_ERR_BACKEND;
    int rc = LOCK_ERR_NOT_OWNER;
    struct local_res *r = res_find(li, h->key);
    if (r != NULL && res_held_by(r, h, rconn_now_ms())) {
        if (r->holds > 0) r->holds--;
        *left = r->holds;
        if (r->holds == 0) res_free(li, r);
        rc = LOCK_OK;
    }
    pthread_mutex_unlock(&li->mu);
    return rc;
}

/* A plain lease is reset to ttl_ms from now; a reentrant one only ever moves later. */
static int local_extend(void *impl, lock_handle *h, uint32_t ttl_ms) {
    struct local_impl *li = impl;
    if (pthread_mutex_lock(&li->mu) != 0) return LOCK_ERR_BACKEND;
    int rc = LOCK_ERR_LEASE_LOST;
    struct local_res *r = res_find(li, h->key);
    int64_t now = rconn_now_ms();
    if (r != NULL && res_held_by(r, h, now)) {
        if (r->owner[0] == '\0' || now + ttl_ms > r->expires_at_ms) r->expires_at_ms = now + ttl_ms;
        h->valid_until_ms = now + ttl_ms;
        rc = LOCK_OK;
    }
    pthread_mutex_unlock(&li->mu);
    return rc;
}

static void local_destroy(void *impl) {
    struct local_impl *li = impl;
    if (li == NULL) return;
    for (size_t b = 0; b < LOCAL_BUCKETS; b++) {
        struct local_res *r = li->buckets[b];
        while (r != NULL) {
            struct local_res *next = r->next;
            free(r);
            r = next;
        }
        li->buckets[b] = NULL;
    }
    pthread_cond_destroy(&li->cv);
    pthread_mutex_destroy(&li->mu);
    free(li);
}

static const struct lock_ops local_ops = {
    .name = "local",
    .acquire = local_acquire,
    .release = local_release,
    .extend = local_extend,
    .destroy = local_destroy,
    .acquire_multi = local_acquire_multi,
    .release_multi = NULL, /* one release per handle: each is a mutex hop */
    .acquire_owned = local_acquire_owned,
    .release_owned = local_release_owned,
};

/* ---- API ---- */

/* Returns a new in-process lock client; caller frees with lock_free(). Its leases live only
 * in this process and vanish with the client. Returns NULL with *err (when err is non-NULL)
 * set to LOCK_ERR_NOMEM, or LOCK_ERR_BACKEND if the mutex or condition variable cannot be
 * created; *err is LOCK_OK on success. */
lock_client *lock_local_new(int *err) {
    int dummy;
    if (err == NULL) err = &dummy;
    int mu_ok = 0, cv_ok = 0, attr_ok = 0;
    pthread_condattr_t attr;
    struct local_impl *li = calloc(1, sizeof *li);
    if (li == NULL) {
        *err = LOCK_ERR_NOMEM;
        return NULL;
    }
    *err = LOCK_ERR_BACKEND;
    if (pthread_mutex_init(&li->mu, NULL) != 0) goto fail;
    mu_ok = 1;
    if (pthread_condattr_init(&attr) != 0) goto fail;
    attr_ok = 1;
    if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0) goto fail;
    if (pthread_cond_init(&li->cv, &attr) != 0) goto fail;
    cv_ok = 1;
    pthread_condattr_destroy(&attr);
    attr_ok = 0;

    lock_client *c = lock__client_new(&local_ops, li, err);
    if (c == NULL) goto fail;
    return c;

fail:
    if (attr_ok) pthread_condattr_destroy(&attr);
    if (cv_ok) pthread_cond_destroy(&li->cv);
    if (mu_ok) pthread_mutex_destroy(&li->mu);
    free(li);
    return NULL;
}
