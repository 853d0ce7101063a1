/* respond.c - answers: a JSON body with its headers, each counted and logged; the page's
 * files, GET /metrics and GET /events.
 *
 * Every answer carries the request's X-Request-Id and, with --cors-origin,
 * the CORS headers of its Origin; a preflight (OPTIONS, which a route would
 * answer 405) gets 204 (cors.c). GET / serves the market page, read from
 * --web-dir at start (web.c); GET /metrics the Prometheus text (metrics.c);
 * GET /events a realm's trades and listing changes (events.c). Every other
 * answer goes through server__answer(), which sends it, counts it for
 * /metrics and writes the request's log line. Called by request.c, over
 * conn.c, log.c and the files named above.
 */
#include "server/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "api/api.h"
#include "rconn/rconn.h"
#include "market/market.h"
#include "server/server_impl.h"

/* The request's Origin header when the server answers CORS, else NULL. */
static const char *request_origin(const server *s, struct MHD_Connection *conn) {
    return s->cfg.n_cors ? MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                       MHD_HTTP_HEADER_ORIGIN)
                         : NULL;
}

/* Whether the request is a CORS preflight of an allowed origin: OPTIONS with
 * Access-Control-Request-Method (cors.c says what it is answered). This
 * function can't fail. */
int server__is_preflight(const server *s, struct MHD_Connection *conn, const char *method) {
    return s->cfg.n_cors && strcmp(method, MHD_HTTP_METHOD_OPTIONS) == 0 &&
           MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                       MHD_HTTP_HEADER_ACCESS_CONTROL_REQUEST_METHOD) &&
           server__cors_allow(&s->cfg, request_origin(s, conn));
}

/* Turns resp, a 405 of a preflight, into its 204: no body, the route's
 * methods (resp->allow) as Access-Control-Allow-Methods. This function
 * can't fail. */
void server__preflight_reply(api_response *resp) {
    api_response_cleanup(resp);
    resp->status = 204;
}

/* Fills resp with the answer to method on a path whose route serves only
 * allow (a static string): 405 with Allow, or the 204 of a CORS preflight. */
static void refuse_method(const server *s, struct MHD_Connection *conn, const char *method,
                          const char *allow, api_response *resp) {
    api_error(405, "method_not_allowed", NULL, resp);
    resp->allow = allow;
    if (server__is_preflight(s, conn, method)) server__preflight_reply(resp);
}

/* Queues resp: a JSON body (an empty one on a 204), its headers, and the CORS
 * headers of the request's origin. */
static enum MHD_Result respond(const server *s, struct MHD_Connection *conn, const char *id,
                              api_response *resp) {
    static const char oom[] = "{\"error\":\"internal_error\"}";
    struct MHD_Response *r;
    int empty = resp->status == 204;
    if (resp->body) {
        r = MHD_create_response_from_buffer(resp->body_len, resp->body, MHD_RESPMEM_MUST_FREE);
        if (r) resp->body = NULL; /* MHD owns it now */
    } else if (empty) {
        r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    } else {
        resp->status = 500;
        r = MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
    }
    api_response_cleanup(resp);
    if (!r) return MHD_NO;
    int ok = empty || MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json") ==
                          MHD_YES;
    if (ok && resp->retry_after_s > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", resp->retry_after_s);
        ok = MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, ra) == MHD_YES;
    }
    if (ok && resp->allow && !empty)
        ok = MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, resp->allow) == MHD_YES;
    if (ok && resp->replayed)
        ok = MHD_add_response_header(r, "Idempotent-Replayed", "true") == MHD_YES;
    if (ok && resp->auth_challenge)
        ok = MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, resp->auth_challenge) ==
             MHD_YES;
    if (ok && id[0]) ok = MHD_add_response_header(r, "X-Request-Id", id) == MHD_YES;
    if (ok)
        ok = server__cors_add(r, &s->cfg, request_origin(s, conn), empty ? resp->allow : NULL) == 0;
    enum MHD_Result rc = ok ? MHD_queue_response(conn, (unsigned)resp->status, r) : MHD_NO;
    MHD_destroy_response(r);
    return rc;
}

