/* market_sale.h - the flash-sale layer (market_sale.c): sales created and
 * read, and the buys of a sale served in batches by the sale workers, one
 * guarded decrement per batch. Its state is its own (struct
 * market__sale_queue); it calls the transaction, trade and store layers,
 * nothing above. market_api.c creates and stops its queue with the market. */
#ifndef GM_MARKET_MARKET_SALE_H
#define GM_MARKET_MARKET_SALE_H

#include "market/market_txn.h"

int market__sale_queue_new(market *m);
void market__sale_queue_stop(market *m);
void market__sale_queue_free(market *m);
int market__sale_submit(market *m, market_order *o);

#endif /* GM_MARKET_MARKET_SALE_H */
