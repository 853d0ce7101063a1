/* market_model_reply.c - the data model's replies: what the reads of
 * market_model.c bring back, turned into plain C values (numbers, prices,
 * ids, listings, a player, a sale, a page of keys).
 *
 * Pure: it reads the replies handed to it and does no I/O. Every value the
 * market stores is decoded here, so that a file above the model judges
 * values, never the encoding of a reply.
 */
#include "market/market_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- shapes ---- */

/* Whether r is a status reply (OK, PONG, QUEUED): a command taken. */
int market__reply_ok(const redisReply *r) {
    return r->type == REDIS_REPLY_STATUS;
}

/* Whether r is nil (a key or field that is not there). */
int market__reply_nil(const redisReply *r) {
    return r->type == REDIS_REPLY_NIL;
}

/* Whether r is an array of n elements (n SIZE_MAX: any; n 0 with pairs: an even count). */
int market__reply_array(const redisReply *r, size_t n, int pairs) {
    return r->type == REDIS_REPLY_ARRAY && (n == SIZE_MAX || r->elements == n) &&
           (!pairs || r->elements % 2 == 0);
}

/* The count of elements of array r (0 for any other reply). */
size_t market__reply_len(const redisReply *r) {
    return r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
}

/* Element i of array r, or NULL when r is no array of more than i elements. */
const redisReply *market__reply_at(const redisReply *r, size_t i) {
    return r->type == REDIS_REPLY_ARRAY && i < r->elements ? r->element[i] : NULL;
}

/* Copies string reply r into buf (size bytes, NUL-terminated). Returns 0, or -1 when r is no
 * string, holds a NUL, or does not fit. */
int market__reply_text(const redisReply *r, char *buf, size_t size) {
    if (r->type != REDIS_REPLY_STRING || r->len >= size || memchr(r->str, '\0', r->len)) return -1;
    memcpy(buf, r->str, r->len);
    buf[r->len] = '\0';
    return 0;
}

/* Copies string reply r into a new string *out (caller frees). Returns 0, or -1 when r is no
 * string (ERR_NOMEM: no memory). */
int market__reply_dup(const redisReply *r, char **out) {
    *out = NULL;
    if (r->type != REDIS_REPLY_STRING) return -1;
    if (!(*out = malloc(r->len + 1))) return MARKET_ERR_NOMEM;
    memcpy(*out, r->str, r->len);
    (*out)[r->len] = '\0';
    return 0;
}

/* The text of string reply r (*len bytes, when len is not NULL; NUL-terminated by hiredis),
 * or NULL. */
const char *market__reply_str(const redisReply *r, size_t *len) {
    if (r->type != REDIS_REPLY_STRING) return NULL;
    if (len) *len = r->len;
    return r->str;
}

/* The text of error reply r (*len bytes), or NULL. */
const char *market__reply_why(const redisReply *r, size_t *len) {
    if (r->type != REDIS_REPLY_ERROR) return NULL;
    *len = r->len;
    return r->str;
}

/* Whether r is an error reply. */
int market__reply_err(const redisReply *r) {
    return r->type == REDIS_REPLY_ERROR;
}

/* Returns the first error reply among replies[0..n), or NULL. */
const redisReply *market__reply_error(redisReply *const *replies, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (replies[i] && replies[i]->type == REDIS_REPLY_ERROR) return replies[i];
    return NULL;
}

/* Returns the first error reply among the elements of r (an EXEC's replies), or NULL. */
const redisReply *market__reply_error_in(const redisReply *r) {
    return r->type == REDIS_REPLY_ARRAY ? market__reply_error(r->element, r->elements) : NULL;
}

/* Whether r is Redis's NOSCRIPT error: an EVALSHA of a script its cache does
 * not hold (flushed, or a server that never ran it). */
