/* test_book_faults.c - the book under load while its servers fail.
 *
 * Under each strategy, three market-server processes on one Redis (leases
 * of 1 s) serve 64 buyers posting and cancelling buy orders and 64 sellers
 * selling into the book and listing, on three goods, each client spreading
 * its requests over the three servers, with a 5% cut of every sale paid to
 * the house. Mid-run one server is killed (-9) and another paused (SIGSTOP)
 * past its lease, then resumed. Afterwards the store is audited: funds
 * (the house's with them) and escrow together conserved, every unit in one
 * place, every order's escrow its buyer's and every order in its book, no
 * funds or escrow negative; every fill an answer reported is a trade in the
 * store at that price, never over the buy order's max_price nor under the
 * sale's min_price; and the store holds no buy order of the run that no
 * answer (or unanswered request) accounts for.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "tests/helpers/cmocka_all.h"

#include "lock/lock.h"
#include "rconn/rconn.h"
#include "market/market.h"
#include "tests/helpers/redis_proc.h"
#include "tests/helpers/server_proc.h"

#define REALM MARKET_REALM_DEFAULT
#define SERVERS 3
#define CLIENTS 128 /* even: buyers p0, p2, ...; odd: sellers p1, p3, ... */
#define GOODS 3
#define FUNDS 100000
#define UNITS 60 /* each seller's units of each good */
#define FILLS_MAX 100000

static th_redis redis;

/* A fill an answer reported: its trade, and the bound its order set. */
struct fill {
    char trade[MARKET_TRADE_ID_MAX + 1];
    int64_t price, bound; /* bound: the buy order's max_price (buy) or the least (sell) */
    int buy;
};

struct run {
    int ports[SERVERS];
    atomic_int stop;
    pthread_mutex_t mu;
    struct fill *fills;
    size_t n_fills;
    long resting; /* 201s: buy orders that rested */
    long unknown; /* requests without an answer, or 503: each may have done its work */
    long answers;
};

struct client {
    struct run *run;
    int id;
};

struct body {
    char buf[16384];
    size_t len;
};

