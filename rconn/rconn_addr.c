/* rconn_addr.c - the URL forms of a Redis address: redis://, redis-sentinel://,
 * redis-cluster://, with credentials and db, parsed into an rconn_addr, compared and checked.
 *
 * Pure: no I/O, no allocation. A URL is parsed whole into a local address and copied out
 * only when every part of it was valid, so a refused URL never leaves a half-filled one.
 */
#include "rconn/rconn.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Returns the value of hex digit ch, or -1. */
static int hexval(int ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..n) into dst (cap bytes with the NUL). Returns 0, or -1 on a bad
 * escape, a decoded NUL, a control character or overflow. */
static int pct_decode(const char *s, size_t n, char *dst, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int ch = (unsigned char)s[i];
        if (ch == '%') {
            if (n - i < 3) return -1;
            int hi = hexval((unsigned char)s[i + 1]);
            int lo = hexval((unsigned char)s[i + 2]);
            if (hi < 0 || lo < 0) return -1;
            ch = hi * 16 + lo;
            if (ch == 0) return -1;
            i += 2;
        } else if (ch < 0x21 || ch == 0x7f) {
            return -1;
        }
        if (o + 1 >= cap) return -1;
        dst[o++] = (char)ch;
    }
    dst[o] = '\0';
    return 0;
}

/* Parses s[0..n) as decimal digits only into *out within [lo, hi]. Returns 0 or -1. */
static int parse_uint(const char *s, size_t n, long lo, long hi, int *out) {
    if (n == 0 || n > 10) return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static int host_char_ok(int ch, int bracketed) {
    if (bracketed) return hexval(ch) >= 0 || ch == ':' || ch == '.';
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '-' || ch == '_';
}

/* Parses one host[:port] in [p, end) into host (RCONN_HOST_MAX + 1 bytes) and *port: an IPv6
 * host in brackets, an empty host meaning empty_host (NULL: not allowed), no port meaning
 * defport. Returns 0, or -1 when it is not one. */
static int parse_host_port(const char *p, const char *end, const char *empty_host, int defport,
                           char *host, int *port) {
    const char *h = p, *h_end;
    int bracketed = 0;
    if (p < end && *p == '[') {
        bracketed = 1;
        h = p + 1;
        const char *close = memchr(h, ']', (size_t)(end - h));
        if (close == NULL || close == h) return -1;
        h_end = close;
        p = close + 1;
    } else {
        h_end = memchr(p, ':', (size_t)(end - p));
        if (h_end == NULL) h_end = end;
        p = h_end;
    }
    size_t hlen = (size_t)(h_end - h);
    if (hlen > RCONN_HOST_MAX) return -1;
    for (size_t i = 0; i < hlen; i++)
        if (!host_char_ok((unsigned char)h[i], bracketed)) return -1;
    if (hlen == 0) {
        if (empty_host == NULL) return -1;
        snprintf(host, RCONN_HOST_MAX + 1, "%s", empty_host);
    } else {
        memcpy(host, h, hlen);
        host[hlen] = '\0';
    }
    *port = defport;
    if (p < end) {
        if (*p != ':') return -1;
        p++;
        if (parse_uint(p, (size_t)(end - p), 1, 65535, port) != 0) return -1;
    }
    return 0;
}

/* Returns 1 when [s, s + len) is a master name: 1..RCONN_MASTER_NAME_MAX of [A-Za-z0-9._-]. */
static int master_name_ok(const char *s, size_t len) {
    if (len == 0 || len > RCONN_MASTER_NAME_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '-' || ch == '_'))
            return 0;
    }
    return 1;
}

/* Parses a Sentinel group's or a cluster's "host[:port][,host[:port]...]" in [p, end) into
 * a's seeds, defport where no port is given. Returns 0 or -1. */
static int parse_seeds(const char *p, const char *end, int defport, rconn_addr *a) {
    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *item_end = comma != NULL ? comma : end;
        if (a->nseeds == RCONN_SEEDS_MAX) return -1;
        struct rconn_at *at = &a->seeds[a->nseeds];
        if (parse_host_port(p, item_end, NULL, defport, at->host, &at->port) != 0) return -1;
        a->nseeds++;
        if (comma == NULL) return 0;
        p = comma + 1;
    }
}

