/*
 * monitor.c — the network monitor: online / offline from transport errors, a periodic probe while
 * offline (a TCP connect, or a HEAD through the engine), and the app's own word
 * (courier_reachability_set_online / _set_offline), which holds until the app gives it back
 * (courier_reachability_set_automatic).
 *
 * Threads: the worker reports every attempt (cr_monitor_observe); the send path reads the state
 * (one atomic load); the journal thread runs probes (cr_monitor_tick) and delivers state changes
 * to listeners (cr_monitor_dispatch), so listeners see changes in order, on one thread. A TCP
 * probe runs on a short-lived thread of its own so a slow connect never delays a freeze.
 */
#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define M_DEFAULT_INTERVAL CR_DEFAULT_MONITOR_INTERVAL_MS
#define M_CONNECT_TIMEOUT 2000L

typedef struct mlistener {
    struct mlistener *next;
    uint64_t token;
    cr_callback *cb;
} mlistener;

struct cr_monitor {
    courier_engine *e;
    pthread_mutex_t mu;
    atomic_int effective; /* what the send path reads */
    /* Guarded by mu. */
    int detected;         /* from errors and probes */
    int forced;           /* 0: automatic; else the app's word */
    int reported;         /* last state given to listeners */
    int from_errors;
    char probe[sizeof ((struct cr_frozen_conf *)0)->probe];
    long interval_ms;
    char fail_host[256];  /* the host:port of the last connection failure, for a TCP probe */
    char fail_port[16];
    int64_t next_probe;   /* monotonic ms */
    int probing;
    int closing;
    pthread_t probe_thread;
    int probe_joinable;
    char probe_host[256], probe_port[16];
    mlistener *listeners;
    void (*changed)(courier_engine *e, unsigned how); /* the engine's: tells the journal (CR_WAKE_*) */
    uint64_t next_token;
    /* The path's kind (network kinds, below): any thread reads, cr_monitor_report writes. */
    atomic_int kind;      /* courier_network_kind */
    atomic_int expensive;
    struct cr_netwatch *watch; /* the OS watch (netwatch.c), when the configuration asks for it */
};

static int effective_of(const struct cr_monitor *m) { return m->forced ? m->forced : m->detected; }

/* Applies a change; wakes the journal (a change to online starts replay) when the effective state
 * changed. Called with mu held; returns what to tell the journal. */
static unsigned update_locked(struct cr_monitor *m, int detected, int forced) {
    int before = effective_of(m);
    m->detected = detected;
    m->forced = forced;
    int after = effective_of(m);
    atomic_store(&m->effective, after);
    if (after == before) return 0;
    if (after == COURIER_REACHABILITY_OFFLINE) {
        m->next_probe = cr_mono_ms() + m->interval_ms;
        return CR_WAKE_TURN;
    }
    return after == COURIER_REACHABILITY_ONLINE ? CR_WAKE_TURN | CR_WAKE_REPLAY_NOW : CR_WAKE_TURN;
}

static void set_detected(courier_engine *e, int state) {
    struct cr_monitor *m = e->monitor;
    pthread_mutex_lock(&m->mu);
    unsigned wake = m->detected == state ? 0 : update_locked(m, state, m->forced);
    pthread_mutex_unlock(&m->mu);
    if (wake) m->changed(e, wake);
}

/* ---- hooks ---------------------------------------------------------------------------------- */

int cr_monitor_open(courier_engine *e, void (*changed)(courier_engine *e, unsigned how), courier_error *err) {
    struct cr_monitor *m = calloc(1, sizeof *m);
    if (!m) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    pthread_mutex_init(&m->mu, NULL);
    m->e = e;
    m->changed = changed;
    const struct cr_frozen_conf *fc = &e->core.config->frozen;
    m->from_errors = fc->monitor_from_errors;
    memcpy(m->probe, fc->probe, sizeof m->probe);
    m->interval_ms = fc->probe_interval_ms > 0 ? fc->probe_interval_ms : M_DEFAULT_INTERVAL;
    atomic_init(&m->effective, COURIER_REACHABILITY_UNKNOWN);
    m->next_token = 1;
    e->monitor = m;
    return COURIER_OK;
}

