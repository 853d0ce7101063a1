/* market_deals.c - reading deals by number outside a batch: buy orders, auctions and direct
 * trades (market__deal_type), and the pages of ids their indexes hold, for the reads of the
 * kinds' files (market_auction.c, market_direct.c, market_book.c). It calls the store. */
#include "market/market_store.h"

#include <string.h>

/* Reads the deals ids[0..n) of type t in realm into out[0..n) (t->size each), one whose hash
 * is gone (ended, and no longer kept) with id 0; with now_ms, the store's clock into it too.
 * Returns MARKET_OK, or ERR_STORE (one is unreadable), or the read's error. */
int market__deals_get(market_conn *c, const market__deal_type *t, const char *realm,
                      const int64_t *ids, size_t n, void *out, int64_t *now_ms) {
    market__buf b = {0};
    for (size_t i = 0; i < n; i++)
        t->rd(&b, realm, ids[i]);
    if (now_ms) market__rd_time(&b);
    if (b.n == 0) return MARKET_OK;
    int rc = market__read_buf(c, realm, &b);
    if (rc < 0) return rc;
    if (now_ms && market__reply_time(b.rep[n], now_ms) < 0)
        rc = market__fail(c, "the store's clock");
    for (size_t i = 0; i < n && rc == MARKET_OK; i++) {
        char *v = (char *)out + i * t->size;
        int r = t->reply(b.rep[i], ids[i], v);
        if (r == t->missing) memset(v + t->id_off, 0, sizeof(int64_t));
        if (r == MARKET_ERR_STORE)
            rc = market__fail(c, "%s %lld is unreadable", t->what, (long long)ids[i]);
    }
    market__replies_free(b.rep, b.n);
    market__buf_free(&b);
    return rc;
}

/* Sends b, whose reply at is a page of ids (market__reply_ids()), on realm's master, and reads
 * at most max of them into ids[0..*n). The caller frees b's other replies and b when it
 * succeeds (b is freed when it fails). Returns MARKET_OK, ERR_STORE, or the read's error. */
int market__ids_get(market_conn *c, const char *realm, market__buf *b, size_t at, int64_t *ids,
                    size_t max, size_t *n) {
    *n = 0;
    int rc = market__read_buf(c, realm, b);
    if (rc < 0) return rc;
    if (market__reply_ids(b->rep[at], 0, ids, max, n) < 0) {
        rc = market__fail_reply(c, "reading an index of deals", b->rep[at]);
        market__replies_free(b->rep, b->n);
        market__buf_free(b);
    }
    return rc;
}
