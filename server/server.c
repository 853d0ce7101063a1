/* server.c - the libmicrohttpd daemon: bodies in, api_handle, responses out.
 *
 * DESIGN
 * By default libmicrohttpd runs a small pool of poll() event-loop threads
 * (--threads, default 2). Not epoll: libmicrohttpd 0.9.75 (Debian 12) can
 * abort the process when its epoll workers and MHD_quiesce_daemon() race to
 * remove the listening socket from an epoll set ("Failed to remove listen FD
 * from epoll set"), which a graceful stop does; with poll() quiescing only
 * signals each worker. A purchase does not block its thread: the access handler
 * asks api/ to begin it (api_handle_begin validates it), suspends the
 * connection, and hands it to the market (api_purchase_submit, which picks
 * the worker of its kind: the purchase queue, or a flash sale's worker); the
 * done callback resumes the connection, and libmicrohttpd calls the handler
 * again, which answers. A batch of purchases thus costs one wake-up of the
 * worker and one of each event loop, not a thread switch per request. Which
 * routes are deferred is api/'s to say (api_route_deferrable), and so is
 * which paths server/ answers itself (api_endpoint_find: /metrics and the
 * event streams); this file matches no API path and knows no kind of
 * order. Whether the store answered is api/'s to say too
 * (api_response_store_up). Reads
 * (GET) run on the event-loop thread. --threads 0 selects a thread per
 * connection instead, where every request, purchases included, runs on its
 * connection's thread (as does every purchase of the optimistic strategy).
 * The access handler is the usual three phases: allocate per-request state,
 * accumulate the body (up to API_BODY_MAX; a larger one is read and dropped
 * up to DISCARD_MAX so the 413 reaches the client, and one declared larger
 * still is answered at once), then answer. The per-request state is made
 * one step earlier, by on_uri(), which sees the request target before
 * libmicrohttpd percent-decodes it into a C string: a NUL there (raw, or
 * %00) would cut the path short ("/purchase%00x" would be routed as
 * "/purchase"), or a query value, so a target with a NUL or any other
 * control byte is refused (400 invalid_path) before it is routed. So is a
 * request whose body framing two parsers could read differently (400
 * bad_request): more than one Content-Length (libmicrohttpd would frame the
 * body by the first, a proxy in front perhaps by another), Transfer-Encoding
 * beside Content-Length, or any Transfer-Encoding but one "chunked". All are
 * answered at once,
 * without reading the body, and libmicrohttpd then closes the connection.
 * Each thread lazily creates its own market_conn, kept in thread-specific
 * storage and freed by the key's destructor when the thread ends. GET /metrics is served here (metrics.c).
 * With --cors-origin, every answer gets the CORS headers of its Origin, and a
 * preflight (OPTIONS, which a route would answer 405) gets 204 (cors.c).
 * GET / serves the market page, read from --web-dir at start (web.c), and
 * GET /events streams a realm's trades and listing changes (events.c).
 * Every request has an id (request_id.c): the client's X-Request-Id when it
 * is sane, else a new one; it is sent back in X-Request-Id and logged.
 * Graceful stop: quiesce (stop accepting), wait for requests in flight to
 * complete, stop the market's worker (it answers what is queued), then stop
 * the daemon.
 */
#include "server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "api/api.h"
#include "lock/lock.h"
#include "market/market.h"
#include "server/server_impl.h"

#define DRAIN_MS 10000 /* longest wait for requests in flight at stop */

struct server {
    server_config cfg;
    lock_client *lock;
    market *market;
    struct MHD_Daemon *daemon;
    pthread_key_t conn_key; /* this thread's market_conn */
    int key_ok;
    int port;
    atomic_long in_flight; /* requests begun and not yet completed */
    int async;             /* purchases suspend their connection instead of their thread */
    atomic_long purchases_in_flight; /* deferrable requests begun, not completed */
    atomic_long queue_depth;         /* purchases submitted to the market, not yet decided */
    server__metrics metrics;
    server__web web; /* the market page's files */
    server__events *events; /* GET /events */
    api_auth *auth;        /* player tokens' keys; NULL: --no-auth */
};

struct request {
    int started;         /* the access handler has seen it (phase 1 is over) */
    int bad_path;        /* the raw target holds a control byte, or %00-%1F / %7F */
    const char *uri_nul; /* where the raw target's C string ends (compared, never read) */
    char *body;
    size_t len, cap;
    size_t seen;  /* body bytes received, kept or not */
    int too_big;
    int64_t t0_us;
    /* A purchase handed to the market while its connection is suspended. */
    int pending;                 /* submitted; answered once done is set */
    atomic_int done;             /* set by the market's worker, then the connection resumes */
    struct MHD_Connection *conn;
    api_purchase deferred;
    api_response head;           /* route and player, for the log line */
    server *srv;                 /* for the queue depth, once submitted */
    int deferrable;              /* a deferrable route (api_route_deferrable()): in
                                    purchases_in_flight */
    char id[SERVER__REQUEST_ID_MAX + 1]; /* X-Request-Id */
};

