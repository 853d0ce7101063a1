/* rconn_sentinel.c - a Sentinel group's master: asked of the Sentinels, kept, and followed,
 * with the replicas a failover could promote.
 *
 * The public rconn_sentinel_* API (rconn.h): lock/'s Redis backends (lock_node.c) and the
 * market's store use it to learn where a group's master is, and the store to learn what its
 * acknowledgement of a commit must cover. It speaks hiredis to Sentinels only, never to a
 * data server. The pure half (replies into answers, answers into a view, events judged) is
 * declared in rconn_impl.h for the unit tests.
 *
 * DESIGN
 * Asking: SENTINEL MASTER <name> and SENTINEL REPLICAS <name> of each
 * Sentinel in turn, starting with the one that answered first last time,
 * until a majority of them answered (a user's question) or every one was
 * tried (the watcher's refresh). Each answer carries the master's address,
 * its flags and the config epoch of the Sentinel's view; the highest epoch
 * wins, so a Sentinel that missed the last failover is outvoted by one that
 * saw it. A master the winning Sentinel flags o_down (a quorum of Sentinels
 * cannot reach it: a failover is coming) is not handed out: its users answer
 * "no master" at once instead of waiting on a dead or frozen server.
 *
 * Keeping: the answer is kept with the generation it was given for. The
 * generation (an atomic counter) moves when the master may have changed: a
 * user's rconn_sentinel_suspect() (compare-and-swap on the generation it
 * saw, so a burst of failing connections costs one bump), a +switch-master
 * message, or an answer that names another address than the last one. A
 * connection made under an older generation is closed by its owner before
 * its next use.
 *
 * What an acknowledgement must cover (the view, rconn_sentinel_view_get()):
 * a write survives every failover the Sentinels can perform only if every
 * replica they could promote has it. Sentinel promotes a replica that no
 * Sentinel flags s_down or disconnected, that answered a ping in the last
 * five seconds, whose INFO it has (it names the replica's master), whose
 * priority is not 0 and whose link to the master has not been down for
 * longer than ten down-after periods (sentinel.c, sentinelSelectSlave); the view counts the
 * replicas that any answering Sentinel lists so (rconn__sentinel_promotable). One kind is left out:
 * a master this process followed before the Sentinels switched away from it, while it still reports
 * itself master (Sentinel turns it into a replica a few seconds later): it takes no replication
 * stream, so no WAIT could ever cover it, and Sentinel ranks it behind every replica with a
 * replication offset. Everything else reporting itself master is counted, because during a failover
 * the replica being promoted does so too, and leaving it out would let a WAIT that the other
 * replica answers pass on the old master. The view also says whether a failover is under way: a
 * Sentinel flags the master failover_in_progress or o_down, or one announced a step of a failover
 * (below) that no full refresh has answered since; and it counts those announcements (alarms), so
 * that a commit whose confirmation spans one can be told.
 *
 * Following: a watcher thread stays subscribed (PSUBSCRIBE *) to every
 * Sentinel at once, so that the one running a failover is heard whichever it
 * is. A message about this group's master that is a step of a failover
 * (+odown, +try-failover, +vote-for-leader, +new-epoch, +elected-leader,
 * +failover-state-*, +selected-slave, +promoted-slave, +slave-reconf-*,
 * +switch-master) is an alarm; +switch-master also bumps the generation; any
 * message about the group makes the watcher refresh at once. Otherwise it
 * refreshes every REFRESH_MS, asking every Sentinel; a switch that happened
 * while nobody listened shows up as a new address, which bumps the
 * generation.
 */
#include "rconn/rconn.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "rconn/rconn_impl.h"

#define WATCH_POLL_MS 200  /* the watcher checks for a stop this often */
#define WATCH_RETRY_MS 250 /* pause before the watcher subscribes to a failed Sentinel again */
#define REFRESH_MS 1000    /* the watcher asks every Sentinel this often */
#define DEMOTED_MAX 8      /* former masters remembered */
/* what a master's address from a Sentinel may hold: a name, IPv4 or IPv6 */
#define HOST_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:"

typedef struct rconn__sentinel_answer answer;

struct rconn_sentinel {
    rconn_addr group; /* copy of the caller's */
    int timeout_ms;
    _Atomic uint64_t generation;
    _Atomic uint64_t failovers;
    _Atomic uint64_t alarms; /* failover steps heard (DESIGN) */

