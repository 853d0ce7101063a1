/* lock.c - the lock_ API: argument checks, dispatch to a backend, shared helpers.
 *
 * Every public operation checks its arguments here, once, and then calls the
 * backend through c->ops (the dictType / ConnectionType pattern), so backends
 * never repeat the checks. A NULL optional op answers LOCK_ERR_UNSUPPORTED
 * (release_multi falls back to one release per handle). The file also holds
 * what the backends share: client wrapping, token generation, retry backoff,
 * sleeping, the monotonic clock, the parser for redis:// addresses, and the
 * calling thread's reason for its last failed call (lock_last_error()).
 */
#include "lock/lock.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "lock/lock_impl.h"

/* ---- private ---- */

/* Returns 1 when key is a NUL-terminated string of 1..LOCK_KEY_MAX bytes. */
static int key_ok(const char *key) {
    if (key == NULL) return 0;
    size_t n = strnlen(key, LOCK_KEY_MAX + 1);
    return n > 0 && n <= LOCK_KEY_MAX;
}

/* Returns 1 when owner is a NUL-terminated string of 1..LOCK_OWNER_MAX bytes. */
static int owner_ok(const char *owner) {
    if (owner == NULL) return 0;
    size_t n = strnlen(owner, LOCK_OWNER_MAX + 1);
    return n > 0 && n <= LOCK_OWNER_MAX;
}

/* Returns 1 when h names a valid key, carries a token of exactly LOCK_TOKEN_LEN bytes and an
 * owner terminated within its field (empty for a plain lease), else 0 (also for NULL). This
 * function can't fail. */
int lock__handle_ok(const lock_handle *h) {
    if (h == NULL) return 0;
    if (memchr(h->key, '\0', sizeof h->key) == NULL || !key_ok(h->key)) return 0;
    if (memchr(h->owner, '\0', sizeof h->owner) == NULL) return 0;
    if (memchr(h->token, '\0', sizeof h->token) == NULL) return 0;
    return strlen(h->token) == LOCK_TOKEN_LEN;
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
    if (c == NULL || out == NULL || !key_ok(key) || ttl_ms == 0)
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
    if (c == NULL || out == NULL || !key_ok(key) || !owner_ok(owner) || ttl_ms == 0)
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
        if (!key_ok(keys[i])) return 0;
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

/* Returns a static message for a lock_err code, or "unknown lock error".
 * This function can't fail. */
const char *lock_strerror(int err) {
    switch (err) {
#define LOCK_ERR_MSG(name, val, msg)                                                               \
    case LOCK_##name: return msg;
        LOCK_ERRNO_MAP(LOCK_ERR_MSG)
#undef LOCK_ERR_MSG
    default: return "unknown lock error";
    }
}

/* ---- why a call failed ----
 *
 * Each thread keeps two texts: cur, the reason being gathered by the call under way (the
 * layers below write it with lock__why() where hiredis or a server says what went wrong),
 * and last, what lock_last_error() answers: set when a call fails, left alone when one
 * succeeds. Thread-local, so no lock and no thread ever reads another's. */
static _Thread_local char why_cur[LOCK__WHY_MAX];
static _Thread_local char why_last[LOCK__WHY_MAX + 64]; /* + lock_strerror()'s text */

/* See lock.h. Returns the calling thread's text (borrowed). This function can't fail. */
const char *lock_last_error(void) {
    return why_last;
}

/* Starts a public call: the calling thread's reason under way is emptied. This function
 * can't fail. */
void lock__why_begin(void) {
    why_cur[0] = '\0';
}

/* Returns the reason gathered so far by the calling thread's call under way ("" when none;
 * borrowed, valid until the thread's next lock__why*() call). This function can't fail. */
const char *lock__why_now(void) {
    return why_cur;
}

/* Writes the reason of the failure under way (printf-style; truncated to LOCK__WHY_MAX - 1
 * bytes), replacing what an earlier step wrote. This function can't fail. */
void lock__why(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why_cur, sizeof why_cur, fmt, ap);
    va_end(ap);
}

/* Ends a public call that answers rc: on a failure, the calling thread's last reason becomes
 * lock_strerror(rc), plus ": " and the reason gathered when there is one. Returns rc. This
 * function can't fail. */
int lock__why_end(int rc) {
    if (rc < 0)
        snprintf(why_last, sizeof why_last, "%s%s%s", lock_strerror(rc), why_cur[0] ? ": " : "",
                 why_cur);
    why_cur[0] = '\0';
    return rc;
}

/* Returns CLOCK_MONOTONIC in milliseconds. This function can't fail (the clock is mandatory
 * on Linux; should it ever fail, 0 is returned). */
