/* log.c - the log lines: the only place in the service that prints.
 *
 * server_log() writes one line on stderr (which --log-file points at a file:
 * logfile.c); what a request's line quotes from the client is made safe
 * first (server__log_safe(), server__log_text()), and latencies are measured
 * on the monotonic clock (server__now_us()).
 */
#include "server/server.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "server/server_impl.h"

static atomic_int log_level = SERVER_LOG_INFO;

/* Returns the monotonic clock in microseconds. This function can't fail. */
int64_t server__now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Sets the level below which server_log() prints nothing. Can't fail. */
void server_log_set_level(int level) { atomic_store(&log_level, level); }

/* Whether server_log() prints lines of level: what a caller asks before formatting a line
 * it may not need. Can't fail. */
int server_log_on(int level) { return level <= atomic_load(&log_level); }

/* Prints one line on stderr: UTC time, level, message. Can't fail. */
void server_log(int level, const char *fmt, ...) {
    if (level > atomic_load(&log_level)) return;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    char msg[1024], ts[32];
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s.%03ldZ level=%s %s\n", ts, now.tv_nsec / 1000000, names[level], msg);
}

/* Copies s into out for a log line: bytes that are not printable ASCII, and
 * spaces, become '?', so a decoded path cannot forge or split a line. This
 * function can't fail. */
void server__log_safe(char *out, size_t outlen, const char *s) {
    size_t i = 0;
    for (; s && s[i] && i + 1 < outlen; i++)
        out[i] = s[i] > ' ' && s[i] < 0x7f ? s[i] : '?';
    out[i] = '\0';
}

/* Copies text s into out for a quoted log value: printable ASCII and
 * spaces kept, a quote or backslash becomes '\'', anything else '?'. This
 * function can't fail. */
void server__log_text(char *out, size_t outlen, const char *s) {
    size_t i = 0;
    for (; s && s[i] && i + 1 < outlen; i++)
        out[i] = s[i] == '"' || s[i] == '\\' ? '\'' : s[i] >= ' ' && s[i] < 0x7f ? s[i] : '?';
    out[i] = '\0';
}
