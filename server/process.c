/* process.c - the process metrics every exporter has, read from /proc/self.
 *
 * process_cpu_seconds_total and process_start_time_seconds come from
 * /proc/self/stat (utime, stime and starttime in clock ticks; the boot time
 * from /proc/stat's btime), the memory sizes from /proc/self/statm (pages),
 * the open descriptors from the entries of /proc/self/fd and their limit
 * from RLIMIT_NOFILE. The parsers are pure functions of the file's text, so
 * the unit tests feed them fixture strings; server__process_read() does the
 * reading. A value that cannot be read is left at -1 and its sample is left
 * out of the scrape.
 */
#include "server/server_impl.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Parses the text of /proc/<pid>/stat: cpu_seconds from utime + stime and,
 * when btime (the boot time, seconds since the epoch) is >= 0,
 * start_time_seconds from starttime; both in clk_tck ticks. The command
 * name, in parentheses, may hold spaces and parentheses itself, so the
 * fields are counted from the last ')'. Returns 0, or -1 when the text is
 * not such a line (out is then unchanged). */
int server__proc_stat_parse(const char *stat, long clk_tck, double btime, server__process *out) {
    const char *p = stat ? strrchr(stat, ')') : NULL;
    if (!p || clk_tck <= 0) return -1;
    p++;
    unsigned long long utime = 0, stime = 0, start = 0;
    /* fields 3.. after the name: state is token 0, utime 11, stime 12, starttime 19 */
    for (int tok = 0; tok <= 19; tok++) {
        while (*p == ' ')
            p++;
        if (!*p || *p == '\n') return -1;
        char *end = NULL;
        unsigned long long v = 0;
        if (tok == 0) { /* the state, a letter */
            end = (char *)p + strcspn(p, " \n");
        } else {
            v = strtoull(p, &end, 10);
            if (end == p) return -1;
        }
        if (tok == 11) utime = v;
        if (tok == 12) stime = v;
        if (tok == 19) start = v;
        p = end;
    }
    out->cpu_seconds = (double)(utime + stime) / (double)clk_tck;
    if (btime >= 0) out->start_time_seconds = btime + (double)start / (double)clk_tck;
    return 0;
}

/* Parses the text of /proc/<pid>/statm ("size resident shared ..." in pages
 * of page_size bytes) into virtual_bytes and resident_bytes. Returns 0, or
 * -1 when the text does not start with two numbers (out unchanged). */
int server__proc_statm_parse(const char *statm, long page_size, server__process *out) {
    unsigned long long size, resident;
    if (!statm || page_size <= 0 || sscanf(statm, "%llu %llu", &size, &resident) != 2) return -1;
    out->virtual_bytes = (double)size * (double)page_size;
    out->resident_bytes = (double)resident * (double)page_size;
    return 0;
}

/* Finds the "btime N" line of /proc/stat's text and stores N in *btime.
 * Returns 0, or -1 when there is none. */
int server__proc_btime_parse(const char *stat, double *btime) {
    for (const char *p = stat; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        unsigned long long v;
        if (strncmp(p, "btime ", 6) == 0 && sscanf(p + 6, "%llu", &v) == 1) {
            *btime = (double)v;
            return 0;
        }
    }
    return -1;
}

/* Reads up to buflen - 1 bytes of path into buf (NUL-terminated). Returns 0
 * or -1. */
static int read_text(const char *path, char *buf, size_t buflen) {
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    size_t n = fread(buf, 1, buflen - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n ? 0 : -1;
}

static double open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    double n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

/* Returns the boot time from /proc/stat's btime line, or -1. The line
 * comes after the per-CPU and interrupt lines, which can be long: read line
 * by line. */
static double boot_time(void) {
    FILE *f = fopen("/proc/stat", "re");
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0;
    double btime = -1;
    while (getline(&line, &cap, f) > 0)
        if (server__proc_btime_parse(line, &btime) == 0) break;
    free(line);
    fclose(f);
    return btime;
}

/* Fills out with this process's metrics, -1 where /proc (or getrlimit)
 * would not tell. Costs a few small file reads. Can't fail. */
void server__process_read(server__process *out) {
    *out = (server__process){-1, -1, -1, -1, -1, -1};
    char text[1024];
    if (read_text("/proc/self/stat", text, sizeof text) == 0)
        (void)server__proc_stat_parse(text, sysconf(_SC_CLK_TCK), boot_time(), out);
    if (read_text("/proc/self/statm", text, sizeof text) == 0)
        (void)server__proc_statm_parse(text, sysconf(_SC_PAGESIZE), out);
    out->open_fds = open_fds();
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        out->max_fds = (double)rl.rlim_cur;
}
