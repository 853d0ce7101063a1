/* http.c - market-load's HTTP/1.1: the requests it writes and the answer heads it reads.
 *
 * Pure: bytes in, bytes or a parsed head out, but for the clock that dates the
 * buyers' tokens (HS256 JWTs, valid for TOKEN_TTL_S from the request's second). The
 * service answers with Content-Length, so chunked answers are refused rather than
 * parsed.
 */
#include "tools/load/load.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api/api.h"

#define TOKEN_TTL_S 3600

/* Writes "Authorization: Bearer <buyer's token>\r\n" into auth (API_TOKEN_MAX + 32
 * bytes), or "" without a secret. Returns 0, or LOAD_HTTP_ERR_TOKEN. */
static int auth_header(char *auth, size_t len, const char *auth_secret, const char *realm,
                       const char *buyer) {
    char token[API_TOKEN_MAX + 1];
    auth[0] = '\0';
    if (!auth_secret) return 0;
    api_token_spec spec = {auth_secret, NULL, NULL, realm, buyer, (int64_t)time(NULL),
                           TOKEN_TTL_S};
    if (api_token_make(&spec, token, sizeof token) != MARKET_OK) return LOAD_HTTP_ERR_TOKEN;
    int n = snprintf(auth, len, "Authorization: Bearer %s\r\n", token);
    return n > 0 && (size_t)n < len ? 0 : LOAD_HTTP_ERR_TOKEN;
}

/* Writes into out the request METHOD path with the JSON body, as buyer (a token from
 * auth_secret, when given). Returns its length, or LOAD_HTTP_ERR_FIT / LOAD_HTTP_ERR_TOKEN. */
static int request(char *out, size_t outlen, const char *method, const char *host, const char *path,
                   const char *body, const char *auth_secret, const char *realm,
                   const char *buyer) {
    char auth[API_TOKEN_MAX + 32];
    if (auth_header(auth, sizeof auth, auth_secret, realm, buyer) < 0) return LOAD_HTTP_ERR_TOKEN;
    int n = snprintf(out, outlen,
                     "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                     "%sContent-Length: %d\r\n\r\n%s",
                     method, path, host, auth, (int)strlen(body), body);
    return n < 0 || (size_t)n >= outlen ? LOAD_HTTP_ERR_FIT : n;
}

static int post(char *out, size_t outlen, const char *host, const char *path, const char *body,
                const char *auth_secret, const char *realm, const char *buyer) {
    return request(out, outlen, "POST", host, path, body, auth_secret, realm, buyer);
}

int load_http_purchase(char *out, size_t outlen, const char *host, const char *realm,
                       const char *buyer, const char *seller, const char *item,
                       const char *auth_secret) {
    char body[3 * MARKET_ID_MAX + 64];
    char path[sizeof API_REALM_PREFIX + MARKET_REALM_MAX + 16] = "/purchase";
    if (realm && strcmp(realm, MARKET_REALM_DEFAULT) != 0)
        snprintf(path, sizeof path, API_REALM_PREFIX "%s/purchase", realm);
    int bl = snprintf(body, sizeof body, "{\"buyer\":\"%s\",\"seller\":\"%s\",\"item\":\"%s\"}",
                      buyer, seller, item);
    if (bl < 0 || (size_t)bl >= sizeof body) return LOAD_HTTP_ERR_FIT;
    return post(out, outlen, host, path, body, auth_secret, realm, buyer);
}

int load_http_sale_buy(char *out, size_t outlen, const char *host, const char *realm,
                       const char *sale, const char *buyer, int64_t quantity,
                       const char *auth_secret) {
    char body[MARKET_ID_MAX + 64];
    char path[sizeof API_REALM_PREFIX + MARKET_REALM_MAX + MARKET_ID_MAX + 16];
    if (realm && strcmp(realm, MARKET_REALM_DEFAULT) != 0)
        snprintf(path, sizeof path, API_REALM_PREFIX "%s/sales/%s/buy", realm, sale);
    else
        snprintf(path, sizeof path, "/sales/%s/buy", sale);
    int bl = snprintf(body, sizeof body, "{\"buyer\":\"%s\",\"quantity\":%lld}", buyer,
                      (long long)quantity);
    if (bl < 0 || (size_t)bl >= sizeof body) return LOAD_HTTP_ERR_FIT;
    return post(out, outlen, host, path, body, auth_secret, realm, buyer);
}

