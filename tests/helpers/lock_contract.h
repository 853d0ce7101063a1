/* lock_contract.h - the lock contract as cmocka tests, run unchanged against every backend.
 *
 * Each function takes its lock_client from cmocka's group state: a test file's
 * group setup puts the backend's client in *state and lists
 * LOCK_CONTRACT_TESTS in its CMUnitTest array (hiredis re-runs its suite per
 * connection type the same way). Every test uses its own key prefix, so the
 * tests do not interfere with each other on a shared server.
 */
#ifndef GM_TESTS_LOCK_CONTRACT_H
#define GM_TESTS_LOCK_CONTRACT_H

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
                           lock_contract_keys_independent)

#endif /* GM_TESTS_LOCK_CONTRACT_H */