    pthread_mutex_t mu; /* guards what follows; held while a user asks the Sentinels */
    pthread_cond_t cv;  /* wakes the watcher's pauses when stop or refresh is set */
    int cached;         /* host:port is the answer for cached_gen */
    uint64_t cached_gen;
    int have_last; /* host:port holds the last answer (kept when it goes stale) */
    char host[RCONN_HOST_MAX + 1];
    int port;
    int first;         /* the Sentinel to ask first */
    unsigned replicas; /* the view of cached_gen's master (DESIGN) */
    int view_failover; /* the last answers flag a failover */
    int alarm;         /* an alarm that no full refresh has answered yet */
    size_t ndemoted;
    struct rconn__sentinel_addr demoted[DEMOTED_MAX]; /* former masters, newest last */
    int refresh;                                      /* the watcher should refresh at once */
    int stop;
    pthread_t watcher;
};

/* Connects to Sentinel i. Returns a context, or NULL with a sentence in why. */
static redisContext *sentinel_connect(const rconn_sentinel *s, int i, char *why, size_t whylen) {
    const struct rconn_at *at = &s->group.seeds[i];
    redisContext *c = NULL;
    char cwhy[150]; /* the reason, truncated to fit the callers' */
    if (rconn_connect(at->host, at->port, s->timeout_ms, s->timeout_ms, &c, cwhy, sizeof cwhy) !=
        RCONN_OK)
        snprintf(why, whylen, "Sentinel %s", cwhy);
    return c;
}

/* Runs argv on c; when a Sentinel with a password of its own answers NOAUTH, authenticates with
 * the group's credentials and runs it again. Returns the reply (caller frees) or NULL (I/O). */
static redisReply *sentinel_command(const rconn_sentinel *s, redisContext *c, int argc,
                                    const char **argv) {
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    if (r == NULL || r->type != REDIS_REPLY_ERROR || strncmp(r->str, "NOAUTH", 6) != 0 ||
        s->group.pass[0] == '\0')
        return r;
    freeReplyObject(r);
    const char *auth[3];
    int n = rconn_auth_argv(&s->group, auth);
    r = redisCommandArgv(c, n, auth, NULL);
    if (r == NULL) return NULL;
    if (r->type == REDIS_REPLY_ERROR) return r;
    freeReplyObject(r);
    return redisCommandArgv(c, argc, argv, NULL);
}

/* ---- pure: replies into answers, answers into a view ---- */

/* Copies a host from a reply into out (RCONN_HOST_MAX + 1 bytes). Returns 0, or -1 when it is
 * not one. */
static int host_of(const redisReply *v, char *out) {
    if (v->len == 0 || v->len > RCONN_HOST_MAX || strspn(v->str, HOST_CHARS) != v->len) return -1;
    memcpy(out, v->str, v->len);
    out[v->len] = '\0';
    return 0;
}

static int port_of(const redisReply *v) {
    long p = strtol(v->str, NULL, 10);
    return p >= 1 && p <= 65535 ? (int)p : 0;
}

/* 1 when flags (a Sentinel's comma-separated list) holds flag. */
static int has_flag(const char *flags, const char *flag) {
    size_t n = strlen(flag);
    for (const char *p = flags; (p = strstr(p, flag)) != NULL; p += n)
        if ((p == flags || p[-1] == ',') && (p[n] == '\0' || p[n] == ',')) return 1;
    return 0;
}

/* Reads SENTINEL MASTER's field/value array into *a (its replicas untouched). Returns 0, or -1
 * when the address is missing. */
int rconn__sentinel_parse_master(const redisReply *r, answer *a) {
    int got_ip = 0, got_port = 0;
    a->epoch = 0;
    a->down = a->failover = 0;
    a->down_after_ms = 0;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) return -1;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i], *v = r->element[i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
        if (strcmp(k->str, "ip") == 0) {
            got_ip = host_of(v, a->host) == 0;
        } else if (strcmp(k->str, "port") == 0) {
            got_port = (a->port = port_of(v)) != 0;
        } else if (strcmp(k->str, "config-epoch") == 0) {
            a->epoch = strtoull(v->str, NULL, 10);
        } else if (strcmp(k->str, "down-after-milliseconds") == 0) {
            a->down_after_ms = strtoll(v->str, NULL, 10);
        } else if (strcmp(k->str, "flags") == 0) {
            a->down = has_flag(v->str, "o_down");
            a->failover = has_flag(v->str, "failover_in_progress");
        }
    }
    return got_ip && got_port ? 0 : -1;
}

