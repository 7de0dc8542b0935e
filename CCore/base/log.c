/*
 * log.c — per-engine logging (levels, JSON lines, sinks: callback, stderr, rotating file) and the
 * request lifecycle event monitors.
 *
 * State: an engine's `obs` is made on first use (so an engine nobody observes pays one atomic load
 * per event). Its sinks, monitors, fields and redaction settings form an immutable, reference-
 * counted snapshot: an emitter takes a reference under `lock` and works without it; a change
 * builds a new snapshot and swaps it in. Sinks and monitor registrations are shared between
 * snapshots by reference, so a registration's user_free runs after the last call that used it.
 */
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { SINK_CALLBACK = 1, SINK_STDERR, SINK_FILE };

typedef struct cr_sink {
    atomic_int refs;
    uint64_t id;
    int kind;
    int min_level;
    cr_callback *cb; /* SINK_CALLBACK */
    /* SINK_FILE */
    pthread_mutex_t lock;
    char *path;
    int fd;
    int64_t max_bytes;
    int max_files;
    int64_t size;
    int daily;          /* COURIER_LOG_ROTATE_DAILY */
    int64_t day;        /* the UTC day (ms / 86 400 000) of the file's first line */
    cr_callback *clock; /* the engine's clock (courier_clock_fn), or NULL */
} cr_sink;

typedef struct cr_monitor {
    uint64_t id;
    unsigned kinds;
    cr_callback *cb;
} cr_monitor;

typedef struct cr_obs_snap {
    atomic_int refs;
    cr_sink **sinks;
    size_t nsinks;
    cr_monitor *monitors;
    size_t nmonitors;
    cr_kvlist fields;
    cr_kvlist redact; /* extra parameter names; values unused */
    int redaction;
    int max_sink_level; /* the most verbose sink's level */
    unsigned kinds;     /* the union of the monitors' kinds */
} cr_obs_snap;

#define CR_LOG_COMPONENTS 5

struct cr_obs {
    atomic_int level;
    atomic_int levels[CR_LOG_COMPONENTS]; /* per courier_log_component */
    atomic_int active; /* the snapshot has a sink or a monitor */
    atomic_int max_sink_level; /* the snapshot's, for cr_log_wants without the lock */
    pthread_mutex_t lock;
    cr_obs_snap *snap; /* guarded by lock */
    uint64_t next_id;  /* guarded by lock */
};

static const char *const reserved_keys[] = {
    "time", "level", "event", "message", "request_id", "method", "url", "status", "code", "error",
    "cache", "duration_ms", "attempt", "delay_ms", "bytes_received", "bytes_expected", "bytes_sent", "bytes_to_send",
    "component", "freeze_id", "policy", "reason", "decision", "stored", "attempts", "final", "cache_policy",
};

static const char *const component_names[CR_LOG_COMPONENTS] = {"transport", "cache", "journal", "mapping",
                                                               "scheduling"};

/* ---- names ------------------------------------------------------------------------------------ */

const char *courier_log_level_name(int level) {
    switch (level) {
    case COURIER_LOG_OFF: return "off";
    case COURIER_LOG_ERROR: return "error";
    case COURIER_LOG_WARNING: return "warning";
    case COURIER_LOG_INFO: return "info";
    case COURIER_LOG_DEBUG: return "debug";
    case COURIER_LOG_TRACE: return "trace";
    default: return "unknown";
    }
}

const char *courier_event_kind_name(int kind) {
    switch (kind) {
    case COURIER_EVENT_WILL_SEND: return "will_send";
    case COURIER_EVENT_DID_SEND: return "did_send";
    case COURIER_EVENT_PROGRESS: return "progress";
    case COURIER_EVENT_FINISHED: return "finished";
    case COURIER_EVENT_FROM_CACHE: return "from_cache";
    case COURIER_EVENT_RETRIED: return "retried";
    case COURIER_EVENT_FROZEN: return "frozen";
    case COURIER_EVENT_REDIRECTED: return "redirected";
    default: return "unknown";
    }
}

/* ---- sinks and snapshots ------------------------------------------------------------------------ */

static cr_sink *sink_retain(cr_sink *s) {
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    return s;
}

static void sink_release(cr_sink *s) {
    if (!s || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1) return;
    cr_callback_release(s->cb);
    cr_callback_release(s->clock);
    if (s->kind == SINK_FILE) {
        if (s->fd >= 0) close(s->fd);
        pthread_mutex_destroy(&s->lock);
    }
    free(s->path);
    free(s);
}

static void snap_release(cr_obs_snap *s) {
    if (!s || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1) return;
    for (size_t i = 0; i < s->nsinks; i++) sink_release(s->sinks[i]);
    free(s->sinks);
    for (size_t i = 0; i < s->nmonitors; i++) cr_callback_release(s->monitors[i].cb);
    free(s->monitors);
    cr_kvlist_clear(&s->fields);
    cr_kvlist_clear(&s->redact);
    free(s);
}

