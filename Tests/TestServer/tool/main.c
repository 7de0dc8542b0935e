/*
 * courier-test-server — runs Courier's HTTP/1.1 test server as a process.
 *
 *   courier-test-server [--port N] [--host ADDR] [--stdin-eof]
 *
 * Listens on ADDR (default 127.0.0.1) port N (default 0 = a free port), prints the
 * port number and a newline on stdout, then serves until SIGTERM or SIGINT, or —
 * with --stdin-eof — until stdin reaches EOF (so a parent that dies takes the
 * server with it). Then stops cleanly and exits 0. Exit status 2 on bad usage,
 * 1 if the server cannot start.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "courier_test_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Write end of the self-pipe the signal handler writes to. Process-wide by nature. */
static int g_sig_pipe = -1;

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t r = write(g_sig_pipe, &b, 1);
    (void)r;
    errno = saved;
}

static void usage(void)
{
    fprintf(stderr, "usage: courier-test-server [--port N] [--host ADDR] [--stdin-eof]\n");
}

int main(int argc, char **argv)
{
    int port = 0, stdin_eof = 0;
    const char *host = "127.0.0.1";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*argv[i] == '\0' || *end || v < 0 || v > 65535) {
                usage();
                return 2;
            }
            port = (int)v;
        } else if (strcmp(argv[i], "--host") == 0 && i + 1 < argc) {
            host = argv[++i];
        } else if (strcmp(argv[i], "--stdin-eof") == 0) {
            stdin_eof = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage();
            return 0;
        } else {
            usage();
            return 2;
        }
    }

    int sp[2];
    if (pipe(sp) != 0) {
        perror("courier-test-server: pipe");
        return 1;
    }
    fcntl(sp[0], F_SETFD, FD_CLOEXEC);
    fcntl(sp[1], F_SETFD, FD_CLOEXEC);
    fcntl(sp[1], F_SETFL, fcntl(sp[1], F_GETFL) | O_NONBLOCK);
    g_sig_pipe = sp[1];

    /* Block the stop signals while the server's threads are created, so that they
       inherit a mask without them and the handler only ever runs on this thread. */
    sigset_t stop_sigs, old;
    sigemptyset(&stop_sigs);
    sigaddset(&stop_sigs, SIGTERM);
    sigaddset(&stop_sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_sigs, &old);
    signal(SIGPIPE, SIG_IGN);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    cts_server *srv = NULL;
    int err = cts_server_start(&srv, host, port);
    if (err != 0) {
        fprintf(stderr, "courier-test-server: cannot listen on %s:%d: %s\n", host, port,
                strerror(-err));
        return 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    printf("%d\n", cts_server_port(srv));
    fflush(stdout);

    struct pollfd p[2] = {{sp[0], POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
    for (;;) {
        int r = poll(p, stdin_eof ? 2 : 1, -1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[0].revents)
            break; /* signal */
        if (stdin_eof && p[1].revents) {
            char buf[4096];
            ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
                break; /* EOF (or stdin unusable) */
        }
    }

    cts_server_stop(srv);
    close(sp[0]);
    close(sp[1]);
    return 0;
}
