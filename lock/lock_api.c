/* lock_api.c - the lock_ API (lock.h): argument checks, dispatch to a backend, shared helpers.
 *
 * Every public operation checks its arguments here, once, and then calls the
 * backend through c->ops (the dictType / ConnectionType pattern), so backends
 * never repeat the checks. A NULL optional op answers LOCK_ERR_UNSUPPORTED
 * (release_multi falls back to one release per handle). The file also holds
 * what the backends share: client wrapping, token generation, retry backoff,
 * sleeping, and the former lock_ names of rconn/'s clock and address
 * parser. The checks of keys and handles, and the errors' texts, are
 * lock_check.c's.
 */
#include "lock/lock.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "lock/lock_impl.h"

/* ---- private ---- */


/* Returns 1 when owner is a NUL-terminated string of 1..LOCK_OWNER_MAX bytes. */
static int owner_ok(const char *owner) {
    if (owner == NULL) return 0;
    size_t n = strnlen(owner, LOCK_OWNER_MAX + 1);
    return n > 0 && n <= LOCK_OWNER_MAX;
}


/* Releases the valid handle h: a plain lease is freed, a reentrant one loses a hold. The
 * watchdogs of h's lease stop renewing when it is freed or found not ours; a reentrant lease
 * that keeps holds (or whose fate a store error hides) keeps its watchdogs. */
static int release_one(lock_client *c, const lock_handle *h) {
    if (h->owner[0] == '\0') {
        lock__watchdog_forget(c, h);
        return c->ops->release(c->impl, h);
    }
    if (c->ops->release_owned == NULL) return LOCK_ERR_UNSUPPORTED; /* no such handle from c */
    uint32_t left = 1;
    int rc = c->ops->release_owned(c->impl, h, &left);
    if ((rc == LOCK_OK && left == 0) || rc == LOCK_ERR_NOT_OWNER) lock__watchdog_forget(c, h);
    return rc;
}

/* ---- API: operations ---- */

/* Takes the lease on key for ttl_ms, retrying for up to wait_ms (0: a single try), and fills
 * the caller's *out (key, a fresh token, the fence, the monotonic deadline). Fails with
 * LOCK_ERR_INVALID (NULL c/key/out, key empty or longer than LOCK_KEY_MAX, ttl_ms == 0),
 * LOCK_ERR_BUSY (still held when the budget ran out), LOCK_ERR_BACKEND or LOCK_ERR_NOMEM.
 * On any failure *out (when non-NULL) is zeroed. */
int lock_acquire(lock_client *c, const char *key, uint32_t ttl_ms, uint32_t wait_ms,
                 lock_handle *out) {
    lock__why_begin();
    if (out != NULL) memset(out, 0, sizeof *out);
    if (c == NULL || out == NULL || !lock__key_ok(key) || ttl_ms == 0)
        return lock__why_end(LOCK_ERR_INVALID);
    int rc = c->ops->acquire(c->impl, key, ttl_ms, wait_ms, out);
    if (rc != LOCK_OK) memset(out, 0, sizeof *out);
    return lock__why_end(rc);
}

/* Frees the lease h describes, if h's token still holds it, and stops the renewals of a
 * watchdog started on it. For a reentrant lease (h->owner set) it drops one hold and frees the
 * lease (and stops its watchdogs) only when that was the last one. h is borrowed and not
 * changed. Fails with LOCK_ERR_INVALID (NULL c/h, malformed handle), LOCK_ERR_NOT_OWNER (the
 * token, or for a reentrant lease the token and owner, do not hold the lease: never held,
 * already released, or expired) or LOCK_ERR_BACKEND. */
int lock_release(lock_client *c, const lock_handle *h) {
    lock__why_begin();
    if (c == NULL || !lock__handle_ok(h)) return lock__why_end(LOCK_ERR_INVALID);
    return lock__why_end(release_one(c, h));
}

