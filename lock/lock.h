/* lock.h - distributed lock client: one API, swappable backends.
 *
 * A lock_client hands out leases on named resources. Every lease carries a
 * random 128-bit token (release and extend must present it, so a client can
 * never free or prolong a lease it does not own) and a fencing number that
 * grows with each acquisition of the resource, so that storage can refuse a
 * write from a holder that lost its lease. The Redis backends draw the first
 * 64 bits of a token once per client (its id) and the other 64 per lease: a
 * lease the client gave up that a failover or a restart brought back under
 * its id (its release was lost with the old master's writes) is taken over by
 * the client's next acquire of the key, not waited out (docs/LOCKING.md).
 *
 * Backends (chosen at run time, invisible to callers):
 *   lock_redis_new()   - one Redis server: SET key token NX PX ttl, Lua
 *                        compare-and-delete / compare-and-pexpire; or a
 *                        Sentinel group's master, or a Redis Cluster (each
 *                        key on the master of its slot; keys need a {tag}).
 *   lock_redlock_new() - Redlock over N independent Redis masters (N odd): a
 *                        lease needs a majority of them within its validity.
 *   lock_local_new()   - in-process mutex + condition variable with the same
 *                        lease semantics, for tests and single-process use.
 * docs/LOCKING.md says what each one promises and what it cannot.
 *
 * Fences: a handle's fence is strictly larger than the fence of every earlier
 * lease on the same key through the same store (per Redis server for
 * lock_redis, the maximum over the granting majority for lock_redlock, per
 * client for lock_local). A Redis server counts every key in "lock:fences",
 * except that the keys with a hash tag "{t}" count in "lock:fences:{t}", in
 * the key's Redis Cluster slot. A Redis fence is max(counter + 1, the server's
 * clock in microseconds), so a store that loses its last fences (a restart
 * without persistence, a failover to a replica that missed them) still
 * hands out larger ones, as long as the servers' clocks agree within the
 * time the restart or failover takes. A reentrant re-acquisition is not a
 * new lease: it carries its lease's fence.
 *
 * Waiting: the Redis backends queue the threads of one client that want the
 * same key in-process, so only one of them talks to Redis at a time, and the
 * contending thread sleeps until a pub/sub notice of the release, the lease's
 * expiry, or its next poll (2 ms, doubling up to 50 ms): a holder that frees
 * the key without publishing (another lock library, a plain DEL) is noticed
 * within one poll interval, not at the end of its TTL.
 *
 * Reentrant leases: lock_acquire_owned() names an owner (a thread, a request);
 * that owner may take a key it already holds again, and each acquisition adds
 * one hold to the same lease (same token, same fence); lock_release() drops one
 * hold and frees the lease when none is left. See the section below.
 *
 * Every lock_client is safe to share between threads; a lock_handle is plain
 * data owned by the caller and is not (see the watchdog section).
 *
 * Below it is rconn/ (rconn/rconn.h, included here): the Redis addresses this
 * header's constructors take, connections, Sentinel, Cluster and the clock.
 *
 * As a library on its own: `make lib` builds liblock.a and liblock.so (with
 * rconn/ inside), and `make install` puts this header at
 * <prefix>/include/gamemarket/lock.h, rconn.h at .../gamemarket/rconn/rconn.h,
 * with a pkg-config file "lock" (`pkg-config --cflags --libs lock`, then
 * #include <lock.h>). docs/LOCKING.md shows the build, the install and the
 * examples, and which lock_ names are rconn_'s former ones.
 */
#ifndef GM_LOCK_LOCK_H
#define GM_LOCK_LOCK_H

#include <stddef.h>
#include <stdint.h>

#include "rconn/rconn.h"

/* ---- version and exported symbols ----
 *
 * LOCK_VERSION_* describe this header; lock_version() the library actually
 * linked. The major version is the shared library's soname (liblock.so.3): it
 * changes when a program built against an older header could break, e.g. when
 * lock_handle or lock_redis_addr changes size (3: LOCK_KEY_MAX 256 for
 * realm-tagged keys, lock_redis_addr's cluster and seeds), or a function goes (4: the
 * lock_sentinel_* and lock_cluster_* functions became rconn/'s rconn_sentinel_* and
 * rconn_cluster_*, which liblock.so exports instead). */