int load_http_bid(char *out, size_t outlen, const char *host, const char *realm, const char *bidder,
                  int64_t id, int64_t amount, const char *auth_secret) {
    char body[MARKET_ID_MAX + 64];
    char path[sizeof API_REALM_PREFIX + MARKET_REALM_MAX + 48];
    if (realm && strcmp(realm, MARKET_REALM_DEFAULT) != 0)
        snprintf(path, sizeof path, API_REALM_PREFIX "%s/auctions/%lld/bid", realm, (long long)id);
    else
        snprintf(path, sizeof path, "/auctions/%lld/bid", (long long)id);
    int bl = snprintf(body, sizeof body, "{\"bidder\":\"%s\",\"amount\":%lld}", bidder,
                      (long long)amount);
    if (bl < 0 || (size_t)bl >= sizeof body) return LOAD_HTTP_ERR_FIT;
    return post(out, outlen, host, path, body, auth_secret, realm, bidder);
}

int load_http_direct(char *out, size_t outlen, const char *host, const char *realm,
                     enum load_kind kind, const char *player, const char *other, int64_t give,
                     int64_t get, int64_t id, const char *auth_secret) {
    char body[2 * MARKET_ID_MAX + 128], route[64];
    char path[sizeof API_REALM_PREFIX + MARKET_REALM_MAX + sizeof route];
    int bl;
    if (kind == LOAD_KIND_PROPOSE) {
        snprintf(route, sizeof route, "/trades/direct");
        bl = snprintf(body, sizeof body,
                      "{\"from\":\"%s\",\"to\":\"%s\",\"give\":{\"funds\":%lld},"
                      "\"get\":{\"funds\":%lld}}",
                      player, other, (long long)give, (long long)get);
    } else {
        snprintf(route, sizeof route, "/trades/direct/%lld/%s", (long long)id,
                 kind == LOAD_KIND_ACCEPT ? "accept" : "cancel");
        bl = snprintf(body, sizeof body, "{\"player\":\"%s\"}", player);
    }
    if (bl < 0 || (size_t)bl >= sizeof body) return LOAD_HTTP_ERR_FIT;
    if (realm && strcmp(realm, MARKET_REALM_DEFAULT) != 0)
        snprintf(path, sizeof path, API_REALM_PREFIX "%s%s", realm, route);
    else
        snprintf(path, sizeof path, "%s", route);
    return post(out, outlen, host, path, body, auth_secret, realm, player);
}

int load_http_book(char *out, size_t outlen, const char *host, const char *realm,
                   enum load_kind kind, const char *player, const char *item, int64_t quantity,
                   int64_t price, int64_t order, const char *auth_secret) {
    char body[3 * MARKET_ID_MAX + 128], route[48];
    char path[sizeof API_REALM_PREFIX + MARKET_REALM_MAX + sizeof route];
    int bl;
    switch (kind) {
    case LOAD_KIND_ORDER:
        snprintf(route, sizeof route, "/orders");
        bl = snprintf(body, sizeof body,
                      "{\"buyer\":\"%s\",\"item\":\"%s\",\"quantity\":%lld,\"max_price\":%lld}",
                      player, item, (long long)quantity, (long long)price);
        break;
    case LOAD_KIND_CANCEL:
        snprintf(route, sizeof route, "/orders/%lld", (long long)order);
        bl = snprintf(body, sizeof body, "{\"buyer\":\"%s\"}", player);
        break;
    case LOAD_KIND_SELL:
        snprintf(route, sizeof route, "/sell");
        bl = snprintf(body, sizeof body,
                      "{\"seller\":\"%s\",\"item\":\"%s\",\"quantity\":%lld,\"min_price\":%lld,"
                      "\"fill\":\"partial\"}",
                      player, item, (long long)quantity, (long long)price);
        break;
    case LOAD_KIND_LIST:
        snprintf(route, sizeof route, "/list");
        bl = snprintf(body, sizeof body,
                      "{\"seller\":\"%s\",\"item\":\"%s\",\"quantity\":%lld,\"price\":%lld}",
                      player, item, (long long)quantity, (long long)price);
        break;
    default: return LOAD_HTTP_ERR_FIT;
    }
    if (bl < 0 || (size_t)bl >= sizeof body) return LOAD_HTTP_ERR_FIT;
    if (realm && strcmp(realm, MARKET_REALM_DEFAULT) != 0)
        snprintf(path, sizeof path, API_REALM_PREFIX "%s%s", realm, route);
    else
        snprintf(path, sizeof path, "%s", route);
    return request(out, outlen, kind == LOAD_KIND_CANCEL ? "DELETE" : "POST", host, path, body,
                   auth_secret, realm, player);
}