void cr_monitor_close(courier_engine *e) {
    struct cr_monitor *m = e ? e->monitor : NULL;
    if (!m) return;
    cr_netwatch_stop(m->watch); /* no report after this */
    m->watch = NULL;
    pthread_mutex_lock(&m->mu);
    m->closing = 1;
    int joinable = m->probe_joinable;
    m->probe_joinable = 0;
    pthread_mutex_unlock(&m->mu);
    if (joinable) pthread_join(m->probe_thread, NULL);
    while (m->listeners) {
        mlistener *l = m->listeners;
        m->listeners = l->next;
        cr_callback_release(l->cb);
        free(l);
    }
    pthread_mutex_destroy(&m->mu);
    free(m);
    e->monitor = NULL;
}

bool cr_monitor_offline(courier_engine *e) {
    return e && e->monitor && atomic_load(&e->monitor->effective) == COURIER_REACHABILITY_OFFLINE;
}

bool cr_monitor_blocks(courier_engine *e, const cr_transfer *t) {
    return !t->freeze.ignore_offline && !t->mock && !t->custom && cr_monitor_offline(e);
}

static void split_host_port(const char *url, char *host, size_t hcap, char *port, size_t pcap) {
    host[0] = port[0] = '\0';
    CURLU *u = curl_url();
    if (!u) return;
    char *h = NULL, *p = NULL;
    if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK && curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT) == CURLUE_OK) {
        /* An IPv6 literal comes bracketed. */
        size_t n = strlen(h);
        if (n >= 2 && h[0] == '[' && h[n - 1] == ']') snprintf(host, hcap, "%.*s", (int)(n - 2), h + 1);
        else snprintf(host, hcap, "%s", h);
        snprintf(port, pcap, "%s", p);
    }
    curl_free(h);
    curl_free(p);
    curl_url_cleanup(u);
}

void cr_monitor_observe(courier_engine *e, const cr_transfer *t, int code, const courier_response *resp) {
    struct cr_monitor *m = e ? e->monitor : NULL;
    if (!m || t->mock || t->custom) return;
    if (resp) {
        set_detected(e, COURIER_REACHABILITY_ONLINE);
        return;
    }
    if (!m->from_errors || (code != COURIER_E_CANNOT_RESOLVE && code != COURIER_E_CANNOT_CONNECT)) return;
    char host[256], port[16];
    split_host_port(t->url, host, sizeof host, port, sizeof port);
    pthread_mutex_lock(&m->mu);
    if (host[0]) {
        memcpy(m->fail_host, host, sizeof host);
        memcpy(m->fail_port, port, sizeof port);
    }
    unsigned wake = m->detected == COURIER_REACHABILITY_OFFLINE ? 0 : update_locked(m, COURIER_REACHABILITY_OFFLINE, m->forced);
    pthread_mutex_unlock(&m->mu);
    if (wake) m->changed(e, wake);
}

/* ---- probes --------------------------------------------------------------------------------- */

/* 1 when host:port accepts a TCP connection within the timeout. */
static int tcp_probe(struct cr_monitor *m, const char *host, const char *port) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0) return 0;
    int ok = 0;
    for (struct addrinfo *a = res; a && !ok; a = a->ai_next) {
#if defined(SOCK_CLOEXEC) && defined(SOCK_NONBLOCK)
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) continue;
#else /* macOS: no socket type flags */
        int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
            close(fd);
            continue;
        }
#endif
        int rc = connect(fd, a->ai_addr, a->ai_addrlen);
        if (rc == 0) {
            ok = 1;
        } else if (errno == EINPROGRESS) {
            for (long waited = 0; waited < M_CONNECT_TIMEOUT && !ok; waited += 100) {
                pthread_mutex_lock(&m->mu);
                int closing = m->closing;
                pthread_mutex_unlock(&m->mu);
                if (closing) break;
                struct pollfd p = {fd, POLLOUT, 0};
                int n = poll(&p, 1, 100);
                if (n > 0) {
                    int soerr = 0;
                    socklen_t len = sizeof soerr;
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
                    ok = soerr == 0;
                    break;
                }
                if (n < 0 && errno != EINTR) break;
            }
        }
        close(fd);
    }
    freeaddrinfo(res);
    return ok;
}

