/* test_lock_local.c - the lock contract against lock_local, plus unit tests of lock.c.
 *
 * Group "lock_local" runs tests/helpers/lock_contract.c with an in-process
 * client as group state. Group "lock_api" covers what needs no backend:
 * lock_strerror, argument checks and the NULL-slot rules
 * (through a mock ops table), tokens, backoff, the clock, the SHA-1 used for
 * EVALSHA and the constructors' argument checks.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"
#include "lock/lock_impl.h"
#include "tests/helpers/lock_contract.h"

/* ---- group setup ---- */

static int local_setup(void **state) {
    int err = -100;
    lock_client *c = lock_local_new(&err);
    if (c == NULL || err != LOCK_OK) return -1;
    *state = c;
    return 0;
}

static int local_teardown(void **state) {
    lock_free(*state);
    *state = NULL;
    return 0;
}

/* ---- lock_local specifics ---- */

struct holder {
    lock_client *c;
    lock_handle h;
    int rc;
};

static void *release_later(void *arg) {
    struct holder *x = arg;
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    x->rc = lock_release(x->c, &x->h);
    return NULL;
}

static void test_lock_local_waiter_released_acquires(void **state) {
    lock_client *c = *state;
    struct holder x = {.c = c};
    assert_int_equal(lock_acquire(c, "local:wake", 60000, 0, &x.h), LOCK_OK);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, release_later, &x), 0);
    lock_handle h2;
    int rc = lock_acquire(c, "local:wake", 1000, 30000, &h2);
    pthread_join(th, NULL);
    assert_int_equal(x.rc, LOCK_OK);
    assert_int_equal(rc, LOCK_OK);
    assert_true(h2.fence > x.h.fence);
    assert_int_equal(lock_release(c, &h2), LOCK_OK);
}

static void test_lock_local_name_is_local(void **state) {
    assert_string_equal(lock_name(*state), "local");
}

static void test_lock_local_new_null_err_ok(void **state) {
    (void)state;
    lock_client *c = lock_local_new(NULL);
    assert_non_null(c);
    lock_handle h;
    assert_int_equal(lock_acquire(c, "k", 1000, 0, &h), LOCK_OK);
    lock_free(c); /* with a lease still held: everything freed */
}

/* ---- lock_strerror, lock_name, lock_free ---- */

static void test_lock_strerror_every_code_has_its_message(void **state) {
    (void)state;
#define CHECK_MSG(name, val, msg) assert_string_equal(lock_strerror(LOCK_##name), msg);
    LOCK_ERRNO_MAP(CHECK_MSG)
#undef CHECK_MSG
    assert_string_equal(lock_strerror(0), "success");
    assert_string_equal(lock_strerror(LOCK_ERR_BUSY), "lock busy: the wait budget was spent");
    assert_string_equal(lock_strerror(LOCK_ERR_NOMEM), "out of memory");
    assert_string_equal(lock_strerror(-999), "unknown lock error");
    assert_string_equal(lock_strerror(1), "unknown lock error");
}

static void test_lock_strerror_codes_distinct_negative(void **state) {
    (void)state;
    static const int codes[] = {
#define LIST_CODE(name, val, msg) LOCK_##name,
        LOCK_ERRNO_MAP(LIST_CODE)
#undef LIST_CODE
    };
    size_t n = sizeof codes / sizeof codes[0];
    assert_int_equal(codes[0], 0);
    for (size_t i = 1; i < n; i++) {
        assert_true(codes[i] < 0);
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(codes[i], codes[j]);
            assert_string_not_equal(lock_strerror(codes[i]), lock_strerror(codes[j]));
        }
    }
}

static void test_lock_name_null_none(void **state) {
    (void)state;
    assert_string_equal(lock_name(NULL), "none");
    lock_free(NULL); /* a no-op */
}

/* ---- dispatch through a mock ops table ---- */

static int mock_acquire(void *impl, const char *key, uint32_t ttl_ms, uint32_t wait_ms,
                        lock_handle *out) {
    (void)impl;
    check_expected(key);
    check_expected(ttl_ms);
    check_expected(wait_ms);
    strcpy(out->key, key);
    memset(out->token, 'a', LOCK_TOKEN_LEN);
    out->token[LOCK_TOKEN_LEN] = '\0';
    out->fence = 1;
    return (int)mock();
}

static int mock_release(void *impl, const lock_handle *h) {
    (void)impl;
    check_expected(h);
    return (int)mock();
}

static int destroyed;
static int released_n;

