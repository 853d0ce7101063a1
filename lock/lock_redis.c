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

/* ---- ops ---- */

static int redis_acquire(void *impl, const char *key, uint32_t ttl_ms, uint32_t wait_ms,
                         lock_handle *out) {
    return lock__dist_acquire(impl, &key, 1, NULL, ttl_ms, wait_ms, out);
}

static int redis_acquire_multi(void *impl, const char *const *keys, size_t n, uint32_t ttl_ms,
                               uint32_t wait_ms, lock_handle *out) {
    return lock__dist_acquire(impl, keys, n, NULL, ttl_ms, wait_ms, out);
}

static int redis_acquire_owned(void *impl, const char *key, const char *owner, uint32_t ttl_ms,
                               uint32_t wait_ms, lock_handle *out) {
    return lock__dist_acquire(impl, &key, 1, owner, ttl_ms, wait_ms, out);
}

static int redis_release_owned(void *impl, const lock_handle *h, uint32_t *left) {
    return lock__dist_release_owned(impl, h, left);
}

static int redis_release(void *impl, const lock_handle *h) {
    return lock__dist_release(impl, h, 1);
}

static int redis_release_multi(void *impl, const lock_handle *hs, size_t n) {
    return lock__dist_release(impl, hs, n);
}

static int redis_extend(void *impl, lock_handle *h, uint32_t ttl_ms) {
    return lock__dist_extend(impl, h, ttl_ms);
}

static void redis_destroy(void *impl) {
    lock__dist_free(impl);
}

static const struct lock_ops redis_ops = {
    .name = "redis",
    .acquire = redis_acquire,
    .release = redis_release,
    .extend = redis_extend,
    .destroy = redis_destroy,
    .acquire_multi = redis_acquire_multi,
    .release_multi = redis_release_multi,
    .acquire_owned = redis_acquire_owned,
    .release_owned = redis_release_owned,
};

/* ---- API ---- */

/* Returns a new client for the Redis server at *addr (borrowed; copied), using timeout_ms for
 * connecting and for each answer; caller frees with lock_free(). Does not contact Redis:
 * connections are made on first use and remade after failures, so the server may start
 * later. Returns NULL with *err (when err is non-NULL) set to LOCK_ERR_INVALID (NULL addr,
 * empty or unterminated host, port outside 1..65535, negative db, a cluster with a db other
 * than 0, timeout_ms <= 0),
 * LOCK_ERR_NOMEM, or LOCK_ERR_BACKEND if a mutex cannot be created; *err is LOCK_OK on
 * success. */
lock_client *lock_redis_new(const lock_redis_addr *addr, int timeout_ms, int *err) {
    int dummy;
    if (err == NULL) err = &dummy;
    if (!lock__redis_addr_ok(addr) || timeout_ms <= 0) {
        *err = LOCK_ERR_INVALID;
        return NULL;
    }
    struct lock__dist *d = lock__dist_new(addr, 1, timeout_ms, 0, err);
    if (d == NULL) return NULL;
    lock_client *c = lock__client_new(&redis_ops, d, err);
    if (c == NULL) {
        lock__dist_free(d);
        return NULL;
    }
    c->store = *addr;
    c->has_store = 1;
    return c;
}
