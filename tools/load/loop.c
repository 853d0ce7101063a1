/* loop.c - market-load's connections to the service: the target, the probe, the epoll loop.
 *
 * One thread, one epoll set, level-triggered, one request in flight per
 * keep-alive connection (see DESIGN in load.h). The plan says what to send,
 * http.c writes and reads the bytes, the run collects what came back.
 */
#include "tools/load/load.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum cstate { C_WAITING, C_CONNECTING, C_READY, C_BUSY };

/* One connection. */
struct conn {
    int fd;
    uint32_t gen; /* bumped on every connect: drops events for an old fd */
    enum cstate state;
    int want_out;          /* EPOLLOUT is in the interest set */
    unsigned fails;        /* connect failures since the last answer */
    unsigned long answers; /* answers since the connection was opened */
    int64_t retry_at;      /* C_WAITING: reconnect at (ns) */
    int64_t sent_at;       /* C_BUSY: when the request was written (ns) */
    load_pick pick;        /* the request in flight */
    char out[LOAD_OUT_MAX];
    size_t out_len, out_off;
    char *in;
    size_t in_len, in_cap;
    load_http_head head; /* head.hdr_len 0 until the header block is complete */
};

struct load_loop {
    const load_opts *o;
    const load_target *t;
    load_plan *plan; /* NULL in hold mode */
    load_run *run;
    int ep;
    struct conn *conns;
    size_t nconn;
    size_t inflight;
    int stopping;
    int64_t last_answer, progress_at;
    unsigned long long progress_ok;
};

static volatile sig_atomic_t stop_signals;

static void on_stop_signal(int sig) {
    (void)sig;
    stop_signals++;
}

void load_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
}

int64_t load_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the target ---- */

int load_target_resolve(load_target *t, const load_url *u, char *why, size_t whylen) {
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)u->port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(u->name, port, &hints, &ai);
    if (rc != 0) {
        snprintf(why, whylen, "cannot resolve '%s': %s", u->name, gai_strerror(rc));
        return -1;
    }
    memcpy(&t->addr, ai->ai_addr, ai->ai_addrlen);
    t->addrlen = ai->ai_addrlen;
    t->family = ai->ai_family;
    freeaddrinfo(ai);
    snprintf(t->host, sizeof t->host, "%s", u->host);
    return 0;
}

int load_probe(const load_target *t, const char *url, char *why, size_t whylen) {
    int fd = socket(t->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, whylen, "socket: %s", strerror(errno));
        return -1;
    }
    int err = 0;
    if (connect(fd, (const struct sockaddr *)&t->addr, t->addrlen) < 0) {
        err = errno;
        if (err == EINPROGRESS) {
            int ep = epoll_create1(EPOLL_CLOEXEC);
            struct epoll_event ev = {.events = EPOLLOUT}, out;
            int n = -1;
            if (ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0) do
                    n = epoll_wait(ep, &out, 1, LOAD_PROBE_MS);
                while (n < 0 && errno == EINTR);
            socklen_t len = sizeof err;
            if (ep < 0 || n < 0)
                err = errno;
            else if (n == 0)
                err = ETIMEDOUT;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
            if (ep >= 0) close(ep);
        }
    }
    close(fd);
    if (err) snprintf(why, whylen, "cannot connect to %s: %s", url, strerror(err));
    return err ? -1 : 0;
}

/* ---- one connection ---- */

