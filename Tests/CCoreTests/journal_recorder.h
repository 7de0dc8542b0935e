/*
 * journal_recorder.h — a tiny HTTP/1.1 server for the frozen-request tests that records every
 * request it receives, in arrival order, with its Idempotency-Key: what the journal tests must see
 * from the server's side (order, exactly once, the same key on a duplicate), even when the client
 * is another process that gets killed.
 *
 * Answers: "/status/NNN..." -> status NNN; "/slow/..." -> waits 150 ms, then 200; anything else
 * 200. Body: {"ok":true}. Keep-alive, Content-Length bodies. One thread per connection; stop
 * closes everything and joins every thread. Restartable on the same port (SO_REUSEADDR).
 * Header-only (static functions) so each test executable has its own copy.
 */
#ifndef JOURNAL_RECORDER_H
#define JOURNAL_RECORDER_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct jr_hit {
    char path[256];
    char method[16];
    char key[160]; /* Idempotency-Key, "" if none */
    char body[256];
} jr_hit;

#define JR_MAX_CONN 64

typedef struct jr_server {
    int fd;
    int port;
    pthread_t accept_thread;
    pthread_mutex_t lock;
    int stopping;
    int conns[JR_MAX_CONN];
    pthread_t threads[JR_MAX_CONN];
    int nconns;
    jr_hit *hits;
    size_t nhits, cap;
    int active, max_active; /* requests to /slow/ being answered at once */
} jr_server;

typedef struct jr_conn_arg {
    jr_server *s;
    int fd;
} jr_conn_arg;

static void jr_record(jr_server *s, const jr_hit *h) {
    pthread_mutex_lock(&s->lock);
    if (s->nhits == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->hits = realloc(s->hits, s->cap * sizeof *s->hits);
    }
    s->hits[s->nhits++] = *h;
    pthread_mutex_unlock(&s->lock);
}

static void *jr_conn_main(void *arg) {
    jr_conn_arg *a = arg;
    jr_server *s = a->s;
    int fd = a->fd;
    free(a);
    char buf[65536];
    size_t have = 0;
    for (;;) {
        char *end = NULL;
        while (!(end = memmem(buf, have, "\r\n\r\n", 4))) {
            if (have == sizeof buf) goto out;
            ssize_t n = recv(fd, buf + have, sizeof buf - have, 0);
            if (n <= 0) goto out;
            have += (size_t)n;
        }
        size_t head = (size_t)(end - buf) + 4;
        jr_hit h;
        memset(&h, 0, sizeof h);
        sscanf(buf, "%15s %255s", h.method, h.path);
        char *q = strchr(h.path, '?');
        if (q) *q = '\0';
        long clen = 0;
        for (char *line = strstr(buf, "\r\n") + 2; line < end; line = strstr(line, "\r\n") + 2) {
            if (strncasecmp(line, "Content-Length:", 15) == 0) clen = strtol(line + 15, NULL, 10);
            if (strncasecmp(line, "Idempotency-Key:", 16) == 0) {
                const char *v = line + 16;
                while (*v == ' ') v++;
                size_t n = strcspn(v, "\r");
                if (n >= sizeof h.key) n = sizeof h.key - 1;
                memcpy(h.key, v, n);
            }
        }
        while (have < head + (size_t)clen) {
            if (have == sizeof buf) goto out;
            ssize_t n = recv(fd, buf + have, sizeof buf - have, 0);
            if (n <= 0) goto out;
            have += (size_t)n;
        }
        size_t bl = (size_t)clen < sizeof h.body - 1 ? (size_t)clen : sizeof h.body - 1;
        memcpy(h.body, buf + head, bl);
        jr_record(s, &h);
        int status = 200;
        if (strncmp(h.path, "/status/", 8) == 0) status = atoi(h.path + 8);
        if (strncmp(h.path, "/slow/", 6) == 0) {
            pthread_mutex_lock(&s->lock);
            if (++s->active > s->max_active) s->max_active = s->active;
            pthread_mutex_unlock(&s->lock);
            struct timespec ts = {0, 150 * 1000000L};
            nanosleep(&ts, NULL);
            pthread_mutex_lock(&s->lock);
            s->active--;
            pthread_mutex_unlock(&s->lock);
        }
        char resp[256];
        int n = snprintf(resp, sizeof resp,
                         "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}",
                         status);
        if (send(fd, resp, (size_t)n, MSG_NOSIGNAL) != n) goto out;
        memmove(buf, buf + head + clen, have - head - (size_t)clen);
        have -= head + (size_t)clen;
    }
out:
    shutdown(fd, SHUT_RDWR);
    return NULL;
}

