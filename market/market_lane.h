/* market_lane.h - a combiner lane's parts (market_lane.c): its resting
 * realms, its lock wait, and its timed wait. The combiner (market_combine.c)
 * sets a batch aside, rather than wait in place, when its realm's store is in
 * passing trouble. It calls the transaction layer, nothing above. */
#ifndef GM_MARKET_MARKET_LANE_H
#define GM_MARKET_MARKET_LANE_H

#include <pthread.h>
#include <stdint.h>

#include "market/market_txn.h"

#define MARKET__REST_MAX 8       /* realms (or sales) one lane keeps resting at once */
#define MARKET__REST_CAP_MS 50   /* the longest rest before a resting realm is tried again */
#define MARKET__LANE_SLICE_MS 20 /* the longest a lane waits in place for store trouble */

/* A realm (or a sale of a realm) whose last batch met store trouble that passes: its
 * purchases wait in the lane's queue until until_ms, and the lane serves others. */
struct market__rest_entry {
    char realm[MARKET_REALM_MAX + 1];
    char sale[MARKET_ID_MAX + 1]; /* "" for purchases */
    int64_t until_ms;             /* monotonic (rconn_now_ms) */
    unsigned tries;               /* rests in a row: the next one is longer */
    int has_token;
    char token[MARKET__TOKEN_LEN + 1]; /* the claims its batch made: its next batch's too */
};

/* A lane's resting realms. Zeroed: none. Only the lane's worker uses it. */
typedef struct market__rest {
    size_t n;
    struct market__rest_entry e[MARKET__REST_MAX];
} market__rest;

/* resting realms */
int market__rest_due(const market__rest *r, const char *realm, const char *sale, int64_t now);
int market__rest_begin(market__rest *r, const char *realm, const char *sale, const char *token,
                       int64_t now);
void market__rest_end(market__rest *r, const char *realm, const char *sale);
int market__rest_token(const market__rest *r, const char *realm, const char *sale,
                       char token[MARKET__TOKEN_LEN + 1]);
int64_t market__rest_next(const market__rest *r, int64_t now);

/* a lane's waits */
int market__lane_lock(market_conn *c, const char *const *keys, size_t n, int64_t by,
                      lock_handle *h);
void market__lane_wait(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t until_ms);

#endif /* GM_MARKET_MARKET_LANE_H */
