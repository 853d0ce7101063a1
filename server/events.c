/* events.c - GET /events: a realm's trades, listing changes and auctions' changes as
 * Server-Sent Events.
 *
 * DESIGN
 * A follower thread per realm that has subscribers (at most
 * SERVER__EVENTS_REALMS at once; one ends, freeing its slot, once its realm has
 * had none for EVENTS_IDLE_POLLS polls) reads, every EVENTS_POLL_MS, the realm's trades
 * (trades:{r}), listing changes (market:{r}:changes) and auctions' changes
 * (market:{r}:bids) after the last entries it saw, all in one snapshot
 * (market_feed_after(): a commit lands before every read or after every one,
 * so no change goes out before one committed ahead of it), from the store
 * every server shares: so a browser sees what any server committed, and
 * nothing that was not committed. Each new entry becomes one SSE message,
 * formatted once and shared by reference among the realm's subscribers, in
 * commit order (stream ids are the store's clock).
 * A follower sends at most EVENTS_READ entries of each stream a poll, so a
 * burst reaches subscribers at a pace a reading client keeps up with.
 * A subscriber is a streaming response (MHD_create_response_from_callback)
 * with a queue of at most EVENTS_QUEUE messages. Its reader copies queued
 * messages out; with none, it suspends its connection (thread pool) or waits
 * on a condition (a thread per connection), and the follower resumes or wakes
 * it when it queues more. A subscriber whose queue is full, a browser slower
 * than the market, is ended (its EventSource reconnects and reloads): no
 * subscriber can make the server hold more than EVENTS_QUEUE messages for it,
 * or slow anyone else. Streams may take a quarter of --max-connections at
 * most (SERVER__EVENTS_SUBSCRIBERS at most), so pages cannot crowd out the API.
 * Every EVENTS_PING_MS each subscriber gets a comment line, which keeps
 * proxies from closing an idle stream. A browser that went away is seen by
 * its realm's follower at its next poll: libmicrohttpd does not watch a
 * suspended connection (nor one whose reader waits), so the follower peeks
 * at each waiting subscriber's socket (reap_gone) and ends the stream of
 * one its peer closed, which frees its slot at once.
 * Lock order: the hub's mutex, then libmicrohttpd's (the reader suspends under
 * the hub's mutex); resumes happen after the hub's mutex is released, from a
 * list threaded through the subscribers (no allocation that could fail and
 * leave one suspended). Readers wait on one condition, followers nap on
 * another that only a stop signals, so one realm's messages do not wake
 * another realm's follower. A
 * suspended connection is never completed by libmicrohttpd, so its subscriber
 * outlives the resume. server__events_stop() ends every stream (a graceful
 * stop then finds no request in flight), the followers stop, and
 * server__events_free() waits for them (they are detached: an idle one ends
 * by itself).
 */
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>

#include "rconn/rconn.h"
#include "server/server_impl.h"

#define EVENTS_QUEUE 4096    /* messages queued for one subscriber, at most (a pointer each) */
#define EVENTS_POLL_MS 200   /* a follower's reads of the store, apart */
#define EVENTS_PING_MS 15000 /* a comment to every subscriber, apart */
#define EVENTS_READ 1000     /* entries of each stream one poll reads, at most: a follower sends
                                at most 10,000 messages a second, and a queue holds two polls' */
#define EVENTS_IDLE_POLLS 25 /* polls without a subscriber (5 s) before a follower ends */

/* One SSE message, shared by the subscribers it is queued for. */
typedef struct ev_msg {
    atomic_int refs;
    size_t len;
    char text[];
} ev_msg;

struct server__sub {
    server__events *hub;
    int realm; /* index into hub->realms */
    struct MHD_Connection *conn;
    MHD_socket fd; /* conn's socket, peeked at by reap_gone (MHD_INVALID_SOCKET: unknown) */
    ev_msg *q[EVENTS_QUEUE];
    size_t head, count, off; /* off: bytes of q[head] already sent */
    int suspended;           /* the reader suspended conn; a follower resumes it */
    int ended;               /* the stream ends (queue full, or the server stops) */
    server__sub *prev, *next;
    server__sub *wake_next;  /* in a list of connections to resume (no allocation) */
};

typedef struct ev_realm {
    char id[MARKET_REALM_MAX + 1];
    int active;   /* a follower runs for it */
    size_t nsubs; /* its subscribers */
    server__events *hub;
} ev_realm;

