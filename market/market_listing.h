/* market_listing.h - the listing kind (market_listing.c): list and unlist
 * orders, queued on the market's purchase combiner (m->queue) and served in
 * batches of one realm by market_combine.c. It calls the combiner, the
 * idempotency, transaction and store layers, nothing above. */
#ifndef GM_MARKET_MARKET_LISTING_H
#define GM_MARKET_MARKET_LISTING_H

#include "market/market_txn.h"

int market__listing_submit(market *m, market_order *o);

#endif /* GM_MARKET_MARKET_LISTING_H */
