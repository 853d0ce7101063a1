/* daemon.c - the HTTP daemon: the listening socket and libmicrohttpd started on it.
 *
 * DESIGN
 * By default libmicrohttpd runs a small pool of poll() event-loop threads
 * (--threads, default 2). Not epoll: libmicrohttpd 0.9.75 (Debian 12) can
 * abort the process when its epoll workers and MHD_quiesce_daemon() race to
 * remove the listening socket from an epoll set ("Failed to remove listen FD
 * from epoll set"), which a graceful stop does; with poll() quiescing only
 * signals each worker. --threads 0 selects a thread per connection instead.
 * The socket is ours (listen_socket()), so that its options and its errors
 * are ours to say. Called by server_start.c; hands libmicrohttpd request.c's
 * callbacks.
 */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "market/market.h"
#include "server/server_impl.h"

/* Resolves listen, "HOST:PORT" or "[V6]:PORT", into ss and *sslen. Returns
 * 0, or -1 when it is not an address. */
static int resolve_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *sslen) {
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen || !colon[1]) return -1;
    size_t hlen = (size_t)(colon - listen);
    const char *h = listen;
    if (listen[0] == '[' && hlen >= 2 && listen[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    if (hlen >= sizeof host) return -1;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0 || !ai) return -1;
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *sslen = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

/* Opens a listening TCP socket on ss (cfg->listen). SO_REUSEADDR always, so
 * that a restart need not wait for the TIME_WAIT of the last run's
 * connections (the Debian 12 libmicrohttpd sets it only together with
 * SO_REUSEPORT); SO_REUSEPORT only with --reuse-port, so that an address
 * another process listens on is refused, not silently shared. Returns the
 * socket (close-on-exec), or -1 with a sentence naming the address in why. */
static int listen_socket(const server_config *cfg, const struct sockaddr_storage *ss,
                         socklen_t sslen, char *why, size_t whylen) {
    int on = 1;
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) == 0 &&
             (!cfg->reuse_port || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) == 0) &&
             (ss->ss_family != AF_INET6 || /* v6 only, as libmicrohttpd's own */
              setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) == 0) &&
             bind(fd, (const struct sockaddr *)ss, sslen) == 0 && listen(fd, SOMAXCONN) == 0;
    if (ok) return fd;
    int e = errno;
    if (fd >= 0) close(fd);
    if (e == EADDRINUSE && !cfg->reuse_port) {
        snprintf(why, whylen,
                 "cannot listen on %s: address already in use (another server there? servers "
                 "share an address only when every one is given --reuse-port)",
                 cfg->listen);
    } else if (e == EADDRINUSE) {
        snprintf(why, whylen,
                 "cannot listen on %s: address already in use by a process that does not "
                 "share it (--reuse-port)",
                 cfg->listen);
    } else {
        char msg[128];
        if (strerror_r(e, msg, sizeof msg) != 0) snprintf(msg, sizeof msg, "error %d", e);
        snprintf(why, whylen, "cannot listen on %s: %s", cfg->listen, msg);
    }
    return -1;
}

/* libmicrohttpd's logger: its messages as warnings of our log. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = '\0';
    server_log(SERVER_LOG_WARN, "httpd: %s", msg);
}

/* Starts s's HTTP daemon on its configured address, over the market built
 * by server_start.c's market_build(). Returns SERVER_OK, or SERVER_ERR_INVALID, _LISTEN,
 * _NOMEM with a sentence in why (server_stop() frees what was made). */
int server__daemon_start(server *s, char *why, size_t whylen) {
    const server_config *cfg = &s->cfg;
    if (server__conn_key_create(s) < 0) {
        snprintf(why, whylen, "out of memory");
        return SERVER_ERR_NOMEM;
    }

    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    if (resolve_listen(cfg->listen, &ss, &sslen) < 0) {
        snprintf(why, whylen, "bad listen address '%s' (want HOST:PORT)", cfg->listen);
        return SERVER_ERR_INVALID;
    }
    /* threads > 0: a pool of event loops, where a purchase suspends its
     * connection (see DESIGN); 0: a thread per connection, where it blocks
     * its thread. */
    s->async = cfg->threads > 0 && market_can_submit(s->market);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG |
                     MHD_USE_TURBO |
                     (cfg->threads ? MHD_USE_POLL : MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL) |
                     (cfg->threads ? MHD_ALLOW_SUSPEND_RESUME : 0); /* purchases (async) and
                                                                     event streams suspend */
    if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    int lfd = listen_socket(cfg, &ss, sslen, why, whylen);
    if (lfd < 0) return SERVER_ERR_LISTEN;
    /* libmicrohttpd gets a duplicate: when it fails to start, it may or may
     * not have closed the socket it was given, and ours is closed below
     * either way, never twice. */
    int mfd = fcntl(lfd, F_DUPFD_CLOEXEC, 0);
    struct MHD_OptionItem pool[] = { /* a pool size only when there is a pool */
        {cfg->threads ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, (intptr_t)cfg->threads, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    // clang-format off: one option and its values a line
    s->daemon = mfd < 0 ? NULL : MHD_start_daemon(
        flags, 0, NULL, NULL, server__on_request, s,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)mfd,
        MHD_OPTION_ARRAY, pool,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->connection_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, cfg->connection_memory,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->per_ip_connections,
        MHD_OPTION_URI_LOG_CALLBACK, server__on_uri, s,
        MHD_OPTION_NOTIFY_COMPLETED, server__on_completed, s,
        MHD_OPTION_END);
    // clang-format on
    if (!s->daemon) {
        /* Stop listening, whoever still holds a descriptor of the socket. */
        (void)shutdown(lfd, SHUT_RDWR);
        close(lfd);
        snprintf(why, whylen, "cannot serve on %s: the HTTP daemon did not start%s", cfg->listen,
                 mfd < 0 ? " (out of file descriptors)" : "");
        return SERVER_ERR_LISTEN;
    }
    close(lfd); /* the daemon has its own descriptor of the socket */
    if (cfg->reuse_port)
        server_log(SERVER_LOG_WARN, "msg=\"--reuse-port: other processes given it may listen on "
                                    "%s too and take a share of its connections\"",
                   cfg->listen);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : 0;
    return SERVER_OK;
}
