/* market_index.c - the search indexes of a realm's market: their key names, the entry
 * each listing has in each, a page's cursor, and the plan of a search (which zset, which
 * prices, where after the cursor). Pure: no Redis I/O. The writes that keep the indexes
 * (market_api.c, market_purchase.c, market_buy.c, market_world.c, market_reindex.c) name their
 * entries here; market_search.c and market_audit.c read them.
 *
 * DESIGN
 * market:{r} (member "<item>.<seller>", score the price) answers what one listing costs
 * and orders every listing by price, so a search with no item and no seller pages it
 * directly. A search by item or by seller reads a small zset beside it, scored by price
 * like the market:
 *   idx:{r}:item:<item>      member <seller>   (who lists the item, at what price)
 *   idx:{r}:seller:<seller>  member <item>     (what the seller lists, at what price)
 * A zset per item and per seller, not one big zset per dimension: a purchase removes a
 * listing from each, and a member of a small zset (a listpack) goes at the cost of a key
 * lookup, where a member of a zset of every listing costs a walk down a skiplist of that
 * size (measured on Redis 7.0 with 400,000 listings: 3.8 us a member, which made the
 * indexes the largest part of a purchase's Redis time). A unique item's zset holds one
 * member at most and goes with its listing.
 * Each zset orders its members by price, then by member, byte by byte, so every search
 * orders its listings by (price, item, seller), the order of market:{r}; a listing's place
 * in that order is its cursor, written "<price>:<item>.<seller>" with the price as 13
 * zero-padded digits. The next page starts strictly after the cursor's (price, member)
 * in the zset the search reads, found by the cursor listing's rank when it is still there
 * at that price, else by a binary search over the ranks of that price (market_search.c's
 * script): O(log N + page) at any depth, and pages never repeat a listing nor skip one
 * that was there throughout. A cursor must fit its search (its item, seller and price
 * within the filters); anything else is refused.
 * A search by item prefix cannot use those zsets: the items that start with a prefix are
 * spread over every price, and over as many item keys. It reads idx:{r}:names instead,
 * every listing's "<item>.<seller>" scored 0, which Redis keeps in byte order: the members
 * that start with <prefix> are the range [<prefix> .. (<prefix>\xff (an id never holds
 * \xff), so a page is a ZRANGE BYLEX ... LIMIT 0 <limit + 1> and the total a ZLEXCOUNT,
 * each O(log N + page). Its order is (item, seller), not price, and a page starts strictly
 * after the cursor's "<item>.<seller>" (the cursor's price is not used), so a prefix takes
 * no price filter and no reversed order. The names index is one zset of every listing,
 * which a purchase pays O(log N) to update (as it pays for market:{r}): the price of
 * answering prefixes without a SCAN.
 */
#include "market/market_index.h"

#include <stdio.h>
#include <string.h>

/* market_search_check()'s messages name these limits */
_Static_assert(MARKET_SEARCH_LIMIT_MAX == 1000, "the limit's message says 1..1000");
_Static_assert(MARKET_PRICE_MAX == INT64_C(1000000000000), "the prices' messages say 10^12");

static const char *const kind_names[MARKET__IDX_KINDS] = {"item", "seller"};

/* ---- names and entries ---- */

/* Writes the key of index kind for id (an item or a seller) of realm into out:
 * "idx:{<realm>}:item:<id>" or "idx:{<realm>}:seller:<id>". realm and id are valid ids,
 * so it fits. This function can't fail. */
void market__idx_key(char out[MARKET__IDX_KEY_MAX], int kind, const char *realm, const char *id) {
    market__join(out, MARKET__IDX_KEY_MAX, "idx:{", realm, "}:",
                 kind_names[kind == MARKET__IDX_SELLER], ":", id, (const char *)NULL);
}

/* Writes the key of realm's names index, "idx:{<realm>}:names", into out. This function
 * can't fail. */
void market__idx_names_key(char out[MARKET__IDX_KEY_MAX], const char *realm) {
    market__join(out, MARKET__IDX_KEY_MAX, "idx:{", realm, "}:names", (const char *)NULL);
}

/* Fills *e with the listing's (item, seller, price) entry in every index of realm: the
 * keys, its member in each (the seller in the item's, the item in the seller's) and its
 * score, the price; and its member of the names index ("<item>.<seller>"). This function
 * can't fail. */
void market__idx_entry_init(market__idx_entry *e, const char *realm, const char *item,
                            const char *seller, int64_t price) {
    market__idx_key(e->key[MARKET__IDX_ITEM], MARKET__IDX_ITEM, realm, item);
    market__idx_key(e->key[MARKET__IDX_SELLER], MARKET__IDX_SELLER, realm, seller);
    market__join(e->member[MARKET__IDX_ITEM], sizeof e->member[0], seller, (const char *)NULL);
    market__join(e->member[MARKET__IDX_SELLER], sizeof e->member[0], item, (const char *)NULL);
    market__i64_str(e->score, price);
    market__idx_names_key(e->names_key, realm);
    market__join(e->name, sizeof e->name, item, ".", seller, (const char *)NULL);
}

