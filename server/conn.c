/* conn.c - what each HTTP thread keeps for itself: its store connection
 * (one market_conn per thread) and its spare request states.
 *
 * Each thread lazily makes its state on its first request, keeps it in
 * thread-specific storage, and the key's destructor frees it when the thread
 * ends (market/ reconnects the connection after errors).
 *
 * A request's state (server__request) is about 11 KB, most of it the order
 * it may hand to the market. Allocated and zeroed for every request, it was
 * 4% of the server's CPU at 64 buyers (perf: calloc and its memset under
 * server__on_uri()). So a request that completes leaves its state, and its
 * body's buffer, to its thread's spares (at most SPARE_MAX), and the next
 * request of that thread takes it back, clearing only its head (see
 * server__request). libmicrohttpd calls both callbacks of a request on the
 * thread that serves its connection; a state may still end on another
 * thread's list, which is only a spare kept elsewhere.
 */
#include "server/server.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "market/market.h"
#include "server/server_impl.h"

#define SPARE_MAX 32              /* spare request states a thread keeps */
#define SPARE_BODY_MAX (8 * 1024) /* the largest body buffer a spare keeps */

/* One thread's own. */
typedef struct thread_state {
    market_conn *conn;      /* made on the first request that needs the store */
    server__request *spare; /* states of completed requests, linked by next_spare */
    size_t n_spare;
} thread_state;

static void spare_free(server__request *rq) {
    free(rq->body);
    free(rq);
}

static void state_destroy(void *p) {
    thread_state *t = p;
    if (!t) return;
    market_conn_free(t->conn);
    while (t->spare) {
        server__request *rq = t->spare;
        t->spare = rq->next_spare;
        spare_free(rq);
    }
    free(t);
}

/* Makes s's thread-specific key (s->key_ok set). Returns 0, or -1 when out of
 * resources. */
int server__conn_key_create(server *s) {
    if (pthread_key_create(&s->conn_key, state_destroy) != 0) return -1;
    s->key_ok = 1;
    return 0;
}

/* This thread's state, made on first use; NULL when out of memory. */
static thread_state *state_get(server *s) {
    thread_state *t = pthread_getspecific(s->conn_key);
    if (t) return t;
    t = calloc(1, sizeof *t);
    if (t && pthread_setspecific(s->conn_key, t) != 0) {
        free(t);
        t = NULL;
    }
    return t;
}

/* Returns this thread's connection to s's market, made on first use
 * (borrowed: freed when the thread ends, or by server__conn_key_delete()),
 * or NULL when out of memory. */
market_conn *server__thread_conn(server *s) {
    thread_state *t = state_get(s);
    if (!t) return NULL;
    if (!t->conn) t->conn = market_conn_new(s->market, NULL);
    return t->conn;
}

/* Returns a request state with its head cleared (the fields before
 * server__request.body; the body's buffer and the order are whatever a
 * completed request left): one of this thread's spares, or a new one.
 * NULL when out of memory. */
server__request *server__request_take(server *s) {
    thread_state *t = state_get(s);
    server__request *rq = t ? t->spare : NULL;
    if (rq) {
        t->spare = rq->next_spare;
        t->n_spare--;
        memset(rq, 0, offsetof(server__request, body));
        return rq;
    }
    return calloc(1, sizeof *rq);
}

/* Gives back the state of a completed request: kept as a spare of this
 * thread, or freed. NULL is a no-op. This function can't fail. */
void server__request_give(server *s, server__request *rq) {
    if (!rq) return;
    thread_state *t = state_get(s);
    if (!t || t->n_spare >= SPARE_MAX) {
        spare_free(rq);
        return;
    }
    if (rq->cap > SPARE_BODY_MAX) {
        free(rq->body);
        rq->body = NULL;
        rq->cap = 0;
    }
    rq->next_spare = t->spare;
    t->spare = rq;
    t->n_spare++;
}

/* Frees this thread's state (the pool threads freed theirs as they ended)
 * and deletes s's key, when made. This function can't fail. */
void server__conn_key_delete(server *s) {
    if (!s->key_ok) return;
    state_destroy(pthread_getspecific(s->conn_key));
    (void)pthread_setspecific(s->conn_key, NULL);
    pthread_key_delete(s->conn_key);
    s->key_ok = 0;
}