struct server__events {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* new messages, for thread-per-connection readers */
    pthread_cond_t stop_cv; /* the followers' naps: only stopping signals it */
    market *market;
    int suspend; /* 1: readers suspend their connection; 0: they wait on cv */
    int parties; /* trades' buyers and sellers are public (--public-trade-parties) */
    void (*test_read)(void *); /* test hook: called after each poll's read (cfg) */
    void *test_arg;
    atomic_int stopping; /* written under mu; read without it by the followers' loops */
    size_t nsubs, max_subs;
    server__sub *subs;
    ev_realm realms[SERVER__EVENTS_REALMS];
    int followers; /* follower threads running (detached; each ends itself) */
};

static void msg_unref(ev_msg *m) {
    if (m && atomic_fetch_sub(&m->refs, 1) == 1) free(m);
}

/* Returns a new message: "id: <id>\nevent: <event>\ndata: <data>\n\n" (or a
 * comment line when event is NULL), with one reference; NULL on out-of-memory. */
static ev_msg *msg_new(const char *id, const char *event, const char *data) {
    char head[160];
    int hn = event ? snprintf(head, sizeof head, "id: %s\nevent: %s\ndata: ", id, event)
                   : snprintf(head, sizeof head, "%s", data);
    if (hn < 0 || (size_t)hn >= sizeof head) return NULL;
    size_t dn = event ? strlen(data) : 0;
    ev_msg *m = malloc(sizeof *m + (size_t)hn + dn + 3);
    if (!m) return NULL;
    atomic_init(&m->refs, 1);
    memcpy(m->text, head, (size_t)hn);
    memcpy(m->text + hn, event ? data : "", dn);
    m->len = (size_t)hn + dn;
    if (event) {
        memcpy(m->text + m->len, "\n\n", 2);
        m->len += 2;
    }
    return m;
}

/* Resumes the connections of the list w (built under the hub's mutex, which
 * the caller no longer holds). A suspended connection is not completed by
 * libmicrohttpd, so each subscriber on the list is alive until resumed. */
static void resume_all(server__sub *w) {
    while (w) {
        server__sub *next = w->wake_next;
        struct MHD_Connection *conn = w->conn;
        MHD_resume_connection(conn); /* w may be freed from here on */
        w = next;
    }
}

/* Puts s on the list *wake of connections to resume, if its reader
 * suspended it (called under the hub's mutex). */
static void wake_later(server__sub *s, server__sub **wake) {
    if (!s->suspended) return;
    s->suspended = 0;
    s->wake_next = *wake;
    *wake = s;
}

/* Queues m for every subscriber of realm r, ends those whose queue is full,
 * and wakes the ones waiting. */
static void broadcast(server__events *h, int r, ev_msg *m) {
    server__sub *wake = NULL;
    pthread_mutex_lock(&h->mu);
    for (server__sub *s = h->subs; s; s = s->next) {
        if (s->realm != r || s->ended) continue;
        if (s->count == EVENTS_QUEUE) {
            s->ended = 1; /* slower than the market: end it, it reconnects */
        } else {
            atomic_fetch_add(&m->refs, 1);
            s->q[(s->head + s->count++) % EVENTS_QUEUE] = m;
        }
        wake_later(s, &wake);
    }
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    resume_all(wake);
}

/* Whether the peer of a stream's socket fd closed it or the connection broke
 * (a peek that reads nothing; never blocks, takes nothing). */
static int peer_gone(MHD_socket fd) {
    char c;
    if (fd == MHD_INVALID_SOCKET) return 0;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Ends the streams of realm r whose browser went away while they waited
 * for messages (see DESIGN), so that their slots are freed now, not at the
 * next ping. Only waiting subscribers are peeked at: libmicrohttpd neither
 * closes nor reuses their sockets meanwhile. */
static void reap_gone(server__events *h, int r) {
    server__sub *wake = NULL;
    int ended = 0;
    pthread_mutex_lock(&h->mu);
    for (server__sub *s = h->subs; s; s = s->next) {
        if (s->realm != r || s->ended || s->count || !(s->suspended || !h->suspend)) continue;
        if (!peer_gone(s->fd)) continue;
        s->ended = ended = 1;
        wake_later(s, &wake);
    }
    if (ended) pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    resume_all(wake);
}

/* Compares two stream ids "<ms>-<seq>": <0, 0, >0. */
static int id_cmp(const char *a, const char *b) {
    unsigned long long am = strtoull(a, NULL, 10), bm = strtoull(b, NULL, 10);
    if (am != bm) return am < bm ? -1 : 1;
    const char *ad = strchr(a, '-'), *bd = strchr(b, '-');
    unsigned long long as = ad ? strtoull(ad + 1, NULL, 10) : 0, bs = bd ? strtoull(bd + 1, NULL, 10) : 0;
    return as < bs ? -1 : as > bs;
}

/* Sleeps up to ms, less when the hub stops. Returns 1 when it is stopping. */
static int nap(server__events *h, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&h->mu);
    if (!h->stopping) (void)pthread_cond_timedwait(&h->stop_cv, &h->mu, &ts);
    int stop = h->stopping;
    pthread_mutex_unlock(&h->mu);
    return stop;
}

