/* api_route.c - the HTTP JSON API: routing, and the entry points server/ calls.
 *
 * api_handle() takes one request as plain C (method, path, body, a lookup
 * hook for query arguments) and fills one response (status, malloc'd JSON
 * body, optional Retry-After and Allow). server/ owns the sockets; this file
 * owns every byte of JSON that crosses the wire.
 *
 * DESIGN
 * Routing is a table: path (exact, or a prefix followed by one id segment),
 * its method, and the Allow value for a 405: a route serves every method
 * its Allow names (its handler tells them apart when there are two). A path that matches
 * no row is 404 not_found; a matching path with another method is 405. HEAD is
 * served like GET on GET routes (libmicrohttpd drops the body of a HEAD reply),
 * so Allow says "GET, HEAD" there. A trailing slash is a different path (404),
 * and so is "/players/" with an empty id or an id followed by more segments.
 * A write the market serves as an order (POST /purchase, /list, /unlist,
 * /sales/{id}/buy, /orders, /sell, DELETE /orders/{id}, the auctions' and the direct
 * trades' writes) also has a begin and an end step in its
 * row: begin validates the request into an api_deferred (one market_order), end writes the answer
 * from the order's outcome. Those routes, and only those, are deferred by the event-loop server
 * (api_route_deferrable(), api_handle_begin(), api_deferred_submit(), api_deferred_end()), which
 * thus matches no path and knows no kind of order itself. The paths
 * server/ answers on its own, /metrics and the event streams, are named
 * here too (api_endpoint_find()).
 *
 * The handlers live by resource, each file calling only the ones below it:
 * api_purchase.c (purchases, listings, buy orders, flash sales),
 * api_market.c (market, search, players, books, health), api_trades.c (trades, event stream JSON),
 * api_auction.c (auctions), api_direct.c (direct trades)
 * over api_auth.c (tokens) over api_common.c (status table, strict bodies, replies). This file, the
 * top, holds the route table that names them.
 */
#include "api/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_impl.h"

/* ---- routing ---- */

typedef struct api_route {
    const char *path; /* the exact path, or with prefix: everything before the id */
    int prefix;       /* 1: path is followed by one non-empty segment, the handler's arg */
    const char *suffix; /* prefix routes: what follows the id segment ("/trades"), or NULL */
    int realm;        /* 1: also served under /realms/{realm} */
    const char *method;
    const char *allow; /* the Allow header of a 405 */
    api__handler *handle; /* NULL for a deferrable route (begin) */
    api__beginner *begin; /* non-NULL: a write served as a market_order, deferred (see
                             api_handle_begin()) or run at once (api_handle()) */
    api__ender *end;      /* with begin: answers it (api_deferred_end()) */
} api_route;