/* Reads one replica's field/value array (SENTINEL REPLICAS) into *rp, judging whether this
 * Sentinel could promote it (DESIGN) with the master's down-after period. Returns 0, or -1
 * when its address is missing. */
static int parse_replica(const redisReply *r, int64_t down_after_ms,
                         struct rconn__sentinel_replica *rp) {
    int got_ip = 0, got_port = 0, bad = 0, no_info = 0;
    memset(rp, 0, sizeof *rp);
    if (r->type != REDIS_REPLY_ARRAY) return -1;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i], *v = r->element[i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
        if (strcmp(k->str, "ip") == 0)
            got_ip = host_of(v, rp->host) == 0;
        else if (strcmp(k->str, "port") == 0)
            got_port = (rp->port = port_of(v)) != 0;
        else if (strcmp(k->str, "flags") == 0)
            bad |= has_flag(v->str, "s_down") || has_flag(v->str, "o_down") ||
                   has_flag(v->str, "disconnected");
        else if (strcmp(k->str, "slave-priority") == 0)
            bad |= strtol(v->str, NULL, 10) == 0;
        else if (strcmp(k->str, "last-ok-ping-reply") == 0)
            bad |= strtoll(v->str, NULL, 10) > RCONN__SENTINEL_PING_STALE_MS;
        else if (strcmp(k->str, "master-link-down-time") == 0)
            bad |= down_after_ms > 0 && strtoll(v->str, NULL, 10) > 10 * down_after_ms;
        else if (strcmp(k->str, "role-reported") == 0)
            rp->role_master = strcmp(v->str, "master") == 0;
        else if (strcmp(k->str, "master-host") == 0)
            no_info = strcmp(v->str, "?") == 0;
    }
    /* Never answered this Sentinel's INFO as a replica (it learnt of it from a master's INFO
     * or a switch, and names no master of it): Sentinel promotes none whose INFO it lacks. */
    bad |= no_info && !rp->role_master;
    rp->promotable = !bad;
    return got_ip && got_port ? 0 : -1;
}

/* Reads SENTINEL REPLICAS' array of replicas into a (after rconn__sentinel_parse_master, whose
 * down-after period it uses). Returns 0, or -1 when it is not such an array or holds more than
 * RCONN__REPLICAS_MAX (a->have_replicas is then 0). */
int rconn__sentinel_parse_replicas(const redisReply *r, answer *a) {
    a->have_replicas = 0;
    a->nreplicas = 0;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements > RCONN__REPLICAS_MAX) return -1;
    for (size_t i = 0; i < r->elements; i++) {
        if (parse_replica(r->element[i], a->down_after_ms, &a->replicas[a->nreplicas]) != 0)
            continue;
        a->nreplicas++;
    }
    a->have_replicas = 1;
    return 0;
}

static int same_addr(const char *h1, int p1, const char *h2, int p2) {
    return p1 == p2 && strcmp(h1, h2) == 0;
}

/* Counts into *count the replicas of answers[best]'s master that a failover could promote:
 * the distinct addresses that some answer naming the same master lists as promotable, but a
 * former master (demoted[0..ndemoted)) that still reports itself master (DESIGN). Returns 0,
 * or -1 when no answer naming that master listed its replicas. */
int rconn__sentinel_promotable(const answer *answers, size_t n, size_t best,
                               const struct rconn__sentinel_addr *demoted, size_t ndemoted,
                               unsigned *count) {
    const answer *b = &answers[best];
    const struct rconn__sentinel_replica *seen[RCONN_SEEDS_MAX * RCONN__REPLICAS_MAX];
    size_t k = 0;
    int read = 0;
    for (size_t i = 0; i < n && i < RCONN_SEEDS_MAX; i++) {
        const answer *a = &answers[i];
        if (!a->have_replicas || !same_addr(a->host, a->port, b->host, b->port)) continue;
        read = 1;
        for (size_t j = 0; j < a->nreplicas; j++) {
            const struct rconn__sentinel_replica *rp = &a->replicas[j];
            int skip = !rp->promotable;
            for (size_t d = 0; d < ndemoted && !skip && rp->role_master; d++)
                skip = same_addr(rp->host, rp->port, demoted[d].host, demoted[d].port);
            for (size_t s = 0; s < k && !skip; s++) /* counted once, whoever listed it */
                skip = same_addr(seen[s]->host, seen[s]->port, rp->host, rp->port);
            if (!skip) seen[k++] = rp;
        }
    }
    *count = (unsigned)k;
    return read ? 0 : -1;
}

