/* cluster_proc.c - start, query, reshard, fail over and stop a six-node Redis Cluster. */
#include "tests/helpers/cluster_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

#define START_TIMEOUT_MS 30000     /* from the last node up to an agreed, synced cluster */
#define CREATE_TIMEOUT_MS 30000    /* redis-cli --cluster create */
#define MIGRATE_TIMEOUT_MS 5000    /* MIGRATE's own timeout, and its connection's */
#define MIGRATE_BATCH 100          /* keys a GETKEYSINSLOT + MIGRATE round moves */
#define END_AGREE_TIMEOUT_MS 10000 /* th_cluster_move_slot_end: until all see the new owner */
#define ASK_TIMEOUT_MS 1000        /* one query of the harness */

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Returns a connection or NULL; see cluster_proc.h. */
struct redisContext *th_cluster_connect(int port, int timeout_ms) {
    struct timeval tv = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000L};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!c) return NULL;
    if (c->err || redisSetTimeout(c, tv) != REDIS_OK) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* Runs a command (redisCommand's format) on a new connection to port. Returns the reply,
 * errors included (the caller frees it), or NULL when the node does not answer. */
static redisReply *ask(int port, const char *fmt, ...) {
    redisContext *ctx = th_cluster_connect(port, ASK_TIMEOUT_MS);
    if (!ctx) return NULL;
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    redisFree(ctx);
    return r;
}

/* Runs a command on port (as ask()). Returns 0 when it answers +OK, else -1; a refusal
 * is printed to stderr when loud. */
static int ask_ok(int loud, int port, const char *fmt, ...) {
    redisContext *ctx = th_cluster_connect(port, ASK_TIMEOUT_MS);
    if (!ctx) return -1;
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    redisFree(ctx);
    int ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    if (!ok && loud)
        fprintf(stderr, "cluster_proc: 127.0.0.1:%d refused (%s): %s\n", port, fmt,
                r && r->str ? r->str : "no answer");
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Returns a copy (caller frees) of the text reply of `INFO <section>` or `CLUSTER INFO`
 * (cmd) on port, or NULL. */
static char *info_text(int port, const char *cmd) {
    redisReply *r = ask(port, cmd);
    char *s = NULL;
    if (r && r->type == REDIS_REPLY_STRING) s = strdup(r->str);
    if (r) freeReplyObject(r);
    return s;
}

/* Whether the INFO-style text has the line "<line>" exactly. */
static int has_line(const char *text, const char *line) {
    size_t n = strlen(line);
    for (const char *p = text; p && *p;) {
        size_t len = strcspn(p, "\r\n");
        if (len == n && strncmp(p, line, n) == 0) return 1;
        p += len;
        p += strspn(p, "\r\n");
    }
    return 0;
}

/* Reads CLUSTER SLOTS of the node on port into owner (the port of the master of each
 * slot, 0 for none). Returns 0, or -1 when it does not answer or answers nonsense. */
static int read_slots(int port, uint16_t owner[TH_CLUSTER_SLOTS]) {
    redisReply *r = ask(port, "CLUSTER SLOTS");
    int rc = r && r->type == REDIS_REPLY_ARRAY ? 0 : -1;
    memset(owner, 0, TH_CLUSTER_SLOTS * sizeof *owner);
    for (size_t i = 0; rc == 0 && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2 ||
            e->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
            rc = -1;
            break;
        }
        long long a = e->element[0]->integer, b = e->element[1]->integer;
        long long p = e->element[2]->element[1]->integer;
        if (a < 0 || b < a || b >= TH_CLUSTER_SLOTS || p <= 0 || p > 65535) {
            rc = -1;
            break;
        }
        for (long long s = a; s <= b; s++)
            owner[s] = (uint16_t)p;
    }
    if (r) freeReplyObject(r);
    return rc;
}

int th_cluster_is_master(int port) {
    redisContext *x = th_cluster_connect(port, 2000);
    if (!x) return 0;
    redisReply *role = redisCommand(x, "ROLE");
    int master = role && role->type == REDIS_REPLY_ARRAY && role->elements > 0 &&
                 role->element[0]->type == REDIS_REPLY_STRING &&
                 strcmp(role->element[0]->str, "master") == 0;
    if (role) freeReplyObject(role);
    redisFree(x);
    return master;
}

int th_cluster_other_master(const th_cluster *c, int port) {
    for (int i = 0; i < c->n; i++)
        if (c->nodes[i].port != port && th_cluster_is_master(c->nodes[i].port))
            return c->nodes[i].port;
    return -1;
}

int th_cluster_node_index(const th_cluster *c, int port) {
    if (port <= 0) return -1;
    for (int i = 0; i < c->n; i++)
        if (c->nodes[i].port == port) return i;
    return -1;
}

/* Whether the node on port belongs to c and runs (not killed through th_redis_signal). */
static int running(const th_cluster *c, int port) {
    int i = th_cluster_node_index(c, port);
    return i >= 0 && c->nodes[i].pid > 0;
}

/* Returns 1 when every running node answers cluster_state:ok and the same CLUSTER SLOTS
 * view, every slot served by a running node; then that view is c->agreed. With
 * starting, also every node must know all TH_CLUSTER_NODES. Returns 0 otherwise. */
static int agree(th_cluster *c, int starting) {
    uint16_t *first = malloc(2 * TH_CLUSTER_SLOTS * sizeof *first);
    if (!first) return 0;
    uint16_t *other = first + TH_CLUSTER_SLOTS;
    int ok = 1, seen = 0;
    char known[64];
    snprintf(known, sizeof known, "cluster_known_nodes:%d", TH_CLUSTER_NODES);
    for (int i = 0; ok && i < c->n; i++) {
        const th_redis *n = &c->nodes[i];
        if (n->pid <= 0) continue;
        char *info = info_text(n->port, "CLUSTER INFO");
        ok = info && has_line(info, "cluster_state:ok") && (!starting || has_line(info, known));
        free(info);
        if (ok) ok = read_slots(n->port, seen ? other : first) == 0;
        if (ok && seen) ok = memcmp(first, other, TH_CLUSTER_SLOTS * sizeof *first) == 0;
        seen = 1;
    }
    for (int s = 0; ok && s < TH_CLUSTER_SLOTS; s++)
        ok = running(c, first[s]);
    if (ok && seen) memcpy(c->agreed, first, sizeof c->agreed);
    free(first);
    return ok && seen;
}

/* Whether port is used by a node of c other than nodes[self], as its port or bus port. */
static int port_used(const th_cluster *c, int self, int port) {
    for (int i = 0; i < c->n; i++)
        if (i != self && (c->nodes[i].port == port || c->bus_port[i] == port)) return 1;
    return 0;
}

/* Returns a free port that no node of c uses and that is not except, or -1. */
static int fresh_port(const th_cluster *c, int self, int except) {
    for (int i = 0; i < 20; i++) {
        int p = th_free_port();
        if (p > 0 && p != except && !port_used(c, self, p)) return p;
    }
    return -1;
}

/* Starts the prepared nodes[i] as a cluster node with its own bus port; tries new ports
 * when the server does not come up (a port found free may be taken before it binds).
 * Returns 0 or -1. */
static int start_node(th_cluster *c, int i, int node_timeout_ms) {
    th_redis *r = &c->nodes[i];
    for (int attempt = 0; attempt < 3; attempt++) {
        if (attempt > 0 || port_used(c, i, r->port)) {
            int p = fresh_port(c, i, -1);
            if (p < 0) return -1;
            r->port = p;
            snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d/0", p);
        }
        c->bus_port[i] = fresh_port(c, i, r->port);
        if (c->bus_port[i] < 0) return -1;
        /* AOF so that a node killed and restarted comes back with its data; replicas
         * sync at once rather than after repl-diskless-sync-delay's 5 s; a master down
         * stops only its own slots, not the whole cluster (require-full-coverage no,
         * what docs/OPERATIONS.md recommends, so that other realms go on). */
        int w = snprintf(r->extra, sizeof r->extra,
                         "--cluster-enabled yes --cluster-config-file nodes.conf "
                         "--cluster-node-timeout %d --cluster-port %d --appendonly yes "
                         "--repl-diskless-sync-delay 0 --cluster-require-full-coverage no",
                         node_timeout_ms, c->bus_port[i]);
        if (w < 0 || (size_t)w >= sizeof r->extra) return -1;
        if (th_redis_restart(r) == 0) return 0;
    }
    return -1;
}

/* Copies the file at path to out (a failed command's output). */
static void print_file(const char *path, FILE *out) {
    FILE *f = fopen(path, "r");
    if (!f) return;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, out);
    fclose(f);
}

