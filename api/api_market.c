/* api_market.c - the market's reads and settings: GET /market (listings
 * and search), GET /players/{id} and /players/{id}/listings, GET and PUT
 * /config (the realm's cut of every sale), and GET /healthz.
 *
 * Above api_common.c and api_auth.c; called by api_route.c's route table.
 */
#include "api/api.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/api_impl.h"

#define API_LIMIT_MAX 1000
#define API_OFFSET_MAX 1000000000
#define API_PLAYER_LISTINGS 100 /* GET /players/{id} shows this many of the player's listings */

_Static_assert(API_LIMIT_MAX == MARKET_SEARCH_LIMIT_MAX, "a page's limit is the market's");

/* Returns a new {"id","name","funds","inventory":[...],"stacks":{item:count}}
 * object for p, or NULL on out-of-memory. */
static json_t *player_body(const market_player *p) {
    json_t *o = json_object(), *inv = json_array(), *stacks = json_object();
    if (!o || !inv || !stacks) goto fail;
    for (size_t i = 0; i < p->n_stacks; i++)
        if (json_object_set_new(stacks, p->stacks[i].item,
                                json_integer((json_int_t)p->stacks[i].count)) < 0)
            goto fail;
    for (size_t i = 0; i < p->n_inventory; i++)
        if (json_array_append_new(inv, api__text_new(p->inventory[i])) < 0) goto fail;
    if (json_object_set_new(o, "id", api__text_new(p->id)) < 0 ||
        json_object_set_new(o, "name", api__text_new(p->name)) < 0 ||
        json_object_set_new(o, "funds", json_integer((json_int_t)p->funds)) < 0 ||
        json_object_set_new(o, "escrow", json_integer((json_int_t)p->escrow)) < 0)
        goto fail;
    if (api__object_steal(o, "inventory", &inv) < 0 ||
        api__object_steal(o, "stacks", &stacks) < 0)
        goto fail;
    return o;
fail:
    json_decref(stacks);
    json_decref(inv);
    json_decref(o);
    return NULL;
}

/* Returns a new array of {"item","seller","price"} objects for l[0..n), or NULL on
 * out-of-memory. */
static json_t *listings_array(const market_listing *l, size_t n) {
    json_t *arr = json_array();
    if (!arr) return NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_object();
        if (!e || json_object_set_new(e, "item", api__text_new(l[i].item)) < 0 ||
            json_object_set_new(e, "seller", api__text_new(l[i].seller)) < 0 ||
            json_object_set_new(e, "price", json_integer((json_int_t)l[i].price)) < 0 ||
            /* units of a stackable good: how many; a unique item has no quantity */
            (l[i].stack &&
             json_object_set_new(e, "quantity", json_integer((json_int_t)l[i].quantity)) < 0) ||
            /* a listing that ends: when (the store's clock) */
            (l[i].ends_ms &&
             json_object_set_new(e, "ends_ms", json_integer((json_int_t)l[i].ends_ms)) < 0)) {
            json_decref(e);
            goto fail;
        }
        if (json_array_append_new(arr, e) < 0) goto fail; /* e is released even then */
    }
    return arr;
fail:
    json_decref(arr);
    return NULL;
}

/* Returns a new page of listings, {["id",]"total"[,"offset"],"limit","listings":[...],
 * "next_cursor"}: "id" only when id is not NULL, "offset" only when offset >= 0,
 * next_cursor null when cursor is "". NULL on out-of-memory. */
static json_t *page_body(const char *id, const market_listing *l, size_t n, size_t total,
                         long long offset, size_t limit, const char *cursor) {
    json_t *o = json_object(), *arr = listings_array(l, n);
    if (!o || !arr) goto fail;
    if (total > (size_t)INT64_MAX) total = (size_t)INT64_MAX;
    if ((id && json_object_set_new(o, "id", api__text_new(id)) < 0) ||
        json_object_set_new(o, "total", json_integer((json_int_t)total)) < 0 ||
        (offset >= 0 && json_object_set_new(o, "offset", json_integer((json_int_t)offset)) < 0) ||
        json_object_set_new(o, "limit", json_integer((json_int_t)limit)) < 0)
        goto fail;
    return api__page_end(o, "listings", &arr, cursor);
fail:
    json_decref(arr);
    json_decref(o);
    return NULL;
}