/* A copy of `src` (NULL: empty) with room for one more sink and monitor. NULL on no memory. */
static cr_obs_snap *snap_copy(const cr_obs_snap *src) {
    cr_obs_snap *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    atomic_init(&s->refs, 1);
    size_t ns = src ? src->nsinks : 0, nm = src ? src->nmonitors : 0;
    s->sinks = calloc(ns + 1, sizeof *s->sinks);
    s->monitors = calloc(nm + 1, sizeof *s->monitors);
    if (!s->sinks || !s->monitors) {
        snap_release(s);
        return NULL;
    }
    if (!src) return s;
    for (size_t i = 0; i < ns; i++) s->sinks[i] = sink_retain(src->sinks[i]);
    s->nsinks = ns;
    for (size_t i = 0; i < nm; i++) {
        s->monitors[i] = src->monitors[i];
        cr_callback_retain(s->monitors[i].cb);
    }
    s->nmonitors = nm;
    s->redaction = src->redaction;
    if (cr_kvlist_copy(&s->fields, &src->fields) || cr_kvlist_copy(&s->redact, &src->redact)) {
        snap_release(s);
        return NULL;
    }
    return s;
}

static void snap_summarize(cr_obs_snap *s) {
    s->max_sink_level = COURIER_LOG_OFF;
    for (size_t i = 0; i < s->nsinks; i++)
        if (s->sinks[i]->min_level > s->max_sink_level) s->max_sink_level = s->sinks[i]->min_level;
    s->kinds = 0;
    for (size_t i = 0; i < s->nmonitors; i++) s->kinds |= s->monitors[i].kinds;
}

static struct cr_obs *obs_of(const courier_engine *e) {
    return atomic_load_explicit(&cr_core(e)->obs, memory_order_acquire);
}

/* The engine's state, made on first use. NULL on no memory. */
static struct cr_obs *obs_make(courier_engine *e) {
    struct cr_obs *o = obs_of(e);
    if (o) return o;
    o = calloc(1, sizeof *o);
    if (!o) return NULL;
    atomic_init(&o->level, COURIER_LOG_INFO);
    for (int i = 0; i < CR_LOG_COMPONENTS; i++) atomic_init(&o->levels[i], COURIER_LOG_INFO);
    atomic_init(&o->active, 0);
    atomic_init(&o->max_sink_level, COURIER_LOG_OFF);
    pthread_mutex_init(&o->lock, NULL);
    o->next_id = 1;
    if (!(o->snap = snap_copy(NULL))) {
        pthread_mutex_destroy(&o->lock);
        free(o);
        return NULL;
    }
    struct cr_obs *expected = NULL;
    if (!atomic_compare_exchange_strong(&cr_core(e)->obs, &expected, o)) {
        snap_release(o->snap);
        pthread_mutex_destroy(&o->lock);
        free(o);
        return expected;
    }
    return o;
}

void cr_obs_free(courier_engine *e) {
    struct cr_obs *o = atomic_exchange(&cr_core(e)->obs, NULL);
    if (!o) return;
    snap_release(o->snap);
    pthread_mutex_destroy(&o->lock);
    free(o);
}

/* Takes a reference to the current snapshot, or NULL when nobody listens. */
static cr_obs_snap *snap_acquire(struct cr_obs *o) {
    if (!o || !atomic_load_explicit(&o->active, memory_order_acquire)) return NULL;
    pthread_mutex_lock(&o->lock);
    cr_obs_snap *s = o->snap;
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&o->lock);
    return s;
}

/* Installs `next` (lock held) and releases the old snapshot after unlocking. */
static void snap_install_locked(struct cr_obs *o, cr_obs_snap *next, cr_obs_snap **old) {
    snap_summarize(next);
    *old = o->snap;
    o->snap = next;
    atomic_store_explicit(&o->max_sink_level, next->max_sink_level, memory_order_relaxed);
    atomic_store_explicit(&o->active, next->nsinks || next->nmonitors, memory_order_release);
}

/* Runs `change` on a copy of the snapshot and installs it. Returns change's code. */
static int snap_change(courier_engine *e, int (*change)(cr_obs_snap *s, struct cr_obs *o, void *arg), void *arg) {
    struct cr_obs *o = obs_make(e);
    if (!o) return COURIER_E_NO_MEMORY;
    pthread_mutex_lock(&o->lock);
    cr_obs_snap *next = snap_copy(o->snap);
    int rc = next ? change(next, o, arg) : COURIER_E_NO_MEMORY;
    cr_obs_snap *old = NULL;
    if (rc == COURIER_OK) snap_install_locked(o, next, &old);
    pthread_mutex_unlock(&o->lock);
    snap_release(rc == COURIER_OK ? old : next);
    return rc;
}

/* ---- configuration ------------------------------------------------------------------------------ */

int courier_log_set_level(courier_engine *e, courier_log_level level) {
    if (!e || (int)level < COURIER_LOG_OFF || (int)level > COURIER_LOG_TRACE) return COURIER_E_INVALID_ARGUMENT;
    struct cr_obs *o = obs_make(e);
    if (!o) return COURIER_E_NO_MEMORY;
    atomic_store(&o->level, (int)level);
    for (int i = 0; i < CR_LOG_COMPONENTS; i++) atomic_store(&o->levels[i], (int)level);
    return COURIER_OK;
}

