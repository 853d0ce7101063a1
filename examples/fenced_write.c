/* fenced_write.c - example: a store that checks fences refuses a holder that lost its lease.
 *
 * Uses only <lock.h> as installed (`make install`, then
 * cc fenced_write.c $(pkg-config --cflags --libs lock)); docs/LOCKING.md shows the steps.
 *
 * No lease lock can stop a holder that was paused past its lease (a GC pause, swapping, a
 * SIGSTOP) from acting as if it still held the lock. The fence can: every lease carries a
 * number that grows with each new lease on the key, the holder sends it with each write, and
 * the store refuses a write whose fence is older than one it has already accepted.
 *
 * Here the store is a toy in this file (a value and the largest fence it accepted); in real
 * life it is a database row or a Redis hash checked in the same transaction as the write.
 *   1. client A takes "example:fenced" with a 150 ms lease, then stalls for 400 ms;
 *   2. meanwhile A's lease runs out and client B takes the key, with a larger fence, and
 *      writes "written by B";
 *   3. A wakes up and writes "written by A" with its old fence: the store refuses it, and A's
 *      release is refused too (LOCK_ERR_NOT_OWNER): its lease is gone;
 *   4. B releases; client C takes the key with a still larger fence and writes twice: a store
 *      that refuses only older fences accepts any number of writes from one lease.
 * Exit status 0 when every step went so, 1 when a check failed, 2 for a usage or setup error.
 * --no-fence-check makes the store accept every write, to show the check fail: A's stale
 * write overwrites B's.
 *
 * usage: fenced_write [--no-fence-check] [redis://host:port ...]
 *        one URL (default redis://127.0.0.1:6379): one Redis server; 3 or 5: Redlock.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <lock.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define KEY "example:fenced"
#define A_TTL_MS 150u
#define A_STALL_MS 400
#define TTL_MS 5000u
#define WAIT_MS 5000u

/* The toy store: one value, and the largest fence it has accepted a write with. */
struct store {
    char value[64];
    uint64_t fence_seen;
    int check_fences; /* 0: --no-fence-check */
};

/* Writes value with fence; refuses (returns -1) a fence older than the largest seen. */
static int store_write(struct store *s, uint64_t fence, const char *value) {
    if (s->check_fences && fence < s->fence_seen) return -1;
    if (fence > s->fence_seen) s->fence_seen = fence;
    snprintf(s->value, sizeof s->value, "%s", value);
    return 0;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Prints a check's outcome; returns 1 when it failed. */
static int expect(int ok, const char *what) {
    printf("%s %s\n", ok ? "ok:    " : "FAILED:", what);
    return !ok;
}

static lock_client *client_new(const rconn_addr *addrs, size_t n) {
    int err = 0;
    lock_client *c =
        n == 1 ? lock_redis_new(&addrs[0], 1000, &err) : lock_redlock_new(addrs, n, 1000, &err);
    if (c == NULL) fprintf(stderr, "client: %s\n", lock_strerror(err));
    return c;
}

static int run(lock_client *a, lock_client *b, lock_client *c, struct store *st) {
    int failed = 0, rc;
    lock_handle ha, hb, hc;

    if ((rc = lock_acquire(a, KEY, A_TTL_MS, WAIT_MS, &ha)) != LOCK_OK) {
        fprintf(stderr, "A: acquire: %s\n", lock_strerror(rc));
        return 2;
    }
    printf("A holds %s with fence %" PRIu64 " for %u ms, then stalls for %d ms\n", KEY, ha.fence,
           A_TTL_MS, A_STALL_MS);
    sleep_ms(A_STALL_MS); /* A is paused past its lease */

    if ((rc = lock_acquire(b, KEY, TTL_MS, WAIT_MS, &hb)) != LOCK_OK) {
        fprintf(stderr, "B: acquire: %s\n", lock_strerror(rc));
        return 2;
    }
    printf("B holds %s with fence %" PRIu64 "\n", KEY, hb.fence);
    failed += expect(hb.fence > ha.fence, "B's fence is larger than A's");
    failed += expect(store_write(st, hb.fence, "written by B") == 0, "B's write is accepted");

    /* A wakes up, still believing it holds the lock, and writes with its fence */
    failed += expect(store_write(st, ha.fence, "written by A") != 0,
                     "A's write with its old fence is refused");
    failed += expect(strcmp(st->value, "written by B") == 0, "the store keeps B's value");
    failed += expect(lock_release(a, &ha) == LOCK_ERR_NOT_OWNER,
                     "A's release is refused (not owner): B's lease is untouched");
    failed += expect(lock_release(b, &hb) == LOCK_OK, "B releases");

    if ((rc = lock_acquire(c, KEY, TTL_MS, WAIT_MS, &hc)) != LOCK_OK) {
        fprintf(stderr, "C: acquire: %s\n", lock_strerror(rc));
        return 2;
    }
    printf("C holds %s with fence %" PRIu64 "\n", KEY, hc.fence);
    failed += expect(hc.fence > hb.fence, "C's fence is larger than B's");
    failed += expect(store_write(st, hc.fence, "written by C") == 0 &&
                         store_write(st, hc.fence, "written by C again") == 0,
                     "C's two writes under one lease are accepted");
    failed += expect(lock_release(c, &hc) == LOCK_OK, "C releases");
    printf("store: \"%s\" (largest fence accepted %" PRIu64 ")\n", st->value, st->fence_seen);
    return failed > 0 ? 1 : 0;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN); /* a Redis that goes away must not kill us (see lock.h) */
    struct store st = {"", 0, 1};
    int first = 1;
    if (argc > 1 && strcmp(argv[1], "--no-fence-check") == 0) {
        st.check_fences = 0;
        first = 2;
    }
    rconn_addr addrs[LOCK_REDLOCK_NODES_MAX];
    size_t n = 0;
    for (int i = first; i < argc; i++) {
        if (n == LOCK_REDLOCK_NODES_MAX || rconn_addr_parse(argv[i], &addrs[n]) != RCONN_OK) {
            fprintf(stderr, "usage: %s [--no-fence-check] [redis://host:port ...]\n", argv[0]);
            return 2;
        }
        n++;
    }
    if (n == 0 && rconn_addr_parse("redis://127.0.0.1:6379", &addrs[n++]) != RCONN_OK) return 2;
    printf("liblock %s (built against lock.h %s)\n", lock_version(), LOCK_VERSION);

    /* a client each, as three processes would have */
    lock_client *a = client_new(addrs, n);
    lock_client *b = a != NULL ? client_new(addrs, n) : NULL;
    lock_client *c = b != NULL ? client_new(addrs, n) : NULL;
    int status = c != NULL ? run(a, b, c, &st) : 2;
    lock_free(c);
    lock_free(b);
    lock_free(a);
    return status;
}