/* Events of a failover under way (DESIGN). */
static const char *const failover_steps[] = {
    "+odown",
    "+try-failover",
    "+vote-for-leader",
    "+new-epoch",
    "+elected-leader",
    "+selected-slave",
    "+promoted-slave",
    "+switch-master",
    "+slave-reconf-sent",
    "+slave-reconf-inprog",
    "+slave-reconf-done",
};

/* Judges a Sentinel's event, published on channel with text msg[0..msglen): 0 it is not about
 * the group master_name, 1 it is (the view may have changed), 2 it is a step of a failover,
 * 3 it is the group's +switch-master. An event that names no master (+vote-for-leader,
 * +new-epoch) is taken as the group's. */
int rconn__sentinel_event(const char *master_name, const char *channel, const char *msg,
                          size_t msglen) {
    size_t nl = strlen(master_name);
    char name[RCONN_MASTER_NAME_MAX + 16];
    int ours = 0;
    if (strcmp(channel, "+vote-for-leader") == 0 || strcmp(channel, "+new-epoch") == 0) {
        ours = 1;
    } else if (strcmp(channel, "+switch-master") == 0) {
        if (msglen > nl && memcmp(msg, master_name, nl) == 0 && msg[nl] == ' ') return 3;
        return 0;
    } else if (nl <= RCONN_MASTER_NAME_MAX) {
        /* "master <name> <ip> <port>" or "<kind> <id> <ip> <port> @ <name> <ip> <port>" */
        int w = snprintf(name, sizeof name, "master %s ", master_name);
        ours = msglen >= (size_t)w && memcmp(msg, name, (size_t)w) == 0;
        w = snprintf(name, sizeof name, " @ %s ", master_name);
        for (size_t i = 0; !ours && i + (size_t)w <= msglen; i++)
            ours = memcmp(msg + i, name, (size_t)w) == 0;
    }
    if (!ours) return 0;
    for (size_t i = 0; i < sizeof failover_steps / sizeof failover_steps[0]; i++)
        if (strcmp(channel, failover_steps[i]) == 0) return 2;
    if (strncmp(channel, "+failover-state-", 16) == 0) return 2;
    return 1;
}

/* ---- asking ---- */

/* Asks Sentinel i on *cp (connecting when NULL; left NULL when it failed) what it knows of the
 * master and its replicas. Returns 0 with *a filled, or -1 with a sentence in why. */
static int ask_one(const rconn_sentinel *s, int i, redisContext **cp, answer *a, char *why,
                   size_t whylen) {
    if (*cp == NULL && (*cp = sentinel_connect(s, i, why, whylen)) == NULL) return -1;
    redisContext *c = *cp;
    const struct rconn_at *at = &s->group.seeds[i];
    const char *argv[3] = {"SENTINEL", "MASTER", s->group.master_name};
    redisReply *r = sentinel_command(s, c, 3, argv);
    redisReply *rr = NULL;
    int rc = -1;
    memset(a, 0, sizeof *a);
    if (r == NULL) {
        snprintf(why, whylen, "Sentinel %s:%d: %s", at->host, at->port,
                 c->err != 0 ? c->errstr : "no answer");
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, whylen, "Sentinel %s:%d: %.80s", at->host, at->port, r->str);
    } else if (rconn__sentinel_parse_master(r, a) != 0) {
        snprintf(why, whylen, "Sentinel %s:%d: an answer without the master's address", at->host,
                 at->port);
    } else {
        argv[1] = "REPLICAS";
        rr = redisCommandArgv(c, 3, argv, NULL);
        if (rr == NULL)
            snprintf(why, whylen, "Sentinel %s:%d: %s", at->host, at->port,
                     c->err != 0 ? c->errstr : "no answer");
        else
            rc = 0; /* an unreadable list leaves have_replicas 0: the view counts none */
        (void)rconn__sentinel_parse_replicas(rr, a);
    }
    if (r != NULL) freeReplyObject(r);
    if (rr != NULL) freeReplyObject(rr);
    if (c->err != 0) {
        redisFree(c);
        *cp = NULL;
    }
    return rc;
}