/* Fills c->out with the next request. Returns 0 when there is nothing left to buy. */
static int next_request(load_loop *l, struct conn *c) {
    if (l->o->hold) {
        c->pick = (load_pick){LOAD_KIND_HEALTH, LOAD_NONE, LOAD_NONE, LOAD_NONE};
        int n = load_http_health(c->out, sizeof c->out, l->t->host);
        if (n < 0) return 0;
        c->out_len = (size_t)n;
        return 1;
    }
    if (!load_plan_next(l->plan, &c->pick)) {
        l->run->stop_reason =
            l->plan->mix == LOAD_MIX_AUCTIONS ? "every auction ended (auctions)"
            : l->plan->mix == LOAD_MIX_BOOK   ? "no goods to trade (book)"
            : l->plan->mix == LOAD_MIX_DIRECT ? "no two players of a realm (direct)"
            : c->pick.kind == LOAD_KIND_FLASH
                ? (l->plan->flash_over ? "the sale is sold out (flash)"
                                       : "every buyer reached the limit (flash)")
            : c->pick.kind == LOAD_KIND_DISTINCT ? "no more items to buy (distinct)"
                                                 : "no more items to fight over (contended)";
        return 0;
    }
    if (c->pick.kind == LOAD_KIND_BID) { /* the auctions mix */
        const load_pick *k = &c->pick;
        int n = load_http_bid(
            c->out, sizeof c->out, l->t->host, load_plan_player_realm(l->plan, k->buyer),
            load_plan_player(l->plan, k->buyer), k->order, k->price, l->o->auth_secret);
        if (n == LOAD_HTTP_ERR_TOKEN) l->run->stop_reason = "cannot make a bidder's token";
        if (n < 0) return 0;
        c->out_len = (size_t)n;
        return 1;
    }
    if (c->pick.kind >= LOAD_KIND_PROPOSE) { /* the direct mix */
        const load_pick *k = &c->pick;
        int n = load_http_direct(c->out, sizeof c->out, l->t->host,
                                 load_plan_player_realm(l->plan, k->buyer), k->kind,
                                 load_plan_player(l->plan, k->buyer),
                                 k->other != LOAD_NONE ? load_plan_player(l->plan, k->other) : "",
                                 k->quantity, k->price, k->order, l->o->auth_secret);
        if (n == LOAD_HTTP_ERR_TOKEN) l->run->stop_reason = "cannot make a player's token";
        if (n < 0) return 0;
        c->out_len = (size_t)n;
        return 1;
    }
    if (c->pick.kind >= LOAD_KIND_ORDER) { /* the book mix */
        const load_pick *k = &c->pick;
        int n = load_http_book(c->out, sizeof c->out, l->t->host, load_plan_pick_realm(l->plan, k),
                               k->kind, load_plan_pick_player(l->plan, k),
                               load_plan_good(l->plan, k->item), k->quantity, k->price, k->order,
                               l->o->auth_secret);
        if (n == LOAD_HTTP_ERR_TOKEN) l->run->stop_reason = "cannot make a player's token";
        if (n < 0) return 0;
        c->out_len = (size_t)n;
        return 1;
    }
    if (c->pick.kind == LOAD_KIND_FLASH) {
        int n = load_http_sale_buy(c->out, sizeof c->out, l->t->host,
                                   load_plan_player_realm(l->plan, c->pick.buyer),
                                   l->plan->sale, load_plan_player(l->plan, c->pick.buyer), 1,
                                   l->o->auth_secret);
        if (n == LOAD_HTTP_ERR_TOKEN) l->run->stop_reason = "cannot make a buyer's token";
        if (n < 0) return 0;
        c->out_len = (size_t)n;
        return 1;
    }
    int n = load_http_purchase(c->out, sizeof c->out, l->t->host,
                               load_plan_realm(l->plan, c->pick.item),
                               load_plan_player(l->plan, c->pick.buyer),
                               load_plan_seller(l->plan, c->pick.item),
                               load_plan_item(l->plan, c->pick.item), l->o->auth_secret);
    if (n == LOAD_HTTP_ERR_TOKEN) l->run->stop_reason = "cannot make a buyer's token";
    if (n < 0) return 0;
    c->out_len = (size_t)n;
    return 1;
}

static void conn_close(struct conn *c, int64_t retry_at) {
    if (c->fd >= 0) close(c->fd); /* also leaves the epoll set */
    c->fd = -1;
    c->state = C_WAITING;
    c->want_out = 0;
    c->retry_at = retry_at;
    c->in_len = c->head.hdr_len = 0;
}

static void fail_note(load_loop *l, const char *what, int err) {
    snprintf(l->run->last_error, sizeof l->run->last_error, "%s: %s", what,
             err ? strerror(err) : "");
}

/* The connection broke: the request in flight (if any) is a transport error. */
static void conn_fail(load_loop *l, struct conn *c, const char *what, int err) {
    fail_note(l, what, err);
    if (c->state == C_BUSY) {
        l->run->k.transport++;
        l->run->k.requests++;
        l->inflight--;
    } else if (c->state == C_CONNECTING) {
        l->run->k.connect_errors++;
    }
    int64_t now = load_now_ns(), backoff = 0;
    if (c->state == C_CONNECTING) {
        c->fails++;
        backoff = (int64_t)1000000 << (c->fails < 10 ? c->fails : 10); /* 2 ms .. ~1 s */
    }
    conn_close(c, now + backoff);
}

static int ep_set(load_loop *l, struct conn *c, int op, int want_out) {
    struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0)};
    ev.data.u64 = (uint64_t)c->gen << 32 | (uint64_t)(c - l->conns);
    if (epoll_ctl(l->ep, op, c->fd, &ev) < 0) return -1;
    c->want_out = want_out;
    return 0;
}