static int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- logging: the only place in the service that prints ---- */

static atomic_int log_level = SERVER_LOG_INFO;

/* Sets the level below which server_log() prints nothing. Can't fail. */
void server_log_set_level(int level) { atomic_store(&log_level, level); }

/* Prints one line on stderr: UTC time, level, message. Can't fail. */
void server_log(int level, const char *fmt, ...) {
    if (level > atomic_load(&log_level)) return;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    char msg[1024], ts[32];
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s.%03ldZ level=%s %s\n", ts, now.tv_nsec / 1000000, names[level], msg);
}

/* ---- per-thread store connection ---- */

static void conn_destroy(void *p) { market_conn_free(p); }

static market_conn *thread_conn(server *s) {
    market_conn *c = pthread_getspecific(s->conn_key);
    if (c) return c;
    c = market_conn_new(s->market, NULL);
    if (c && pthread_setspecific(s->conn_key, c) != 0) {
        market_conn_free(c);
        c = NULL;
    }
    return c;
}

/* ---- the access handler ---- */

static const char *lookup(void *ud, enum api_arg_kind kind, const char *name) {
    return MHD_lookup_connection_value(ud, kind == API_ARG_QUERY ? MHD_GET_ARGUMENT_KIND
                                                                 : MHD_HEADER_KIND,
                                       name);
}

/* The request's Origin header when the server answers CORS, else NULL. */
static const char *request_origin(const server *s, struct MHD_Connection *conn) {
    return s->cfg.n_cors ? MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                       MHD_HTTP_HEADER_ORIGIN)
                         : NULL;
}

/* Whether the request is a CORS preflight of an allowed origin: OPTIONS with
 * Access-Control-Request-Method (cors.c says what it is answered). */
static int is_preflight(const server *s, struct MHD_Connection *conn, const char *method) {
    return s->cfg.n_cors && strcmp(method, MHD_HTTP_METHOD_OPTIONS) == 0 &&
           MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                       MHD_HTTP_HEADER_ACCESS_CONTROL_REQUEST_METHOD) &&
           server__cors_allow(&s->cfg, request_origin(s, conn));
}

/* Turns resp, a 405 of a preflight, into its 204: no body, the route's
 * methods (resp->allow) as Access-Control-Allow-Methods. */
static void preflight_reply(api_response *resp) {
    api_response_cleanup(resp);
    resp->status = 204;
}

/* Fills resp with the answer to method on a path whose route serves only
 * allow (a static string): 405 with Allow, or the 204 of a CORS preflight. */
static void refuse_method(const server *s, struct MHD_Connection *conn, const char *method,
                          const char *allow, api_response *resp) {
    api_error(405, "method_not_allowed", NULL, resp);
    resp->allow = allow;
    if (is_preflight(s, conn, method)) preflight_reply(resp);
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

/* GET / and the page's other files (web.c): from memory, as they were at start. */
static enum MHD_Result web_respond(server *s, struct MHD_Connection *conn, const char *method,
                                   const struct request *rq, const server__web_file *f) {
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
               f->path, (double)(now_us() - rq->t0_us) / 1000.0);
    return rc;
}

/* Copies s into out for a log line: bytes that are not printable ASCII, and
 * spaces, become '?', so a decoded path cannot forge or split a line. */
static void log_safe(char *out, size_t outlen, const char *s) {
    size_t i = 0;
    for (; s && s[i] && i + 1 < outlen; i++)
        out[i] = s[i] > ' ' && s[i] < 0x7f ? s[i] : '?';
    out[i] = '\0';
}

/* Copies text s into out for a quoted log value: printable ASCII and
 * spaces kept, a quote or backslash becomes '\'', anything else '?'. */
static void log_text(char *out, size_t outlen, const char *s) {
    size_t i = 0;
    for (; s && s[i] && i + 1 < outlen; i++)
        out[i] = s[i] == '"' || s[i] == '\\' ? '\'' : s[i] >= ' ' && s[i] < 0x7f ? s[i] : '?';
    out[i] = '\0';
}