/* How many entries of feed stream s (0 trades, 1 listing changes, 2 auctions' changes) page
 * f holds, and the id of its k-th. */
static size_t feed_n(const market_feed *f, int s) {
    return s == 0 ? f->ntrades : s == 1 ? f->nchanges : f->nauctions;
}
static const char *feed_id(const market_feed *f, int s, size_t k) {
    return s == 0 ? f->trades[k].id : s == 1 ? f->changes[k].id : f->auctions[k].id;
}

/* Sends the entries of page f to realm r's subscribers, in commit order (entries of one
 * millisecond: trades, then listing changes, then auctions'), up to cutoff (NULL: all of
 * them): a stream whose read was a full page may have older entries still unread, so
 * nothing later than its page's last may go before them. sent[s] gets how many of stream
 * s went. */
static void send_new(server__events *h, int r, const market_feed *f, const char *cutoff,
                     size_t sent[MARKET_FEEDS]) {
    static const char *const names[MARKET_FEEDS] = {"trade", "listing", "auction"};
    size_t at[MARKET_FEEDS] = {0, 0, 0};
    for (;;) {
        int s = -1;
        for (int k = 0; k < MARKET_FEEDS; k++)
            if (at[k] < feed_n(f, k) &&
                (s < 0 || id_cmp(feed_id(f, k, at[k]), feed_id(f, s, at[s])) < 0))
                s = k;
        if (s < 0) break;
        const char *id = feed_id(f, s, at[s]);
        if (cutoff && id_cmp(id, cutoff) > 0) break;
        size_t len = 0, i = at[s]++;
        char *data = s == 0   ? api_trade_text(&f->trades[i], h->parties, &len)
                     : s == 1 ? api_change_text(&f->changes[i], &len)
                              : api_auction_event_text(&f->auctions[i], &len);
        ev_msg *m = data ? msg_new(id, names[s], data) : NULL;
        free(data);
        if (m) {
            broadcast(h, r, m);
            msg_unref(m);
        }
    }
    memcpy(sent, at, sizeof at);
}

/* Whether realm slot r may end its follower: no subscriber for
 * EVENTS_IDLE_POLLS polls (counted by *idle). It then frees the slot. */
static int idle_end(server__events *h, int r, int *idle) {
    pthread_mutex_lock(&h->mu);
    int end = 0;
    if (h->realms[r].nsubs > 0) {
        *idle = 0;
    } else if (++*idle >= EVENTS_IDLE_POLLS) {
        h->realms[r].active = 0; /* the slot is free for another realm */
        end = 1;
    }
    pthread_mutex_unlock(&h->mu);
    return end;
}

/* A realm's follower: polls the store for new trades and listing changes
 * while the realm has subscribers. */