/* Asks the Sentinels (DESIGN), starting with *first: until a majority answered, or all of
 * them when all is set, on the contexts in ctx[] (NULL: a connection made for this question and
 * closed after). Fills answers[0..*n), *best, and *first with the first that answered. Returns
 * 0, or -1 with a sentence in why when none answered or the winner flags the master o_down. */
static int ask(const rconn_sentinel *s, int *first, int all, redisContext **ctx, answer *answers,
               size_t *n, size_t *best, char *why, size_t whylen) {
    int ns = s->group.nseeds, need = all ? ns : ns / 2 + 1;
    int from = *first;
    *n = 0;
    for (int k = 0; k < ns && (int)*n < need; k++) {
        int i = (from + k) % ns;
        redisContext *own = NULL, **cp = ctx ? &ctx[i] : &own;
        char one[160];
        int rc = ask_one(s, i, cp, &answers[*n], one, sizeof one);
        if (own != NULL) redisFree(own);
        if (rc != 0) {
            if (*n == 0) snprintf(why, whylen, "%s", one);
            continue;
        }
        if (*n == 0 || answers[*n].epoch > answers[*best].epoch) *best = *n;
        if (*n == 0) *first = i;
        (*n)++;
    }
    if (*n == 0) return -1;
    const answer *b = &answers[*best];
    if (b->down) {
        snprintf(why, whylen, "the Sentinels see master %s %s:%d down; a failover is coming",
                 s->group.master_name, b->host, b->port);
        return -1;
    }
    return 0;
}

/* Takes answers[0..n) (winner best) as the group's state. Called with s->mu held; alarms_then:
 * s->alarms when the question was asked, full: every Sentinel was asked. Returns the
 * generation of the answer. */
static uint64_t apply(rconn_sentinel *s, const answer *answers, size_t n, size_t best,
                      uint64_t alarms_then, int full) {
    const answer *a = &answers[best];
    uint64_t gen = atomic_load(&s->generation);
    if (s->have_last && !same_addr(a->host, a->port, s->host, s->port)) {
        /* a new master: what was made for the old one must not be used again */
        atomic_fetch_add(&s->failovers, 1);
        gen = atomic_fetch_add(&s->generation, 1) + 1;
        if (s->ndemoted == DEMOTED_MAX)
            memmove(&s->demoted[0], &s->demoted[1], --s->ndemoted * sizeof s->demoted[0]);
        struct rconn__sentinel_addr *d = &s->demoted[s->ndemoted++];
        memcpy(d->host, s->host, sizeof d->host);
        d->port = s->port;
    }
    /* a former master that is named master again is no longer a former one */
    for (size_t d = 0; d < s->ndemoted; d++)
        if (same_addr(s->demoted[d].host, s->demoted[d].port, a->host, a->port)) {
            memmove(&s->demoted[d], &s->demoted[d + 1],
                    (s->ndemoted - d - 1) * sizeof s->demoted[0]);
            s->ndemoted--;
            break;
        }
    memcpy(s->host, a->host, sizeof s->host);
    s->port = a->port;
    s->have_last = 1;
    s->cached = 1;
    s->cached_gen = gen;
    unsigned k = 0;
    (void)rconn__sentinel_promotable(answers, n, best, s->demoted, s->ndemoted, &k);
    s->replicas = k;
    s->view_failover = 0;
    for (size_t i = 0; i < n; i++)
        if (same_addr(answers[i].host, answers[i].port, a->host, a->port))
            s->view_failover |= answers[i].failover || answers[i].down;
    if (full && atomic_load(&s->alarms) == alarms_then) s->alarm = 0;
    return gen;
}

/* ---- API ---- */

