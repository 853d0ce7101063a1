/* market_book.c - reading the books: an item's bids and asks by price level
 * (market_book_get()), and a player's open buy orders
 * (market_player_orders()). The buy kind (market_buy.c) rests orders in
 * the books and the cancel kind (market_cancel.c) takes them back.
 *
 * A read is two round trips without a lock: the first reads the ids (the
 * book's best entries and the item's cheapest listings, or the player's
 * orders), the second their orders and units. An order filled or taken
 * back between the two is left out; a view, not a snapshot.
 */
#include "market/market.h"

#include <stdlib.h>
#include <string.h>

#include "market/market_index.h"
#include "market/market_store.h"

/* Adds units at price to side (sorted best first by the read), as one more
 * order at the last level or a new level, up to depth levels; sets *cut
 * when a level did not fit. */
static void level_add(market_level *side, size_t *n, size_t depth, int64_t price, int64_t units,
                      int *cut) {
    if (*n && side[*n - 1].price == price) {
        side[*n - 1].units += units;
        side[*n - 1].orders++;
    } else if (*n < depth) {
        side[(*n)++] = (market_level){price, units, 1};
    } else {
        *cut = 1;
    }
}

/* Reads the ids of item's book and listings (b: its first round trip's
 * replies, a book then an index) and appends the reads of their orders and
 * units to r. Returns MARKET_OK, or ERR_STORE. */
static int book_ids(market_conn *c, const market__realm *rl, const char *item, redisReply **rep,
                    int64_t *ids, size_t *n_ids, market_listing *asks, size_t *n_asks,
                    market__buf *r) {
    const redisReply *bk = rep[0], *ix = rep[1];
    *n_ids = *n_asks = 0;
    if (!market__reply_array(ix, SIZE_MAX, 1) ||
        market__reply_ids(bk, 1, ids, MARKET_BOOK_SCAN, n_ids) < 0)
        return market__fail(c, "the book of %s is unreadable", item);
    for (size_t k = 0; k < *n_ids; k++)
        market__rd_order(r, rl->id, ids[k]);
    for (size_t k = 0; k < market__reply_len(ix) / 2 && k < MARKET_BOOK_SCAN; k++) {
        market_listing *l = &asks[(*n_asks)++];
        memset(l, 0, sizeof *l);
        if (market__reply_seller_at(ix, k, l->seller, &l->price) < 0)
            return market__fail(c, "the item index of %s holds a bad entry", item);
    }
    if (*n_asks) {
        market__rd_listing_units_begin(r, rl);
        for (size_t k = 0; k < *n_asks; k++)
            market__buf_arg(r, market__buf_join(r, item, ".", asks[k].seller, (const char *)NULL));
        market__buf_end(r, 0);
    }
    return MARKET_OK;
}

/* Reads item's book in realm: up to depth (1..MARKET_BOOK_DEPTH_MAX) price
 * levels a side, each read from at most MARKET_BOOK_SCAN orders or
 * listings (a side cut there says so). Returns MARKET_OK, ERR_INVALID,
 * ERR_STORE, ERR_NOMEM or ERR_REALM_UNAVAILABLE. */