static void *follow(void *arg) {
    ev_realm *rl = arg;
    (void)prctl(PR_SET_NAME, "market-events", 0, 0, 0); /* for top -H and perf; cosmetic */
    server__events *h = rl->hub;
    int r = (int)(rl - h->realms), err = 0, idle = 0;
    char realm[MARKET_REALM_MAX + 1];
    memcpy(realm, rl->id, sizeof realm);
    market_conn *c = NULL;
    char last[MARKET_FEEDS][MARKET_TRADE_ID_MAX + 1] = {"", "", ""};
    int started = 0;
    int64_t ping = rconn_now_ms() + EVENTS_PING_MS;
    while (!nap(h, EVENTS_POLL_MS) && !idle_end(h, r, &idle)) {
        reap_gone(h, r);
        if (rconn_now_ms() >= ping) {
            ping = rconn_now_ms() + EVENTS_PING_MS;
            ev_msg *m = msg_new(NULL, NULL, ": ping\n\n");
            if (m) {
                broadcast(h, r, m);
                msg_unref(m);
            }
        }
        if (!c && !(c = market_conn_new(h->market, &err))) continue; /* out of memory: later */
        if (!started) { /* from now on: what is already there is the past */
            started = market_feed_last(c, realm, last) == MARKET_OK;
            continue;
        }
        market_feed f;
        const char *after[MARKET_FEEDS] = {last[0], last[1], last[2]};
        int rc = market_feed_after(c, realm, after, EVENTS_READ, &f);
        if (h->test_read) h->test_read(h->test_arg);
        if (rc == MARKET_OK) {
            /* a full page may be followed by older entries than the other streams' */
            const char *cutoff = NULL;
            for (int s = 0; s < MARKET_FEEDS; s++) {
                size_t n = feed_n(&f, s);
                if (n == EVENTS_READ && (!cutoff || id_cmp(feed_id(&f, s, n - 1), cutoff) < 0))
                    cutoff = feed_id(&f, s, n - 1);
            }
            size_t sent[MARKET_FEEDS];
            send_new(h, r, &f, cutoff, sent);
            for (int s = 0; s < MARKET_FEEDS; s++)
                if (sent[s]) memcpy(last[s], feed_id(&f, s, sent[s] - 1), sizeof last[s]);
        } /* else the store is down: the same reads next time */
        market_feed_cleanup(&f);
    }
    market_conn_free(c);
    pthread_mutex_lock(&h->mu);
    if (h->stopping) h->realms[r].active = 0;
    h->followers--;
    pthread_cond_broadcast(&h->stop_cv); /* server__events_free() waits for the last */
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* The reader of a subscriber's stream: queued messages, else a wait. */
static ssize_t sub_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    server__sub *s = cls;
    server__events *h = s->hub;
    pthread_mutex_lock(&h->mu);
    if (!h->suspend && !s->count && !s->ended && !h->stopping) { /* a thread of its own: wait */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        (void)pthread_cond_timedwait(&h->cv, &h->mu, &ts);
    }
    size_t n = 0;
    while (s->count && n < max) {
        ev_msg *m = s->q[s->head];
        size_t k = m->len - s->off < max - n ? m->len - s->off : max - n;
        memcpy(buf + n, m->text + s->off, k);
        n += k;
        s->off += k;
        if (s->off == m->len) {
            msg_unref(m);
            s->head = (s->head + 1) % EVENTS_QUEUE;
            s->count--;
            s->off = 0;
        }
    }
    ssize_t rc = (ssize_t)n;
    if (n == 0 && (s->ended || h->stopping)) {
        rc = MHD_CONTENT_READER_END_OF_STREAM;
    } else if (n == 0 && h->suspend) {
        s->suspended = 1;
        MHD_suspend_connection(s->conn);
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

/* Frees a subscriber once libmicrohttpd is done with its stream. */
static void sub_free(void *cls) {
    server__sub *s = cls;
    server__events *h = s->hub;
    pthread_mutex_lock(&h->mu);
    if (s->prev) s->prev->next = s->next;
    else h->subs = s->next;
    if (s->next) s->next->prev = s->prev;
    h->nsubs--;
    h->realms[s->realm].nsubs--;
    pthread_mutex_unlock(&h->mu);
    for (size_t i = 0; i < s->count; i++) msg_unref(s->q[(s->head + i) % EVENTS_QUEUE]);
    free(s);
}

/* Makes a hub for market m's events, as cfg says: with an HTTP thread pool
 * (cfg->threads > 0) readers suspend their connection (libmicrohttpd's
 * suspend/resume); streams may take a quarter of cfg->max_connections;
 * cfg->trade_parties_public: trades name their buyer and seller. Returns
 * NULL on out-of-memory. */
server__events *server__events_new(market *m, const server_config *cfg) {
    server__events *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    if (pthread_mutex_init(&h->mu, NULL) != 0) {
        free(h);
        return NULL;
    }
    if (pthread_cond_init(&h->cv, NULL) != 0) {
        pthread_mutex_destroy(&h->mu);
        free(h);
        return NULL;
    }
    if (pthread_cond_init(&h->stop_cv, NULL) != 0) {
        pthread_cond_destroy(&h->cv);
        pthread_mutex_destroy(&h->mu);
        free(h);
        return NULL;
    }
    h->market = m;
    h->suspend = cfg->threads > 0;
    h->parties = cfg->trade_parties_public;
    h->test_read = cfg->test_events_read;
    h->test_arg = cfg->test_events_arg;
    h->max_subs = cfg->max_connections / 4 ? cfg->max_connections / 4 : 1;
    if (h->max_subs > SERVER__EVENTS_SUBSCRIBERS) h->max_subs = SERVER__EVENTS_SUBSCRIBERS;
    return h;
}

/* Queues conn's answer to GET /events of realm: a stream of the realm's
 * events from now on. Returns MHD_YES, or MHD_NO (libmicrohttpd closes the
 * connection); *status is 0 when the stream was queued, else the status to
 * answer (503: too many subscribers or realms, or out of memory) with a
 * sentence in why. */
int server__events_subscribe(server__events *h, const server_config *cfg, const char *origin,
                             const char *realm, struct MHD_Connection *conn, int *status,
                             const char **why) {
    *status = 503;
    server__sub *s = calloc(1, sizeof *s);
    ev_msg *hello = msg_new(NULL, NULL, "retry: 3000\n: connected\n\n");
    if (!s || !hello) {
        free(s);
        msg_unref(hello);
        *why = "out of memory";
        return MHD_YES;
    }
    pthread_mutex_lock(&h->mu);
    int r = -1, free_slot = -1;
    for (int i = 0; i < SERVER__EVENTS_REALMS; i++) {
        if (h->realms[i].active && strcmp(h->realms[i].id, realm) == 0) r = i;
        if (!h->realms[i].active && free_slot < 0) free_slot = i;
    }
    *why = h->stopping                     ? "the server is stopping"
           : h->nsubs >= h->max_subs         ? "too many event streams open"
           : r < 0 && free_slot < 0          ? "too many realms followed"
                                             : NULL;
    if (!*why && r < 0) { /* the realm's first subscriber: start its follower */
        ev_realm *rl = &h->realms[free_slot];
        snprintf(rl->id, sizeof rl->id, "%s", realm);
        rl->hub = h;
        rl->nsubs = 0;
        pthread_t th;
        pthread_attr_t attr;
        int ok = pthread_attr_init(&attr) == 0;
        if (ok && (pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) != 0 ||
                   pthread_create(&th, &attr, follow, rl) != 0))
            ok = 0;
        if (ok) {
            rl->active = 1;
            h->followers++;
            r = free_slot;
        } else {
            *why = "cannot start a thread";
        }
        pthread_attr_destroy(&attr);
    }
    if (*why) {
        pthread_mutex_unlock(&h->mu);
        free(s);
        msg_unref(hello);
        return MHD_YES;
    }
    s->hub = h;
    s->realm = r;
    s->conn = conn;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    s->fd = ci ? ci->connect_fd : MHD_INVALID_SOCKET;
    s->q[0] = hello;
    s->count = 1;
    s->next = h->subs;
    if (h->subs) h->subs->prev = s;
    h->subs = s;
    h->nsubs++;
    h->realms[r].nsubs++;
    pthread_mutex_unlock(&h->mu);

    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sub_read, s, sub_free);
    if (!resp) {
        sub_free(s);
        *why = "out of memory";
        return MHD_YES;
    }
    *status = 0;
    enum MHD_Result rc =
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream") == MHD_YES &&
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache") == MHD_YES &&
                MHD_add_response_header(resp, "X-Accel-Buffering", "no") == MHD_YES &&
                server__cors_add(resp, cfg, origin, NULL) == 0
            ? MHD_queue_response(conn, MHD_HTTP_OK, resp)
            : MHD_NO;
    MHD_destroy_response(resp); /* sub_free() runs when the stream is done */
    return rc;
}

/* Ends every stream (each reader then finishes its stream) and stops the
 * followers' polling. This function can't fail. */
void server__events_stop(server__events *h) {
    if (!h) return;
    server__sub *wake = NULL;
    pthread_mutex_lock(&h->mu);
    h->stopping = 1;
    for (server__sub *s = h->subs; s; s = s->next) {
        s->ended = 1;
        wake_later(s, &wake);
    }
    pthread_cond_broadcast(&h->cv);
    pthread_cond_broadcast(&h->stop_cv);
    pthread_mutex_unlock(&h->mu);
    resume_all(wake);
}

/* Stops h (server__events_stop()), waits for its followers to end and frees
 * it; the daemon must be stopped, so no subscriber is left. NULL is a no-op. */
void server__events_free(server__events *h) {
    if (!h) return;
    server__events_stop(h);
    pthread_mutex_lock(&h->mu);
    while (h->followers > 0) pthread_cond_wait(&h->stop_cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    pthread_cond_destroy(&h->stop_cv);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