/* Fills *master with the group's address resolved: host and port of the master, the group's
 * credentials and db, no master_name; *generation (may be NULL) with the generation the
 * answer belongs to. Asks the Sentinels (DESIGN) only when the answer kept is stale. Returns
 * RCONN_OK, RCONN_ERR_INVALID for NULL s or master, or RCONN_ERR_UNAVAILABLE with a sentence
 * in why (may be NULL: no Sentinel answers, none knows the name, too few answered for a
 * majority, the winner sees the master down). */
int rconn_sentinel_master(rconn_sentinel *s, rconn_addr *master, uint64_t *generation, char *why,
                          size_t whylen) {
    why = rconn__why_start(why, &whylen);
    if (s == NULL || master == NULL) {
        snprintf(why, whylen, "invalid argument");
        return RCONN_ERR_INVALID;
    }
    if (pthread_mutex_lock(&s->mu) != 0) {
        snprintf(why, whylen, "cannot lock the Sentinel cache");
        return RCONN_ERR_UNAVAILABLE;
    }
    uint64_t gen = atomic_load(&s->generation);
    if (!s->cached || s->cached_gen != gen) {
        answer *answers = malloc(RCONN_SEEDS_MAX * sizeof *answers);
        size_t n = 0, best = 0;
        uint64_t alarms = atomic_load(&s->alarms);
        int rc = answers == NULL ? -1 : ask(s, &s->first, 0, NULL, answers, &n, &best, why, whylen);
        if (answers == NULL) snprintf(why, whylen, "out of memory");
        if (rc == 0) {
            gen = apply(s, answers, n, best, alarms, 0);
            s->refresh = 1; /* the watcher completes the view with every Sentinel */
            pthread_cond_broadcast(&s->cv);
        }
        free(answers);
        if (rc != 0) {
            pthread_mutex_unlock(&s->mu);
            return RCONN_ERR_UNAVAILABLE;
        }
    }
    *master = s->group;
    memcpy(master->host, s->host, sizeof master->host);
    master->port = s->port;
    master->master_name[0] = '\0';
    master->nseeds = 0;
    if (generation != NULL) *generation = gen;
    pthread_mutex_unlock(&s->mu);
    return RCONN_OK;
}

/* Returns the group's generation now (0 for a NULL s). This function can't fail. */
uint64_t rconn_sentinel_generation(rconn_sentinel *s) {
    return s == NULL ? 0 : atomic_load(&s->generation);
}

/* Says that the master of generation may be gone: the next rconn_sentinel_master() asks the
 * Sentinels again. A no-op when the generation has moved on already (many connections
 * failing at once cost one new question) or s is NULL. This function can't fail. */
void rconn_sentinel_suspect(rconn_sentinel *s, uint64_t generation) {
    if (s == NULL) return;
    uint64_t g = generation;
    (void)atomic_compare_exchange_strong(&s->generation, &g, generation + 1);
}

/* Returns how many times the master changed (a new address from the Sentinels) since the
 * start (0 for a NULL s). This function can't fail. */
uint64_t rconn_sentinel_failovers(rconn_sentinel *s) {
    return s == NULL ? 0 : atomic_load(&s->failovers);
}

/* Fills *v (all zero for a NULL s) with what a write on the master must reach now (see
 * rconn_sentinel_view in rconn.h). A background thread subscribed to every Sentinel keeps it
 * current: it asks every Sentinel each second and at once after an event about the group.
 * This function can't fail. */
void rconn_sentinel_view_get(rconn_sentinel *s, rconn_sentinel_view *v) {
    memset(v, 0, sizeof *v);
    if (s == NULL || pthread_mutex_lock(&s->mu) != 0) return;
    v->alarms = atomic_load(&s->alarms);
    uint64_t gen = atomic_load(&s->generation);
    v->known = s->cached && s->cached_gen == gen;
    v->generation = gen;
    v->replicas = v->known ? s->replicas : 0;
    v->failover = s->view_failover || s->alarm;
    pthread_mutex_unlock(&s->mu);
}

/* ---- the watcher ---- */

struct watch {
    redisContext *sub[RCONN_SEEDS_MAX]; /* subscribed to every event, or NULL */
    int64_t retry_at[RCONN_SEEDS_MAX];  /* when a failed subscription is tried again */
    redisContext *cmd[RCONN_SEEDS_MAX]; /* for the refreshes' questions, or NULL */
    answer answers[RCONN_SEEDS_MAX];
};