/* Copies the id s[0..len) into out (MARKET_ID_MAX + 1 bytes). Returns 0, or -1 when it
 * is not a valid id. */
static int id_copy(char *out, const char *s, size_t len) {
    if (len == 0 || len > MARKET_ID_MAX) return -1;
    memcpy(out, s, len);
    out[len] = '\0';
    return strlen(out) == len && market_id_valid(out) ? 0 : -1; /* no NUL inside */
}

/* Reads the 13 digits at s as a price. Returns 0, or -1 when they are not digits or the
 * price is outside 1..MARKET_PRICE_MAX. */
static int price_read(const char *s, int64_t *out) {
    int64_t v = 0;
    for (int i = 0; i < MARKET__PRICE_DIGITS; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < 1 || v > MARKET_PRICE_MAX) return -1;
    *out = v;
    return 0;
}

/* Reads the market member m[0..len), "<item>.<seller>", into out's item and seller.
 * Returns 0, or -1 when it is not one. */
static int member_read(const char *m, size_t len, market_listing *out) {
    const char *dot = m ? memchr(m, '.', len) : NULL;
    if (!dot || id_copy(out->item, m, (size_t)(dot - m)) < 0 ||
        id_copy(out->seller, dot + 1, len - (size_t)(dot - m) - 1) < 0)
        return -1;
    return 0;
}

/* ---- cursors ---- */

/* Writes the cursor of a page that ended with listing l into out: "<price>:<item>.<seller>".
 * l holds valid ids and a price in 1..MARKET_PRICE_MAX. This function can't fail. */
void market_cursor_make(const market_listing *l, char out[MARKET_CURSOR_MAX + 1]) {
    snprintf(out, MARKET_CURSOR_MAX + 1, "%0*lld:%s.%s", MARKET__PRICE_DIGITS,
             (long long)l->price, l->item, l->seller);
}

/* Reads cursor s (NUL-terminated) into *out. Returns 0, or -1 when s is not a cursor that
 * market_cursor_make() could have written. */
int market__cursor_parse(const char *s, market_listing *out) {
    size_t len = s ? strnlen(s, MARKET_CURSOR_MAX + 1) : 0;
    const size_t pd = MARKET__PRICE_DIGITS;
    if (len > MARKET_CURSOR_MAX || len < pd + 4 || s[pd] != ':' || price_read(s, &out->price) < 0)
        return -1;
    return member_read(s + pd + 1, len - pd - 1, out);
}

/* ---- searches ---- */

static int has(const char *s) {
    return s && *s;
}

/* Returns 1 when a cursor's listing cur lies outside search q: another item, seller,
 * price range or item prefix. This function can't fail. */
static int cursor_outside(const market_search_query *q, const market_listing *cur) {
    return (q->item && strcmp(cur->item, q->item) != 0) ||
           (q->seller && strcmp(cur->seller, q->seller) != 0) ||
           (q->min_price && cur->price < q->min_price) ||
           (q->max_price && cur->price > q->max_price) ||
           (q->item_prefix && strncmp(cur->item, q->item_prefix, strlen(q->item_prefix)) != 0);
}

/* Checks query q. Returns MARKET_OK, or MARKET_ERR_INVALID with *field naming the first
 * part found wrong ("item", "seller", "item_prefix", "min_price", "max_price", "limit" or
 * "cursor") and
 * *why saying what is wrong with it, as the end of a sentence that starts with its name
 * ("must match [A-Za-z0-9_-]{1,64}"); both static. field and why may be NULL. This
 * function can't fail otherwise. */
int market_search_check(const market_search_query *q, const char **field, const char **why) {
    const char *f = NULL, *w = NULL;
    market_listing cur;
    if (!q) {
        f = "query", w = "is missing";
    } else if (q->item && !market_id_valid(q->item)) {
        f = "item", w = "must match [A-Za-z0-9_-]{1,64}";
    } else if (q->seller && !market_id_valid(q->seller)) {
        f = "seller", w = "must match [A-Za-z0-9_-]{1,64}";
    } else if (q->item_prefix && !market_id_valid(q->item_prefix)) {
        f = "item_prefix", w = "must match [A-Za-z0-9_-]{1,64}";
    } else if (q->item_prefix &&
               (q->item || q->seller || q->min_price || q->max_price || q->desc)) {
        f = "item_prefix", w = "cannot be combined with item, seller, min_price, max_price or "
                               "sort (a prefix search is in item order)";
    } else if (q->min_price < 0 || q->min_price > MARKET_PRICE_MAX) {
        f = "min_price", w = "must be an integer in 1..1000000000000";
    } else if (q->max_price < 0 || q->max_price > MARKET_PRICE_MAX) {
        f = "max_price", w = "must be an integer in 1..1000000000000";
    } else if (q->min_price && q->max_price && q->min_price > q->max_price) {
        f = "min_price", w = "must not exceed max_price";
    } else if (q->limit < 1 || q->limit > MARKET_SEARCH_LIMIT_MAX) {
        f = "limit", w = "must be an integer in 1..1000";
    } else if (has(q->cursor) && market__cursor_parse(q->cursor, &cur) < 0) {
        f = "cursor", w = "is not a cursor this service gave";
    } else if (has(q->cursor) && cursor_outside(q, &cur)) {
        f = "cursor", w = "belongs to another search (its listing is outside this search's "
                          "item, seller or prices)";
    }
    if (field) *field = f;
    if (why) *why = w;
    return f ? MARKET_ERR_INVALID : MARKET_OK;
}