static int mock_release_counting(void *impl, const lock_handle *h) {
    (void)impl;
    (void)h;
    released_n++;
    return released_n == 2 ? LOCK_ERR_NOT_OWNER : LOCK_OK;
}

static void mock_destroy(void *impl) {
    assert_ptr_equal(impl, &destroyed);
    destroyed++;
}

static const struct lock_ops mock_ops = {
    .name = "mock",
    .acquire = mock_acquire,
    .release = mock_release,
    .extend = NULL, /* optional slot left empty */
    .destroy = mock_destroy,
};

static int mock_acquire_owned(void *impl, const char *key, const char *owner, uint32_t ttl_ms,
                              uint32_t wait_ms, lock_handle *out) {
    (void)impl, (void)key, (void)owner, (void)ttl_ms, (void)wait_ms, (void)out;
    return LOCK_ERR_BACKEND;
}

static void test_lock_client_new_missing_mandatory_op_invalid(void **state) {
    (void)state;
    struct lock_ops ops;
    int err = 0;

    assert_null(lock__client_new(NULL, &destroyed, &err));
    assert_int_equal(err, LOCK_ERR_INVALID);
    ops = mock_ops;
    ops.acquire = NULL;
    assert_null(lock__client_new(&ops, &destroyed, &err));
    assert_int_equal(err, LOCK_ERR_INVALID);
    ops = mock_ops;
    ops.release = NULL;
    assert_null(lock__client_new(&ops, &destroyed, &err));
    assert_int_equal(err, LOCK_ERR_INVALID);
    ops = mock_ops;
    ops.destroy = NULL;
    assert_null(lock__client_new(&ops, &destroyed, NULL));
    ops = mock_ops;
    ops.name = NULL;
    assert_null(lock__client_new(&ops, &destroyed, &err));
    assert_int_equal(err, LOCK_ERR_INVALID);
    ops = mock_ops;
    ops.acquire_owned = mock_acquire_owned; /* without its release_owned */
    assert_null(lock__client_new(&ops, &destroyed, &err));
    assert_int_equal(err, LOCK_ERR_INVALID);
}

static void test_lock_ops_null_extend_unsupported(void **state) {
    (void)state;
    int err = -100;
    destroyed = 0;
    lock_client *c = lock__client_new(&mock_ops, &destroyed, &err);
    assert_non_null(c);
    assert_int_equal(err, LOCK_OK);
    assert_string_equal(lock_name(c), "mock");

    expect_string(mock_acquire, key, "m");
    expect_value(mock_acquire, ttl_ms, 100);
    expect_value(mock_acquire, wait_ms, 7);
    will_return(mock_acquire, LOCK_OK);
    lock_handle h;
    assert_int_equal(lock_acquire(c, "m", 100, 7, &h), LOCK_OK);
    assert_int_equal(lock_extend(c, &h, 100), LOCK_ERR_UNSUPPORTED);

    /* a backend failure leaves a zeroed handle, whatever the backend wrote */
    expect_string(mock_acquire, key, "m");
    expect_value(mock_acquire, ttl_ms, 100);
    expect_value(mock_acquire, wait_ms, 0);
    will_return(mock_acquire, LOCK_ERR_BUSY);
    lock_handle h2;
    assert_int_equal(lock_acquire(c, "m", 100, 0, &h2), LOCK_ERR_BUSY);
    assert_int_equal(h2.key[0], '\0');
    assert_int_equal(h2.fence, 0);

    expect_value(mock_release, h, &h);
    will_return(mock_release, LOCK_ERR_NOT_OWNER);
    assert_int_equal(lock_release(c, &h), LOCK_ERR_NOT_OWNER);

    /* invalid arguments never reach the backend (no expectations are queued) */
    assert_int_equal(lock_acquire(c, "", 100, 0, &h2), LOCK_ERR_INVALID);
    assert_int_equal(lock_acquire(c, "m", 0, 0, &h2), LOCK_ERR_INVALID);
    assert_int_equal(lock_release(c, NULL), LOCK_ERR_INVALID);
    assert_int_equal(lock_extend(c, &h, 0), LOCK_ERR_INVALID);

    lock_free(c);
    assert_int_equal(destroyed, 1);
}

/* ---- tokens, backoff, clock ---- */

/* acquire_multi NULL: unsupported, checked after the arguments; release_multi NULL: one
 * release per handle, all of them, first error returned; watchdog without extend:
 * unsupported. */
