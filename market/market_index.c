/* market_index.c - the search indexes of a realm's market: their key names, the member
 * each listing has in each, a page's cursor, and the plan of a search (which index,
 * which ZRANGE BYLEX bounds). Pure: no Redis I/O. The writes that keep the indexes
 * (market.c, market_batch.c, market_world.c) name their members here; market_search.c
 * reads them.
 *
 * DESIGN
 * market:{r} (member "<item>.<seller>", score the price) answers what one listing costs,
 * and pages by rank, but filters nothing. Three lexicographic indexes sit beside it, every
 * score 0, so that Redis orders their members byte by byte and ZRANGE BYLEX and
 * ZLEXCOUNT find a range in O(log N):
 *   idx:{r}:all     "<price>:<item>.<seller>"
 *   idx:{r}:item    "<item>:<price>:<seller>"
 *   idx:{r}:seller  "<seller>:<price>:<item>"
 * <price> is 13 zero-padded digits (MARKET_PRICE_MAX is 10^12), so byte order is price
 * order. Ids hold neither ':' nor '.', and ':' sorts right after the digits and before
 * every letter, so the members that begin "<item>:" are exactly that item's, and among
 * them those from "<item>:<lo>" to "<item>:<hi>;" (';' follows ':') are priced lo..hi.
 * One zset per dimension, not one per item or seller: an item id names one object, which
 * is in one place, so a zset per item would hold at most one member: a key per listing
 * for seeding with --reset and the audit to find.
 * A page's cursor is the listing it ended with, written "<price>:<item>.<seller>" (its
 * idx:{r}:all member). The next page starts strictly after that listing's member in the
 * index the search reads (a "(" bound), whatever was listed or bought meanwhile: it costs
 * O(log N + page) at any depth, and pages never repeat a listing nor skip one that was
 * there throughout. A cursor must fit its search (its item, seller and price within the
 * filters); anything else is refused.
 */
#include "market/market_index.h"

#include <stdio.h>
#include <string.h>

static const char *const kind_names[MARKET__IDX_KINDS] = {"all", "item", "seller"};

/* market_search_check()'s messages name these limits */
_Static_assert(MARKET_SEARCH_LIMIT_MAX == 1000, "the limit's message says 1..1000");
_Static_assert(MARKET_PRICE_MAX == INT64_C(1000000000000), "the prices' messages say 10^12");

/* ---- names and members ---- */

/* Writes realm's index keys, "idx:{<realm>}:all", ":item" and ":seller", into *x. This
 * function can't fail. */
void market__idx_init(market__idx *x, const char *realm) {
    for (int k = 0; k < MARKET__IDX_KINDS; k++)
        snprintf(x->key[k], sizeof x->key[k], "idx:{%s}:%s", realm, kind_names[k]);
}

/* Writes the member of the listing (item, seller, price) in index kind into out. item
 * and seller are valid ids and price is in 1..MARKET_PRICE_MAX, so it fits. This function
 * can't fail. */
void market__idx_member(char out[MARKET__IDX_MEMBER_MAX], int kind, const char *item,
                        const char *seller, int64_t price) {
    long long p = (long long)price;
    switch (kind) {
    case MARKET__IDX_ITEM:
        snprintf(out, MARKET__IDX_MEMBER_MAX, "%s:%013lld:%s", item, p, seller);
        break;
    case MARKET__IDX_SELLER:
        snprintf(out, MARKET__IDX_MEMBER_MAX, "%s:%013lld:%s", seller, p, item);
        break;
    default: snprintf(out, MARKET__IDX_MEMBER_MAX, "%013lld:%s.%s", p, item, seller); break;
    }
}

/* Fills *e with realm's index keys and the listing's member in each. This function can't
 * fail. */
