/* request.c - the access handler: one request from its raw target to its answer.
 *
 * DESIGN
 * libmicrohttpd calls the access handler in the usual three phases:
 * allocate per-request state, accumulate the body (up to API_BODY_MAX; a
 * larger one is read and dropped up to DISCARD_MAX so the 413 reaches the
 * client, and one declared larger still is answered at once), then answer.
 * The per-request state is made one step earlier, by server__on_uri(), which
 * sees the request target before libmicrohttpd percent-decodes it into a C
 * string: a NUL there (raw, or %00) would cut the path short
 * ("/purchase%00x" would be routed as "/purchase"), or a query value, so a
 * target with a NUL or any other control byte is refused (400 invalid_path)
 * before it is routed. So is a request whose body framing two parsers could
 * read differently (400 bad_request): more than one Content-Length
 * (libmicrohttpd would frame the body by the first, a proxy in front perhaps
 * by another), Transfer-Encoding beside Content-Length, or any
 * Transfer-Encoding but one "chunked". All are answered at once, without
 * reading the body, and libmicrohttpd then closes the connection. Every
 * request has an id (request_id.c): the client's X-Request-Id when it is
 * sane, else a new one; it is sent back in X-Request-Id and logged.
 *
 * A write the market serves as an order (a purchase, a list, an unlist, a
 * sale buy) does not block its thread: the handler asks api/ to begin it
 * (api_handle_begin validates it), suspends the connection, and hands it to
 * the market (api_deferred_submit); the done callback resumes the
 * connection, and libmicrohttpd calls the handler again, which asks api/ to
 * answer it (api_deferred_end). A batch of orders thus costs one wake-up of
 * the worker and one of each event loop, not a thread switch per request. Which
 * routes are deferred is api/'s to say (api_route_deferrable), and so is
 * which paths server/ answers itself (api_endpoint_find: /metrics and the
 * event streams); this file matches no API path and knows no kind of order.
 * Reads (GET) run on the event-loop thread; with --threads 0 (a thread per
 * connection) every request, writes included, runs on its connection's
 * thread.
 *
 * Called by daemon.c (the callbacks it gives libmicrohttpd); answers through
 * respond.c, over conn.c and log.c.
 */
#include "server/server.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

#include "api/api.h"
#include "market/market.h"
#include "server/server_impl.h"

/* api_request's lookup hook: a query argument or a header of the connection ud. */
static const char *lookup(void *ud, enum api_arg_kind kind, const char *name) {
    return MHD_lookup_connection_value(ud, kind == API_ARG_QUERY ? MHD_GET_ARGUMENT_KIND
                                                                 : MHD_HEADER_KIND,
                                       name);
}

/* Appends n bytes of body to rq's (NUL-terminated); once the body would
 * pass API_BODY_MAX, drops them and sets rq->too_big. Returns 0, or -1 when
 * out of memory. */
