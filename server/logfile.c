/* logfile.c - --log-file: the log on a file, reopened on SIGHUP for logrotate.
 *
 * DESIGN
 * server_log() writes to stderr. With --log-file, the file is opened for
 * appending and dup2()ed onto descriptor 2, so everything that prints on
 * stderr (our lines, libmicrohttpd's) lands in it, and a reopen is one
 * atomic dup2(): a thread printing at that moment writes to the old file
 * or to the new one, never to a closed descriptor. logrotate renames the
 * file and sends SIGHUP (postrotate); main() then calls server_log_reopen()
 * with the same path, which creates the file anew.
 */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Opens path for appending (created with mode 0640 when missing) and puts
 * it on stderr, in place of what was there. Returns SERVER_OK, or
 * SERVER_ERR_INVALID with a sentence in why (stderr is then unchanged). */
int server_log_reopen(const char *path, char *why, size_t whylen) {
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) {
        int e = errno;
        char msg[128];
        if (strerror_r(e, msg, sizeof msg) != 0) snprintf(msg, sizeof msg, "error %d", e);
        snprintf(why, whylen, "cannot open the log file %s: %s", path, msg);
        if (fd >= 0) close(fd);
        return SERVER_ERR_INVALID;
    }
    if (fd != STDERR_FILENO) close(fd);
    return SERVER_OK;
}
