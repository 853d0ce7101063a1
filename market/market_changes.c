/* market_changes.c - the realm's feed: the entry a listing's commit adds to
 * the feed of listing changes (market__fx_change in market_model.c), and
 * the reads that follow a realm's trades, listing changes and auctions'
 * changes together (GET /events).
 *
 * Every POST /list and POST /unlist that commits adds, in the same
 * MULTI/EXEC, one entry to the stream market:{r}:changes (fields action
 * "listed" or "unlisted", seller, item, price, quantity: the units the
 * listing holds after a listing, or held before an unlisting), trimmed with
 * MAXLEN ~ 1000 (MARKET_CHANGES_KEPT_S). A purchase adds none: its trade (trades:{r})
 * is the change. An auction's commit adds one entry to market:{r}:bids for
 * each auction it opens, each bid it takes and each end it settles (action
 * "opened", "bid", "sold" or "unsold", and the auction after it:
 * market__fx_auction_event). A follower reads the three streams after the
 * last entries it saw, in one MULTI/EXEC: a commit lands before every read
 * or after every one, so a follower never sees a change without the ones
 * committed before it.
 */
#include "market/market_store.h"

#include <stdlib.h>
#include <string.h>

static const enum market__stream feed_streams[MARKET_FEEDS] = {
    MARKET__STREAM_TRADES, MARKET__STREAM_CHANGES, MARKET__STREAM_BIDS};

/* Reads, as one snapshot, up to limit (1..MARKET_TRADES_PAGE_MAX) entries of each of realm's
 * feeds made after the entry ids after[0..MARKET_FEEDS) (trades, listing changes, auctions'
 * changes; after NULL, or an id NULL or "": from the oldest kept), oldest first. Returns
 * MARKET_OK with *out filled (market_feed_cleanup() frees it), or ERR_INVALID, ERR_STORE,
 * ERR_NOMEM with *out empty. */
int market_feed_after(market_conn *c, const char *realm, const char *const *after, size_t limit,
                      market_feed *out) {
    if (!out) return MARKET_ERR_INVALID; /* else the page would be read and lost */
    *out = (market_feed){0};
    void *v[MARKET_FEEDS] = {NULL, NULL, NULL};
    size_t n[MARKET_FEEDS] = {0, 0, 0};
    int rc = market__streams_after(c, realm, MARKET_FEEDS, feed_streams, after, limit, v, n);
    out->trades = v[0];
    out->ntrades = n[0];
    out->changes = v[1];
    out->nchanges = n[1];
    out->auctions = v[2];
    out->nauctions = n[2];
    return rc;
}

/* Reads, as one snapshot, the ids of the latest entries of realm's feeds into
 * last[0..MARKET_FEEDS) ("" for none). Returns MARKET_OK, ERR_INVALID or ERR_STORE. */
int market_feed_last(market_conn *c, const char *realm, char (*last)[MARKET_TRADE_ID_MAX + 1]) {
    if (!last) return MARKET_ERR_INVALID;
    return market__streams_last(c, realm, MARKET_FEEDS, feed_streams, last);
}

/* Frees what market_feed_after() read into f and empties it. Can't fail. */
void market_feed_cleanup(market_feed *f) {
    if (!f) return;
    free(f->trades);
    free(f->changes);
    free(f->auctions);
    *f = (market_feed){0};
}