int courier_log_set_component_level(courier_engine *e, courier_log_component component, courier_log_level level,
                                    courier_error *err) {
    cr_error_clear(err);
    if (!e || (int)component < 0 || (int)component >= CR_LOG_COMPONENTS || (int)level < COURIER_LOG_OFF ||
        (int)level > COURIER_LOG_TRACE)
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "invalid engine, log component or level");
    struct cr_obs *o = obs_make(e);
    if (!o) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    atomic_store(&o->levels[component], (int)level);
    return COURIER_OK;
}

int courier_log_get_component_level(courier_log_level *out_level, const courier_engine *e,
                                    courier_log_component component, courier_error *err) {
    cr_error_clear(err);
    if (!out_level || !e || (int)component < 0 || (int)component >= CR_LOG_COMPONENTS)
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "invalid engine or log component");
    struct cr_obs *o = obs_of(e);
    *out_level = (courier_log_level)(o ? atomic_load(&o->levels[component]) : COURIER_LOG_INFO);
    return COURIER_OK;
}

int courier_log_get_level(const courier_engine *e) {
    if (!e) return COURIER_LOG_OFF;
    struct cr_obs *o = obs_of(e);
    return o ? atomic_load(&o->level) : COURIER_LOG_INFO;
}

typedef struct kv_arg {
    const char *name;
    const char *value;
} kv_arg;

static int change_field(cr_obs_snap *s, struct cr_obs *o, void *arg) {
    (void)o;
    kv_arg *a = arg;
    cr_kvlist_remove(&s->fields, a->name);
    if (!a->value) return COURIER_OK;
    return cr_kvlist_add(&s->fields, a->name, strlen(a->name), a->value, strlen(a->value));
}

int courier_log_set_field(courier_engine *e, const char *name, const char *value) {
    if (!e || !name || !*name) return COURIER_E_INVALID_ARGUMENT;
    for (size_t i = 0; i < sizeof reserved_keys / sizeof reserved_keys[0]; i++)
        if (strcmp(name, reserved_keys[i]) == 0) return COURIER_E_INVALID_ARGUMENT;
    if (!cr_utf8_valid(name, strlen(name)) || (value && !cr_utf8_valid(value, strlen(value))))
        return COURIER_E_INVALID_ENCODING;
    kv_arg a = {name, value};
    return snap_change(e, change_field, &a);
}

static int change_redaction(cr_obs_snap *s, struct cr_obs *o, void *arg) {
    (void)o;
    s->redaction = *(int *)arg;
    return COURIER_OK;
}

int courier_log_set_redaction(courier_engine *e, courier_log_redaction mode) {
    if (!e || (int)mode < COURIER_LOG_REDACT_SECRETS || (int)mode > COURIER_LOG_REDACT_NONE)
        return COURIER_E_INVALID_ARGUMENT;
    int m = (int)mode;
    return snap_change(e, change_redaction, &m);
}

static int change_redact_param(cr_obs_snap *s, struct cr_obs *o, void *arg) {
    (void)o;
    const char *name = arg;
    if (cr_kvlist_get(&s->redact, name)) return COURIER_OK;
    return cr_kvlist_add(&s->redact, name, strlen(name), "", 0);
}

int courier_log_redact_param(courier_engine *e, const char *name) {
    if (!e || !name || !*name) return COURIER_E_INVALID_ARGUMENT;
    return snap_change(e, change_redact_param, (void *)name);
}

static int change_add_sink(cr_obs_snap *s, struct cr_obs *o, void *arg) {
    cr_sink *sink = arg;
    sink->id = o->next_id++;
    s->sinks[s->nsinks++] = sink_retain(sink);
    return COURIER_OK;
}

/* Adds `sink` (the caller's reference is kept by the snapshot on success, dropped on failure). */
static int add_sink(courier_engine *e, cr_sink *sink, uint64_t *out_sink) {
    int rc = snap_change(e, change_add_sink, sink);
    if (rc == COURIER_OK && out_sink) *out_sink = sink->id;
    sink_release(sink);
    return rc;
}

static cr_sink *sink_new(int kind, courier_log_level min_level) {
    cr_sink *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    atomic_init(&s->refs, 1);
    s->kind = kind;
    s->min_level = (int)min_level;
    s->fd = -1;
    if (kind == SINK_FILE) pthread_mutex_init(&s->lock, NULL);
    return s;
}

static bool level_ok(courier_log_level level) {
    return (int)level >= COURIER_LOG_OFF && (int)level <= COURIER_LOG_TRACE;
}

int courier_log_add_callback(uint64_t *out_sink, courier_engine *e, courier_log_level min_level, courier_log_fn fn,
                             void *user, courier_user_free_fn user_free) {
    if (out_sink) *out_sink = 0;
    if (!e || !fn || !level_ok(min_level)) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    int rc;
    cr_callback *cb = cr_callback_new((void (*)(void))fn, user, user_free, &rc);
    if (!cb) return rc;
    cr_sink *s = sink_new(SINK_CALLBACK, min_level);
    if (!s) {
        cr_callback_release(cb);
        return COURIER_E_NO_MEMORY;
    }
    s->cb = cb;
    return add_sink(e, s, out_sink);
}

int courier_log_add_stderr(uint64_t *out_sink, courier_engine *e, courier_log_level min_level) {
    if (out_sink) *out_sink = 0;
    if (!e || !level_ok(min_level)) return COURIER_E_INVALID_ARGUMENT;
    cr_sink *s = sink_new(SINK_STDERR, min_level);
    if (!s) return COURIER_E_NO_MEMORY;
    return add_sink(e, s, out_sink);
}

