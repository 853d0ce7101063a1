/* api.h - the HTTP JSON API as plain C: request in, status and body out.
 *
 * api/ owns JSON (jansson): it parses and validates request bodies, calls
 * market/, and maps every market result to an HTTP status and a JSON body in
 * one table. It knows nothing of sockets or of libmicrohttpd, so it can be
 * unit-tested and fuzzed on its own.
 */
#ifndef GM_API_API_H
#define GM_API_API_H

#include <stddef.h>

#include "market/market.h"

#define API_BODY_MAX (64 * 1024) /* larger request bodies get 413 */

enum api_arg_kind {
    API_ARG_QUERY,  /* ?name=value */
    API_ARG_HEADER, /* request header, case-insensitive name */
};

/* One HTTP request, borrowed for the duration of api_handle(). */
typedef struct api_request {
    const char *method;  /* "GET", "POST", ... */
    const char *path;    /* without the query string */
    const char *body;    /* may be NULL when body_len is 0 */
    size_t body_len;
    /* Looks up a query argument or header; NULL when absent. May be NULL. */
    const char *(*lookup)(void *ud, enum api_arg_kind kind, const char *name);
    void *lookup_ud;
    const char *auth_secret; /* player tokens are checked with it; NULL: no authentication */
    const char *admin_secret; /* the admin token of POST /sales is checked with it; NULL: no
                                 admin routes (403 admin_disabled), whatever auth_secret is */
} api_request;

/* One HTTP response. body is malloc'd; release with api_response_cleanup(). */
typedef struct api_response {
    int status;
    char *body;          /* JSON text, NUL-terminated; NULL only on out-of-memory */
    size_t body_len;
    int retry_after_s;   /* > 0: send "Retry-After: <n>" */
    const char *allow;   /* non-NULL: send "Allow: <allow>" (static string) */
    const char *auth_challenge; /* non-NULL: send "WWW-Authenticate: <it>" (static) */
    int replayed;        /* 1: an Idempotency-Key repeat: send "Idempotent-Replayed: true" */
    const char *route;   /* for logs and metrics: the matched route (static), or NULL */
    char player[MARKET_ID_MAX + 1]; /* for logs: the player acting or read, or "" */
    char realm[MARKET_REALM_MAX + 1]; /* for logs and metrics: the request's realm, or "" */
    int market_rc;       /* for logs: the market code answered (0: none, or success) */
    char why[128];       /* for logs: the store's reason behind a store_unavailable, or "" */
    char error[40];      /* for logs: the body's "error" code, or "" */
} api_response;

#define API_ROUTES 13 /* api_route_name(0..API_ROUTES-1) */

#define API_REALM_PREFIX "/realms/" /* "/realms/{realm}/<route>": a route of that realm */
#define API_TOKEN_MAX (MARKET_REALM_MAX + 1 + MARKET_ID_MAX + 1 + 64) /* see api_token_make() */
#define API_ADMIN_TOKEN_MAX (6 + 64) /* "admin.<hex>": see api_admin_token_make() */

#define API_BEGIN_PURCHASE 1 /* api_handle_begin(): submit p->op (market_purchase_submit) */
#define API_BEGIN_SALE_BUY 2 /* api_handle_begin(): submit p->sale_op (market_sale_buy_submit) */

/* A validated POST /purchase, or POST /sales/{id}/buy, waiting for the
 * market (api_handle_begin()). */
typedef struct api_purchase {
    market_pending op; /* the caller sets op.done and op.ud, then market_purchase_submit()s it */
    int64_t max_price; /* > 0: no seller: the cheapest units at or under it (not queued) */
    char realm[MARKET_REALM_MAX + 1];
    char buyer[MARKET_ID_MAX + 1], seller[MARKET_ID_MAX + 1], item[MARKET_ID_MAX + 1];
    market_idem idem;
    char idem_key[MARKET_IDEM_KEY_MAX + 1];
    char fp[MARKET_IDEM_FP_MAX + 1];
    /* a buy from a sale: sale_op instead of op (sale_op.done and .ud set by the caller) */
    int is_sale;
    market_sale_pending sale_op;
    char sale[MARKET_ID_MAX + 1];
} api_purchase;

void api_handle(market_conn *conn, const api_request *req, api_response *resp);
int api_handle_begin(market_conn *conn, const api_request *req, api_response *resp,
                     api_purchase *p);
void api_purchase_end(const api_purchase *p, api_response *resp);
void api_error(int status, const char *code, const char *detail, api_response *resp);
void api_response_cleanup(api_response *resp);
char *api_trade_text(const market_trade *t, size_t *len);
char *api_change_text(const market_change *ch, size_t *len);
const char *api_route_name(int i);
int api_route_index(const char *route);
int api_token_make(const char *secret, const char *realm, const char *player, char *out,
                   size_t outlen);
int api_admin_token_make(const char *secret, char *out, size_t outlen);
int api_fixture_parse(const char *json, size_t len, market_world **out, char *why,
                      size_t whylen);

#endif /* GM_API_API_H */