static void test_lock_ops_null_multi_and_watchdog_slots(void **state) {
    (void)state;
    struct lock_ops ops = mock_ops;
    ops.release = mock_release_counting;
    destroyed = 0;
    released_n = 0;
    lock_client *c = lock__client_new(&ops, &destroyed, NULL);
    assert_non_null(c);
    const char *keys[] = {"a", "b"};
    const char *dup[] = {"a", "a"};
    lock_handle hs[3];
    assert_int_equal(lock_acquire_multi(c, dup, 2, 100, 0, hs), LOCK_ERR_INVALID);
    assert_int_equal(lock_acquire_multi(c, keys, 2, 100, 0, hs), LOCK_ERR_UNSUPPORTED);
    for (int i = 0; i < 3; i++) {
        memset(&hs[i], 0, sizeof hs[i]);
        strcpy(hs[i].key, keys[i % 2]);
        memset(hs[i].token, 'a' + i, LOCK_TOKEN_LEN);
    }
    assert_int_equal(lock_release_multi(c, hs, 3), LOCK_ERR_NOT_OWNER);
    assert_int_equal(released_n, 3);
    lock_watchdog *w = NULL;
    assert_int_equal(lock_watchdog_start(c, &hs[0], 100, 100, &w), LOCK_ERR_UNSUPPORTED);
    assert_null(w);
    /* no reentrant leases: acquire_owned is unsupported, and so is releasing a handle that
     * claims an owner (this backend cannot have made it) */
    assert_int_equal(lock_acquire_owned(c, "a", "o", 100, 0, &hs[0]), LOCK_ERR_UNSUPPORTED);
    assert_int_equal(hs[0].token[0], '\0');
    memset(&hs[0], 0, sizeof hs[0]);
    strcpy(hs[0].key, "a");
    memset(hs[0].token, 'a', LOCK_TOKEN_LEN);
    strcpy(hs[0].owner, "o");
    released_n = 0;
    assert_int_equal(lock_release(c, &hs[0]), LOCK_ERR_UNSUPPORTED);
    assert_int_equal(released_n, 0);
    lock_free(c);
    assert_int_equal(destroyed, 1);
}

static void expect_sha1(const char *data, size_t len, const char *hex) {
    char out[41];
    memset(out, 'x', sizeof out);
    lock__sha1_hex(data, len, out);
    assert_string_equal(out, hex);
}