static char *numbered(const char *path, int n) {
    size_t len = strlen(path) + 16;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s.%d", path, n);
    return p;
}

static int open_log(const char *path) { return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600); }

#define DAY_MS ((int64_t)86400000)

/* The sink's clock: the engine's (courier_config_set_clock) or the system's, in ms since the epoch. */
static int64_t sink_now_ms(const cr_sink *s) {
    if (s->clock) return ((courier_clock_fn)s->clock->fn)(s->clock->user);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int add_file(courier_engine *e, courier_log_level min_level, const char *path, int64_t max_bytes,
                    int max_files, courier_log_rotation rotation, uint64_t *out_sink, courier_error *err);

int courier_log_add_file(uint64_t *out_sink, courier_engine *e, courier_log_level min_level, const char *path,
                         int64_t max_bytes, int max_files, courier_error *err) {
    return add_file(e, min_level, path, max_bytes, max_files, COURIER_LOG_ROTATE_SIZE, out_sink, err);
}

int courier_log_add_rotating_file(uint64_t *out_sink, courier_engine *e, courier_log_level min_level,
                                  const char *path, int64_t max_bytes, int max_files, courier_log_rotation rotation,
                                  courier_error *err) {
    return add_file(e, min_level, path, max_bytes, max_files, rotation, out_sink, err);
}

static int add_file(courier_engine *e, courier_log_level min_level, const char *path, int64_t max_bytes,
                    int max_files, courier_log_rotation rotation, uint64_t *out_sink, courier_error *err) {
    cr_error_clear(err);
    if (out_sink) *out_sink = 0;
    /* The message names the argument, as the bindings name theirs (issue 28). */
    if (!e) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine: NULL");
    if (!path || !*path) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "path: NULL or empty");
    if (!level_ok(min_level)) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "min_level: %d is not a level", (int)min_level);
    if (max_bytes < 0)
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "max_bytes: %lld is negative", (long long)max_bytes);
    if (max_files < 1) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "max_files: %d is less than 1", max_files);
    if ((int)rotation != COURIER_LOG_ROTATE_SIZE && (int)rotation != COURIER_LOG_ROTATE_DAILY)
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "rotation: %d is not a rotation", (int)rotation);
    cr_sink *s = sink_new(SINK_FILE, min_level);
    if (!s || !(s->path = cr_strdup(path))) {
        sink_release(s);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    s->max_bytes = max_bytes;
    s->max_files = max_files;
    s->fd = open_log(path);
    struct stat st;
    if (s->fd < 0 || fstat(s->fd, &st) != 0) {
        int os = errno;
        sink_release(s);
        cr_fail(err, COURIER_E_STORE, "cannot open the log file '%.180s': %s", path, strerror(os));
        if (err) err->os_error = os;
        return COURIER_E_STORE;
    }
    s->size = (int64_t)st.st_size;
    if (rotation == COURIER_LOG_ROTATE_DAILY) {
        s->daily = 1;
        s->clock = cr_callback_retain(cr_core(e)->clock);
        s->day = (s->size > 0 ? (int64_t)st.st_mtime * 1000 : sink_now_ms(s)) / DAY_MS;
    }
    /* Files beyond max_files left by an earlier run with a larger count. */
    for (int n = max_files; n < max_files + 64; n++) {
        char *p = numbered(path, n);
        int gone = !p || (unlink(p) != 0 && errno == ENOENT);
        free(p);
        if (gone) break;
    }
    int rc = add_sink(e, s, out_sink);
    return rc ? cr_fail(err, rc, NULL) : COURIER_OK;
}

static int change_remove_sink(cr_obs_snap *s, struct cr_obs *o, void *arg) {
    (void)o;
    uint64_t id = *(uint64_t *)arg;
    for (size_t i = 0; i < s->nsinks; i++) {
        if (s->sinks[i]->id != id) continue;
        sink_release(s->sinks[i]);
        memmove(&s->sinks[i], &s->sinks[i + 1], (s->nsinks - i - 1) * sizeof *s->sinks);
        s->nsinks--;
        return COURIER_OK;
    }
    return COURIER_E_NOT_FOUND;
}

int courier_log_remove_sink(courier_engine *e, uint64_t sink) {
    if (!e) return COURIER_E_INVALID_ARGUMENT;
    if (!obs_of(e)) return COURIER_E_NOT_FOUND;
    return snap_change(e, change_remove_sink, &sink);
}

typedef struct monitor_arg {
    unsigned kinds;
    cr_callback *cb;
    uint64_t id;
} monitor_arg;

static int change_add_monitor(cr_obs_snap *s, struct cr_obs *o, void *arg) {
    monitor_arg *a = arg;
    a->id = o->next_id++;
    s->monitors[s->nmonitors].id = a->id;
    s->monitors[s->nmonitors].kinds = a->kinds;
    s->monitors[s->nmonitors].cb = cr_callback_retain(a->cb);
    s->nmonitors++;
    return COURIER_OK;
}