/* Reads the query arguments of a search into q: limit (1..API_LIMIT_MAX, default
 * API__LIMIT_DEFAULT) and cursor, and with filters also item, seller, item_prefix,
 * min_price, max_price (1..MARKET_PRICE_MAX) and sort (price or -price); the strings are
 * borrowed from req. Returns 1, or 0 with resp holding the 400 that names the first bad
 * one. */
static int search_query(const api_request *req, int filters, market_search_query *q,
                        api_response *resp) {
    static const char *const prices[2] = {"min_price", "max_price"};
    *q = (market_search_query){0};
    if (api__query_size(req, "limit", API__LIMIT_DEFAULT, 1, API_LIMIT_MAX, &q->limit) < 0) {
        api__bad_query(resp, "limit", "must be an integer in 1..1000");
        return 0;
    }
    static const char *const ids[3] = {"item", "seller", "item_prefix"};
    const char **id_of[3] = {&q->item, &q->seller, &q->item_prefix};
    for (int i = 0; filters && i < 3; i++) {
        const char *v = api__query_arg(req, ids[i]);
        if (v && !market_id_valid(v)) {
            api__bad_query(resp, ids[i], "must match " API__ID_RULE);
            return 0;
        }
        *id_of[i] = v;
    }
    for (int i = 0; filters && i < 2; i++) {
        size_t v = 0;
        if (api__query_size(req, prices[i], 0, 1, (size_t)MARKET_PRICE_MAX, &v) < 0) {
            api__bad_query(resp, prices[i], "must be an integer in 1..1000000000000");
            return 0;
        }
        *(i ? &q->max_price : &q->min_price) = (int64_t)v;
    }
    const char *sort = filters ? api__query_arg(req, "sort") : NULL;
    if (sort && strcmp(sort, "price") != 0 && strcmp(sort, "-price") != 0) {
        api__bad_query(resp, "sort", "must be 'price' or '-price'");
        return 0;
    }
    q->desc = sort && sort[0] == '-';
    q->cursor = api__query_arg(req, "cursor");
    const char *field, *what;
    if (q->cursor && !q->cursor[0]) {
        api__bad_query(resp, "cursor", "must not be empty (leave it out for the first page)");
        return 0;
    }
    if (market_search_check(q, &field, &what) < 0) {
        api__bad_query(resp, field, what);
        return 0;
    }
    return 1;
}

/* GET /market: a search (item, seller, min_price, max_price, sort, limit, cursor; or
 * item_prefix, limit, cursor), or without any of item, item_prefix, seller, prices, sort and
 * cursor the whole market by rank (limit, offset), as before searches. */