/* GET / and the page's other files (web.c): from memory, as they were at
 * start. Returns MHD_NO when the answer cannot be queued (libmicrohttpd then
 * closes the connection), as do the other server__respond_*() and
 * server__answer(). */
enum MHD_Result server__respond_web(server *s, struct MHD_Connection *conn, const char *method,
                                    const server__request *rq, const server__web_file *f) {
    api_response resp = {0};
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        refuse_method(s, conn, method, "GET, HEAD", &resp);
        return respond(s, conn, rq->id, &resp);
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(f->len, f->body, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    /* Scripts and styles only from this server, no frames, no inline code. */
    static const char csp[] = "default-src 'self'; img-src 'self' data:; base-uri 'none'; "
                              "form-action 'self'; frame-ancestors 'none'";
    enum MHD_Result rc =
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, f->type) == MHD_YES &&
                MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache") == MHD_YES &&
                MHD_add_response_header(r, "X-Content-Type-Options", "nosniff") == MHD_YES &&
                MHD_add_response_header(r, "Content-Security-Policy", csp) == MHD_YES &&
                MHD_add_response_header(r, "Referrer-Policy", "no-referrer") == MHD_YES &&
                MHD_add_response_header(r, "X-Request-Id", rq->id) == MHD_YES &&
                server__cors_add(r, &s->cfg, request_origin(s, conn), NULL) == 0
            ? MHD_queue_response(conn, MHD_HTTP_OK, r)
            : MHD_NO;
    MHD_destroy_response(r);
    server_log(SERVER_LOG_DEBUG, "msg=request method=%s path=%s status=200 latency_ms=%.3f", method,
               f->path, (double)(server__now_us() - rq->t0_us) / 1000.0);
    return rc;
}

/* GET /metrics: Prometheus text, rendered by metrics.c. */
enum MHD_Result server__respond_metrics(server *s, struct MHD_Connection *conn,
                                        const char *method, const server__request *rq) {
    api_response resp = {0};
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        refuse_method(s, conn, method, "GET, HEAD", &resp);
        return respond(s, conn, rq->id, &resp);
    }
    /* Redis up: the last outcome of a request that reached the store; when
     * there was none for SERVER__REDIS_STALE_MS, one scrape probes. */
    market_conn *mc = NULL;
    if (server__metrics_redis_stale(&s->metrics, rconn_now_ms()) && (mc = server__thread_conn(s))) {
        char why[128];
        server__metrics_store_outcome(&s->metrics, market_health(mc, why, sizeof why) == MARKET_OK,
                                      rconn_now_ms());
    }
    const union MHD_DaemonInfo *di =
        MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    server__gauges g = {di ? (long)di->num_connections : -1, atomic_load(&s->in_flight),
                        atomic_load(&s->purchases_in_flight), atomic_load(&s->queue_depth),
                        atomic_load(&s->metrics.redis_up)};
    server__process proc;
    server__process_read(&proc);
    size_t len = 0;
    char *text = server__metrics_render(&s->metrics, s->market, &g, &proc, &len);
    if (!text) {
        api_error(500, "internal_error", "out of memory", &resp);
        return respond(s, conn, rq->id, &resp);
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    enum MHD_Result rc =
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                "text/plain; version=0.0.4; charset=utf-8") == MHD_YES &&
                MHD_add_response_header(r, "X-Request-Id", rq->id) == MHD_YES &&
                server__cors_add(r, &s->cfg, request_origin(s, conn), NULL) == 0
            ? MHD_queue_response(conn, MHD_HTTP_OK, r)
            : MHD_NO;
    MHD_destroy_response(r);
    server_log(SERVER_LOG_DEBUG,
               "msg=request method=%s path=/metrics status=200 latency_ms=%.3f request_id=%s",
               method, (double)(server__now_us() - rq->t0_us) / 1000.0, rq->id);
    return rc;
}