static size_t collect(char *d, size_t s, size_t n, void *ud) {
    struct body *b = ud;
    size_t k = s * n, room = sizeof b->buf - 1 - b->len;
    memcpy(b->buf + b->len, d, k < room ? k : room);
    b->len += k < room ? k : room;
    b->buf[b->len] = '\0';
    return s * n;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Notes the fills of an answer's body (their trades, prices and bound). */
static void note_fills(struct run *r, const char *text, int buy, int64_t bound) {
    json_error_t e;
    json_t *j = json_loads(text, 0, &e), *fills = j ? json_object_get(j, "fills") : NULL;
    size_t i;
    json_t *f;
    pthread_mutex_lock(&r->mu);
    json_array_foreach(fills, i, f) {
        if (r->n_fills == FILLS_MAX) break;
        struct fill *x = &r->fills[r->n_fills++];
        snprintf(x->trade, sizeof x->trade, "%s",
                 json_string_value(json_object_get(f, "trade_id")) ?: "");
        x->price = (int64_t)json_integer_value(json_object_get(f, "price"));
        x->bound = bound;
        x->buy = buy;
    }
    pthread_mutex_unlock(&r->mu);
    json_decref(j);
}

static void *client_main(void *arg) {
    struct client *cl = arg;
    struct run *r = cl->run;
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    struct body b;
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    unsigned seed = (unsigned)cl->id * 7919u + 3;
    int64_t mine[256];
    size_t n_mine = 0;
    for (long n = 0; !atomic_load(&r->stop); n++) {
        char url[96], body[256];
        const char *method = "POST", *path;
        int good = (int)(rand_r(&seed) % GOODS), buy = 0, sell_into = 0;
        int64_t q = 1 + rand_r(&seed) % 4, price = 40 + rand_r(&seed) % 21;
        if (cl->id % 2 == 0 && n_mine && rand_r(&seed) % 3 == 0) { /* a cancel */
            size_t k = rand_r(&seed) % n_mine;
            method = "DELETE";
            snprintf(url, sizeof url, "/orders/%lld", (long long)mine[k]);
            mine[k] = mine[--n_mine];
            snprintf(body, sizeof body, "{\"buyer\":\"p%d\"}", cl->id);
            path = url;
        } else if (cl->id % 2 == 0) {
            buy = 1;
            path = "/orders";
            snprintf(body, sizeof body,
                     "{\"buyer\":\"p%d\",\"item\":\"g%d\",\"quantity\":%lld,\"max_price\":%lld}",
                     cl->id, good, (long long)q, (long long)price);
        } else if (rand_r(&seed) % 4) {
            sell_into = 1;
            path = "/sell";
            snprintf(body, sizeof body,
                     "{\"seller\":\"p%d\",\"item\":\"g%d\",\"quantity\":%lld,\"min_price\":%lld,"
                     "\"fill\":\"partial\"}",
                     cl->id, good, (long long)q, (long long)price);
        } else {
            sell_into = 1;
            path = "/list";
            snprintf(body, sizeof body,
                     "{\"seller\":\"p%d\",\"item\":\"g%d\",\"quantity\":%lld,\"price\":%lld}",
                     cl->id, good, (long long)q, (long long)price);
        }
        char full[128];
        snprintf(full, sizeof full, "http://127.0.0.1:%d%s", r->ports[(cl->id + n) % SERVERS],
                 path);
        curl_easy_setopt(c, CURLOPT_URL, full);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        b.len = 0;
        b.buf[0] = '\0';
        long status = 0;
        if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        pthread_mutex_lock(&r->mu);
        r->answers++;
        r->resting += status == 201 && buy;
        r->unknown += status == 0 || status == 503;
        pthread_mutex_unlock(&r->mu);
        if ((status == 200 || status == 201) && (buy || sell_into))
            note_fills(r, b.buf, buy, price);
        if (status == 201 && buy && n_mine < sizeof mine / sizeof *mine) {
            json_error_t e;
            json_t *j = json_loads(b.buf, 0, &e);
            json_int_t id = json_integer_value(json_object_get(j, "order_id"));
            if (id > 0) mine[n_mine++] = id;
            json_decref(j);
        }
        if (status == 0) sleep_ms(20); /* a server gone: do not spin */
    }
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return NULL;
}

/* ---- the store ---- */

static market_config store_config(void) {
    market_config cfg = {.redis_timeout_ms = 5000, .lock_ttl_ms = 5000, .acquire_timeout_ms = 5000};
    assert_int_equal(rconn_addr_parse(redis.url, &cfg.redis), RCONN_OK);
    return cfg;
}

struct store {
    lock_client *l;
    market *m;
    market_conn *c;
};

static void store_open(struct store *s) {
    market_config cfg = store_config();
    int err;
    s->l = lock_local_new(&err);
    s->m = market_new(&cfg, s->l, &err);
    s->c = market_conn_new(s->m, &err);
    assert_non_null(s->c);
}

static void store_close(struct store *s) {
    market_conn_free(s->c);
    market_free(s->m);
    lock_free(s->l);
}

/* Buyers p0, p2, ... with funds; sellers p1, p3, ... with UNITS of each good. */
static void seed(market_conn *c) {
    market_world *w = market_world_new();
    assert_non_null(w);
    for (int i = 0; i < CLIENTS; i++) {
        char id[8], good[8];
        snprintf(id, sizeof id, "p%d", i);
        assert_int_equal(market_world_add_player(w, id, NULL, FUNDS), MARKET_OK);
        for (int g = 0; i % 2 && g < GOODS; g++) {
            snprintf(good, sizeof good, "g%d", g);
            assert_int_equal(market_world_add_stack(w, id, good, UNITS), MARKET_OK);
        }
    }
    assert_int_equal(market_world_add_player(w, "house", NULL, 0), MARKET_OK);
    assert_int_equal(market_world_store(c, REALM, w, 1), MARKET_OK);
    market_world_free(w);
    market_settings st = {.fee_bps = 500};
    snprintf(st.house, sizeof st.house, "house");
    assert_int_equal(market_settings_set(c, REALM, &st), MARKET_OK);
}

/* ---- the test ---- */

static void test_book_servers_killed_and_paused(void **state) {
    const char *strategy = *state;
    struct store s;
    store_open(&s);
    seed(s.c);
    struct run r = {0};
    pthread_mutex_init(&r.mu, NULL);
    assert_non_null(r.fills = calloc(FILLS_MAX, sizeof *r.fills));
    pid_t pid[SERVERS];
    for (int i = 0; i < SERVERS; i++) {
        r.ports[i] = th_free_port();
        const char *flags[] = {
            "--strategy", strategy, "--lock-ttl-ms", "1000", "--acquire-timeout-ms", "3000", NULL};
        pid[i] = th_server_spawn(r.ports[i], redis.url, flags);
        assert_int_equal(th_server_healthy(r.ports[i], 20000), 0);
    }
    struct client cl[CLIENTS];
    pthread_t t[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        cl[i] = (struct client){&r, i};
        assert_int_equal(pthread_create(&t[i], NULL, client_main, &cl[i]), 0);
    }
    sleep_ms(700);
    kill(pid[0], SIGKILL); /* mid-run, whatever it was doing */
    assert_int_equal(waitpid(pid[0], NULL, 0), pid[0]);
    sleep_ms(300);
    kill(pid[1], SIGSTOP); /* past its 1 s leases */
    sleep_ms(1500);
    kill(pid[1], SIGCONT);
    sleep_ms(700);
    atomic_store(&r.stop, 1);
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(t[i], NULL);
    for (int i = 1; i < SERVERS; i++) {
        kill(pid[i], SIGTERM);
        assert_int_equal(waitpid(pid[i], NULL, 0), pid[i]);
    }

    market_audit_report a;
    assert_int_equal(market_audit(s.c, REALM, &a), MARKET_OK);
    assert_int_equal(a.total_funds + a.total_escrow, (int64_t)CLIENTS * FUNDS);
    assert_int_equal(a.units_in_stacks + a.units_listed, (int64_t)(CLIENTS / 2) * GOODS * UNITS);
    assert_int_equal(a.orders_escrow, a.total_escrow);
    assert_int_equal(a.orders_misbooked, 0);
    assert_int_equal(a.negative_funds, 0);
    assert_int_equal(a.negative_escrow, 0);
    assert_int_equal(a.index_mismatch, 0);
    /* no buy order the answers do not account for */
    assert_true((long)a.orders <= r.resting + r.unknown);
    for (size_t i = 0; i < r.n_fills; i++) { /* every fill answered is a trade, at its price */
        const struct fill *x = &r.fills[i];
        market_trade tr;
        assert_int_equal(market_trade_get(s.c, REALM, x->trade, &tr), MARKET_OK);
        assert_int_equal(tr.price, x->price);
        if (x->buy)
            assert_true(x->price <= x->bound);
        else
            assert_true(x->price >= x->bound);
    }
    int64_t house = 0;
    market_player *h = NULL;
    assert_int_equal(market_player_get(s.c, REALM, "house", &h), MARKET_OK);
    house = h->funds;
    market_player_free(h);
    fprintf(stderr,
            "# %s: %ld answers, %zu fills, %ld resting, %ld unknown, %zu orders open, house %lld\n",
            strategy, r.answers, r.n_fills, r.resting, r.unknown, a.orders, (long long)house);
    assert_true(r.n_fills > 0);
    assert_true(house > 0); /* the cut of the sales */
    free(r.fills);
    pthread_mutex_destroy(&r.mu);
    store_close(&s);
}

static int group_setup(void **state) {
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return th_redis_start(&redis);
}

static int group_teardown(void **state) {
    (void)state;
    th_redis_stop(&redis);
    curl_global_cleanup();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        {"test_book_servers_killed_and_paused[market]", test_book_servers_killed_and_paused, NULL,
         NULL, (void *)"market"},
        {"test_book_servers_killed_and_paused[item]", test_book_servers_killed_and_paused, NULL,
         NULL, (void *)"item"},
        {"test_book_servers_killed_and_paused[optimistic]", test_book_servers_killed_and_paused,
         NULL, NULL, (void *)"optimistic"},
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
