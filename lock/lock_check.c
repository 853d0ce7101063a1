/* lock_check.c - what every call of the lock layer checks and says back:
 * whether a key or a handle is well-formed, the texts of the error codes,
 * and the calling thread's reason for its last failed call
 * (lock_last_error()). It depends on nothing else of lock/: lock.c, the
 * backends and the watchdog call it. */
#include "lock/lock.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lock/lock_impl.h"

/* Returns 1 when key is a NUL-terminated string of 1..LOCK_KEY_MAX bytes. */
int lock__key_ok(const char *key) {
    if (key == NULL) return 0;
    size_t n = strnlen(key, LOCK_KEY_MAX + 1);
    return n > 0 && n <= LOCK_KEY_MAX;
}

/* Returns 1 when h names a valid key, carries a token of exactly LOCK_TOKEN_LEN bytes and an
 * owner terminated within its field (empty for a plain lease), else 0 (also for NULL). This
 * function can't fail. */
int lock__handle_ok(const lock_handle *h) {
    if (h == NULL) return 0;
    if (memchr(h->key, '\0', sizeof h->key) == NULL || !lock__key_ok(h->key)) return 0;
    if (memchr(h->owner, '\0', sizeof h->owner) == NULL) return 0;
    if (memchr(h->token, '\0', sizeof h->token) == NULL) return 0;
    return strlen(h->token) == LOCK_TOKEN_LEN;
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