/* Parses url into the caller's *out:
 *   redis://[[user]:pass@]host[:port][/db], or the same without the scheme ("host:port");
 *   redis-sentinel://[[user]:pass@]host[:port][,host[:port]...]/name[/db];
 *   redis-cluster://[[user]:pass@]host[:port][,host[:port]...][/0].
 * Defaults: host 127.0.0.1, port 6379 (a Sentinel's: 26379), db 0, no user, no password.
 * user and pass are percent-decoded; an IPv6 host is written in brackets. Fails with
 * RCONN_ERR_INVALID (NULL arguments, another scheme such as rediss://, a userinfo without
 * ':', a port outside 1..65535, a db that is not a non-negative decimal, a Sentinel group
 * without a master name or with more than RCONN_SEEDS_MAX Sentinels, a cluster without a
 * node, with more than RCONN_SEEDS_MAX of them or with a db other than 0, bad escapes,
 * overlong fields, trailing text); *out is written only on success. */
int rconn_addr_parse(const char *url, rconn_addr *out) {
    if (url == NULL || out == NULL) return RCONN_ERR_INVALID;
    rconn_addr a;
    memset(&a, 0, sizeof a);
    a.port = 6379;

    const char *p = url;
    int sentinel = 0, cluster = 0;
    if (strncasecmp(p, "redis://", 8) == 0) {
        p += 8;
    } else if (strncasecmp(p, "redis-sentinel://", 17) == 0) {
        p += 17;
        sentinel = 1;
    } else if (strncasecmp(p, "redis-cluster://", 16) == 0) {
        p += 16;
        cluster = 1;
    } else if (strstr(p, "://") != NULL) {
        return RCONN_ERR_INVALID; /* rediss:// (TLS) and every other scheme */
    }

    const char *slash = strchr(p, '/');
    const char *auth_end = slash != NULL ? slash : p + strlen(p);

    /* userinfo: everything before the last '@' of the authority */
    const char *at = NULL;
    for (const char *q = p; q < auth_end; q++)
        if (*q == '@') at = q;
    if (at != NULL) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon == NULL) return RCONN_ERR_INVALID;
        if (pct_decode(p, (size_t)(colon - p), a.user, sizeof a.user) != 0 ||
            pct_decode(colon + 1, (size_t)(at - colon - 1), a.pass, sizeof a.pass) != 0)
            return RCONN_ERR_INVALID;
        p = at + 1;
    }

    const char *dbs = NULL; /* the db's digits, when a path gives them */
    if (sentinel) {
        if (slash == NULL || parse_seeds(p, auth_end, 26379, &a) != 0) return RCONN_ERR_INVALID;
        a.host[0] = '\0';
        a.port = 0;
        const char *name = slash + 1;
        const char *name_end = strchr(name, '/');
        if (name_end == NULL) name_end = name + strlen(name);
        if (!master_name_ok(name, (size_t)(name_end - name))) return RCONN_ERR_INVALID;
        memcpy(a.master_name, name, (size_t)(name_end - name));
        a.master_name[name_end - name] = '\0';
        if (*name_end == '/') dbs = name_end + 1;
    } else if (cluster) {
        if (parse_seeds(p, auth_end, 6379, &a) != 0) return RCONN_ERR_INVALID;
        a.host[0] = '\0';
        a.port = 0;
        a.cluster = 1;
        if (slash != NULL) dbs = slash + 1;
    } else {
        if (parse_host_port(p, auth_end, "127.0.0.1", 6379, a.host, &a.port) != 0)
            return RCONN_ERR_INVALID;
        if (slash != NULL) dbs = slash + 1;
    }

    /* db: "/" alone means 0 */
    if (dbs != NULL) {
        size_t dlen = strlen(dbs);
        if (dlen > 0 && parse_uint(dbs, dlen, 0, INT_MAX, &a.db) != 0) return RCONN_ERR_INVALID;
    }
    if (cluster && a.db != 0) return RCONN_ERR_INVALID; /* a cluster has db 0 only */

    *out = a;
    return RCONN_OK;
}

/* Returns 1 when s starts with a URL scheme ("<letters, digits, +.->://"). */
static int has_scheme(const char *s) {
    size_t i = 0;
    while ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
           (s[i] >= '0' && s[i] <= '9') || s[i] == '+' || s[i] == '.' || s[i] == '-')
        i++;
    return i > 0 && strncmp(s + i, "://", 3) == 0;
}