static const api_route api_routes[API_ROUTES] = {
    {"/purchase", 0, NULL, 1, "POST", "POST", NULL, api__begin_purchase, api__end_purchase},
    {"/list", 0, NULL, 1, "POST", "POST", NULL, api__begin_list, api__end_list},
    {"/unlist", 0, NULL, 1, "POST", "POST", NULL, api__begin_unlist, api__end_unlist},
    {"/players/", 1, NULL, 1, "GET", "GET, HEAD", api__handle_player},
    {"/market", 0, NULL, 1, "GET", "GET, HEAD", api__handle_market},
    {"/healthz", 0, NULL, 0, "GET", "GET, HEAD", api__handle_healthz},
    {"/players/", 1, "/listings", 1, "GET", "GET, HEAD", api__handle_player_listings},
    {"/trades/direct", 0, NULL, 1, "POST", "POST", NULL, api__begin_direct, api__end_direct},
    {"/trades/direct/", 1, NULL, 1, "GET", "GET, HEAD", api__handle_direct},
    {"/trades/direct/", 1, "/accept", 1, "POST", "POST", NULL, api__begin_direct_accept,
     api__end_direct_close},
    {"/trades/direct/", 1, "/cancel", 1, "POST", "POST", NULL, api__begin_direct_cancel,
     api__end_direct_close},
    {"/trades/", 1, NULL, 1, "GET", "GET, HEAD", api__handle_trade},
    {"/players/", 1, "/trades", 1, "GET", "GET, HEAD", api__handle_player_trades},
    {"/items/", 1, "/trades", 1, "GET", "GET, HEAD", api__handle_item_trades},
    {"/sales", 0, NULL, 1, "POST", "POST", api__handle_sale_create},
    {"/sales/", 1, NULL, 1, "GET", "GET, HEAD", api__handle_sale_get},
    {"/sales/", 1, "/buy", 1, "POST", "POST", NULL, api__begin_sale_buy, api__end_sale_buy},
    {"/config", 0, NULL, 1, "GET", "GET, HEAD, PUT", api__handle_settings},
    {"/items/", 1, "/history", 1, "GET", "GET, HEAD", api__handle_item_history},
    {"/orders", 0, NULL, 1, "POST", "POST", NULL, api__begin_bid, api__end_bid},
    {"/orders/", 1, NULL, 1, "DELETE", "DELETE", NULL, api__begin_cancel, api__end_cancel},
    {"/items/", 1, "/book", 1, "GET", "GET, HEAD", api__handle_item_book},
    {"/players/", 1, "/orders", 1, "GET", "GET, HEAD", api__handle_player_orders},
    {"/players/", 1, "/direct", 1, "GET", "GET, HEAD", api__handle_player_direct},
    {"/sell", 0, NULL, 1, "POST", "POST", NULL, api__begin_sell, api__end_sell},
    {"/auctions", 0, NULL, 1, "GET", "GET, HEAD, POST", api__handle_auctions},
    {"/auctions", 0, NULL, 1, "POST", "GET, HEAD, POST", NULL, api__begin_auction,
     api__end_auction},
    {"/auctions/", 1, NULL, 1, "GET", "GET, HEAD", api__handle_auction},
    {"/auctions/", 1, "/bid", 1, "POST", "POST", NULL, api__begin_auction_bid,
     api__end_auction_bid},
};

/* Names of the routes as logs and metrics show them: two rows of one path (one for each
 * method) have one name, given as the first's (route_name()). */
static const char *const api_route_names[API_ROUTES] = {
    "/purchase",
    "/list",
    "/unlist",
    "/players/{id}",
    "/market",
    "/healthz",
    "/players/{id}/listings",
    "/trades/direct",
    "/trades/direct/{id}",
    "/trades/direct/{id}/accept",
    "/trades/direct/{id}/cancel",
    "/trades/{id}",
    "/players/{id}/trades",
    "/items/{item}/trades",
    "/sales",
    "/sales/{id}",
    "/sales/{id}/buy",
    "/config",
    "/items/{item}/history",
    "/orders",
    "/orders/{id}",
    "/items/{item}/book",
    "/players/{id}/orders",
    "/players/{id}/direct",
    "/sell",
    "/auctions",
    "/auctions",
    "/auctions/{id}",
    "/auctions/{id}/bid",
};

/* Returns route i's name (static), or NULL outside 0..API_ROUTES-1. */
const char *api_route_name(int i) { return i >= 0 && i < API_ROUTES ? api_route_names[i] : NULL; }

/* The name of route row r: the first row's of its path (static). */
static const char *route_name(const api_route *r) {
    return api_route_name(api_route_index(api_route_names[r - api_routes]));
}

/* Returns the index of a name that api_route_name() gave, or -1. */
int api_route_index(const char *route) {
    for (int i = 0; route && i < API_ROUTES; i++)
        if (route == api_route_names[i] || strcmp(route, api_route_names[i]) == 0) return i;
    return -1;
}

/* The result of route_find(). */
enum route_found {
    ROUTE_NONE,      /* no route: 404 */
    ROUTE_OK,        /* *route serves the path */
    ROUTE_BAD_REALM, /* "/realms/<not an id>/...": 400 */
};

/* Finds the route serving path: its id segment is copied into argbuf
 * (arglen bytes; a longer one is copied as "", which no handler takes for an
 * id) and *arg points to it, its realm
 * into realm (MARKET_REALM_MAX + 1 bytes): the segment after "/realms/"
 * when path starts so (the route is the rest of the path, and must be one
 * served per realm), else MARKET_REALM_DEFAULT. A route under a realm
 * segment that is not a valid id is ROUTE_BAD_REALM, with *route set. */
