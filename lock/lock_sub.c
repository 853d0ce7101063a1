/* lock_sub.c - pub/sub waits: a waiter sleeps until a release of its key is published.
 *
 * lock_dist.c subscribes to "<key>:released" on every node after a busy
 * round (lock__sub_begin), sleeps on the subscriptions until a notice, the
 * lease's end or its next poll (lock__sub_wait), and gives them back
 * (lock__sub_end). Connections come from lock_node.c (its subscriber free
 * list). A subscription that fails is no error: the waiter polls instead, so
 * nothing here has a reason to report.
 *
 * DESIGN
 * lock__sub_begin() subscribes borrowed subscriber connections to the
 * channels and waits for the acknowledgements; lock__sub_wait() polls them
 * for a message on one of those channels; lock__sub_end() sends UNSUBSCRIBE
 * without waiting and gives the connection back marked "draining": the next
 * user skips whatever arrives before its own acknowledgements.
 */
#include "lock/lock.h"

#include <poll.h>
#include <string.h>

#include <hiredis.h>

#include "lock/lock_impl.h"

/* Returns 1 when r is a 3-element pub/sub push whose first element is kind and second one of
 * s's channels. */
static int push_is(const struct lock__sub *s, const redisReply *r, const char *kind) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3) return 0;
    const redisReply *k = r->element[0], *ch = r->element[1];
    if (k->type != REDIS_REPLY_STRING || strcmp(k->str, kind) != 0) return 0;
    if (ch->type != REDIS_REPLY_STRING) return 0;
    for (size_t i = 0; i < s->nch; i++)
        if (strcmp(ch->str, s->ch[i]) == 0) return 1;
    return 0;
}

/* Drops s's connection i: closed, and the node told whether the socket broke. */
static void sub_drop(struct lock__sub *s, size_t i, enum lock__conn_fate fate) {
    lock__conn_return(s->node[i], s->conn[i], LOCK__CONN_SUB, fate);
    s->conn[i] = NULL;
}

/* A wait on s's connections, for lock__poll_until()'s hooks. */
struct sub_poll {
    struct lock__sub *s;
    size_t *acks; /* subscribing: the acknowledgements per connection; else NULL */
};

/* Fills pfd/idx with the subscriber connections of s still open (and, with acks, not yet
 * acknowledged on all of s's channels). Returns how many. */
static size_t sub_pollset(void *ud, struct pollfd *pfd, size_t *idx) {
    const struct sub_poll *p = ud;
    const struct lock__sub *s = p->s;
    const size_t *acks = p->acks;
    size_t nfd = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->conn[i] == NULL || (acks && acks[i] == s->nch)) continue;
        pfd[nfd].fd = s->conn[i]->ctx->fd;
        pfd[nfd].events = POLLIN;
        pfd[nfd].revents = 0;
        idx[nfd++] = i;
    }
    return nfd;
}

/* Reads what subscriber connection i has received and hands each reply to on_reply, which
 * returns 1 when the connection must be dropped (an error answer). A broken connection is
 * dropped. */
static void sub_read(struct lock__sub *s, size_t i,
                     int (*on_reply)(struct lock__sub *s, size_t i, const redisReply *r, void *ud),
                     void *ud) {
    struct lock__conn *cn = s->conn[i];
    if (lock__conn_read(cn) != 0) {
        sub_drop(s, i, LOCK__CONN_BROKEN);
        return;
    }
    redisReply *r;
    int got;
    while (s->conn[i] != NULL && (got = lock__conn_next(cn, &r)) != 0) {
        if (got < 0) {
            sub_drop(s, i, LOCK__CONN_BROKEN);
            return;
        }
        int bad = on_reply(s, i, r, ud);
        freeReplyObject(r);
        if (bad) sub_drop(s, i, LOCK__CONN_DROP); /* NOAUTH, NOPERM (no channel rights) */
    }
}

/* sub_read() while subscribing: counts the acknowledgements in acks[i] (ud). */
static int on_subscribe_reply(struct lock__sub *s, size_t i, const redisReply *r, void *ud) {
    size_t *acks = ud;
    struct lock__conn *cn = s->conn[i];
    if (cn->owed > 0 && r->type == REDIS_REPLY_STATUS) {
        cn->owed--;
        return !rconn_reply_ok(r);
    }
    if (acks[i] < s->nch && push_is(s, r, "subscribe"))
        acks[i]++; /* anything else: left over from before, or a message */
    return r->type == REDIS_REPLY_ERROR;
}

/* sub_read() while waiting: notes a published message in *ud. */
static int on_message_reply(struct lock__sub *s, size_t i, const redisReply *r, void *ud) {
    (void)i;
    if (push_is(s, r, "message")) *(int *)ud = 1;
    return r->type == REDIS_REPLY_ERROR;
}