int64_t lock_now_ms(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- redis:// address parsing ---- */

static int hexval(int ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..n) into dst (cap bytes with the NUL). Returns 0, or -1 on a bad
 * escape, a decoded NUL, a control character or overflow. */
static int pct_decode(const char *s, size_t n, char *dst, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int ch = (unsigned char)s[i];
        if (ch == '%') {
            if (n - i < 3) return -1;
            int hi = hexval((unsigned char)s[i + 1]);
            int lo = hexval((unsigned char)s[i + 2]);
            if (hi < 0 || lo < 0) return -1;
            ch = hi * 16 + lo;
            if (ch == 0) return -1;
            i += 2;
        } else if (ch < 0x21 || ch == 0x7f) {
            return -1;
        }
        if (o + 1 >= cap) return -1;
        dst[o++] = (char)ch;
    }
    dst[o] = '\0';
    return 0;
}

/* Parses s[0..n) as decimal digits only into *out within [lo, hi]. Returns 0 or -1. */
static int parse_uint(const char *s, size_t n, long lo, long hi, int *out) {
    if (n == 0 || n > 10) return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static int host_char_ok(int ch, int bracketed) {
    if (bracketed) return hexval(ch) >= 0 || ch == ':' || ch == '.';
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '-' || ch == '_';
}

/* Parses one host[:port] in [p, end) into host (LOCK_HOST_MAX + 1 bytes) and *port: an IPv6
 * host in brackets, an empty host meaning empty_host (NULL: not allowed), no port meaning
 * defport. Returns 0, or -1 when it is not one. */
static int parse_host_port(const char *p, const char *end, const char *empty_host, int defport,
                           char *host, int *port) {
    const char *h = p, *h_end;
    int bracketed = 0;
    if (p < end && *p == '[') {
        bracketed = 1;
        h = p + 1;
        const char *close = memchr(h, ']', (size_t)(end - h));
        if (close == NULL || close == h) return -1;
        h_end = close;
        p = close + 1;
    } else {
        h_end = memchr(p, ':', (size_t)(end - p));
        if (h_end == NULL) h_end = end;
        p = h_end;
    }
    size_t hlen = (size_t)(h_end - h);
    if (hlen > LOCK_HOST_MAX) return -1;
    for (size_t i = 0; i < hlen; i++)
        if (!host_char_ok((unsigned char)h[i], bracketed)) return -1;
    if (hlen == 0) {
        if (empty_host == NULL) return -1;
        snprintf(host, LOCK_HOST_MAX + 1, "%s", empty_host);
    } else {
        memcpy(host, h, hlen);
        host[hlen] = '\0';
    }
    *port = defport;
    if (p < end) {
        if (*p != ':') return -1;
        p++;
        if (parse_uint(p, (size_t)(end - p), 1, 65535, port) != 0) return -1;
    }
    return 0;
}

/* Returns 1 when [s, s + len) is a master name: 1..LOCK_MASTER_NAME_MAX of [A-Za-z0-9._-]. */
static int master_name_ok(const char *s, size_t len) {
    if (len == 0 || len > LOCK_MASTER_NAME_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '-' || ch == '_'))
            return 0;
    }
    return 1;
}

/* Parses a Sentinel group's or a cluster's "host[:port][,host[:port]...]" in [p, end) into
 * a's seeds, defport where no port is given. Returns 0 or -1. */
static int parse_seeds(const char *p, const char *end, int defport, lock_redis_addr *a) {
    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *item_end = comma != NULL ? comma : end;
        if (a->nseeds == LOCK_SEEDS_MAX) return -1;
        struct lock_redis_at *at = &a->seeds[a->nseeds];
        if (parse_host_port(p, item_end, NULL, defport, at->host, &at->port) != 0) return -1;
        a->nseeds++;
        if (comma == NULL) return 0;
        p = comma + 1;
    }
}

/* Parses url into the caller's *out:
 *   redis://[[user]:pass@]host[:port][/db], or the same without the scheme ("host:port");
 *   redis-sentinel://[[user]:pass@]host[:port][,host[:port]...]/name[/db];
 *   redis-cluster://[[user]:pass@]host[:port][,host[:port]...][/0].
 * Defaults: host 127.0.0.1, port 6379 (a Sentinel's: 26379), db 0, no user, no password.
 * user and pass are percent-decoded; an IPv6 host is written in brackets. Fails with
 * LOCK_ERR_INVALID (NULL arguments, another scheme such as rediss://, a userinfo without
 * ':', a port outside 1..65535, a db that is not a non-negative decimal, a Sentinel group
 * without a master name or with more than LOCK_SEEDS_MAX Sentinels, a cluster without a
 * node, with more than LOCK_SEEDS_MAX of them or with a db other than 0, bad escapes,
 * overlong fields, trailing text); *out is written only on success. */
