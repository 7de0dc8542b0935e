/*
 * journal_recorder.h — a tiny HTTP/1.1 server for the frozen-request tests that records every
 * request it receives, in arrival order, with its Idempotency-Key: what the journal tests must see
 * from the server's side (order, exactly once, the same key on a duplicate), even when the client
 * is another process that gets killed.
 *
 * Answers: "/status/NNN..." -> status NNN; "/slow/..." -> waits 150 ms, then 200; the path named
 * by jr_hold -> waits until jr_release (recorded on arrival); anything else 200. Body:
 * {"ok":true}. Keep-alive, Content-Length bodies. One thread per connection; stop closes
 * everything and joins every thread. Restartable on the same port (SO_REUSEADDR).
 * Header-only (static functions) so each test executable has its own copy.
 *
 * Below the server, the scaffolding the journal tests that run other processes share (children
 * are the test executable started again with "--child ...": spawn one, wait for it, run a "list"
 * child and read its lines) and the parent's freezing of many requests (jr_waiter,
 * jr_send_frozen, jr_freeze_all), with checks of what a replay sent.
 */
#ifndef JOURNAL_RECORDER_H
#define JOURNAL_RECORDER_H

#include "harness.h"

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
    size_t body_len;  /* the Content-Length (body holds the first 255 bytes) */
    char head[1024];  /* the request line and headers as received (truncated), NUL-terminated */
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
    char hold[256];         /* a request to this path waits for jr_release (jr_hold) */
    pthread_cond_t released;
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
        memcpy(h.head, buf, head < sizeof h.head - 1 ? head : sizeof h.head - 1);
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
        h.body_len = (size_t)clen;
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
        pthread_mutex_lock(&s->lock);
        while (s->hold[0] && strcmp(h.path, s->hold) == 0 && !s->stopping) pthread_cond_wait(&s->released, &s->lock);
        pthread_mutex_unlock(&s->lock);
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
    if (!s->hits) {
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->released, NULL);
    }
    s->fd = fd;
    s->port = ntohs(sa.sin_port);
    s->stopping = 0;
    s->nconns = 0;
    pthread_create(&s->accept_thread, NULL, jr_accept_main, s);
    return 0;
}

/* A fresh recorder (no hits yet) started on 127.0.0.1:port (0: any): what a test starts with;
 * jr_start alone restarts one, keeping its hits. Returns 0 or -errno. */
static int jr_open(jr_server *s, int port) {
    memset(s, 0, sizeof *s);
    return jr_start(s, port);
}

/* Stops listening and closes every connection (clients see resets / refusals). Keeps the hits. */
static void jr_stop(jr_server *s) {
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->released);
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
    pthread_cond_destroy(&s->released);
    memset(s, 0, sizeof *s);
}

/* Requests to `path` wait (after they are recorded) until jr_release. */
__attribute__((unused)) static void jr_hold(jr_server *s, const char *path) {
    pthread_mutex_lock(&s->lock);
    snprintf(s->hold, sizeof s->hold, "%s", path);
    pthread_mutex_unlock(&s->lock);
}

/* The held requests are answered, and later ones to that path are not held. */
__attribute__((unused)) static void jr_release(jr_server *s) {
    pthread_mutex_lock(&s->lock);
    s->hold[0] = '\0';
    pthread_cond_broadcast(&s->released);
    pthread_mutex_unlock(&s->lock);
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

/* Starts this executable again with args (args[0] is its name, NULL-terminated); the child's
 * stdout goes to out_fd when >= 0. */
__attribute__((unused)) static pid_t jr_spawn(char *const args[], int out_fd) {
    pid_t pid = fork();
    if (pid == 0) {
        if (out_fd >= 0) dup2(out_fd, 1);
        execv("/proc/self/exe", args);
        _exit(127);
    }
    return pid;
}

/* A frozen request as a "list" child prints it: id method url idempotency-key. */
typedef struct jr_listed {
    char id[40], method[16], url[128], key[40];
} jr_listed;

/* A "list" child's work: one line per frozen request of e, oldest first (jr_listed's fields), then
 * closes e. 0, or 3 when the list cannot be read. */
__attribute__((unused)) static int jr_print_frozen(courier_engine *e) {
    courier_frozen_list *l = NULL;
    if (courier_frozen_list_requests(&l, e, NULL) != COURIER_OK) return 3;
    for (size_t i = 0; i < courier_frozen_list_count(l); i++) {
        const courier_frozen *f = courier_frozen_list_at(l, i);
        printf("%s %s %s %s\n", courier_frozen_id(f), courier_frozen_method(f), courier_frozen_url(f),
               courier_frozen_idempotency_key(f));
    }
    courier_frozen_list_free(l);
    courier_engine_close(e);
    return 0;
}

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

/* Runs a "list" child (args as jr_spawn's) and reads its lines: how many, or -1 when it failed. */
__attribute__((unused)) static int jr_list_in_child(char *const args[], jr_listed *out, int max) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = jr_spawn(args, fds[1]);
    close(fds[1]);
    int n = jr_read_listed(fds[0], out, max);
    int rc = jr_wait_child(pid, 60000);
    return rc == 0 ? n : -1;
}

