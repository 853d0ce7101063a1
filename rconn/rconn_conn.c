/* rconn_conn.c - one connection to a Redis server: connecting within a timeout, setting it
 * up (AUTH, SELECT, ROLE), judging the replies every user of a connection judges alike, and
 * encoding a pipeline as RESP.
 *
 * Generic: what lock/'s pooled connections, market/'s store connections, the Sentinel
 * resolver and the slot-map fetcher all do on a new connection, written once. What a caller
 * does next (pipelining its setup behind its first command, pooling, reconnecting) stays
 * its own. Every failure says why in a sentence naming the server or the command
 * ("127.0.0.1:6379: Connection refused", "AUTH: WRONGPASS ...").
 */
#include "rconn/rconn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis.h>

#include "rconn/rconn_impl.h"

/* ---- connecting ---- */

/* Returns a why buffer to write into, emptied: why itself, or, when the caller passed none
 * (NULL or whylen 0), a one-byte buffer of the calling thread (*whylen then 1). This function
 * can't fail. */
char *rconn__why_start(char *why, size_t *whylen) {
    static _Thread_local char sink[1];
    if (why == NULL || *whylen == 0) {
        why = sink;
        *whylen = sizeof sink;
    }
    why[0] = '\0';
    return why;
}

static struct timeval tv_of(int ms) {
    struct timeval tv = {ms / 1000, (suseconds_t)(ms % 1000) * 1000};
    return tv;
}

/* Connects to host:port within connect_ms and sets the socket's send and receive timeout to
 * io_ms (TCP keepalive too, best effort: it only speeds up noticing a dead peer). Returns
 * RCONN_OK with a new context in *out (caller frees with redisFree()), RCONN_ERR_NOMEM, or
 * RCONN_ERR_UNAVAILABLE with "host:port: <what hiredis said>" in why (may be NULL);
 * RCONN_ERR_INVALID for NULL host or out or a timeout <= 0. *out is NULL on failure. */
int rconn_connect(const char *host, int port, int connect_ms, int io_ms, struct redisContext **out,
                  char *why, size_t whylen) {
    why = rconn__why_start(why, &whylen);
    if (out != NULL) *out = NULL;
    if (host == NULL || out == NULL || connect_ms <= 0 || io_ms <= 0) return RCONN_ERR_INVALID;
    redisContext *ctx = redisConnectWithTimeout(host, port, tv_of(connect_ms));
    if (ctx == NULL) {
        snprintf(why, whylen, "%s:%d: out of memory", host, port);
        return RCONN_ERR_NOMEM;
    }
    if (ctx->err != 0 || redisSetTimeout(ctx, tv_of(io_ms)) != REDIS_OK) {
        snprintf(why, whylen, "%s:%d: %s", host, port,
                 ctx->err != 0 ? rconn_errstr(ctx) : "cannot set the timeout");
        redisFree(ctx);
        return RCONN_ERR_UNAVAILABLE;
    }
    (void)redisEnableKeepAlive(ctx);
    *out = ctx;
    return RCONN_OK;
}

/* Returns what hiredis says went wrong on ctx ("no error" when nothing did; borrowed, valid
 * until ctx's next call). This function can't fail. */
const char *rconn_errstr(const struct redisContext *ctx) {
    if (ctx == NULL || ctx->err == 0) return "no error";
    return ctx->errstr[0] != '\0' ? ctx->errstr : "connection error";
}

/* Fills argv with the AUTH command for addr's credentials: AUTH user pass when there is a
 * user (an ACL user, whose password may be empty for a nopass user), AUTH pass when there
 * is only a password. Returns the arguments' count (3 or 2; argv borrows addr's strings,
 * valid while *addr is), or 0 when addr has no credentials. This function can't fail. */
int rconn_auth_argv(const rconn_addr *addr, const char *argv[3]) {
    argv[0] = "AUTH";
    if (addr->user[0] != '\0') {
        argv[1] = addr->user;
        argv[2] = addr->pass;
        return 3;
    }
    if (addr->pass[0] == '\0') return 0;
    argv[1] = addr->pass;
    return 2;
}