int courier_monitor_add(uint64_t *out_id, courier_engine *e, unsigned kinds, courier_monitor_fn fn,
                        void *user, courier_user_free_fn user_free) {
    if (out_id) *out_id = 0;
    if (!e || !fn) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    int rc;
    cr_callback *cb = cr_callback_new((void (*)(void))fn, user, user_free, &rc);
    if (!cb) return rc;
    monitor_arg a = {kinds ? kinds : ~0u, cb, 0};
    rc = snap_change(e, change_add_monitor, &a);
    cr_callback_release(cb);
    if (rc == COURIER_OK && out_id) *out_id = a.id;
    return rc;
}

static int change_remove_monitor(cr_obs_snap *s, struct cr_obs *o, void *arg) {
    (void)o;
    uint64_t id = *(uint64_t *)arg;
    for (size_t i = 0; i < s->nmonitors; i++) {
        if (s->monitors[i].id != id) continue;
        cr_callback_release(s->monitors[i].cb);
        memmove(&s->monitors[i], &s->monitors[i + 1], (s->nmonitors - i - 1) * sizeof *s->monitors);
        s->nmonitors--;
        return COURIER_OK;
    }
    return COURIER_E_NOT_FOUND;
}

int courier_monitor_remove(courier_engine *e, uint64_t id) {
    if (!e) return COURIER_E_INVALID_ARGUMENT;
    if (!obs_of(e)) return COURIER_E_NOT_FOUND;
    return snap_change(e, change_remove_monitor, &id);
}

/* ---- URLs in log lines ---------------------------------------------------------------------------- */

static bool secret_name(const cr_obs_snap *s, const char *name, size_t len) {
    static const char *const parts[] = {"token", "secret", "passw", "pwd", "key", "auth", "signature", "session",
                                        "credential"};
    static const char *const exact[] = {"sig", "code", "sid", "otp"};
    char low[64];
    if (len >= sizeof low) len = sizeof low - 1;
    for (size_t i = 0; i < len; i++) low[i] = (char)((name[i] >= 'A' && name[i] <= 'Z') ? name[i] + 32 : name[i]);
    low[len] = '\0';
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (strstr(low, parts[i])) return true;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcmp(low, exact[i]) == 0) return true;
    for (size_t i = 0; i < s->redact.count; i++)
        if (strlen(s->redact.items[i].name) == len && strncasecmp(s->redact.items[i].name, name, len) == 0) return true;
    return false;
}

/* Appends url with user information and (per the redaction mode) query values replaced by "***". */
static int redact_url(cr_buf *out, const cr_obs_snap *s, const char *url) {
    const char *p = url;
    size_t scheme = cr_url_scheme_len(url);
    if (scheme) {
        const char *host = url + scheme;
        size_t auth_len = strcspn(host, "/?#");
        const char *at = memchr(host, '@', auth_len);
        if (cr_buf_append(out, url, (size_t)(host - url))) return COURIER_E_NO_MEMORY;
        if (at) {
            if (cr_buf_append_str(out, "***@")) return COURIER_E_NO_MEMORY;
            p = at + 1;
        } else {
            p = host;
        }
    }
    size_t before_query = strcspn(p, "?#");
    if (cr_buf_append(out, p, before_query)) return COURIER_E_NO_MEMORY;
    p += before_query;
    if (*p != '?') return cr_buf_append_str(out, p);
    if (cr_buf_append_char(out, '?')) return COURIER_E_NO_MEMORY;
    p++;
    size_t qlen = strcspn(p, "#");
    const char *qend = p + qlen;
    while (p < qend) {
        size_t plen = strcspn(p, "&");
        if (p + plen > qend) plen = (size_t)(qend - p);
        const char *eq = memchr(p, '=', plen);
        size_t nlen = eq ? (size_t)(eq - p) : plen;
        bool hide = eq && (s->redaction == COURIER_LOG_REDACT_QUERY ||
                           (s->redaction == COURIER_LOG_REDACT_SECRETS && secret_name(s, p, nlen)));
        if (hide ? (cr_buf_append(out, p, nlen + 1) || cr_buf_append_str(out, "***")) : cr_buf_append(out, p, plen))
            return COURIER_E_NO_MEMORY;
        p += plen;
        if (p < qend && *p == '&') {
            if (cr_buf_append_char(out, '&')) return COURIER_E_NO_MEMORY;
            p++;
        }
    }
    return cr_buf_append_str(out, qend);
}

/* ---- lines ------------------------------------------------------------------------------------------ */

/* A JSON string from bytes that may not be UTF-8 (invalid bytes become '?'). */
static json_t *jstr(const char *s) {
    size_t len = strlen(s);
    if (cr_utf8_valid(s, len)) return json_stringn(s, len);
    char *copy = cr_strndup(s, len);
    if (!copy) return NULL;
    size_t i = 0;
    while (i < len) {
        size_t n = 1;
        while (n <= 4 && i + n <= len && !cr_utf8_valid(copy + i, n)) n++;
        if (n > 4 || i + n > len) {
            copy[i++] = '?';
        } else {
            i += n;
        }
    }
    json_t *j = json_stringn(copy, len);
    free(copy);
    return j;
}

static void set_str(json_t *o, const char *key, const char *v) {
    if (v) json_object_set_new(o, key, jstr(v));
}

static void set_int(json_t *o, const char *key, int64_t v) { json_object_set_new(o, key, json_integer(v)); }