/* Resets the lease h describes to ttl_ms from now and updates h->valid_until_ms, if h's token
 * still holds an unexpired lease (a reentrant lease, which other holds may rely on, is
 * prolonged to at least ttl_ms from now and never shortened). Fails with LOCK_ERR_INVALID (NULL
 * c/h, malformed handle, ttl_ms == 0), LOCK_ERR_UNSUPPORTED (the backend has no extend),
 * LOCK_ERR_LEASE_LOST (the token no longer holds it, or the store applied the extension but the new
 * lease ran out before the answer came back) or LOCK_ERR_BACKEND (the store did not answer); h is
 * unchanged on failure. */
int lock_extend(lock_client *c, lock_handle *h, uint32_t ttl_ms) {
    lock__why_begin();
    if (c == NULL || !lock__handle_ok(h) || ttl_ms == 0) return lock__why_end(LOCK_ERR_INVALID);
    if (c->ops->extend == NULL) return lock__why_end(LOCK_ERR_UNSUPPORTED);
    return lock__why_end(c->ops->extend(c->impl, h, ttl_ms));
}

/* Takes key for owner reentrantly (see lock.h): a new hold on the lease owner already has on
 * key (at once; same token and fence; the lease prolonged to at least ttl_ms), or a new lease
 * when the key is free, retrying for up to wait_ms (0: a single try). Fills the caller's *out,
 * with out->owner = owner and out->holds = the lease's holds now. Fails with LOCK_ERR_INVALID
 * (NULL c/key/owner/out, key or owner empty or too long, ttl_ms == 0), LOCK_ERR_UNSUPPORTED,
 * LOCK_ERR_BUSY (held by another owner or a plain lease for the whole budget),
 * LOCK_ERR_BACKEND or LOCK_ERR_NOMEM. On any failure *out (when non-NULL) is zeroed. */
int lock_acquire_owned(lock_client *c, const char *key, const char *owner, uint32_t ttl_ms,
                       uint32_t wait_ms, lock_handle *out) {
    lock__why_begin();
    if (out != NULL) memset(out, 0, sizeof *out);
    if (c == NULL || out == NULL || !lock__key_ok(key) || !owner_ok(owner) || ttl_ms == 0)
        return lock__why_end(LOCK_ERR_INVALID);
    if (c->ops->acquire_owned == NULL) return lock__why_end(LOCK_ERR_UNSUPPORTED);
    int rc = c->ops->acquire_owned(c->impl, key, owner, ttl_ms, wait_ms, out);
    if (rc != LOCK_OK) memset(out, 0, sizeof *out);
    return lock__why_end(rc);
}

/* Frees c and everything its backend owns; leases it holds are left to expire. Watchdogs still
 * running are stopped and freed: their pointers become invalid. c must not be in use by another
 * thread. lock_free(NULL) is a no-op. This function can't fail. */
void lock_free(lock_client *c) {
    if (c == NULL) return;
    lock__watchdog_shutdown(c);
    c->ops->destroy(c->impl);
    pthread_cond_destroy(&c->wd.cv);
    pthread_mutex_destroy(&c->wd.mu);
    free(c);
}

/* ---- API: several keys ---- */

/* Returns 1 when keys[0..n) are n valid, pairwise distinct keys and 1 <= n <= LOCK_MULTI_MAX. */
static int keys_ok(const char *const *keys, size_t n) {
    if (keys == NULL || n == 0 || n > LOCK_MULTI_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        if (!lock__key_ok(keys[i])) return 0;
        for (size_t j = 0; j < i; j++)
            if (strcmp(keys[i], keys[j]) == 0) return 0;
    }
    return 1;
}

/* Takes the leases on all n keys for ttl_ms, or none of them, retrying for up to wait_ms (0: a
 * single try), and fills the caller's out[0..n) in the order of keys (out[i] is keys[i]'s lease;
 * all share one token; each has its key's own fence). Nothing is ever held while waiting for
 * the rest, so two callers that name overlapping keys in any order cannot deadlock. Release
 * with lock_release_multi() or one lock_release() per handle. Fails with LOCK_ERR_INVALID (NULL
 * c/keys/out, n == 0 or above LOCK_MULTI_MAX, a bad or repeated key, ttl_ms == 0),
 * LOCK_ERR_UNSUPPORTED, LOCK_ERR_BUSY (some key still held when the budget ran out),
 * LOCK_ERR_BACKEND or LOCK_ERR_NOMEM; out[0..n) (when out is non-NULL and n is within the
 * limit) is then zeroed and no key is held. */
