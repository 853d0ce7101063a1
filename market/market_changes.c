/* market_changes.c - the realm's feed: the entry a listing's commit adds to
 * the feed of listing changes (market__fx_change in market_model.c), and
 * the reads that follow a realm's trades and listing changes together
 * (GET /events).
 *
 * Every POST /list and POST /unlist that commits adds, in the same
 * MULTI/EXEC, one entry to the stream market:{r}:changes (fields action
 * "listed" or "unlisted", seller, item, price, quantity: the units the
 * listing holds after a listing, or held before an unlisting), trimmed with
 * MAXLEN ~ 1000 (MARKET_CHANGES_KEPT_S). A purchase adds none: its trade (trades:{r})
 * is the change. A follower reads both streams after the last entries it
 * saw, in one MULTI/EXEC: a commit lands before both reads or after both,
 * so a follower never sees a change without the trades committed before it.
 */
#include "market/market_store.h"

#include <stdlib.h>
#include <string.h>

static const enum market__stream feed_streams[2] = {MARKET__STREAM_TRADES, MARKET__STREAM_CHANGES};

/* Reads, as one snapshot, up to limit (1..MARKET_TRADES_PAGE_MAX) trades of realm
 * committed after trade id after_trade and up to limit listing changes made after
 * entry id after_change (NULL or "": from the oldest kept), oldest first. Returns
 * MARKET_OK with *out filled (market_feed_cleanup() frees it), or ERR_INVALID,
 * ERR_STORE, ERR_NOMEM with *out empty. */
int market_feed_after(market_conn *c, const char *realm, const char *after_trade,
                      const char *after_change, size_t limit, market_feed *out) {
    if (!out) return MARKET_ERR_INVALID; /* else the page would be read and lost */
    *out = (market_feed){0};
    const char *after[2] = {after_trade, after_change};
    void *v[2] = {NULL, NULL};
    size_t n[2] = {0, 0};
    int rc = market__streams_after(c, realm, 2, feed_streams, after, limit, v, n);
    out->trades = v[0];
    out->ntrades = n[0];
    out->changes = v[1];
    out->nchanges = n[1];
    return rc;
}

/* Reads, as one snapshot, the ids of realm's latest trade and latest listing
 * change ("" for none). Returns MARKET_OK, ERR_INVALID or ERR_STORE. */
int market_feed_last(market_conn *c, const char *realm, char trade[MARKET_TRADE_ID_MAX + 1],
                     char change[MARKET_TRADE_ID_MAX + 1]) {
    if (!trade || !change) return MARKET_ERR_INVALID;
    char id[2][MARKET_TRADE_ID_MAX + 1];
    int rc = market__streams_last(c, realm, 2, feed_streams, id);
    memcpy(trade, id[0], sizeof id[0]);
    memcpy(change, id[1], sizeof id[1]);
    return rc;
}

/* Frees what market_feed_after() read into f and empties it. Can't fail. */
void market_feed_cleanup(market_feed *f) {
    if (!f) return;
    free(f->trades);
    free(f->changes);
    *f = (market_feed){0};
}
