/* lock_call.c - the lock scripts run on several nodes at once, and what each answered.
 *
 * lock_dist.c builds a batch of script calls (struct lock__call, one per
 * node) and hands it to lock__node_calls(); each call comes back with its
 * answer as plain integers, or with why it has none, never with a
 * redisReply. Connections come from lock_node.c, the scripts' text and
 * SHA-1s from lock_script.c.
 *
 * DESIGN
 * Parallel calls: each call's command is appended to its own connection,
 * all are flushed, then the answers are read with one poll() over all
 * sockets until a shared deadline (lock__poll_until), so N round trips
 * overlap into one. A new connection first sends AUTH/SELECT and waits for
 * their answers before the script goes out (a failed SELECT must not let a
 * script run in db 0).
 *
 * Scripts: calls use EVALSHA; a NOSCRIPT answer (after SCRIPT FLUSH or a
 * restart) is retried on the spot with EVAL and the full text, which also
 * puts the script back in the server's cache.
 *
 * Lost answers: a call sent but not answered in time may still run when the
 * server wakes up (a paused server keeps the bytes in its socket). When the
 * caller asks for it (undo_nkeys), its undo script (the release script; for a
 * reentrant acquire, the release of the hold its owner just added) is written
 * behind it on the same connection before that connection is closed: the
 * server executes a connection's commands in order, so a late SET is undone
 * right after it runs instead of holding the key until its TTL.
 *
 * Reasons: a call that ends UNSENT, LOST or ERROR says why in c->why, as
 * "host:port: " and what hiredis (its errstr) or the server (its error
 * reply) said, or how long it waited in vain; lock_dist.c turns those into
 * the caller's lock_last_error().
 */
#include "lock/lock.h"

#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <hiredis.h>

#include "lock/lock_impl.h"

/* Phases of a call (lock__call.phase). */
enum {
    PH_NONE,  /* no connection: the call never went out */
    PH_SETUP, /* waiting for AUTH/SELECT answers; the script is not sent yet */
    PH_OP,    /* EVALSHA sent */
    PH_EVAL,  /* NOSCRIPT answered; EVAL sent */
    PH_DONE,  /* answered; the connection is healthy */
    PH_DROP,  /* answered with an error; close the connection */
    PH_BROKEN /* socket failure or no answer; close the connection */
};

/* ---- reasons ---- */

/* Writes into c->why where c went ("host:port" of its connection, else of its node) and the
 * printf-style text after it. */