/* GET /metrics: Prometheus text, rendered by metrics.c. */
static enum MHD_Result metrics_respond(server *s, struct MHD_Connection *conn, const char *method,
                                       struct request *rq) {
    api_response resp = {0};
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        refuse_method(s, conn, method, "GET, HEAD", &resp);
        return respond(s, conn, rq->id, &resp);
    }
    /* Redis up: the last outcome of a request that reached the store; when
     * there was none for SERVER__REDIS_STALE_MS, one scrape probes. */
    market_conn *mc = NULL;
    if (server__metrics_redis_stale(&s->metrics, lock_now_ms()) && (mc = thread_conn(s))) {
        char why[128];
        server__metrics_store_outcome(&s->metrics, market_health(mc, why, sizeof why) == MARKET_OK,
                                      lock_now_ms());
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
               method, (double)(now_us() - rq->t0_us) / 1000.0, rq->id);
    return rc;
}

static int body_append(struct request *rq, const char *data, size_t n) {
    if (rq->too_big || rq->len + n > API_BODY_MAX) {
        rq->too_big = 1;
        return 0;
    }
    if (rq->len + n + 1 > rq->cap) {
        size_t cap = rq->cap ? rq->cap : 1024;
        while (cap < rq->len + n + 1) cap *= 2;
        char *b = realloc(rq->body, cap);
        if (!b) return -1;
        rq->body = b;
        rq->cap = cap;
    }
    memcpy(rq->body + rq->len, data, n);
    rq->len += n;
    rq->body[rq->len] = '\0';
    return 0;
}

#define DISCARD_MAX (1024 * 1024) /* a too-large body up to this size is read and dropped */

/* Judges the declared Content-Length: 0 fine (or none), 1 too large but
 * small enough to read and drop (so the 413 reaches a client that is still
 * sending), 2 too large to read: answer at once and close. */
static int declared_too_big(struct MHD_Connection *conn) {
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (!cl) return 0;
    char *end;
    unsigned long long n = strtoull(cl, &end, 10);
    if (*end != '\0' || n <= API_BODY_MAX) return 0;
    return n <= DISCARD_MAX ? 1 : 2;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Returns 1 when raw request target uri (path and query, before
 * percent-decoding) holds a control byte (0x00-0x1F, 0x7F), raw or as a
 * %XX escape that libmicrohttpd would decode into one; else 0. A decoded
 * NUL would cut a path or a query value short without anyone seeing it. */
static int target_has_control(const char *uri) {
    for (const char *p = uri; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 || c == 0x7f) return 1;
        if (c == '%') {
            int hi = hex_value(p[1]), lo = hi < 0 ? -1 : hex_value(p[2]);
            if (lo >= 0 && (hi * 16 + lo < 0x20 || hi * 16 + lo == 0x7f)) return 1;
        }
    }
    return 0;
}

/* libmicrohttpd's URI log callback: called once per request with the raw
 * target, before it is split at '?' and percent-decoded. Makes the
 * request's state (freed by on_completed(), which libmicrohttpd calls for
 * every request this callback saw) and judges the path. Returns NULL when
 * out of memory; on_request() then closes the connection. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
    (void)cls;
    (void)conn;
    struct request *rq = calloc(1, sizeof *rq);
    if (!rq) return NULL;
    rq->t0_us = now_us();
    if (!uri) {
        rq->bad_path = 1;
    } else {
        rq->bad_path = target_has_control(uri);
        rq->uri_nul = uri + strlen(uri);
    }
    return rq;
}

/* Says whether the raw target held a NUL byte. libmicrohttpd (0.9.75) hands
 * out the target and the HTTP version as C strings cut from the request
 * line in place: the target ends where the space before the version was,
 * so the version starts right after the target's terminating NUL. When it
 * starts anywhere else, that NUL was the client's. */
static int raw_nul_in_target(const struct request *rq, const char *version) {
    return !rq->uri_nul || version != rq->uri_nul + 1;
}

/* How a request says where its body ends. */
struct framing {
    int content_lengths;    /* Content-Length headers */
    int transfer_encodings; /* Transfer-Encoding headers */
    int chunked_only;       /* every Transfer-Encoding is exactly "chunked" */
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value) {
    struct framing *f = cls;
    (void)kind;
    if (!key) return MHD_YES;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) f->content_lengths++;
    if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        f->transfer_encodings++;
        if (!value || strcasecmp(value, "chunked") != 0) f->chunked_only = 0;
    }
    return MHD_YES;
}

/* Returns why the request's framing is refused, or NULL when it is sound:
 * more than one Content-Length, a Transfer-Encoding beside a Content-Length,
 * or a Transfer-Encoding other than one "chunked". Each lets two parsers (a
 * proxy in front and us) disagree on where the body ends: request
 * smuggling. Can't fail. */
