/* market_idem.h - a batch's idempotency keys (market_idem.c): each order's
 * record key and claim, the stored outcomes read under WATCH, the outcomes
 * decided in the batch so far (a key repeated inside the batch is settled as
 * its first), and the records its commit writes. Every order kind of the
 * combiner keeps one; what an outcome's two numbers mean is the kind's. It
 * builds reads and writes through the data model (market_model.h) and does
 * no I/O. */
#ifndef GM_MARKET_MARKET_IDEM_H
#define GM_MARKET_MARKET_IDEM_H

#include <stddef.h>
#include <stdint.h>

#include "market/market_model.h"

/* An order's outcome as an idempotency record keeps it: its code and two
 * or three numbers (see market__idem_record), and, for a success, its trade id. */
typedef struct market__outcome {
    int rc;
    int64_t a, b, c;   /* c: a success's third number (a sale's cut), 0 when none */
    const char *trade; /* "" when none or not known yet */
    int replayed;      /* it repeats an earlier request's */
} market__outcome;

typedef struct market__idem_set {
    size_t n, n_keyed;
    const market_idem *idem[MARKET__BATCH_MAX]; /* NULL: no key */
    char key[MARKET__BATCH_MAX][MARKET__IDEM_REDIS_MAX]; /* "" without one */
    char claim[MARKET__BATCH_MAX][MARKET__IDEM_RECORD_MAX];
    char claim_ttl[MARKET__BATCH_MAX][24];
    char record[MARKET__BATCH_MAX][MARKET__IDEM_RECORD_MAX];
    int state[MARKET__BATCH_MAX]; /* market__idem_judge() of the stored record */
    market__outcome stored[MARKET__BATCH_MAX];
    char stored_trade[MARKET__BATCH_MAX][MARKET_TRADE_ID_MAX + 1];
    market__outcome done[MARKET__BATCH_MAX]; /* as decided in this batch */
    size_t same_as[MARKET__BATCH_MAX]; /* a repeat of an earlier order of the batch that did
                                          it: that order (its trade id comes with the commit) */
} market__idem_set;

void market__idem_set_begin(market__idem_set *s, size_t n);
const char *market__idem_set_key(market__idem_set *s, size_t i, const char *realm,
                                 const char *player, const market_idem *idem, const char *token);
void market__idem_set_claims(market__idem_set *s, market_queued *const *req, market__buf *r);
void market__idem_set_watch(const market__idem_set *s, market__buf *r);
void market__idem_set_read(const market__idem_set *s, market__buf *r);
int market__idem_set_judge(market__idem_set *s, const redisReply *mget, const char *token);
int market__idem_set_settle(market__idem_set *s, size_t i, market__outcome *out);
void market__idem_set_decided(market__idem_set *s, size_t i, int rc, int64_t a, int64_t b,
                              int64_t c);
int market__idem_set_recorded(const market__idem_set *s, size_t i);
void market__idem_set_record(market__idem_set *s, size_t i, market__buf *w);

#endif /* GM_MARKET_MARKET_IDEM_H */
