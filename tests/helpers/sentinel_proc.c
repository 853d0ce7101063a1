/* sentinel_proc.c - start, query and stop a master, its replicas and three Sentinels. */
#include "tests/helpers/sentinel_proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis.h>

#define MASTER_NAME "mymaster"
#define QUORUM 2
/* Well above the PING period (500 ms, below). A Sentinel times a master it has just
 * switched to from the switch, and PINGs it first one PING period later: with both at
 * 1000 ms the leader once saw the new master +sdown 1.03 s after +switch-master (and
 * -sdown 56 ms later), enough for a spurious failover back to the old master that
 * had just been restarted, losing the writes made in between. */
#define DOWN_AFTER_MS 2000
#define FAILOVER_TIMEOUT_MS 3000
#define FAILOVER_ASK_AGAIN_MS (4 * FAILOVER_TIMEOUT_MS) /* th_topo_failover: no new master by
                                                         then, none named: it was aborted */
#define START_TIMEOUT_MS 30000

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Returns a connection or NULL; see sentinel_proc.h. */
struct redisContext *th_topo_connect(int port, const char *password, int timeout_ms) {
    struct timeval tv = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000L};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!c) return NULL;
    if (c->err || redisSetTimeout(c, tv) != REDIS_OK) {
        redisFree(c);
        return NULL;
    }
    if (password && *password) {
        redisReply *r = redisCommand(c, "AUTH %s", password);
        int ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        if (!ok) {
            redisFree(c);
            return NULL;
        }
    }
    return c;
}

/* Runs a command on a new connection to port; returns the reply (caller frees it), or
 * NULL when the node does not answer or answers an error. */
static redisReply *ask(int port, const char *password, const char *fmt, const char *arg) {
    redisContext *c = th_topo_connect(port, password, 500);
    if (!c) return NULL;
    redisReply *r = arg ? redisCommand(c, fmt, arg) : redisCommand(c, fmt);
    redisFree(c);
    if (r && r->type == REDIS_REPLY_ERROR) {
        freeReplyObject(r);
        r = NULL;
    }
    return r;
}

/* In a flat field/value array (RESP2 maps of the SENTINEL commands), returns the value
 * string of field, or NULL. */
static const char *field(const redisReply *map, const char *name) {
    if (!map || map->type != REDIS_REPLY_ARRAY) return NULL;
    for (size_t i = 0; i + 1 < map->elements; i += 2) {
        const redisReply *k = map->element[i], *v = map->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING &&
            strcmp(k->str, name) == 0)
            return v->str;
    }
    return NULL;
}

/* Returns the master port that the Sentinel on port names, or -1 if it does not answer. */
static int sentinel_names(int port, const char *master_name) {
    redisReply *r = ask(port, NULL, "SENTINEL get-master-addr-by-name %s", master_name);
    int named = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING)
        named = atoi(r->element[1]->str);
    if (r) freeReplyObject(r);
    return named;
}

/* Returns 1 when ROLE on port names role, else 0. */
static int has_role(int port, const char *password, const char *role) {
    redisReply *r = ask(port, password, "ROLE", NULL);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
             r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, role) == 0;
    if (r) freeReplyObject(r);
    return ok;
}

/* Returns 1 when port is one this topology uses already, other than *self. */
static int port_used(const th_sentinel_topo *t, const th_redis *self, int port) {
    for (int i = 0; i < 3; i++) {
        if (&t->nodes[i] != self && t->nodes[i].port == port) return 1;
        if (&t->sentinels[i] != self && t->sentinels[i].port == port) return 1;
    }
    return 0;
}