int market__reply_noscript(const redisReply *r) {
    return r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* Whether r, a SCRIPT EXISTS of one script, says the server has it cached. */
int market__reply_script_here(const redisReply *r) {
    return r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
           r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == 1;
}

/* Whether r, if a string reply, is s. */
int market__reply_is(const redisReply *r, const char *s) {
    return r && r->type == REDIS_REPLY_STRING && r->len == strlen(s) &&
           memcmp(r->str, s, r->len) == 0;
}

/* ---- numbers ---- */

/* Copies s[0..len) into buf (n bytes) as a C string. Returns 0, or -1 when
 * it is empty or does not fit. */
static int terminated(char *buf, size_t n, const char *s, size_t len) {
    if (len == 0 || len >= n) return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return 0;
}

/* Parses a whole decimal int64. Returns 0, or -1 when s is not one. */
int market__parse_i64(const char *s, size_t len, int64_t *out) {
    char buf[32], *end;
    if (terminated(buf, sizeof buf, s, len) < 0) return -1;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

/* Parses a zset score that must hold a whole price in 1..MARKET_PRICE_MAX.
 * Returns 0, or -1 when it does not. */
int market__parse_price(const char *s, size_t len, int64_t *out) {
    char buf[64], *end;
    if (terminated(buf, sizeof buf, s, len) < 0) return -1;
    errno = 0;
    double v = strtod(buf, &end);
    if (errno || *end || !(v >= 1.0 && v <= (double)MARKET_PRICE_MAX)) return -1;
    int64_t p = (int64_t)v;
    if ((double)p != v) return -1;
    *out = p;
    return 0;
}

/* Parses string reply r as a whole int64 into *out. Returns 0, or -1 when r
 * is no string or not such a number. */
int market__reply_i64(const redisReply *r, int64_t *out) {
    if (r->type != REDIS_REPLY_STRING) return -1;
    return market__parse_i64(r->str, r->len, out);
}

/* A listing's end as a ZSCORE of its realm's ends (or a score of its ZRANGE) gives it:
 * MARKET__NO_END (nil), MARKET__END_UNREADABLE, or the end in Unix ms. */
int64_t market__reply_end(const redisReply *r) {
    int64_t v;
    if (r->type == REDIS_REPLY_NIL) return MARKET__NO_END;
    if (market__reply_i64(r, &v) < 0 || v < 0) return MARKET__END_UNREADABLE;
    return v;
}

/* Reads listing l's end from r (a ZSCORE, or an element of a ZMSCORE, of the realm's ends):
 * l->ends_ms, 0 when it has none. Returns 0, or -1 when r is not an end. */
int market__listing_end(market_listing *l, const redisReply *r) {
    int64_t v = market__reply_end(r);
    if (v == MARKET__END_UNREADABLE) return -1;
    l->ends_ms = v == MARKET__NO_END ? 0 : v;
    return 0;
}

/* The listing price a ZSCORE (or ZMSCORE element) reply gives, as the
 * rules take it: MARKET__NOT_LISTED, MARKET__PRICE_UNREADABLE or the price. */
int64_t market__reply_price(const redisReply *r) {
    int64_t price;
    if (r->type == REDIS_REPLY_NIL) return MARKET__NOT_LISTED;
    if (r->type != REDIS_REPLY_STRING || market__parse_price(r->str, r->len, &price) < 0)
        return MARKET__PRICE_UNREADABLE;
    return price;
}

/* The count an HGET of units: or stacks: gives: 0 for nil (none), the count
 * (1..2^63-1), or -1 when it is not a positive whole number. */
int64_t market__reply_units(const redisReply *r) {
    int64_t v;
    if (r->type == REDIS_REPLY_NIL) return 0;
    if (market__reply_i64(r, &v) < 0 || v <= 0) return -1;
    return v;
}

/* The party an HGET <user> funds reply gives (see market__party). */
market__party market__reply_party(const redisReply *r) {
    market__party p = {MARKET__ABSENT, 0};
    if (r->type == REDIS_REPLY_NIL) return p;
    p.known = market__reply_i64(r, &p.funds) == 0 ? MARKET__PRESENT : MARKET__UNREADABLE;
    return p;
}

/* The party an HMGET <user> funds escrow reply gives (see market__party),
 * with its escrow in *escrow (0 when it has none; a party UNREADABLE when
 * it is not a whole number). */
market__party market__reply_funds_escrow(const redisReply *r, int64_t *escrow) {
    market__party p = {MARKET__UNREADABLE, 0};
    *escrow = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) return p;
    p = market__reply_party(r->element[0]);
    if (p.known == MARKET__PRESENT && r->element[1]->type != REDIS_REPLY_NIL &&
        market__reply_i64(r->element[1], escrow) < 0)
        p.known = MARKET__UNREADABLE;
    return p;
}

/* Reads TIME's reply into *ms. Returns 0, or -1 when it is not one. */
int market__reply_time(const redisReply *r, int64_t *ms) {
    int64_t sec, usec;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        market__reply_i64(r->element[0], &sec) < 0 || market__reply_i64(r->element[1], &usec) < 0)
        return -1;
    *ms = sec * 1000 + usec / 1000;
    return 0;
}

/* Copies the value in r, the reply to a CONFIG GET of one parameter (its
 * name and its value), into out. Returns 0, or -1 when r holds no such pair
 * or the value does not fit. */
int market__reply_config(const redisReply *r, char *out, size_t outlen) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[1]->type != REDIS_REPLY_STRING || r->element[1]->len >= outlen)
        return -1;
    memcpy(out, r->element[1]->str, r->element[1]->len);
    out[r->element[1]->len] = '\0';
    return 0;
}

/* Reads a realm's settings from r, the reply to market__rd_realm_settings()
 * (fields unset: no cut, no listing fee, the default house, listings without an end).
 * Returns 0, or -1 when r is no such reply or holds values out of range. */
int market__reply_realm_settings(const redisReply *r, market_settings *out) {
    *out = (market_settings){0};
    memcpy(out->house, MARKET_SALE_HOUSE, sizeof MARKET_SALE_HOUSE);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4) return -1;
    const redisReply *house = r->element[1];
    int64_t *v[4] = {&out->fee_bps, NULL, &out->list_fee_bps, &out->list_duration_s};
    const int64_t most[4] = {MARKET_FEE_BPS_MAX, 0, MARKET_FEE_BPS_MAX, MARKET_DURATION_MAX_S};
    for (int i = 0; i < 4; i++)
        if (v[i] && r->element[i]->type != REDIS_REPLY_NIL &&
            (market__reply_i64(r->element[i], v[i]) < 0 || *v[i] < 0 || *v[i] > most[i]))
            return -1;
    if (house->type != REDIS_REPLY_NIL && market__reply_id(house, out->house) < 0) return -1;
    return 0;
}

/* Reads r, a field of an item's price history (market_trade.h), into *out
 * when it holds the candle of the interval that starts at start_ms. Returns
 * 1, 0 when it holds none (nil, or an older turn of the ring), -1 when it
 * is unreadable. */
int market__reply_candle(const redisReply *r, int64_t start_ms, market_candle *out) {
    if (r->type == REDIS_REPLY_NIL) return 0;
    if (r->type != REDIS_REPLY_STRING || r->len > 128) return -1;
    int64_t v[6];
    const char *p = r->str, *end = r->str + r->len;
    for (int i = 0; i < 6; i++) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        const char *e = i < 5 ? sp : end;
        if (!e || (i == 5 && sp) || market__parse_i64(p, (size_t)(e - p), &v[i]) < 0 || v[i] < 0)
            return -1;
        p = e + 1;
    }
    if (v[0] != start_ms) return 0;
    if (v[3] > v[2] || v[1] < v[3] || v[1] > v[2] || v[4] < v[3] || v[4] > v[2]) return -1;
    *out = (market_candle){
        .t_ms = v[0], .open = v[1], .high = v[2], .low = v[3], .close = v[4], .volume = v[5]};
    return 1;
}

