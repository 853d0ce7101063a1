/* lock_contract.c - the lock contract: tests every backend must pass unchanged.
 *
 * What it pins down: mutual exclusion under threads, leases that expire by
 * themselves, release and extend only by the token holder, fences that grow,
 * a wait budget that is honoured (lower bound only: no timing targets), unique
 * tokens and LOCK_ERR_INVALID for bad arguments. Timing-sensitive steps are
 * written so that a slow machine (valgrind) cannot make them fail falsely.
 */
#include "tests/helpers/lock_contract.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"

#define EXCL_THREADS 4
#define EXCL_ITERS 100
#define TOKEN_CYCLES 1000

/* ---- private ---- */

static lock_client *client_of(void **state) {
    lock_client *c = *state;
    assert_non_null(c);
    return c;
}

/* Sleeps until the monotonic clock reaches until_ms. */
static void sleep_until(int64_t until_ms) {
    for (int64_t now = lock_now_ms(); now < until_ms; now = lock_now_ms()) {
        int64_t left = until_ms - now < 1000 ? until_ms - now : 999;
        struct timespec ts = {0, (long)left * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static int token_is_hex(const char *t) {
    if (strlen(t) != LOCK_TOKEN_LEN) return 0;
    for (size_t i = 0; i < LOCK_TOKEN_LEN; i++)
        if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'f'))) return 0;
    return 1;
}

/* ---- exclusion ---- */

struct excl {
    lock_client *c;
    volatile long counter; /* deliberately not atomic: only the lock protects it */
    atomic_int holders;    /* threads inside the critical section right now */
    atomic_int overlaps;   /* times a thread found another one inside */
    atomic_int failures;   /* acquire or release that did not return LOCK_OK */
};

static void *excl_worker(void *arg) {
    struct excl *x = arg;
    for (int i = 0; i < EXCL_ITERS; i++) {
        lock_handle h;
        if (lock_acquire(x->c, "contract:exclusion", 10000, 30000, &h) != LOCK_OK) {
            atomic_fetch_add(&x->failures, 1);
            continue;
        }
        if (atomic_fetch_add(&x->holders, 1) != 0) atomic_fetch_add(&x->overlaps, 1);
        long v = x->counter;
        sched_yield();
        x->counter = v + 1;
        atomic_fetch_sub(&x->holders, 1);
        if (lock_release(x->c, &h) != LOCK_OK) atomic_fetch_add(&x->failures, 1);
    }
    return NULL;
}

/* N threads x K increments of a plain counter inside the lock give exactly N*K, and no thread
 * ever finds another inside. Threads only count failures; the asserts run here. */
void lock_contract_exclusion(void **state) {
    struct excl x = {.c = client_of(state), .counter = 0};
    atomic_init(&x.holders, 0);
    atomic_init(&x.overlaps, 0);
    atomic_init(&x.failures, 0);
    pthread_t th[EXCL_THREADS];
    int started = 0;
    for (; started < EXCL_THREADS; started++)
        if (pthread_create(&th[started], NULL, excl_worker, &x) != 0) break;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(started, EXCL_THREADS);
    assert_int_equal(atomic_load(&x.failures), 0);
    assert_int_equal(atomic_load(&x.overlaps), 0);
    assert_int_equal(x.counter, (long)EXCL_THREADS * EXCL_ITERS);
}

/* ---- leases ---- */

/* A 50 ms lease expires by itself; the next acquirer gets the key only after the first
 * lease's deadline, with a new token and a larger fence; the first holder can no longer
 * release it. */
void lock_contract_lease_expiry(void **state) {
    lock_client *c = client_of(state);
    const char *key = "contract:expiry";
    lock_handle h1, h2;
    assert_int_equal(lock_acquire(c, key, 50, 0, &h1), LOCK_OK);
    int rc = lock_acquire(c, key, 5000, 0, &h2);
    if (rc == LOCK_ERR_BUSY) rc = lock_acquire(c, key, 5000, 5000, &h2);
    int64_t got_at = lock_now_ms();
    assert_int_equal(rc, LOCK_OK);
    assert_true(got_at >= h1.valid_until_ms);
    assert_true(h2.fence > h1.fence);
    assert_string_not_equal(h1.token, h2.token);
    assert_int_equal(lock_release(c, &h1), LOCK_ERR_NOT_OWNER);
    assert_int_equal(lock_release(c, &h2), LOCK_OK);
}

/* A handle with a forged token (or for another key) cannot release; the lease stays held. */
void lock_contract_release_non_owner(void **state) {
    lock_client *c = client_of(state);
    const char *key = "contract:nonowner";
    lock_handle h, forged, other;
    assert_int_equal(lock_acquire(c, key, 10000, 0, &h), LOCK_OK);
    forged = h;
    forged.token[0] = forged.token[0] == '0' ? '1' : '0';
    assert_int_equal(lock_release(c, &forged), LOCK_ERR_NOT_OWNER);
    other = h;
    strcpy(other.key, "contract:nonowner:other");
    assert_int_equal(lock_release(c, &other), LOCK_ERR_NOT_OWNER);
    assert_int_equal(lock_acquire(c, key, 1000, 0, &other), LOCK_ERR_BUSY);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
}