int lock_acquire_multi(lock_client *c, const char *const *keys, size_t n, uint32_t ttl_ms,
                       uint32_t wait_ms, lock_handle *out) {
    lock__why_begin();
    if (out != NULL && n <= LOCK_MULTI_MAX) memset(out, 0, n * sizeof *out);
    if (c == NULL || out == NULL || !keys_ok(keys, n) || ttl_ms == 0)
        return lock__why_end(LOCK_ERR_INVALID);
    if (c->ops->acquire_multi == NULL) return lock__why_end(LOCK_ERR_UNSUPPORTED);
    int rc = c->ops->acquire_multi(c->impl, keys, n, ttl_ms, wait_ms, out);
    if (rc != LOCK_OK) memset(out, 0, n * sizeof *out);
    return lock__why_end(rc);
}

/* Frees every lease of hs[0..n) that its token still holds (all of them, even after a
 * failure) and stops their watchdogs' renewals; a handle of a reentrant lease drops one hold,
 * as lock_release() does. Returns LOCK_OK, or the first failure in the order of hs:
 * LOCK_ERR_NOT_OWNER, LOCK_ERR_BACKEND; LOCK_ERR_INVALID (NULL c/hs, n == 0 or above
 * LOCK_MULTI_MAX, a malformed handle) releases nothing. */
int lock_release_multi(lock_client *c, const lock_handle *hs, size_t n) {
    lock__why_begin();
    if (c == NULL || hs == NULL || n == 0 || n > LOCK_MULTI_MAX)
        return lock__why_end(LOCK_ERR_INVALID);
    int owned = 0;
    for (size_t i = 0; i < n; i++) {
        if (!lock__handle_ok(&hs[i])) return lock__why_end(LOCK_ERR_INVALID);
        if (hs[i].owner[0] != '\0') owned = 1;
    }
    if (c->ops->release_multi != NULL && !owned) {
        for (size_t i = 0; i < n; i++)
            lock__watchdog_forget(c, &hs[i]);
        return lock__why_end(c->ops->release_multi(c->impl, hs, n));
    }
    int first = LOCK_OK;
    for (size_t i = 0; i < n; i++) {
        int rc = release_one(c, &hs[i]);
        if (rc != LOCK_OK && first == LOCK_OK) first = rc;
    }
    return lock__why_end(first);
}

/* ---- API: helpers ---- */

/* Returns the version of the library this code was built as, LOCK_VERSION of its lock.h
 * ("3.1.0"); a static string. A program can compare it with the LOCK_VERSION it was compiled
 * against. This function can't fail. */
const char *lock_version(void) {
    return LOCK_VERSION;
}

/* Returns the backend's name ("redis", "redlock", "local"), or "none" for NULL; a static string.
 * This function can't fail. */
const char *lock_name(const lock_client *c) {
    return c == NULL ? "none" : c->ops->name;
}

/* Tells where c's leases live when that is one Redis server: every lease is
 * then the key it names on that server, holding the lease's token, so a
 * store on the same server can read it (e.g. under WATCH) next to its own
 * data. Copies the server's address into *out and returns LOCK_OK for the
 * redis backend; LOCK_ERR_UNSUPPORTED for the others (local: no Redis;
 * redlock: a lease is a majority, not one key); LOCK_ERR_INVALID for NULL
 * arguments. */
int lock_store_addr(const lock_client *c, lock_redis_addr *out) {
    if (c == NULL || out == NULL) return LOCK_ERR_INVALID;
    if (!c->has_store) return LOCK_ERR_UNSUPPORTED;
    *out = c->store;
    return LOCK_OK;
}