#define LOCK_VERSION_MAJOR 4
#define LOCK_VERSION_MINOR 0
#define LOCK_VERSION_PATCH 0
#define LOCK_VERSION_STR2_(x) #x
#define LOCK_VERSION_STR_(a, b, c)                                                                 \
    LOCK_VERSION_STR2_(a) "." LOCK_VERSION_STR2_(b) "." LOCK_VERSION_STR2_(c)
#define LOCK_VERSION LOCK_VERSION_STR_(LOCK_VERSION_MAJOR, LOCK_VERSION_MINOR, LOCK_VERSION_PATCH)

/* Marks the public API: liblock.so is built with -fvisibility=hidden, so only these names
 * (all lock_*) and rconn.h's (all rconn_*) are exported; the modules' own lock__* and
 * rconn__* helpers are not. */
#if defined(__GNUC__) && __GNUC__ >= 4
#define LOCK_API __attribute__((visibility("default")))
#else
#define LOCK_API
#endif

/* ---- error codes: 0 is success, every error is negative ----
 *
 * LOCK_ERR_BUSY        acquire: the key stayed held by someone else for the whole wait
 *                      budget (for Redlock: no majority could be had, though one was
 *                      reachable).
 * LOCK_ERR_BACKEND     the store is unavailable: a Redis server down, hung past the timeout,
 *                      refusing the command (auth, ACL); for Redlock, too many masters failed
 *                      for a majority to be possible (at once when none answers, else at the
 *                      end of the budget). Never a hang.
 * LOCK_ERR_NOT_OWNER   release: the token does not hold the lease (expired, taken over,
 *                      released before, or forged). Nothing was freed.
 * LOCK_ERR_LEASE_LOST  extend or a watchdog: the lease is no longer this token's, or the
 *                      store applied the extension but the new lease ran out before its answer
 *                      came back (a round trip longer than a 1-2 ms lease): the lease lapsed,
 *                      the store is fine. Stop work that relies on the lock and do not commit.
 *
 * Why a call failed: lock_strerror(code) names the code; lock_last_error() gives the reason
 * of the calling thread's last failed call, with what hiredis or the server said (see the
 * helpers below).
 */

#define LOCK_ERRNO_MAP(X)                                                                          \
    X(OK, 0, "success")                                                                            \
    X(ERR_BUSY, -1, "lock busy: the wait budget was spent")                                        \
    X(ERR_BACKEND, -2, "lock store unavailable")                                                   \
    X(ERR_NOT_OWNER, -3, "lock not held by this token")                                            \
    X(ERR_LEASE_LOST, -4, "lease lost")                                                            \
    X(ERR_INVALID, -5, "invalid argument")                                                         \
    X(ERR_UNSUPPORTED, -6, "operation not supported by this backend")                              \
    X(ERR_NOMEM, -7, "out of memory")

enum lock_err {
#define LOCK_ERR_ENUM(name, val, msg) LOCK_##name = (val),
    LOCK_ERRNO_MAP(LOCK_ERR_ENUM)
#undef LOCK_ERR_ENUM
};

/* ---- types ---- */

#define LOCK_KEY_MAX 256          /* longest resource key, in bytes */
#define LOCK_TOKEN_LEN 32         /* a token is 128 random bits as lowercase hex (see above) */
#define LOCK_MULTI_MAX 64         /* most keys one lock_acquire_multi() takes */
#define LOCK_REDLOCK_NODES_MAX 15 /* most Redis masters one Redlock client uses */
#define LOCK_OWNER_MAX 64         /* longest owner id of a reentrant lease, in bytes */

typedef struct lock_client lock_client;
typedef struct lock_watchdog lock_watchdog; /* renews one lease in the background */

/* A held lease, filled in by lock_acquire(). Caller-allocated; plain data. The handles of one
 * lock_acquire_multi() share a token, and so do the handles of the holds of one reentrant
 * lease. */
typedef struct lock_handle {
    char key[LOCK_KEY_MAX + 1];     /* the resource */
    char token[LOCK_TOKEN_LEN + 1]; /* proof of ownership */
    uint64_t fence;                 /* strictly grows with each new lease on key */
    int64_t valid_until_ms;         /* monotonic (lock_now_ms) deadline of the lease */
    char owner[LOCK_OWNER_MAX + 1]; /* reentrant lease: its owner; "" for a plain lease */
    uint32_t holds; /* reentrant lease: its holds counting this one (1: a new lease); plain: 0 */
} lock_handle;

