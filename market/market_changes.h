/* market_changes.h - the realm's feed of listing changes (market_changes.c):
 * the entry a listing's commit queues, and the reads of the feed. It calls
 * the store layer, nothing above. */
#ifndef GM_MARKET_MARKET_CHANGES_H
#define GM_MARKET_MARKET_CHANGES_H

#include <stdint.h>

#include "market/market_keys.h"
#include "market/market_store.h"

#define MARKET_CHANGES_KEPT_S "1000" /* MAXLEN ~ of market:{r}:changes */

void market__change_cmd(market__cmd *cmd, const market__realm *rl, int listed, const char *seller,
                        const char *item, int64_t price, int64_t quantity, char *price_buf,
                        char *qty_buf);

#endif /* GM_MARKET_MARKET_CHANGES_H */
