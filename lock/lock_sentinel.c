/* lock_sentinel.c - a Sentinel group's master: asked of the Sentinels, kept, and followed.
 *
 * The public lock_sentinel_* API (lock.h): the Redis backends (lock_node.c)
 * and the market's store use it to learn where a group's master is. It
 * speaks hiredis to Sentinels only, never to a data server.
 *
 * DESIGN
 * Asking: SENTINEL MASTER <name> of each Sentinel in turn, starting with the
 * one that answered first last time, until a majority of them answered or
 * every one was tried. Each answer carries the master's address, its flags
 * and the config epoch of the Sentinel's view; the highest epoch wins, so a
 * Sentinel that missed the last failover is outvoted by one that saw it. A
 * master the winning Sentinel flags o_down (a quorum of Sentinels cannot
 * reach it: a failover is coming) is not handed out: its users answer "no
 * master" at once instead of waiting on a dead or frozen server.
 *
 * Keeping: the answer is kept with the generation it was given for. The
 * generation (an atomic counter) moves when the master may have changed: a
 * user's lock_sentinel_suspect() (compare-and-swap on the generation it
 * saw, so a burst of failing connections costs one bump), a +switch-master
 * message, or an answer that names another address than the last one. A
 * connection made under an older generation is closed by its owner before
 * its next use.
 *
 * Following: a watcher thread stays subscribed to +switch-master on one
 * Sentinel (the next one when that fails). After each (re)subscription it
 * asks the Sentinels once: a switch that happened while it was not listening
 * shows up as a new address, which bumps the generation.
 */
#include "lock/lock.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis.h>

#include "lock/lock_impl.h"

#define WATCH_POLL_MS 200  /* the watcher checks for a stop this often */
#define WATCH_RETRY_MS 250 /* pause before the watcher tries the next Sentinel */
/* what a master's address from a Sentinel may hold: a name, IPv4 or IPv6 */
#define HOST_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:"

struct lock_sentinel {
    lock_redis_addr group; /* copy of the caller's */
    int timeout_ms;
    _Atomic uint64_t generation;
    _Atomic uint64_t failovers;

    pthread_mutex_t mu; /* guards what follows; held while asking the Sentinels */
    pthread_cond_t cv;  /* wakes the watcher's pauses when stop is set */
    int cached;         /* host:port is the answer for cached_gen */
    uint64_t cached_gen;
    int have_last; /* host:port holds the last answer (kept when it goes stale) */
    char host[LOCK_HOST_MAX + 1];
    int port;
    int first; /* the Sentinel to ask first */
    int stop;
    pthread_t watcher;
};

static struct timeval tv_of(int ms) {
    struct timeval tv = {ms / 1000, (suseconds_t)(ms % 1000) * 1000};
    return tv;
}

/* Connects to Sentinel i. Returns a context, or NULL with a sentence in why. */
static redisContext *sentinel_connect(const lock_sentinel *s, int i, char *why, size_t whylen) {
    const struct lock_redis_at *at = &s->group.seeds[i];
    redisContext *c = redisConnectWithTimeout(at->host, at->port, tv_of(s->timeout_ms));
    if (c == NULL) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    if (c->err != 0 || redisSetTimeout(c, tv_of(s->timeout_ms)) != REDIS_OK) {
        snprintf(why, whylen, "Sentinel %s:%d: %s", at->host, at->port,
                 c->err != 0 ? c->errstr : "cannot set the timeout");
        redisFree(c);
        return NULL;
    }
    return c;
}

/* Runs argv on c; when a Sentinel with a password of its own answers NOAUTH, authenticates with
 * the group's credentials and runs it again. Returns the reply (caller frees) or NULL (I/O). */
static redisReply *sentinel_command(const lock_sentinel *s, redisContext *c, int argc,
                                    const char **argv) {
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    if (r == NULL || r->type != REDIS_REPLY_ERROR || strncmp(r->str, "NOAUTH", 6) != 0 ||
        s->group.pass[0] == '\0')
        return r;
    freeReplyObject(r);
    const char *auth[3] = {"AUTH", s->group.user, s->group.pass};
    int n = 3;
    if (s->group.user[0] == '\0') {
        auth[1] = s->group.pass;
        n = 2;
    }
    r = redisCommandArgv(c, n, auth, NULL);
    if (r == NULL) return NULL;
    if (r->type == REDIS_REPLY_ERROR) return r;
    freeReplyObject(r);
    return redisCommandArgv(c, argc, argv, NULL);
}

struct answer {
    char host[LOCK_HOST_MAX + 1];
    int port;
    uint64_t epoch;
    int down; /* flagged o_down */
};