static enum route_found route_find(const char *method, const char *path, const api_route **route,
                                   const char **arg, char *argbuf, size_t arglen, char *realm) {
    int prefixed = strncmp(path, API_REALM_PREFIX, sizeof API_REALM_PREFIX - 1) == 0;
    int bad_realm = 0;
    *route = NULL;
    api__copy(realm, MARKET_REALM_MAX + 1, MARKET_REALM_DEFAULT);
    if (prefixed) {
        const char *id = path + sizeof API_REALM_PREFIX - 1, *slash = strchr(id, '/');
        if (!slash) return ROUTE_NONE;
        size_t len = (size_t)(slash - id);
        bad_realm = len == 0 || len > MARKET_REALM_MAX;
        if (!bad_realm) {
            memcpy(realm, id, len);
            realm[len] = '\0';
            bad_realm = !market_id_valid(realm);
        }
        if (bad_realm) api__copy(realm, MARKET_REALM_MAX + 1, MARKET_REALM_DEFAULT);
        path = slash;
    }
    for (size_t i = 0; i < sizeof api_routes / sizeof api_routes[0]; i++) {
        const api_route *r = &api_routes[i];
        size_t n = strlen(r->path);
        if (prefixed && !r->realm) continue;
        if (!r->prefix && strcmp(path, r->path) == 0) {
            *arg = NULL;
            *route = r;
            /* a path two rows serve (GET and POST /auctions): the one whose method it is */
            if (method && strcmp(method, r->method) != 0 && i + 1 < API_ROUTES &&
                strcmp(api_routes[i + 1].path, r->path) == 0 &&
                strcmp(method, api_routes[i + 1].method) == 0)
                *route = &api_routes[i + 1];
            return bad_realm ? ROUTE_BAD_REALM : ROUTE_OK;
        }
        if (r->prefix && strncmp(path, r->path, n) == 0 && path[n] != '\0' &&
            path[n] != '/') {
            const char *end = strchr(path + n, '/');
            if (r->suffix ? !end || strcmp(end, r->suffix) != 0 : end != NULL) continue;
            size_t len = end ? (size_t)(end - (path + n)) : strlen(path + n);
            if (len >= arglen) len = 0; /* longer than any id: the handler refuses "" */
            memcpy(argbuf, path + n, len);
            argbuf[len] = '\0';
            *arg = argbuf;
            *route = r;
            return bad_realm ? ROUTE_BAD_REALM : ROUTE_OK;
        }
    }
    return ROUTE_NONE;
}

/* Whether route r serves method: one its Allow value names (HEAD on a GET
 * route). This function can't fail. */
