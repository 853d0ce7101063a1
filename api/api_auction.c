/* api_auction.c - the auctions' routes: POST /auctions and POST /auctions/{id}/bid (writes
 * the market serves as orders, begun and ended here), GET /auctions/{id} and GET /auctions
 * (reads), and an auction as JSON.
 */
#include "api/api.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "api/api_impl.h"

static const char *const state_names[] = {"open", "sold", "unsold"}; /* by state */

/* Returns a new object for auction a: {"id","seller","item","quantity"?,"start_bid",
 * "buyout"?,"min_increment","ends_ms","state","bids","bidder"?,"bid"?,"fee"?} (quantity
 * for a lot of units; bidder and bid once there is one; fee once sold), or NULL on
 * out-of-memory. */
json_t *api__auction_json(const market_auction *a) {
    json_t *o =
        json_pack("{s:I, s:s, s:s, s:I, s:I, s:I, s:s, s:I}", "id", (json_int_t)a->id, "seller",
                  a->seller, "item", a->item, "start_bid", (json_int_t)a->start_bid,
                  "min_increment", (json_int_t)a->step, "ends_ms", (json_int_t)a->ends_ms, "state",
                  state_names[a->state], "bids", (json_int_t)a->bids);
    if (o && ((a->quantity && json_object_set_new(o, "quantity", json_integer(a->quantity)) < 0) ||
              (a->buyout && json_object_set_new(o, "buyout", json_integer(a->buyout)) < 0) ||
              (a->bidder[0] && (json_object_set_new(o, "bidder", json_string(a->bidder)) < 0 ||
                                json_object_set_new(o, "bid", json_integer(a->bid)) < 0)) ||
              (a->state == MARKET_AUCTION_SOLD &&
               json_object_set_new(o, "fee", json_integer(a->fee)) < 0))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Returns auction event ev (GET /events' "event: auction") as {"action","auction":{...}}:
 * "opened", "bid" (a bid taken: the auction's bid and bidder are its), "sold" or "unsold",
 * and the auction after it (api__auction_json(), less its buyout and cut), compact JSON in
 * a new malloc'd buffer (caller frees) of *len bytes, or NULL on out-of-memory. */
char *api_auction_event_text(const market_auction_event *ev, size_t *len) {
    json_t *a = api__auction_json(&ev->a);
    json_t *o = a ? json_pack("{s:s, s:o}", "action", ev->action, "auction", a) : NULL;
    char *text = o ? api__dump_body(o, len) : NULL;
    json_decref(o);
    return text;
}

/* ---- POST /auctions ---- */

/* POST /auctions {"seller","item","start_bid","duration_s"[,"quantity"][,"buyout"]
 * [,"min_increment"]}, begun: validated with its token and Idempotency-Key into d (a
 * MARKET_ORDER_AUCTION); the realm noted first for the sweepers (market_ending_note()).
 * Returns 1, or 0 when resp holds the answer. */
int api__begin_auction(market_conn *conn, const api_request *req, const char *realm,
                       const char *arg, api_response *resp, api_deferred *d) {
    static const api__field_spec spec[] = {
        {"seller", API__FIELD_ID, 1},           {"item", API__FIELD_ID, 1},
        {"start_bid", API__FIELD_PRICE, 1},     {"duration_s", API__FIELD_DURATION, 1},
        {"quantity", API__FIELD_QUANTITY, 0},   {"buyout", API__FIELD_PRICE, 0},
        {"min_increment", API__FIELD_PRICE, 0},
    };
    api__field_value v[7];
    (void)arg;
    json_t *root = api__order_begin(req, realm, spec, 7, v, MARKET_ORDER_AUCTION, 1, resp, d);
    if (!root) return 0;
    api__copy(d->item, sizeof d->item, v[1].id);
    d->order.item = d->item;
    d->order.price = v[2].price;
    d->order.duration_s = v[3].price;
    d->order.quantity = v[4].present ? v[4].price : 0;
    d->order.buyout = v[5].present ? v[5].price : 0;
    d->order.step = v[6].present ? v[6].price : 1;
    json_decref(root);
    if (d->order.buyout && d->order.buyout < d->order.price) {
        api__bad_request(resp, "field 'buyout' must be at least 'start_bid'");
        return 0;
    }
    int64_t q = d->order.quantity ? d->order.quantity : 1;
    if ((d->order.buyout ? d->order.buyout : MARKET_PRICE_MAX) > INT64_MAX / q) {
        api__bad_request(resp, "a lot's total at its highest bid (the buyout, else 10^12 a unit) "
                               "must fit a 64-bit integer");
        return 0;
    }
    return api__ending_noted(conn, realm, resp);
}

/* POST /auctions' answer: 201 {"status":"open","auction":{...},"seller_funds"}; a replay
 * knows the auction's id alone ({"status":"open","auction":{"id"}}). */
void api__end_auction(const api_deferred *d, api_response *resp) {
    const market_auction_result *r = &d->order.res.auction;
    if (api__end_refused(d, r->replayed, 0, resp)) return;
    json_t *a =
        r->replayed ? json_pack("{s:I}", "id", (json_int_t)r->a.id) : api__auction_json(&r->a);
    json_t *o = a ? json_pack("{s:s, s:o}", "status", "open", "auction", a) : NULL;
    if (o && !r->replayed &&
        json_object_set_new(o, "seller_funds", json_integer((json_int_t)r->funds)) < 0) {
        json_decref(o);
        o = NULL;
    }
    api__reply(resp, 201, o);
}

/* ---- POST /auctions/{id}/bid ---- */

/* POST /auctions/{id}/bid {"bidder","amount"}, begun: validated with its token and
 * Idempotency-Key into d (a MARKET_ORDER_AUCTION_BID). Returns 1, or 0 when resp holds
 * the answer. */
int api__begin_auction_bid(market_conn *conn, const api_request *req, const char *realm,
                           const char *arg, api_response *resp, api_deferred *d) {
    static const api__field_spec spec[] = {
        {"bidder", API__FIELD_ID, 1},
        {"amount", API__FIELD_PRICE, 1},
    };
    api__field_value v[2];
    int64_t id;
    (void)conn;
    if (!api__serial_ok(arg, "auction", "POST /auctions", &id, resp)) return 0;
    json_t *root = api__order_begin(req, realm, spec, 2, v, MARKET_ORDER_AUCTION_BID, 1, resp, d);
    if (!root) return 0;
    d->order.id = id;
    d->order.price = v[1].price;
    json_decref(root);
    return 1;
}

/* POST /auctions/{id}/bid's answer: 200 {"status":"leading"|"sold","auction":{...},
 * "bidder_funds"[,"outbid","refund"][,"trade_id"]}; 409 bid_too_low with "min_bid". A replay
 * knows the auction's id alone. */
void api__end_auction_bid(const api_deferred *d, api_response *resp) {
    const market_auction_result *r = &d->order.res.auction;
    int low = d->order.rc == MARKET_ERR_BID_TOO_LOW;
    if (api__end_refused(d, r->replayed, low ? r->min_bid : 0, resp)) return;
    int sold = !r->replayed && r->a.state == MARKET_AUCTION_SOLD;
    json_t *a =
        r->replayed ? json_pack("{s:I}", "id", (json_int_t)r->a.id) : api__auction_json(&r->a);
    json_t *o =
        a ? json_pack("{s:s, s:o}", "status", sold ? "sold" : "leading", "auction", a) : NULL;
    if (o && !r->replayed &&
        (json_object_set_new(o, "bidder_funds", json_integer((json_int_t)r->funds)) < 0 ||
         (r->outbid[0] && (json_object_set_new(o, "outbid", json_string(r->outbid)) < 0 ||
                           json_object_set_new(o, "refund", json_integer(r->refund)) < 0)))) {
        json_decref(o);
        o = NULL;
    }
    if (o && r->trade_id[0] && json_object_set_new(o, "trade_id", json_string(r->trade_id)) < 0) {
        json_decref(o);
        o = NULL;
    }
    api__reply(resp, 200, o);
}

/* ---- reads ---- */

/* GET /auctions/{id}: the auction, open or ended (an ended one is kept a week). */
void api__handle_auction(market_conn *conn, const api_request *req, const char *realm,
                         const char *arg, api_response *resp) {
    int64_t id;
    (void)req;
    if (!api__serial_ok(arg, "auction", "POST /auctions", &id, resp) ||
        api__conn_missing(conn, resp))
        return;
    market_auction a;
    int rc = market_auction_get(conn, realm, id, &a);
    api__reply_outcome(resp, rc, 200, rc == MARKET_OK ? api__auction_json(&a) : NULL);
}

/* GET /auctions?item=&seller=&ending_before=&limit=&cursor=: open auctions, soonest to end
 * first: {"auctions":[...],"total"?,"next_cursor"?} (total unknown with both item and
 * seller). The cursor is the next page's place among them: an auction that ends meanwhile
 * may shift a later page by one. */
void api__handle_auctions(market_conn *conn, const api_request *req, const char *realm,
                          const char *arg, api_response *resp) {
    (void)arg;
    market_auction_query q = {0};
    const char *names[2] = {"item", "seller"};
    const char **ids[2] = {&q.item, &q.seller};
    for (int i = 0; i < 2; i++) {
        *ids[i] = api__query_arg(req, names[i]);
        if (*ids[i] && !market_id_valid(*ids[i])) {
            api__bad_query(resp, names[i], "must match " API__ID_RULE);
            return;
        }
    }
    size_t before = 0, cursor = 0;
    if (api__query_size(req, "limit", API__LIMIT_DEFAULT, 1, MARKET_AUCTIONS_PAGE_MAX, &q.limit) <
            0 ||
        api__query_size(req, "ending_before", 0, 1, (size_t)API__TIME_MAX, &before) < 0 ||
        api__query_size(req, "cursor", 0, 1, SIZE_MAX / 2, &cursor) < 0) {
        api__bad_request(resp, "limit must be 1..1000, ending_before a time in Unix ms, cursor "
                               "a next_cursor as a page gave it");
        return;
    }
    q.ending_before_ms = (int64_t)before;
    q.offset = cursor;
    if (api__conn_missing(conn, resp)) return;
    market_auction_page p;
    int rc = market_auctions_find(conn, realm, &q, &p);
    json_t *o = NULL, *arr = rc == MARKET_OK ? json_array() : NULL;
    for (size_t i = 0; arr && i < p.n; i++)
        if (json_array_append_new(arr, api__auction_json(&p.auctions[i])) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    if (arr && (o = json_pack("{s:o}", "auctions", arr)) != NULL &&
        ((!(q.item && q.seller) && json_object_set_new(o, "total", json_integer(p.total)) < 0) ||
         (p.next_offset &&
          json_object_set_new(o, "next_cursor", json_sprintf("%zu", p.next_offset)) < 0))) {
        json_decref(o);
        o = NULL;
    }
    market_auction_page_free(&p);
    if (rc == MARKET_OK && !o) {
        api__reply(resp, 200, NULL); /* out of memory */
        return;
    }
    api__reply_outcome(resp, rc, 200, o);
}