/* Reads connection i while subscribing. Never stops the wait. */
static int sub_ready_subscribe(void *ud, size_t i) {
    struct sub_poll *p = ud;
    sub_read(p->s, i, on_subscribe_reply, p->acks);
    return 0;
}

/* Reads connection i while waiting; stops the wait when a message came. */
static int sub_ready_message(void *ud, size_t i) {
    struct sub_poll *p = ud;
    int message = 0;
    sub_read(p->s, i, on_message_reply, &message);
    return message;
}

/* Borrows s's subscriber connection i to nd (for a cluster, the master of the channels'
 * slot: PUBLISH reaches every node anyway) and sends SUBSCRIBE to s's channels; leaves
 * s->conn[i] NULL when it cannot. */
static void sub_start(struct lock__sub *s, size_t i, struct lock__node *nd, int timeout_ms) {
    char why[LOCK__WHY_MAX];
    if (nd->cluster != NULL && s->nch > 0) nd = lock__node_route(nd, s->ch[0], why, sizeof why);
    s->node[i] = nd;
    s->conn[i] = NULL;
    if (nd == NULL) return;
    if (lock__conn_borrow(nd, LOCK__CONN_SUB, timeout_ms, &s->conn[i], NULL, 0) != LOCK_OK) {
        s->conn[i] = NULL;
        lock__conn_return(nd, NULL, LOCK__CONN_SUB, LOCK__CONN_BROKEN);
        return;
    }
    const char *argv[1 + LOCK_MULTI_MAX];
    argv[0] = "SUBSCRIBE";
    for (size_t k = 0; k < s->nch; k++)
        argv[1 + k] = s->ch[k];
    if (lock__conn_append(s->conn[i], (int)(1 + s->nch), argv) != 0 ||
        lock__conn_flush(s->conn[i]) != 0)
        sub_drop(s, i, LOCK__CONN_BROKEN);
}

/* Subscribes, on each of nodes[0..n), a subscriber connection to channels[0..nch) (borrowed
 * until lock__sub_end()), waiting up to timeout_ms for the acknowledgements. Fills the
 * caller's *s. Returns the number of nodes subscribed (0: none; waiting must then poll). Always
 * pair with lock__sub_end(s). This function can't fail otherwise. */
size_t lock__sub_begin(struct lock__sub *s, struct lock__node *const *nodes, size_t n,
                       const char *const *channels, size_t nch, int timeout_ms) {
    size_t acks[LOCK_REDLOCK_NODES_MAX];
    memset(s, 0, sizeof *s);
    s->n = n;
    s->nch = nch;
    for (size_t k = 0; k < nch; k++)
        s->ch[k] = channels[k];
    for (size_t i = 0; i < n; i++) {
        acks[i] = 0;
        sub_start(s, i, nodes[i], timeout_ms);
    }

    struct sub_poll p = {s, acks};
    (void)lock__poll_until(rconn_now_ms() + timeout_ms, sub_pollset, sub_ready_subscribe, &p);

    size_t subscribed = 0;
    for (size_t i = 0; i < n; i++) {
        if (s->conn[i] == NULL) continue;
        if (acks[i] < nch) {
            sub_drop(s, i, LOCK__CONN_BROKEN);
            continue;
        }
        s->conn[i]->draining = 0;
        subscribed++;
    }
    return subscribed;
}

/* Waits until a message arrives on one of s's channels or the monotonic clock reaches
 * until_ms. Returns 1 (a message), 0 (time is up) or -1 (no subscription is left: the caller
 * must poll). Broken connections are dropped on the way. This function can't fail otherwise. */
int lock__sub_wait(struct lock__sub *s, int64_t until_ms) {
    struct sub_poll p = {s, NULL};
    return lock__poll_until(until_ms, sub_pollset, sub_ready_message, &p);
}

/* Unsubscribes s's connections without waiting for the answers and gives them back (the next
 * user skips the answers). This function can't fail. */
void lock__sub_end(struct lock__sub *s) {
    for (size_t i = 0; i < s->n; i++) {
        if (s->conn[i] == NULL) continue;
        const char *argv[] = {"UNSUBSCRIBE"};
        if (!lock__conn_usable(s->conn[i], LOCK__CONN_SUB) ||
            lock__conn_append(s->conn[i], 1, argv) != 0 || lock__conn_flush(s->conn[i]) != 0) {
            sub_drop(s, i, LOCK__CONN_BROKEN);
            continue;
        }
        s->conn[i]->draining = 1;
        sub_drop(s, i, LOCK__CONN_HEALTHY);
    }
    s->n = 0;
}