static void conn_dispatch(load_loop *l, struct conn *c);

static void conn_open(load_loop *l, struct conn *c) {
    int fd = socket(l->t->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        c->state = C_CONNECTING;
        conn_fail(l, c, "socket", errno);
        return;
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* best effort */
    c->fd = fd;
    c->gen++;
    c->answers = 0;
    c->in_len = c->head.hdr_len = 0;
    int rc = connect(fd, (const struct sockaddr *)&l->t->addr, l->t->addrlen);
    if (rc < 0 && errno != EINPROGRESS) {
        c->state = C_CONNECTING;
        conn_fail(l, c, "connect", errno);
        return;
    }
    c->state = rc == 0 ? C_READY : C_CONNECTING;
    if (ep_set(l, c, EPOLL_CTL_ADD, c->state == C_CONNECTING) < 0) {
        int e = errno;
        c->state = C_CONNECTING;
        conn_fail(l, c, "epoll_ctl", e);
        return;
    }
    if (c->state == C_READY) conn_dispatch(l, c);
}

static void conn_flush(load_loop *l, struct conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            conn_fail(l, c, "send", errno);
            return;
        }
        c->out_off += (size_t)w;
    }
    int want = c->out_off < c->out_len;
    if (want != c->want_out && ep_set(l, c, EPOLL_CTL_MOD, want) < 0)
        conn_fail(l, c, "epoll_ctl", errno);
}

/* Writes the next request on a READY connection, or leaves it idle. */
static void conn_dispatch(load_loop *l, struct conn *c) {
    if (l->stopping) return;
    if (l->o->requests && l->run->k.requests + l->inflight >= l->o->requests) {
        l->stopping = 1;
        l->run->stop_reason = "request count reached";
        return;
    }
    if (l->o->hold && c->sent_at) return; /* one request each */
    if (!next_request(l, c)) {
        l->stopping = 1;
        l->run->exhausted = 1;
        return;
    }
    c->out_off = 0;
    c->state = C_BUSY;
    c->head = (load_http_head){0, -1, 0, 0};
    c->sent_at = load_now_ns();
    l->inflight++;
    conn_flush(l, c);
}

/* Returns 1 when text occurs in the n bytes at p (not NUL-terminated). */
static int has_text(const char *p, size_t n, const char *text) {
    size_t m = strlen(text);
    for (size_t i = 0; m <= n && i <= n - m; i++)
        if (memcmp(p + i, text, m) == 0) return 1;
    return 0;
}

/* What the answer in c (of status) tells the plan (load_plan_answered()): a resting buy
 * order's or a proposed trade's id (201), the least a bid's auction takes now, or -1 when
 * it is sold or ended; else 0. */
static int64_t answer_value(const struct conn *c, int status) {
    const char *body = c->in + c->head.hdr_len;
    size_t n = c->head.body_len > 0 ? (size_t)c->head.body_len : 0;
    if (c->pick.kind == LOAD_KIND_BID) {
        if ((status == 200 && has_text(body, n, "\"state\":\"sold\"")) ||
            (status == 409 && has_text(body, n, "\"auction_closed\"")))
            return -1;
        int64_t v = load_http_body_int(body, n, status == 200 ? "bid" : "min_bid");
        return status == 200 && v > 0 ? v + 1 : status == 409 && v > 0 ? v : 0;
    }
    if (status != 201 || !n) return 0;
    return load_http_body_int(body, n, c->pick.kind == LOAD_KIND_PROPOSE ? "id" : "order_id");
}

static void conn_answered(load_loop *l, struct conn *c) {
    load_run *run = l->run;
    int64_t now = load_now_ns();
    uint64_t lat = (uint64_t)(now - c->sent_at);
    int status = c->head.status;
    l->inflight--;
    run->k.requests++;
    l->last_answer = now;
    c->fails = 0;
    c->answers++;
    if (status >= 100 && status < 600)
        run->k.by_code[status]++;
    else
        run->k.other++;
    if (status == 503 && c->head.body_len > 0) {
        const char *body = c->in + c->head.hdr_len;
        size_t n = (size_t)c->head.body_len;
        if (has_text(body, n, "\"not_replicated\"") || has_text(body, n, "\"store_unavailable\""))
            run->k.unknown++;
    }
    load_hist_add(&run->all, lat);
    if (status == 200 || status == 201) load_hist_add(&run->ok, lat);
    if (c->pick.kind == LOAD_KIND_FLASH && status == 409 && !run->t_soldout)
        run->t_soldout = now;
    if (c->pick.kind == LOAD_KIND_HEALTH)
        run->held++;
    else
        load_plan_answered(l->plan, &c->pick, status, answer_value(c, status));
    size_t used = c->head.hdr_len + (size_t)(c->head.body_len > 0 ? c->head.body_len : 0);
    if (c->head.close_after || c->in_len != used) {
        run->k.reconnects++;
        conn_close(c, now);
        if (!l->stopping && !l->o->hold) conn_open(l, c);
        return;
    }
    c->in_len = c->head.hdr_len = 0;
    c->state = C_READY;
    conn_dispatch(l, c);
}