/* Copies string reply e into out (MARKET_ID_MAX + 1 bytes) when it is a
 * valid id. Returns 0, or -1 when it is not. */
int market__reply_id(const redisReply *e, char *out) {
    if (e->type != REDIS_REPLY_STRING || e->len > MARKET_ID_MAX) return -1;
    memcpy(out, e->str, e->len);
    out[e->len] = '\0';
    return market_id_valid(out) ? 0 : -1;
}

/* Copies into id the id of the entry r holds, the reply to a read of a
 * stream's latest entry (market__streams_last()), or "" when
 * it holds none (an empty stream). Returns 0, or -1 when r is no such
 * reply. */
int market__reply_stream_last(const redisReply *r, char id[MARKET_TRADE_ID_MAX + 1]) {
    id[0] = '\0';
    if (r->type != REDIS_REPLY_ARRAY || r->elements > 1) return -1;
    if (r->elements == 0) return 0;
    const redisReply *e = r->element[0];
    const redisReply *x = e->type == REDIS_REPLY_ARRAY && e->elements == 2 ? e->element[0] : NULL;
    if (!x || x->type != REDIS_REPLY_STRING || x->len > MARKET_TRADE_ID_MAX ||
        !market_trade_id_valid(x->str))
        return -1;
    memcpy(id, x->str, x->len + 1);
    return 0;
}

/* ---- listings ---- */

/* Sets listing l's quantity and stack from r, its field of market:{r}:units (nil: a unique
 * item, 1). Returns 0, or -1 when r is no count. */
int market__listing_units(market_listing *l, const redisReply *r) {
    int64_t v = market__reply_units(r);
    if (v < 0) return -1;
    l->stack = v > 0;
    l->quantity = v > 0 ? v : 1;
    return 0;
}

/* Reads listing i's price and units from z, a ZMSCORE of the market (market__rd_prices_begin();
 * NULL: not read), and u, an HMGET of their units (market__rd_listing_units_begin()): *price
 * as market__reply_price() gives it, *stack whether a count is stored, *units that count, or
 * 1 for a unique item (-1: unreadable). Both must hold i (market__reply_array()). */
void market__reply_listing_at(const redisReply *z, const redisReply *u, size_t i, int64_t *price,
                              int *stack, int64_t *units) {
    if (price) *price = z ? market__reply_price(z->element[i]) : MARKET__NOT_LISTED;
    *stack = u->element[i]->type != REDIS_REPLY_NIL;
    *units = *stack ? market__reply_units(u->element[i]) : 1;
}

/* Reads entry k of r, a page of an item's index with its scores (seller, price, ...), into
 * seller (MARKET_ID_MAX + 1 bytes: a valid id) and *price. Returns 0, or -1 when it is not
 * one. */
int market__reply_seller_at(const redisReply *r, size_t k, char *seller, int64_t *price) {
    const redisReply *e = market__reply_at(r, 2 * k), *sc = market__reply_at(r, 2 * k + 1);
    if (!e || !sc || market__reply_text(e, seller, MARKET_ID_MAX + 1) < 0 ||
        !market_id_valid(seller) || sc->type != REDIS_REPLY_STRING ||
        market__parse_price(sc->str, sc->len, price) < 0)
        return -1;
    return 0;
}

/* Reads entry k of z, a page of a realm's ends (market__rd_ends_first(): member, end, ...),
 * into *end (MARKET__END_UNREADABLE: not a time), and either *auction (an auction's ending,
 * "@<id>") or item and seller (a listing's, "<item>.<seller>"; MARKET_ID_MAX + 1 bytes each,
 * *auction 0). Returns 0, or -1 when its member is neither (*end is read all the same). */
int market__reply_ending(const redisReply *z, size_t k, int64_t *end, int64_t *auction, char *item,
                         char *seller) {
    const redisReply *mem = market__reply_at(z, 2 * k), *sc = market__reply_at(z, 2 * k + 1);
    *end = sc ? market__reply_end(sc) : MARKET__END_UNREADABLE;
    *auction = 0;
    if (!mem || mem->type != REDIS_REPLY_STRING || mem->len < 2) return -1;
    if (mem->str[0] == MARKET__END_AUCTION[0])
        return market__parse_i64(mem->str + 1, mem->len - 1, auction) == 0 && *auction > 0 ? 0 : -1;
    const char *dot = memchr(mem->str, '.', mem->len);
    size_t li = dot ? (size_t)(dot - mem->str) : 0, ls = dot ? mem->len - li - 1 : 0;
    if (!dot || li == 0 || li > MARKET_ID_MAX || ls == 0 || ls > MARKET_ID_MAX) return -1;
    memcpy(item, mem->str, li);
    item[li] = '\0';
    memcpy(seller, dot + 1, ls);
    seller[ls] = '\0';
    return 0;
}

/* Reads a market:{r} entry (member e "<item>.<seller>", each id of 1..MARKET_ID_MAX bytes,
 * score sc a whole price) into *l, ids unchecked. Returns 0, or -1 (then *l is unchanged). */
static int entry_read(const redisReply *e, const redisReply *sc, market_listing *l) {
    if (e->type != REDIS_REPLY_STRING || sc->type != REDIS_REPLY_STRING) return -1;
    const char *dot = memchr(e->str, '.', e->len);
    size_t ilen = dot ? (size_t)(dot - e->str) : 0, slen = dot ? e->len - ilen - 1 : 0;
    if (ilen == 0 || ilen > MARKET_ID_MAX || slen == 0 || slen > MARKET_ID_MAX ||
        market__parse_price(sc->str, sc->len, &l->price) < 0)
        return -1;
    memcpy(l->item, e->str, ilen);
    l->item[ilen] = '\0';
    memcpy(l->seller, dot + 1, slen);
    l->seller[slen] = '\0';
    return 0;
}

/* Reads a market:{r} entry (member e "<item>.<seller>", score sc) into *l. Returns 0, or
 * -1 when it is not a listing (no dot, a bad id, a price that is not whole or out of
 * range). */