static void *jr_accept_main(void *arg) {
    jr_server *s = arg;
    for (;;) {
        int fd = accept(s->fd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR) continue;
            break;
        }
        pthread_mutex_lock(&s->lock);
        if (s->stopping || s->nconns == JR_MAX_CONN) {
            pthread_mutex_unlock(&s->lock);
            close(fd);
            if (s->stopping) break;
            continue;
        }
        jr_conn_arg *a = malloc(sizeof *a);
        a->s = s;
        a->fd = fd;
        s->conns[s->nconns] = fd;
        pthread_create(&s->threads[s->nconns], NULL, jr_conn_main, a);
        s->nconns++;
        pthread_mutex_unlock(&s->lock);
    }
    return NULL;
}

/* Starts on 127.0.0.1:port (0: any). Returns 0 or -errno. Hits survive stop/start when `keep`
 * is given (restart): pass the old server's hits in by starting with jr_restart. */
static int jr_start(jr_server *s, int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 64) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    if (!s->hits) pthread_mutex_init(&s->lock, NULL);
    s->fd = fd;
    s->port = ntohs(sa.sin_port);
    s->stopping = 0;
    s->nconns = 0;
    pthread_create(&s->accept_thread, NULL, jr_accept_main, s);
    return 0;
}

/* Stops listening and closes every connection (clients see resets / refusals). Keeps the hits. */
static void jr_stop(jr_server *s) {
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_mutex_unlock(&s->lock);
    shutdown(s->fd, SHUT_RDWR);
    pthread_join(s->accept_thread, NULL);
    close(s->fd);
    for (int i = 0; i < s->nconns; i++) shutdown(s->conns[i], SHUT_RDWR);
    for (int i = 0; i < s->nconns; i++) {
        pthread_join(s->threads[i], NULL);
        close(s->conns[i]);
    }
    s->nconns = 0;
}

static void jr_free(jr_server *s) {
    free(s->hits);
    pthread_mutex_destroy(&s->lock);
    memset(s, 0, sizeof *s);
}

static size_t jr_count(jr_server *s) {
    pthread_mutex_lock(&s->lock);
    size_t n = s->nhits;
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* A copy of hit i (valid index). */
static jr_hit jr_get(jr_server *s, size_t i) {
    pthread_mutex_lock(&s->lock);
    jr_hit h = s->hits[i];
    pthread_mutex_unlock(&s->lock);
    return h;
}

/* How many hits had this path. */
static size_t jr_path_count(jr_server *s, const char *path) {
    size_t n = 0;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->nhits; i++) n += strcmp(s->hits[i].path, path) == 0;
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* The problems (0: none) with the requests "<ordered>N" and "<unordered>N", N in 0..n-1: each must
 * have arrived exactly once, and the ordered ones in the order of N. */
__attribute__((unused)) static int jr_once_each_ordered(jr_server *s, const char *ordered, const char *unordered, int n) {
    int problems = 0, next = 0;
    size_t olen = strlen(ordered);
    for (int i = 0; i < n; i++) {
        char p[160];
        snprintf(p, sizeof p, "%s%d", ordered, i);
        problems += jr_path_count(s, p) != 1;
        snprintf(p, sizeof p, "%s%d", unordered, i);
        problems += jr_path_count(s, p) != 1;
    }
    for (size_t i = 0; i < jr_count(s); i++) {
        jr_hit h = jr_get(s, i);
        if (strncmp(h.path, ordered, olen) != 0) continue;
        problems += atoi(h.path + olen) != next;
        next++;
    }
    return problems;
}

/* A port that was free a moment ago. */
static int jr_free_port(void) {
    jr_server tmp;
    memset(&tmp, 0, sizeof tmp);
    if (jr_start(&tmp, 0) != 0) return -1;
    int port = tmp.port;
    jr_stop(&tmp);
    jr_free(&tmp);
    return port;
}

/* ---- children: the journal tests' other processes (this executable started again) ---- */

#include <signal.h>
#include <sys/wait.h>

/* Waits for a child: its exit status, 128 + the signal that ended it, or -1 after timeout_ms (it
 * is then killed). */
__attribute__((unused)) static int jr_wait_child(pid_t pid, int timeout_ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t end = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + timeout_ms;
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(10000);
    }
}

/* A frozen request as a "list" child prints it: id method url idempotency-key. */
typedef struct jr_listed {
    char id[40], method[16], url[128], key[40];
} jr_listed;

/* Reads a "list" child's lines from fd (closed after); how many were read (at most max). */
__attribute__((unused)) static int jr_read_listed(int fd, jr_listed *out, int max) {
    FILE *f = fdopen(fd, "r");
    int n = 0;
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (n < max && sscanf(line, "%39s %15s %127s %39s", out[n].id, out[n].method, out[n].url, out[n].key) == 4) n++;
    }
    if (f) fclose(f);
    return n;
}

#endif