/* Reads SENTINEL MASTER's field/value array into *a. Returns 0, or -1 when a field is missing. */
static int parse_master(const redisReply *r, struct answer *a) {
    int got_ip = 0, got_port = 0;
    memset(a, 0, sizeof *a);
    if (r->type != REDIS_REPLY_ARRAY) return -1;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i], *v = r->element[i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
        if (strcmp(k->str, "ip") == 0 && v->len > 0 && v->len <= LOCK_HOST_MAX &&
            strspn(v->str, HOST_CHARS) == v->len) {
            memcpy(a->host, v->str, v->len);
            a->host[v->len] = '\0';
            got_ip = 1;
        } else if (strcmp(k->str, "port") == 0) {
            long p = strtol(v->str, NULL, 10);
            if (p >= 1 && p <= 65535) {
                a->port = (int)p;
                got_port = 1;
            }
        } else if (strcmp(k->str, "config-epoch") == 0) {
            a->epoch = strtoull(v->str, NULL, 10);
        } else if (strcmp(k->str, "flags") == 0) {
            a->down = strstr(v->str, "o_down") != NULL;
        }
    }
    return got_ip && got_port ? 0 : -1;
}

/* Asks Sentinel i where the master is. Returns 0 with *a filled, or -1 with a sentence in why. */
static int ask_one(const lock_sentinel *s, int i, struct answer *a, char *why, size_t whylen) {
    redisContext *c = sentinel_connect(s, i, why, whylen);
    if (c == NULL) return -1;
    const struct lock_redis_at *at = &s->group.seeds[i];
    const char *argv[3] = {"SENTINEL", "MASTER", s->group.master_name};
    redisReply *r = sentinel_command(s, c, 3, argv);
    int rc = -1;
    if (r == NULL)
        snprintf(why, whylen, "Sentinel %s:%d: %s", at->host, at->port,
                 c->err != 0 ? c->errstr : "no answer");
    else if (r->type == REDIS_REPLY_ERROR)
        snprintf(why, whylen, "Sentinel %s:%d: %.80s", at->host, at->port, r->str);
    else if (parse_master(r, a) != 0)
        snprintf(why, whylen, "Sentinel %s:%d: an answer without the master's address", at->host,
                 at->port);
    else
        rc = 0;
    if (r != NULL) freeReplyObject(r);
    redisFree(c);
    return rc;
}

/* Asks the Sentinels (see DESIGN). Called with s->mu held. Returns 0 with the winning answer in
 * *best, or -1 with a sentence in why. */
static int ask_all(lock_sentinel *s, struct answer *best, char *why, size_t whylen) {
    int n = s->group.nseeds, need = n / 2 + 1, answered = 0;
    for (int k = 0; k < n && answered < need; k++) {
        int i = (s->first + k) % n;
        struct answer a;
        char one[160];
        if (ask_one(s, i, &a, one, sizeof one) != 0) {
            if (answered == 0) snprintf(why, whylen, "%s", one);
            continue;
        }
        if (answered == 0) s->first = i;
        if (answered == 0 || a.epoch > best->epoch) *best = a;
        answered++;
    }
    if (answered == 0) return -1;
    if (best->down) {
        snprintf(why, whylen, "the Sentinels see master %s %s:%d down; a failover is coming",
                 s->group.master_name, best->host, best->port);
        return -1;
    }
    return 0;
}

/* ---- API ---- */

int lock_sentinel_master(lock_sentinel *s, lock_redis_addr *master, uint64_t *generation,
                         char *why, size_t whylen) {
    char dummy[1];
    if (why == NULL || whylen == 0) {
        why = dummy;
        whylen = sizeof dummy;
    }
    why[0] = '\0';
    if (s == NULL || master == NULL) {
        snprintf(why, whylen, "invalid argument");
        return LOCK_ERR_INVALID;
    }
    if (pthread_mutex_lock(&s->mu) != 0) {
        snprintf(why, whylen, "cannot lock the Sentinel cache");
        return LOCK_ERR_BACKEND;
    }
    uint64_t gen = atomic_load(&s->generation);
    if (!s->cached || s->cached_gen != gen) {
        struct answer a;
        if (ask_all(s, &a, why, whylen) != 0) {
            pthread_mutex_unlock(&s->mu);
            return LOCK_ERR_BACKEND;
        }
        if (s->have_last && (strcmp(a.host, s->host) != 0 || a.port != s->port)) {
            /* a new master: what was made for the old one must not be used again */
            atomic_fetch_add(&s->failovers, 1);
            gen = atomic_fetch_add(&s->generation, 1) + 1;
        }
        memcpy(s->host, a.host, sizeof s->host);
        s->port = a.port;
        s->have_last = 1;
        s->cached = 1;
        s->cached_gen = gen;
    }
    *master = s->group;
    memcpy(master->host, s->host, sizeof master->host);
    master->port = s->port;
    master->master_name[0] = '\0';
    master->nseeds = 0;
    if (generation != NULL) *generation = gen;
    pthread_mutex_unlock(&s->mu);
    return LOCK_OK;
}

uint64_t lock_sentinel_generation(lock_sentinel *s) {
    return s == NULL ? 0 : atomic_load(&s->generation);
}