static void *probe_main(void *arg) {
    struct cr_monitor *m = arg;
    cr_thread_set_name("courier-probe");
    int ok = tcp_probe(m, m->probe_host, m->probe_port);
    pthread_mutex_lock(&m->mu);
    m->probing = 0;
    int closing = m->closing;
    pthread_mutex_unlock(&m->mu);
    if (ok && !closing) set_detected(m->e, COURIER_REACHABILITY_ONLINE);
    return NULL;
}

static void head_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    (void)code;
    (void)err;
    struct cr_monitor *m = user;
    courier_response_free(resp); /* cr_monitor_observe saw it */
    pthread_mutex_lock(&m->mu);
    m->probing = 0;
    pthread_mutex_unlock(&m->mu);
}

int64_t cr_monitor_tick(courier_engine *e, int64_t mono) {
    struct cr_monitor *m = e ? e->monitor : NULL;
    if (!m) return INT64_MAX;
    pthread_mutex_lock(&m->mu);
    bool offline = effective_of(m) == COURIER_REACHABILITY_OFFLINE && !m->forced;
    if (!offline || m->closing) {
        pthread_mutex_unlock(&m->mu);
        return INT64_MAX;
    }
    if (mono < m->next_probe || m->probing) {
        int64_t next = m->probing ? mono + m->interval_ms : m->next_probe;
        pthread_mutex_unlock(&m->mu);
        return next;
    }
    m->next_probe = mono + m->interval_ms;
    int64_t next = m->next_probe;
    bool head = strncasecmp(m->probe, "http://", 7) == 0 || strncasecmp(m->probe, "https://", 8) == 0;
    if (head) {
        m->probing = 1;
        char url[sizeof m->probe];
        memcpy(url, m->probe, sizeof url);
        pthread_mutex_unlock(&m->mu);
        courier_request *r = NULL;
        int rc = courier_request_new(&r, "HEAD", url);
        if (rc == COURIER_OK) rc = courier_request_set_ignore_offline(r, 1);
        if (rc == COURIER_OK)
            rc = courier_request_set_timeout_ms(r, m->interval_ms < 10000 ? (m->interval_ms > 500 ? m->interval_ms : 500) : 10000);
        if (rc == COURIER_OK) rc = courier_send(NULL, e, r, head_done, m, NULL);
        courier_request_free(r);
        if (rc != COURIER_OK) {
            pthread_mutex_lock(&m->mu);
            m->probing = 0;
            pthread_mutex_unlock(&m->mu);
        }
        return next;
    }
    /* A TCP probe: the configured "host:port" ("tcp://" optional), else the host that failed. */
    const char *target = strncasecmp(m->probe, "tcp://", 6) == 0 ? m->probe + 6 : m->probe;
    if (*target) {
        const char *colon = strrchr(target, ':');
        size_t hl = colon ? (size_t)(colon - target) : strlen(target);
        if (hl && target[0] == '[' && target[hl - 1] == ']') {
            target++;
            hl -= 2;
        }
        snprintf(m->probe_host, sizeof m->probe_host, "%.*s", (int)hl, target);
        snprintf(m->probe_port, sizeof m->probe_port, "%s", colon ? colon + 1 : "80");
    } else {
        memcpy(m->probe_host, m->fail_host, sizeof m->probe_host);
        memcpy(m->probe_port, m->fail_port, sizeof m->probe_port);
    }
    if (!m->probe_host[0]) {
        pthread_mutex_unlock(&m->mu);
        return next;
    }
    int joinable = m->probe_joinable;
    m->probe_joinable = 0;
    m->probing = 1;
    pthread_mutex_unlock(&m->mu);
    if (joinable) pthread_join(m->probe_thread, NULL); /* the previous probe, finished */
    pthread_t th;
    int prc = pthread_create(&th, NULL, probe_main, m);
    pthread_mutex_lock(&m->mu);
    if (prc == 0) {
        m->probe_thread = th;
        m->probe_joinable = 1;
    } else {
        m->probing = 0;
    }
    pthread_mutex_unlock(&m->mu);
    return next;
}