/* Where a Redis server is: rconn/'s address (rconn/rconn.h), parsed from a redis://,
 * redis-sentinel:// or redis-cluster:// URL by rconn_addr_parse(). lock_redis_addr and the
 * LOCK_*_MAX sizes are its former names, kept for programs written against liblock 3. */
typedef rconn_addr lock_redis_addr;
#define LOCK_HOST_MAX RCONN_HOST_MAX
#define LOCK_CRED_MAX RCONN_CRED_MAX
#define LOCK_SEEDS_MAX RCONN_SEEDS_MAX
#define LOCK_MASTER_NAME_MAX RCONN_MASTER_NAME_MAX

/* ---- constructors ---- */

LOCK_API lock_client *lock_redis_new(const rconn_addr *addr, int timeout_ms, int *err);
LOCK_API lock_client *lock_redlock_new(const rconn_addr *addrs, size_t n, int timeout_ms,
                                       int *err);
LOCK_API lock_client *lock_local_new(int *err);

/* On a Redis Cluster: lock_redis_new() of a redis-cluster:// address sends each call to the
 * master that serves its key's hash slot (an rconn_cluster, rconn/rconn.h), and follows the
 * cluster's redirects: a -MOVED answer updates the map and the call is sent once more to the
 * new master at once; an -ASK answer (a slot half-way through a migration) sends ASKING and
 * the call to the named node, once; -TRYAGAIN and -CLUSTERDOWN are store errors that acquire
 * retries within its wait budget. On a cluster backend every key must carry a hash tag, "{t}"
 * with t not empty (e.g. "lock:{eu-1}:B"): the fence counter "lock:fences:{t}" and the key's
 * ":wanted", ":owner" and ":released" companions are then in the key's slot, which one script
 * needs. An untagged key is refused with LOCK_ERR_INVALID, and so is a lock_acquire_multi()
 * whose keys are in more than one slot (all-or-nothing cannot span masters);
 * lock_redlock_new() refuses cluster addresses. On a Sentinel group (redis-sentinel://) it
 * follows the master an rconn_sentinel names. */

/* The Redis backends' companions of a lock key: a client that failed to acquire it marks it
 * "<key>:wanted" for the holder's lease, and the release that finds the mark publishes on
 * "<key>:released". A holder that reads the mark knows someone waits. */
#define LOCK_WANTED_SUFFIX ":wanted"
#define LOCK_RELEASED_SUFFIX ":released"

/* ---- operations ---- */

LOCK_API int lock_acquire(lock_client *c, const char *key, uint32_t ttl_ms, uint32_t wait_ms,
                          lock_handle *out);
LOCK_API int lock_release(lock_client *c, const lock_handle *h);
LOCK_API int lock_extend(lock_client *c, lock_handle *h, uint32_t ttl_ms);
LOCK_API void lock_free(lock_client *c);

/* ---- reentrant leases: an owner may take a key it already holds ----
 *
 * lock_acquire_owned() takes key for owner (1..LOCK_OWNER_MAX bytes, any text without NUL:
 * a thread id, a request id). When that owner already holds key's lease, it succeeds at
 * once without waiting and adds a hold to the same lease: the handle gets the lease's token
 * and fence (a re-acquisition is not a new lease, so the fence does not change) and
 * holds = the number of holds now; the lease is prolonged to at least ttl_ms from now, never
 * shortened (the other holds keep their deadlines). Otherwise it waits like lock_acquire()
 * and starts a new lease (holds = 1, a new token and fence). Another owner, and every plain
 * lock_acquire(), finds the key held until the last hold is released or the lease expires.
 *
 * lock_release() of an owned handle drops one hold: the lease stays held while holds remain
 * (its watchdogs keep renewing) and is freed by the last release. Holds are counted, not
 * handles: every successful lock_acquire_owned() is balanced by exactly one lock_release()
 * of any of the lease's handles. Release and extend still need the lease's token and the
 * same owner (LOCK_ERR_NOT_OWNER / LOCK_ERR_LEASE_LOST otherwise); lock_extend() of an owned
 * lease never shortens it either. Expiry ends every hold at once. The owner id is an
 * identity, not a secret: on a shared store, any client naming the same owner joins the
 * lease (which is how a request can re-enter across processes), so make owner ids unique
 * where that is not wanted (e.g. prefix them with a host and process id). Fails like
 * lock_acquire(), and with LOCK_ERR_INVALID for a NULL, empty or overlong owner, or
 * LOCK_ERR_UNSUPPORTED for a backend without reentrant leases. */