static const char *framing_refused(struct MHD_Connection *conn) {
    struct framing f = {0, 0, 1};
    (void)MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, &f);
    if (f.content_lengths > 1) return "more than one Content-Length header";
    if (f.transfer_encodings && f.content_lengths)
        return "both Transfer-Encoding and Content-Length";
    if (f.transfer_encodings > 1 || (f.transfer_encodings && !f.chunked_only))
        return "Transfer-Encoding other than a single 'chunked'";
    return NULL;
}

/* The market has decided rq's deferred request (api_purchase_submit()'s
 * done callback, on a market worker's thread): wake its connection. */
static void deferred_done(void *ud) {
    struct request *rq = ud;
    atomic_fetch_sub(&rq->srv->queue_depth, 1);
    atomic_store(&rq->done, 1);
    MHD_resume_connection(rq->conn);
}

/* Hands rq's validated request to the market (api_purchase_submit()) and
 * suspends the connection until deferred_done() resumes it; libmicrohttpd
 * then calls on_request() again, which answers. The connection is suspended
 * first, since the worker may finish before submit returns. */
static enum MHD_Result deferred_submit(server *s, struct MHD_Connection *conn, struct request *rq,
                                       api_response *head) {
    rq->head = *head; /* route and player only: no body yet */
    rq->conn = conn;
    rq->pending = 1;
    rq->srv = s;
    atomic_fetch_add(&s->queue_depth, 1); /* the done callback takes it off */
    MHD_suspend_connection(conn);
    api_purchase_submit(s->market, &rq->deferred, deferred_done, rq);
    return MHD_YES;
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

/* Sends resp, counts it and logs it. */
static enum MHD_Result answer(server *s, struct MHD_Connection *conn, const char *method,
                              const char *url, const struct request *rq, api_response *resp) {
    int status = resp->status, store_up = api_response_store_up(resp);
    const char *route = resp->route;
    char player[sizeof resp->player], realm[sizeof resp->realm], why[sizeof resp->why];
    char error[sizeof resp->error];
    memcpy(player, resp->player, sizeof player);
    memcpy(realm, resp->realm, sizeof realm);
    memcpy(why, resp->why, sizeof why);
    memcpy(error, resp->error, sizeof error);
    enum MHD_Result rc = respond(s, conn, rq->id, resp);
    int64_t us = now_us() - rq->t0_us;
    server__metrics_count(&s->metrics, route, method, realm, status, us);
    if (store_up >= 0) server__metrics_store_outcome(&s->metrics, store_up, lock_now_ms());
    char path[128], client[INET6_ADDRSTRLEN], safe_method[16];
    log_safe(path, sizeof path, url);
    log_safe(safe_method, sizeof safe_method, method);
    client_address(conn, client, sizeof client);
    server_log(SERVER_LOG_INFO,
               "msg=request method=%s path=%s status=%d error=%s latency_ms=%.3f realm=%s "
               "player=%s client=%s request_id=%s",
               safe_method, path, status, error[0] ? error : "-", (double)us / 1000.0,
               realm[0] ? realm : "-", player[0] ? player : "-", client, rq->id);
    if (why[0]) { /* the store's reason behind a 503: for the operator, not the client */
        char safe[sizeof resp->why];
        log_text(safe, sizeof safe, why);
        server_log(SERVER_LOG_WARN, "msg=\"store unavailable\" path=%s reason=\"%s\" request_id=%s",
                   path, safe, rq->id);
    }
    return rc;
}

/* GET /events: the realm's stream of trades and listing changes (events.c). */
static enum MHD_Result events_respond(server *s, struct MHD_Connection *conn, const char *method,
                                      const char *url, const struct request *rq,
                                      const char *realm) {
    api_response resp = {.route = NULL};
    if (strcmp(method, "GET") != 0) {
        refuse_method(s, conn, method, "GET", &resp);
        return answer(s, conn, method, url, rq, &resp);
    }
    if (!realm) {
        api_error(400, "bad_request", "realm id must match [A-Za-z0-9_-]{1,64}", &resp);
        return answer(s, conn, method, url, rq, &resp);
    }
    int status = 0;
    const char *why = NULL;
    enum MHD_Result rc = server__events_subscribe(s->events, &s->cfg, request_origin(s, conn), realm,
                                                  conn, &status, &why);
    if (status) {
        api_error(status, "events_unavailable", why, &resp);
        resp.retry_after_s = 1;
        return answer(s, conn, method, url, rq, &resp);
    }
    char path[128];
    log_safe(path, sizeof path, url);
    server_log(SERVER_LOG_INFO, "msg=\"event stream\" path=%s realm=%s", path, realm);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls) {
    server *s = cls;
    struct request *rq = *con_cls;
    api_response resp = {0};
    if (!rq) return MHD_NO; /* on_uri() ran out of memory: close the connection */
    if (!rq->started) { /* phase 1: a new request, its headers read */
        rq->started = 1;
        atomic_fetch_add(&s->in_flight, 1); /* not before: a stop waits for these */
        const char *id = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
        if (server__request_id_valid(id))
            snprintf(rq->id, sizeof rq->id, "%s", id);
        else
            server__request_id_make(rq->id, sizeof rq->id);
        rq->deferrable = api_route_deferrable(method, url);
        if (rq->deferrable) atomic_fetch_add(&s->purchases_in_flight, 1);
        /* Refusals of the request itself are answered now, without reading
         * the body; libmicrohttpd then closes the connection. */
        if (rq->bad_path || raw_nul_in_target(rq, version)) {
            api_error(400, "invalid_path", "the request target contains a NUL or control byte",
                      &resp);
            return answer(s, conn, method, url, rq, &resp);
        }
        const char *framing = framing_refused(conn);
        if (framing) {
            api_error(400, "bad_request", framing, &resp);
            return answer(s, conn, method, url, rq, &resp);
        }
        int big = declared_too_big(conn);
        rq->too_big = big != 0;
        if (big != 2) return MHD_YES; /* else answer now, without reading the body */
    } else if (*upload_size) { /* phase 2: body data (dropped once too large) */
        rq->seen += *upload_size;
        if (rq->seen > DISCARD_MAX) return MHD_NO; /* a chunked flood: close the connection */
        if (body_append(rq, upload_data, *upload_size) < 0) return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    /* phase 3: answer */
    char realm[MARKET_REALM_MAX + 1];
    int endpoint = rq->too_big ? API_ENDPOINT_ROUTE : api_endpoint_find(url, realm);
    if (endpoint == API_ENDPOINT_METRICS) return metrics_respond(s, conn, method, rq);
    const server__web_file *page = rq->too_big ? NULL : server__web_find(&s->web, url);
    if (page) return web_respond(s, conn, method, rq, page);
    if (endpoint == API_ENDPOINT_EVENTS && !rq->pending)
        return events_respond(s, conn, method, url, rq, realm[0] ? realm : NULL);
    if (rq->pending) { /* resumed: the market has answered */
        if (!atomic_load(&rq->done)) return MHD_YES; /* not ours to answer yet */
        resp = rq->head;
        api_purchase_end(&rq->deferred, &resp);
    } else if (rq->too_big) {
        api_error(413, "payload_too_large", "request body exceeds 65536 bytes", &resp);
    } else {
        market_conn *mc = thread_conn(s);
        api_request req = {method, url, rq->body, rq->len, lookup, conn,
                           s->auth,
                           s->cfg.admin_secret[0] ? s->cfg.admin_secret : NULL};
        if (!mc) {
            api_error(500, "internal_error", "out of memory", &resp);
        } else if (!s->async) {
            api_handle(mc, &req, &resp);
        } else if (api_handle_begin(mc, &req, &resp, &rq->deferred) != 0) {
            return deferred_submit(s, conn, rq, &resp);
        }
        if (resp.status == 405 && is_preflight(s, conn, method)) preflight_reply(&resp);
    }
    return answer(s, conn, method, url, rq, &resp);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)conn;
    (void)toe;
    server *s = cls;
    struct request *rq = *con_cls;
    if (!rq) return;
    if (rq->started) atomic_fetch_sub(&s->in_flight, 1);
    if (rq->deferrable) atomic_fetch_sub(&s->purchases_in_flight, 1);
    free(rq->body);
    free(rq);
    *con_cls = NULL;
}

/* ---- start and stop ---- */

static int resolve_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *sslen) {
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen || !colon[1]) return -1;
    size_t hlen = (size_t)(colon - listen);
    const char *h = listen;
    if (listen[0] == '[' && hlen >= 2 && listen[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    if (hlen >= sizeof host) return -1;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0 || !ai) return -1;
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *sslen = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

/* Opens a listening TCP socket on ss (cfg->listen). SO_REUSEADDR always, so
 * that a restart need not wait for the TIME_WAIT of the last run's
 * connections (the Debian 12 libmicrohttpd sets it only together with
 * SO_REUSEPORT); SO_REUSEPORT only with --reuse-port, so that an address
 * another process listens on is refused, not silently shared. Returns the
 * socket (close-on-exec), or -1 with a sentence naming the address in why. */
static int listen_socket(const server_config *cfg, const struct sockaddr_storage *ss,
                         socklen_t sslen, char *why, size_t whylen) {
    int on = 1;
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) == 0 &&
             (!cfg->reuse_port || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) == 0) &&
             (ss->ss_family != AF_INET6 || /* v6 only, as libmicrohttpd's own */
              setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) == 0) &&
             bind(fd, (const struct sockaddr *)ss, sslen) == 0 && listen(fd, SOMAXCONN) == 0;
    if (ok) return fd;
    int e = errno;
    if (fd >= 0) close(fd);
    if (e == EADDRINUSE && !cfg->reuse_port) {
        snprintf(why, whylen,
                 "cannot listen on %s: address already in use (another server there? servers "
                 "share an address only when every one is given --reuse-port)",
                 cfg->listen);
    } else if (e == EADDRINUSE) {
        snprintf(why, whylen,
                 "cannot listen on %s: address already in use by a process that does not "
                 "share it (--reuse-port)",
                 cfg->listen);
    } else {
        char msg[128];
        if (strerror_r(e, msg, sizeof msg) != 0) snprintf(msg, sizeof msg, "error %d", e);
        snprintf(why, whylen, "cannot listen on %s: %s", cfg->listen, msg);
    }
    return -1;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = '\0';
    server_log(SERVER_LOG_WARN, "httpd: %s", msg);
}