void api__handle_market(market_conn *conn, const api_request *req, const char *realm,
                        const char *arg, api_response *resp) {
    static const char *const searching[] = {"item", "item_prefix", "seller", "min_price",
                                            "max_price", "sort"};
    size_t offset = 0;
    char why[API__WHY_MAX], cursor[MARKET_CURSOR_MAX + 1] = "";
    (void)arg;
    market_search_query q;
    if (!search_query(req, 1, &q, resp)) return;
    const char *off = api__query_arg(req, "offset");
    if (api__query_size(req, "offset", 0, 0, API_OFFSET_MAX, &offset) < 0) {
        api__why(why, sizeof why, "query parameter 'offset' must be an integer in 0..%d",
                 API_OFFSET_MAX);
        api__bad_request(resp, why);
        return;
    }
    int search = q.cursor != NULL;
    for (size_t i = 0; i < sizeof searching / sizeof *searching; i++)
        search |= api__query_arg(req, searching[i]) != NULL;
    if (off && q.cursor) {
        api__bad_request(resp, "query parameters 'offset' and 'cursor' cannot be combined: page "
                         "with 'cursor' alone");
        return;
    }
    if (off && search) {
        api__bad_request(resp, "query parameter 'offset' cannot be combined with 'item', "
                         "'item_prefix', 'seller', 'min_price', 'max_price' or 'sort': page with "
                         "'cursor'");
        return;
    }
    if (api__conn_missing(conn, resp)) return;
    if (search) {
        market_search_result r;
        int rc = market_search(conn, realm, &q, &r);
        api__reply_outcome(
            resp, rc, 200,
            rc == MARKET_OK ? page_body(NULL, r.listings, r.n, r.total, -1, q.limit, r.next_cursor)
                            : NULL);
        market_search_result_cleanup(&r);
        return;
    }
    market_listing *l = NULL;
    size_t n = 0, total = 0;
    int rc = market_listings(conn, realm, offset, q.limit, &l, &n, &total);
    if (rc == MARKET_OK && n && offset + n < total) /* the same order: go on with a cursor */
        market_cursor_make(&l[n - 1], cursor);
    api__reply_outcome(
        resp, rc, 200,
        rc == MARKET_OK ? page_body(NULL, l, n, total, (long long)offset, q.limit, cursor) : NULL);
    free(l);
}

/* Adds "listings" (the first page of a search of the player's listings) and
 * "listings_total" to o (stolen: released on failure). Returns o, or NULL on
 * out-of-memory. */