/* Writes r's sentinel.conf, monitoring the master on master_port. Returns 0 or -1. */
static int write_sentinel_conf(const th_sentinel_topo *t, const th_redis *r, int master_port) {
    char path[sizeof r->dir + 16];
    snprintf(path, sizeof path, "%s/sentinel.conf", r->dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int bad = fprintf(f,
                      "# written by tests/helpers/sentinel_proc.c; Sentinel rewrites it\n"
                      "port %d\n"
                      "bind 127.0.0.1\n"
                      "daemonize no\n"
                      "sentinel monitor %s 127.0.0.1 %d %d\n"
                      "sentinel down-after-milliseconds %s %d\n"
                      "sentinel failover-timeout %s %d\n"
                      "sentinel parallel-syncs %s 1\n",
                      r->port, t->master_name, master_port, QUORUM, t->master_name, DOWN_AFTER_MS,
                      t->master_name, FAILOVER_TIMEOUT_MS, t->master_name) < 0;
    /* th_topo_start admits no space, quote or backslash, so it needs no quoting */
    if (!bad && t->password[0])
        bad = fprintf(f, "sentinel auth-pass %s %s\n", t->master_name, t->password) < 0;
    if (fclose(f) != 0) bad = 1;
    return bad ? -1 : 0;
}

/* Starts the prepared r on a port no other process of t uses; a sentinel gets its
 * sentinel.conf first. Tries a few ports, since a port found free may be taken before
 * the server binds it. Returns 0 or -1. */
static int start_unique(th_sentinel_topo *t, th_redis *r, int master_port) {
    for (int attempt = 0; attempt < 3; attempt++) {
        if (attempt > 0 || port_used(t, r, r->port)) {
            int port = -1;
            for (int i = 0; i < 20 && (port < 0 || port_used(t, r, port)); i++)
                port = th_free_port();
            if (port < 0 || port_used(t, r, port)) return -1;
            r->port = port;
            snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d/0", port);
        }
        if (r->sentinel && write_sentinel_conf(t, r, master_port) != 0) return -1;
        if (th_redis_restart(r) == 0) return 0;
    }
    return -1;
}

/* Returns the number of entries of a SENTINEL replicas/sentinels reply whose flags are
 * exactly flags (up, connected) and, when link is set, whose master-link-status is link. */
static size_t count_healthy(const redisReply *list, const char *flags, const char *link) {
    size_t n = 0;
    if (!list || list->type != REDIS_REPLY_ARRAY) return 0;
    for (size_t i = 0; i < list->elements; i++) {
        const char *f = field(list->element[i], "flags");
        const char *l = field(list->element[i], "master-link-status");
        if (f && strcmp(f, flags) == 0 && (!link || (l && strcmp(l, link) == 0))) n++;
    }
    return n;
}

/* Returns 1 when the Sentinel on port sees the master up, nreplicas replicas up and
 * linked, and the two other Sentinels. */
static int sentinel_ready(const th_sentinel_topo *t, int port) {
    redisReply *m = ask(port, NULL, "SENTINEL master %s", t->master_name);
    redisReply *r = ask(port, NULL, "SENTINEL replicas %s", t->master_name);
    redisReply *s = ask(port, NULL, "SENTINEL sentinels %s", t->master_name);
    const char *mflags = field(m, "flags");
    int ok = mflags && strcmp(mflags, "master") == 0 &&
             count_healthy(r, "slave", "ok") == (size_t)t->nreplicas &&
             count_healthy(s, "sentinel", NULL) == 2;
    if (m) freeReplyObject(m);
    if (r) freeReplyObject(r);
    if (s) freeReplyObject(s);
    return ok;
}

/* Percent-encodes s into dst (cap bytes with the NUL), all but RFC 3986's unreserved
 * characters. Returns 0, or -1 when it does not fit. */
static int pct_encode(const char *s, char *dst, size_t cap) {
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~';
        size_t need = plain ? 1 : 3;
        if (o + need >= cap) return -1;
        if (plain)
            dst[o++] = (char)*p;
        else
            o += (size_t)snprintf(dst + o, cap - o, "%%%02X", *p);
    }
    dst[o] = '\0';
    return 0;
}

/* Returns 1 when password can go on a command line split at spaces and in sentinel.conf
 * unquoted: 1..63 printable ASCII characters but space, '"', '\'' and '\\'. */
static int password_ok(const char *password) {
    size_t n = strlen(password);
    if (n == 0 || n > 63) return 0;
    for (const char *p = password; *p; p++)
        if (*p <= ' ' || *p > '~' || *p == '"' || *p == '\'' || *p == '\\') return 0;
    return 1;
}