/* ---- rconn/'s names under their former lock_ names ----
 *
 * Kept for programs written against liblock 3 (docs/LOCKING.md lists them): each is rconn/'s
 * function, with its code turned into a lock_err. The modules of this repository call rconn/
 * directly. */

/* rconn_now_ms(): CLOCK_MONOTONIC in milliseconds. This function can't fail. */
int64_t lock_now_ms(void) {
    return rconn_now_ms();
}

/* rconn_addr_parse(): LOCK_OK or LOCK_ERR_INVALID; *out is written only on success. */
int lock_redis_addr_parse(const char *url, lock_redis_addr *out) {
    return lock__from_rconn(rconn_addr_parse(url, out));
}

/* rconn_addr_parse_list(): LOCK_OK or LOCK_ERR_INVALID. */
int lock_redis_addr_parse_list(const char *list, lock_redis_addr *out, size_t max, size_t *n) {
    return lock__from_rconn(rconn_addr_parse_list(list, out, max, n));
}

/* rconn_addr_same(): 1 when a and b name the same data, else 0. This function can't fail. */
int lock_redis_addr_same(const lock_redis_addr *a, const lock_redis_addr *b) {
    return rconn_addr_same(a, b);
}

/* rconn_key_slot(): the hash slot of key[0..len). This function can't fail. */
unsigned lock_key_slot(const char *key, size_t len) {
    return rconn_key_slot(key, len);
}

/* ---- module-internal helpers ---- */

/* Returns the lock_err of an rconn_err code: LOCK_OK, LOCK_ERR_INVALID, LOCK_ERR_NOMEM, and
 * LOCK_ERR_BACKEND for every other failure (the store is unavailable). This function can't
 * fail. */
int lock__from_rconn(int rc) {
    switch (rc) {
    case RCONN_OK: return LOCK_OK;
    case RCONN_ERR_INVALID: return LOCK_ERR_INVALID;
    case RCONN_ERR_NOMEM: return LOCK_ERR_NOMEM;
    default: return LOCK_ERR_BACKEND;
    }
}


/* Returns a new lock_client wrapping impl; caller frees with lock_free(), which calls
 * ops->destroy(impl). ops is borrowed and must outlive the client (static storage). On
 * success the client takes ownership of impl. Returns NULL with *err (when err is non-NULL)
 * set to LOCK_ERR_INVALID if ops is NULL or lacks a mandatory slot (name, acquire, release,
 * destroy; release_owned with acquire_owned), LOCK_ERR_NOMEM, or LOCK_ERR_BACKEND if the watchdog
 * mutex or condition variable cannot be created; impl then stays the caller's. */
lock_client *lock__client_new(const struct lock_ops *ops, void *impl, int *err) {
    int dummy;
    if (err == NULL) err = &dummy;
    if (ops == NULL || ops->name == NULL || ops->acquire == NULL || ops->release == NULL ||
        ops->destroy == NULL || (ops->acquire_owned != NULL && ops->release_owned == NULL)) {
        *err = LOCK_ERR_INVALID;
        return NULL;
    }
    lock_client *c = malloc(sizeof *c);
    if (c == NULL) {
        *err = LOCK_ERR_NOMEM;
        return NULL;
    }
    c->ops = ops;
    c->impl = impl;
    c->has_store = 0;
    if (lock__watchdog_init(&c->wd) != LOCK_OK) {
        free(c);
        *err = LOCK_ERR_BACKEND;
        return NULL;
    }
    *err = LOCK_OK;
    return c;
}

/* Writes 128 random bits from getrandom(2) as LOCK_TOKEN_LEN lowercase hex digits plus a NUL
 * into the caller's out. Retries on EINTR and short reads. Returns LOCK_OK, or
 * LOCK_ERR_BACKEND when the kernel cannot supply randomness (out is then an empty string). */
int lock__token_new(char out[LOCK_TOKEN_LEN + 1]) {
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[LOCK_TOKEN_LEN / 2];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            out[0] = '\0';
            return LOCK_ERR_BACKEND;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof raw; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 0x0f];
    }
    out[LOCK_TOKEN_LEN] = '\0';
    return LOCK_OK;
}

