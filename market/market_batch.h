/* market_batch.h - the batch layer (market_batch.c): the lock strategies'
 * lanes of purchases, their worker threads, which serve them in batches of
 * one realm under one lock hold, and the releaser. Its state is its own (struct
 * market__queue); it calls the transaction and store layers, nothing above. */
#ifndef GM_MARKET_MARKET_BATCH_H
#define GM_MARKET_MARKET_BATCH_H

#include "market/market_txn.h"

int market__queue_new(market *m);
void market__queue_free(market *m);
int market__queue_submit(market *m, market_pending *p);
void market__queue_stop(market *m);
int market__queue_wait(market *m, const char *realm, const char *buyer, const char *seller,
                       const char *item, int64_t quantity, int64_t expect_price,
                       const market_idem *idem, market_purchase_result *res, char *why,
                       size_t whylen);

#endif /* GM_MARKET_MARKET_BATCH_H */