static int method_allowed(const api_route *r, const char *method) {
    size_t n = strlen(method);
    for (const char *p = r->allow; n && (p = strstr(p, method)) != NULL; p += n)
        if ((p == r->allow || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

/* Finds the deferred route serving method and path (see route_find() for
 * argbuf, arglen and realm): the route, with *arg set, when path names a
 * route of the table (under a valid realm, if any) that has a begin step
 * and method is the one it serves; else NULL. This function can't fail. */
static const api_route *deferred_route(const char *method, const char *path, const char **arg,
                                       char *argbuf, size_t arglen, char *realm) {
    const api_route *r = NULL;
    if (!method || !path) return NULL;
    if (route_find(method, path, &r, arg, argbuf, arglen, realm) != ROUTE_OK) return NULL;
    return r->begin && strcmp(method, r->method) == 0 ? r : NULL;
}

/* ---- API ---- */

/* Answers one request: routes req by method and path, validates it, calls
 * market/ through conn (used by this thread only, for the call), and fills
 * resp, which is overwritten without being read. req and conn are borrowed.
 * resp->body is a new malloc'd string; release it with api_response_cleanup().
 * Every failure is an answer: 4xx for the client's mistakes, 5xx for ours or
 * the store's, status 500 with a NULL body on out-of-memory. A NULL resp is
 * ignored; a NULL req or conn (a caller bug) gets 500. */
void api_handle(market_conn *conn, const api_request *req, api_response *resp) {
    if (!resp) return;
    *resp = (api_response){0};
    if (!req || !req->method || !req->path) {
        api__error_reply_full(resp, 500, "internal_error", "incomplete request", 0, NULL);
        return;
    }
    const char *arg = NULL;
    const api_route *r;
    char realm[MARKET_REALM_MAX + 1];
    char argbuf[API__ARG_MAX];
    enum route_found found =
        route_find(req->method, req->path, &r, &arg, argbuf, sizeof argbuf, realm);
    if (found == ROUTE_NONE) {
        api__error_reply_full(resp, 404, "not_found", "no such resource", 0, NULL);
        return;
    }
    resp->route = route_name(r);
    if (found == ROUTE_BAD_REALM) {
        api__bad_request(resp, "realm id must match " API__ID_RULE);
        return;
    }
    api__copy(resp->realm, sizeof resp->realm, realm);
    if (!method_allowed(r, req->method)) {
        api__error_reply_full(resp, 405, "method_not_allowed", NULL, 0, r->allow);
        return;
    }
    if (r->begin) { /* a write, run here as the market's order (api_handle_begin() defers it) */
        api_deferred d;
        if (r->begin(conn, req, realm, arg, resp, &d) && !api__conn_missing(conn, resp)) {
            market_order_run(conn, &d.order);
            r->end(&d, resp);
        }
    } else {
        r->handle(conn, req, realm, arg, resp);
    }
    if (MARKET_ERR_HAS_REASON(resp->market_rc))
        api__copy(resp->why, sizeof resp->why, market_conn_errstr(conn));
}

/* Returns 1 when method and path (without the query string; both borrowed)
 * name a route of the table that api_handle_begin() may defer: a write the
 * market serves as an order, answered later from a market worker, such as
 * POST /purchase, POST /list or POST /realms/{realm}/sales/{id}/buy; else
 * 0 (an unknown path, another method, a realm that is not an id, NULL).
 * Whether a given request
 * is deferred still depends on its body: see api_handle_begin(). This
 * function can't fail. */
int api_route_deferrable(const char *method, const char *path) {
    const char *arg = NULL;
    char argbuf[API__ARG_MAX], realm[MARKET_REALM_MAX + 1];
    return deferred_route(method, path, &arg, argbuf, sizeof argbuf, realm) != NULL;
}

/* The paths server/ answers itself, without api_handle(), and whether each
 * is also served under /realms/{realm}. */
static const struct {
    const char *path;
    int realm;
    enum api_endpoint kind;
} api_endpoints[] = {
    {"/metrics", 0, API_ENDPOINT_METRICS},
    {"/events", 1, API_ENDPOINT_EVENTS},
};

/* Says who answers path (without the query string; borrowed): server/
 * itself for /metrics (API_ENDPOINT_METRICS) and for a realm's event
 * stream, "/events" or "/realms/{realm}/events" (API_ENDPOINT_EVENTS, the
 * realm written into realm, MARKET_REALM_MAX + 1 bytes: "" when the realm
 * segment is not an id, which server/ answers 400); api_handle() for any
 * other path, and NULL (API_ENDPOINT_ROUTE). The method is not looked at:
 * a path server/ serves gets its 405 there. This function can't fail. */
int api_endpoint_find(const char *path, char *realm) {
    size_t pre = sizeof API_REALM_PREFIX - 1, n = path ? strlen(path) : 0;
    for (size_t i = 0; path && i < sizeof api_endpoints / sizeof api_endpoints[0]; i++) {
        const char *e = api_endpoints[i].path;
        size_t elen = strlen(e);
        if (strcmp(path, e) == 0) {
            api__copy(realm, MARKET_REALM_MAX + 1, MARKET_REALM_DEFAULT);
            return api_endpoints[i].kind;
        }
        if (!api_endpoints[i].realm || strncmp(path, API_REALM_PREFIX, pre) != 0 ||
            n < pre + elen + 1 || strcmp(path + n - elen, e) != 0)
            continue;
        size_t len = n - pre - elen; /* the realm segment */
        if (len <= MARKET_REALM_MAX && memchr(path + pre, '/', len)) continue;
        realm[0] = '\0';
        if (len <= MARKET_REALM_MAX) {
            memcpy(realm, path + pre, len);
            realm[len] = '\0';
            if (!market_id_valid(realm)) realm[0] = '\0';
        }
        return api_endpoints[i].kind;
    }
    return API_ENDPOINT_ROUTE;
}

/* Like api_handle(), except for a request of a deferrable route (see
 * api_route_deferrable()) that passes validation: that one is not run; it
 * is written into d (its market_order and the strings it points to) and 1
 * is returned, with resp holding only what logs need (route, realm,
 * player). The caller then hands d to the market with api_deferred_submit()
 * and, once its done callback has been called, turns the outcome into resp
 * with api_deferred_end(). Returns 0 when resp is the whole answer. */
int api_handle_begin(market_conn *conn, const api_request *req, api_response *resp,
                     api_deferred *d) {
    if (!resp || !d) return 0;
    const char *arg = NULL;
    char realm[MARKET_REALM_MAX + 1];
    char argbuf[API__ARG_MAX];
    const api_route *r =
        req ? deferred_route(req->method, req->path, &arg, argbuf, sizeof argbuf, realm) : NULL;
    if (!r) {
        api_handle(conn, req, resp);
        return 0;
    }
    *resp = (api_response){.route = route_name(r)};
    api__copy(resp->realm, sizeof resp->realm, realm);
    d->route = (int)(r - api_routes);
    return r->begin(conn, req, realm, arg, resp, d) ? 1 : 0;
}

/* The market has decided d's order: tell api_deferred_submit()'s caller. */
static void deferred_decided(market_order *o) {
    api_deferred *d = o->ud;
    d->done(d->ud); /* may free d: not touched after */
}

/* Hands d's order, which api_handle_begin() filled (and returned 1 for), to
 * m (market_order_submit(), which picks the worker of its kind). done(ud)
 * is then called exactly once, from that worker's thread, or from this
 * call when m refuses the order (invalid, stopping, out of memory: the
 * refusal is its outcome); after it, api_deferred_end() answers d. d is
 * borrowed until done is called, and may be freed from done. This function
 * can't fail otherwise. */
void api_deferred_submit(market *m, api_deferred *d, void (*done)(void *ud), void *ud) {
    d->done = done;
    d->ud = ud;
    d->order.done = deferred_decided;
    d->order.ud = d;
    int rc = market_order_submit(m, &d->order);
    if (rc != MARKET_OK) { /* not queued: answer it as the worker would have */
        d->order.rc = rc;
        d->order.why[0] = '\0';
        deferred_decided(&d->order);
    }
}

/* Fills resp with the answer to d, whose order's outcome is in (after
 * api_deferred_submit()'s done callback), by the end step of the route
 * that began it; resp keeps its route, realm and player. This function
 * can't fail (out of memory: status 500 and a NULL body). */
void api_deferred_end(const api_deferred *d, api_response *resp) {
    if (!d || !resp) return;
    if (d->route < 0 || d->route >= API_ROUTES || !api_routes[d->route].end) {
        api__error_reply_full(resp, 500, "internal_error", "not a deferred request", 0, NULL);
        return;
    }
    api_routes[d->route].end(d, resp);
    if (MARKET_ERR_HAS_REASON(d->order.rc)) api__copy(resp->why, sizeof resp->why, d->order.why);
}

/* Fills resp (overwritten without being read) with status and the body
 * {"error": code[, "detail": detail]}; code NULL reads as "internal_error",
 * detail NULL leaves it out, and bytes that are not UTF-8 become '?'. A
 * status outside 100..599 becomes 500. resp->body is a new malloc'd string;
 * release it with api_response_cleanup(). On out-of-memory: status 500 and
 * a NULL body. A NULL resp is ignored. */
void api_error(int status, const char *code, const char *detail, api_response *resp) {
    if (!resp) return;
    *resp = (api_response){0};
    if (status < 100 || status > 599) status = 500;
    api__error_reply_full(resp, status, code, detail, 0, NULL);
}

/* Frees resp->body and sets it to NULL (and body_len to 0); the other fields
 * are kept. Safe to call twice, and with NULL. This function can't fail. */
void api_response_cleanup(api_response *resp) {
    if (!resp) return;
    free(resp->body);
    resp->body = NULL;
    resp->body_len = 0;
}


/* Says what resp, an answer of api_handle(), api_deferred_end() or
 * api_error(), tells of the store: 0 down (a store failure: 503
 * store_unavailable, not_replicated; /healthz's 503), 1 up (a success or a
 * market refusal: the store answered; /healthz's 200), -1 nothing (an answer
 * given before the store was asked, such as a 400, or none of a route). This
 * function can't fail. */
int api_response_store_up(const api_response *resp) {
    if (resp->route && strcmp(resp->route, "/healthz") == 0) return resp->status == 200;
    if (MARKET_ERR_HAS_REASON(resp->market_rc)) return 0;
    if (resp->route && (resp->status / 100 == 2 ||
                        (resp->market_rc < 0 && resp->market_rc != MARKET_ERR_NOMEM)))
        return 1;
    return -1;
}
