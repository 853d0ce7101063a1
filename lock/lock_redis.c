/* lock_redis.c - single-instance Redis lock backend.
 *
 * A lease is one Redis key: its value is the holder's token and its PX the
 * lease, set by a Lua script that also advances the server's fence counter
 * "lock:fences" (to max(counter + 1, the server's clock in microseconds)), so
 * every acquisition gets a larger fencing number, even after a failover that
 * lost the last ones. The address may be a Sentinel group (lock_node.c
 * follows its master) or a Redis Cluster (lock_call.c sends each call to the
 * master of its key's slot and follows redirects; keys must carry a hash tag,
 * see lock.h). Release is compare-and-delete
 * (and publishes "<key>:released") and extend is compare-and-pexpire, both
 * Lua, so a client can never free or prolong a lease it does not own. There is
 * never a blind DEL and never SETNX-then-EXPIRE.
 *
 * DESIGN
 * The work is done by the engine of lock_dist.c over one node (lock_node.c),
 * with single-server semantics: a quorum of 1, the client's timeout for each
 * answer, no clock-drift allowance, valid_until_ms = the start of the round
 * (before the script is sent) + ttl. A server that fails answers LOCK_ERR_BACKEND at once, and the
 * next call reconnects, so lock_redis_new() does not need Redis up and the
 * client recovers by itself. Threads of one client that want the same key
 * queue in-process, and the one contending thread sleeps on pub/sub and a
 * short, capped poll (see lock_dist.c); scripts are called with EVALSHA, falling back to EVAL on
 * NOSCRIPT.
 *
 * A reentrant lease (lock_acquire_owned) is the same key with the same value,
 * plus the hash "<key>:owner" {owner, token, holds, fence} with the same
 * expiry, kept by their own scripts (lock_script.c); docs/LOCKING.md shows it.
 */
#include "lock/lock.h"

#include <stdlib.h>

#include "lock/lock_impl.h"

/* ---- API ---- */

/* Returns a new client for the Redis server at *addr (borrowed; copied), using timeout_ms for
 * connecting and for each answer; caller frees with lock_free(). Does not contact Redis:
 * connections are made on first use and remade after failures, so the server may start
 * later. Returns NULL with *err (when err is non-NULL) set to LOCK_ERR_INVALID (NULL addr,
 * empty or unterminated host, port outside 1..65535, negative db, a cluster with a db other
 * than 0, timeout_ms <= 0),
 * LOCK_ERR_NOMEM, or LOCK_ERR_BACKEND if a mutex cannot be created; *err is LOCK_OK on
 * success. */
lock_client *lock_redis_new(const rconn_addr *addr, int timeout_ms, int *err) {
    int dummy;
    if (err == NULL) err = &dummy;
    if (!rconn_addr_valid(addr) || timeout_ms <= 0) {
        *err = LOCK_ERR_INVALID;
        return NULL;
    }
    lock_client *c = lock__dist_client_new(addr, 1, timeout_ms, 0, err);
    if (c == NULL) return NULL;
    c->store = *addr;
    c->has_store = 1;
    return c;
}