void cr_monitor_dispatch(courier_engine *e) {
    struct cr_monitor *m = e ? e->monitor : NULL;
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    int now = effective_of(m);
    if (now == m->reported) {
        pthread_mutex_unlock(&m->mu);
        return;
    }
    m->reported = now;
    size_t n = 0, k = 0;
    for (mlistener *l = m->listeners; l; l = l->next) n++;
    cr_callback **cbs = n ? malloc(n * sizeof *cbs) : NULL;
    if (cbs)
        for (mlistener *l = m->listeners; l; l = l->next) cbs[k++] = cr_callback_retain(l->cb);
    pthread_mutex_unlock(&m->mu);
    for (size_t i = 0; i < k; i++) {
        ((courier_reachability_fn)cbs[i]->fn)(now, cbs[i]->user);
        cr_callback_release(cbs[i]);
    }
    free(cbs);
}

/* ---- public API ----------------------------------------------------------------------------- */

int courier_config_set_reachability(courier_config *c, int from_errors, const char *probe, int64_t interval_ms) {
    if (!c || interval_ms < 0) return COURIER_E_INVALID_ARGUMENT;
    if (probe && *probe) {
        if (strlen(probe) >= sizeof c->frozen.probe) return COURIER_E_INVALID_ARGUMENT;
        bool http = strncasecmp(probe, "http://", 7) == 0 || strncasecmp(probe, "https://", 8) == 0;
        if (http && !cr_url_valid(probe)) return COURIER_E_INVALID_URL;
        if (!http) {
            const char *t = strncasecmp(probe, "tcp://", 6) == 0 ? probe + 6 : probe;
            const char *colon = strrchr(t, ':');
            if (!colon || colon == t || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1))
                return COURIER_E_INVALID_ARGUMENT;
        }
    }
    c->frozen.monitor_from_errors = from_errors ? 1 : 0;
    snprintf(c->frozen.probe, sizeof c->frozen.probe, "%s", probe ? probe : "");
    c->frozen.probe_interval_ms = interval_ms;
    return COURIER_OK;
}

int courier_reachability_status(const courier_engine *e) {
    if (!e || !e->monitor) return COURIER_REACHABILITY_UNKNOWN;
    return atomic_load(&e->monitor->effective);
}

static int force(courier_engine *e, int state) {
    struct cr_monitor *m = e ? e->monitor : NULL;
    if (!m) return COURIER_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&m->mu);
    int detected = m->detected;
    /* The app's "online" also means what it says for detection: probes stop, errors start over. */
    if (state == COURIER_REACHABILITY_ONLINE && detected == COURIER_REACHABILITY_OFFLINE)
        detected = COURIER_REACHABILITY_UNKNOWN;
    unsigned wake = update_locked(m, detected, state);
    pthread_mutex_unlock(&m->mu);
    m->changed(e, wake ? wake : CR_WAKE_TURN);
    return COURIER_OK;
}

int courier_reachability_set_online(courier_engine *e) { return force(e, COURIER_REACHABILITY_ONLINE); }
int courier_reachability_set_offline(courier_engine *e) { return force(e, COURIER_REACHABILITY_OFFLINE); }
int courier_reachability_set_automatic(courier_engine *e) { return force(e, 0); }

int courier_reachability_add_listener(uint64_t *out_token, courier_engine *e, courier_reachability_fn fn, void *user,
                                 courier_user_free_fn user_free) {
    if (out_token) *out_token = 0;
    struct cr_monitor *m = e ? e->monitor : NULL;
    if (!m || !fn) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    int rc;
    cr_callback *cb = cr_callback_new((void (*)(void))fn, user, user_free, &rc);
    if (!cb) return rc ? rc : COURIER_E_INVALID_ARGUMENT;
    mlistener *l = calloc(1, sizeof *l);
    if (!l) {
        cr_callback_release(cb);
        return COURIER_E_NO_MEMORY;
    }
    l->cb = cb;
    pthread_mutex_lock(&m->mu);
    l->token = m->next_token++;
    mlistener **pp = &m->listeners;
    while (*pp) pp = &(*pp)->next;
    *pp = l;
    pthread_mutex_unlock(&m->mu);
    if (out_token) *out_token = l->token;
    return COURIER_OK;
}