int market__listing_read(const redisReply *e, const redisReply *sc, market_listing *l) {
    if (entry_read(e, sc, l) < 0) return -1;
    return strlen(l->item) + strlen(l->seller) + 1 == e->len && market_id_valid(l->item) &&
                   market_id_valid(l->seller)
               ? 0
               : -1;
}

/* Reads a page of the market (r: ZRANGE market:{r} ... WITHSCORES) into
 * *out, a new array of *n listings (caller frees with free(); NULL when r
 * holds none): their item, seller and price; quantity and stack are left
 * 0 (market_listings() reads them). Entries that are no listing's (no
 * dot, ids too short or long, a price that is not whole) are left out.
 * Returns MARKET_OK, or MARKET_ERR_STORE (r is no such reply),
 * MARKET_ERR_NOMEM, with *out NULL. */
int market__reply_market_page(const redisReply *r, market_listing **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2) return MARKET_ERR_STORE;
    market_listing *l = NULL;
    if (r->elements && !(l = calloc(r->elements / 2, sizeof *l))) return MARKET_ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (entry_read(r->element[i], r->element[i + 1], &l[k]) == 0) k++;
    *out = l;
    *n = k;
    return MARKET_OK;
}

/* ---- players ---- */

static int cmp_id(const void *a, const void *b) {
    return strcmp(a, b);
}

static int cmp_stack(const void *a, const void *b) {
    return strcmp(((const market_stack *)a)->item, ((const market_stack *)b)->item);
}

/* Reads an HGETALL of a player's stacks (r) into *out, a new array of *n
 * entries (caller frees with free(); NULL when none), in the reply's order.
 * Returns MARKET_OK, or MARKET_ERR_STORE (r is no hash, or an item is no
 * string of at most MARKET_ID_MAX bytes, or a count no whole number; *out
 * then holds the entries read before it), MARKET_ERR_NOMEM. */
int market__reply_stacks(const redisReply *r, market_stack **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2) return MARKET_ERR_STORE;
    if (r->elements == 0) return MARKET_OK;
    if (!(*out = calloc(r->elements / 2, sizeof **out))) return MARKET_ERR_NOMEM;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i];
        market_stack *s = &(*out)[*n];
        if (k->type != REDIS_REPLY_STRING || k->len > MARKET_ID_MAX ||
            market__reply_i64(r->element[i + 1], &s->count) < 0)
            return MARKET_ERR_STORE;
        memcpy(s->item, k->str, k->len);
        s->item[k->len] = '\0';
        (*n)++;
    }
    return MARKET_OK;
}

/* Reads a player from the replies of market__rd_player(): h (its name and
 * funds), inv (its unique items) and st (its stacks) into *p (zeroed by the
 * caller; its inventory and stacks are new: market_player_free() frees
 * them), the inventory and the stacks sorted. Items that are no id of at
 * most MARKET_ID_MAX bytes are left out of the inventory. Returns MARKET_OK,
 * or MARKET_ERR_NO_PLAYER (no funds), MARKET_ERR_STORE (a reply is not what
 * the read asks for, funds or a count no whole number, a stack's item no
 * id), MARKET_ERR_NOMEM. */
int market__reply_player(const redisReply *h, const redisReply *inv, const redisReply *st,
                         market_player *p) {
    if (h->type != REDIS_REPLY_ARRAY || h->elements != 3 || inv->type != REDIS_REPLY_ARRAY)
        return MARKET_ERR_STORE;
    if (h->element[1]->type == REDIS_REPLY_NIL) return MARKET_ERR_NO_PLAYER;
    if (inv->elements && !(p->inventory = calloc(inv->elements, sizeof *p->inventory)))
        return MARKET_ERR_NOMEM;
    if (market__reply_i64(h->element[1], &p->funds) < 0) return MARKET_ERR_STORE;
    p->escrow = 0; /* nil: a player who never placed a buy order */
    if (h->element[2]->type != REDIS_REPLY_NIL && market__reply_i64(h->element[2], &p->escrow) < 0)
        return MARKET_ERR_STORE;
    if (h->element[0]->type == REDIS_REPLY_STRING)
        snprintf(p->name, sizeof p->name, "%s", h->element[0]->str);
    for (size_t i = 0; i < inv->elements; i++) {
        const redisReply *e = inv->element[i];
        if (e->type != REDIS_REPLY_STRING || e->len > MARKET_ID_MAX) continue;
        memcpy(p->inventory[p->n_inventory], e->str, e->len);
        p->inventory[p->n_inventory++][e->len] = '\0';
    }
    if (p->n_inventory) qsort(p->inventory, p->n_inventory, sizeof *p->inventory, cmp_id);
    int rc = market__reply_stacks(st, &p->stacks, &p->n_stacks);
    if (rc < 0) return rc;
    for (size_t i = 0; i < p->n_stacks; i++)
        if (!market_id_valid(p->stacks[i].item)) return MARKET_ERR_STORE;
    if (p->n_stacks) qsort(p->stacks, p->n_stacks, sizeof *p->stacks, cmp_stack);
    return MARKET_OK;
}

/* ---- buy orders ---- */

/* Reads the realm's last buy order id (GET: nil is 0) into *id. Returns 0,
 * or -1 when it is not a whole number >= 0. */
int market__reply_orders_last(const redisReply *r, int64_t *id) {
    *id = 0;
    if (r->type == REDIS_REPLY_NIL) return 0;
    return market__reply_i64(r, id) < 0 || *id < 0 ? -1 : 0;
}

/* Reads buy order id's fields (market__rd_order()'s HMGET) into *out: a
 * placed order's escrow, left * price, fits an int64, and every reader may
 * multiply them. Returns MARKET_OK, MARKET_ERR_NO_ORDER (no such order) or
 * MARKET_ERR_STORE (not one). */