/* Runs redis-cli --cluster create over the six nodes, its output in nodes[0]'s folder
 * (cluster-create.log, printed to stderr when it fails). Returns 0 or -1. */
static int create_cluster(th_cluster *c) {
    char log[sizeof c->nodes[0].dir + 32];
    snprintf(log, sizeof log, "%s/cluster-create.log", c->nodes[0].dir);
    char addr[TH_CLUSTER_NODES][32];
    const char *bin = getenv("REDIS_CLI");
    if (!bin || !*bin) bin = "redis-cli";
    char *argv[8 + TH_CLUSTER_NODES];
    int n = 0;
    argv[n++] = (char *)bin;
    argv[n++] = (char *)"--cluster";
    argv[n++] = (char *)"create";
    for (int i = 0; i < c->n; i++) {
        snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d", c->nodes[i].port);
        argv[n++] = addr[i];
    }
    argv[n++] = (char *)"--cluster-replicas";
    argv[n++] = (char *)"1";
    argv[n++] = (char *)"--cluster-yes";
    argv[n] = NULL;

    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int in = open("/dev/null", O_RDONLY);
        if (fd < 0 || in < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0 || dup2(in, 0) < 0) _exit(126);
        execvp(bin, argv);
        _exit(127);
    }
    int status = -1;
    long long deadline = now_ms() + CREATE_TIMEOUT_MS;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if ((w < 0 && errno != EINTR) || now_ms() > deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            status = -1;
            break;
        }
        sleep_ms(20);
    }
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    fprintf(stderr, "cluster_proc: %s --cluster create failed; its output:\n", bin);
    print_file(log, stderr);
    return -1;
}

