/* rconn_clock.c - the monotonic clock every module times with, and the codes' messages.
 *
 * Deadlines, leases and pauses in lock/, market/, server/ and tools/ are instants of
 * CLOCK_MONOTONIC in milliseconds (rconn_now_ms()), so a wall-clock jump moves none of them;
 * condition variables that wait for such an instant are made to time on the same clock.
 */
#include "rconn/rconn.h"

/* Returns a static message for an rconn_err code, or "unknown rconn error". This function
 * can't fail. */
const char *rconn_strerror(int err) {
    switch (err) {
#define RCONN_ERR_MSG(name, val, msg)                                                              \
    case RCONN_##name: return msg;
        RCONN_ERRNO_MAP(RCONN_ERR_MSG)
#undef RCONN_ERR_MSG
    default: return "unknown rconn error";
    }
}

/* Returns CLOCK_MONOTONIC in milliseconds. This function can't fail (the clock is mandatory
 * on Linux; should it ever fail, 0 is returned). */
int64_t rconn_now_ms(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Initialises *cv to time its waits on CLOCK_MONOTONIC, so wall-clock jumps do not matter.
 * Returns RCONN_OK, or RCONN_ERR_UNAVAILABLE when the system refuses one (*cv is then not
 * initialised). */
int rconn_cond_init_monotonic(pthread_cond_t *cv) {
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0) return RCONN_ERR_UNAVAILABLE;
    int ok =
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 && pthread_cond_init(cv, &attr) == 0;
    pthread_condattr_destroy(&attr);
    return ok ? RCONN_OK : RCONN_ERR_UNAVAILABLE;
}

/* Writes the monotonic instant ms (as from rconn_now_ms(), not negative) into the caller's
 * *ts, for pthread_cond_timedwait on an rconn_cond_init_monotonic() condition. This function
 * can't fail. */
void rconn_timespec_at(int64_t ms, struct timespec *ts) {
    if (ms < 0) ms = 0;
    ts->tv_sec = (time_t)(ms / 1000);
    ts->tv_nsec = (long)(ms % 1000) * 1000000L;
}