int market__reply_order(const redisReply *r, int64_t id, market_bid *out) {
    memset(out, 0, sizeof *out);
    out->id = id;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 5) return MARKET_ERR_STORE;
    size_t nil = 0, str = 0;
    for (size_t i = 0; i < 5; i++) {
        nil += r->element[i]->type == REDIS_REPLY_NIL;
        str += r->element[i]->type == REDIS_REPLY_STRING;
    }
    if (nil == 5) return MARKET_ERR_NO_ORDER;
    const redisReply *const *e = (const redisReply *const *)r->element;
    if (str != 5 || e[0]->len > MARKET_ID_MAX || e[1]->len > MARKET_ID_MAX) return MARKET_ERR_STORE;
    memcpy(out->buyer, e[0]->str, e[0]->len);
    memcpy(out->item, e[1]->str, e[1]->len);
    if (!market_id_valid(out->buyer) || !market_id_valid(out->item) ||
        market__parse_price(e[2]->str, e[2]->len, &out->price) < 0 ||
        market__reply_i64(e[3], &out->quantity) < 0 || market__reply_i64(e[4], &out->left) < 0 ||
        out->left < 1 || out->left > out->quantity ||
        out->left > INT64_MAX / out->price) /* its escrow, left * price, fits: as placed */
        return MARKET_ERR_STORE;
    return MARKET_OK;
}

/* Reads an auction's fields (market__rd_auction()'s HMGET) into *out. Returns MARKET_OK,
 * MARKET_ERR_NO_AUCTION (none), MARKET_ERR_STORE (not one). */
int market__reply_auction(const redisReply *r, int64_t id, market_auction *out) {
    memset(out, 0, sizeof *out);
    out->id = id;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != MARKET__AUCTION_FIELDS)
        return MARKET_ERR_STORE;
    size_t nil = 0;
    for (size_t i = 0; i < MARKET__AUCTION_FIELDS; i++) {
        nil += r->element[i]->type == REDIS_REPLY_NIL;
        if (r->element[i]->type != REDIS_REPLY_NIL && r->element[i]->type != REDIS_REPLY_STRING)
            return MARKET_ERR_STORE;
    }
    if (nil == MARKET__AUCTION_FIELDS) return MARKET_ERR_NO_AUCTION;
    if (nil) return MARKET_ERR_STORE;
    const redisReply *const *e = (const redisReply *const *)r->element;
    if (e[0]->len > MARKET_ID_MAX || e[1]->len > MARKET_ID_MAX || e[7]->len > MARKET_ID_MAX)
        return MARKET_ERR_STORE;
    memcpy(out->seller, e[0]->str, e[0]->len);
    memcpy(out->item, e[1]->str, e[1]->len);
    memcpy(out->bidder, e[7]->str, e[7]->len);
    int64_t *v[MARKET__AUCTION_FIELDS] = {NULL,         NULL,       &out->quantity, &out->start_bid,
                                          &out->buyout, &out->step, &out->ends_ms,  NULL,
                                          &out->bid,    &out->bids, NULL,           &out->fee};
    for (size_t i = 0; i < MARKET__AUCTION_FIELDS; i++)
        if (v[i] && (market__reply_i64(e[i], v[i]) < 0 || *v[i] < 0)) return MARKET_ERR_STORE;
    out->state = -1;
    for (int s = 0; s < 3; s++)
        if (e[10]->len == strlen(market__auction_states[s]) &&
            memcmp(e[10]->str, market__auction_states[s], e[10]->len) == 0)
            out->state = s;
    if (out->state < 0 || !market_id_valid(out->seller) || !market_id_valid(out->item) ||
        (out->bidder[0] && !market_id_valid(out->bidder)) || out->start_bid < 1 || out->step < 1 ||
        (out->bid && !out->bidder[0]) ||
        out->bid > INT64_MAX / (out->quantity ? out->quantity : 1)) /* its escrow fits */
        return MARKET_ERR_STORE;
    return MARKET_OK;
}

/* Reads side *out of a direct trade from s (len bytes), as market__goods_text() wrote it.
 * Returns 0, or -1 when it is not one (market_goods_valid()). */
int market__parse_goods(const char *s, size_t len, market_goods *out) {
    memset(out, 0, sizeof *out);
    for (size_t at = 0; at < len;) {
        const char *t = s + at, *comma = memchr(t, ',', len - at);
        size_t n = comma ? (size_t)(comma - t) : len - at;
        at += n + 1;
        const char *star = memchr(t, '*', n);
        if (n >= 2 && t[0] == '$') {
            if (out->funds || market__parse_i64(t + 1, n - 1, &out->funds) < 0) return -1;
        } else if (n >= 2 && t[0] == '#' && n - 1 <= MARKET_ID_MAX &&
                   out->n_items < MARKET_DIRECT_GOODS_MAX) {
            memcpy(out->items[out->n_items++], t + 1, n - 1);
        } else if (star && star > t && (size_t)(star - t) <= MARKET_ID_MAX &&
                   out->n_units < MARKET_DIRECT_GOODS_MAX) {
            size_t k = out->n_units++;
            memcpy(out->unit_item[k], t, (size_t)(star - t));
            if (market__parse_i64(star + 1, n - (size_t)(star - t) - 1, &out->units[k]) < 0)
                return -1;
        } else {
            return -1;
        }
        if (comma && at == len) return -1; /* a trailing comma */
    }
    return market_goods_valid(out) ? 0 : -1;
}

/* Reads direct trade id from r (market__rd_direct()) into *out; the state as stored (an open
 * one is not turned EXPIRED here). Returns MARKET_OK, ERR_NO_DIRECT (no such hash), or
 * ERR_STORE (a hash that is no direct trade). */