/* Subscribes to every event of Sentinel i without waiting for its answer (a frozen Sentinel
 * must not hold the watcher): AUTH first when the group has a password (a Sentinel without one
 * answers an error, which is ignored), then PSUBSCRIBE *. */
static void subscribe(rconn_sentinel *s, struct watch *w, int i) {
    char why[160];
    redisContext *c = sentinel_connect(s, i, why, sizeof why);
    if (c == NULL) return;
    const char *auth[3];
    int n = s->group.pass[0] != '\0' ? rconn_auth_argv(&s->group, auth) : 0;
    int ok = n == 0 || redisAppendCommandArgv(c, n, auth, NULL) == REDIS_OK;
    ok = ok && redisAppendCommand(c, "PSUBSCRIBE *") == REDIS_OK;
    int done = 0;
    while (ok && !done)
        ok = redisBufferWrite(c, &done) == REDIS_OK;
    if (!ok) {
        redisFree(c);
        return;
    }
    w->sub[i] = c;
}

/* Takes one reply of a subscription: an event is judged (rconn__sentinel_event) and acted on.
 * Returns -1 when the subscription was refused (the connection is then closed). */
static int on_reply(rconn_sentinel *s, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) /* AUTH's refusal is harmless; PSUBSCRIBE's is not */
        return strncmp(r->str, "NOAUTH", 6) == 0 || strncmp(r->str, "NOPERM", 6) == 0 ? -1 : 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4) return 0;
    const redisReply *kind = r->element[0], *ch = r->element[2], *msg = r->element[3];
    if (kind->type != REDIS_REPLY_STRING || strcmp(kind->str, "pmessage") != 0 ||
        ch->type != REDIS_REPLY_STRING || msg->type != REDIS_REPLY_STRING)
        return 0;
    int e = rconn__sentinel_event(s->group.master_name, ch->str, msg->str, msg->len);
    if (e == 0) return 0;
    if (e >= 2) atomic_fetch_add(&s->alarms, 1);
    if (e == 3) rconn_sentinel_suspect(s, atomic_load(&s->generation));
    if (pthread_mutex_lock(&s->mu) == 0) {
        if (e >= 2) s->alarm = 1;
        s->refresh = 1;
        pthread_mutex_unlock(&s->mu);
    }
    return 0;
}

/* Reads what subscription i has to say; closes it when it failed. */
static void read_events(rconn_sentinel *s, struct watch *w, int i) {
    redisContext *c = w->sub[i];
    int bad = redisBufferRead(c) != REDIS_OK;
    void *rep = NULL;
    while (!bad && redisGetReplyFromReader(c, &rep) == REDIS_OK && rep != NULL) {
        bad = on_reply(s, rep) < 0;
        freeReplyObject(rep);
        rep = NULL;
    }
    if (bad || c->err != 0) {
        redisFree(c);
        w->sub[i] = NULL;
        w->retry_at[i] = rconn_now_ms() + WATCH_RETRY_MS;
    }
}

/* Asks every Sentinel and takes the answers (the mutex is not held while asking). */
static void refresh(rconn_sentinel *s, struct watch *w) {
    size_t n = 0, best = 0;
    char why[160];
    uint64_t alarms = atomic_load(&s->alarms);
    if (pthread_mutex_lock(&s->mu) != 0) return;
    s->refresh = 0;
    int first = s->first;
    pthread_mutex_unlock(&s->mu);
    int rc = ask(s, &first, 1, w->cmd, w->answers, &n, &best, why, sizeof why);
    if (pthread_mutex_lock(&s->mu) != 0) return;
    if (n > 0) s->first = first;
    if (rc == 0)
        apply(s, w->answers, n, best, alarms, 1);
    else if (n > 0) /* the winner flags the master o_down */
        s->view_failover = 1;
    pthread_mutex_unlock(&s->mu);
}

