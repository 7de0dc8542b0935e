/*
 * log_test.c — logging and event monitors over the loopback server: level filtering (engine and
 * sink), every line a JSON object with the documented keys (parsed with the library's JSON
 * parser, jansson underneath), URL redaction, engine fields, the callback, stderr and file sinks,
 * file rotation (at most N files of at most the size), the lifecycle events in order with their
 * values, kind masks, removal and user_free.
 */
#include "harness.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log_lines.h"

/* ---- sending --------------------------------------------------------------------------------- */

typedef struct done_rec {
    atomic_int calls;
    atomic_int seq_at_done; /* the monitor's event count when the completion ran */
    uint64_t id;
} done_rec;

static atomic_int monitor_seq;

static void on_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id; (void)code; (void)err;
    done_rec *d = user;
    atomic_store(&d->seq_at_done, atomic_load(&monitor_seq));
    courier_response_free(resp);
    atomic_fetch_add(&d->calls, 1);
}

/* Sends and waits for the completion; returns the id. */
static uint64_t send_wait(courier_engine *e, const char *method, const char *target) {
    courier_request *r = NULL;
    courier_request_new(&r, method, target);
    done_rec d;
    atomic_init(&d.calls, 0);
    atomic_init(&d.seq_at_done, 0);
    uint64_t id = 0;
    int rc = courier_send(&id, e, r, on_done, &d, NULL);
    courier_request_free(r);
    if (rc != COURIER_OK) return 0;
    int64_t deadline = th_now_ms() + 20000;
    while (atomic_load(&d.calls) == 0 && th_now_ms() < deadline) usleep(1000);
    return id;
}

/* ---- levels and lines ------------------------------------------------------------------------ */

static void levels_filter_lines(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    lines l;
    lines_init(&l);
    CHECK_EQ(courier_log_get_level(e), COURIER_LOG_INFO);
    uint64_t sink = 0;
    CHECK_EQ(courier_log_add_callback(&sink, e, COURIER_LOG_TRACE, on_line, &l, lines_free_user), COURIER_OK);
    CHECK(sink != 0);
    CHECK_EQ(courier_log_set_level(e, COURIER_LOG_WARNING), COURIER_OK);
    send_wait(e, "GET", "/echo/fine");
    uint64_t bad = send_wait(e, "GET", "/status/500");
    CHECK_EQ(lines_count(&l), 1); /* only the failure: warning */
    courier_json *doc = find_line(&l, "finished", bad);
    REQUIRE(doc);
    CHECK_STR(jstr(doc, "level"), "warning");
    CHECK_EQ(courier_json_integer(courier_json_get(doc, "status")), 500);
    CHECK_EQ(courier_json_integer(courier_json_get(doc, "code")), COURIER_E_HTTP_STATUS);
    courier_json_free(doc);

    lines_clear(&l);
    CHECK_EQ(courier_log_set_level(e, COURIER_LOG_INFO), COURIER_OK);
    uint64_t ok = send_wait(e, "GET", "/echo/info");
    CHECK_EQ(lines_count(&l), 1); /* finished at info; will_send and did_send are debug */
    doc = find_line(&l, "finished", ok);
    REQUIRE(doc);
    CHECK_STR(jstr(doc, "level"), "info");
    courier_json_free(doc);

    lines_clear(&l);
    CHECK_EQ(courier_log_set_level(e, COURIER_LOG_DEBUG), COURIER_OK);
    uint64_t dbg = send_wait(e, "GET", "/echo/debug");
    CHECK_EQ(lines_count(&l), 3);
    doc = find_line(&l, "will_send", dbg);
    CHECK_STR(jstr(doc, "level"), "debug");
    courier_json_free(doc);
    doc = find_line(&l, "did_send", dbg);
    CHECK(doc != NULL);
    courier_json_free(doc);

    lines_clear(&l);
    CHECK_EQ(courier_log_set_level(e, COURIER_LOG_OFF), COURIER_OK);
    send_wait(e, "GET", "/status/500");
    CHECK_EQ(courier_log_write(e, COURIER_LOG_ERROR, "app", "nothing"), COURIER_OK);
    CHECK_EQ(lines_count(&l), 0);

    CHECK_EQ(courier_log_set_level(e, (courier_log_level)9), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_log_set_level(NULL, COURIER_LOG_INFO), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_log_remove_sink(e, sink), COURIER_OK);
    CHECK_EQ(courier_log_remove_sink(e, sink), COURIER_E_NOT_FOUND);
    CHECK_EQ(l.frees, 1); /* removed, and no line in progress: released at once */
    courier_engine_close(e);
    lines_clear(&l);
}

