/* counter_watchdog.c - example: a critical section longer than its lease, kept by the watchdog.
 *
 * Uses only <lock.h> as installed (`make install`, then
 * cc counter_watchdog.c $(pkg-config --cflags --libs lock)); docs/LOCKING.md shows the steps.
 *
 * Two processes each add 1 to a counter kept in a file, ROUNDS times, under the lock
 * "example:counter": read the file, work for HOLD_MS, write the value + 1. HOLD_MS is well past
 * the lease's TTL_MS, so the lease would run out in the middle of the work and let the other
 * process in; a watchdog renews it every TTL_MS / 3 while the work goes on. Halfway through,
 * the holder calls a helper that takes the same lock for itself again (a nested critical
 * section): with lock_acquire_owned() and the process as the owner, that is one more hold on
 * the lease it already has, not a deadlock.
 *
 * The check: the counter ends at 2 x ROUNDS (no update lost), no process ever found the other
 * inside the critical section (a marker file created with O_EXCL), the watchdog said the lease
 * was held before every write, and every hold was released. Exit status 0 when all of it
 * holds, 1 when a check fails, 2 for a usage or setup error. --no-watchdog runs the same work
 * without the watchdog, to show the check fail: the lease runs out mid-way.
 *
 * usage: counter_watchdog [--no-watchdog] [redis://host:port ...]
 *        one URL (default redis://127.0.0.1:6379): one Redis server; 3 or 5: Redlock.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <lock.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KEY "example:counter"
#define TTL_MS 300u        /* the lease: shorter than the work */
#define HOLD_MS 750        /* the work inside the critical section: 2.5 leases */
#define MAX_HOLD_MS 10000u /* the watchdog never keeps the lease longer than this */
#define WAIT_MS 30000u     /* how long a process waits for the other one's critical section */
#define ROUNDS 3
#define PAUSE_MS 50 /* between rounds, so that the processes take turns */
#define WORKERS 2

