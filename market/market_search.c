/* market_search.c - searching a realm's market through its indexes (market_search()).
 *
 * One pipeline per page, over the store layer: ZRANGE <index> <start> <stop> BYLEX [REV]
 * LIMIT 0 <limit + 1> for the page (one more than asked tells whether a next page
 * exists), ZLEXCOUNT of the whole match for its total, and with a seller EXISTS of the
 * player's hash. A search naming both item and seller reads that one listing's score in
 * market:{r} instead. Which index and which bounds is decided by market_index.c; the
 * indexes are kept in the same MULTI/EXEC as every listing's change, so what a page
 * shows is what market:{r} held at that instant. No lock is taken.
 */
#include "market/market.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market/market_store.h"

/* Reads a ZRANGE BYLEX reply r of index kind (at most limit + 1 members) into out: the
 * first limit members as listings, and the next page's cursor when there is one more.
 * Returns MARKET_OK, MARKET_ERR_NOMEM, or MARKET_ERR_STORE when a member is not one of
 * the index's (its reason in c's errstr). */
static int page_read(market_conn *c, const char *key, int kind, const redisReply *r, size_t limit,
                     market_search_result *out) {
    if (r->type != REDIS_REPLY_ARRAY) return market__fail_reply(c, "search refused", r);
    size_t n = r->elements < limit ? r->elements : limit;
    if (n && !(out->listings = calloc(n, sizeof *out->listings))) return MARKET_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_STRING ||
            market__idx_decode(kind, e->str, e->len, &out->listings[i]) < 0)
            return market__fail(c,
                                "search index %s holds a malformed member (rebuild it: "
                                "market-seed --reindex)",
                                key);
        out->n++;
    }
    if (r->elements > limit) market_cursor_make(&out->listings[n - 1], out->next_cursor);
    return MARKET_OK;
}

/* Searches realm's market for the listings that match q (see market_search_query), in
 * price order, one page: fills *out (see market_search_result; free its listings with
 * market_search_result_cleanup(); after a failure *out is empty). Listings of equal price come in
 * the order of their index member. A page costs O(log N + q->limit) in Redis, however
 * deep the cursor. Returns MARKET_OK, or MARKET_ERR_INVALID (a bad realm or query:
 * market_search_check() says which part), MARKET_ERR_STORE (Redis failed, or an index
 * holds what no write of ours puts there; c's errstr says which), MARKET_ERR_NOMEM. */
int market_search(market_conn *c, const char *realm, const market_search_query *q,
                  market_search_result *out) {
    if (!out) return MARKET_ERR_INVALID;
    memset(out, 0, sizeof *out);
    market__search_plan p;
    if (!c || !market_id_valid(realm) || market__search_plan_make(q, &p) < 0)
        return MARKET_ERR_INVALID;
    market__realm rl;
    market__idx ix;
    market__realm_init(&rl, realm);
    market__idx_init(&ix, realm);
    const char *key = ix.key[p.kind];
    char member[MARKET__MEMBER_MAX], k_user[MARKET__KEY_MAX];
    market__cmd rd[3];
    redisReply *rep[3] = {0};
    size_t nc = 0;
    if (p.point) {
        snprintf(member, sizeof member, "%s.%s", q->item, q->seller);
        market__cmd_set(&rd[nc++], 3, "ZSCORE", rl.market, member);
    } else {
        market__cmd *z = &rd[nc++];
        market__cmd_set(z, 8, "ZRANGE", key, p.start, p.stop, "BYLEX", "LIMIT", "0", p.count);
        if (p.desc) { /* ZRANGE key start stop BYLEX REV LIMIT 0 n */
            memmove(&z->argv[5], &z->argv[4], 4 * sizeof *z->argv);
            memmove(&z->len[5], &z->len[4], 4 * sizeof *z->len);
            z->argv[5] = "REV";
            z->len[5] = 3;
            z->argc = 9;
        }
        market__cmd_set(&rd[nc++], 4, "ZLEXCOUNT", key, p.min, p.max);
    }
    size_t i_user = nc;
    if (q->seller) {
        market__key(k_user, sizeof k_user, "users", realm, q->seller);
        market__cmd_set(&rd[nc++], 2, "EXISTS", k_user);
    }
    int rc = market__route(c, realm);
    if (rc == MARKET_OK) rc = market__pipeline(c, rd, nc, rep);
    if (rc < 0) return rc;
    const redisReply *err = market__reply_error(rep, nc);
    if (err) {
        rc = market__fail_reply(c, "search refused", err);
        goto out;
    }
    if (q->seller) {
        if (rep[i_user]->type != REDIS_REPLY_INTEGER) {
            rc = market__fail_reply(c, "search refused", rep[i_user]);
            goto out;
        }
        out->seller_exists = rep[i_user]->integer == 1;
    }
    if (p.point) {
        int64_t price = market__reply_price(rep[0]);
        if (price == MARKET__PRICE_UNREADABLE) {
            rc = market__fail(c, "the price of %s in %s is unreadable", member, rl.market);
            goto out;
        }
        if (!market__search_point(&p, price, &out->total)) goto out;
        if (!(out->listings = calloc(1, sizeof *out->listings))) {
            rc = MARKET_ERR_NOMEM;
            goto out;
        }
        snprintf(out->listings[0].item, sizeof out->listings[0].item, "%s", q->item);
        snprintf(out->listings[0].seller, sizeof out->listings[0].seller, "%s", q->seller);
        out->listings[0].price = price;
        out->n = 1;
        goto out;
    }
    if (rep[1]->type != REDIS_REPLY_INTEGER || rep[1]->integer < 0) {
        rc = market__fail_reply(c, "search refused", rep[1]);
        goto out;
    }
    out->total = (size_t)rep[1]->integer;
    rc = page_read(c, key, p.kind, rep[0], q->limit, out);
out:
    if (rc == MARKET_OK) rc = market__units_fill(c, &rl, out->listings, out->n);
    market__replies_free(rep, nc);
    if (rc < 0) market_search_result_cleanup(out);
    return rc;
}

/* Frees r's listings and empties it; NULL is a no-op. This function can't fail. */
void market_search_result_cleanup(market_search_result *r) {
    if (!r) return;
    free(r->listings);
    memset(r, 0, sizeof *r);
}
