/*
 * pool.c — the connection pool's figures (include/courier/engine.h, "The connection pool"): per
 * engine and by host, the connections open, idle and in use now, and those made and reused over
 * the engine's life. docs/design/pool.md has the why.
 *
 * libcurl keeps the pool (the multi handle's connection cache) and shows nothing of it, so the
 * engine watches the sockets it makes: every easy handle gets the open and close socket callbacks
 * below (cr_pool_base, from cr_transport_base), whose user is the engine's cr_pool. A socket libcurl
 * opens is noted, unclaimed; the first request that goes on it (CURLOPT_PREREQFUNCTION, transport.c's
 * on_connected, calls cr_pool_connected) claims it for its host: from then on it is a connection
 * of the pool, in use while requests are on it (cr_pool_release when the transfer leaves the wire,
 * engine.c), idle between them, gone when libcurl closes it (its idle timeout, the pool's size, the
 * server closing it, the engine closing). A socket never claimed (a connect that failed, the loser
 * of happy eyeballs, a WebSocket's) is counted nowhere.
 *
 * Which connection a request went on: libcurl says whether the transfer made one
 * (CURLINFO_NUM_CONNECTS), and gives the connection's local address to the prerequest callback. A
 * new TCP connection is the unclaimed socket with that local address (getsockname), a reused one
 * the claimed connection with it. Unix-domain sockets have no local address: a new one is the
 * socket opened last, a reused one an idle connection of the same host (the counts stay right).
 *
 * Threads: the callbacks and cr_pool_connected/_release run on the worker; courier_pool_get_figures
 * on any thread. Everything is under the pool's mutex, held for a short scan and never across a
 * call out.
 */
#include "http/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct pool_conn {
    uint32_t id;     /* never 0; 0 while unclaimed */
    int fd;
    int family;
    int users;       /* requests on it now */
    size_t host;     /* index in hosts, once claimed */
    int local_port;  /* its local address, once claimed (0: a Unix-domain socket) */
    char local_ip[INET6_ADDRSTRLEN];
} pool_conn;

typedef struct pool_host {
    char *name;      /* scheme://host:port, as the scheduler keys hosts */
    int64_t opened;
    int64_t reused;
} pool_host;

struct cr_pool {
    pthread_mutex_t m;
    pool_conn *conns; /* sockets open: unclaimed ones and connections */
    size_t nconns, capconns;
    pool_host *hosts; /* every host that had a connection, in the order they came */
    size_t nhosts, caphosts;
    uint32_t next_id;
};

struct courier_pool_figures {
    size_t count;
    courier_pool_host *hosts; /* host names owned */
    courier_pool_host total;
};

cr_pool *cr_pool_new(void) {
    cr_pool *p = cr_zalloc(sizeof *p);
    if (p) pthread_mutex_init(&p->m, NULL);
    return p;
}

void cr_pool_free(cr_pool *p) {
    if (!p) return;
    for (size_t i = 0; i < p->nhosts; i++) free(p->hosts[i].name);
    free(p->hosts);
    free(p->conns);
    pthread_mutex_destroy(&p->m);
    free(p);
}

/* ---- the socket callbacks (worker) ------------------------------------------------------------ */

static curl_socket_t on_open(void *user, curlsocktype purpose, struct curl_sockaddr *a) {
    cr_pool *p = user;
    curl_socket_t fd = socket(a->family, a->socktype, a->protocol);
    if (fd == CURL_SOCKET_BAD || purpose != CURLSOCKTYPE_IPCXN) return fd;
    pthread_mutex_lock(&p->m);
    if (p->nconns == p->capconns) {
        size_t cap = p->capconns ? p->capconns * 2 : 8;
        pool_conn *c = realloc(p->conns, cap * sizeof *c);
        if (c) {
            p->conns = c;
            p->capconns = cap;
        }
    }
    if (p->nconns < p->capconns) /* no memory: this socket is not counted */
        p->conns[p->nconns++] = (pool_conn){.fd = fd, .family = a->family};
    pthread_mutex_unlock(&p->m);
    return fd;
}

