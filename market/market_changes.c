/* market_changes.c - the realm's feed of listing changes: the entry a
 * listing's commit adds (market__fx_change in market_model.c), and the reads
 * of the feed (GET /events follows it).
 *
 * Every POST /list and POST /unlist that commits adds, in the same
 * MULTI/EXEC, one entry to the stream market:{r}:changes (fields action
 * "listed" or "unlisted", seller, item, price, quantity: the units the
 * listing holds after a listing, or held before an unlisting), trimmed with
 * MAXLEN ~ 1000 (MARKET_CHANGES_KEPT_S). A purchase adds none: its trade (trades:{r})
 * is the change. A follower reads the entries after the last it saw, as it
 * reads trades with market_trades_after().
 */
#include "market/market_store.h"

/* Reads up to limit (1..MARKET_TRADES_PAGE_MAX) listing changes of realm
 * made after entry id after (NULL or "": from the oldest kept), oldest
 * first. Returns MARKET_OK with *out a new array of *n changes (caller
 * frees; NULL when none), or ERR_INVALID, ERR_STORE, ERR_NOMEM. */
int market_changes_after(market_conn *c, const char *realm, const char *after, size_t limit,
                         market_change **out, size_t *n) {
    if (!out) return MARKET_ERR_INVALID; /* else the page would be read and lost */
    void *v = NULL;
    int rc = market__stream_after(c, realm, MARKET__STREAM_CHANGES, after, limit, &v, n);
    *out = v;
    return rc;
}

/* Reads the id of the latest listing change of realm into id ("" when
 * none). Returns MARKET_OK, ERR_INVALID or ERR_STORE. */
int market_change_last(market_conn *c, const char *realm, char id[MARKET_TRADE_ID_MAX + 1]) {
    return market__stream_last(c, realm, MARKET__STREAM_CHANGES, id);
}