int lock_redis_addr_parse(const char *url, lock_redis_addr *out) {
    if (url == NULL || out == NULL) return LOCK_ERR_INVALID;
    lock_redis_addr a;
    memset(&a, 0, sizeof a);
    a.port = 6379;

    const char *p = url;
    int sentinel = 0, cluster = 0;
    if (strncasecmp(p, "redis://", 8) == 0) {
        p += 8;
    } else if (strncasecmp(p, "redis-sentinel://", 17) == 0) {
        p += 17;
        sentinel = 1;
    } else if (strncasecmp(p, "redis-cluster://", 16) == 0) {
        p += 16;
        cluster = 1;
    } else if (strstr(p, "://") != NULL) {
        return LOCK_ERR_INVALID; /* rediss:// (TLS) and every other scheme */
    }

    const char *slash = strchr(p, '/');
    const char *auth_end = slash != NULL ? slash : p + strlen(p);

    /* userinfo: everything before the last '@' of the authority */
    const char *at = NULL;
    for (const char *q = p; q < auth_end; q++)
        if (*q == '@') at = q;
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon == NULL) return LOCK_ERR_INVALID;
        if (pct_decode(p, (size_t)(colon - p), a.user, sizeof a.user) != 0 ||
            pct_decode(colon + 1, (size_t)(at - colon - 1), a.pass, sizeof a.pass) != 0)
            return LOCK_ERR_INVALID;
        p = at + 1;
    }

    const char *dbs = NULL; /* the db's digits, when a path gives them */
    if (sentinel) {
        if (slash == NULL || parse_seeds(p, auth_end, 26379, &a) != 0) return LOCK_ERR_INVALID;
        a.host[0] = '\0';
        a.port = 0;
        const char *name = slash + 1;
        const char *name_end = strchr(name, '/');
        if (name_end == NULL) name_end = name + strlen(name);
        if (!master_name_ok(name, (size_t)(name_end - name))) return LOCK_ERR_INVALID;
        memcpy(a.master_name, name, (size_t)(name_end - name));
        a.master_name[name_end - name] = '\0';
        if (*name_end == '/') dbs = name_end + 1;
    } else if (cluster) {
        if (parse_seeds(p, auth_end, 6379, &a) != 0) return LOCK_ERR_INVALID;
        a.host[0] = '\0';
        a.port = 0;
        a.cluster = 1;
        if (slash != NULL) dbs = slash + 1;
    } else {
        if (parse_host_port(p, auth_end, "127.0.0.1", 6379, a.host, &a.port) != 0)
            return LOCK_ERR_INVALID;
        if (slash != NULL) dbs = slash + 1;
    }

    /* db: "/" alone means 0 */
    if (dbs != NULL) {
        size_t dlen = strlen(dbs);
        if (dlen > 0 && parse_uint(dbs, dlen, 0, INT_MAX, &a.db) != 0) return LOCK_ERR_INVALID;
    }
    if (cluster && a.db != 0) return LOCK_ERR_INVALID; /* a cluster has db 0 only */

    *out = a;
    return LOCK_OK;
}

/* Returns 1 when s starts with a URL scheme ("<letters, digits, +.->://"). */
static int has_scheme(const char *s) {
    size_t i = 0;
    while ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
           (s[i] >= '0' && s[i] <= '9') || s[i] == '+' || s[i] == '.' || s[i] == '-')
        i++;
    return i > 0 && strncmp(s + i, "://", 3) == 0;
}

/* Parses a list of URLs separated by commas into out[0..max): "redis://a:1,redis://b:2",
 * where a Sentinel group's own list of Sentinels stays with its URL
 * ("redis-sentinel://s1:26379,s2:26379/m1,redis://c:3" is two), and so does a cluster's list
 * of nodes up to the next URL that names a scheme ("redis-cluster://a:1,b:2,redis://c:3" is
 * two; "redis-cluster://a:1,b:2/0,c:3" too). Writes how many into *n.
 * Returns LOCK_OK, or LOCK_ERR_INVALID (NULL arguments, an empty list or item, more than max
 * URLs, one that lock_redis_addr_parse() refuses); out and *n are then unspecified. */