void market__idx_entry_init(market__idx_entry *e, const char *realm, const char *item,
                            const char *seller, int64_t price) {
    market__idx_init(&e->idx, realm);
    for (int k = 0; k < MARKET__IDX_KINDS; k++)
        market__idx_member(e->member[k], k, item, seller, price);
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

/* Reads s[0..len), a member of index kind, into *out. Returns 0, or -1 when it is not one
 * (wrong shape, a price that is not 13 digits in 1..MARKET_PRICE_MAX, a bad id). This
 * function can't fail otherwise. */
int market__idx_decode(int kind, const char *s, size_t len, market_listing *out) {
    const size_t pd = MARKET__PRICE_DIGITS;
    if (!s || len < pd + 4 || len >= MARKET__IDX_MEMBER_MAX) return -1;
    if (kind == MARKET__IDX_ALL) {
        if (s[pd] != ':' || price_read(s, &out->price) < 0) return -1;
        const char *rest = s + pd + 1, *end = s + len;
        const char *dot = memchr(rest, '.', (size_t)(end - rest));
        if (!dot || id_copy(out->item, rest, (size_t)(dot - rest)) < 0 ||
            id_copy(out->seller, dot + 1, (size_t)(end - dot - 1)) < 0)
            return -1;
        return 0;
    }
    if (kind != MARKET__IDX_ITEM && kind != MARKET__IDX_SELLER) return -1;
    const char *colon = memchr(s, ':', len);
    if (!colon) return -1;
    size_t first = (size_t)(colon - s);
    if (first + 1 + pd + 2 > len || colon[1 + pd] != ':' || price_read(colon + 1, &out->price) < 0)
        return -1;
    char *a = kind == MARKET__IDX_ITEM ? out->item : out->seller;
    char *b = kind == MARKET__IDX_ITEM ? out->seller : out->item;
    const char *second = colon + 1 + pd + 1;
    if (id_copy(a, s, first) < 0 || id_copy(b, second, (size_t)(s + len - second)) < 0) return -1;
    return 0;
}

/* ---- cursors ---- */

/* Writes the cursor of a page that ended with listing l into out: "<price>:<item>.<seller>".
 * l holds valid ids and a price in 1..MARKET_PRICE_MAX. This function can't fail. */
void market_cursor_make(const market_listing *l, char out[MARKET_CURSOR_MAX + 1]) {
    market__idx_member(out, MARKET__IDX_ALL, l->item, l->seller, l->price);
}

/* Reads cursor s (NUL-terminated) into *out. Returns 0, or -1 when s is not a cursor that
 * market_cursor_make() could have written. */
int market__cursor_parse(const char *s, market_listing *out) {
    size_t len = s ? strnlen(s, MARKET_CURSOR_MAX + 1) : 0;
    if (len > MARKET_CURSOR_MAX) return -1;
    return market__idx_decode(MARKET__IDX_ALL, s, len, out);
}

/* ---- searches ---- */

static int has(const char *s) {
    return s && *s;
}

/* Checks query q. Returns MARKET_OK, or MARKET_ERR_INVALID with *field naming the first
 * part found wrong ("item", "seller", "min_price", "max_price", "limit" or "cursor") and
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
    } else if (has(q->cursor) && ((q->item && strcmp(cur.item, q->item) != 0) ||
                                  (q->seller && strcmp(cur.seller, q->seller) != 0) ||
                                  (q->min_price && cur.price < q->min_price) ||
                                  (q->max_price && cur.price > q->max_price))) {
        f = "cursor", w = "belongs to another search (its listing is outside this search's "
                          "item, seller or prices)";
    }
    if (field) *field = f;
    if (why) *why = w;
    return f ? MARKET_ERR_INVALID : MARKET_OK;
}

/* Writes "<open><prefix><price as 13 digits><close>" into out (MARKET__IDX_BOUND_MAX). */
static void bound(char *out, char open, const char *prefix, int64_t price, const char *close) {
    snprintf(out, MARKET__IDX_BOUND_MAX, "%c%s%013lld%s", open, prefix, (long long)price, close);
}

/* Plans search q (see market__search_plan): checks it (market_search_check()), picks the
 * index (item given: idx:item; seller: idx:seller; neither: idx:all; both: no index, the
 * one listing's ZSCORE), and writes the bounds of every listing that matches and of the
 * page, after the cursor when there is one. Returns MARKET_OK, or MARKET_ERR_INVALID when
 * q fails its check. */
int market__search_plan_make(const market_search_query *q, market__search_plan *p) {
    if (market_search_check(q, NULL, NULL) < 0) return MARKET_ERR_INVALID;
    memset(p, 0, sizeof *p);
    p->desc = q->desc != 0;
    p->lo = q->min_price ? q->min_price : 1;
    p->hi = q->max_price ? q->max_price : MARKET_PRICE_MAX;
    p->has_cursor = has(q->cursor) && market__cursor_parse(q->cursor, &p->after) == 0;
    snprintf(p->count, sizeof p->count, "%zu", q->limit + 1);
    if (q->item && q->seller) {
        p->point = 1;
        return MARKET_OK;
    }
    char prefix[MARKET_ID_MAX + 2] = "";
    p->kind = q->item ? MARKET__IDX_ITEM : q->seller ? MARKET__IDX_SELLER : MARKET__IDX_ALL;
    if (p->kind != MARKET__IDX_ALL)
        snprintf(prefix, sizeof prefix, "%s:", q->item ? q->item : q->seller);
    bound(p->min, '[', prefix, p->lo, "");
    bound(p->max, '(', prefix, p->hi, ";");
    const char *lo_end = p->min, *hi_end = p->max;
    char after[MARKET__IDX_BOUND_MAX];
    if (p->has_cursor) { /* strictly after the cursor's listing, in this index's order */
        after[0] = '(';
        market__idx_member(after + 1, p->kind, p->after.item, p->after.seller, p->after.price);
        if (p->desc)
            hi_end = after;
        else
            lo_end = after;
    }
    snprintf(p->start, sizeof p->start, "%s", p->desc ? hi_end : lo_end);
    snprintf(p->stop, sizeof p->stop, "%s", p->desc ? lo_end : hi_end);
    return MARKET_OK;
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