int market_book_get(market_conn *c, const char *realm, const char *item, size_t depth,
                    market_book *out) {
    if (!c || !out || !market_id_valid(realm) || !market_id_valid(item) || depth < 1 ||
        depth > MARKET_BOOK_DEPTH_MAX)
        return MARKET_ERR_INVALID;
    memset(out, 0, sizeof *out);
    market__realm rl;
    market__realm_init(&rl, realm);
    char k_book[MARKET__KEY_MAX], k_index[MARKET__IDX_KEY_MAX];
    market__key_book(k_book, realm, item);
    market__idx_key(k_index, MARKET__IDX_ITEM, realm, item);
    int64_t *ids = malloc(MARKET_BOOK_SCAN * sizeof *ids);
    market_listing *asks = malloc(MARKET_BOOK_SCAN * sizeof *asks);
    market__buf a = {0}, b = {0};
    size_t n_ids = 0, n_asks = 0;
    int rc = MARKET_ERR_NOMEM;
    if (!ids || !asks) goto out;
    market__rd_best(&a, k_book, MARKET_BOOK_SCAN);
    market__rd_best(&a, k_index, MARKET_BOOK_SCAN);
    if ((rc = market__read_buf(c, realm, &a)) < 0) goto out;
    rc = book_ids(c, &rl, item, a.rep, ids, &n_ids, asks, &n_asks, &b);
    market__replies_free(a.rep, a.n);
    if (rc < 0 || (rc = b.n ? market__pipeline_buf(c, &b) : MARKET_OK) < 0) goto out;
    for (size_t k = 0; k < n_ids; k++) {
        market_bid bid;
        int got = market__reply_order(b.rep[k], ids[k], &bid);
        if (got == MARKET_ERR_NO_ORDER) continue; /* filled or taken back meanwhile */
        if (got < 0) {
            rc = market__fail(c, "buy order %lld is unreadable", (long long)ids[k]);
            break;
        }
        level_add(out->bids, &out->n_bids, depth, bid.price, bid.left, &out->bids_cut);
    }
    const redisReply *u = n_asks ? b.rep[n_ids] : NULL;
    if (rc == MARKET_OK && u && !market__reply_array(u, n_asks, 0))
        rc = market__fail_reply(c, "reading the listings", u);
    for (size_t k = 0; rc == MARKET_OK && k < n_asks; k++) {
        int stack;
        int64_t units;
        market__reply_listing_at(NULL, u, k, NULL, &stack, &units);
        if (units < 1) {
            rc = market__fail(c, "listing %s.%s is unreadable", item, asks[k].seller);
            break;
        }
        level_add(out->asks, &out->n_asks, depth, asks[k].price, units, &out->asks_cut);
    }
    out->bids_cut |= n_ids == MARKET_BOOK_SCAN;
    out->asks_cut |= n_asks == MARKET_BOOK_SCAN;
    if (b.n) market__replies_free(b.rep, b.n);
out:
    market__buf_free(&a);
    market__buf_free(&b);
    free(ids);
    free(asks);
    return rc;
}

/* Reads player's open buy orders in realm, oldest first (at most
 * MARKET_BOOK_SCAN). Returns MARKET_OK with *out a new array of *n (caller
 * frees; NULL when none), or ERR_INVALID, ERR_STORE, ERR_NOMEM,
 * ERR_REALM_UNAVAILABLE. */
int market_player_orders(market_conn *c, const char *realm, const char *player, market_bid **out,
                         size_t *n) {
    if (!out || !n) return MARKET_ERR_INVALID;
    *out = NULL;
    *n = 0;
    if (!c || !market_id_valid(realm) || !market_id_valid(player)) return MARKET_ERR_INVALID;
    char key[MARKET__KEY_MAX];
    market__key_bids(key, realm, player);
    market__buf b = {0};
    market__rd_bids_of(&b, key, MARKET_BOOK_SCAN);
    int64_t ids[MARKET_BOOK_SCAN];
    size_t k = 0;
    int rc = market__ids_get(c, realm, &b, 0, ids, MARKET_BOOK_SCAN, &k);
    if (rc < 0) return rc;
    market__replies_free(b.rep, b.n);
    market__buf_free(&b);
    market_bid *v = k ? calloc(k, sizeof *v) : NULL;
    if (k && !v) return MARKET_ERR_NOMEM;
    rc = market__deals_get(c, &market__deal_order, realm, ids, k, v, NULL);
    for (size_t i = 0; rc == MARKET_OK && i < k; i++)
        if (v[i].id) v[(*n)++] = v[i]; /* not filled or taken back meanwhile */
    if (rc == MARKET_OK && *n) {
        *out = v;
    } else {
        free(v);
        *n = 0;
    }
    return rc;
}