static void put_time(json_t *o) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char buf[40];
    size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, sizeof buf - n, ".%03dZ", (int)(ts.tv_nsec / 1000000));
    set_str(o, "time", buf);
}

static void sink_write_file(cr_sink *s, const char *line, size_t len) {
    pthread_mutex_lock(&s->lock);
    bool new_day = false;
    if (s->daily) {
        int64_t day = sink_now_ms(s) / DAY_MS;
        new_day = day != s->day && s->size > 0;
        if (s->size == 0 || new_day) s->day = day;
    }
    if (new_day || (s->max_bytes > 0 && s->size > 0 && s->size + (int64_t)len > s->max_bytes)) {
        if (s->fd >= 0) close(s->fd);
        s->fd = -1;
        if (s->max_files == 1) {
            s->fd = open(s->path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
        } else {
            char *last = numbered(s->path, s->max_files - 1);
            if (last) unlink(last);
            free(last);
            for (int n = s->max_files - 2; n >= 1; n--) {
                char *from = numbered(s->path, n), *to = numbered(s->path, n + 1);
                if (from && to) rename(from, to);
                free(from);
                free(to);
            }
            char *first = numbered(s->path, 1);
            if (first) rename(s->path, first);
            free(first);
            s->fd = open_log(s->path);
        }
        s->size = 0;
    }
    if (s->fd < 0) { /* reopening failed earlier: try again, the directory may be back */
        s->fd = open_log(s->path);
        struct stat st;
        s->size = s->fd >= 0 && fstat(s->fd, &st) == 0 ? (int64_t)st.st_size : 0;
    }
    size_t done = 0;
    while (s->fd >= 0 && done < len) {
        ssize_t w = write(s->fd, line + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    s->size += (int64_t)done;
    pthread_mutex_unlock(&s->lock);
}

/* Writes `o` to every sink that wants `level`. `o` is consumed. */
static void write_line(cr_obs_snap *s, int level, json_t *o) {
    for (size_t i = 0; i < s->fields.count; i++)
        json_object_set_new(o, s->fields.items[i].name, jstr(s->fields.items[i].value));
    char *text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
    json_decref(o);
    if (!text) return;
    size_t len = strlen(text);
    /* The same bytes with a newline, for the stream sinks. */
    char *nl = malloc(len + 2);
    if (nl) {
        memcpy(nl, text, len);
        nl[len] = '\n';
        nl[len + 1] = '\0';
    }
    for (size_t i = 0; i < s->nsinks; i++) {
        cr_sink *k = s->sinks[i];
        if (level > k->min_level) continue;
        switch (k->kind) {
        case SINK_CALLBACK: ((courier_log_fn)k->cb->fn)(level, text, len, k->cb->user); break;
        case SINK_STDERR:
            if (nl) {
                ssize_t w = write(STDERR_FILENO, nl, len + 1);
                (void)w;
            }
            break;
        case SINK_FILE:
            if (nl) sink_write_file(k, nl, len + 1);
            break;
        }
    }
    free(nl);
    free(text);
}

/* A new line object with time, level, event and message (and the component's name when comp >= 0);
 * NULL on no memory. */
static json_t *line_new(int level, int comp, const char *event, const char *message) {
    json_t *o = json_object();
    if (!o) return NULL;
    put_time(o);
    set_str(o, "level", courier_log_level_name(level));
    set_str(o, "event", event ? event : "app");
    set_str(o, "message", message ? message : "");
    if (comp >= 0 && comp < CR_LOG_COMPONENTS) set_str(o, "component", component_names[comp]);
    return o;
}

/* Whether a line of `level` of component `comp` (-1: the engine's own) would reach a sink. */
static bool wants_line(struct cr_obs *o, const cr_obs_snap *s, int comp, int level) {
    const atomic_int *l = comp >= 0 && comp < CR_LOG_COMPONENTS ? &o->levels[comp] : &o->level;
    return level > COURIER_LOG_OFF && level <= atomic_load_explicit(l, memory_order_relaxed) &&
           level <= s->max_sink_level;
}

/* Lock-free (two atomic loads): called on hot paths (the cache's lookups) to skip building lines. */
bool cr_log_wants(courier_engine *e, int comp, int level) {
    struct cr_obs *o = e ? obs_of(e) : NULL;
    if (!o || !atomic_load_explicit(&o->active, memory_order_acquire)) return false;
    const atomic_int *l = comp >= 0 && comp < CR_LOG_COMPONENTS ? &o->levels[comp] : &o->level;
    return level > COURIER_LOG_OFF && level <= atomic_load_explicit(l, memory_order_relaxed) &&
           level <= atomic_load_explicit(&o->max_sink_level, memory_order_relaxed);
}

bool cr_log_enabled(courier_engine *e, int level) { return cr_log_wants(e, -1, level); }

static void log_text(courier_engine *e, int level, const char *event, const char *message) {
    struct cr_obs *o = obs_of(e);
    cr_obs_snap *s = snap_acquire(o);
    if (!s) return;
    if (wants_line(o, s, -1, level)) {
        json_t *j = line_new(level, -1, event, message);
        if (j) write_line(s, level, j);
    }
    snap_release(s);
}

void cr_log_fields(courier_engine *e, int comp, int level, const char *event, uint64_t request_id,
                   const char *message, const cr_logf *fields, size_t nfields) {
    struct cr_obs *o = e ? obs_of(e) : NULL;
    cr_obs_snap *s = snap_acquire(o);
    if (!s) return;
    json_t *j = wants_line(o, s, comp, level) ? line_new(level, comp, event, message) : NULL;
    if (j) {
        if (request_id) set_int(j, "request_id", (int64_t)request_id);
        for (size_t i = 0; i < nfields; i++) {
            const cr_logf *f = &fields[i];
            if (f->str) set_str(j, f->key, f->str);
            else if (f->is_bool) json_object_set_new(j, f->key, json_boolean(f->num));
            else set_int(j, f->key, f->num);
        }
        write_line(s, level, j);
    }
    snap_release(s);
}

void cr_log(courier_engine *e, int level, const char *event, const char *fmt, ...) {
    if (!e || !cr_log_enabled(e, level)) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_text(e, level, event, msg);
}

int courier_log_write(courier_engine *e, courier_log_level level, const char *event, const char *message) {
    if (!e || !message || (int)level <= COURIER_LOG_OFF || (int)level > COURIER_LOG_TRACE)
        return COURIER_E_INVALID_ARGUMENT;
    log_text(e, (int)level, event, message);
    return COURIER_OK;
}

/* ---- events ------------------------------------------------------------------------------------------- */

static int event_level(const courier_event *ev) {
    switch (ev->kind) {
    case COURIER_EVENT_WILL_SEND:
    case COURIER_EVENT_DID_SEND:
    case COURIER_EVENT_REDIRECTED:
    case COURIER_EVENT_FROM_CACHE: return COURIER_LOG_DEBUG;
    case COURIER_EVENT_PROGRESS: return COURIER_LOG_TRACE;
    case COURIER_EVENT_RETRIED:
    case COURIER_EVENT_FROZEN: return COURIER_LOG_WARNING;
    case COURIER_EVENT_FINISHED:
        if (ev->code == COURIER_OK || ev->code == COURIER_E_CANCELLED) return COURIER_LOG_INFO;
        return ev->response ? COURIER_LOG_WARNING : COURIER_LOG_ERROR;
    default: return COURIER_LOG_INFO;
    }
}

/* The component an event's line belongs to. */
static int event_component(const courier_event *ev) {
    switch (ev->kind) {
    case COURIER_EVENT_FROM_CACHE: return COURIER_LOG_CACHE;
    case COURIER_EVENT_RETRIED: return COURIER_LOG_SCHEDULING;
    case COURIER_EVENT_FROZEN: return COURIER_LOG_JOURNAL;
    case COURIER_EVENT_FINISHED:
        switch (ev->code) {
        case COURIER_E_JSON:
        case COURIER_E_MAPPING:
        case COURIER_E_API:
        case COURIER_E_INVALID_RESULT: return COURIER_LOG_MAPPING;
        case COURIER_E_TOO_FREQUENT: return COURIER_LOG_SCHEDULING;
        default: return COURIER_LOG_TRANSPORT;
        }
    default: return COURIER_LOG_TRANSPORT;
    }
}

static void event_line(cr_obs_snap *s, int level, const courier_event *ev, int cache_reason) {
    cr_buf url = {0};
    if (ev->url && redact_url(&url, s, ev->url)) {
        cr_buf_free(&url);
        return;
    }
    cr_buf msg = {0};
    int rc = cr_buf_append_str(&msg, ev->method ? ev->method : "?");
    rc |= cr_buf_append_char(&msg, ' ');
    rc |= cr_buf_append_str(&msg, url.data ? url.data : "?");
    char tail[160] = "";
    switch (ev->kind) {
    case COURIER_EVENT_WILL_SEND: snprintf(tail, sizeof tail, " will send"); break;
    case COURIER_EVENT_DID_SEND: snprintf(tail, sizeof tail, " sent"); break;
    case COURIER_EVENT_PROGRESS:
        snprintf(tail, sizeof tail, " %lld bytes received, %lld sent", (long long)ev->bytes_received,
                 (long long)ev->bytes_sent);
        break;
    case COURIER_EVENT_FROM_CACHE: snprintf(tail, sizeof tail, " from the cache"); break;
    case COURIER_EVENT_RETRIED:
        snprintf(tail, sizeof tail, " failed (%s), attempt %d in %ld ms", courier_strerror(ev->code), ev->attempt,
                 ev->delay_ms);
        break;
    case COURIER_EVENT_FROZEN: snprintf(tail, sizeof tail, " frozen until online"); break;
    case COURIER_EVENT_REDIRECTED: snprintf(tail, sizeof tail, " after a %d (redirect %d)", ev->http_status, ev->attempt); break;
    case COURIER_EVENT_FINISHED:
        if (ev->http_status) snprintf(tail, sizeof tail, " -> %d", ev->http_status);
        if (ev->code != COURIER_OK)
            snprintf(tail + strlen(tail), sizeof tail - strlen(tail), "%s%s", ev->http_status ? ", " : " -> ",
                     courier_strerror(ev->code));
        snprintf(tail + strlen(tail), sizeof tail - strlen(tail), " (%.1f ms)", ev->duration_s * 1000.0);
        if (ev->response && cache_reason)
            snprintf(tail + strlen(tail), sizeof tail - strlen(tail), " cache: %s",
                     courier_cache_reason_name(cache_reason));
        break;
    default: break;
    }
    rc |= cr_buf_append_str(&msg, tail);
    json_t *o = rc ? NULL : line_new(level, event_component(ev), courier_event_kind_name(ev->kind), msg.data);
    cr_buf_free(&msg);
    if (!o) {
        cr_buf_free(&url);
        return;
    }
    if (ev->request_id) set_int(o, "request_id", (int64_t)ev->request_id);
    set_str(o, "method", ev->method);
    set_str(o, "url", url.data);
    cr_buf_free(&url);
    if (ev->http_status) set_int(o, "status", ev->http_status);
    if (ev->kind == COURIER_EVENT_FINISHED || ev->kind == COURIER_EVENT_RETRIED) {
        set_int(o, "code", ev->code);
        if (ev->code != COURIER_OK)
            set_str(o, "error", ev->error && ev->error->message[0] ? ev->error->message : courier_strerror(ev->code));
    }
    if ((ev->kind == COURIER_EVENT_FINISHED || ev->kind == COURIER_EVENT_FROM_CACHE) && ev->response && cache_reason)
        set_str(o, "cache", courier_cache_reason_name(cache_reason));
    if (ev->kind == COURIER_EVENT_FINISHED && ev->duration_s > 0)
        json_object_set_new(o, "duration_ms", json_real(ev->duration_s * 1000.0));
    if (ev->kind == COURIER_EVENT_RETRIED) {
        set_int(o, "attempt", ev->attempt);
        set_int(o, "delay_ms", ev->delay_ms);
    }
    if (ev->kind == COURIER_EVENT_PROGRESS) {
        set_int(o, "bytes_received", ev->bytes_received);
        set_int(o, "bytes_expected", ev->bytes_expected);
        set_int(o, "bytes_sent", ev->bytes_sent);
        set_int(o, "bytes_to_send", ev->bytes_to_send);
    }
    write_line(s, level, o);
}

void cr_event_emit(courier_engine *e, const courier_event *ev) { cr_event_emit_reason(e, ev, 0); }

void cr_event_emit_reason(courier_engine *e, const courier_event *ev, int cache_reason) {
    struct cr_obs *o = e ? obs_of(e) : NULL;
    cr_obs_snap *s = snap_acquire(o);
    if (!s) return;
    if (ev->kind > 0 && ev->kind < 32 && (s->kinds & (1u << ev->kind))) {
        for (size_t i = 0; i < s->nmonitors; i++)
            if (s->monitors[i].kinds & (1u << ev->kind))
                ((courier_monitor_fn)s->monitors[i].cb->fn)(ev, s->monitors[i].cb->user);
    }
    int level = event_level(ev);
    if (wants_line(o, s, event_component(ev), level)) event_line(s, level, ev, cache_reason);
    snap_release(s);
}

int64_t cr_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool cr_event_listening(courier_engine *e) {
    struct cr_obs *o = obs_of(e);
    return o && atomic_load_explicit(&o->active, memory_order_acquire);
}

bool cr_event_wants(courier_engine *e, int kind) {
    struct cr_obs *o = e ? obs_of(e) : NULL;
    cr_obs_snap *s = snap_acquire(o);
    if (!s) return false;
    courier_event probe;
    memset(&probe, 0, sizeof probe);
    probe.kind = kind;
    int level = event_level(&probe);
    bool yes = (kind > 0 && kind < 32 && (s->kinds & (1u << kind))) || wants_line(o, s, event_component(&probe), level);
    /* A finished line may belong to the mapping or scheduling component, by its code. */
    if (!yes && kind == COURIER_EVENT_FINISHED)
        yes = wants_line(o, s, COURIER_LOG_MAPPING, COURIER_LOG_ERROR) ||
              wants_line(o, s, COURIER_LOG_SCHEDULING, COURIER_LOG_ERROR);
    snap_release(s);
    return yes;
}

/* The hooks of a transfer's lifecycle (will send, sent, progress, from the cache, retried, finished)
 * read the transfer and are http's (http/lifecycle.c); the frozen event has no transfer. */
void cr_event_frozen(courier_engine *e, uint64_t request_id, const char *method, const char *url) {
    if (!cr_event_listening(e)) return;
    courier_event ev;
    memset(&ev, 0, sizeof ev);
    ev.size = sizeof ev;
    ev.kind = COURIER_EVENT_FROZEN;
    ev.request_id = request_id;
    ev.method = method;
    ev.url = url;
    cr_event_emit(e, &ev);
}

/* ---- names (what logs, events and the Cache-Status field print) ------------------------------------ */

const char *courier_cache_reason_name(int reason) {
    static const char *const names[] = {
        "none",           "miss",           "fresh",          "stale-while-revalidate", "stale-if-error",
        "revalidated",    "stale-refetched", "vary-miss",     "only-if-cached",         "not-stored-no-store",
        "not-stored-status", "not-stored-private", "not-stored-authorization", "not-stored-vary",
        "not-stored-too-large", "not-stored-no-freshness", "not-stored-method", "invalidated",
        "stale-accepted", "updated-stored", "not-stored-policy"};
    return reason >= 0 && (size_t)reason < sizeof names / sizeof names[0] ? names[reason] : "unknown";
}
