/* lock_contract.h - the lock contract as cmocka tests, run unchanged against every backend.
 *
 * Each function takes its lock_client from cmocka's group state: a test file's
 * group setup puts the backend's client in *state and lists
 * LOCK_CONTRACT_TESTS in its CMUnitTest array (hiredis re-runs its suite per
 * connection type the same way). Every test uses its own key prefix, so the
 * tests do not interfere with each other on a shared server.
 *
 * The second half is for the Redis-backed backends' integration tests: checks
 * that need two clients of one store, and a holder in a child process (the
 * test binary re-executed with "--lock-child", see lock_child_main()) that
 * the parent can SIGSTOP, SIGCONT and SIGKILL.
 */
#ifndef GM_TESTS_LOCK_CONTRACT_H
#define GM_TESTS_LOCK_CONTRACT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lock/lock.h"

/* ---- the contract; *state is a lock_client * ---- */

void lock_contract_exclusion(void **state);
void lock_contract_lease_expiry(void **state);
void lock_contract_release_non_owner(void **state);
void lock_contract_double_release(void **state);
void lock_contract_extend(void **state);
void lock_contract_extend_after_expiry(void **state);
void lock_contract_wait_budget(void **state);
void lock_contract_single_try(void **state);
void lock_contract_tokens_unique(void **state);
void lock_contract_fence_increases(void **state);
void lock_contract_invalid_args(void **state);
void lock_contract_keys_independent(void **state);
void lock_contract_multi_all_or_nothing(void **state);
void lock_contract_multi_invalid_args(void **state);
void lock_contract_multi_fences_increase(void **state);
void lock_contract_multi_waits_for_all(void **state);
void lock_contract_multi_opposite_orders(void **state);
void lock_contract_watchdog_keeps_lease(void **state);
void lock_contract_watchdog_max_hold(void **state);
void lock_contract_watchdog_expired_lost(void **state);
void lock_contract_watchdog_release_stops(void **state);
void lock_contract_watchdog_invalid_args(void **state);
void lock_contract_owned_reacquire_counts(void **state);
void lock_contract_owned_other_owner_waits(void **state);
void lock_contract_owned_non_owner_refused(void **state);
void lock_contract_owned_extend(void **state);
void lock_contract_owned_expiry(void **state);
void lock_contract_owned_watchdog(void **state);
void lock_contract_owned_other_thread_joins(void **state);
void lock_contract_owned_owners_exclusive(void **state);
void lock_contract_owned_release_multi(void **state);
void lock_contract_owned_invalid_args(void **state);

/* ---- the CMUnitTest entries, named test_<unit>_<condition>_<expected> ---- */

#define LOCK_CONTRACT_TEST(name, fn)                                                               \
    { name, fn, NULL, NULL, NULL }
