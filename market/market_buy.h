/* market_buy.h - the buy kind (market_buy.c): purchases without a seller,
 * units across sellers, queued on the market's purchase combiner
 * (m->queue) and served in batches of one realm by market_combine.c. It
 * calls the combiner, the idempotency, transaction and store layers,
 * nothing above. */
#ifndef GM_MARKET_MARKET_BUY_H
#define GM_MARKET_MARKET_BUY_H

#include "market/market_txn.h"

int market__buy_submit(market *m, market_order *o);

#endif /* GM_MARKET_MARKET_BUY_H */