static void test_lock_sha1_known_vectors(void **state) {
    (void)state;
    expect_sha1("", 0, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    expect_sha1("abc", 3, "a9993e364706816aba3e25717850c26c9cd0d89d");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    expect_sha1(two, strlen(two), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    /* lengths around the padding boundary, and a million bytes */
    static const struct {
        size_t n;
        const char *hex;
    } as[] = {
        {55, "c1c8bbdc22796e28c0e15163d20899b65621d65a"},
        {56, "c2db330f6083854c99d4b5bfb6e8f29f201be699"},
        {63, "03f09f5b158a7a8cdad920bddc29b81c18a551f5"},
        {64, "0098ba824b5c16427bd7a1122a5a442a25ec644d"},
        {65, "11655326c708d70319be2610e8a57d9a5b959d3b"},
        {119, "ee971065aaa017e0632a8ca6c77bb3bf8b1dfc56"},
        {1000000, "34aa973cd4c4daa4f61eeb2bdbad27316534016f"},
    };
    char *buf = malloc(1000000);
    assert_non_null(buf);
    memset(buf, 'a', 1000000);
    for (size_t i = 0; i < sizeof as / sizeof as[0]; i++)
        expect_sha1(buf, as[i].n, as[i].hex);
    free(buf);
}

static void test_lock_redlock_new_bad_args_invalid(void **state) {
    (void)state;
    lock_redis_addr a[LOCK_REDLOCK_NODES_MAX + 2];
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        assert_int_equal(lock_redis_addr_parse("redis://127.0.0.1:1", &a[i]), LOCK_OK);
    int err = 0;
    static const size_t bad_n[] = {0, 2, 4, 6, LOCK_REDLOCK_NODES_MAX + 2};
    for (size_t i = 0; i < sizeof bad_n / sizeof bad_n[0]; i++) {
        err = 0;
        assert_null(lock_redlock_new(a, bad_n[i], 1000, &err));
        assert_int_equal(err, LOCK_ERR_INVALID);
    }
    assert_null(lock_redlock_new(NULL, 3, 1000, &err));
    assert_int_equal(err, LOCK_ERR_INVALID);
    assert_null(lock_redlock_new(a, 3, 0, &err));
    assert_int_equal(err, LOCK_ERR_INVALID);
    a[1].port = 0;
    assert_null(lock_redlock_new(a, 3, 1000, NULL));
    a[1].port = 1;
    /* 1, 3 and the maximum (odd) are fine; nothing is contacted */
    static const size_t good_n[] = {1, 3, LOCK_REDLOCK_NODES_MAX};
    for (size_t i = 0; i < sizeof good_n / sizeof good_n[0]; i++) {
        err = -100;
        lock_client *c = lock_redlock_new(a, good_n[i], 1000, &err);
        assert_non_null(c);
        assert_int_equal(err, LOCK_OK);
        assert_string_equal(lock_name(c), "redlock");
        lock_free(c);
    }
}

static void test_lock_token_new_hex_and_distinct(void **state) {
    (void)state;
    char a[LOCK_TOKEN_LEN + 1], b[LOCK_TOKEN_LEN + 1];
    assert_int_equal(lock__token_new(a), LOCK_OK);
    assert_int_equal(lock__token_new(b), LOCK_OK);
    assert_int_equal(strlen(a), LOCK_TOKEN_LEN);
    assert_int_equal(strspn(a, "0123456789abcdef"), LOCK_TOKEN_LEN);
    assert_string_not_equal(a, b);
}

static void test_lock_backoff_any_attempt_within_cap(void **state) {
    (void)state;
    uint64_t rng = 0; /* 0 is replaced by a fixed seed */
    for (unsigned attempt = 0; attempt < 100; attempt++) {
        for (int rep = 0; rep < 50; rep++) {
            uint32_t d = lock__backoff_ms(attempt, &rng);
            assert_true(d >= 1 && d <= LOCK_BACKOFF_CAP_MS);
            if (attempt == 0) assert_true(d <= 1);
            if (attempt == 3) assert_true(d >= 4 && d <= 8);
            if (attempt >= 10) assert_true(d >= LOCK_BACKOFF_CAP_MS / 2);
        }
    }
    assert_true(rng != 0);
    assert_true(lock__backoff_ms(UINT32_MAX, &rng) <= LOCK_BACKOFF_CAP_MS);
}

/* The busy waiter's poll schedule: 2 ms, doubling, capped at 50 ms, at most a quarter less. */
static void test_lock_wait_poll_doubles_to_cap_quarter_jitter(void **state) {
    (void)state;
    uint64_t rng = 0;
    for (unsigned step = 0; step < 100; step++) {
        uint32_t d = step < 16 ? LOCK_WAIT_POLL_FIRST_MS << step : LOCK_WAIT_POLL_CAP_MS;
        if (d > LOCK_WAIT_POLL_CAP_MS) d = LOCK_WAIT_POLL_CAP_MS;
        for (int rep = 0; rep < 50; rep++) {
            uint32_t ms = lock__wait_poll_ms(step, &rng);
            assert_true(ms >= d - d / 4 && ms <= d);
        }
    }
    assert_int_equal(lock__wait_poll_ms(0, &rng), LOCK_WAIT_POLL_FIRST_MS);
    assert_true(lock__wait_poll_ms(UINT32_MAX, &rng) <= LOCK_WAIT_POLL_CAP_MS);
    assert_true(rng != 0);
}

static void test_lock_sleep_and_clock_monotonic(void **state) {
    (void)state;
    int64_t t0 = lock_now_ms();
    assert_true(t0 >= 0);
    lock__sleep_ms(20);
    int64_t t1 = lock_now_ms();
    assert_true(t1 - t0 >= 19);
    lock__sleep_ms(0);
    assert_true(lock_now_ms() >= t1);
}

static void test_lock_redis_new_bad_args_invalid(void **state) {
    (void)state;
    lock_redis_addr a;
    int err = 0;
    assert_int_equal(lock_redis_addr_parse("redis://127.0.0.1:1", &a), LOCK_OK);
    assert_null(lock_redis_new(NULL, 1000, &err));
    assert_int_equal(err, LOCK_ERR_INVALID);
    assert_null(lock_redis_new(&a, 0, &err));
    assert_int_equal(err, LOCK_ERR_INVALID);
    lock_redis_addr b = a;
    b.port = 0;
    assert_null(lock_redis_new(&b, 1000, &err));
    assert_int_equal(err, LOCK_ERR_INVALID);
    b = a;
    b.host[0] = '\0';
    assert_null(lock_redis_new(&b, 1000, &err));
    assert_int_equal(err, LOCK_ERR_INVALID);
    b = a;
    b.db = -1;
    assert_null(lock_redis_new(&b, 1000, NULL));
}

/* A restarted process (a new client) still hands out fences above the old
 * ones, so a store that remembers the last fence does not refuse it. */
static void test_lock_local_restarted_client_fences_keep_growing(void **state) {
    (void)state;
    uint64_t last = 0;
    for (int round = 0; round < 3; round++) {
        lock_client *c = lock_local_new(NULL);
        assert_non_null(c);
        lock_handle h;
        assert_int_equal(lock_acquire(c, "lock:restart", 1000, 0, &h), LOCK_OK);
        assert_true(h.fence > last);
        last = h.fence;
        assert_int_equal(lock_release(c, &h), LOCK_OK);
        lock_free(c);
    }
}

/* lock_last_error(): a failure without more to say gives its code's text; the reason is the
 * failing thread's, kept through later successes, and a watchdog's lost lease says why. */
static void *busy_in_thread(void *arg) {
    lock_client *c = arg;
    lock_handle h;
    int fresh = strcmp(lock_last_error(), "") == 0;
    int busy = lock_acquire(c, "lk:why", 1000, 0, &h) == LOCK_ERR_BUSY;
    int said = strcmp(lock_last_error(), lock_strerror(LOCK_ERR_BUSY)) == 0;
    return (void *)(intptr_t)(fresh && busy && said);
}

static void test_lock_last_error_per_thread_kept_through_success(void **state) {
    (void)state;
    lock_client *c = lock_local_new(NULL);
    assert_non_null(c);
    lock_handle h, h2;
    assert_int_equal(lock_acquire(c, "lk:why", 60000, 0, &h), LOCK_OK);
    memset(&h2, 0, sizeof h2); /* no key, no token */
    assert_int_equal(lock_release(c, &h2), LOCK_ERR_INVALID);
    assert_string_equal(lock_last_error(), lock_strerror(LOCK_ERR_INVALID));
    pthread_t th;
    void *ok = NULL;
    assert_int_equal(pthread_create(&th, NULL, busy_in_thread, c), 0);
    pthread_join(th, &ok);
    assert_non_null(ok);
    assert_string_equal(lock_last_error(), lock_strerror(LOCK_ERR_INVALID)); /* not the busy */
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    assert_string_equal(lock_last_error(), lock_strerror(LOCK_ERR_INVALID));

    lock_watchdog *w = NULL;
    assert_int_equal(lock_acquire(c, "lk:why", 60000, 0, &h), LOCK_OK);
    assert_int_equal(lock_watchdog_start(c, &h, 60000, 60000, &w), LOCK_OK);
    assert_int_equal(lock_release(c, &h), LOCK_OK);
    assert_int_equal(lock_watchdog_check(w, NULL), LOCK_ERR_LEASE_LOST);
    assert_string_equal(lock_last_error(), "lease lost: the lease was released");
    assert_int_equal(lock_watchdog_stop(w, NULL), LOCK_ERR_LEASE_LOST);
    lock_free(c);
}

int main(void) {
    const struct CMUnitTest contract[] = {
        LOCK_CONTRACT_TESTS,
        cmocka_unit_test(test_lock_local_waiter_released_acquires),
        cmocka_unit_test(test_lock_local_name_is_local),
    };
    const struct CMUnitTest api[] = {
        cmocka_unit_test(test_lock_local_new_null_err_ok),
        cmocka_unit_test(test_lock_local_restarted_client_fences_keep_growing),
        cmocka_unit_test(test_lock_strerror_every_code_has_its_message),
        cmocka_unit_test(test_lock_strerror_codes_distinct_negative),
        cmocka_unit_test(test_lock_name_null_none),
        cmocka_unit_test(test_lock_client_new_missing_mandatory_op_invalid),
        cmocka_unit_test(test_lock_ops_null_extend_unsupported),
        cmocka_unit_test(test_lock_token_new_hex_and_distinct),
        cmocka_unit_test(test_lock_backoff_any_attempt_within_cap),
        cmocka_unit_test(test_lock_wait_poll_doubles_to_cap_quarter_jitter),
        cmocka_unit_test(test_lock_sleep_and_clock_monotonic),
        cmocka_unit_test(test_lock_redis_new_bad_args_invalid),
        cmocka_unit_test(test_lock_ops_null_multi_and_watchdog_slots),
        cmocka_unit_test(test_lock_sha1_known_vectors),
        cmocka_unit_test(test_lock_redlock_new_bad_args_invalid),
        cmocka_unit_test(test_lock_last_error_per_thread_kept_through_success),
    };
    int failed = cmocka_run_group_tests_name("lock_local", contract, local_setup, local_teardown);
    failed += cmocka_run_group_tests_name("lock_api", api, NULL, NULL);
    return failed == 0 ? 0 : 1;
}
