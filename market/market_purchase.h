/* market_purchase.h - the purchase kind (market_purchase.c): purchases of
 * listings queued on the market's purchase combiner (m->queue), served in
 * batches of one realm by market_combine.c. It calls the combiner, the
 * transaction, trade and store layers, nothing above. */
#ifndef GM_MARKET_MARKET_PURCHASE_H
#define GM_MARKET_MARKET_PURCHASE_H

#include "market/market_txn.h"

int market__queue_new(market *m);
void market__queue_free(market *m);
void market__queue_stop(market *m);
int market__purchase_submit(market *m, market_order *o);

#endif /* GM_MARKET_MARKET_PURCHASE_H */