/* Parses a list of URLs separated by commas into out[0..max): "redis://a:1,redis://b:2",
 * where a Sentinel group's own list of Sentinels stays with its URL
 * ("redis-sentinel://s1:26379,s2:26379/m1,redis://c:3" is two), and so does a cluster's list
 * of nodes up to the next URL that names a scheme ("redis-cluster://a:1,b:2,redis://c:3" is
 * two; "redis-cluster://a:1,b:2/0,c:3" too). Writes how many into *n.
 * Returns RCONN_OK, or RCONN_ERR_INVALID (NULL arguments, an empty list or item, more than max
 * URLs, one that rconn_addr_parse() refuses); out and *n are then unspecified. */
int rconn_addr_parse_list(const char *list, rconn_addr *out, size_t max, size_t *n) {
    if (list == NULL || out == NULL || n == NULL) return RCONN_ERR_INVALID;
    *n = 0;
    const char *p = list;
    for (;;) {
        /* a Sentinel group's commas end at the '/' of its master name */
        const char *from = p;
        if (strncasecmp(p, "redis-sentinel://", 17) == 0) {
            const char *slash = strchr(p + 17, '/');
            from = slash != NULL ? slash : p + strlen(p);
        }
        const char *comma = strchr(from, ',');
        if (strncasecmp(p, "redis-cluster://", 16) == 0) {
            /* a cluster's commas go on until its "/db" or an item with a scheme */
            comma = strpbrk(p + 16, ",/");
            while (comma != NULL && *comma == ',' && !has_scheme(comma + 1))
                comma = strpbrk(comma + 1, ",/");
            if (comma != NULL && *comma == '/') comma = strchr(comma, ',');
        }
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        char url[(RCONN_HOST_MAX + 8) * RCONN_SEEDS_MAX + 4 * RCONN_CRED_MAX];
        if (len == 0 || len >= sizeof url || *n == max) return RCONN_ERR_INVALID;
        memcpy(url, p, len);
        url[len] = '\0';
        if (rconn_addr_parse(url, &out[*n]) != RCONN_OK) return RCONN_ERR_INVALID;
        (*n)++;
        if (comma == NULL) return RCONN_OK;
        p = comma + 1;
    }
}

/* Returns 1 when a and b name the same data: the same host, port and db, or the same
 * Sentinel group (master name, db, and the same Sentinels in the same order), or the same
 * cluster (the same seed nodes in the same order); else 0 (also for NULL, and for a
 * cluster and a single server, even one of its nodes). Credentials are not compared. This
 * function can't fail. */
int rconn_addr_same(const rconn_addr *a, const rconn_addr *b) {
    if (a == NULL || b == NULL || a->db != b->db || (a->cluster != 0) != (b->cluster != 0))
        return 0;
    if (strcmp(a->master_name, b->master_name) != 0) return 0;
    if (a->master_name[0] == '\0' && !a->cluster)
        return strcmp(a->host, b->host) == 0 && a->port == b->port;
    if (a->nseeds != b->nseeds) return 0;
    for (int i = 0; i < a->nseeds; i++)
        if (strcmp(a->seeds[i].host, b->seeds[i].host) != 0 || a->seeds[i].port != b->seeds[i].port)
            return 0;
    return 1;
}

/* Returns 1 when *addr is usable: non-NULL, every string NUL-terminated within its field,
 * db >= 0, and either one server (host non-empty, port in 1..65535), a Sentinel group
 * (1..RCONN_SEEDS_MAX Sentinels, each with a host and a port) or a cluster (no master name,
 * db 0, 1..RCONN_SEEDS_MAX seeds, each with a host and a port); else 0. This function can't
 * fail. */
int rconn_addr_valid(const rconn_addr *addr) {
    if (addr == NULL || addr->db < 0 || memchr(addr->user, '\0', sizeof addr->user) == NULL ||
        memchr(addr->pass, '\0', sizeof addr->pass) == NULL ||
        memchr(addr->master_name, '\0', sizeof addr->master_name) == NULL)
        return 0;
    if (addr->cluster && (addr->master_name[0] != '\0' || addr->db != 0)) return 0;
    if (addr->master_name[0] == '\0' && !addr->cluster)
        return memchr(addr->host, '\0', sizeof addr->host) != NULL && addr->host[0] != '\0' &&
               addr->port >= 1 && addr->port <= 65535;
    if (addr->nseeds < 1 || addr->nseeds > RCONN_SEEDS_MAX) return 0;
    for (int i = 0; i < addr->nseeds; i++) {
        const struct rconn_at *at = &addr->seeds[i];
        if (memchr(at->host, '\0', sizeof at->host) == NULL || at->host[0] == '\0' ||
            at->port < 1 || at->port > 65535)
            return 0;
    }
    return 1;
}