static void conn_readable(load_loop *l, struct conn *c) {
    if (c->in_cap - c->in_len < 2048) {
        size_t ncap = c->in_cap ? c->in_cap * 2 : 4096;
        char *b = ncap <= LOAD_IN_MAX ? realloc(c->in, ncap) : NULL;
        if (!b) {
            conn_fail(l, c, "answer too large", 0);
            return;
        }
        c->in = b;
        c->in_cap = ncap;
    }
    ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (r < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            conn_fail(l, c, "recv", errno);
        return;
    }
    if (r == 0) {
        if (c->state == C_BUSY && c->head.hdr_len && c->head.body_len < 0) {
            c->head.body_len = (long long)(c->in_len - c->head.hdr_len);
            conn_answered(l, c); /* a body delimited by the close */
        } else if (c->state == C_BUSY) {
            conn_fail(l, c, "connection closed by the server mid-answer", 0);
        } else if (c->answers == 0 && !l->o->hold) {
            c->state = C_CONNECTING; /* closed at once (connection limit?): back off */
            conn_fail(l, c, "connection closed by the server before any answer", 0);
        } else {
            l->run->k.reconnects++; /* an idle keep-alive connection timed out */
            conn_close(c, load_now_ns());
            if (!l->stopping && !l->o->hold) conn_open(l, c);
        }
        return;
    }
    c->in_len += (size_t)r;
    if (c->state != C_BUSY) {
        conn_fail(l, c, "unexpected bytes on an idle connection", 0);
        return;
    }
    if (!c->head.hdr_len) {
        int rc = load_http_parse_head(c->in, c->in_len, &c->head);
        if (rc < 0) {
            conn_fail(l, c, "malformed HTTP answer", 0);
            return;
        }
        if (rc == 0) return;
    }
    if (c->head.body_len >= 0 && c->in_len >= c->head.hdr_len + (size_t)c->head.body_len)
        conn_answered(l, c);
}

static void conn_event(load_loop *l, struct conn *c, uint32_t ev) {
    if (c->state == C_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
        if (err == 0 && !(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
        if (err || (ev & EPOLLERR)) {
            conn_fail(l, c, "connect", err ? err : ECONNREFUSED);
            return;
        }
        c->state = C_READY;
        if (ep_set(l, c, EPOLL_CTL_MOD, 0) < 0) {
            c->state = C_CONNECTING;
            conn_fail(l, c, "epoll_ctl", errno);
            return;
        }
        conn_dispatch(l, c);
        return;
    }
    if ((ev & EPOLLOUT) && c->state == C_BUSY && c->out_off < c->out_len) {
        conn_flush(l, c);
        if (c->state != C_BUSY) return;
    }
    if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) conn_readable(l, c);
}

/* ---- the loop ---- */

static void raise_fd_limit(size_t need) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need + 64) {
        rl.rlim_cur =
            rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need + 64 ? need + 64 : rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl); /* best effort: socket() reports EMFILE */
    }
}

