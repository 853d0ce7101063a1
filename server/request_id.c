/* request_id.c - X-Request-Id: a client's id when it is sane, else one made here.
 *
 * A request's id is echoed in the response's X-Request-Id header and logged
 * in its request line, so a client, a proxy and the log can name the same
 * request. A client's id is taken when it is 1 to SERVER__REQUEST_ID_MAX
 * bytes of visible ASCII other than '"' and '\' (so it can neither split
 * nor forge a log line); otherwise the server makes one: 16 hex digits from
 * getrandom(), or, should that fail, from the clock and a counter.
 */
#include "server/server_impl.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* Returns 1 when id may be used as a request id as it is, else 0 (NULL,
 * empty, too long, or a byte outside '!'..'~', or '"' or '\'). Can't fail. */
int server__request_id_valid(const char *id) {
    if (!id || !*id) return 0;
    size_t i = 0;
    for (; id[i]; i++) {
        unsigned char c = (unsigned char)id[i];
        if (i >= SERVER__REQUEST_ID_MAX || c <= ' ' || c >= 0x7f || c == '"' || c == '\\') return 0;
    }
    return 1;
}

/* Writes a new request id, 16 lower-case hex digits, into out (outlen >=
 * 17; a shorter buffer gets a truncated id). Can't fail. */
void server__request_id_make(char *out, size_t outlen) {
    static _Atomic uint64_t counter;
    uint64_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = (((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec) * 0x9e3779b97f4a7c15u +
            atomic_fetch_add(&counter, 1);
    }
    if (outlen) snprintf(out, outlen, "%016llx", (unsigned long long)r);
}