static void sink_levels_filter_too(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    lines errors, infos;
    lines_init(&errors);
    lines_init(&infos);
    courier_log_set_level(e, COURIER_LOG_TRACE);
    CHECK_EQ(courier_log_add_callback(NULL, e, COURIER_LOG_ERROR, on_line, &errors, NULL), COURIER_OK);
    CHECK_EQ(courier_log_add_callback(NULL, e, COURIER_LOG_INFO, on_line, &infos, NULL), COURIER_OK);
    courier_log_write(e, COURIER_LOG_ERROR, "test", "e");
    courier_log_write(e, COURIER_LOG_WARNING, "test", "w");
    courier_log_write(e, COURIER_LOG_INFO, "test", "i");
    courier_log_write(e, COURIER_LOG_DEBUG, "test", "d");
    courier_log_write(e, COURIER_LOG_TRACE, "test", "t");
    CHECK_EQ(lines_count(&errors), 1);
    CHECK_EQ(lines_count(&infos), 3);
    CHECK_EQ(errors.level[0], COURIER_LOG_ERROR);
    CHECK_EQ(infos.level[2], COURIER_LOG_INFO);
    CHECK_EQ(courier_log_write(e, COURIER_LOG_OFF, "x", "y"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_log_write(e, COURIER_LOG_INFO, "x", NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_STR(courier_log_level_name(COURIER_LOG_WARNING), "warning");
    CHECK_STR(courier_log_level_name(42), "unknown");
    courier_engine_close(e);
    lines_clear(&errors);
    lines_clear(&infos);
}

static void lines_are_json_objects_with_the_keys(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    lines l;
    lines_init(&l);
    courier_log_set_level(e, COURIER_LOG_TRACE);
    courier_log_add_callback(NULL, e, COURIER_LOG_TRACE, on_line, &l, NULL);
    CHECK_EQ(courier_log_set_field(e, "app", "demo"), COURIER_OK);
    CHECK_EQ(courier_log_set_field(e, "build", "1.2"), COURIER_OK);
    CHECK_EQ(courier_log_set_field(e, "build", NULL), COURIER_OK); /* removed */
    CHECK_EQ(courier_log_set_field(e, "level", "x"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_log_set_field(e, "", "x"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_log_set_field(e, "bad", "\xff"), COURIER_E_INVALID_ENCODING);
    uint64_t id = send_wait(e, "POST", "/echo/json?a=1");
    CHECK(lines_count(&l) >= 3);
    /* Every line parses, alone, as one JSON object with time, level, event, message, app. */
    for (int i = 0; i < lines_count(&l); i++) {
        courier_json *doc = NULL;
        CHECK_EQ(courier_json_parse(&doc, l.text[i], strlen(l.text[i]), NULL, NULL), COURIER_OK);
        CHECK_EQ(courier_json_typeof(doc), COURIER_JSON_OBJECT);
        CHECK(strchr(l.text[i], '\n') == NULL);
        const char *t = jstr(doc, "time");
        CHECK(t && strlen(t) == 24 && t[10] == 'T' && t[23] == 'Z');
        CHECK(jstr(doc, "level") != NULL);
        CHECK(jstr(doc, "event") != NULL);
        CHECK(jstr(doc, "message") != NULL);
        CHECK_STR(jstr(doc, "app"), "demo");
        CHECK(courier_json_get(doc, "build") == NULL);
        courier_json_free(doc);
    }
    courier_json *doc = find_line(&l, "finished", id);
    REQUIRE(doc);
    CHECK_EQ(courier_json_integer(courier_json_get(doc, "request_id")), (int64_t)id);
    CHECK_STR(jstr(doc, "method"), "POST");
    CHECK_STR(jstr(doc, "url"), th_url("/echo/json?a=1"));
    CHECK_EQ(courier_json_integer(courier_json_get(doc, "status")), 200);
    CHECK_EQ(courier_json_integer(courier_json_get(doc, "code")), 0);
    int dt = courier_json_typeof(courier_json_get(doc, "duration_ms"));
    CHECK(dt == COURIER_JSON_REAL || dt == COURIER_JSON_INTEGER);
    CHECK(courier_json_real(courier_json_get(doc, "duration_ms")) >= 0);
    CHECK(courier_json_get(doc, "error") == NULL);
    courier_json_free(doc);

    /* A failure carries its error text; a message of the caller's own is escaped properly. */
    lines_clear(&l);
    courier_log_write(e, COURIER_LOG_INFO, "custom", "quote \" backslash \\ newline \n tab \t bad \xc3");
    REQUIRE(lines_count(&l) == 1);
    doc = NULL;
    CHECK_EQ(courier_json_parse(&doc, l.text[0], strlen(l.text[0]), NULL, NULL), COURIER_OK);
    CHECK_STR(jstr(doc, "event"), "custom");
    CHECK_STR(jstr(doc, "message"), "quote \" backslash \\ newline \n tab \t bad ?");
    courier_json_free(doc);
    courier_engine_close(e);
    lines_clear(&l);
}

static void urls_are_redacted(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    lines l;
    lines_init(&l);
    courier_log_add_callback(NULL, e, COURIER_LOG_INFO, on_line, &l, NULL);
    uint64_t id = send_wait(e, "GET", "/echo/r?access_token=abc&x=1&API_KEY=k&code=c&zip=9");
    courier_json *doc = find_line(&l, "finished", id);
    REQUIRE(doc);
    CHECK_STR(jstr(doc, "url"), th_url("/echo/r?access_token=***&x=1&API_KEY=***&code=***&zip=9"));
    CHECK(strstr(jstr(doc, "message"), "abc") == NULL);
    courier_json_free(doc);

    CHECK_EQ(courier_log_redact_param(e, "zip"), COURIER_OK);
    id = send_wait(e, "GET", "/echo/r?zip=9&zipper=1");
    doc = find_line(&l, "finished", id);
    REQUIRE(doc);
    CHECK_STR(jstr(doc, "url"), th_url("/echo/r?zip=***&zipper=1"));
    courier_json_free(doc);

    CHECK_EQ(courier_log_set_redaction(e, COURIER_LOG_REDACT_QUERY), COURIER_OK);
    id = send_wait(e, "GET", "/echo/r?a=1&b&c=3#frag");
    doc = find_line(&l, "finished", id);
    REQUIRE(doc);
    CHECK_STR(jstr(doc, "url"), th_url("/echo/r?a=***&b&c=***#frag"));
    courier_json_free(doc);

    CHECK_EQ(courier_log_set_redaction(e, COURIER_LOG_REDACT_NONE), COURIER_OK);
    char target[256];
    snprintf(target, sizeof target, "http://user:pw@127.0.0.1:%d/echo/r?token=t", cts_server_port(th_server()));
    id = send_wait(e, "GET", target);
    doc = find_line(&l, "finished", id);
    REQUIRE(doc);
    char want[256];
    snprintf(want, sizeof want, "http://***@127.0.0.1:%d/echo/r?token=t", cts_server_port(th_server()));
    CHECK_STR(jstr(doc, "url"), want);
    courier_json_free(doc);
    CHECK_EQ(courier_log_set_redaction(e, (courier_log_redaction)5), COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);
    lines_clear(&l);
}

/* ---- sinks ----------------------------------------------------------------------------------- */

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    fclose(f);
    if (len) *len = got;
    return buf;
}

static int64_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* Checks that every line of the file is a complete JSON object; returns the number of lines and
 * the largest "n" field seen (the writes are numbered). */
static int check_lines(const char *path, long *max_n) {
    size_t len = 0;
    char *text = read_file(path, &len);
    if (!text) return -1;
    int count = 0;
    CHECK(len == 0 || text[len - 1] == '\n');
    for (char *p = text; *p;) {
        char *nl = strchr(p, '\n');
        if (!nl) break;
        courier_json *doc = NULL;
        CHECK_EQ(courier_json_parse(&doc, p, (size_t)(nl - p), NULL, NULL), COURIER_OK);
        const char *msg = jstr(doc, "message");
        long n = msg ? strtol(msg + 5, NULL, 10) : -1; /* "line N ..." */
        if (max_n && n > *max_n) *max_n = n;
        courier_json_free(doc);
        count++;
        p = nl + 1;
    }
    free(text);
    return count;
}

static void file_sink_rotates(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    char path[512], p1[520], p2[520], p3[520];
    snprintf(path, sizeof path, "%s/courier.log", th_tmpdir());
    snprintf(p1, sizeof p1, "%s.1", path);
    snprintf(p2, sizeof p2, "%s.2", path);
    snprintf(p3, sizeof p3, "%s.3", path);
    /* A file left by an earlier run with more files is removed. */
    FILE *old = fopen(p3, "w");
    REQUIRE(old);
    fputs("old\n", old);
    fclose(old);
    courier_error err;
    uint64_t sink = 0;
    CHECK_EQ(courier_log_add_file(&sink, e, COURIER_LOG_INFO, path, 1000, 3, &err), COURIER_OK);
    CHECK(sink != 0);
    CHECK_EQ(file_size(p3), -1);
    int written = 0;
    for (int i = 1; i <= 60; i++) {
        char msg[128];
        snprintf(msg, sizeof msg, "line %d of the rotation test, padded to a fair length", i);
        CHECK_EQ(courier_log_write(e, COURIER_LOG_INFO, "rotation", msg), COURIER_OK);
        written++;
    }
    CHECK_EQ(courier_log_write(e, COURIER_LOG_DEBUG, "rotation", "line 999 below the sink's level"), COURIER_OK);
    CHECK_EQ(courier_log_remove_sink(e, sink), COURIER_OK); /* closes the file */
    /* At most three files, each at most 1000 bytes, each line whole, the newest in PATH. */
    CHECK(file_size(path) > 0 && file_size(path) <= 1000);
    CHECK(file_size(p1) > 0 && file_size(p1) <= 1000);
    CHECK(file_size(p2) > 0 && file_size(p2) <= 1000);
    CHECK_EQ(file_size(p3), -1);
    long newest = 0, mid = 0, oldest = 0;
    int n0 = check_lines(path, &newest), n1 = check_lines(p1, &mid), n2 = check_lines(p2, &oldest);
    CHECK(n0 > 0 && n1 > 0 && n2 > 0);
    CHECK_EQ(newest, written);
    CHECK(mid < newest && oldest < mid);
    CHECK(n0 + n1 + n2 < written); /* the oldest lines were rotated away */

    /* Appends to an existing file; a single file is truncated when full. */
    char single[512];
    snprintf(single, sizeof single, "%s/one.log", th_tmpdir());
    CHECK_EQ(courier_log_add_file(&sink, e, COURIER_LOG_INFO, single, 400, 1, &err), COURIER_OK);
    for (int i = 1; i <= 20; i++) {
        char msg[64];
        snprintf(msg, sizeof msg, "line %d", i);
        courier_log_write(e, COURIER_LOG_INFO, "single", msg);
    }
    courier_log_remove_sink(e, sink);
    CHECK(file_size(single) > 0 && file_size(single) <= 400);
    long last = 0;
    CHECK(check_lines(single, &last) > 0);
    CHECK_EQ(last, 20);
    char single1[520];
    snprintf(single1, sizeof single1, "%s.1", single);
    CHECK_EQ(file_size(single1), -1);

    /* Errors. */
    CHECK_EQ(courier_log_add_file(NULL, e, COURIER_LOG_INFO, "/nonexistent-dir/x.log", 100, 2, &err), COURIER_E_STORE);
    CHECK(err.os_error != 0);
    /* A refused argument is named in the message (issue 28): the bindings pass it through. */
    CHECK_EQ(courier_log_add_file(NULL, e, COURIER_LOG_INFO, path, 100, 0, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK(strncmp(err.message, "max_files:", 10) == 0);
    CHECK_EQ(courier_log_add_file(NULL, e, COURIER_LOG_INFO, path, -1, 2, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK(strncmp(err.message, "max_bytes:", 10) == 0);
    CHECK_EQ(courier_log_add_file(NULL, e, (courier_log_level)9, path, 100, 2, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK(strncmp(err.message, "min_level:", 10) == 0);
    CHECK_EQ(courier_log_add_file(NULL, e, COURIER_LOG_INFO, "", 100, 2, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK(strncmp(err.message, "path:", 5) == 0);
    courier_engine_close(e);
}

/* Request lines from several threads at once into one rotating file stay whole. */
static void file_sink_under_load(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    char path[512];
    snprintf(path, sizeof path, "%s/load.log", th_tmpdir());
    courier_log_set_level(e, COURIER_LOG_DEBUG);
    CHECK_EQ(courier_log_add_file(NULL, e, COURIER_LOG_DEBUG, path, 4096, 4, NULL), COURIER_OK);
    for (int i = 0; i < 30; i++) {
        char target[64];
        snprintf(target, sizeof target, "/echo/load?i=%d", i);
        send_wait(e, "GET", target);
    }
    courier_engine_close(e); /* closes the file */
    int total = 0;
    for (int k = 0; k < 4; k++) {
        char p[530];
        if (k) snprintf(p, sizeof p, "%s.%d", path, k);
        else snprintf(p, sizeof p, "%s", path);
        CHECK(file_size(p) <= 4096);
        int n = check_lines(p, NULL);
        if (n > 0) total += n;
    }
    CHECK(total > 0);
    char p4[530];
    snprintf(p4, sizeof p4, "%s.4", path);
    CHECK_EQ(file_size(p4), -1);
}

static void stderr_sink_writes_lines(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    char path[512];
    snprintf(path, sizeof path, "%s/stderr.txt", th_tmpdir());
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(saved >= 0 && fd >= 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
    uint64_t sink = 0;
    int rc = courier_log_add_stderr(&sink, e, COURIER_LOG_WARNING);
    courier_log_write(e, COURIER_LOG_WARNING, "stderr", "line 1 to stderr");
    courier_log_write(e, COURIER_LOG_INFO, "stderr", "line 2 filtered");
    courier_log_remove_sink(e, sink);
    courier_log_write(e, COURIER_LOG_WARNING, "stderr", "line 3 after removal");
    dup2(saved, STDERR_FILENO);
    close(saved);
    CHECK_EQ(rc, COURIER_OK);
    long last = 0;
    CHECK_EQ(check_lines(path, &last), 1);
    CHECK_EQ(last, 1);
    courier_engine_close(e);
}

static void callback_sink_user_free_at_close(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    lines l;
    lines_init(&l);
    CHECK_EQ(courier_log_add_callback(NULL, e, COURIER_LOG_INFO, on_line, &l, lines_free_user), COURIER_OK);
    CHECK_EQ(courier_log_add_callback(NULL, e, (courier_log_level)8, on_line, &l, lines_free_user),
             COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(l.frees, 1); /* the refused registration released its user at once */
    CHECK_EQ(courier_log_add_callback(NULL, e, COURIER_LOG_INFO, NULL, &l, lines_free_user), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(l.frees, 2);
    courier_engine_close(e);
    CHECK_EQ(l.frees, 3);
}

/* ---- monitors -------------------------------------------------------------------------------- */

#define MAX_EVENTS 64

typedef struct events {
    pthread_mutex_t m;
    int n;
    int kind[MAX_EVENTS];
    uint64_t id[MAX_EVENTS];
    int code[MAX_EVENTS];
    int status[MAX_EVENTS];
    int has_response[MAX_EVENTS];
    int has_error[MAX_EVENTS];
    size_t size[MAX_EVENTS];
    double duration[MAX_EVENTS];
    char url[MAX_EVENTS][160];
    char method[MAX_EVENTS][16];
    int frees;
} events;

static void events_init(events *v) {
    memset(v, 0, sizeof *v);
    pthread_mutex_init(&v->m, NULL);
}

static void on_event(const courier_event *ev, void *user) {
    events *v = user;
    atomic_fetch_add(&monitor_seq, 1);
    pthread_mutex_lock(&v->m);
    if (v->n < MAX_EVENTS) {
        int i = v->n++;
        v->kind[i] = ev->kind;
        v->id[i] = ev->request_id;
        v->code[i] = ev->code;
        v->status[i] = ev->http_status;
        v->has_response[i] = ev->response != NULL;
        v->has_error[i] = ev->error != NULL;
        v->size[i] = ev->size;
        v->duration[i] = ev->duration_s;
        snprintf(v->url[i], sizeof v->url[i], "%s", ev->url ? ev->url : "");
        snprintf(v->method[i], sizeof v->method[i], "%s", ev->method ? ev->method : "");
    }
    pthread_mutex_unlock(&v->m);
}

static void events_free_user(void *user) {
    events *v = user;
    pthread_mutex_lock(&v->m);
    v->frees++;
    pthread_mutex_unlock(&v->m);
}

/* The lifecycle events of one request, in order; PROGRESS events (as many as the transfer's pace
 * gives) are left out and counted apart by progress_of. */
static int events_of(events *v, uint64_t id, int *kinds, int max) {
    pthread_mutex_lock(&v->m);
    int k = 0;
    for (int i = 0; i < v->n; i++)
        if (v->id[i] == id && v->kind[i] != COURIER_EVENT_PROGRESS && k < max) kinds[k++] = v->kind[i];
    pthread_mutex_unlock(&v->m);
    return k;
}

static int progress_of(events *v, uint64_t id) {
    pthread_mutex_lock(&v->m);
    int k = 0;
    for (int i = 0; i < v->n; i++)
        if (v->id[i] == id && v->kind[i] == COURIER_EVENT_PROGRESS) k++;
    pthread_mutex_unlock(&v->m);
    return k;
}

static int index_of(events *v, uint64_t id, int kind) {
    pthread_mutex_lock(&v->m);
    int found = -1;
    for (int i = 0; i < v->n && found < 0; i++)
        if (v->id[i] == id && v->kind[i] == kind) found = i;
    pthread_mutex_unlock(&v->m);
    return found;
}

static void monitor_sees_the_lifecycle(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    events v;
    events_init(&v);
    uint64_t mid = 0;
    CHECK_EQ(courier_monitor_add(&mid, e, 0, on_event, &v, events_free_user), COURIER_OK);
    CHECK(mid != 0);
    /* The monitor runs before the completion. */
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/echo/m?token=secret");
    done_rec d;
    atomic_init(&d.calls, 0);
    atomic_init(&d.seq_at_done, 0);
    atomic_store(&monitor_seq, 0);
    uint64_t id = 0;
    CHECK_EQ(courier_send(&id, e, r, on_done, &d, NULL), COURIER_OK);
    courier_request_free(r);
    int64_t deadline = th_now_ms() + 20000;
    while (atomic_load(&d.calls) == 0 && th_now_ms() < deadline) usleep(1000);
    int kinds[8];
    CHECK_EQ(events_of(&v, id, kinds, 8), 3);
    CHECK_EQ(kinds[0], COURIER_EVENT_WILL_SEND);
    CHECK_EQ(kinds[1], COURIER_EVENT_DID_SEND);
    CHECK_EQ(kinds[2], COURIER_EVENT_FINISHED);
    int progress = progress_of(&v, id);
    CHECK(progress >= 1); /* at least the final count of the attempt */
    CHECK_EQ(atomic_load(&d.seq_at_done), 3 + progress);
    int f = index_of(&v, id, COURIER_EVENT_FINISHED);
    REQUIRE(f >= 0);
    CHECK_EQ(v.code[f], COURIER_OK);
    CHECK_EQ(v.status[f], 200);
    CHECK(v.has_response[f]);
    CHECK(!v.has_error[f]);
    CHECK_EQ(v.size[f], sizeof(courier_event));
    CHECK(v.duration[f] > 0);
    CHECK_STR(v.url[f], th_url("/echo/m?token=secret")); /* monitors see the full URL */
    CHECK_STR(v.method[f], "GET");
    int w = index_of(&v, id, COURIER_EVENT_WILL_SEND);
    CHECK_STR(v.method[w], "GET");

    /* Failures and cancellations finish too. */
    uint64_t bad = send_wait(e, "GET", "/status/404");
    f = index_of(&v, bad, COURIER_EVENT_FINISHED);
    REQUIRE(f >= 0);
    CHECK_EQ(v.code[f], COURIER_E_HTTP_STATUS);
    CHECK_EQ(v.status[f], 404);
    CHECK(v.has_error[f]);

    courier_request_new(&r, "GET", "/hang?monitor=1");
    atomic_init(&d.calls, 0);
    uint64_t hang = 0;
    CHECK_EQ(courier_send(&hang, e, r, on_done, &d, NULL), COURIER_OK);
    courier_request_free(r);
    deadline = th_now_ms() + 10000;
    while (index_of(&v, hang, COURIER_EVENT_DID_SEND) < 0 && th_now_ms() < deadline) usleep(1000);
    CHECK_EQ(courier_cancel(e, hang), COURIER_OK);
    deadline = th_now_ms() + 10000;
    while (atomic_load(&d.calls) == 0 && th_now_ms() < deadline) usleep(1000);
    f = index_of(&v, hang, COURIER_EVENT_FINISHED);
    REQUIRE(f >= 0);
    CHECK_EQ(v.code[f], COURIER_E_CANCELLED);
    CHECK(!v.has_response[f]);

    /* Removed: no more events; user_free ran once. */
    CHECK_EQ(courier_monitor_remove(e, mid), COURIER_OK);
    CHECK_EQ(v.frees, 1);
    CHECK_EQ(courier_monitor_remove(e, mid), COURIER_E_NOT_FOUND);
    int before = v.n;
    send_wait(e, "GET", "/echo/after");
    CHECK_EQ(v.n, before);
    CHECK_STR(courier_event_kind_name(COURIER_EVENT_FROZEN), "frozen");
    CHECK_STR(courier_event_kind_name(0), "unknown");
    courier_engine_close(e);
}

static void monitor_kind_mask_and_close(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    events only, all;
    events_init(&only);
    events_init(&all);
    CHECK_EQ(courier_monitor_add(NULL, e, 1u << COURIER_EVENT_FINISHED, on_event, &only, events_free_user), COURIER_OK);
    CHECK_EQ(courier_monitor_add(NULL, e, 0, on_event, &all, events_free_user), COURIER_OK);
    CHECK_EQ(courier_monitor_add(NULL, e, 0, NULL, &all, events_free_user), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(all.frees, 1);
    uint64_t id = send_wait(e, "GET", "/echo/mask");
    int kinds[8];
    CHECK_EQ(events_of(&only, id, kinds, 8), 1);
    CHECK_EQ(kinds[0], COURIER_EVENT_FINISHED);
    CHECK_EQ(events_of(&all, id, kinds, 8), 3);
    /* A request still queued when the engine closes: WILL_SEND then FINISHED (cancelled). */
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/hang?close=1");
    uint64_t hang = 0;
    courier_send(&hang, e, r, NULL, NULL, NULL);
    courier_request_free(r);
    int64_t deadline = th_now_ms() + 10000;
    while (index_of(&all, hang, COURIER_EVENT_DID_SEND) < 0 && th_now_ms() < deadline) usleep(1000);
    courier_engine_close(e);
    int f = index_of(&all, hang, COURIER_EVENT_FINISHED);
    REQUIRE(f >= 0);
    CHECK_EQ(all.code[f], COURIER_E_CANCELLED);
    CHECK_EQ(only.frees, 1);
    CHECK_EQ(all.frees, 2);
}

/* A monitor that sends from inside its callback (allowed), and many sends from many threads. */
typedef struct resend {
    courier_engine *e;
    atomic_int sent;
} resend;

static void send_on_finish(const courier_event *ev, void *user) {
    resend *rs = user;
    if (ev->kind != COURIER_EVENT_FINISHED || strstr(ev->url, "/echo/again")) return;
    if (atomic_fetch_add(&rs->sent, 1) > 0) return;
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/echo/again");
    courier_send(NULL, rs->e, r, NULL, NULL, NULL);
    courier_request_free(r);
}

static void *send_many(void *p) {
    courier_engine *e = p;
    for (int i = 0; i < 10; i++) send_wait(e, "GET", "/echo/many");
    return NULL;
}

static void monitors_under_load(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    cts_server_reset_counts(th_server());
    resend rs;
    rs.e = e;
    atomic_init(&rs.sent, 0);
    CHECK_EQ(courier_monitor_add(NULL, e, 1u << COURIER_EVENT_FINISHED, send_on_finish, &rs, NULL), COURIER_OK);
    lines l;
    lines_init(&l);
    courier_log_add_callback(NULL, e, COURIER_LOG_TRACE, on_line, &l, NULL);
    courier_log_set_level(e, COURIER_LOG_DEBUG);
    pthread_t th[3];
    for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, send_many, e);
    /* Add and remove monitors while requests flow. */
    for (int i = 0; i < 20; i++) {
        /* On the heap: user_free may run on the worker after its last call, and a monitor whose
         * user_free never came must not write into a frame that is gone (it is then kept). */
        events *v = malloc(sizeof *v);
        REQUIRE(v);
        events_init(v);
        uint64_t id = 0;
        courier_monitor_add(&id, e, 0, on_event, v, events_free_user);
        usleep(1000);
        courier_monitor_remove(e, id);
        int64_t deadline = th_now_ms() + 30000;
        int frees = 0;
        for (;;) {
            pthread_mutex_lock(&v->m);
            frees = v->frees;
            pthread_mutex_unlock(&v->m);
            if (frees || th_now_ms() > deadline) break;
            usleep(500);
        }
        CHECK_EQ(frees, 1);
        if (frees == 1) free(v);
    }
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    int64_t deadline = th_now_ms() + 5000;
    while (cts_server_path_count(th_server(), "/echo/again") < 1 && th_now_ms() < deadline) usleep(1000);
    CHECK_EQ(cts_server_path_count(th_server(), "/echo/again"), 1);
    courier_engine_close(e);
    /* Every request finished once in the log (coalesced ones never reach the wire: no did_send). */
    int finished = 0;
    for (int i = 0; i < lines_count(&l); i++)
        if (strstr(l.text[i], "\"event\":\"finished\"")) finished++;
    CHECK_EQ(finished, 31);
    lines_clear(&l);
}

TESTS_MAIN(T(levels_filter_lines), T(sink_levels_filter_too), T(lines_are_json_objects_with_the_keys),
           T(urls_are_redacted), T(file_sink_rotates), T(file_sink_under_load), T(stderr_sink_writes_lines),
           T(callback_sink_user_free_at_close), T(monitor_sees_the_lifecycle), T(monitor_kind_mask_and_close),
           T(monitors_under_load))