/* Parses a comma-separated list of Redlock masters (each a server or a
 * Sentinel group): an odd number, 1 to LOCK_REDLOCK_NODES_MAX. Returns 0, or
 * -1 with a sentence in why. */
static int parse_masters(const char *list, lock_redis_addr *nodes, size_t *n, char *why,
                         size_t whylen) {
    if (lock_redis_addr_parse_list(list, nodes, LOCK_REDLOCK_NODES_MAX, n) != LOCK_OK) {
        snprintf(why, whylen,
                 "redlock: bad --lock-redis list (want 1 to %d redis:// or redis-sentinel:// "
                 "URLs, comma-separated)",
                 LOCK_REDLOCK_NODES_MAX);
        return -1;
    }
    if (*n % 2 == 0) {
        snprintf(why, whylen, "redlock needs an odd number of masters (--lock-redis), not %zu",
                 *n);
        return -1;
    }
    return 0;
}

/* Builds s's lock client and market from its configuration. Returns
 * SERVER_OK, or SERVER_ERR_INVALID, _BACKEND, _NOMEM with a sentence in why
 * (what was built is freed by server_stop()). Redis need not be up:
 * connections are made on first use. */
static int market_build(server *s, char *why, size_t whylen) {
    const server_config *cfg = &s->cfg;
    market_config mcfg = {.redis_timeout_ms = cfg->redis_timeout_ms,
                          .min_replicas_ack = cfg->min_replicas_ack,
                          .replica_ack_timeout_ms = cfg->replica_ack_timeout_ms,
                          .batch_max = cfg->batch_max,
                          .workers = cfg->workers,
                          .lock_ttl_ms = cfg->lock_ttl_ms,
                          .acquire_timeout_ms = cfg->acquire_timeout_ms,
                          .trade_history = cfg->trade_history,
                          .trade_index = cfg->trade_index,
                          .test_stall_ms = cfg->test_stall_ms};
    if (lock_redis_addr_parse(cfg->redis, &mcfg.redis) < 0) {
        snprintf(why, whylen,
                 "bad Redis URL (want redis://[user:pass@]host[:port][/db], "
                 "redis-sentinel://[user:pass@]host[:port][,host[:port]...]/name[/db] or "
                 "redis-cluster://[user:pass@]host[:port][,host[:port]...])");
        return SERVER_ERR_INVALID;
    }
    int ack_ms = cfg->replica_ack_timeout_ms ? cfg->replica_ack_timeout_ms
                                              : cfg->redis_timeout_ms / 2; /* the market's default */
    if (cfg->min_replicas_ack > 0 && (ack_ms <= 0 || ack_ms >= cfg->redis_timeout_ms)) {
        snprintf(why, whylen,
                 "--replica-ack-timeout-ms (%d) must be above 0 and below --redis-timeout-ms (%d)",
                 ack_ms, cfg->redis_timeout_ms);
        return SERVER_ERR_INVALID;
    }
    if (market_strategy_parse(cfg->strategy, &mcfg.strategy) < 0) {
        snprintf(why, whylen, "unknown strategy '%s'", cfg->strategy);
        return SERVER_ERR_INVALID;
    }
    int lerr = 0, merr = 0;
    if (strcmp(cfg->lock, "local") == 0) {
        s->lock = lock_local_new(&lerr);
    } else if (strcmp(cfg->lock, "redlock") == 0) {
        lock_redis_addr nodes[LOCK_REDLOCK_NODES_MAX];
        size_t n = 0;
        if (parse_masters(cfg->lock_redis, nodes, &n, why, whylen) < 0) return SERVER_ERR_INVALID;
        s->lock = lock_redlock_new(nodes, n, cfg->redis_timeout_ms, &lerr);
    } else {
        lock_redis_addr where = mcfg.redis;
        if (cfg->lock_redis[0] && lock_redis_addr_parse(cfg->lock_redis, &where) < 0) {
            snprintf(why, whylen, "bad --lock-redis URL for the redis lock (one URL)");
            return SERVER_ERR_INVALID;
        }
        s->lock = lock_redis_new(&where, cfg->redis_timeout_ms, &lerr);
    }
    if (!s->lock) {
        snprintf(why, whylen, "lock backend '%s': %s", cfg->lock, lock_strerror(lerr));
        return lerr == LOCK_ERR_NOMEM ? SERVER_ERR_NOMEM : SERVER_ERR_BACKEND;
    }
    s->market = market_new(&mcfg, s->lock, &merr);
    if (!s->market) {
        snprintf(why, whylen, "market: %s", market_strerror(merr));
        return merr == MARKET_ERR_NOMEM ? SERVER_ERR_NOMEM : SERVER_ERR_INVALID;
    }
    return SERVER_OK;
}