/* Whether nodes[0..2] are masters and the replicas' links to their masters are up. */
static int roles_ready(const th_cluster *c) {
    for (int i = 0; i < c->n; i++) {
        char *s = info_text(c->nodes[i].port, "INFO replication");
        int ok = s && (i < 3 ? has_line(s, "role:master")
                             : has_line(s, "role:slave") && has_line(s, "master_link_status:up"));
        free(s);
        if (!ok) return 0;
    }
    return 1;
}

int th_cluster_start(th_cluster *c, int node_timeout_ms) {
    memset(c, 0, sizeof *c);
    c->moving.slot = -1;
    if (node_timeout_ms < 100 || node_timeout_ms > 60000) return -1;
    c->n = TH_CLUSTER_NODES;
    long long deadline;
    int w;

    for (int i = 0; i < c->n; i++) {
        if (th_redis_prepare(&c->nodes[i]) != 0) goto fail;
        if (start_node(c, i, node_timeout_ms) != 0) goto fail;
    }
    if (create_cluster(c) != 0) goto fail;
    for (int i = 0; i < c->n; i++) {
        redisReply *r = ask(c->nodes[i].port, "CLUSTER MYID");
        int ok = r && r->type == REDIS_REPLY_STRING && r->len == 40;
        if (ok) memcpy(c->id[i], r->str, 41);
        if (r) freeReplyObject(r);
        if (!ok) goto fail;
    }
    deadline = now_ms() + START_TIMEOUT_MS;
    while (!agree(c, 1) || !roles_ready(c)) {
        if (now_ms() > deadline) {
            fprintf(stderr, "cluster_proc: the cluster did not settle in %d ms\n",
                    START_TIMEOUT_MS);
            th_cluster_dump_logs(c, 20, stderr);
            goto fail;
        }
        sleep_ms(50);
    }
    w = snprintf(c->url, sizeof c->url, "redis-cluster://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
                 c->nodes[0].port, c->nodes[1].port, c->nodes[2].port);
    if (w < 0 || (size_t)w >= sizeof c->url) goto fail;
    return 0;

fail:
    th_cluster_stop(c);
    return -1;
}

void th_cluster_stop(th_cluster *c) {
    for (int i = 0; i < TH_CLUSTER_NODES; i++)
        th_redis_stop(&c->nodes[i]);
}