int market__reply_direct(const redisReply *r, int64_t id, market_direct *out) {
    memset(out, 0, sizeof *out);
    out->id = id;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != MARKET__DIRECT_FIELDS)
        return MARKET_ERR_STORE;
    size_t nil = 0;
    for (size_t i = 0; i < MARKET__DIRECT_FIELDS; i++) {
        nil += r->element[i]->type == REDIS_REPLY_NIL;
        if (r->element[i]->type != REDIS_REPLY_NIL && r->element[i]->type != REDIS_REPLY_STRING)
            return MARKET_ERR_STORE;
    }
    if (nil == MARKET__DIRECT_FIELDS) return MARKET_ERR_NO_DIRECT;
    if (nil) return MARKET_ERR_STORE;
    const redisReply *const *e = (const redisReply *const *)r->element;
    if (e[0]->len > MARKET_ID_MAX || e[1]->len > MARKET_ID_MAX || e[8]->len > MARKET_ID_MAX ||
        market__parse_goods(e[2]->str, e[2]->len, &out->give) < 0 ||
        market__parse_goods(e[3]->str, e[3]->len, &out->get) < 0)
        return MARKET_ERR_STORE;
    memcpy(out->from, e[0]->str, e[0]->len);
    memcpy(out->to, e[1]->str, e[1]->len);
    memcpy(out->closed_by, e[8]->str, e[8]->len);
    int64_t *v[3] = {&out->made_ms, &out->expires_ms, &out->closed_ms};
    for (size_t i = 0; i < 3; i++)
        if (market__reply_i64(e[4 + (i == 2 ? 3 : i)], v[i]) < 0 || *v[i] < 0)
            return MARKET_ERR_STORE;
    out->state = -1;
    for (int s = 0; s < 3; s++)
        if (e[6]->len == strlen(market__direct_states[s]) &&
            memcmp(e[6]->str, market__direct_states[s], e[6]->len) == 0)
            out->state = s;
    if (out->state < 0 || !market_id_valid(out->from) || !market_id_valid(out->to) ||
        strcmp(out->from, out->to) == 0 || (out->closed_by[0] && !market_id_valid(out->closed_by)))
        return MARKET_ERR_STORE;
    return MARKET_OK;
}

/* Reads a book's member (market__bid_member()) into *id. Returns 0, or -1
 * when it is not one. */
int market__reply_book_id(const redisReply *member, int64_t *id) {
    return member->type != REDIS_REPLY_STRING || market__reply_i64(member, id) < 0 || *id < 1 ? -1
                                                                                              : 0;
}

/* Reads r, a page of ids (a ZRANGE of an index of deals, or of a book: market__bid_member();
 * with pairs, WITHSCORES), into ids[0..*n), at most max. Returns 0, or -1 when it is not one. */
int market__reply_ids(const redisReply *r, int pairs, int64_t *ids, size_t max, size_t *n) {
    *n = 0;
    if (!market__reply_array(r, SIZE_MAX, pairs)) return -1;
    for (size_t i = 0; i < r->elements && *n < max; i += pairs ? 2 : 1)
        if (market__reply_book_id(r->element[i], &ids[(*n)++]) < 0) return -1;
    return 0;
}

/* The count an integer reply r gives (ZCARD, ZCOUNT, EXISTS, ...), or -1 when r is not one. */
int64_t market__reply_count(const redisReply *r) {
    return r->type == REDIS_REPLY_INTEGER && r->integer >= 0 ? (int64_t)r->integer : -1;
}

/* Whether a player holds a unique item, as an HEXISTS of its inventory
 * (market__rd_holds()) says: 1, 0, or -1 when r is not an answer. */
int market__reply_holds(const redisReply *r) {
    int64_t v = market__reply_count(r);
    return v == 0 || v == 1 ? (int)v : -1;
}

/* ---- sales ---- */

/* Reads the HMGET of market__sale_fields (r) into *st, and the item and house ids
 * into item and house (MARKET_ID_MAX + 1 bytes each; may be NULL), with
 * *initial the stock it was created with. Returns st->known. */
int market__reply_sale(const redisReply *r, market__sale_state *st, int64_t *initial, char *item,
                       char *house) {
    memset(st, 0, sizeof *st);
    st->known = MARKET__UNREADABLE;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != MARKET__SALE_FIELDS) return st->known;
    size_t nil = 0;
    for (size_t i = 0; i < MARKET__SALE_FIELDS; i++)
        nil += r->element[i]->type == REDIS_REPLY_NIL;
    if (nil == MARKET__SALE_FIELDS) return st->known = MARKET__ABSENT;
    if (nil) return st->known;
    char id[MARKET_ID_MAX + 1];
    if (market__reply_id(r->element[0], item ? item : id) < 0 ||
        market__reply_id(r->element[8], house ? house : id) < 0)
        return st->known;
    int64_t *v[7] = {&st->price, initial,       &st->left,  &st->sold,
                     &st->limit, &st->start_ms, &st->end_ms};
    for (size_t i = 0; i < 7; i++)
        if (market__parse_i64(r->element[1 + i]->str, r->element[1 + i]->len, v[i]) < 0)
            return st->known;
    return st->known = MARKET__PRESENT;
}

/* Reads a count of units a player bought of a sale (HGET or HMGET of its
 * bought hash): nil is 0, anything but a whole number >= 0 is -1. */
int64_t market__reply_bought(const redisReply *r) {
    int64_t v;
    if (r->type == REDIS_REPLY_NIL) return 0;
    if (market__reply_i64(r, &v) < 0 || v < 0) return -1;
    return v;
}

/* Reads the HMGET of market__rd_sale_counts() (r): the sale's item into
 * item (MARKET_ID_MAX + 1 bytes; cut to fit), and its initial, stock and
 * sold counts into v[0..3). Returns MARKET__PRESENT, MARKET__ABSENT (no item:
 * the sale went away) or MARKET__UNREADABLE. */
