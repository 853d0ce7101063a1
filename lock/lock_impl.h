/* lock_impl.h - private to lock/ and its tests: the backend ops table and shared helpers.
 *
 * A backend fills one static const struct lock_ops and wraps its state in a
 * lock_client with lock__client_new(). lock.c validates every argument once
 * before dispatching, so an op may assume: c, key, out and h are non-NULL, the
 * key is 1..LOCK_KEY_MAX bytes, a handle's token is LOCK_TOKEN_LEN bytes and
 * ttl_ms > 0. A NULL optional slot (extend) makes lock.c answer
 * LOCK_ERR_UNSUPPORTED; name, acquire, release and destroy are mandatory.
 */
#ifndef GM_LOCK_LOCK_IMPL_H
#define GM_LOCK_LOCK_IMPL_H

#include <stdint.h>

#include "lock/lock.h"

/* ---- constants ---- */

#define LOCK_BACKOFF_BASE_MS 1u /* first retry delay before jitter */
#define LOCK_BACKOFF_CAP_MS 50u /* no retry delay is longer than this */

/* ---- types ---- */

struct lock_ops {
    const char *name; /* short backend name, e.g. "redis" (mandatory) */
    /* Try to take key until wait_ms have passed (0: one try); fill *out on success. */
    int (*acquire)(void *impl, const char *key, uint32_t ttl_ms, uint32_t wait_ms,
                   lock_handle *out);
    /* Free h's lease if h's token still holds it. */
    int (*release)(void *impl, const lock_handle *h);
    /* Reset h's lease to ttl_ms from now if h's token still holds it (optional). */
    int (*extend)(void *impl, lock_handle *h, uint32_t ttl_ms);
    /* Free impl and everything it owns (mandatory). */
    void (*destroy)(void *impl);
};

struct lock_client {
    const struct lock_ops *ops; /* borrowed; static storage */
    void *impl;                 /* owned; freed by ops->destroy */
};

/* ---- module-internal helpers ---- */

lock_client *lock__client_new(const struct lock_ops *ops, void *impl, int *err);
int lock__token_new(char out[LOCK_TOKEN_LEN + 1]);
uint32_t lock__backoff_ms(unsigned attempt, uint64_t *rng_state);
void lock__sleep_ms(uint32_t ms);

#endif /* GM_LOCK_LOCK_IMPL_H */