/* Plans search q (see market__search_plan): checks it (market_search_check()), picks the
 * zset it reads (item given: the item's index; seller: the seller's; neither: market:{r};
 * both: no zset, the one listing's ZSCORE; an item prefix: the names index), and writes
 * its prices, and the cursor's price and member in that zset when there is one (with a
 * prefix: the ranges of the names index). Returns MARKET_OK, or MARKET_ERR_INVALID when q
 * fails its check. */
int market__search_plan_make(const market_search_query *q, market__search_plan *p) {
    if (market_search_check(q, NULL, NULL) < 0) return MARKET_ERR_INVALID;
    memset(p, 0, sizeof *p);
    p->desc = q->desc != 0;
    p->lo = q->min_price ? q->min_price : 1;
    p->hi = q->max_price ? q->max_price : MARKET_PRICE_MAX;
    snprintf(p->lo_s, sizeof p->lo_s, "%lld", (long long)p->lo);
    snprintf(p->hi_s, sizeof p->hi_s, "%lld", (long long)p->hi);
    p->has_cursor = has(q->cursor) && market__cursor_parse(q->cursor, &p->after) == 0;
    snprintf(p->count, sizeof p->count, "%zu", q->limit + 1);
    if (q->item && q->seller) {
        p->point = 1;
        return MARKET_OK;
    }
    if (q->item_prefix) {
        p->source = MARKET__SEARCH_NAMES;
        market__join(p->lex_all, sizeof p->lex_all, "[", q->item_prefix, (const char *)NULL);
        market__join(p->lex_hi, sizeof p->lex_hi, "(", q->item_prefix, "\xff", (const char *)NULL);
        if (p->has_cursor)
            market__join(p->lex_lo, sizeof p->lex_lo, "(", p->after.item, ".", p->after.seller,
                         (const char *)NULL);
        else
            snprintf(p->lex_lo, sizeof p->lex_lo, "%s", p->lex_all);
        return MARKET_OK;
    }
    p->source = q->item ? MARKET__SEARCH_ITEM : q->seller ? MARKET__SEARCH_SELLER
                                                          : MARKET__SEARCH_MARKET;
    if (!p->has_cursor) return MARKET_OK;
    snprintf(p->after_price, sizeof p->after_price, "%lld", (long long)p->after.price);
    if (p->source == MARKET__SEARCH_ITEM)
        snprintf(p->after_member, sizeof p->after_member, "%s", p->after.seller);
    else if (p->source == MARKET__SEARCH_SELLER)
        snprintf(p->after_member, sizeof p->after_member, "%s", p->after.item);
    else
        snprintf(p->after_member, sizeof p->after_member, "%s.%s", p->after.item,
                 p->after.seller);
    return MARKET_OK;
}

/* Reads m[0..len), a member of the zset plan p reads for query q, into *out's item and
 * seller (the price is the caller's). Returns 0, or -1 when it is not one. This function
 * can't fail otherwise. */
int market__search_member(const market__search_plan *p, const market_search_query *q,
                          const char *m, size_t len, market_listing *out) {
    if (!m) return -1;
    switch (p->source) {
    case MARKET__SEARCH_ITEM:
        snprintf(out->item, sizeof out->item, "%s", q->item);
        return id_copy(out->seller, m, len);
    case MARKET__SEARCH_SELLER:
        snprintf(out->seller, sizeof out->seller, "%s", q->seller);
        return id_copy(out->item, m, len);
    default: return member_read(m, len, out);
    }
}

/* A point search (p->point): given the listing's price (0: not listed), adds it to *total
 * when it matches, and returns 1 when it belongs on the page (it matches, and comes after
 * the cursor in the search's order), else 0. This function can't fail. */
int market__search_point(const market__search_plan *p, int64_t price, size_t *total) {
    if (price < p->lo || price > p->hi) return 0;
    (*total)++;
    if (!p->has_cursor) return 1;
    return p->desc ? price < p->after.price : price > p->after.price;
}