int th_cluster_slot_owner(const th_cluster *c, int slot) {
    if (slot < 0 || slot >= TH_CLUSTER_SLOTS) return -1;
    for (int i = 0; i < c->n; i++) {
        if (c->nodes[i].pid <= 0) continue;
        redisReply *r = ask(c->nodes[i].port, "CLUSTER SLOTS");
        if (!r || r->type != REDIS_REPLY_ARRAY) {
            if (r) freeReplyObject(r);
            continue;
        }
        int port = -1;
        for (size_t k = 0; k < r->elements && port < 0; k++) {
            const redisReply *e = r->element[k];
            if (e->type == REDIS_REPLY_ARRAY && e->elements >= 3 &&
                e->element[0]->type == REDIS_REPLY_INTEGER &&
                e->element[1]->type == REDIS_REPLY_INTEGER &&
                e->element[2]->type == REDIS_REPLY_ARRAY && e->element[2]->elements >= 2 &&
                e->element[2]->element[1]->type == REDIS_REPLY_INTEGER &&
                e->element[0]->integer <= slot && slot <= e->element[1]->integer)
                port = (int)e->element[2]->element[1]->integer;
        }
        freeReplyObject(r);
        return port;
    }
    return -1;
}

/* Whether the node on port says it is a master (ROLE). */
static int is_master(int port) {
    redisReply *r = ask(port, "ROLE");
    int yes = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
              r->element[0]->type == REDIS_REPLY_STRING &&
              strcmp(r->element[0]->str, "master") == 0;
    if (r) freeReplyObject(r);
    return yes;
}

int th_cluster_move_slot_begin(th_cluster *c, int slot, int to_port) {
    if (c->moving.slot >= 0 || slot < 0 || slot >= TH_CLUSTER_SLOTS) return -1;
    int from = th_cluster_slot_owner(c, slot);
    int fi = th_cluster_node_index(c, from), ti = th_cluster_node_index(c, to_port);
    if (fi < 0 || ti < 0 || fi == ti || !running(c, to_port) || !is_master(to_port)) return -1;
    if (ask_ok(1, to_port, "CLUSTER SETSLOT %d IMPORTING %s", slot, c->id[fi]) != 0) return -1;
    if (ask_ok(1, from, "CLUSTER SETSLOT %d MIGRATING %s", slot, c->id[ti]) != 0) {
        ask_ok(1, to_port, "CLUSTER SETSLOT %d STABLE", slot);
        return -1;
    }
    c->moving.slot = slot;
    c->moving.from = from;
    c->moving.to = to_port;
    return 0;
}

int th_cluster_move_slot_keys(th_cluster *c, int slot, int to_port, int max_keys) {
    if (c->moving.slot < 0 || c->moving.slot != slot || c->moving.to != to_port) return -1;
    redisContext *ctx = th_cluster_connect(c->moving.from, MIGRATE_TIMEOUT_MS + 1000);
    if (!ctx) return -1;
    char port[16], timeout[16];
    snprintf(port, sizeof port, "%d", to_port);
    snprintf(timeout, sizeof timeout, "%d", MIGRATE_TIMEOUT_MS);
    int moved = 0, rc = 0;
    while (max_keys < 0 || moved < max_keys) {
        int batch = MIGRATE_BATCH;
        if (max_keys >= 0 && max_keys - moved < batch) batch = max_keys - moved;
        redisReply *keys = redisCommand(ctx, "CLUSTER GETKEYSINSLOT %d %d", slot, batch);
        if (!keys || keys->type != REDIS_REPLY_ARRAY) {
            if (keys) freeReplyObject(keys);
            rc = -1;
            break;
        }
        if (keys->elements == 0) {
            freeReplyObject(keys);
            break;
        }
        const char *argv[7 + MIGRATE_BATCH] = {"MIGRATE", "127.0.0.1", port,  "",
                                               "0",       timeout,     "KEYS"};
        size_t len[7 + MIGRATE_BATCH];
        int argc = 7;
        for (int k = 0; k < argc; k++)
            len[k] = strlen(argv[k]);
        for (size_t k = 0; k < keys->elements && argc < 7 + MIGRATE_BATCH; k++) {
            if (keys->element[k]->type != REDIS_REPLY_STRING) break;
            argv[argc] = keys->element[k]->str;
            len[argc++] = keys->element[k]->len;
        }
        redisReply *r =
            argc == 7 + (int)keys->elements ? redisCommandArgv(ctx, argc, argv, len) : NULL;
        int ok = r && r->type == REDIS_REPLY_STATUS &&
                 (strcmp(r->str, "OK") == 0 || strcmp(r->str, "NOKEY") == 0);
        if (!ok)
            fprintf(stderr, "cluster_proc: MIGRATE of slot %d to %d failed: %s\n", slot, to_port,
                    r && r->str ? r->str : ctx->errstr);
        if (ok) moved += argc - 7;
        if (r) freeReplyObject(r);
        freeReplyObject(keys);
        if (!ok) {
            rc = -1;
            break;
        }
    }
    redisFree(ctx);
    return rc == 0 ? moved : -1;
}