int64_t load_http_body_int(const char *body, size_t n, const char *key) {
    char pat[80];
    int pl = snprintf(pat, sizeof pat, "\"%s\":", key);
    if (pl < 0 || (size_t)pl >= sizeof pat) return -1;
    for (size_t i = 0; i + (size_t)pl < n; i++) {
        if (memcmp(body + i, pat, (size_t)pl) != 0) continue;
        int64_t v = 0;
        size_t k = i + (size_t)pl, digits = 0;
        for (; k < n && body[k] >= '0' && body[k] <= '9' && digits < 18; k++, digits++)
            v = v * 10 + (body[k] - '0');
        return digits ? v : -1;
    }
    return -1;
}

int load_http_health(char *out, size_t outlen, const char *host) {
    int n = snprintf(out, outlen, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", host);
    return n <= 0 || (size_t)n >= outlen ? LOAD_HTTP_ERR_FIT : n;
}

static int name_is(const char *p, size_t len, const char *name) {
    size_t n = strlen(name);
    return len == n && strncasecmp(p, name, n) == 0;
}

int load_http_parse_head(const char *b, size_t len, load_http_head *out) {
    size_t end = 0;
    for (size_t i = 0; i + 3 < len; i++)
        if (b[i] == '\r' && b[i + 1] == '\n' && b[i + 2] == '\r' && b[i + 3] == '\n') {
            end = i + 4;
            break;
        }
    if (!end) return len > LOAD_IN_MAX / 2 ? -1 : 0;
    if (end < 12 || strncmp(b, "HTTP/1.", 7) != 0 || b[8] != ' ') return -1;
    int status = 0;
    for (int i = 9; i < 12; i++) {
        if (b[i] < '0' || b[i] > '9') return -1;
        status = status * 10 + (b[i] - '0');
    }
    int http10 = b[7] == '0', keep_alive = 0, chunked = 0, close_after = 0;
    long long clen = -1;
    const char *line = (const char *)memchr(b, '\n', end) + 1;
    while (line < b + end - 2) {
        const char *eol = memchr(line, '\r', (size_t)(b + end - line));
        const char *colon = memchr(line, ':', (size_t)(eol - line));
        if (!colon) return -1;
        const char *v = colon + 1;
        while (v < eol && (*v == ' ' || *v == '\t'))
            v++;
        size_t nl = (size_t)(colon - line), vl = (size_t)(eol - v);
        if (name_is(line, nl, "content-length")) {
            clen = 0;
            for (const char *q = v; q < eol; q++) {
                if (*q < '0' || *q > '9' || clen > LOAD_IN_MAX) return -1;
                clen = clen * 10 + (*q - '0');
            }
        } else if (name_is(line, nl, "connection")) {
            if (vl >= 5 && strncasecmp(v, "close", 5) == 0) close_after = 1;
            if (vl >= 10 && strncasecmp(v, "keep-alive", 10) == 0) keep_alive = 1;
        } else if (name_is(line, nl, "transfer-encoding")) {
            chunked = 1;
        }
        line = eol + 2;
    }
    if (chunked) return -1; /* the service sends Content-Length */
    if (http10 && !keep_alive) close_after = 1;
    if (status == 204 || status == 304 || (status >= 100 && status < 200)) clen = 0;
    if (clen < 0) close_after = 1; /* body until the server closes */
    out->status = status;
    out->body_len = clen;
    out->hdr_len = end;
    out->close_after = close_after;
    return 1;
}