/* Waits until the next refresh is due, an event arrives, or stop. Returns 1 when stopping. */
static int watch_wait(rconn_sentinel *s, struct watch *w, int64_t next_refresh) {
    int ns = s->group.nseeds;
    struct pollfd p[RCONN_SEEDS_MAX];
    int idx[RCONN_SEEDS_MAX], np = 0;
    for (int i = 0; i < ns; i++)
        if (w->sub[i] != NULL) {
            p[np] = (struct pollfd){w->sub[i]->fd, POLLIN, 0};
            idx[np++] = i;
        }
    int64_t left = next_refresh - rconn_now_ms();
    int ms = left < 0 ? 0 : left > WATCH_POLL_MS ? WATCH_POLL_MS : (int)left;
    int pr = np > 0 ? poll(p, (nfds_t)np, ms) : 0;
    if (np == 0 && ms > 0) {
        struct timespec ts;
        rconn_timespec_at(rconn_now_ms() + ms, &ts);
        if (pthread_mutex_lock(&s->mu) == 0) {
            while (!s->stop && !s->refresh)
                if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT) break;
            pthread_mutex_unlock(&s->mu);
        }
    }
    for (int k = 0; pr > 0 && k < np; k++)
        if (p[k].revents != 0) read_events(s, w, idx[k]);
    int stop = 1;
    if (pthread_mutex_lock(&s->mu) == 0) {
        stop = s->stop;
        pthread_mutex_unlock(&s->mu);
    }
    return stop;
}

static void *watcher_main(void *arg) {
    rconn_sentinel *s = arg;
    struct watch *w = calloc(1, sizeof *w);
    if (w == NULL) return NULL;
    int ns = s->group.nseeds;
    int64_t next_refresh = 0;
    for (;;) {
        int64_t now = rconn_now_ms();
        for (int i = 0; i < ns; i++)
            if (w->sub[i] == NULL && now >= w->retry_at[i]) {
                subscribe(s, w, i);
                if (w->sub[i] == NULL) w->retry_at[i] = now + WATCH_RETRY_MS;
            }
        int due = 0;
        if (pthread_mutex_lock(&s->mu) == 0) {
            due = s->refresh || rconn_now_ms() >= next_refresh;
            pthread_mutex_unlock(&s->mu);
        }
        if (due) {
            refresh(s, w);
            next_refresh = rconn_now_ms() + REFRESH_MS;
        }
        if (watch_wait(s, w, next_refresh)) break;
    }
    for (int i = 0; i < ns; i++) {
        if (w->sub[i] != NULL) redisFree(w->sub[i]);
        if (w->cmd[i] != NULL) redisFree(w->cmd[i]);
    }
    free(w);
    return NULL;
}

/* Returns a new resolver of the Sentinel group *group (borrowed; copied) whose watcher thread
 * starts now; contacts no Sentinel yet. Caller frees with rconn_sentinel_free(). Returns NULL
 * with *err (may be NULL) RCONN_ERR_INVALID (not a Sentinel group, timeout_ms <= 0),
 * RCONN_ERR_NOMEM or RCONN_ERR_UNAVAILABLE (no thread, mutex or condition variable). */
rconn_sentinel *rconn_sentinel_new(const rconn_addr *group, int timeout_ms, int *err) {
    int dummy;
    if (err == NULL) err = &dummy;
    if (!rconn_addr_valid(group) || group->master_name[0] == '\0' || timeout_ms <= 0) {
        *err = RCONN_ERR_INVALID;
        return NULL;
    }
    rconn_sentinel *s = calloc(1, sizeof *s);
    if (s == NULL) {
        *err = RCONN_ERR_NOMEM;
        return NULL;
    }
    s->group = *group;
    s->timeout_ms = timeout_ms;
    atomic_init(&s->generation, 1);
    atomic_init(&s->failovers, 0);
    atomic_init(&s->alarms, 0);
    *err = RCONN_ERR_UNAVAILABLE;
    if (pthread_mutex_init(&s->mu, NULL) != 0) goto fail_free;
    if (rconn_cond_init_monotonic(&s->cv) != RCONN_OK) goto fail_mu;
    if (pthread_create(&s->watcher, NULL, watcher_main, s) != 0) goto fail_cv;
    *err = RCONN_OK;
    return s;
fail_cv:
    pthread_cond_destroy(&s->cv);
fail_mu:
    pthread_mutex_destroy(&s->mu);
fail_free:
    free(s);
    return NULL;
}

/* Stops the watcher and frees s. rconn_sentinel_free(NULL) is a no-op. This function can't
 * fail. */
void rconn_sentinel_free(rconn_sentinel *s) {
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