int th_topo_start(th_sentinel_topo *t, int nreplicas, const char *password) {
    memset(t, 0, sizeof *t);
    if (nreplicas < 1 || nreplicas > 2) return -1;
    if (password && *password && !password_ok(password)) return -1;
    t->nreplicas = nreplicas;
    snprintf(t->master_name, sizeof t->master_name, "%s", MASTER_NAME);
    if (password) snprintf(t->password, sizeof t->password, "%s", password);
    int master_port = -1, w;
    long long deadline;
    char common[200], userinfo[200] = "", enc[192];

    /* Data nodes: AOF so a restart keeps the data; full syncs start at once instead
     * of waiting 5 s (repl-diskless-sync-delay) for more replicas to come. */
    if (t->password[0])
        w = snprintf(common, sizeof common,
                     "--appendonly yes --repl-diskless-sync-delay 0 --requirepass %s "
                     "--masterauth %s",
                     t->password, t->password);
    else
        w = snprintf(common, sizeof common, "--appendonly yes --repl-diskless-sync-delay 0");
    if (w < 0 || (size_t)w >= sizeof common) goto fail;
    for (int i = 0; i <= nreplicas; i++) {
        th_redis *n = &t->nodes[i];
        if (th_redis_prepare(n) != 0) goto fail;
        if (i == 0)
            w = snprintf(n->extra, sizeof n->extra, "%s", common);
        else
            w = snprintf(n->extra, sizeof n->extra, "%s --replicaof 127.0.0.1 %d", common,
                         master_port);
        if (w < 0 || (size_t)w >= sizeof n->extra) goto fail;
        if (start_unique(t, n, 0) != 0) goto fail;
        if (i == 0) master_port = n->port;
    }
    /* Replicas in sync before the Sentinels come: a Sentinel learns of replicas from the
     * master's INFO, so it knows them all from its first one. */
    if (th_topo_wait_replicas_synced(t, master_port, nreplicas, 15000) != 0) goto fail;

    for (int i = 0; i < 3; i++) {
        th_redis *s = &t->sentinels[i];
        if (th_redis_prepare(s) != 0) goto fail;
        s->sentinel = 1;
        if (start_unique(t, s, master_port) != 0) goto fail;
        /* Test pace (SENTINEL DEBUG, Redis 7): INFO every 1 s instead of 10 s, hello
         * messages every 0.5 s instead of 2 s, so discovery, config propagation and
         * the demotion of a returning old master (4 hello periods after its INFO says
         * master) take seconds; PING every 0.5 s instead of 1 s (see DOWN_AFTER_MS).
         * An older Sentinel without it keeps its defaults. */
        redisReply *r =
            ask(s->port, NULL, "SENTINEL DEBUG info-period 1000 publish-period 500 ping-period 500",
                NULL);
        if (r) freeReplyObject(r);
    }

    if (t->password[0]) {
        if (pct_encode(t->password, enc, sizeof enc) != 0) goto fail;
        snprintf(userinfo, sizeof userinfo, ":%s@", enc);
    }
    w = snprintf(t->url, sizeof t->url,
                 "redis-sentinel://%s127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/%s/0", userinfo,
                 t->sentinels[0].port, t->sentinels[1].port, t->sentinels[2].port, t->master_name);
    if (w < 0 || (size_t)w >= sizeof t->url) goto fail;

    deadline = now_ms() + START_TIMEOUT_MS;
    for (int i = 0; i < 3; i++) {
        while (!sentinel_ready(t, t->sentinels[i].port)) {
            if (now_ms() > deadline) goto fail;
            sleep_ms(50);
        }
    }
    return 0;

fail:
    th_topo_stop(t);
    return -1;
}

void th_topo_stop(th_sentinel_topo *t) {
    /* Sentinels first, so none starts a failover while the data nodes go. */
    for (int i = 0; i < 3; i++)
        th_redis_stop(&t->sentinels[i]);
    for (int i = 0; i < 3; i++)
        th_redis_stop(&t->nodes[i]);
}

int th_topo_master_port(const th_sentinel_topo *t) {
    int named[3];
    for (int i = 0; i < 3; i++)
        named[i] = sentinel_names(t->sentinels[i].port, t->master_name);
    for (int i = 0; i < 3; i++) {
        if (named[i] < 0) continue;
        int votes = 0;
        for (int j = 0; j < 3; j++)
            votes += named[j] == named[i];
        if (votes >= 2) return named[i];
    }
    return -1;
}

int th_topo_wait_master(th_sentinel_topo *t, int not_port, int timeout_ms) {
    long long deadline = now_ms() + timeout_ms;
    do {
        int agreed = -1, answers = 0, split = 0;
        for (int i = 0; i < 3 && !split; i++) {
            int p = sentinel_names(t->sentinels[i].port, t->master_name);
            if (p < 0) continue;
            if (answers++ == 0)
                agreed = p;
            else if (p != agreed)
                split = 1;
        }
        if (answers > 0 && !split && agreed != not_port && has_role(agreed, t->password, "master"))
            return agreed;
        sleep_ms(50);
    } while (now_ms() < deadline);
    return -1;
}

/* Returns 1 when some Sentinel names a master other than old (a failover has promoted one,
 * whether or not all of them know yet). */