/* A second release of the same handle is refused, also once someone else holds the key. */
void lock_contract_double_release(void **state) {
    lock_client *c = client_of(state);
    const char *key = "contract:double";
    lock_handle h, h2, probe;
    assert_int_equal(lock_acquire(c, key, 10000, 0, &h), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_ERR_NOT_OWNER);
    assert_int_equal(lock_acquire(c, key, 10000, 0, &h2), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_ERR_NOT_OWNER);
    assert_int_equal(lock_acquire(c, key, 1000, 0, &probe), LOCK_ERR_BUSY);
    assert_int_equal(lock_release(c, &h2), LOCK_OK);
}

/* Extending a held lease moves its deadline and keeps the key held past the first ttl. */
void lock_contract_extend(void **state) {
    lock_client *c = client_of(state);
    const char *key = "contract:extend";
    lock_handle h, probe;
    assert_int_equal(lock_acquire(c, key, 500, 0, &h), LOCK_OK);
    int64_t first_deadline = h.valid_until_ms;
    assert_int_equal(lock_extend(c, &h, 20000), LOCK_OK);
    assert_true(h.valid_until_ms > first_deadline);
    sleep_until(first_deadline + 100);
    assert_int_equal(lock_acquire(c, key, 1000, 0, &probe), LOCK_ERR_BUSY);
    assert_int_equal(lock_extend(c, &h, 20000), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
}

/* Extend after the lease expired, after release, or with a stale handle: LOCK_ERR_LEASE_LOST,
 * and the handle is left unchanged. */
void lock_contract_extend_after_expiry(void **state) {
    lock_client *c = client_of(state);
    const char *key = "contract:extend:expired";
    lock_handle h, h2;
    assert_int_equal(lock_acquire(c, key, 30, 0, &h), LOCK_OK);
    sleep_until(h.valid_until_ms + 30);
    int64_t before = h.valid_until_ms;
    assert_int_equal(lock_extend(c, &h, 10000), LOCK_ERR_LEASE_LOST);
    assert_true(h.valid_until_ms == before);

    assert_int_equal(lock_acquire(c, key, 10000, 0, &h2), LOCK_OK);
    assert_int_equal(lock_extend(c, &h, 10000), LOCK_ERR_LEASE_LOST);
    assert_int_equal(lock_release(c, &h2), LOCK_OK);
    assert_int_equal(lock_extend(c, &h2, 10000), LOCK_ERR_LEASE_LOST);
}

/* ---- waiting ---- */

/* A held key makes a 200 ms wait end in LOCK_ERR_BUSY, and not before the budget. */
void lock_contract_wait_budget(void **state) {
    lock_client *c = client_of(state);
    const char *key = "contract:budget";
    lock_handle h, h2;
    assert_int_equal(lock_acquire(c, key, 20000, 0, &h), LOCK_OK);
    int64_t t0 = lock_now_ms();
    assert_int_equal(lock_acquire(c, key, 1000, 200, &h2), LOCK_ERR_BUSY);
    int64_t spent = lock_now_ms() - t0;
    assert_true(spent >= 195);
    assert_int_equal(h2.token[0], '\0'); /* a failed acquire leaves a zeroed handle */
    assert_int_equal(lock_release(c, &h), LOCK_OK);
}

/* wait_ms == 0 is one try: a held key answers LOCK_ERR_BUSY (sanity bound only). */
void lock_contract_single_try(void **state) {
    lock_client *c = client_of(state);
    const char *key = "contract:single";
    lock_handle h, h2;
    assert_int_equal(lock_acquire(c, key, 20000, 0, &h), LOCK_OK);
    int64_t t0 = lock_now_ms();
    assert_int_equal(lock_acquire(c, key, 1000, 0, &h2), LOCK_ERR_BUSY);
    assert_true(lock_now_ms() - t0 < 5000);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    assert_int_equal(lock_acquire(c, key, 1000, 0, &h2), LOCK_OK);
    assert_int_equal(lock_release(c, &h2), LOCK_OK);
}

/* ---- tokens and fences ---- */

static int cmp_token(const void *a, const void *b) {
    return memcmp(a, b, LOCK_TOKEN_LEN + 1);
}

/* 1000 acquire/release cycles give 1000 distinct 32-digit lowercase hex tokens. */
void lock_contract_tokens_unique(void **state) {
    lock_client *c = client_of(state);
    char(*tokens)[LOCK_TOKEN_LEN + 1] = calloc(TOKEN_CYCLES, sizeof *tokens);
    assert_non_null(tokens);
    int bad = 0;
    for (int i = 0; i < TOKEN_CYCLES && !bad; i++) {
        lock_handle h;
        if (lock_acquire(c, "contract:tokens", 10000, 0, &h) != LOCK_OK)
            bad = 1;
        else {
            memcpy(tokens[i], h.token, sizeof h.token);
            if (!token_is_hex(h.token) || lock_release(c, &h) != LOCK_OK) bad = 1;
        }
    }
    int dups = 0;
    qsort(tokens, TOKEN_CYCLES, sizeof *tokens, cmp_token);
    for (int i = 1; i < TOKEN_CYCLES; i++)
        if (memcmp(tokens[i - 1], tokens[i], sizeof *tokens) == 0) dups++;
    free(tokens);
    assert_int_equal(bad, 0);
    assert_int_equal(dups, 0);
}

/* Each acquisition of a key gets a strictly larger fence than the one before. */
void lock_contract_fence_increases(void **state) {
    lock_client *c = client_of(state);
    uint64_t prev = 0;
    for (int i = 0; i < 50; i++) {
        lock_handle h;
        assert_int_equal(lock_acquire(c, "contract:fence", 10000, 0, &h), LOCK_OK);
        assert_true(h.fence > prev);
        prev = h.fence;
        assert_int_equal(lock_release(c, &h), LOCK_OK);
    }
}

/* Two keys are independent, and valid_until_ms is ttl after a moment inside the call. */
void lock_contract_keys_independent(void **state) {
    lock_client *c = client_of(state);
    lock_handle a, b;
    int64_t t0 = lock_now_ms();
    assert_int_equal(lock_acquire(c, "contract:indep:a", 10000, 0, &a), LOCK_OK);
    int64_t t1 = lock_now_ms();
    assert_int_equal(lock_acquire(c, "contract:indep:b", 10000, 0, &b), LOCK_OK);
    assert_true(a.valid_until_ms >= t0 + 10000 && a.valid_until_ms <= t1 + 10000);
    assert_string_equal(a.key, "contract:indep:a");
    assert_string_equal(b.key, "contract:indep:b");
    assert_string_not_equal(a.token, b.token);
    assert_int_equal(lock_release(c, &a), LOCK_OK);
    assert_int_equal(lock_release(c, &b), LOCK_OK);
}

/* ---- arguments ---- */

/* NULL pointers, empty or overlong keys, ttl 0 and malformed handles: LOCK_ERR_INVALID.
 * A key of exactly LOCK_KEY_MAX bytes is fine. */
void lock_contract_invalid_args(void **state) {
    lock_client *c = client_of(state);
    lock_handle h, bad;
    char key[LOCK_KEY_MAX + 2];
    memset(key, 'k', sizeof key);
    key[LOCK_KEY_MAX + 1] = '\0'; /* one byte too long */

    assert_int_equal(lock_acquire(NULL, "contract:inv", 1000, 0, &h), LOCK_ERR_INVALID);
    assert_int_equal(lock_acquire(c, NULL, 1000, 0, &h), LOCK_ERR_INVALID);
    assert_int_equal(lock_acquire(c, "", 1000, 0, &h), LOCK_ERR_INVALID);
    assert_int_equal(lock_acquire(c, key, 1000, 0, &h), LOCK_ERR_INVALID);
    assert_int_equal(lock_acquire(c, "contract:inv", 0, 0, &h), LOCK_ERR_INVALID);
    assert_int_equal(lock_acquire(c, "contract:inv", 1000, 0, NULL), LOCK_ERR_INVALID);

    key[LOCK_KEY_MAX] = '\0'; /* exactly the limit */
    assert_int_equal(lock_acquire(c, key, 10000, 0, &h), LOCK_OK);
    assert_int_equal(lock_release(NULL, &h), LOCK_ERR_INVALID);
    assert_int_equal(lock_release(c, NULL), LOCK_ERR_INVALID);
    assert_int_equal(lock_extend(NULL, &h, 1000), LOCK_ERR_INVALID);
    assert_int_equal(lock_extend(c, NULL, 1000), LOCK_ERR_INVALID);
    assert_int_equal(lock_extend(c, &h, 0), LOCK_ERR_INVALID);

    bad = h;
    bad.token[LOCK_TOKEN_LEN - 1] = '\0'; /* short token */
    assert_int_equal(lock_release(c, &bad), LOCK_ERR_INVALID);
    assert_int_equal(lock_extend(c, &bad, 1000), LOCK_ERR_INVALID);
    bad = h;
    bad.key[0] = '\0'; /* empty key */
    assert_int_equal(lock_release(c, &bad), LOCK_ERR_INVALID);
    bad = h;
    memset(bad.key, 'k', sizeof bad.key); /* unterminated key */
    assert_int_equal(lock_release(c, &bad), LOCK_ERR_INVALID);
    bad = h;
    memset(bad.token, 'a', sizeof bad.token); /* unterminated token */
    assert_int_equal(lock_release(c, &bad), LOCK_ERR_INVALID);

    assert_int_equal(lock_release(c, &h), LOCK_OK);
}
