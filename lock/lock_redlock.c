/* lock_redlock.c - Redlock over N independent Redis masters.
 *
 * A lease is held when a majority of the N masters (N odd) granted it, in one
 * parallel round, with time left once the round's duration and a clock-drift
 * allowance are subtracted. Keys, scripts, fences and waiting are those of
 * lock_redis.c, on every master; docs/LOCKING.md says what Redlock does and
 * does not promise (it assumes bounded clock drift and process pauses shorter
 * than the lease; fences are what protect the data when that fails).
 *
 * DESIGN
 * The engine of lock_dist.c does the work, with Redlock semantics:
 *  - acquire: the script goes to all masters at once; each answer is awaited
 *    at most min(timeout_ms, max(5 ms, ttl/10)), so a dead or hung master
 *    costs a fraction of the lease; success needs n/2+1 grants and
 *    ttl - elapsed - (ttl/100 + 2 ms) > 0, which is also the handle's
 *    remaining validity; a failed round is undone on every master that may
 *    have granted, then retried after a wait (pub/sub, PTTL, the capped
 *    poll, or jittered backoff) while the budget lasts;
 *  - fence: the maximum of the granting masters' "lock:fences" counters,
 *    with the lagging ones raised to it when they disagree;
 *  - release and extend: to all masters; OK on a majority.
 * Unreachable masters: when none answers, LOCK_ERR_BACKEND at once; when some
 * answer but no majority can, the attempt is retried until the wait budget
 * ends and then answers LOCK_ERR_BACKEND, never a hang.
 * Reentrant leases: as lock_redis.c's on every master; an acquisition holds
 * when a majority answered the same lease (a hold on the owner's lease, or
 * one new lease), and what the others granted is given back.
 */
#include "lock/lock.h"

#include <stdlib.h>

#include "lock/lock_impl.h"

/* ---- API ---- */

/* Returns a new Redlock client over the n independent Redis masters addrs[0..n) (borrowed;
 * copied), n odd, 1 <= n <= LOCK_REDLOCK_NODES_MAX; timeout_ms bounds connecting to a master
 * and waiting for its answer (acquire and extend wait at most min(timeout_ms, max(5, ttl/10))
 * per round); caller frees with lock_free(). Does not contact Redis. Returns NULL with *err
 * (when err is non-NULL) set to LOCK_ERR_INVALID (NULL addrs, n even, 0 or too large, a bad
 * address, a Redis Cluster: a lease there is one master's, no majority), timeout_ms <= 0),
 * LOCK_ERR_NOMEM, or LOCK_ERR_BACKEND if a mutex cannot be
 * created; *err is LOCK_OK on success. */
lock_client *lock_redlock_new(const rconn_addr *addrs, size_t n, int timeout_ms, int *err) {
    int dummy;
    if (err == NULL) err = &dummy;
    if (addrs == NULL || n == 0 || n % 2 == 0 || n > LOCK_REDLOCK_NODES_MAX || timeout_ms <= 0) {
        *err = LOCK_ERR_INVALID;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!rconn_addr_valid(&addrs[i]) || addrs[i].cluster) {
            *err = LOCK_ERR_INVALID;
            return NULL;
        }
    }
    return lock__dist_client_new(addrs, n, timeout_ms, 1, err);
}