static int body_append(server__request *rq, const char *data, size_t n) {
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

/* libmicrohttpd's URI log callback (cls: the server): called once per request
 * with the raw target, before it is split at '?' and percent-decoded. Takes
 * the request's state (server__request_take(); given back by
 * server__on_completed(), which libmicrohttpd calls for every request this
 * callback saw) and judges the path. Returns NULL when out of memory;
 * server__on_request() then closes the connection. */
void *server__on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
    (void)conn;
    server__request *rq = server__request_take(cls);
    if (!rq) return NULL;
    rq->t0_us = server__now_us();
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
static int raw_nul_in_target(const server__request *rq, const char *version) {
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

/* The market has decided rq's deferred request (api_deferred_submit()'s
 * done callback, on a market worker's thread): wake its connection. */
static void deferred_done(void *ud) {
    server__request *rq = ud;
    atomic_fetch_sub(&rq->srv->queue_depth, 1);
    atomic_store(&rq->done, 1);
    MHD_resume_connection(rq->conn);
}

/* Hands rq's validated request to the market (api_deferred_submit()) and
 * suspends the connection until deferred_done() resumes it; libmicrohttpd
 * then calls server__on_request() again, which answers. The connection is suspended
 * first, since the worker may finish before submit returns. */
static enum MHD_Result deferred_submit(server *s, struct MHD_Connection *conn,
                                       server__request *rq, api_response *head) {
    rq->head = *head; /* route and player only: no body yet */
    rq->conn = conn;
    rq->pending = 1;
    rq->srv = s;
    atomic_fetch_add(&s->queue_depth, 1); /* the done callback takes it off */
    MHD_suspend_connection(conn);
    api_deferred_submit(s->market, &rq->deferred, deferred_done, rq);
    return MHD_YES;
}

/* Phase 1: a new request, its headers read. Counts it, gives it its id, and
 * answers at once a target or a framing that is refused. Returns what
 * libmicrohttpd is told, with *go_on set when the request is to be answered
 * now without reading its body (declared far too large). */
static enum MHD_Result request_begin(server *s, struct MHD_Connection *conn, const char *url,
                                     const char *method, const char *version,
                                     server__request *rq, int *go_on) {
    api_response resp = {0};
    *go_on = 0;
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
        return server__answer(s, conn, method, url, rq, &resp);
    }
    const char *framing = framing_refused(conn);
    if (framing) {
        api_error(400, "bad_request", framing, &resp);
        return server__answer(s, conn, method, url, rq, &resp);
    }
    int big = declared_too_big(conn);
    rq->too_big = big != 0;
    *go_on = big == 2; /* else read the body first */
    return MHD_YES;
}

/* Phase 2: body data, kept up to API_BODY_MAX and dropped past it. Returns
 * MHD_NO (close the connection) on a flood past DISCARD_MAX or out of
 * memory. */
static enum MHD_Result request_body(server__request *rq, const char *data, size_t *size) {
    rq->seen += *size;
    if (rq->seen > DISCARD_MAX) return MHD_NO; /* a chunked flood: close the connection */
    if (body_append(rq, data, *size) < 0) return MHD_NO;
    *size = 0;
    return MHD_YES;
}

/* Phase 3, for a request of api/'s: answered by api_handle(), begun and
 * handed to the market (answered when it resumes), or refused (413). */
static enum MHD_Result request_api(server *s, struct MHD_Connection *conn, const char *url,
                                   const char *method, server__request *rq) {
    api_response resp = {0};
    if (rq->pending) { /* resumed: the market has answered */
        if (!atomic_load(&rq->done)) return MHD_YES; /* not ours to answer yet */
        resp = rq->head;
        api_deferred_end(&rq->deferred, &resp);
    } else if (rq->too_big) {
        api_error(413, "payload_too_large", "request body exceeds 65536 bytes", &resp);
    } else {
        market_conn *mc = server__thread_conn(s);
        api_request req = {method,
                           url,
                           rq->len ? rq->body : NULL, /* a kept buffer holds an old body */
                           rq->len,
                           lookup,
                           conn,
                           s->auth,
                           s->cfg.admin_secret[0] ? s->cfg.admin_secret : NULL,
                           s->cfg.trade_parties_public};
        if (!mc) {
            api_error(500, "internal_error", "out of memory", &resp);
        } else if (!s->async) {
            api_handle(mc, &req, &resp);
        } else if (api_handle_begin(mc, &req, &resp, &rq->deferred) != 0) {
            return deferred_submit(s, conn, rq, &resp);
        }
        if (resp.status == 405 && server__is_preflight(s, conn, method))
            server__preflight_reply(&resp);
    }
    return server__answer(s, conn, method, url, rq, &resp);
}

/* Phase 3: answers the request, by whoever serves its path. */
static enum MHD_Result request_answer(server *s, struct MHD_Connection *conn, const char *url,
                                      const char *method, server__request *rq) {
    char realm[MARKET_REALM_MAX + 1];
    int endpoint = rq->too_big ? API_ENDPOINT_ROUTE : api_endpoint_find(url, realm);
    if (endpoint == API_ENDPOINT_METRICS) return server__respond_metrics(s, conn, method, rq);
    const server__web_file *page = rq->too_big ? NULL : server__web_find(&s->web, url);
    if (page) return server__respond_web(s, conn, method, rq, page);
    if (endpoint == API_ENDPOINT_EVENTS && !rq->pending)
        return server__respond_events(s, conn, method, url, rq, realm[0] ? realm : NULL);
    return request_api(s, conn, url, method, rq);
}

/* libmicrohttpd's access handler (cls: the server), called for each phase
 * of a request whose state server__on_uri() made. Returns MHD_NO to close
 * the connection: out of memory, a body flood, an answer that cannot be
 * queued. */
enum MHD_Result server__on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                   const char *method, const char *version,
                                   const char *upload_data, size_t *upload_size,
                                   void **con_cls) {
    server *s = cls;
    server__request *rq = *con_cls;
    if (!rq) return MHD_NO; /* server__on_uri() ran out of memory: close the connection */
    if (!rq->started) {
        int go_on;
        enum MHD_Result rc = request_begin(s, conn, url, method, version, rq, &go_on);
        if (!go_on) return rc;
    } else if (*upload_size) {
        return request_body(rq, upload_data, upload_size);
    }
    return request_answer(s, conn, url, method, rq);
}

/* libmicrohttpd's completion callback (cls: the server): the request is
 * over, answered or not; gives its state back (server__request_give()). This
 * function can't fail. */
void server__on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                          enum MHD_RequestTerminationCode toe) {
    (void)conn;
    (void)toe;
    server *s = cls;
    server__request *rq = *con_cls;
    if (!rq) return;
    if (rq->started) atomic_fetch_sub(&s->in_flight, 1);
    if (rq->deferrable) atomic_fetch_sub(&s->purchases_in_flight, 1);
    server__request_give(s, rq);
    *con_cls = NULL;
}