/* Starts s's HTTP daemon on its configured address, over the market built
 * by market_build(). Returns SERVER_OK, or SERVER_ERR_INVALID, _LISTEN,
 * _NOMEM with a sentence in why (server_stop() frees what was made). */
static int daemon_start(server *s, char *why, size_t whylen) {
    const server_config *cfg = &s->cfg;
    if (pthread_key_create(&s->conn_key, conn_destroy) != 0) {
        snprintf(why, whylen, "out of memory");
        return SERVER_ERR_NOMEM;
    }
    s->key_ok = 1;

    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    if (resolve_listen(cfg->listen, &ss, &sslen) < 0) {
        snprintf(why, whylen, "bad listen address '%s' (want HOST:PORT)", cfg->listen);
        return SERVER_ERR_INVALID;
    }
    /* threads > 0: a pool of event loops, where a purchase suspends its
     * connection (see DESIGN); 0: a thread per connection, where it blocks
     * its thread. */
    s->async = cfg->threads > 0 && market_can_submit(s->market);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG |
                     MHD_USE_TURBO |
                     (cfg->threads ? MHD_USE_POLL : MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL) |
                     (cfg->threads ? MHD_ALLOW_SUSPEND_RESUME : 0); /* purchases (async) and
                                                                     event streams suspend */
    if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    int lfd = listen_socket(cfg, &ss, sslen, why, whylen);
    if (lfd < 0) return SERVER_ERR_LISTEN;
    /* libmicrohttpd gets a duplicate: when it fails to start, it may or may
     * not have closed the socket it was given, and ours is closed below
     * either way, never twice. */
    int mfd = fcntl(lfd, F_DUPFD_CLOEXEC, 0);
    struct MHD_OptionItem pool[] = { /* a pool size only when there is a pool */
        {cfg->threads ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, (intptr_t)cfg->threads, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    s->daemon = mfd < 0 ? NULL : MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)mfd,
        MHD_OPTION_ARRAY, pool,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->connection_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, cfg->connection_memory,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->per_ip_connections,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_END);
    if (!s->daemon) {
        /* Stop listening, whoever still holds a descriptor of the socket. */
        (void)shutdown(lfd, SHUT_RDWR);
        close(lfd);
        snprintf(why, whylen, "cannot serve on %s: the HTTP daemon did not start%s", cfg->listen,
                 mfd < 0 ? " (out of file descriptors)" : "");
        return SERVER_ERR_LISTEN;
    }
    close(lfd); /* the daemon has its own descriptor of the socket */
    if (cfg->reuse_port)
        server_log(SERVER_LOG_WARN, "msg=\"--reuse-port: other processes given it may listen on "
                                    "%s too and take a share of its connections\"",
                   cfg->listen);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : 0;
    return SERVER_OK;
}

