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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market/market_store.h"

/* Reads one entry [id, [field, value...]] into *ch. Returns 0, or -1 when
 * it is not a change this file wrote. */
static int parse_change(const redisReply *e, market_change *ch) {
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

/* Reads up to limit (1..MARKET_TRADES_PAGE_MAX) listing changes of realm
 * made after entry id after (NULL or "": from the oldest kept), oldest
 * first. Returns MARKET_OK with *out a new array of *n changes (caller
 * frees; NULL when none), or ERR_INVALID, ERR_STORE, ERR_NOMEM. */
int market_changes_after(market_conn *c, const char *realm, const char *after, size_t limit,
                         market_change **out, size_t *n) {
    if (!out || !n) return MARKET_ERR_INVALID;
    *out = NULL;
    *n = 0;
    if (!market_id_valid(realm)) return MARKET_ERR_INVALID;
    market__realm rl;
    market__realm_init(&rl, realm);
    redisReply *r = NULL;
    int rc = market__stream_after(c, realm, rl.changes, after, limit, &r);
    if (rc < 0) return rc;
    if (r->type != REDIS_REPLY_ARRAY) {
        rc = market__fail(c, "the listing changes of realm %s are unreadable", realm);
    } else if (r->elements > 0) {
        size_t k = r->elements < limit ? r->elements : limit;
        market_change *v = calloc(k, sizeof *v);
        if (!v) rc = MARKET_ERR_NOMEM;
        for (size_t i = 0; v && i < k; i++)
            if (parse_change(r->element[i], &v[i]) < 0) {
                free(v);
                v = NULL;
                rc = market__fail(c, "the listing changes of realm %s are unreadable", realm);
            }
        if (v) {
            *out = v;
            *n = k;
        }
    }
    freeReplyObject(r);
    return rc;
}

/* Reads the id of the latest listing change of realm into id ("" when
 * none). Returns MARKET_OK, ERR_INVALID or ERR_STORE. */
int market_change_last(market_conn *c, const char *realm, char id[MARKET_TRADE_ID_MAX + 1]) {
    if (!id) return MARKET_ERR_INVALID;
    id[0] = '\0';
    if (!c || !market_id_valid(realm)) return MARKET_ERR_INVALID;
    market__realm rl;
    market__realm_init(&rl, realm);
    market__buf b = {0};
    market__rd_stream_last(&b, rl.changes);
    redisReply *r = NULL;
    int rc = market__read_one(c, realm, &b, &r);
    market__buf_free(&b);
    if (rc < 0) return rc;
    market_change ch;
    if (r->type != REDIS_REPLY_ARRAY || (r->elements == 1 && parse_change(r->element[0], &ch) < 0))
        rc = market__fail(c, "the listing changes of realm %s are unreadable", realm);
    else if (r->elements == 1)
        memcpy(id, ch.id, sizeof ch.id);
    freeReplyObject(r);
    return rc;
}
