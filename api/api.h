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
#include <stdint.h>

#include "market/market.h"

#define API_BODY_MAX (64 * 1024) /* larger request bodies get 413 */

/* ---- player tokens: JWTs (api_auth.c) ---- */

#define API_TOKEN_MAX 2048     /* longest bearer token read or made, in bytes */
#define API_KID_MAX 64         /* a key id: [A-Za-z0-9_.-]{1,64} */
#define API_AUTH_KEYS_MAX 16   /* verification keys with a kid, at once */
#define API_AUTH_SECRET_MAX 255 /* longest HS256 secret, in bytes */
#define API_AUTH_LEEWAY_S 60   /* default clock skew allowed on exp, iat and nbf */
#define API_TOKEN_TTL_MAX (366 * 86400) /* longest lifetime api_token_make() gives */

/* Why a token was refused: the detail of its 401 (api_auth_strerror()). */
#define API_AUTH_ERRNO_MAP(X)                                                   \
    X(OK, 0, "success")                                                         \
    X(ERR_MALFORMED, -1, "malformed token")                                     \
    X(ERR_ALG_NONE, -2, "algorithm none is refused")                            \
    X(ERR_NO_KID, -3, "token has no kid")                                       \
    X(ERR_UNKNOWN_KID, -4, "unknown key id")                                    \
    X(ERR_WRONG_ALG, -5, "algorithm does not match the key")                    \
    X(ERR_SIGNATURE, -6, "signature does not verify")                           \
    X(ERR_NO_EXP, -7, "token has no exp")                                       \
    X(ERR_EXPIRED, -8, "token expired")                                         \
    X(ERR_IAT_FUTURE, -9, "token issued in the future")                         \
    X(ERR_NOT_YET, -10, "token not yet valid")                                  \
    X(ERR_AUDIENCE, -11, "wrong audience")                                      \
    X(ERR_SUB, -12, "token sub is not a player")                                \
    X(ERR_KEY, -13, "bad verification key")                                     \
    X(ERR_NOMEM, -14, "out of memory")

enum api_auth_err {
#define API_AUTH_ERR_ENUM(name, val, msg) API_AUTH_##name = (val),
    API_AUTH_ERRNO_MAP(API_AUTH_ERR_ENUM)
#undef API_AUTH_ERR_ENUM
};

/* The verification keys, audience and leeway of player tokens (opaque). */
typedef struct api_auth api_auth;

/* What api_token_make() signs: an HS256 JWT {sub, iat, exp[, aud]}. */
typedef struct api_token_spec {
    const char *secret;   /* the HS256 key */
    const char *kid;      /* NULL: no kid (the --auth-secret's tokens) */
    const char *audience; /* NULL: no aud claim */
    const char *realm;    /* NULL: the default realm (sub is "<player>") */
    const char *player;
    int64_t iat;          /* Unix seconds */
    int64_t ttl_s;        /* exp is iat + ttl_s; 1..API_TOKEN_TTL_MAX */
} api_token_spec;

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
    const api_auth *auth; /* player tokens are verified with its keys; NULL: no authentication */
    const char *admin_secret; /* the admin token of POST /sales is checked with it; NULL: no
                                 admin routes (403 admin_disabled), whatever auth_secret is */
    int trade_parties_public; /* 1: every reader sees a trade's buyer and seller; 0: only
                                 the two parties (their token) and the admin do */
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

#define API_ROUTES 29 /* api_route_name(0..API_ROUTES-1) */

#define API_REALM_PREFIX "/realms/" /* "/realms/{realm}/<route>": a route of that realm */
#define API_ADMIN_TOKEN_MAX (6 + 64) /* "admin.<hex>": see api_admin_token_make() */

/* A validated request of a deferrable route (a write: POST /purchase, /list,
 * /unlist, /sales/{id}/buy, /orders, /sell, DELETE /orders/{id}) waiting for the market:
 * api_handle_begin() fills it, api_deferred_submit() hands its order to the market, and
 * api_deferred_end() answers it. The caller owns it and leaves it alone
 * between these calls. */
typedef struct api_deferred {
    market_order order; /* what the route asks of the market (api_deferred_submit() sets its
                           done and ud) */
    int route;          /* the route that began it (api_route_index() of its name): its
                           row answers (api_deferred_end()) */
    /* the strings order points to */
    char realm[MARKET_REALM_MAX + 1];
    char player[MARKET_ID_MAX + 1], seller[MARKET_ID_MAX + 1], item[MARKET_ID_MAX + 1];
    char sale[MARKET_ID_MAX + 1];
    char to[MARKET_ID_MAX + 1]; /* a direct trade's other player */
    market_goods give, get;     /* a direct trade's sides */
    market_idem idem;
    char idem_key[MARKET_IDEM_KEY_MAX + 1];
    char fp[MARKET_IDEM_FP_MAX + 1];
    void (*done)(void *ud); /* api_deferred_submit()'s caller's callback, and its argument */
    void *ud;
} api_deferred;

/* Who answers a path (api_endpoint_find()): api_handle(), or server/ itself. */
enum api_endpoint {
    API_ENDPOINT_ROUTE,   /* api_handle(): a route of the table, or its 404 */
    API_ENDPOINT_METRICS, /* /metrics: the Prometheus text */
    API_ENDPOINT_EVENTS,  /* /events, /realms/{realm}/events: the realm's event stream */
};

void api_handle(market_conn *conn, const api_request *req, api_response *resp);
int api_endpoint_find(const char *path, char *realm);
int api_route_deferrable(const char *method, const char *path);
int api_handle_begin(market_conn *conn, const api_request *req, api_response *resp,
                     api_deferred *d);
void api_deferred_submit(market *m, api_deferred *d, void (*done)(void *ud), void *ud);
void api_deferred_end(const api_deferred *d, api_response *resp);
void api_error(int status, const char *code, const char *detail, api_response *resp);
void api_response_cleanup(api_response *resp);
int api_response_store_up(const api_response *resp);
char *api_trade_text(const market_trade *t, int parties, size_t *len);
char *api_change_text(const market_change *ch, size_t *len);
char *api_auction_event_text(const market_auction_event *ev, size_t *len);
const char *api_route_name(int i);
int api_route_index(const char *route);
int api_token_make(const api_token_spec *spec, char *out, size_t outlen);
api_auth *api_auth_new(void);
void api_auth_free(api_auth *a);
int api_auth_set_secret(api_auth *a, const char *secret, char *why, size_t whylen);
int api_auth_add_key(api_auth *a, const char *spec, char *why, size_t whylen);
int api_auth_add_pem(api_auth *a, const char *kid, const char *alg, const char *pem, size_t len,
                     char *why, size_t whylen);
int api_auth_set_audience(api_auth *a, const char *audience);
void api_auth_set_leeway(api_auth *a, unsigned leeway_s);
int api_auth_verify(const api_auth *a, const char *token, int64_t now_s, char *realm,
                    char *player);
const char *api_auth_strerror(int err);
int api_admin_token_make(const char *secret, char *out, size_t outlen);
int api_fixture_parse(const char *json, size_t len, market_world **out, char *why,
                      size_t whylen);

#endif /* GM_API_API_H */