/* Runs argv on ctx in one round trip and judges the answer: +OK, or for ROLE "master".
 * Returns 0, or -1 with "<command>: <why>" in why. */
static int setup_step(struct redisContext *ctx, int argc, const char **argv, char *why,
                      size_t whylen) {
    redisReply *r = redisCommandArgv(ctx, argc, argv, NULL);
    char judged[96] = "";
    int role = strcmp(argv[0], "ROLE") == 0;
    int ok =
        r != NULL && (role ? rconn_role_master(r, judged, sizeof judged) == 0 : rconn_reply_ok(r));
    if (!ok && r == NULL)
        snprintf(why, whylen, "%s: %s", argv[0], rconn_errstr(ctx));
    else if (!ok && role)
        snprintf(why, whylen, "%s: %s", argv[0], judged);
    else if (!ok && (r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS))
        snprintf(why, whylen, "%s: %.*s", argv[0], (int)(r->len < 160 ? r->len : 160), r->str);
    else if (!ok)
        snprintf(why, whylen, "%s: unexpected reply (type %d)", argv[0], r->type);
    if (r != NULL) freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Sets the new connection ctx up for *addr in plain round trips, as what says (RCONN_SETUP_*
 * flags, sent in this order): AUTH with addr's credentials (none when it has none), SELECT
 * of addr's db (none for db 0), ROLE, which must answer "master". Returns RCONN_OK, or
 * RCONN_ERR_UNAVAILABLE with "<command>: <what the server or hiredis said>" in why (may be
 * NULL), e.g. "AUTH: WRONGPASS invalid username-password pair" or "ROLE: redis is a
 * replica"; ctx is then dead to its user (an error half-way leaves it in an unknown state).
 * RCONN_ERR_INVALID for NULL ctx or addr. */
int rconn_setup(struct redisContext *ctx, const rconn_addr *addr, unsigned what, char *why,
                size_t whylen) {
    why = rconn__why_start(why, &whylen);
    if (ctx == NULL || addr == NULL) return RCONN_ERR_INVALID;
    const char *auth[3];
    int argc = (what & RCONN_SETUP_AUTH) ? rconn_auth_argv(addr, auth) : 0;
    if (argc > 0 && setup_step(ctx, argc, auth, why, whylen) != 0) return RCONN_ERR_UNAVAILABLE;
    if ((what & RCONN_SETUP_SELECT) && addr->db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", addr->db);
        const char *argv[] = {"SELECT", db};
        if (setup_step(ctx, 2, argv, why, whylen) != 0) return RCONN_ERR_UNAVAILABLE;
    }
    if (what & RCONN_SETUP_ROLE) {
        const char *argv[] = {"ROLE"};
        if (setup_step(ctx, 1, argv, why, whylen) != 0) return RCONN_ERR_UNAVAILABLE;
    }
    return RCONN_OK;
}

/* ---- replies ---- */

/* Returns 1 when reply r is +OK, else 0 (also for NULL). This function can't fail. */
int rconn_reply_ok(const struct redisReply *r) {
    return r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
}

/* Returns 1 when reply r says its server is not (or not yet) a master that takes writes:
 * -READONLY, -LOADING or -MASTERDOWN, the answers after which a Sentinel group's master is
 * suspect; else 0 (also for NULL). This function can't fail. */
int rconn_reply_not_master(const struct redisReply *r) {
    return r != NULL && r->type == REDIS_REPLY_ERROR &&
           (strncmp(r->str, "READONLY", 8) == 0 || strncmp(r->str, "LOADING", 7) == 0 ||
            strncmp(r->str, "MASTERDOWN", 10) == 0);
}

/* Judges ROLE's reply r: returns 0 for a master, else -1 with a sentence in why ("redis is a
 * replica", "redis is a sentinel, not a data server", "redis refuses ROLE: ...", ...). This
 * function can't fail. */
int rconn_role_master(const struct redisReply *r, char *why, size_t whylen) {
    if (r != NULL && r->type == REDIS_REPLY_ERROR) {
        snprintf(why, whylen, "redis refuses ROLE: %.60s", r->str);
        return -1;
    }
    const redisReply *name =
        r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 ? r->element[0] : NULL;
    if (!name || (name->type != REDIS_REPLY_STRING && name->type != REDIS_REPLY_STATUS)) {
        snprintf(why, whylen, "redis answered ROLE with something unexpected");
        return -1;
    }
    if (strcmp(name->str, "master") == 0) return 0;
    if (strcmp(name->str, "slave") == 0)
        snprintf(why, whylen, "redis is a replica");
    else if (strcmp(name->str, "sentinel") == 0)
        snprintf(why, whylen, "redis is a sentinel, not a data server");
    else
        snprintf(why, whylen, "redis has an unknown role");
    return -1;
}

/* Counts, in the text of INFO replication from a master, the replicas in
 * sync: "slave<n>:...,state=online,...,lag=<s>" with lag at most max_lag_s
 * seconds (a replica acknowledges every second; one that stopped, or is
 * still loading what it was sent, does not). *connected (may be NULL) gets
 * every replica listed. Returns the count; 0 for NULL. This function can't
 * fail. */
size_t rconn_replicas_in_sync(const char *info, long max_lag_s, size_t *connected) {
    size_t n = 0, all = 0;
    for (const char *l = info; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        size_t len = strcspn(l, "\r\n");
        if (strncmp(l, "slave", 5) != 0 || l[5] < '0' || l[5] > '9') continue;
        const char *colon = memchr(l, ':', len);
        if (!colon) continue;
        all++;
        const char *state = strstr(colon, ",state=online,"), *lag = strstr(colon, ",lag=");
        if (!state || !lag || state > l + len || lag > l + len) continue;
        char *end;
        long v = strtol(lag + 5, &end, 10);
        if (end != lag + 5 && v >= 0 && v <= max_lag_s) n++;
    }
    if (connected) *connected = all;
    return n;
}

/* ---- RESP ---- */

/* Writes v in decimal at p; returns the digits written (at most 20). */
static size_t put_u64(char *p, uint64_t v) {
    char tmp[20];
    size_t n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

/* Appends command argv[0..argc) (NUL-terminated arguments), encoded as Redis's protocol
 * (RESP: *<argc>, then $<len> and the bytes of each argument), to the buffer *buf of *cap
 * bytes at *len, growing it (realloc; the caller owns *buf and frees it) as needed. Returns
 * RCONN_OK, or RCONN_ERR_NOMEM when it cannot grow (*buf, *cap, *len are then as they
 * were). Pure: what redisFormatCommandArgv writes, without its allocation a command. */
int rconn_resp_append(char **buf, size_t *cap, size_t *len, int argc, const char *const *argv) {
    size_t at = *len;
    for (int i = -1; i < argc; i++) {
        size_t l = i < 0 ? 0 : strlen(argv[i]);
        size_t need = at + l + 24 + 2 + 2; /* header, digits, CRLFs */
        if (need > *cap) {
            size_t ncap = *cap ? *cap : 4096;
            while (ncap < need)
                ncap *= 2;
            char *nb = realloc(*buf, ncap);
            if (!nb) return RCONN_ERR_NOMEM;
            *buf = nb;
            *cap = ncap;
        }
        char *p = *buf + at;
        *p++ = i < 0 ? '*' : '$';
        p += put_u64(p, i < 0 ? (uint64_t)argc : l);
        *p++ = '\r';
        *p++ = '\n';
        if (i >= 0) {
            memcpy(p, argv[i], l);
            p += l;
            *p++ = '\r';
            *p++ = '\n';
        }
        at = (size_t)(p - *buf);
    }
    *len = at;
    return RCONN_OK;
}
