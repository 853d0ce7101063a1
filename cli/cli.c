/* cli.c - parsing the command-line values the programs share (see cli.h). */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

int cli_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    if (!s || !*s) return CLI_ERR_SYNTAX;
    uint64_t v = 0;
    int overflow = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return CLI_ERR_SYNTAX;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            overflow = 1; /* keep going: junk further on is a syntax error */
        else
            v = v * 10 + d;
    }
    if (overflow || v < lo || v > hi) return CLI_ERR_RANGE;
    *out = v;
    return CLI_OK;
}

int cli_parse_seconds(const char *s, double max_s, double *out) {
    if (!s) return CLI_ERR_SYNTAX;
    size_t digits = 0, dots = 0;
    for (const char *p = s; *p; p++) {
        if (*p >= '0' && *p <= '9')
            digits++;
        else if (*p == '.' && dots == 0)
            dots++;
        else
            return CLI_ERR_SYNTAX;
    }
    if (digits == 0) return CLI_ERR_SYNTAX;
    /* Digits and one dot only: strtod reads all of it, and cannot fail but
     * by overflow to HUGE_VAL, which is above any max_s worth asking for. */
    double v = strtod(s, NULL);
    if (!(v > 0) || !(v <= max_s)) return CLI_ERR_RANGE;
    *out = v;
    return CLI_OK;
}

int cli_parse_duration(const char *s, uint64_t max_s, uint64_t *out) {
    static const struct {
        char unit;
        uint64_t s;
    } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
    char num[24];
    size_t n = s ? strlen(s) : 0;
    uint64_t mult = 1, v;
    if (n == 0) return CLI_ERR_SYNTAX;
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (s[n - 1] == units[i].unit) {
            mult = units[i].s;
            n--;
            break;
        }
    if (n == 0 || n >= sizeof num) return n == 0 ? CLI_ERR_SYNTAX : CLI_ERR_RANGE;
    memcpy(num, s, n);
    num[n] = '\0';
    int rc = cli_parse_u64(num, 1, UINT64_MAX, &v);
    if (rc < 0) return rc;
    if (v > max_s / mult) return CLI_ERR_RANGE;
    *out = v * mult;
    return CLI_OK;
}

int cli_split_hostport(const char *s, uint16_t default_port, char *host, size_t hostlen,
                       uint16_t *port) {
    if (!s || !host || hostlen == 0) return CLI_ERR_SYNTAX;
    const char *name = s, *colon;
    size_t nlen;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || (rb[1] && rb[1] != ':')) return CLI_ERR_SYNTAX;
        name = s + 1;
        nlen = (size_t)(rb - name);
        colon = rb[1] ? rb + 1 : NULL;
    } else {
        colon = strrchr(s, ':');
        nlen = colon ? (size_t)(colon - s) : strlen(s);
    }
    if (nlen == 0) return CLI_ERR_SYNTAX;
    uint64_t p = default_port;
    if (colon) {
        int rc = cli_parse_u64(colon + 1, 1, 65535, &p);
        if (rc < 0) return rc;
    }
    if (nlen >= hostlen) return CLI_ERR_TOO_LONG;
    memcpy(host, name, nlen);
    host[nlen] = '\0';
    *port = (uint16_t)p;
    return CLI_OK;
}

const char *cli_strerror(int err) {
    switch (err) {
#define CLI_ERR_STR(name, val, msg)                                                                \
    case CLI_##name: return msg;
        CLI_ERRNO_MAP(CLI_ERR_STR)
#undef CLI_ERR_STR
    }
    return "unknown cli error";
}