void lock_sentinel_suspect(lock_sentinel *s, uint64_t generation) {
    if (s == NULL) return;
    uint64_t g = generation;
    (void)atomic_compare_exchange_strong(&s->generation, &g, generation + 1);
}

uint64_t lock_sentinel_failovers(lock_sentinel *s) {
    return s == NULL ? 0 : atomic_load(&s->failovers);
}

/* ---- the watcher ---- */

/* Sleeps ms unless stop is set first. Returns 1 when stopping. */
static int watcher_pause(lock_sentinel *s, int ms) {
    struct timespec ts;
    lock__timespec_at(lock_now_ms() + ms, &ts);
    if (pthread_mutex_lock(&s->mu) != 0) return 1;
    while (!s->stop)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT) break;
    int stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

static int watcher_stopping(lock_sentinel *s) {
    int stop = 1;
    if (pthread_mutex_lock(&s->mu) == 0) {
        stop = s->stop;
        pthread_mutex_unlock(&s->mu);
    }
    return stop;
}

/* Returns 1 when r is "+switch-master <our name> ..." published on that channel. */
static int is_our_switch(const lock_sentinel *s, const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3) return 0;
    const redisReply *kind = r->element[0], *msg = r->element[2];
    if (kind->type != REDIS_REPLY_STRING || strcmp(kind->str, "message") != 0) return 0;
    if (msg->type != REDIS_REPLY_STRING) return 0;
    size_t nl = strlen(s->group.master_name);
    return msg->len > nl && memcmp(msg->str, s->group.master_name, nl) == 0 && msg->str[nl] == ' ';
}

/* Listens on Sentinel i until it fails or stop is set. */
static void watch_one(lock_sentinel *s, int i) {
    char why[160];
    redisContext *c = sentinel_connect(s, i, why, sizeof why);
    if (c == NULL) return;
    const char *argv[2] = {"SUBSCRIBE", "+switch-master"};
    redisReply *r = sentinel_command(s, c, 2, argv);
    int ok = r != NULL && r->type == REDIS_REPLY_ARRAY;
    if (r != NULL) freeReplyObject(r);
    if (!ok) {
        redisFree(c);
        return;
    }
    /* What changed while nobody listened shows up as a new address (DESIGN). */
    lock_redis_addr m;
    (void)lock_sentinel_master(s, &m, NULL, why, sizeof why);
    while (!watcher_stopping(s)) {
        struct pollfd p = {c->fd, POLLIN, 0};
        int pr = poll(&p, 1, WATCH_POLL_MS);
        if (pr < 0 && errno != EINTR) break;
        if (pr <= 0) continue;
        if (redisBufferRead(c) != REDIS_OK) break;
        void *rep = NULL;
        int bad = 0;
        while (!bad && redisGetReplyFromReader(c, &rep) == REDIS_OK && rep != NULL) {
            if (is_our_switch(s, rep)) lock_sentinel_suspect(s, atomic_load(&s->generation));
            bad = ((redisReply *)rep)->type == REDIS_REPLY_ERROR;
            freeReplyObject(rep);
            rep = NULL;
        }
        if (bad || c->err != 0) break;
    }
    redisFree(c);
}

static void *watcher_main(void *arg) {
    lock_sentinel *s = arg;
    for (int i = 0; !watcher_stopping(s); i = (i + 1) % s->group.nseeds) {
        watch_one(s, i);
        if (watcher_pause(s, WATCH_RETRY_MS)) break;
    }
    return NULL;
}

lock_sentinel *lock_sentinel_new(const lock_redis_addr *group, int timeout_ms, int *err) {
    int dummy;
    if (err == NULL) err = &dummy;
    if (!lock__redis_addr_ok(group) || group->master_name[0] == '\0' || timeout_ms <= 0) {
        *err = LOCK_ERR_INVALID;
        return NULL;
    }
    lock_sentinel *s = calloc(1, sizeof *s);
    if (s == NULL) {
        *err = LOCK_ERR_NOMEM;
        return NULL;
    }
    s->group = *group;
    s->timeout_ms = timeout_ms;
    atomic_init(&s->generation, 1);
    atomic_init(&s->failovers, 0);
    *err = LOCK_ERR_BACKEND;
    if (pthread_mutex_init(&s->mu, NULL) != 0) goto fail_free;
    if (lock__cond_init_monotonic(&s->cv) != LOCK_OK) goto fail_mu;
    if (pthread_create(&s->watcher, NULL, watcher_main, s) != 0) goto fail_cv;
    *err = LOCK_OK;
    return s;
fail_cv:
    pthread_cond_destroy(&s->cv);
fail_mu:
    pthread_mutex_destroy(&s->mu);
fail_free:
    free(s);
    return NULL;
}

void lock_sentinel_free(lock_sentinel *s) {
    if (s == NULL) return;
    if (pthread_mutex_lock(&s->mu) == 0) {
        s->stop = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
    pthread_join(s->watcher, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