static int on_close(void *user, curl_socket_t fd) {
    cr_pool *p = user;
    pthread_mutex_lock(&p->m);
    for (size_t i = 0; i < p->nconns; i++) {
        if (p->conns[i].fd != fd) continue;
        p->conns[i] = p->conns[--p->nconns];
        break;
    }
    pthread_mutex_unlock(&p->m);
    return close(fd);
}

int cr_pool_base(cr_pool *p, CURL *h) {
    if (!p) return CURLE_OK;
    CURLcode c = curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, on_open);
    if (c == CURLE_OK) c = curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, p);
    if (c == CURLE_OK) c = curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, on_close);
    if (c == CURLE_OK) c = curl_easy_setopt(h, CURLOPT_CLOSESOCKETDATA, p);
    return (int)c;
}

/* ---- requests on connections (worker) --------------------------------------------------------- */

static pool_conn *conn_by_id(cr_pool *p, uint32_t id) {
    for (size_t i = 0; i < p->nconns; i++)
        if (p->conns[i].id == id) return &p->conns[i];
    return NULL;
}

/* The host's slot, added on first use; SIZE_MAX on no memory. */
static size_t host_index(cr_pool *p, const char *name) {
    for (size_t i = 0; i < p->nhosts; i++)
        if (strcmp(p->hosts[i].name, name) == 0) return i;
    if (p->nhosts == p->caphosts) {
        size_t cap = p->caphosts ? p->caphosts * 2 : 4;
        pool_host *h = realloc(p->hosts, cap * sizeof *h);
        if (!h) return SIZE_MAX;
        p->hosts = h;
        p->caphosts = cap;
    }
    char *copy = cr_strdup(name);
    if (!copy) return SIZE_MAX;
    p->hosts[p->nhosts] = (pool_host){copy, 0, 0};
    return p->nhosts++;
}

/* Whether the socket's local address is ip:port. */
static bool local_is(int fd, const char *ip, int port) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) return false;
    char buf[INET6_ADDRSTRLEN];
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        if (ntohs(a->sin_port) != port || !inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf)) return false;
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        if (ntohs(a->sin6_port) != port || !inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf)) return false;
    } else {
        return false;
    }
    return strcmp(buf, ip) == 0;
}

/* The connection a transfer that made one went on: the unclaimed socket with its local address, or
 * over a Unix-domain socket (no local address) the one opened last. */
static pool_conn *new_conn(cr_pool *p, const char *ip, int port) {
    for (size_t i = p->nconns; i-- > 0;) {
        pool_conn *c = &p->conns[i];
        if (c->id) continue;
        if (port ? local_is(c->fd, ip, port) : c->family == AF_UNIX) return c;
    }
    return NULL;
}

/* The connection a transfer that made none went on: the claimed one with its local address, or over
 * a Unix-domain socket one of its host's, idle if one is. */
static pool_conn *reused_conn(cr_pool *p, size_t host, const char *ip, int port) {
    pool_conn *busy = NULL;
    for (size_t i = 0; i < p->nconns; i++) {
        pool_conn *c = &p->conns[i];
        if (!c->id) continue;
        if (port) {
            if (c->local_port == port && strcmp(c->local_ip, ip) == 0) return c;
        } else if (c->family == AF_UNIX && c->host == host) {
            if (!c->users) return c;
            busy = c;
        }
    }
    return busy;
}

static void release_locked(cr_pool *p, uint32_t id) {
    pool_conn *c = conn_by_id(p, id);
    if (c && c->users > 0) c->users--;
}