/* Writes the client's address of conn (numeric, without the port) into
 * out, or "-" when libmicrohttpd cannot tell. */
static void client_address(struct MHD_Connection *conn, char *out, size_t outlen) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    const void *a = NULL;
    if (sa && sa->sa_family == AF_INET)
        a = &((const struct sockaddr_in *)sa)->sin_addr;
    else if (sa && sa->sa_family == AF_INET6)
        a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (!a || !inet_ntop(sa->sa_family, a, out, (socklen_t)outlen)) snprintf(out, outlen, "-");
}

/* Sends resp (its body is freed), counts it and logs it. */
enum MHD_Result server__answer(server *s, struct MHD_Connection *conn, const char *method,
                               const char *url, const server__request *rq, api_response *resp) {
    int status = resp->status, store_up = api_response_store_up(resp);
    const char *route = resp->route;
    char player[sizeof resp->player], realm[sizeof resp->realm], why[sizeof resp->why];
    char error[sizeof resp->error];
    memcpy(player, resp->player, sizeof player);
    memcpy(realm, resp->realm, sizeof realm);
    memcpy(why, resp->why, sizeof why);
    memcpy(error, resp->error, sizeof error);
    enum MHD_Result rc = respond(s, conn, rq->id, resp);
    int64_t us = server__now_us() - rq->t0_us;
    server__metrics_count(&s->metrics, route, method, realm, status, us);
    if (store_up >= 0) server__metrics_store_outcome(&s->metrics, store_up, rconn_now_ms());
    int info = server_log_on(SERVER_LOG_INFO);
    if (!info && !why[0]) return rc; /* no line to write */
    char path[128], client[INET6_ADDRSTRLEN], safe_method[16];
    server__log_safe(path, sizeof path, url);
    if (info) {
        server__log_safe(safe_method, sizeof safe_method, method);
        client_address(conn, client, sizeof client);
        server_log(SERVER_LOG_INFO,
                   "msg=request method=%s path=%s status=%d error=%s latency_ms=%.3f realm=%s "
                   "player=%s client=%s request_id=%s",
                   safe_method, path, status, error[0] ? error : "-", (double)us / 1000.0,
                   realm[0] ? realm : "-", player[0] ? player : "-", client, rq->id);
    }
    if (why[0]) { /* the store's reason behind a 503: for the operator, not the client */
        char safe[sizeof resp->why];
        server__log_text(safe, sizeof safe, why);
        server_log(SERVER_LOG_WARN, "msg=\"store unavailable\" path=%s reason=\"%s\" request_id=%s",
                   path, safe, rq->id);
    }
    return rc;
}

/* GET /events: the realm's stream of trades and listing changes (events.c);
 * realm NULL: the path's realm is not an id (400). */
enum MHD_Result server__respond_events(server *s, struct MHD_Connection *conn,
                                       const char *method, const char *url,
                                       const server__request *rq, const char *realm) {
    api_response resp = {.route = NULL};
    if (strcmp(method, "GET") != 0) {
        refuse_method(s, conn, method, "GET", &resp);
        return server__answer(s, conn, method, url, rq, &resp);
    }
    if (!realm) {
        api_error(400, "bad_request", "realm id must match [A-Za-z0-9_-]{1,64}", &resp);
        return server__answer(s, conn, method, url, rq, &resp);
    }
    int status = 0;
    const char *why = NULL;
    enum MHD_Result rc = server__events_subscribe(s->events, &s->cfg, request_origin(s, conn), realm,
                                                  conn, &status, &why);
    if (status) {
        api_error(status, "events_unavailable", why, &resp);
        resp.retry_after_s = 1;
        return server__answer(s, conn, method, url, rq, &resp);
    }
    char path[128];
    server__log_safe(path, sizeof path, url);
    server_log(SERVER_LOG_INFO, "msg=\"event stream\" path=%s realm=%s", path, realm);
    return rc;
}
