/* cors.c - CORS: which browser origins may call the API, and the headers they get.
 *
 * Off by default: a server without --cors-origin sends no Access-Control-*
 * header, and a browser page of another origin cannot read its answers. With
 * origins configured, a request whose Origin header is one of them (or any,
 * with "*") gets Access-Control-Allow-Origin (the origin itself, or "*") and
 * the response headers a client needs exposed; a preflight (OPTIONS with
 * Access-Control-Request-Method) of a route gets 204 with the route's methods
 * and the request headers the API reads. Every answer of a server with
 * origins configured carries "Vary: Origin" (it depends on the Origin), but
 * for "*", which does not. Tokens travel in the Authorization header, never in
 * cookies, so no Access-Control-Allow-Credentials is sent.
 *
 * Matching is pure (server__cors_origin_ok, server__cors_allow), the headers
 * are libmicrohttpd's (server__cors_add).
 */
#include <microhttpd.h>
#include <string.h>
#include <strings.h>

#include "server/server_impl.h"

/* Request headers a browser may send (preflight's Access-Control-Allow-Headers). */
#define CORS_ALLOW_HEADERS "Authorization, Content-Type, Idempotency-Key, X-Request-Id"
/* Response headers a browser page may read besides the safelisted ones. */
#define CORS_EXPOSE_HEADERS "Retry-After, Idempotent-Replayed, WWW-Authenticate, X-Request-Id"
#define CORS_MAX_AGE "600" /* seconds a browser may cache a preflight */

/* Returns 1 when o is "*" or a serialized origin, scheme "://" host [":" port]:
 * scheme http or https, host letters, digits, '.' and '-' (or an IPv6 literal
 * in brackets), port 1..65535, nothing after it (no path, not even "/");
 * else 0. */
int server__cors_origin_ok(const char *o) {
    if (!o) return 0;
    if (strcmp(o, "*") == 0) return 1;
    const char *h;
    if (strncasecmp(o, "http://", 7) == 0)
        h = o + 7;
    else if (strncasecmp(o, "https://", 8) == 0)
        h = o + 8;
    else
        return 0;
    const char *p = h;
    if (*p == '[') { /* [v6] */
        p++;
        while (*p && (strchr("0123456789abcdefABCDEF:.", *p))) p++;
        if (*p != ']' || p == h + 1) return 0;
        p++;
    } else {
        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
               *p == '.' || *p == '-')
            p++;
        if (p == h) return 0;
    }
    if (*p == ':') {
        const char *d = ++p;
        long port = 0;
        while (*p >= '0' && *p <= '9' && p - d < 6) port = port * 10 + (*p++ - '0');
        if (p == d || port < 1 || port > 65535) return 0;
    }
    return *p == '\0';
}

/* Returns the Access-Control-Allow-Origin value for a request whose Origin
 * header is origin (NULL: none): "*" when cfg allows any origin, origin
 * itself when it is one of cfg's (scheme and host compared without case,
 * as browsers serialize them in lower case), else NULL (no CORS headers).
 * The result is static or origin. */
const char *server__cors_allow(const server_config *cfg, const char *origin) {
    if (!origin || !*origin) return NULL;
    for (unsigned i = 0; i < cfg->n_cors; i++) {
        if (strcmp(cfg->cors_origins[i], "*") == 0) return "*";
        if (strcasecmp(cfg->cors_origins[i], origin) == 0) return origin;
    }
    return NULL;
}

/* Adds the CORS headers of a request with Origin origin to r: on every answer
 * of a server with origins, "Vary: Origin" (unless "*"); for an allowed
 * origin, Access-Control-Allow-Origin and -Expose-Headers, and for a preflight
 * (methods non-NULL: the route's methods) -Allow-Methods, -Allow-Headers and
 * -Max-Age. Returns 0, or -1 when libmicrohttpd cannot add a header. */
int server__cors_add(struct MHD_Response *r, const server_config *cfg, const char *origin,
                     const char *methods) {
    if (cfg->n_cors == 0) return 0;
    const char *allow = server__cors_allow(cfg, origin);
    int any = allow && strcmp(allow, "*") == 0;
    if (!any && MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Origin") != MHD_YES) return -1;
    if (!allow) return 0;
    if (MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, allow) != MHD_YES)
        return -1;
    if (!methods)
        return MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_EXPOSE_HEADERS, CORS_EXPOSE_HEADERS) ==
                       MHD_YES
                   ? 0
                   : -1;
    return MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_METHODS, methods) == MHD_YES &&
                   MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_HEADERS,
                                           CORS_ALLOW_HEADERS) == MHD_YES &&
                   MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_MAX_AGE, CORS_MAX_AGE) == MHD_YES
               ? 0
               : -1;
}