void cr_pool_connected(cr_transfer *t, const char *local_ip, int local_port) {
    cr_pool *p = cr_core(t->engine)->pool;
    if (!p || !t->easy || !t->host) return;
    long made = 0;
    curl_easy_getinfo(t->easy, CURLINFO_NUM_CONNECTS, &made);
    if (!local_ip) local_ip = "";
    pthread_mutex_lock(&p->m);
    if (t->pool_conn) release_locked(p, t->pool_conn); /* libcurl retried on another connection */
    t->pool_conn = 0;
    size_t host = host_index(p, t->host);
    if (host != SIZE_MAX) {
        pool_conn *c = made > 0 ? new_conn(p, local_ip, local_port) : reused_conn(p, host, local_ip, local_port);
        if (made > 0) {
            p->hosts[host].opened++;
            if (c) {
                if (!++p->next_id) p->next_id = 1; /* 0 is "unclaimed" */
                c->id = p->next_id;
                c->host = host;
                c->local_port = local_port;
                snprintf(c->local_ip, sizeof c->local_ip, "%s", local_ip);
            }
        } else {
            p->hosts[c ? c->host : host].reused++;
        }
        if (c) {
            c->users++;
            t->pool_conn = c->id;
        }
    }
    pthread_mutex_unlock(&p->m);
}

void cr_pool_release(cr_transfer *t) {
    if (!t->pool_conn) return;
    cr_pool *p = cr_core(t->engine)->pool;
    pthread_mutex_lock(&p->m);
    release_locked(p, t->pool_conn);
    pthread_mutex_unlock(&p->m);
    t->pool_conn = 0;
}

/* ---- the figures (any thread) ------------------------------------------------------------------ */

int courier_pool_get_figures(courier_pool_figures **out, const courier_engine *engine) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    *out = NULL;
    if (!engine) return COURIER_E_INVALID_ARGUMENT;
    cr_pool *p = cr_core(engine)->pool;
    courier_pool_figures *f = cr_zalloc(sizeof *f);
    if (!f) return COURIER_E_NO_MEMORY;
    f->total.size = sizeof f->total;
    if (!p) {
        *out = f;
        return COURIER_OK;
    }
    pthread_mutex_lock(&p->m);
    int rc = COURIER_OK;
    if (p->nhosts && !(f->hosts = cr_zalloc(p->nhosts * sizeof *f->hosts))) rc = COURIER_E_NO_MEMORY;
    for (size_t i = 0; rc == COURIER_OK && i < p->nhosts; i++) {
        courier_pool_host *h = &f->hosts[i];
        h->size = sizeof *h;
        if (!(h->host = cr_strdup(p->hosts[i].name))) rc = COURIER_E_NO_MEMORY;
        h->opened = p->hosts[i].opened;
        h->reused = p->hosts[i].reused;
        f->count++;
    }
    for (size_t i = 0; rc == COURIER_OK && i < p->nconns; i++) {
        const pool_conn *c = &p->conns[i];
        if (!c->id) continue;
        courier_pool_host *h = &f->hosts[c->host];
        h->open++;
        if (c->users) h->in_use++;
        else h->idle++;
    }
    pthread_mutex_unlock(&p->m);
    if (rc != COURIER_OK) {
        courier_pool_figures_free(f);
        return rc;
    }
    for (size_t i = 0; i < f->count; i++) {
        f->total.open += f->hosts[i].open;
        f->total.idle += f->hosts[i].idle;
        f->total.in_use += f->hosts[i].in_use;
        f->total.opened += f->hosts[i].opened;
        f->total.reused += f->hosts[i].reused;
    }
    *out = f;
    return COURIER_OK;
}

size_t courier_pool_figures_count(const courier_pool_figures *f) { return f ? f->count : 0; }

int courier_pool_figures_at(courier_pool_host *out, const courier_pool_figures *f, size_t index) {
    if (!f || !CR_SIZED_OK(out, courier_pool_host)) return COURIER_E_INVALID_ARGUMENT;
    if (index >= f->count) return COURIER_E_NOT_FOUND;
    CR_SIZED_OUT(out, f->hosts[index]);
    return COURIER_OK;
}

int courier_pool_figures_total(courier_pool_host *out, const courier_pool_figures *f) {
    if (!f || !CR_SIZED_OK(out, courier_pool_host)) return COURIER_E_INVALID_ARGUMENT;
    CR_SIZED_OUT(out, f->total);
    return COURIER_OK;
}

void courier_pool_figures_free(courier_pool_figures *f) {
    if (!f) return;
    for (size_t i = 0; i < f->count; i++) free((char *)f->hosts[i].host);
    free(f->hosts);
    free(f);
}