int market__reply_sale_counts(const redisReply *r, char *item, int64_t v[3]) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4) return MARKET__UNREADABLE;
    const redisReply *it = r->element[0];
    if (it->type == REDIS_REPLY_NIL) return MARKET__ABSENT;
    if (it->type != REDIS_REPLY_STRING) return MARKET__UNREADABLE;
    for (size_t i = 0; i < 3; i++)
        if (market__reply_i64(r->element[1 + i], &v[i]) < 0) return MARKET__UNREADABLE;
    size_t len = it->len < MARKET_ID_MAX ? it->len : MARKET_ID_MAX;
    memcpy(item, it->str, len);
    item[len] = '\0';
    return MARKET__PRESENT;
}

/* Reads the HGETALL of a sale's bought hash (r) into *out, a new array of *n
 * entries (caller frees with free(); NULL when none). Returns MARKET_OK, or
 * MARKET_ERR_STORE (r is no hash: *out NULL), MARKET__REPLY_BAD (a player
 * that is no id, or units no whole number: *out NULL), MARKET_ERR_NOMEM. */
int market__reply_buyers(const redisReply *r, market_sale_buyer **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2) return MARKET_ERR_STORE;
    market_sale_buyer *v = NULL;
    if (r->elements && !(v = calloc(r->elements / 2, sizeof *v))) return MARKET_ERR_NOMEM;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        market_sale_buyer *b = &v[i / 2];
        if (market__reply_id(r->element[i], b->player) < 0 ||
            market__reply_i64(r->element[i + 1], &b->units) < 0) {
            free(v);
            return MARKET__REPLY_BAD;
        }
    }
    *out = v;
    *n = r->elements / 2;
    return MARKET_OK;
}

/* ---- streams: trades and listing changes ---- */

/* Reads a stream entry [id, [field, value, ...]] of a trade into *t: the
 * id is the trade's, unless a "trade" field names it (an index's entry),
 * and *entry_id (MARKET_TRADE_ID_MAX + 1 bytes, may be NULL) gets the
 * entry's own. Returns MARKET_OK or MARKET_ERR_STORE. */
int market__reply_trade(const redisReply *e, market_trade *t, char *entry_id) {
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2) return MARKET_ERR_STORE;
    const redisReply *id = e->element[0], *f = e->element[1];
    if (id->type != REDIS_REPLY_STRING || id->len > MARKET_TRADE_ID_MAX ||
        f->type != REDIS_REPLY_ARRAY || f->elements % 2)
        return MARKET_ERR_STORE;
    memset(t, 0, sizeof *t);
    memcpy(t->id, id->str, id->len);
    if (entry_id) memcpy(entry_id, t->id, id->len + 1);
    unsigned seen = 0;
    for (size_t i = 0; i < f->elements; i += 2) {
        const redisReply *k = f->element[i], *v = f->element[i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) return MARKET_ERR_STORE;
        int rc = 0;
        int64_t x = 0;
        if (strcmp(k->str, "buyer") == 0) {
            rc = market__reply_id(v, t->buyer), seen |= 1;
        } else if (strcmp(k->str, "seller") == 0) {
            rc = market__reply_id(v, t->seller), seen |= 2;
        } else if (strcmp(k->str, "item") == 0) {
            rc = market__reply_id(v, t->item), seen |= 4;
        } else if (strcmp(k->str, "house") == 0) { /* "" without a cut */
            if (v->len) rc = market__reply_id(v, t->house);
        } else if (strcmp(k->str, "prev") == 0) {
            /* the item's trade before: read by item_script, not here */
        } else if (strcmp(k->str, "trade") == 0) {
            if (v->len > MARKET_TRADE_ID_MAX) return MARKET_ERR_STORE;
            memcpy(t->id, v->str, v->len);
            t->id[v->len] = '\0';
        } else if (strcmp(k->str, "quantity") == 0) {
            rc = market__parse_i64(v->str, v->len, &t->quantity), seen |= 8;
        } else if (strcmp(k->str, "price") == 0) {
            rc = market__parse_i64(v->str, v->len, &t->price), seen |= 16;
        } else if (strcmp(k->str, "total") == 0) {
            rc = market__parse_i64(v->str, v->len, &t->total), seen |= 32;
        } else if (strcmp(k->str, "fence") == 0) {
            rc = market__parse_i64(v->str, v->len, &x), seen |= 64;
            t->fence = (uint64_t)x;
        } else if (strcmp(k->str, "fee") == 0) { /* none in a trade older than fees: 0 */
            rc = market__parse_i64(v->str, v->len, &t->fee);
        } /* any other field is a later version's: skipped, so its records stay readable */
        if (rc < 0) return MARKET_ERR_STORE;
    }
    if (seen != 127 || !market_trade_id_valid(t->id)) return MARKET_ERR_STORE;
    t->time_ms = strtoll(t->id, NULL, 10); /* the id's first part: valid, so it fits */
    return MARKET_OK;
}

/* Reads one entry [id, [field, value...]] into *ch. Returns 0, or -1 when
 * it is not a change market__fx_change() wrote. */
int market__reply_change(const redisReply *e, market_change *ch) {
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2) return -1;
    const redisReply *id = e->element[0], *f = e->element[1];
    if (id->type != REDIS_REPLY_STRING || id->len > MARKET_TRADE_ID_MAX ||
        f->type != REDIS_REPLY_ARRAY || f->elements % 2)
        return -1;
    memset(ch, 0, sizeof *ch);
    memcpy(ch->id, id->str, id->len);
    unsigned seen = 0;
    for (size_t i = 0; i < f->elements; i += 2) {
        const redisReply *k = f->element[i], *v = f->element[i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) return -1;
        if (strcmp(k->str, "action") == 0) {
            if (strcmp(v->str, "listed") != 0 && strcmp(v->str, "unlisted") != 0) return -1;
            ch->listed = v->str[0] == 'l';
            seen |= 1;
        } else if (strcmp(k->str, "seller") == 0 || strcmp(k->str, "item") == 0) {
            char *out = k->str[0] == 's' ? ch->listing.seller : ch->listing.item;
            if (v->len > MARKET_ID_MAX) return -1;
            memcpy(out, v->str, v->len);
            out[v->len] = '\0';
            if (!market_id_valid(out)) return -1;
            seen |= k->str[0] == 's' ? 2 : 4;
        } else if (strcmp(k->str, "price") == 0) {
            if (market__parse_i64(v->str, v->len, &ch->listing.price) < 0) return -1;
            seen |= 8;
        } else if (strcmp(k->str, "quantity") == 0) {
            if (market__parse_i64(v->str, v->len, &ch->listing.quantity) < 0) return -1;
            seen |= 16;
        }
    }
    return seen == 31 ? 0 : -1;
}