load_loop *load_loop_new(const load_opts *o, const load_target *t, load_plan *plan, load_run *run,
                         char *why, size_t whylen) {
    load_loop *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    *l = (load_loop){.o = o, .t = t, .plan = plan, .run = run, .ep = -1};
    l->nconn = o->hold ? o->hold : o->buyers;
    raise_fd_limit(l->nconn);
    if ((l->ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        snprintf(why, whylen, "epoll_create1: %s", strerror(errno));
        load_loop_free(l);
        return NULL;
    }
    if (!(l->conns = calloc(l->nconn, sizeof *l->conns))) {
        snprintf(why, whylen, "out of memory");
        load_loop_free(l);
        return NULL;
    }
    for (size_t i = 0; i < l->nconn; i++)
        l->conns[i].fd = -1;
    return l;
}

void load_loop_free(load_loop *l) {
    if (!l) return;
    if (l->conns)
        for (size_t i = 0; i < l->nconn; i++) {
            if (l->conns[i].fd >= 0) close(l->conns[i].fd);
            free(l->conns[i].in);
        }
    free(l->conns);
    if (l->ep >= 0) close(l->ep);
    free(l);
}

static void progress(load_loop *l, int64_t now, int final) {
    const load_run *run = l->run;
    double el = (double)(now - run->t0) / 1e9;
    unsigned long long ok = run->k.by_code[200];
    double dt = (double)(now - l->progress_at) / 1e9;
    double rate = dt > 0 ? (double)(ok - l->progress_ok) / dt : 0;
    unsigned long long errs = run->k.transport + run->k.connect_errors + run->k.other;
    for (int s = 100; s < 600; s++)
        if (s != 200 && s != 402 && s != 404) errs += run->k.by_code[s];
    fprintf(stderr, "\r[%6.1fs] %8.0f purchases/s  %llu requests  p99 %.2f ms  errors %llu\033[K%s",
            el, rate, run->k.requests, load_ms(load_hist_pct(&run->all, 99)), errs,
            final ? "\n" : "");
    l->progress_at = now;
    l->progress_ok = ok;
}

int load_loop_run(load_loop *l) {
    const load_opts *o = l->o;
    load_run *run = l->run;
    const int64_t timeout = (int64_t)o->timeout_ms * 1000000;
    int tty = !o->quiet && isatty(STDERR_FILENO);
    int64_t deadline = o->duration_s > 0 ? (int64_t)(o->duration_s * 1e9) : 0;
    int64_t drain_until = 0, next_scan = 0;
    struct epoll_event evs[256];
    size_t nconn = l->nconn;
    run->t0 = l->progress_at = l->last_answer = load_now_ns();
    for (size_t i = 0; i < nconn; i++)
        conn_open(l, &l->conns[i]);
    int announced = 0;
    for (;;) {
        int64_t now = load_now_ns();
        if (stop_signals && !l->stopping) {
            l->stopping = 1;
            run->stop_reason = "interrupted";
        }
        if (deadline && now - run->t0 >= deadline && !l->stopping) {
            l->stopping = 1;
            run->stop_reason = o->hold ? "held for the duration" : "duration reached";
        }
        if (l->stopping && !drain_until) drain_until = now + (int64_t)LOAD_DRAIN_MS * 1000000;
        if (l->stopping && (l->inflight == 0 || now >= drain_until || stop_signals > 1)) break;
        if (o->hold && run->held == nconn && !announced) {
            printf("holding %zu connections\n", nconn);
            if (fflush(stdout) != 0) return -1;
            announced = 1;
        }
        if (now >= next_scan) {
            next_scan = now + 10000000;
            for (size_t i = 0; i < nconn; i++) {
                struct conn *c = &l->conns[i];
                if (c->state == C_WAITING && now >= c->retry_at && !l->stopping &&
                    !(o->hold && c->sent_at))
                    conn_open(l, c);
                else if (c->state == C_BUSY && now - c->sent_at > timeout)
                    conn_fail(l, c, "timeout", ETIMEDOUT);
            }
            if ((run->k.transport || run->k.connect_errors) && !o->hold &&
                !(l->stopping && l->inflight == 0) &&
                now - l->last_answer > (int64_t)LOAD_DEAD_MS * 1000000) {
                run->aborted = 1;
                run->stop_reason = "the server stopped answering";
                break;
            }
        }
        if (tty && now - l->progress_at >= 1000000000) progress(l, now, 0);
        int n = epoll_wait(l->ep, evs, 256, 10);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail_note(l, "epoll_wait", errno);
            run->aborted = 1;
            run->stop_reason = "epoll_wait failed";
            break;
        }
        for (int i = 0; i < n; i++) {
            uint64_t idx = evs[i].data.u64 & UINT32_MAX;
            struct conn *c = idx < nconn ? &l->conns[idx] : NULL;
            if (c && c->fd >= 0 && c->gen == (uint32_t)(evs[i].data.u64 >> 32))
                conn_event(l, c, evs[i].events);
        }
    }
    run->t_end = load_now_ns();
    for (size_t i = 0; i < nconn; i++) {
        struct conn *c = &l->conns[i];
        if (c->state == C_BUSY) conn_fail(l, c, "no answer before the drain deadline", 0);
        conn_close(c, 0);
    }
    if (tty) progress(l, run->t_end, 1);
    return run->aborted ? -1 : 0;
}