int courier_reachability_remove_listener(courier_engine *e, uint64_t token) {
    struct cr_monitor *m = e ? e->monitor : NULL;
    if (!m) return COURIER_E_INVALID_ARGUMENT;
    mlistener *found = NULL;
    pthread_mutex_lock(&m->mu);
    for (mlistener **pp = &m->listeners; *pp; pp = &(*pp)->next) {
        if ((*pp)->token == token) {
            found = *pp;
            *pp = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&m->mu);
    if (!found) return COURIER_E_NOT_FOUND;
    cr_callback_release(found->cb);
    free(found);
    return COURIER_OK;
}

/* ---- network kinds (issue 17 item 2) -------------------------------------------------------------- */

void cr_monitor_start_watch(courier_engine *e) {
    struct cr_monitor *m = e->monitor;
    if (m && e->core.config->network_watch && !m->watch) m->watch = cr_netwatch_start(e, cr_monitor_report);
}

void cr_monitor_report(courier_engine *e, int status, courier_network_kind kind, int expensive) {
    struct cr_monitor *m = e->monitor;
    if (!m) return;
    atomic_store(&m->expensive, expensive ? 1 : 0);
    int before = atomic_exchange(&m->kind, (int)kind);
    if (status == COURIER_REACHABILITY_ONLINE || status == COURIER_REACHABILITY_OFFLINE) set_detected(e, status);
    if (before != (int)kind) {
        /* The new kind's limits hold at once: replays by the journal, the queue by the worker. */
        cr_journal_set_concurrency(e, e->core.config->kind_limits[kind].replay);
        if (e->core.multi) curl_multi_wakeup(e->core.multi);
    }
}

void cr_monitor_limits(courier_engine *e, long *per_host, long *total) {
    struct cr_monitor *m = e->monitor;
    if (!m) return;
    const struct cr_kind_limits *l = &e->core.config->kind_limits[atomic_load(&m->kind)];
    if (l->per_host > 0) *per_host = l->per_host;
    if (l->total > 0) *total = l->total;
}

bool cr_monitor_refuses(courier_engine *e, const cr_transfer *t) {
    struct cr_monitor *m = e->monitor;
    return m && t->no_cellular && atomic_load(&m->kind) == COURIER_NETWORK_CELLULAR;
}

static bool kind_valid(int kind) { return kind >= COURIER_NETWORK_UNKNOWN && kind <= COURIER_NETWORK_OTHER; }

int courier_config_set_network_limits(courier_config *c, courier_network_kind kind, int max_per_host,
                                      int max_total, int replay_concurrency) {
    if (!c || !kind_valid((int)kind) || max_per_host < 0 || max_total < 0 || replay_concurrency < 0)
        return COURIER_E_INVALID_ARGUMENT;
    c->kind_limits[kind] = (struct cr_kind_limits){max_per_host, max_total, replay_concurrency};
    return COURIER_OK;
}

int courier_config_set_network_watch(courier_config *c, int watch) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    c->network_watch = watch ? 1 : 0;
    return COURIER_OK;
}

int courier_request_set_allow_cellular(courier_request *r, int allow) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    r->no_cellular = allow ? 0 : 1;
    return COURIER_OK;
}

int courier_reachability_report(courier_engine *e, courier_reachability status, courier_network_kind kind,
                                int expensive) {
    if (!e || !e->monitor || !kind_valid((int)kind) || (int)status < COURIER_REACHABILITY_UNKNOWN ||
        (int)status > COURIER_REACHABILITY_ONLINE)
        return COURIER_E_INVALID_ARGUMENT;
    cr_monitor_report(e, (int)status, kind, expensive);
    return COURIER_OK;
}

int courier_reachability_path(courier_network_kind *out_kind, int *out_expensive, const courier_engine *e) {
    if (out_kind) *out_kind = COURIER_NETWORK_UNKNOWN;
    if (out_expensive) *out_expensive = 0;
    if (!e || !e->monitor || !out_kind) return COURIER_E_INVALID_ARGUMENT;
    *out_kind = (courier_network_kind)atomic_load(&e->monitor->kind);
    if (out_expensive) *out_expensive = atomic_load(&e->monitor->expensive);
    return COURIER_OK;
}