#define BID_FIELDS MARKET__BID_FIELDS

/* Reads one entry of the auctions' feed (market__fx_auction_event()) into *ev. Returns 0,
 * or -1 when it is not one. */
static int reply_auction_event(const redisReply *e, market_auction_event *ev) {
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2) return -1;
    const redisReply *id = e->element[0], *f = e->element[1];
    if (id->type != REDIS_REPLY_STRING || id->len > MARKET_TRADE_ID_MAX ||
        f->type != REDIS_REPLY_ARRAY || f->elements != 2 * (BID_FIELDS + 1))
        return -1;
    memset(ev, 0, sizeof *ev);
    memcpy(ev->id, id->str, id->len);
    for (size_t i = 0; i < f->elements; i++)
        if (f->element[i]->type != REDIS_REPLY_STRING) return -1;
    const redisReply *const *x = (const redisReply *const *)f->element;
    if (strcmp(x[0]->str, "action") != 0 || x[1]->len >= sizeof ev->action) return -1;
    memcpy(ev->action, x[1]->str, x[1]->len);
    market_auction *a = &ev->a;
    int64_t *num[BID_FIELDS] = {&a->id,   NULL,        NULL, &a->quantity, &a->start_bid,
                                &a->step, &a->ends_ms, NULL, &a->bid,      &a->bids};
    char *str[BID_FIELDS] = {NULL, a->seller, a->item,   NULL, NULL,
                             NULL, NULL,      a->bidder, NULL, NULL};
    for (size_t i = 0; i < BID_FIELDS; i++) {
        const redisReply *k = x[2 + 2 * i], *v = x[3 + 2 * i];
        if (strcmp(k->str, market__bid_fields[i]) != 0) return -1;
        if (num[i] && (market__parse_i64(v->str, v->len, num[i]) < 0 || *num[i] < 0)) return -1;
        if (str[i]) {
            if (v->len > MARKET_ID_MAX) return -1;
            memcpy(str[i], v->str, v->len);
            str[i][v->len] = '\0';
        }
    }
    int sold = strcmp(ev->action, "sold") == 0, unsold = strcmp(ev->action, "unsold") == 0;
    if (!sold && !unsold && strcmp(ev->action, "opened") != 0 && strcmp(ev->action, "bid") != 0)
        return -1;
    a->state = sold ? MARKET_AUCTION_SOLD : unsold ? MARKET_AUCTION_UNSOLD : MARKET_AUCTION_OPEN;
    return a->id >= 1 && market_id_valid(a->seller) && market_id_valid(a->item) &&
                   (!a->bidder[0] || market_id_valid(a->bidder))
               ? 0
               : -1;
}

/* Reads the entries of a stream reply r (XRANGE / XREVRANGE, or a script's
 * list of them) into a new array *out of *n (caller frees; NULL when none),
 * at most max of them, of stream kind (enum market__stream): trades
 * (market_trade), listing changes (market_change) or auctions' changes
 * (market_auction_event). Returns MARKET_OK, MARKET_ERR_STORE,
 * MARKET_ERR_NOMEM. */
int market__reply_entries(const redisReply *r, size_t max, enum market__stream kind, void **out,
                          size_t *n) {
    *out = NULL;
    *n = 0;
    if (r->type != REDIS_REPLY_ARRAY) return MARKET_ERR_STORE;
    size_t count = r->elements < max ? r->elements : max;
    size_t size = kind == MARKET__STREAM_CHANGES ? sizeof(market_change)
                  : kind == MARKET__STREAM_BIDS  ? sizeof(market_auction_event)
                                                 : sizeof(market_trade);
    if (count == 0) return MARKET_OK;
    char *v = calloc(count, size);
    if (!v) return MARKET_ERR_NOMEM;
    for (size_t i = 0; i < count; i++) {
        void *at = v + i * size;
        if ((kind == MARKET__STREAM_CHANGES ? market__reply_change(r->element[i], at)
             : kind == MARKET__STREAM_BIDS  ? reply_auction_event(r->element[i], at)
                                            : market__reply_trade(r->element[i], at, NULL)) < 0) {
            free(v);
            return MARKET_ERR_STORE;
        }
    }
    *out = v;
    *n = count;
    return MARKET_OK;
}

/* ---- keys ---- */

/* Reads a SCAN reply r: its next cursor into cursor (cursorlen bytes), and
 * its page of keys into *keys (borrowed from r: an array reply whose
 * elements the caller reads with market__reply_key()). Returns 0, or -1 when r is
 * no SCAN reply or its cursor does not fit. */
int market__reply_scan(const redisReply *r, char *cursor, size_t cursorlen,
                       const redisReply **keys) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY ||
        r->element[0]->len >= cursorlen)
        return -1;
    memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
    *keys = r->element[1];
    return 0;
}

/* Returns key i of a page of keys (market__reply_scan()), borrowed from the
 * reply, with its length in *len; NULL when it is no string or i is past
 * the page. This function can't fail. */
const char *market__reply_key(const redisReply *keys, size_t i, size_t *len) {
    if (i >= keys->elements || keys->element[i]->type != REDIS_REPLY_STRING) return NULL;
    *len = keys->element[i]->len;
    return keys->element[i]->str;
}