struct run {
    lock_client *c;
    int watchdog;      /* 0: --no-watchdog */
    char owner[64];    /* this process, as the lease's owner */
    char counter[512]; /* the shared counter file */
    char marker[512];  /* exists while a process is inside */
    char log[512];     /* the nested helper appends here */
};

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Reads the counter file into *v. Returns 0 or -1. */
static int counter_read(const char *path, long *v) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    int ok = fscanf(f, "%ld", v) == 1;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Writes v into the counter file. Returns 0 or -1. */
static int counter_write(const char *path, long v) {
    FILE *f = fopen(path, "w");
    if (f == NULL) return -1;
    int ok = fprintf(f, "%ld\n", v) > 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* The nested critical section: appends a line to the log under the same lock, taken again by
 * the same owner (a hold on the lease the caller has: it succeeds at once, holds == 2). Returns
 * 0, or -1 when the lock could not be had (the lease is gone) or the file not written. */
static int log_line(struct run *r, long value) {
    lock_handle h;
    int rc = lock_acquire_owned(r->c, KEY, r->owner, TTL_MS, 0, &h);
    if (rc != LOCK_OK) {
        fprintf(stderr, "%s: nested acquire: %s\n", r->owner, lock_strerror(rc));
        return -1;
    }
    int ok = h.holds == 2;
    if (!ok) fprintf(stderr, "%s: nested acquire gave holds %u, not 2\n", r->owner, h.holds);
    FILE *f = fopen(r->log, "a");
    if (f == NULL ||
        fprintf(f, "%s read %ld (fence %llu)\n", r->owner, value, (unsigned long long)h.fence) < 0)
        ok = 0;
    if (f != NULL && fclose(f) != 0) ok = 0;
    rc = lock_release(r->c, &h); /* one hold less: the caller still holds the lease */
    if (rc != LOCK_OK) {
        fprintf(stderr, "%s: nested release: %s\n", r->owner, lock_strerror(rc));
        ok = 0;
    }
    return ok ? 0 : -1;
}

/* One round: the critical section. Returns the number of failed checks (0: all held), or -1 on
 * an error of the lock itself. */
static int one_round(struct run *r) {
    lock_handle h;
    lock_watchdog *w = NULL;
    int failures = 0;
    int rc = lock_acquire_owned(r->c, KEY, r->owner, TTL_MS, WAIT_MS, &h);
    if (rc != LOCK_OK) {
        fprintf(stderr, "%s: acquire: %s\n", r->owner, lock_strerror(rc));
        return -1;
    }
    if (r->watchdog && (rc = lock_watchdog_start(r->c, &h, TTL_MS, MAX_HOLD_MS, &w)) != LOCK_OK) {
        fprintf(stderr, "%s: watchdog: %s\n", r->owner, lock_strerror(rc));
        (void)lock_release(r->c, &h);
        return -1;
    }
    int64_t entered = lock_now_ms();
    int fd = open(r->marker, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        fprintf(stderr, "%s: the other process is inside the critical section too\n", r->owner);
        failures++;
    } else {
        close(fd);
    }

    long v = -1;
    if (counter_read(r->counter, &v) != 0) {
        fprintf(stderr, "%s: cannot read %s\n", r->owner, r->counter);
        failures++;
    }
    sleep_ms(HOLD_MS / 2);
    if (log_line(r, v) != 0) failures++;
    sleep_ms(HOLD_MS - HOLD_MS / 2);

    /* Never write on a lease we may have lost. */
    int held =
        r->watchdog ? lock_watchdog_check(w, NULL) == LOCK_OK : lock_now_ms() < h.valid_until_ms;
    if (!held) {
        fprintf(stderr, "%s: lease lost after %lld ms (ttl %u): not writing\n", r->owner,
                (long long)(lock_now_ms() - entered), TTL_MS);
        failures++;
    } else if (v >= 0 && counter_write(r->counter, v + 1) != 0) {
        fprintf(stderr, "%s: cannot write %s\n", r->owner, r->counter);
        failures++;
    }
    if (fd >= 0 && unlink(r->marker) != 0) failures++;

    if (w != NULL) (void)lock_watchdog_stop(w, &h);
    rc = lock_release(r->c, &h);
    if (rc != LOCK_OK) {
        fprintf(stderr, "%s: release: %s\n", r->owner, lock_strerror(rc));
        failures++;
    } else {
        printf("%s: held the lease %lld ms with a %u ms ttl, counter %ld -> %ld\n", r->owner,
               (long long)(lock_now_ms() - entered), TTL_MS, v, v + 1);
    }
    return failures;
}

/* A worker process: its own client, ROUNDS rounds. Exit status: 0, 1 (a check failed), 2. */
static int worker(struct run *r, const lock_redis_addr *addrs, size_t n) {
    int err = 0;
    r->c = n == 1 ? lock_redis_new(&addrs[0], 1000, &err) : lock_redlock_new(addrs, n, 1000, &err);
    if (r->c == NULL) {
        fprintf(stderr, "%s: client: %s\n", r->owner, lock_strerror(err));
        return 2;
    }
    int status = 0;
    for (int i = 0; i < ROUNDS && status != 2; i++) {
        int f = one_round(r);
        if (f < 0)
            status = 2;
        else if (f > 0)
            status = 1;
        sleep_ms(PAUSE_MS);
    }
    lock_free(r->c);
    return status;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);         /* a Redis that goes away must not kill us (see lock.h) */
    setvbuf(stdout, NULL, _IOLBF, 0); /* the two processes' lines in the order they happen */
    struct run r;
    memset(&r, 0, sizeof r);
    r.watchdog = 1;
    int first = 1;
    if (argc > 1 && strcmp(argv[1], "--no-watchdog") == 0) {
        r.watchdog = 0;
        first = 2;
    }
    lock_redis_addr addrs[LOCK_REDLOCK_NODES_MAX];
    size_t n = 0;
    for (int i = first; i < argc; i++) {
        if (n == LOCK_REDLOCK_NODES_MAX || lock_redis_addr_parse(argv[i], &addrs[n]) != LOCK_OK) {
            fprintf(stderr, "usage: %s [--no-watchdog] [redis://host:port ...]\n", argv[0]);
            return 2;
        }
        n++;
    }
    if (n == 0 && lock_redis_addr_parse("redis://127.0.0.1:6379", &addrs[n++]) != LOCK_OK) return 2;
    printf("liblock %s (built against lock.h %s)\n", lock_version(), LOCK_VERSION);

    char dir[] = "/tmp/lock-example-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(r.counter, sizeof r.counter, "%s/counter", dir);
    snprintf(r.marker, sizeof r.marker, "%s/inside", dir);
    snprintf(r.log, sizeof r.log, "%s/log", dir);
    if (counter_write(r.counter, 0) != 0) {
        perror(r.counter);
        return 2;
    }

    fflush(stdout); /* not once more from each child */
    pid_t pids[WORKERS];
    int started = 0;
    for (; started < WORKERS; started++) {
        pids[started] = fork();
        if (pids[started] < 0) {
            perror("fork");
            break;
        }
        if (pids[started] == 0) {
            snprintf(r.owner, sizeof r.owner, "counter-%ld", (long)getpid());
            int code = worker(&r, addrs, n);
            fflush(stdout);
            _exit(code);
        }
    }
    int status = started == WORKERS ? 0 : 2;
    for (int i = 0; i < started; i++) {
        int ws = 0;
        while (waitpid(pids[i], &ws, 0) < 0 && errno == EINTR) {
        }
        int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 2;
        if (code > status) status = code;
    }

    long v = -1;
    if (status != 2 && counter_read(r.counter, &v) != 0) status = 2;
    if (status != 2 && v != (long)WORKERS * ROUNDS) {
        fprintf(stderr, "counter is %ld, expected %d: updates were lost\n", v, WORKERS * ROUNDS);
        status = 1;
    }
    printf("counter: %ld of %d; %s\n", v, WORKERS * ROUNDS,
           status == 0 ? "no update lost" : "check FAILED");
    unlink(r.counter);
    unlink(r.marker);
    unlink(r.log);
    rmdir(dir);
    return status;
}