/* ---- the parent's freezes ---- */

/* The answers to sends made with jr_send_frozen: how many, how many frozen, each one's code by the
 * request's number. */
typedef struct jr_waiter {
    pthread_mutex_t m;
    int n;
    int frozen;
    int codes[512];
} jr_waiter;

typedef struct jr_wslot {
    jr_waiter *w;
    int i;
} jr_wslot;

static void jr_w_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    (void)err;
    jr_wslot *s = user;
    jr_waiter *w = s->w;
    pthread_mutex_lock(&w->m);
    w->n++;
    w->frozen += code == COURIER_E_FROZEN;
    if (s->i >= 0 && s->i < 512) w->codes[s->i] = code;
    pthread_mutex_unlock(&w->m);
    courier_response_free(resp);
    free(s);
}

/* How many answers arrived (and, in *frozen when given, how many said COURIER_E_FROZEN). */
__attribute__((unused)) static int jr_w_count(jr_waiter *w, int *frozen) {
    pthread_mutex_lock(&w->m);
    int n = w->n;
    if (frozen) *frozen = w->frozen;
    pthread_mutex_unlock(&w->m);
    return n;
}

/* Sends request number i: a POST to fmt(i) with body "n=<i>", freeze policy AUTO with flags. */
__attribute__((unused)) static void jr_send_frozen(courier_engine *e, jr_waiter *w, const char *fmt, int i,
                                                   unsigned flags) {
    char path[64], body[32];
    snprintf(path, sizeof path, fmt, i);
    snprintf(body, sizeof body, "n=%d", i);
    courier_request *r = NULL;
    courier_request_new(&r, "POST", path);
    courier_request_set_body(r, body, strlen(body), "text/plain");
    courier_request_set_freeze(r, COURIER_FREEZE_AUTO, 0, flags);
    jr_wslot *s = calloc(1, sizeof *s);
    s->w = w;
    s->i = i;
    courier_send(NULL, e, r, jr_w_done, s, NULL);
    courier_request_free(r);
}

/* Freezes n POSTs (jr_send_frozen, 0..n-1) on e (offline: frozen at once; else nothing listens at
 * e's base URL), waits up to 30 s for every answer, closes e; how many were acknowledged frozen. */
__attribute__((unused)) static int jr_freeze_all(courier_engine *e, const char *fmt, int n, unsigned flags,
                                                 int offline) {
    if (offline) courier_reachability_set_offline(e);
    jr_waiter w;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.m, NULL);
    for (int i = 0; i < n; i++) jr_send_frozen(e, &w, fmt, i, flags);
    int64_t end = th_now_ms() + 30000;
    while (jr_w_count(&w, NULL) < n && th_now_ms() < end) usleep(5000);
    courier_engine_close(e);
    int frozen = 0;
    jr_w_count(&w, &frozen);
    pthread_mutex_destroy(&w.m);
    return frozen;
}

/* ---- what a replay sent ---- */

/* A "list" child's lines for the n requests jr_freeze_all froze with "<prefix>%d" on
 * http://127.0.0.1:port: oldest first, each a POST to its URL with a 32-character idempotency key. */
__attribute__((unused)) static void jr_check_listed(const jr_listed *l, int n, int port, const char *prefix) {
    for (int i = 0; i < n; i++) {
        char url[160];
        snprintf(url, sizeof url, "http://127.0.0.1:%d%s%d", port, prefix, i);
        CHECK_STR(l[i].url, url);
        CHECK_STR(l[i].method, "POST");
        CHECK_EQ(strlen(l[i].key), 32);
    }
}

/* The server got exactly the n requests jr_freeze_all froze with "<prefix>%d", once each, in
 * order, each with the body it was frozen with and the idempotency key the list child saw. */
__attribute__((unused)) static void jr_check_replayed_in_order(jr_server *s, const char *prefix, int n,
                                                               const jr_listed *l) {
    CHECK_EQ(jr_count(s), (size_t)n);
    for (int i = 0; i < n && i < (int)jr_count(s); i++) {
        jr_hit h = jr_get(s, (size_t)i);
        char path[160], body[16];
        snprintf(path, sizeof path, "%s%d", prefix, i);
        snprintf(body, sizeof body, "n=%d", i);
        CHECK_STR(h.path, path);
        CHECK_STR(h.body, body);
        CHECK_STR(h.key, l[i].key);
    }
}

/* A replayer was killed and another finished: the first arrivals of "<prefix>N" (prefix_len
 * characters before N) came in the order of N, and only the last one seen may come again (the one
 * that was on the wire). Returns how many distinct requests arrived in order. */
__attribute__((unused)) static int jr_first_arrivals_in_order(jr_server *s, size_t prefix_len) {
    int next = 0;
    for (size_t i = 0; i < jr_count(s); i++) {
        int k = atoi(jr_get(s, i).path + prefix_len);
        if (k == next) next++;
        else CHECK(k == next - 1);
    }
    return next;
}

#endif