/* Builds s->auth, the verification keys of player tokens, from s->cfg: the
 * --auth-secret (tokens without a kid), each --auth-key (PEM files read now), the
 * audience and the leeway. Returns SERVER_OK, SERVER_ERR_INVALID with a sentence in
 * why (a bad key; never the secret), or SERVER_ERR_NOMEM. */
static int auth_build(server *s, char *why, size_t whylen) {
    char kwhy[300];
    if (!(s->auth = api_auth_new())) return SERVER_ERR_NOMEM;
    api_auth_set_leeway(s->auth, s->cfg.auth_leeway_s);
    if (api_auth_set_audience(s->auth, s->cfg.auth_audience) < 0 ||
        (s->cfg.auth_secret[0] &&
         api_auth_set_secret(s->auth, s->cfg.auth_secret, kwhy, sizeof kwhy) < 0)) {
        snprintf(why, whylen, "bad --auth-secret or --auth-audience");
        return SERVER_ERR_INVALID;
    }
    const char *line = s->cfg.auth_keys;
    while (*line) {
        char spec[sizeof s->cfg.auth_keys];
        size_t n = strcspn(line, "\n");
        snprintf(spec, sizeof spec, "%.*s", (int)n, line);
        int rc = api_auth_add_key(s->auth, spec, kwhy, sizeof kwhy);
        if (rc < 0) {
            snprintf(why, whylen, "--auth-key: %s", kwhy);
            return SERVER_ERR_INVALID;
        }
        line += n + (line[n] == '\n');
    }
    return SERVER_OK;
}