#define LOCK_CONTRACT_TESTS                                                                        \
    LOCK_CONTRACT_TEST("test_lock_acquire_threads_contend_mutually_exclusive",                     \
                       lock_contract_exclusion),                                                   \
        LOCK_CONTRACT_TEST("test_lock_acquire_lease_expired_taken_with_larger_fence",              \
                           lock_contract_lease_expiry),                                            \
        LOCK_CONTRACT_TEST("test_lock_release_non_owner_refused_and_kept",                         \
                           lock_contract_release_non_owner),                                       \
        LOCK_CONTRACT_TEST("test_lock_release_twice_not_owner", lock_contract_double_release),     \
        LOCK_CONTRACT_TEST("test_lock_extend_held_prolongs_lease", lock_contract_extend),          \
        LOCK_CONTRACT_TEST("test_lock_extend_expired_or_released_lease_lost",                      \
                           lock_contract_extend_after_expiry),                                     \
        LOCK_CONTRACT_TEST("test_lock_acquire_budget_spent_busy", lock_contract_wait_budget),      \
        LOCK_CONTRACT_TEST("test_lock_acquire_zero_wait_single_try_busy",                          \
                           lock_contract_single_try),                                              \
        LOCK_CONTRACT_TEST("test_lock_acquire_many_cycles_tokens_unique",                          \
                           lock_contract_tokens_unique),                                           \
        LOCK_CONTRACT_TEST("test_lock_acquire_repeated_fence_increases",                           \
                           lock_contract_fence_increases),                                         \
        LOCK_CONTRACT_TEST("test_lock_ops_invalid_args_invalid", lock_contract_invalid_args),      \
        LOCK_CONTRACT_TEST("test_lock_acquire_other_key_independent",                              \
                           lock_contract_keys_independent),                                        \
        LOCK_CONTRACT_TEST("test_lock_acquire_multi_one_held_none_taken",                          \
                           lock_contract_multi_all_or_nothing),                                    \
        LOCK_CONTRACT_TEST("test_lock_acquire_multi_bad_or_duplicate_keys_invalid",                \
                           lock_contract_multi_invalid_args),                                      \
        LOCK_CONTRACT_TEST("test_lock_acquire_multi_repeated_fences_increase",                     \
                           lock_contract_multi_fences_increase),                                   \
        LOCK_CONTRACT_TEST("test_lock_acquire_multi_key_released_later_acquires",                  \
                           lock_contract_multi_waits_for_all),                                     \
        LOCK_CONTRACT_TEST("test_lock_acquire_multi_opposite_orders_no_deadlock_exclusive",        \
                           lock_contract_multi_opposite_orders),                                   \
        LOCK_CONTRACT_TEST("test_lock_watchdog_holder_works_5_ttls_keeps_lease",                   \
                           lock_contract_watchdog_keeps_lease),                                    \
        LOCK_CONTRACT_TEST("test_lock_watchdog_max_hold_reached_lease_lapses",                     \
                           lock_contract_watchdog_max_hold),                                       \
        LOCK_CONTRACT_TEST("test_lock_watchdog_expired_handle_lost",                               \
                           lock_contract_watchdog_expired_lost),                                   \
        LOCK_CONTRACT_TEST("test_lock_watchdog_released_handle_stops_renewing",                    \
                           lock_contract_watchdog_release_stops),                                  \
        LOCK_CONTRACT_TEST("test_lock_watchdog_invalid_args_invalid",                              \
                           lock_contract_watchdog_invalid_args),                                   \
        LOCK_CONTRACT_TEST("test_lock_acquire_owned_same_owner_again_counts_holds_one_lease",      \
                           lock_contract_owned_reacquire_counts),                                  \
        LOCK_CONTRACT_TEST("test_lock_acquire_owned_other_owner_waits_for_last_release",           \
                           lock_contract_owned_other_owner_waits),                                 \
        LOCK_CONTRACT_TEST("test_lock_release_owned_forged_token_or_other_owner_refused",          \
                           lock_contract_owned_non_owner_refused),                                 \
        LOCK_CONTRACT_TEST("test_lock_extend_owned_prolongs_never_shortens",                       \
                           lock_contract_owned_extend),                                            \
        LOCK_CONTRACT_TEST("test_lock_acquire_owned_lease_expired_every_hold_gone",                \
                           lock_contract_owned_expiry),                                            \
        LOCK_CONTRACT_TEST("test_lock_watchdog_owned_inner_release_keeps_renewing",                \
                           lock_contract_owned_watchdog),                                          \
        LOCK_CONTRACT_TEST("test_lock_acquire_owned_same_owner_other_thread_joins_at_once",        \
                           lock_contract_owned_other_thread_joins),                                \
        LOCK_CONTRACT_TEST("test_lock_acquire_owned_threads_own_owners_exclusive_reentrant",       \
                           lock_contract_owned_owners_exclusive),                                  \
        LOCK_CONTRACT_TEST("test_lock_release_multi_owned_handles_one_hold_each",                  \
                           lock_contract_owned_release_multi),                                     \
        LOCK_CONTRACT_TEST("test_lock_acquire_owned_bad_owner_invalid",                            \
                           lock_contract_owned_invalid_args)

/* ---- two clients of one store (integration) ---- */

/* Threads on a and b take overlapping key sets in opposite orders, many times: every acquire
 * succeeds within its budget (no deadlock) and no two holders overlap on a key. */
void lock_contract_multi_race(lock_client *a, lock_client *b);
/* holder keeps a ttl_ms lease with a watchdog for 5 x ttl_ms while prober's zero-wait
 * acquires all fail; after stop + release, prober gets the key. */
void lock_contract_watchdog_two_clients(lock_client *holder, lock_client *prober, uint32_t ttl_ms);
/* holder's watchdog (ttl_ms, max_hold_ms) keeps the key from prober until max_hold_ms, then
 * the lease lapses and prober gets it (not before the hold ended). */
void lock_contract_watchdog_max_hold_two_clients(lock_client *holder, lock_client *prober,
                                                 uint32_t ttl_ms, uint32_t max_hold_ms);

/* a holds a reentrant lease as owner "request-7"; b, another client of the store, naming the
 * same owner joins it (same token and fence, holds 2) while another owner is busy on both; the
 * key is freed by the second release, whichever client makes it. */
void lock_contract_owned_two_clients(lock_client *a, lock_client *b);

/* ---- a holder in a child process (integration) ---- */

/* A child test process that holds a lease: it creates a client for urls[0..n) (lock_redis for
 * one url, lock_redlock for more), acquires key, optionally starts a watchdog, reports, and
 * releases when told to. */
typedef struct lock_child {
    pid_t pid;
    int to_child;   /* write end of the child's stdin */
    int from_child; /* read end of the child's stdout */
    lock_handle h;  /* the child's lease, as it reported it */
} lock_child;

/* Runs the child side when argv asks for it ("--lock-child ..."): returns its exit status;
 * returns -1 for a normal test run. Call first thing in main(). */
int lock_child_main(int argc, char **argv);
/* Starts self (the test binary, argv[0]) as a holder of key; waits until it holds the lease.
 * Returns 0 with *out filled, or -1 (the child is reaped). */
int lock_child_start(lock_child *out, const char *self, const char *const *urls, size_t n,
                     const char *key, uint32_t ttl_ms, int watchdog);
/* Tells the child to release; returns the lock_release() code it got, or 1 on a broken pipe. */
int lock_child_release(lock_child *ch);
/* Kills the child with sig (SIGKILL reaps it; other signals are just sent). */
void lock_child_signal(lock_child *ch, int sig);
/* Kills (if still running) and reaps the child; closes the pipes. Safe to call twice. */
void lock_child_end(lock_child *ch);

#endif /* GM_TESTS_LOCK_CONTRACT_H */