static json_t *with_listings(json_t *o, const market_search_result *r) {
    if (!o) return NULL;
    json_t *arr = listings_array(r->listings, r->n);
    size_t total = r->total > (size_t)INT64_MAX ? (size_t)INT64_MAX : r->total;
    if (!arr || json_object_set_new(o, "listings", arr) < 0 || /* steals arr, even then */
        json_object_set_new(o, "listings_total", json_integer((json_int_t)total)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Adds to o (released on failure) "auctions", the ids of the open auctions the player
 * sells, and "bids", those whose highest bid is its, soonest to end first. */
static json_t *with_auctions(json_t *o, const market_player_auctions_result *a) {
    json_t *s = json_array(), *b = json_array();
    for (size_t i = 0; s && i < a->n_selling; i++)
        if (json_array_append_new(s, json_integer((json_int_t)a->selling[i])) < 0) break;
    for (size_t i = 0; b && i < a->n_leading; i++)
        if (json_array_append_new(b, json_integer((json_int_t)a->leading[i])) < 0) break;
    if (!o || !s || !b || json_array_size(s) != a->n_selling ||
        json_array_size(b) != a->n_leading || api__object_steal(o, "auctions", &s) < 0 ||
        api__object_steal(o, "bids", &b) < 0) {
        json_decref(s);
        json_decref(b);
        json_decref(o);
        return NULL;
    }
    return o;
}

/* GET /players/{id}: the player, what it lists (its first API_PLAYER_LISTINGS listings,
 * cheapest first, and how many it lists), and its open auctions and leading bids. */
void api__handle_player(market_conn *conn, const api_request *req, const char *realm,
                        const char *id, api_response *resp) {
    (void)req;
    if (!api__id_ok(id, "player", resp)) return;
    api__copy(resp->player, sizeof resp->player, id);
    if (api__conn_missing(conn, resp)) return;
    market_player *p = NULL;
    market_search_result r = {0};
    market_search_query q = {.seller = id, .limit = API_PLAYER_LISTINGS};
    static _Thread_local market_player_auctions_result a; /* 16 KB: not on the stack */
    int rc = market_player_get(conn, realm, id, &p);
    if (rc == MARKET_OK) rc = market_search(conn, realm, &q, &r);
    if (rc == MARKET_OK) rc = market_player_auctions(conn, realm, id, &a);
    api__reply_outcome(resp, rc, 200,
                       rc == MARKET_OK ? with_auctions(with_listings(player_body(p), &r), &a)
                                       : NULL);
    market_search_result_cleanup(&r);
    market_player_free(p);
}

/* GET /players/{id}/listings?limit=&cursor=: the player's listings, cheapest first, a page
 * at a time; 404 player_not_found for a player that does not exist. */
void api__handle_player_listings(market_conn *conn, const api_request *req, const char *realm,
                                 const char *id, api_response *resp) {
    if (!api__id_ok(id, "player", resp)) return;
    api__copy(resp->player, sizeof resp->player, id);
    market_search_query q;
    if (!search_query(req, 0, &q, resp)) return;
    q.seller = id;
    const char *field, *what;
    if (market_search_check(&q, &field, &what) < 0) { /* a cursor of another player's */
        api__bad_query(resp, field, what);
        return;
    }
    if (api__conn_missing(conn, resp)) return;
    market_search_result r;
    int rc = market_search(conn, realm, &q, &r);
    if (rc == MARKET_OK && !r.seller_exists) rc = MARKET_ERR_NO_PLAYER;
    api__reply_outcome(resp, rc, 200,
                       rc == MARKET_OK
                           ? page_body(id, r.listings, r.n, r.total, -1, q.limit, r.next_cursor)
                           : NULL);
    market_search_result_cleanup(&r);
}

/* Returns a new array of {"price","units","orders"} for v[0..n), or NULL
 * on out-of-memory. */
static json_t *levels_array(const market_level *v, size_t n) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++)
        if (json_array_append_new(arr, json_pack("{s:I, s:I, s:I}", "price", (json_int_t)v[i].price,
                                                 "units", (json_int_t)v[i].units, "orders",
                                                 (json_int_t)v[i].orders)) < 0) {
            json_decref(arr);
            return NULL;
        }
    return arr;
}

/* GET /items/{item}/book?depth=N (1..MARKET_BOOK_DEPTH_MAX, 10 when not
 * given): public. The buy orders and the listings of the item by price
 * level, best first; "truncated" when a side read MARKET_BOOK_SCAN entries
 * and stopped there. */
void api__handle_item_book(market_conn *conn, const api_request *req, const char *realm,
                           const char *item, api_response *resp) {
    size_t depth;
    if (!api__id_ok(item, "item", resp)) return;
    if (api__query_size(req, "depth", 10, 1, MARKET_BOOK_DEPTH_MAX, &depth) < 0) {
        api__bad_query(resp, "depth", "must be an integer in 1..100");
        return;
    }
    if (api__conn_missing(conn, resp)) return;
    market_book *b = malloc(sizeof *b);
    int rc = b ? market_book_get(conn, realm, item, depth, b) : MARKET_ERR_NOMEM;
    json_t *body = NULL;
    if (rc == MARKET_OK) {
        json_t *bids = levels_array(b->bids, b->n_bids), *asks = levels_array(b->asks, b->n_asks);
        body = json_pack("{s:s, s:o*, s:o*, s:b}", "item", item, "bids", bids, "asks", asks,
                         "truncated", b->bids_cut || b->asks_cut);
        if (body && (!bids || !asks)) {
            json_decref(body);
            body = NULL;
        }
    }
    api__reply_outcome(resp, rc, 200, body);
    free(b);
}

/* GET /players/{id}/orders: the player's open buy orders, oldest first; the
 * player's token or the admin's. */
void api__handle_player_orders(market_conn *conn, const api_request *req, const char *realm,
                               const char *id, api_response *resp) {
    if (!api__id_ok(id, "player", resp)) return;
    api__copy(resp->player, sizeof resp->player, id);
    api__reader rd;
    if (!api__reader_get(req, realm, &rd, resp) ||
        (!rd.admin && !api__authorized(req, realm, id, resp)) || api__conn_missing(conn, resp))
        return;
    market_bid *v = NULL;
    size_t n = 0;
    int rc = market_player_orders(conn, realm, id, &v, &n);
    json_t *arr = rc == MARKET_OK ? json_array() : NULL;
    for (size_t i = 0; arr && i < n; i++)
        if (json_array_append_new(
                arr, json_pack("{s:I, s:s, s:I, s:I, s:I, s:I}", "order_id", (json_int_t)v[i].id,
                               "item", v[i].item, "price", (json_int_t)v[i].price, "quantity",
                               (json_int_t)v[i].quantity, "left", (json_int_t)v[i].left, "escrow",
                               (json_int_t)(v[i].left * v[i].price))) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    api__reply_outcome(resp, rc, 200,
                       arr ? json_pack("{s:s, s:o}", "player", id, "orders", arr) : NULL);
    free(v);
}

/* GET /healthz: 200 {"status":"ok"} when the store can serve purchases
 * (market_health()); otherwise 503 store_unavailable whose detail says why,
 * with "status":"unavailable" as well, and Retry-After. */
void api__handle_healthz(market_conn *conn, const api_request *req, const char *realm,
                         const char *arg, api_response *resp) {
    (void)req;
    (void)realm;
    (void)arg;
    if (api__conn_missing(conn, resp)) return;
    char why[API__WHY_MAX];
    int rc = market_health(conn, why, sizeof why);
    if (rc == MARKET_OK) {
        api__reply(resp, 200, json_pack("{s:s}", "status", "ok"));
        return;
    }
    if (rc == MARKET_ERR_NOMEM) {
        api__reply_market(rc, 0, resp);
        return;
    }
    json_t *body = api__error_body("store_unavailable", why[0] ? why : market_strerror(rc));
    if (body && json_object_set_new(body, "status", json_string("unavailable")) < 0) {
        json_decref(body);
        body = NULL;
    }
    resp->retry_after_s = 1;
    snprintf(resp->error, sizeof resp->error, "store_unavailable");
    api__reply(resp, 503, body); /* any failure: the store cannot serve purchases */
}

/* GET /config: the realm's settings, public (players see the fees before
 * they sell). PUT /config {"fee_bps", "list_fee_bps"?, "house"?,
 * "list_duration_s"?}: the admin sets them (what is left out: 0, and the
 * house game); the house must be a player of the realm (404
 * player_not_found). Both answer {"realm","fee_bps","list_fee_bps","house",
 * "list_duration_s"}. */
void api__handle_settings(market_conn *conn, const api_request *req, const char *realm,
                          const char *arg, api_response *resp) {
    (void)arg;
    int put = strcmp(req->method, "PUT") == 0, rc;
    market_settings st = {0};
    if (put) {
        static const api__field_spec spec[] = {{"fee_bps", API__FIELD_BPS, 1},
                                               {"house", API__FIELD_ID, 0},
                                               {"list_fee_bps", API__FIELD_BPS, 0},
                                               {"list_duration_s", API__FIELD_SECONDS, 0}};
        api__field_value v[4];
        json_t *root = api__body_parse(req, spec, 4, v, resp);
        if (!root) return;
        st.fee_bps = v[0].price;
        st.list_fee_bps = v[2].present ? v[2].price : 0;
        st.list_duration_s = v[3].present ? v[3].price : 0;
        api__copy(st.house, sizeof st.house, v[1].present ? v[1].id : MARKET_SALE_HOUSE);
        json_decref(root);
        if (!api__admin(req, resp) || api__conn_missing(conn, resp)) return;
        rc = market_settings_set(conn, realm, &st);
        if (rc == MARKET_ERR_NO_PLAYER) {
            api__error_reply_full(resp, 404, "player_not_found",
                                  "the house is not a player of the realm", 0, NULL);
            resp->market_rc = rc;
            return;
        }
    } else {
        if (api__conn_missing(conn, resp)) return;
        rc = market_settings_get(conn, realm, &st);
    }
    api__reply_outcome(resp, rc, 200,
                       rc == MARKET_OK
                           ? json_pack("{s:s,s:I,s:I,s:s,s:I}", "realm", realm, "fee_bps",
                                       (json_int_t)st.fee_bps, "list_fee_bps",
                                       (json_int_t)st.list_fee_bps, "house", st.house,
                                       "list_duration_s", (json_int_t)st.list_duration_s)
                           : NULL);
}