static void call_why(struct lock__call *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void call_why(struct lock__call *c, const char *fmt, ...) {
    char text[LOCK__WHY_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (c->conn != NULL)
        snprintf(c->why, sizeof c->why, "%.100s: %.140s", c->conn->at, text);
    else
        snprintf(c->why, sizeof c->why, "%.100s:%d: %.140s", c->node->addr.host, c->node->addr.port,
                 text);
}

/* Writes into c->why what hiredis says broke c's connection. */
static void call_why_conn(struct lock__call *c) {
    call_why(c, "%s", lock__conn_errstr(c->conn));
}

/* Writes into c->why what reply r, which c could not use, says: an error's text, else its
 * type. */
static void call_why_reply(struct lock__call *c, const char *what, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS)
        call_why(c, "%s: %.*s", what, (int)(r->len < 160 ? r->len : 160), r->str);
    else
        call_why(c, "%s: an unexpected answer (type %d)", what, r->type);
}

/* ---- one call ---- */

/* Reads an error answer r to c's script from a cluster's master: a -MOVED/-ASK is kept in
 * c->redirect for lock__node_calls() to follow; -TRYAGAIN and -CLUSTERDOWN (which also makes
 * the map stale) mark c for a later retry. The script did not run: c ends UNSENT on a healthy
 * connection. Returns 1 when r was one of these, else 0. */
static int call_cluster_refusal(struct lock__call *c, const redisReply *r) {
    rconn_cluster *cl = c->node->cluster_of;
    if (cl == NULL || r->type != REDIS_REPLY_ERROR) return 0;
    if (rconn_cluster_redirect_parse(r->str, r->len, &c->redirect) == 0) {
        if (c->redirect.host[0] == '\0')
            memcpy(c->redirect.host, c->node->addr.host, sizeof c->redirect.host);
        c->redirected = 1;
    } else if (strncmp(r->str, "TRYAGAIN", 8) == 0) {
        c->retry = 1;
    } else if (strncmp(r->str, "CLUSTERDOWN", 11) == 0) {
        c->retry = 1;
        rconn_cluster_stale(cl);
    } else {
        return 0;
    }
    if (!c->redirected) call_why_reply(c, "refused", r);
    c->state = LOCK__CALL_UNSENT;
    c->phase = PH_DONE;
    return 1;
}

/* Appends c's script as EVALSHA (eval == 0) or EVAL with the full text. Returns 0 or -1. */
static int call_append(struct lock__call *c, struct lock__conn *cn, enum lock__script s, int eval,
                       size_t nkeys, size_t nargs) {
    const char *argv[LOCK__ARGV_MAX];
    char nk[24];
    snprintf(nk, sizeof nk, "%zu", nkeys);
    int argc = 0;
    argv[argc++] = eval ? "EVAL" : "EVALSHA";
    argv[argc++] = eval ? lock__script_text(s) : lock__script_sha(s);
    argv[argc++] = nk;
    for (size_t i = 0; i < nkeys; i++)
        argv[argc++] = c->keys[i];
    for (size_t i = 0; i < nargs; i++)
        argv[argc++] = c->args[i];
    return lock__conn_append(cn, argc, argv);
}

/* Sends c's script on its connection. Returns 0, or -1 (the connection is dead; c->why says
 * why). */
static int call_send_op(struct lock__call *c) {
    if (call_append(c, c->conn, c->script, 0, c->nkeys, c->nargs) != 0 ||
        lock__conn_flush(c->conn) != 0) {
        call_why_conn(c);
        return -1;
    }
    c->phase = PH_OP;
    return 0;
}

/* Records a script's answer r in c: an integer, or an array of integers with at most one
 * token-sized string among them (c->text; its place in c->vals holds 0). Anything else (an
 * error reply: NOPERM, OOM, a script error) ends c in ERROR with its text in c->why. */
static void call_take_answer(struct lock__call *c, const redisReply *r) {
    c->phase = PH_DONE;
    if (r->type == REDIS_REPLY_INTEGER) {
        c->state = LOCK__CALL_INT;
        c->ival = r->integer;
        return;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements <= LOCK_MULTI_MAX) {
        c->text[0] = '\0';
        for (size_t i = 0; i < r->elements; i++) {
            const redisReply *e = r->element[i];
            if (e->type == REDIS_REPLY_INTEGER) {
                c->vals[i] = e->integer;
            } else if (e->type == REDIS_REPLY_STRING && e->len == LOCK_TOKEN_LEN &&
                       c->text[0] == '\0' && memchr(e->str, '\0', LOCK_TOKEN_LEN) == NULL) {
                memcpy(c->text, e->str, LOCK_TOKEN_LEN);
                c->text[LOCK_TOKEN_LEN] = '\0';
                c->vals[i] = 0;
            } else {
                goto bad;
            }
        }
        c->nvals = r->elements;
        c->state = LOCK__CALL_ARRAY;
        return;
    }
bad:
    call_why_reply(c, "script", r);
    c->state = LOCK__CALL_ERROR;
    c->phase = PH_DROP;
}

/* Answers NOSCRIPT on c: sends the script again as EVAL (behind its own ASKING when one is
 * being followed). */
static void call_resend_eval(struct lock__call *c) {
    const char *asking[] = {"ASKING"}; /* it covers one command: the EVAL needs its own */
    c->skip_ok = c->asking;
    if ((c->asking && lock__conn_append(c->conn, 1, asking) != 0) ||
        call_append(c, c->conn, c->script, 1, c->nkeys, c->nargs) != 0 ||
        lock__conn_flush(c->conn) != 0) {
        call_why_conn(c);
        c->phase = PH_BROKEN;
        c->state = LOCK__CALL_LOST;
        return;
    }
    c->phase = PH_EVAL;
}

/* Handles one reply r on c's connection, advancing c's phase. */
static void call_on_reply(struct lock__call *c, const redisReply *r) {
    if (rconn_reply_not_master(r)) c->conn->stale = 1;
    if (c->phase == PH_EVAL && c->skip_ok > 0 && r->type == REDIS_REPLY_STATUS) {
        c->skip_ok--; /* ASKING's +OK before the EVAL's answer */
        return;
    }
    if (c->phase == PH_SETUP) {
        if (!rconn_reply_ok(r)) { /* a refused AUTH/SELECT: the script never went out */
            call_why_reply(c, "AUTH/SELECT", r);
            c->phase = PH_DROP;
            return;
        }
        if (--c->conn->owed == 0 && call_send_op(c) != 0) c->phase = PH_BROKEN;
        return;
    }
    if ((c->phase == PH_OP || c->phase == PH_EVAL) && call_cluster_refusal(c, r)) return;
    if (c->phase == PH_OP && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        call_resend_eval(c);
        return;
    }
    call_take_answer(c, r);
}

static int call_waiting(const struct lock__call *c) {
    return c->phase == PH_SETUP || c->phase == PH_OP || c->phase == PH_EVAL;
}

/* Reads c's socket and handles every complete reply in it. */
static void call_read(struct lock__call *c) {
    if (lock__conn_read(c->conn) != 0) {
        call_why_conn(c);
        c->phase = PH_BROKEN;
        return;
    }
    redisReply *r;
    int got;
    while (call_waiting(c) && (got = lock__conn_next(c->conn, &r)) != 0) {
        if (got < 0) {
            call_why_conn(c);
            c->phase = PH_BROKEN;
            return;
        }
        call_on_reply(c, r);
        freeReplyObject(r);
    }
}

/* Ends a call that got no answer within timeout_ms: its state says whether the script may have
 * run, and the undo (when asked for) rides behind it on the same connection. */
static void call_give_up(struct lock__call *c, int timeout_ms) {
    int sent = c->phase == PH_OP || c->phase == PH_EVAL;
    c->state = sent ? LOCK__CALL_LOST : LOCK__CALL_UNSENT;
    call_why(c, "no answer%s within %d ms", sent ? "" : " to AUTH/SELECT", timeout_ms);
    const char *asking[] = {"ASKING"};
    if (sent && c->undo_nkeys > 0 && c->conn->ctx->err == 0 &&
        (!c->asking || lock__conn_append(c->conn, 1, asking) == 0) &&
        call_append(c, c->conn, c->undo_script, 1, c->undo_nkeys, c->undo_nargs) == 0)
        (void)lock__conn_flush(c->conn); /* best effort: the lease expires by itself anyway */
    c->phase = PH_BROKEN;
}

/* ---- a batch ---- */

/* Starts c: borrows a connection to its node (a NULL node: a cluster that could not say where;
 * the call cannot go out, and c->why says why already) and sends what can go now: AUTH/SELECT
 * (and ASKING) first on a new connection, else the script. */
static void call_start(struct lock__call *c, int timeout_ms) {
    c->state = LOCK__CALL_UNSENT;
    c->phase = PH_NONE;
    c->nvals = 0;
    c->text[0] = '\0';
    c->conn = NULL;
    c->skip_ok = 0;
    if (c->node == NULL) return;
    if (lock__conn_borrow(c->node, LOCK__CONN_CMD, timeout_ms, &c->conn, c->why, sizeof c->why) !=
        LOCK_OK) {
        c->conn = NULL;
        lock__conn_return(c->node, NULL, LOCK__CONN_CMD, LOCK__CONN_BROKEN);
        return;
    }
    const char *asking[] = {"ASKING"};
    if (c->asking) {
        if (lock__conn_append(c->conn, 1, asking) != 0) {
            call_why(c, "out of memory");
            lock__conn_return(c->node, c->conn, LOCK__CONN_CMD, LOCK__CONN_DROP);
            c->conn = NULL;
            return;
        }
        c->conn->owed++; /* answered +OK like AUTH/SELECT, before the script goes out */
    }
    if (c->conn->owed > 0) {
        c->phase = PH_SETUP;
        if (lock__conn_flush(c->conn) != 0) {
            call_why_conn(c);
            c->phase = PH_BROKEN;
        }
    } else if (call_send_op(c) != 0) {
        c->phase = PH_BROKEN;
        c->state = LOCK__CALL_LOST;
    }
}

/* Ends c once its answer came or the time ran out: fixes its state and gives its connection
 * back as its phase says. */
static void call_finish(struct lock__call *c, int timeout_ms) {
    if (call_waiting(c)) call_give_up(c, timeout_ms);
    if (c->phase == PH_BROKEN && c->state == LOCK__CALL_UNSENT && c->conn != NULL &&
        c->conn->owed == 0)
        c->state = LOCK__CALL_LOST; /* broke after the script went out */
    if (c->phase == PH_DROP && c->state == LOCK__CALL_UNSENT && c->conn != NULL &&
        c->conn->owed == 0)
        c->state = LOCK__CALL_ERROR;
    enum lock__conn_fate fate = c->phase == PH_DONE   ? LOCK__CONN_HEALTHY
                                : c->phase == PH_DROP ? LOCK__CONN_DROP
                                                      : LOCK__CONN_BROKEN;
    if (c->conn != NULL) lock__conn_return(c->node, c->conn, LOCK__CONN_CMD, fate);
    c->conn = NULL;
}

/* The calls of one run_calls(), for lock__poll_until()'s hooks. */
struct batch {
    struct lock__call *const *cs;
    size_t n;
};

/* Lists the sockets of the calls still waiting for an answer. */
static size_t batch_pollset(void *ud, struct pollfd *pfd, size_t *idx) {
    const struct batch *b = ud;
    size_t nfd = 0;
    for (size_t i = 0; i < b->n && nfd < LOCK_REDLOCK_NODES_MAX; i++) {
        if (!call_waiting(b->cs[i])) continue;
        pfd[nfd].fd = b->cs[i]->conn->ctx->fd;
        pfd[nfd].events = POLLIN;
        pfd[nfd].revents = 0;
        idx[nfd++] = i;
    }
    return nfd;
}

/* Reads what call i's socket has. Never stops the wait: the others may still answer. */
static int batch_ready(void *ud, size_t i) {
    const struct batch *b = ud;
    call_read(b->cs[i]);
    return 0;
}

/* Runs *cs[0..n) in parallel on their nodes; see lock__node_calls(). */
static void run_calls(struct lock__call *const *cs, size_t n, int timeout_ms) {
    for (size_t i = 0; i < n; i++)
        call_start(cs[i], timeout_ms);
    struct batch b = {cs, n};
    (void)lock__poll_until(rconn_now_ms() + timeout_ms, batch_pollset, batch_ready, &b);
    for (size_t i = 0; i < n; i++)
        call_finish(cs[i], timeout_ms);
}

/* ---- API (module-internal) ---- */

/* Runs calls[0..n) in parallel: each borrows a connection to its node, all scripts go out, and
 * the answers are read until timeout_ms after the last one was sent. Fills each call's state
 * (and ival or vals): UNSENT when the script cannot have run, LOST when it was sent but not
 * answered, ERROR on an error reply, INT or ARRAY with the answer; with the first three, why
 * says what went wrong. Connections go back to their nodes (or are closed). The calls' keys and
 * args are borrowed for the duration.
 *
 * A call on a cluster's node goes to the master serving its first key's slot (the caller
 * keeps a call's keys in one slot). A -MOVED answer is reported to the cluster and the call
 * sent once more, at once, to the master it names; an -ASK answer sends ASKING and the call
 * to the node it names, once. A call refused again, or answered -TRYAGAIN or -CLUSTERDOWN,
 * ends UNSENT with retry set. Each call's node is the caller's again on return. This function
 * can't fail: failures are per call, in its state. */
void lock__node_calls(struct lock__call *calls, size_t n, int timeout_ms) {
    struct lock__call *cs[LOCK_REDLOCK_NODES_MAX] = {NULL};
    for (size_t i = 0; i < n; i++) {
        struct lock__call *c = &calls[i];
        c->retry = 0;
        c->asking = 0;
        c->redirected = 0;
        c->routed_from = NULL;
        c->why[0] = '\0';
        if (c->node->cluster != NULL) {
            c->routed_from = c->node;
            c->node = lock__node_route(c->routed_from, c->keys[0], c->why, sizeof c->why);
        }
        cs[i] = c;
    }
    run_calls(cs, n, timeout_ms);

    size_t m = 0; /* follow the redirects, once */
    for (size_t i = 0; i < n; i++) {
        struct lock__call *c = &calls[i];
        if (!c->redirected || c->routed_from == NULL) continue;
        c->redirected = 0;
        rconn_cluster_redirected(c->routed_from->cluster, &c->redirect);
        c->node = lock__node_at(c->routed_from, c->redirect.host, c->redirect.port);
        if (c->node == NULL)
            snprintf(c->why, sizeof c->why, "cluster: no room for master %s:%d", c->redirect.host,
                     c->redirect.port);
        c->asking = c->redirect.ask;
        cs[m++] = c;
    }
    if (m > 0) run_calls(cs, m, timeout_ms);

    for (size_t i = 0; i < n; i++) {
        struct lock__call *c = &calls[i];
        if (c->redirected) { /* moved again already: the next try has the newer map */
            if (c->routed_from != NULL && !c->redirect.ask)
                rconn_cluster_redirected(c->routed_from->cluster, &c->redirect);
            c->redirected = 0;
            c->retry = 1;
            call_why(c, "redirected again, to %s:%d", c->redirect.host, c->redirect.port);
        }
        if (c->routed_from != NULL) c->node = c->routed_from;
        c->routed_from = NULL;
        c->asking = 0;
    }
}
