/* request_id.c - X-Request-Id: a client's id when it is sane, else one made here.
 *
 * A request's id is echoed in the response's X-Request-Id header and logged
 * in its request line, so a client, a proxy and the log can name the same
 * request. A client's id is taken when it is 1 to SERVER__REQUEST_ID_MAX
 * bytes of visible ASCII other than '"' and '\' (so it can neither split
 * nor forge a log line); otherwise the server makes one: 16 hex digits of a
 * per-thread sequence seeded from getrandom().
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
 * 17; a shorter buffer gets a truncated id). Each thread draws its own
 * sequence: splitmix64 from a seed taken once from getrandom() (or, should
 * that fail, from the clock, the thread and a counter), so a request costs
 * no system call. An id names a request; it is not a secret. Can't fail. */
void server__request_id_make(char *out, size_t outlen) {
    static _Atomic uint64_t counter;
    static _Thread_local uint64_t state;
    static _Thread_local int seeded;
    if (!seeded) {
        if (getrandom(&state, sizeof state, GRND_NONBLOCK) != (ssize_t)sizeof state) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            state = (((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ (uintptr_t)&seeded) *
                        0x9e3779b97f4a7c15u +
                    atomic_fetch_add(&counter, 1);
        }
        seeded = 1;
    }
    uint64_t z = (state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    static const char hex[] = "0123456789abcdef";
    size_t n = outlen ? (outlen - 1 < 16 ? outlen - 1 : 16) : 0;
    for (size_t i = 0; i < n; i++) out[i] = hex[(z >> (60 - 4 * i)) & 15];
    if (outlen) out[n] = '\0';
}
