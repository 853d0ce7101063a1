/* market_purchase.h - the purchase kind (market_purchase.c): purchases of
 * listings queued on the market's purchase combiner (m->queue), served in
 * batches of one realm by market_combine.c. It calls the combiner, the
 * transaction, trade and store layers, nothing above. */
#ifndef GM_MARKET_MARKET_PURCHASE_H
#define GM_MARKET_MARKET_PURCHASE_H

#include "market/market_txn.h"

int market__queue_new(market *m);
void market__queue_free(market *m);
int market__queue_submit(market *m, market_pending *p);
void market__queue_stop(market *m);
int market__queue_wait(market *m, const char *realm, const char *buyer, const char *seller,
                       const char *item, int64_t quantity, int64_t expect_price,
                       const market_idem *idem, market_purchase_result *res, char *why,
                       size_t whylen);

#endif /* GM_MARKET_MARKET_PURCHASE_H */