LOCK_API int lock_acquire_owned(lock_client *c, const char *key, const char *owner, uint32_t ttl_ms,
                                uint32_t wait_ms, lock_handle *out);

/* ---- several keys at once: all or nothing, so never a deadlock ---- */

LOCK_API int lock_acquire_multi(lock_client *c, const char *const *keys, size_t n, uint32_t ttl_ms,
                                uint32_t wait_ms, lock_handle *out);
LOCK_API int lock_release_multi(lock_client *c, const lock_handle *hs, size_t n);

/* ---- watchdog: renews a lease while its holder works, up to a hard limit ----
 *
 * lock_watchdog_start() copies the handle and from then on a background thread
 * of the client (one per client, serving all its watchdogs) extends the lease
 * to ttl_ms every ttl_ms/3, but never past max_hold_ms after the start: the
 * last renewal is cut short so the lease lapses by then, and a stuck holder
 * cannot keep the key forever. A refused renewal ends the watchdog; a renewal
 * that fails on a store error is retried until the lease's deadline passes.
 *
 * Thread-safety: the watchdog works on its own copy, never on the caller's
 * handle, so the caller's h->valid_until_ms keeps the deadline it had at the
 * start and goes stale while renewals run. Read the live deadline with
 * lock_watchdog_check() (safe from any thread, at any time), and have it
 * written back by lock_watchdog_stop(w, h). Do not call lock_extend() on the
 * handle while its watchdog runs. lock_release() of the handle stops the
 * renewals at once (the watchdog object still has to be stopped to free it).
 *
 * Typical use: acquire; start; work; if (lock_watchdog_check(w, NULL) < 0)
 * give up; commit with the fence; lock_watchdog_stop(w, &h); lock_release(). */

LOCK_API int lock_watchdog_start(lock_client *c, const lock_handle *h, uint32_t ttl_ms,
                                 uint32_t max_hold_ms, lock_watchdog **out);
LOCK_API int lock_watchdog_check(const lock_watchdog *w, int64_t *valid_until_ms);
LOCK_API int lock_watchdog_stop(lock_watchdog *w, lock_handle *h);

/* ---- helpers ---- */

LOCK_API const char *lock_version(void);
LOCK_API const char *lock_name(const lock_client *c);
LOCK_API int lock_store_addr(const lock_client *c, rconn_addr *out);
LOCK_API const char *lock_strerror(int err);
/* The reason the calling thread's last failed call of a lock_client failed (the operations,
 * the reentrant, multi-key and watchdog calls; a constructor says all through *err):
 * lock_strerror() of its code, then, when the store said why, ": " and what it said, e.g.
 * "lock store unavailable: 127.0.0.1:6379: Connection refused" or "lock store unavailable:
 * 127.0.0.1:6379: NOPERM ...". The text lives in the calling thread (like errno), so
 * threads sharing a client never see each other's; a call that succeeds leaves it as it
 * was. Returns "" before any failure; borrowed: valid until this thread's next failed call.
 * rconn/'s functions (Sentinel, Cluster, connections) report through their own why argument.
 * This function can't fail. */
LOCK_API const char *lock_last_error(void);

/* ---- former names of rconn/'s functions, kept for programs written against liblock 3 ----
 *
 * Each calls its rconn_ namesake (rconn/rconn.h), with the code turned into a lock_err. */
LOCK_API int64_t lock_now_ms(void);                                         /* rconn_now_ms */
LOCK_API int lock_redis_addr_parse(const char *url, lock_redis_addr *out); /* rconn_addr_parse */
LOCK_API int lock_redis_addr_parse_list(const char *list, lock_redis_addr *out, size_t max,
                                        size_t *n); /* rconn_addr_parse_list */
LOCK_API int lock_redis_addr_same(const lock_redis_addr *a,
                                  const lock_redis_addr *b); /* rconn_addr_same */
LOCK_API unsigned lock_key_slot(const char *key, size_t len); /* rconn_key_slot */

#endif /* GM_LOCK_LOCK_H */