int lock_redis_addr_parse_list(const char *list, lock_redis_addr *out, size_t max, size_t *n) {
    if (list == NULL || out == NULL || n == NULL) return LOCK_ERR_INVALID;
    *n = 0;
    const char *p = list;
    for (;;) {
        /* a Sentinel group's commas end at the '/' of its master name */
        const char *from = p;
        if (strncasecmp(p, "redis-sentinel://", 17) == 0) {
            const char *slash = strchr(p + 17, '/');
            from = slash != NULL ? slash : p + strlen(p);
        }
        const char *comma = strchr(from, ',');
        if (strncasecmp(p, "redis-cluster://", 16) == 0) {
            /* a cluster's commas go on until its "/db" or an item with a scheme */
            comma = strpbrk(p + 16, ",/");
            while (comma != NULL && *comma == ',' && !has_scheme(comma + 1))
                comma = strpbrk(comma + 1, ",/");
            if (comma != NULL && *comma == '/') comma = strchr(comma, ',');
        }
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        char url[(LOCK_HOST_MAX + 8) * LOCK_SEEDS_MAX + 4 * LOCK_CRED_MAX];
        if (len == 0 || len >= sizeof url || *n == max) return LOCK_ERR_INVALID;
        memcpy(url, p, len);
        url[len] = '\0';
        if (lock_redis_addr_parse(url, &out[*n]) != LOCK_OK) return LOCK_ERR_INVALID;
        (*n)++;
        if (comma == NULL) return LOCK_OK;
        p = comma + 1;
    }
}

/* Returns 1 when a and b name the same data: the same host, port and db, or the same
 * Sentinel group (master name, db, and the same Sentinels in the same order), or the same
 * cluster (the same seed nodes in the same order); else 0 (also for NULL, and for a
 * cluster and a single server, even one of its nodes). Credentials are not compared. This
 * function can't fail. */
int lock_redis_addr_same(const lock_redis_addr *a, const lock_redis_addr *b) {
    if (a == NULL || b == NULL || a->db != b->db || (a->cluster != 0) != (b->cluster != 0))
        return 0;
    if (strcmp(a->master_name, b->master_name) != 0) return 0;
    if (a->master_name[0] == '\0' && !a->cluster)
        return strcmp(a->host, b->host) == 0 && a->port == b->port;
    if (a->nseeds != b->nseeds) return 0;
    for (int i = 0; i < a->nseeds; i++)
        if (strcmp(a->seeds[i].host, b->seeds[i].host) != 0 ||
            a->seeds[i].port != b->seeds[i].port)
            return 0;
    return 1;
}

/* ---- module-internal helpers ---- */

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

/* Initialises *cv to time its waits on CLOCK_MONOTONIC, so wall-clock jumps do not matter.
 * Returns LOCK_OK, or LOCK_ERR_BACKEND (*cv is then not initialised). */
int lock__cond_init_monotonic(pthread_cond_t *cv) {
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0) return LOCK_ERR_BACKEND;
    int ok =
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 && pthread_cond_init(cv, &attr) == 0;
    pthread_condattr_destroy(&attr);
    return ok ? LOCK_OK : LOCK_ERR_BACKEND;
}

/* Writes the monotonic instant ms (as from lock_now_ms(), not negative) into the caller's *ts,
 * for pthread_cond_timedwait on a lock__cond_init_monotonic() condition. This function can't
 * fail. */
void lock__timespec_at(int64_t ms, struct timespec *ts) {
    if (ms < 0) ms = 0;
    ts->tv_sec = (time_t)(ms / 1000);
    ts->tv_nsec = (long)(ms % 1000) * 1000000L;
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

/* Returns 1 when *addr is usable: non-NULL, every string NUL-terminated within its field,
 * db >= 0, and either one server (host non-empty, port in 1..65535), a Sentinel group
 * (1..LOCK_SEEDS_MAX Sentinels, each with a host and a port) or a cluster (no master name,
 * db 0, 1..LOCK_SEEDS_MAX seeds, each with a host and a port); else 0. This function can't
 * fail. */
int lock__redis_addr_ok(const lock_redis_addr *addr) {
    if (addr == NULL || addr->db < 0 || memchr(addr->user, '\0', sizeof addr->user) == NULL ||
        memchr(addr->pass, '\0', sizeof addr->pass) == NULL ||
        memchr(addr->master_name, '\0', sizeof addr->master_name) == NULL)
        return 0;
    if (addr->cluster && (addr->master_name[0] != '\0' || addr->db != 0)) return 0;
    if (addr->master_name[0] == '\0' && !addr->cluster)
        return memchr(addr->host, '\0', sizeof addr->host) != NULL && addr->host[0] != '\0' &&
               addr->port >= 1 && addr->port <= 65535;
    if (addr->nseeds < 1 || addr->nseeds > LOCK_SEEDS_MAX) return 0;
    for (int i = 0; i < addr->nseeds; i++) {
        const struct lock_redis_at *at = &addr->seeds[i];
        if (memchr(at->host, '\0', sizeof at->host) == NULL || at->host[0] == '\0' ||
            at->port < 1 || at->port > 65535)
            return 0;
    }
    return 1;
}