/* Builds the lock client and market from cfg (market_build) and starts
 * serving (daemon_start). Returns a new server (stop and free with
 * server_stop), or NULL with *err set (SERVER_ERR_INVALID, _LISTEN,
 * _BACKEND, _NOMEM) and a sentence in why. */
server *server_start(const server_config *cfg, int *err, char *why, size_t whylen) {
    int dummy;
    if (!err) err = &dummy;
    *err = SERVER_ERR_NOMEM;
    snprintf(why, whylen, "out of memory");
    server *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cfg = *cfg;
    server__metrics_init(&s->metrics);
    server_log_set_level(cfg->log_level);
    if (!cfg->no_auth && !cfg->auth_secret[0] && !cfg->auth_keys[0]) {
        *err = SERVER_ERR_INVALID;
        snprintf(why, whylen, "no --auth-secret (MARKET_AUTH_SECRET) nor --auth-key "
                              "(MARKET_AUTH_KEYS) given; --no-auth serves without authentication");
    } else if (!cfg->no_auth && (*err = auth_build(s, why, whylen)) != SERVER_OK) {
        /* why says which key */
    } else {
        if (cfg->no_auth)
            server_log(SERVER_LOG_WARN, "msg=\"authentication is off (--no-auth): any client may "
                                        "act for any player\"");
        *err = market_build(s, why, whylen);
        if (*err == SERVER_OK && cfg->web_dir[0]) {
            int rc = server__web_load(&s->web, cfg->web_dir, why, whylen);
            if (rc < 0) *err = SERVER_ERR_INVALID;
            if (rc > 0) server_log(SERVER_LOG_INFO, "msg=\"no market page at GET /\" reason=\"%s\"", why);
        }
        if (*err == SERVER_OK && !(s->events = server__events_new(s->market, cfg->threads > 0,
                                                                     cfg->max_connections)))
            *err = SERVER_ERR_NOMEM;
        if (*err == SERVER_OK) *err = daemon_start(s, why, whylen);
    }
    if (*err == SERVER_OK) {
        why[0] = '\0';
        return s;
    }
    server_stop(s);
    return NULL;
}

/* Returns the TCP port the server listens on. Can't fail. */
int server_port(const server *s) { return s ? s->port : 0; }

/* Stops accepting, lets requests in flight finish (up to DRAIN_MS), stops the
 * daemon (its threads free their connections), then frees the market, the
 * lock client and s. NULL is a no-op. This function can't fail. */
void server_stop(server *s) {
    if (!s) return;
    if (s->daemon) {
        /* The quiesced listening socket is ours, but a pool's threads may
         * still poll it until they see the quiesce: stop listening now (new
         * connections are refused), close it only after MHD_stop_daemon. */
        MHD_socket fd = MHD_quiesce_daemon(s->daemon);
        if (fd != MHD_INVALID_SOCKET) (void)shutdown(fd, SHUT_RDWR);
        server__events_stop(s->events); /* event streams end: not requests to wait for */
        int64_t deadline = lock_now_ms() + DRAIN_MS;
        while (atomic_load(&s->in_flight) > 0 && lock_now_ms() < deadline) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        /* Purchases still queued are answered (their connections resumed)
         * while the daemon runs; any later one is refused. */
        market_shutdown(s->market);
        MHD_stop_daemon(s->daemon);
        if (fd != MHD_INVALID_SOCKET) close(fd);
    }
    if (s->key_ok) {
        /* The pool threads ran the destructor; this thread may hold one too. */
        market_conn_free(pthread_getspecific(s->conn_key));
        pthread_key_delete(s->conn_key);
    }
    server__events_free(s->events); /* its followers use the market */
    market_free(s->market);
    lock_free(s->lock);
    server__web_free(&s->web);
    api_auth_free(s->auth);
    free(s);
}
