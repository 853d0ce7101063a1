/* market_health.c - whether the store can serve purchases: it answers, is a master, takes writes.
 *
 * DESIGN
 * PING only proves that Redis answers. A purchase also needs a master that
 * accepts writes, so market_health() sends one pipeline of two commands:
 *
 *   ROLE                               must say "master". A replica ("slave")
 *                                      cannot take the purchase, and one made
 *                                      writable (replica-read-only no) would
 *                                      lose it at its next sync.
 *   ZADD market: XX 0 healthz:probe    a write that writes nothing (below).
 *
 * Redis judges a write command before it runs it: a read-only replica
 * answers -READONLY, min-replicas-to-write not met -NOREPLICAS, a failing
 * RDB save or AOF write -MISCONF, maxmemory reached under noeviction -OOM,
 * a user without write access -NOPERM. ZADD is a write that may use memory,
 * so every one of these checks applies to it, as it does to a purchase's
 * commands. With XX, ZADD only updates members that already exist, and
 * "healthz:probe" is never a member of market: (members are
 * "<item>.<seller>", and ids have neither ':' nor '.'), so the probe changes
 * nothing: it creates no key, is not propagated to replicas or the AOF, and
 * does not disturb a WATCH on market:.
 */
#include <stdio.h>
#include <string.h>

#include <hiredis.h>

#include "market/market.h"
#include "market/market_store.h"

#define PROBE_MEMBER "healthz:probe" /* never "<item>.<seller>": see DESIGN */

/* What a refusal's error code (the first word of an error reply) means for purchases. */
static const struct {
    const char *code;
    const char *why;
} refusals[] = {
    {"READONLY", "redis is a read-only replica"},
    {"NOREPLICAS", "redis refuses writes: fewer good replicas than min-replicas-to-write"},
    {"MISCONF", "redis refuses writes: it cannot persist (MISCONF)"},
    {"OOM", "redis refuses writes: maxmemory reached (OOM)"},
    {"NOPERM", "redis refuses writes: the service's user lacks permission (NOPERM)"},
    {"LOADING", "redis is loading its data"},
    {"MASTERDOWN", "redis is a replica whose master link is down"},
    {"WRONGTYPE", "key market: is not a sorted set"},
};

/* Writes "<what> (<code>)" into why, code being the first word of error
 * reply r cut to 31 bytes of [A-Z]; or, when known is set and the code is
 * in refusals[], that sentence. */
static void explain_error(const redisReply *r, int known, const char *what, char *why,
                          size_t whylen) {
    char code[32];
    size_t n = 0;
    while (n < r->len && n + 1 < sizeof code && r->str[n] >= 'A' && r->str[n] <= 'Z') {
        code[n] = r->str[n];
        n++;
    }
    code[n] = '\0';
    for (size_t i = 0; known && i < sizeof refusals / sizeof refusals[0]; i++)
        if (strcmp(code, refusals[i].code) == 0) {
            snprintf(why, whylen, "%s", refusals[i].why);
            return;
        }
    snprintf(why, whylen, "%s (%s)", what, n ? code : "an error");
}

/* Judges ROLE's reply: 0 for a master, else -1 with a sentence in why. */
static int judge_role(const redisReply *r, char *why, size_t whylen) {
    if (r->type == REDIS_REPLY_ERROR) {
        /* LOADING is the one refusal of ROLE that is not about ROLE itself */
        explain_error(r, strncmp(r->str, "LOADING", 7) == 0,
                      "redis refuses ROLE, which the health check needs", why, whylen);
        return -1;
    }
    const redisReply *name = r->type == REDIS_REPLY_ARRAY && r->elements > 0 ? r->element[0] : NULL;
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

/* Says whether c's store can serve purchases now: Redis answers, is a
 * master (ROLE) and accepts a write (see DESIGN; the probe changes
 * nothing). Returns MARKET_OK, or MARKET_ERR_STORE with a sentence in why
 * (which may be NULL or zero-sized) naming the first problem found,
 * MARKET_ERR_NOMEM on out-of-memory, MARKET_ERR_INVALID for a NULL c. On
 * MARKET_OK why holds "". Like every call on c, from one thread at a time. */
int market_health(market_conn *c, char *why, size_t whylen) {
    char dummy[1];
    if (!why || whylen == 0) {
        why = dummy;
        whylen = sizeof dummy;
    }
    why[0] = '\0';
    if (!c) {
        snprintf(why, whylen, "no store connection");
        return MARKET_ERR_INVALID;
    }
    market__cmd cmds[2];
    redisReply *rep[2] = {NULL, NULL};
    market__cmd_set(&cmds[0], 1, "ROLE");
    market__cmd_set(&cmds[1], 5, "ZADD", "market:", "XX", "0", PROBE_MEMBER);
    int rc = market__pipeline(c, cmds, 2, rep);
    if (rc == MARKET_ERR_NOMEM) {
        snprintf(why, whylen, "out of memory");
        return rc;
    }
    if (rc < 0) {
        snprintf(why, whylen, "redis does not answer");
        return MARKET_ERR_STORE;
    }
    rc = MARKET_ERR_STORE;
    if (judge_role(rep[0], why, whylen) < 0) goto done;
    if (rep[1]->type == REDIS_REPLY_ERROR) {
        explain_error(rep[1], 1, "redis refuses writes", why, whylen);
        goto done;
    }
    if (rep[1]->type != REDIS_REPLY_INTEGER) {
        snprintf(why, whylen, "redis answered the write probe with something unexpected");
        goto done;
    }
    rc = MARKET_OK;
done:
    market__replies_free(rep, 2);
    return rc;
}