static int some_sentinel_moved(const th_sentinel_topo *t, int old) {
    for (int i = 0; i < 3; i++) {
        int p = sentinel_names(t->sentinels[i].port, t->master_name);
        if (p > 0 && p != old) return 1;
    }
    return 0;
}

int th_topo_failover(th_sentinel_topo *t, int timeout_ms) {
    long long deadline = now_ms() + timeout_ms;
    int old = th_topo_master_port(t);
    if (old < 0) return -1;
    for (int i = 0; now_ms() < deadline; i = (i + 1) % 3) {
        redisContext *c = th_topo_connect(t->sentinels[i].port, NULL, 1000);
        redisReply *r = c ? redisCommand(c, "SENTINEL FAILOVER %s", t->master_name) : NULL;
        int accepted = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
        if (!accepted) { /* -INPROG, -NOGOODSLAVE, or no answer: again */
            sleep_ms(200);
            continue;
        }
        /* A promotion that outlasts the Sentinels' failover-timeout (a busy machine) is
         * aborted and the old master stays: asked again once no Sentinel names another. */
        do {
            long long left = deadline - now_ms();
            int port = th_topo_wait_master(t, old, left < FAILOVER_ASK_AGAIN_MS
                                                       ? (left > 0 ? (int)left : 1)
                                                       : FAILOVER_ASK_AGAIN_MS);
            if (port > 0) return port;
        } while (now_ms() < deadline && some_sentinel_moved(t, old));
    }
    return -1;
}

int th_topo_wait_role(int port, const char *password, const char *role, int timeout_ms) {
    long long deadline = now_ms() + timeout_ms;
    do {
        if (has_role(port, password, role)) return 0;
        sleep_ms(50);
    } while (now_ms() < deadline);
    return -1;
}

int th_topo_node_index(const th_sentinel_topo *t, int port) {
    if (port <= 0) return -1;
    for (int i = 0; i < 3; i++)
        if (t->nodes[i].port == port) return i;
    return -1;
}

/* Counts the lines "slaveN:...,state=online,offset=O,..." of an INFO replication text
 * with O >= target. */
static int online_at(const char *info, long long target) {
    int n = 0;
    for (const char *line = info; *line;) {
        size_t len = strcspn(line, "\r\n");
        char buf[256];
        if (strncmp(line, "slave", 5) == 0 && line[5] >= '0' && line[5] <= '9' &&
            len < sizeof buf) {
            memcpy(buf, line, len);
            buf[len] = '\0';
            const char *off = strstr(buf, ",offset=");
            if (strstr(buf, ",state=online,") && off && atoll(off + 8) >= target) n++;
        }
        line += len;
        line += strspn(line, "\r\n");
    }
    return n;
}

int th_topo_wait_replicas_synced(th_sentinel_topo *t, int master_port, int nreplicas,
                                 int timeout_ms) {
    long long deadline = now_ms() + timeout_ms;
    long long target = -1; /* the master's offset at its first answer */
    do {
        redisReply *r = ask(master_port, t->password, "INFO replication", NULL);
        if (r && r->type == REDIS_REPLY_STRING && strstr(r->str, "role:master")) {
            const char *off = strstr(r->str, "master_repl_offset:");
            if (off && target < 0) target = atoll(off + strlen("master_repl_offset:"));
            if (target >= 0 && online_at(r->str, target) >= nreplicas) {
                freeReplyObject(r);
                return 0;
            }
        }
        if (r) freeReplyObject(r);
        sleep_ms(50);
    } while (now_ms() < deadline);
    return -1;
}

void th_topo_dump_logs(const th_sentinel_topo *t, int lines, FILE *out) {
    char what[32];
    for (int i = 0; i < 3; i++) {
        snprintf(what, sizeof what, "sentinels[%d]", i);
        th_redis_dump_log(&t->sentinels[i], what, lines, out);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(what, sizeof what, "nodes[%d]", i);
        th_redis_dump_log(&t->nodes[i], what, lines, out);
    }
}

int th_topo_set_down_after(th_sentinel_topo *t, int ms) {
    char v[16];
    snprintf(v, sizeof v, "%d", ms > 0 ? ms : DOWN_AFTER_MS);
    int ok = 0;
    for (int i = 0; i < 3; i++) {
        redisContext *c = th_topo_connect(t->sentinels[i].port, NULL, 5000);
        redisReply *r = c ? redisCommand(c, "SENTINEL SET %s down-after-milliseconds %s",
                                         t->master_name, v)
                          : NULL;
        ok += r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
    }
    return ok == 3 ? 0 : -1;
}
