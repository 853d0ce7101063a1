/* conn.c - the store connections of the HTTP threads: one market_conn per thread.
 *
 * Each thread lazily creates its own market_conn on its first request that
 * needs the store, keeps it in thread-specific storage, and the key's
 * destructor frees it when the thread ends (market/ reconnects it after
 * errors).
 */
#include "server/server.h"

#include <pthread.h>

#include "market/market.h"
#include "server/server_impl.h"

static void conn_destroy(void *p) { market_conn_free(p); }

/* Makes s's thread-specific key (s->key_ok set). Returns 0, or -1 when out of
 * resources. */
int server__conn_key_create(server *s) {
    if (pthread_key_create(&s->conn_key, conn_destroy) != 0) return -1;
    s->key_ok = 1;
    return 0;
}

/* Returns this thread's connection to s's market, made on first use
 * (borrowed: freed when the thread ends, or by server__conn_key_delete()),
 * or NULL when out of memory. */
market_conn *server__thread_conn(server *s) {
    market_conn *c = pthread_getspecific(s->conn_key);
    if (c) return c;
    c = market_conn_new(s->market, NULL);
    if (c && pthread_setspecific(s->conn_key, c) != 0) {
        market_conn_free(c);
        c = NULL;
    }
    return c;
}

/* Frees this thread's connection (the pool threads freed theirs as they
 * ended) and deletes s's key, when made. This function can't fail. */
void server__conn_key_delete(server *s) {
    if (!s->key_ok) return;
    market_conn_free(pthread_getspecific(s->conn_key));
    pthread_key_delete(s->conn_key);
    s->key_ok = 0;
}