int th_cluster_move_slot_end(th_cluster *c, int slot, int to_port) {
    if (c->moving.slot < 0 || c->moving.slot != slot || c->moving.to != to_port) return -1;
    int from = c->moving.from, ti = th_cluster_node_index(c, to_port);
    redisReply *r = ask(from, "CLUSTER COUNTKEYSINSLOT %d", slot);
    int empty = r && r->type == REDIS_REPLY_INTEGER && r->integer == 0;
    if (r) freeReplyObject(r);
    if (!empty) return -1; /* the old owner would refuse: keys left */
    /* The new owner first (it bumps its config epoch and so wins everywhere), then
     * the old one, then the other masters so they need not learn it by gossip. */
    if (ask_ok(1, to_port, "CLUSTER SETSLOT %d NODE %s", slot, c->id[ti]) != 0) return -1;
    if (ask_ok(1, from, "CLUSTER SETSLOT %d NODE %s", slot, c->id[ti]) != 0) return -1;
    c->moving.slot = -1;
    for (int i = 0; i < c->n; i++) {
        int p = c->nodes[i].port;
        if (p != from && p != to_port && c->nodes[i].pid > 0 && is_master(p))
            ask_ok(0, p, "CLUSTER SETSLOT %d NODE %s", slot, c->id[ti]);
    }
    long long deadline = now_ms() + END_AGREE_TIMEOUT_MS;
    do {
        if (agree(c, 0) && c->agreed[slot] == to_port) return 0;
        sleep_ms(20);
    } while (now_ms() < deadline);
    return -1;
}

int th_cluster_move_slot(th_cluster *c, int slot, int to_port) {
    if (th_cluster_move_slot_begin(c, slot, to_port) != 0) return -1;
    if (th_cluster_move_slot_keys(c, slot, to_port, -1) < 0) return -1;
    return th_cluster_move_slot_end(c, slot, to_port);
}

int th_cluster_wait_ok(th_cluster *c, int timeout_ms) {
    long long deadline = now_ms() + timeout_ms;
    do {
        if (agree(c, 0)) return 0;
        sleep_ms(50);
    } while (now_ms() < deadline);
    return -1;
}

int th_cluster_wait_failover(th_cluster *c, int dead_port, int timeout_ms) {
    uint16_t *view = malloc(TH_CLUSTER_SLOTS * sizeof *view);
    uint8_t *served = malloc(TH_CLUSTER_SLOTS); /* the slots dead_port served */
    int any = 0, port = -1;
    if (!view || !served) goto done;
    for (int s = 0; s < TH_CLUSTER_SLOTS; s++) {
        served[s] = c->agreed[s] == dead_port;
        if (served[s]) any = 1;
    }
    for (int i = 0; i < c->n; i++) { /* what the first node that answers still says */
        if (c->nodes[i].pid <= 0 || read_slots(c->nodes[i].port, view) != 0) continue;
        for (int s = 0; s < TH_CLUSTER_SLOTS; s++)
            if (view[s] == dead_port) any = served[s] = 1;
        break;
    }
    if (!any) goto done;
    long long deadline = now_ms() + timeout_ms;
    do {
        if (agree(c, 0)) {
            int owner = -1, same = 1;
            for (int s = 0; s < TH_CLUSTER_SLOTS && same; s++) {
                if (!served[s]) continue;
                if (owner < 0) owner = c->agreed[s];
                same = c->agreed[s] == owner;
            }
            if (same && owner != dead_port) {
                port = owner;
                break;
            }
        }
        sleep_ms(50);
    } while (now_ms() < deadline);
done:
    free(view);
    free(served);
    return port;
}

void th_cluster_dump_logs(const th_cluster *c, int lines, FILE *out) {
    char what[32];
    for (int i = 0; i < TH_CLUSTER_NODES; i++) {
        snprintf(what, sizeof what, "nodes[%d]", i);
        th_redis_dump_log(&c->nodes[i], what, lines, out);
    }
}
