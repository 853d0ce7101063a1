/* lock.h - distributed lock client: one API, swappable backends.
 *
 * A lock_client hands out leases on named resources. Every lease carries a
 * random 128-bit token (release and extend must present it, so a client can
 * never free or prolong a lease it does not own) and a fencing number that
 * grows with each acquisition of the resource, so that storage can refuse a
 * write from a holder that lost its lease.
 *
 * Backends (chosen at run time, invisible to callers):
 *   lock_redis_new()  - one Redis server: SET key token NX PX ttl, Lua
 *                       compare-and-delete / compare-and-pexpire.
 *   lock_local_new()  - in-process mutex + condition variable with the same
 *                       lease semantics, for tests and single-process use.
 *
 * Every lock_client is safe to share between threads.
 */
#ifndef GM_LOCK_LOCK_H
#define GM_LOCK_LOCK_H

#include <stddef.h>
#include <stdint.h>

/* ---- error codes: 0 is success, every error is negative ---- */

#define LOCK_ERRNO_MAP(X)                                                       \
    X(OK, 0, "success")                                                         \
    X(ERR_BUSY, -1, "lock busy: the wait budget was spent")                     \
    X(ERR_BACKEND, -2, "lock store unavailable")                                \
    X(ERR_NOT_OWNER, -3, "lock not held by this token")                         \
    X(ERR_LEASE_LOST, -4, "lease lost")                                         \
    X(ERR_INVALID, -5, "invalid argument")                                      \
    X(ERR_UNSUPPORTED, -6, "operation not supported by this backend")           \
    X(ERR_NOMEM, -7, "out of memory")

enum lock_err {
#define LOCK_ERR_ENUM(name, val, msg) LOCK_##name = (val),
    LOCK_ERRNO_MAP(LOCK_ERR_ENUM)
#undef LOCK_ERR_ENUM
};

/* ---- types ---- */

#define LOCK_KEY_MAX 128  /* longest resource key, in bytes */
#define LOCK_TOKEN_LEN 32 /* a token is 128 random bits as lowercase hex */

typedef struct lock_client lock_client;

/* A held lease, filled in by lock_acquire(). Caller-allocated; plain data. */
typedef struct lock_handle {
    char key[LOCK_KEY_MAX + 1];       /* the resource */
    char token[LOCK_TOKEN_LEN + 1];   /* proof of ownership */
    uint64_t fence;                   /* grows with each acquisition of key */
    int64_t valid_until_ms;           /* monotonic deadline of the lease */
} lock_handle;

/* Where a Redis server is, parsed from redis://[user:pass@]host[:port][/db]. */
#define LOCK_HOST_MAX 255
#define LOCK_CRED_MAX 255
typedef struct lock_redis_addr {
    char host[LOCK_HOST_MAX + 1];
    int port;
    char user[LOCK_CRED_MAX + 1]; /* empty: no ACL user */
    char pass[LOCK_CRED_MAX + 1]; /* empty: no AUTH */
    int db;
} lock_redis_addr;

/* ---- constructors ---- */

lock_client *lock_redis_new(const lock_redis_addr *addr, int timeout_ms, int *err);
lock_client *lock_local_new(int *err);

/* ---- operations ---- */

int lock_acquire(lock_client *c, const char *key, uint32_t ttl_ms, uint32_t wait_ms,
                 lock_handle *out);
int lock_release(lock_client *c, const lock_handle *h);
int lock_extend(lock_client *c, lock_handle *h, uint32_t ttl_ms);
void lock_free(lock_client *c);

/* ---- helpers ---- */

const char *lock_name(const lock_client *c);
const char *lock_strerror(int err);
int lock_redis_addr_parse(const char *url, lock_redis_addr *out);
int64_t lock_now_ms(void);

#endif /* GM_LOCK_LOCK_H */