/* Advances the xorshift64* state *s (0 is replaced by a fixed seed) and returns its next
 * output. This function can't fail. */
static uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s != 0 ? *s : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Returns the step-th (0-based) of a series of delays: first doubling per step, capped at cap,
 * less a random jitter of up to d / spread_div of the delay d (a value in [d - d/spread_div,
 * d]), never below 1 ms. *rng_state as for lock__backoff_ms(). This function can't fail. */
static uint32_t jittered_ms(unsigned step, uint32_t first, uint32_t cap, uint32_t spread_div,
                            uint64_t *rng_state) {
    uint32_t d = cap;
    if (step < 16) {
        uint32_t e = first << step;
        if (e < d) d = e;
    }
    uint64_t r = rng_next(rng_state);
    uint32_t ms = d - (uint32_t)((r >> 32) % (uint64_t)(d / spread_div + 1));
    return ms == 0 ? 1 : ms;
}

/* Returns the delay before retry number attempt (0-based): exponential from
 * LOCK_BACKOFF_BASE_MS, capped at LOCK_BACKOFF_CAP_MS, with equal jitter (a random value in
 * [d/2, d]), never below 1 ms. *rng_state is a caller-owned xorshift64* state, advanced on
 * each call (0 is replaced by a fixed seed). This function can't fail. */
uint32_t lock__backoff_ms(unsigned attempt, uint64_t *rng_state) {
    return jittered_ms(attempt, LOCK_BACKOFF_BASE_MS, LOCK_BACKOFF_CAP_MS, 2, rng_state);
}

/* Returns how long a waiter whose key is busy sleeps before poll number step (0-based) of
 * its wait: LOCK_WAIT_POLL_FIRST_MS doubling per step, capped at LOCK_WAIT_POLL_CAP_MS, less
 * up to a quarter of jitter (a random value in [d - d/4, d]) so that waiters in several
 * processes drift apart; never below 1 ms. *rng_state as for lock__backoff_ms(). This
 * function can't fail. */
uint32_t lock__wait_poll_ms(unsigned step, uint64_t *rng_state) {
    return jittered_ms(step, LOCK_WAIT_POLL_FIRST_MS, LOCK_WAIT_POLL_CAP_MS, 4, rng_state);
}

/* Sleeps ms milliseconds on the monotonic clock, resuming after signals. This function
 * can't fail. */
void lock__sleep_ms(uint32_t ms) {
    struct timespec until;
    if (clock_gettime(CLOCK_MONOTONIC, &until) != 0) return;
    until.tv_sec += (time_t)(ms / 1000);
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec += 1;
        until.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
    }
}

/* Returns the FNV-1a hash of the NUL-terminated key, for the in-process tables of keys
 * (lock_local.c, lock_queue.c). This function can't fail. */
uint32_t lock__key_hash(const char *key) {
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        h ^= *p;
        h *= 16777619u;
    }
    return h;
}

/* Writes into out the fence counter that key's acquisitions advance: for a key with a Redis
 * Cluster hash tag (the text between its first '{' and the next '}', when not empty)
 * "lock:fences:{<tag>}", so the counter hashes to the key's slot and one script may touch
 * both on a cluster; for any other key LOCK_FENCE_KEY. This function can't fail (key is at
 * most LOCK_KEY_MAX bytes, checked by the callers). */
void lock__fence_key(const char *key, char out[LOCK_FENCE_KEY_MAX]) {
    const char *open = strchr(key, '{');
    const char *close = open != NULL ? strchr(open + 1, '}') : NULL;
    if (close == NULL || close == open + 1) {
        memcpy(out, LOCK_FENCE_KEY, sizeof LOCK_FENCE_KEY);
        return;
    }
    snprintf(out, LOCK_FENCE_KEY_MAX, LOCK_FENCE_KEY ":%.*s", (int)(close - open + 1), open);
}
