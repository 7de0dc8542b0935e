/*
 * journal_test.c — frozen requests in one process: freezing (on a network failure, while
 * offline), the management API, replay (order, idempotency key, final and retryable answers,
 * manual policy, unordered requests, bounded concurrency), expiry with an injected clock, events,
 * and the network monitor. Real LMDB files, a real server on loopback. The store itself (damaged
 * files, batches, records other writers wrote, the outcome log): journal_store_test.c.
 */
#include "harness.h"
#include "journal_fixture.h"
#include "journal_recorder.h"
#include "lmdb_shim.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- freezing --------------------------------------------------------------------------------- */

static void freeze_on_cannot_connect(void) {
    const char *store = th_tmpdir();
    int port = jr_free_port(); /* nobody listens there */
    opts o = {.paused = 1};
    courier_engine *e = open_eng(store, port, &o, NULL);
    REQUIRE(e);
    waiter w;
    w_init(&w, e);
    courier_request *r = freezable("POST", "/like/7", "liked=1", COURIER_FREEZE_AUTO, 0);
    courier_request_add_header(r, "X-App", "demo");
    courier_request_add_header(r, "X-Quoted", "a \"b\" \\c\td \xc3\xa9");
    CHECK_EQ(send_one(e, r, &w), COURIER_OK);
    CHECK_EQ(w_wait(&w, 1), 1);
    CHECK_EQ(w.codes[0], COURIER_E_FROZEN);
    CHECK_EQ(strlen(w.ids[0]), 32);
    CHECK_EQ(w.found_in_journal[0], 1); /* told "frozen" only after the commit */
    CHECK_EQ(count_of(e), 1);

    courier_frozen *f = NULL;
    REQUIRE(courier_frozen_get(&f, e, w.ids[0], NULL) == COURIER_OK);
    CHECK_STR(courier_frozen_id(f), w.ids[0]);
    CHECK_STR(courier_frozen_method(f), "POST");
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/like/7", port);
    CHECK_STR(courier_frozen_url(f), url);
    char host[64];
    snprintf(host, sizeof host, "http://127.0.0.1:%d", port);
    CHECK_STR(courier_frozen_host(f), host);
    size_t blen = 0;
    const uint8_t *body = courier_frozen_body(f, &blen);
    CHECK_EQ(blen, 7);
    CHECK(body && memcmp(body, "liked=1", 7) == 0);
    const char *key = courier_frozen_idempotency_key(f);
    CHECK_EQ(strlen(key), 32);
    int saw_key = 0, saw_app = 0, saw_type = 0;
    for (size_t i = 0; i < courier_frozen_header_count(f); i++) {
        const char *n, *v;
        courier_frozen_header_at(&n, &v, f, i);
        if (strcasecmp(n, "Idempotency-Key") == 0) saw_key = strcmp(v, key) == 0;
        if (strcmp(n, "X-App") == 0) saw_app = strcmp(v, "demo") == 0;
        if (strcasecmp(n, "Content-Type") == 0) saw_type = strcmp(v, "text/plain") == 0;
        if (strcmp(n, "X-Quoted") == 0) CHECK_STR(v, "a \"b\" \\c\td \xc3\xa9"); /* JSON escapes round-trip */
    }
    CHECK(saw_key && saw_app && saw_type);
    courier_frozen_info info = {.size = sizeof info};
    CHECK_EQ(courier_frozen_get_info(&info, f), COURIER_OK);
    CHECK_EQ(info.policy, COURIER_FREEZE_AUTO);
    CHECK_EQ(info.attempts, 0);
    CHECK_EQ(info.claimed, 0);
    CHECK_EQ(info.timeout_ms, 10000);
    CHECK_EQ(info.expires_ms - info.created_ms, (int64_t)24 * 3600 * 1000);
    CHECK_CONTAINS(courier_frozen_json(f), "\"idempotency_key\"");
    CHECK_CONTAINS(courier_frozen_json(f), "\"method\":\"POST\"");
    courier_frozen_free(f);

    courier_frozen_list *l = NULL;
    REQUIRE(courier_frozen_list_requests(&l, e, NULL) == COURIER_OK);
    CHECK_EQ(courier_frozen_list_count(l), 1);
    CHECK_STR(courier_frozen_id(courier_frozen_list_at(l, 0)), w.ids[0]);
    CHECK(courier_frozen_list_at(l, 1) == NULL);
    courier_frozen_list_free(l);
    courier_engine_close(e);
    CHECK_EQ(w.n, 1); /* exactly once */
    w_destroy(&w);
}

/* ---- the default store ------------------------------------------------------------------------- */

typedef struct warn_lines {
    pthread_mutex_t mu;
    int frozen_temporary; /* lines of the event "frozen_temporary_store" at WARNING */
} warn_lines;

static void on_warning(courier_log_level level, const char *line, size_t len, void *user) {
    (void)len;
    warn_lines *w = user;
    pthread_mutex_lock(&w->mu);
    if (level == COURIER_LOG_WARNING && strstr(line, "\"event\":\"frozen_temporary_store\"")) w->frozen_temporary++;
    pthread_mutex_unlock(&w->mu);
}

/* Freezes one POST (the engine is offline) and returns how many temporary-store warnings it logged. */
static int freeze_one_counting_warnings(courier_engine *e) {
    warn_lines lines = {.mu = PTHREAD_MUTEX_INITIALIZER};
    CHECK_EQ(courier_log_add_callback(NULL, e, COURIER_LOG_WARNING, on_warning, &lines, NULL), COURIER_OK);
    waiter w;
    w_init(&w, e);
    CHECK_EQ(courier_reachability_set_offline(e), COURIER_OK);
    CHECK_EQ(send_one(e, freezable("POST", "/like/7", "liked=1", COURIER_FREEZE_AUTO, 0), &w), COURIER_OK);
    CHECK_EQ(w_wait(&w, 1), 1);
    CHECK_EQ(w.codes[0], COURIER_E_FROZEN);
    w_destroy(&w);
    /* The warning is logged on the journal thread before the caller is answered. */
    pthread_mutex_lock(&lines.mu);
    int n = lines.frozen_temporary;
    pthread_mutex_unlock(&lines.mu);
    return n;
}

/* With no store directory the engine keeps its store where apps keep data, named by the app id:
 * a frozen request is still there for the next engine (it vanished with the old temporary default). */
static void frozen_survives_in_the_default_store(void) {
    char data[600], expected[800];
    snprintf(data, sizeof data, "%s/xdg-data", th_tmpdir());
    setenv("XDG_DATA_HOME", data, 1);
    snprintf(expected, sizeof expected, "%s/org.example.notes/courier", data);
    int port = jr_free_port();
    opts notes = {.paused = 1, .app_id = "org.example.notes"};
    courier_engine *e = open_eng(NULL, port, &notes, NULL);
    REQUIRE(e);
    CHECK_STR(courier_engine_store_dir(e), expected);
    CHECK_EQ(freeze_one_counting_warnings(e), 0); /* a durable store: no warning */
    courier_engine_close(e);
    struct stat st;
    CHECK(stat(expected, &st) == 0 && S_ISDIR(st.st_mode));

    e = open_eng(NULL, port, &notes, NULL);
    REQUIRE(e);
    CHECK_EQ(count_of(e), 1);
    courier_engine_close(e);
    /* Another app id is another store. */
    opts other = {.paused = 1, .app_id = "org.example.other"};
    e = open_eng(NULL, port, &other, NULL);
    REQUIRE(e);
    CHECK_EQ(count_of(e), 0);
    courier_engine_close(e);
}

/* A temporary store (asked for) is removed at close: freezing into it logs a warning. */
static void freezing_into_a_temporary_store_warns(void) {
    opts temporary = {.paused = 1, .app_id = "org.example.notes", .temporary = 1};
    courier_engine *e = open_eng(NULL, jr_free_port(), &temporary, NULL);
    REQUIRE(e);
    char dir[600];
    snprintf(dir, sizeof dir, "%s", courier_engine_store_dir(e));
    CHECK_EQ(freeze_one_counting_warnings(e), 1);
    courier_engine_close(e);
    struct stat st;
    CHECK(stat(dir, &st) != 0);
}

/* A POST without a body or parameters (an empty body) is kept and resent as such. */
static void empty_body_is_kept(void) {
    jr_server srv;
    REQUIRE(jr_open(&srv, 0) == 0);
    courier_engine *e = open_eng(th_tmpdir(), srv.port, NULL, NULL);
    REQUIRE(e);
    waiter w;
    w_init(&w, e);
    courier_reachability_set_offline(e);
    courier_request *r = NULL;
    courier_request_new(&r, "POST", "/empty");
    courier_request_set_freeze(r, COURIER_FREEZE_AUTO, 0, COURIER_FREEZE_UNORDERED);
    CHECK_EQ(send_one(e, r, &w), COURIER_OK);
    CHECK_EQ(w_wait(&w, 1), 1);
    CHECK_EQ(w.codes[0], COURIER_E_FROZEN);
    courier_frozen *f = NULL;
    REQUIRE(courier_frozen_get(&f, e, w.ids[0], NULL) == COURIER_OK);
    size_t len = 99;
    CHECK(courier_frozen_body(f, &len) != NULL);
    CHECK_EQ(len, 0);
    courier_frozen_free(f);
    courier_reachability_set_online(e);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    CHECK_EQ(jr_path_count(&srv, "/empty"), 1);
    CHECK_EQ(count_of(e), 0);
    courier_engine_close(e);
    jr_stop(&srv);
    jr_free(&srv);
    w_destroy(&w);
}

static void never_policy_is_not_frozen(void) {
    const char *store = th_tmpdir();
    int port = jr_free_port();
    opts o = {.paused = 1};
    courier_engine *e = open_eng(store, port, &o, NULL);
    REQUIRE(e);
    waiter w;
    w_init(&w, e);
    courier_request *r = NULL;
    courier_request_new(&r, "POST", "/x");
    CHECK_EQ(send_one(e, r, &w), COURIER_OK);
    r = freezable("GET", "/y", NULL, COURIER_FREEZE_AUTO, 0);
    CHECK_EQ(send_one(e, r, &w), COURIER_OK);
    CHECK_EQ(w_wait(&w, 2), 2);
    int frozen = 0, cannot = 0;
    for (int i = 0; i < 2; i++) {
        frozen += w.codes[i] == COURIER_E_FROZEN;
        cannot += w.codes[i] == COURIER_E_CANNOT_CONNECT;
    }
    CHECK_EQ(cannot, 1);
    CHECK_EQ(frozen, 1);
    CHECK_EQ(count_of(e), 1);
    courier_engine_close(e);
    w_destroy(&w);
}

static void given_id_replaces_older(void) {
    const char *store = th_tmpdir();
    opts o = {.paused = 1};
    courier_engine *e = open_eng(store, jr_free_port(), &o, NULL);
    REQUIRE(e);
    waiter w;
    w_init(&w, e);
    CHECK_EQ(courier_reachability_set_offline(e), COURIER_OK);
    for (int i = 0; i < 2; i++) {
        courier_request *r = freezable("PUT", "/like", i ? "on=0" : "on=1", COURIER_FREEZE_AUTO, 0);
        CHECK_EQ(courier_request_set_freeze_id(r, "like-42"), COURIER_OK);
        CHECK_EQ(send_one(e, r, &w), COURIER_OK);
        CHECK_EQ(w_wait(&w, i + 1), i + 1);
    }
    CHECK_EQ(w.codes[0], COURIER_E_FROZEN);
    CHECK_EQ(w.codes[1], COURIER_E_FROZEN);
    CHECK_STR(w.ids[0], "like-42");
    CHECK_STR(w.ids[1], "like-42");
    CHECK_EQ(count_of(e), 1);
    courier_frozen *f = NULL;
    REQUIRE(courier_frozen_get(&f, e, "like-42", NULL) == COURIER_OK);
    size_t len;
    const uint8_t *b = courier_frozen_body(f, &len);
    CHECK(len == 4 && memcmp(b, "on=0", 4) == 0);
    courier_frozen_free(f);
    courier_engine_close(e);
    w_destroy(&w);
}

static void remove_and_remove_all(void) {
    const char *store = th_tmpdir();
    opts o = {.paused = 1};
    courier_engine *e = open_eng(store, jr_free_port(), &o, NULL);
    REQUIRE(e);
    waiter w;
    w_init(&w, e);
    courier_reachability_set_offline(e);
    const char *ids[] = {"a-1", "a-2", "a-3"};
    for (int i = 0; i < 3; i++) {
        courier_request *r = freezable("POST", "/r", "x", COURIER_FREEZE_MANUAL, 0);
        courier_request_set_freeze_id(r, ids[i]);
        send_one(e, r, &w);
    }
    CHECK_EQ(w_wait(&w, 3), 3);
    CHECK_EQ(count_of(e), 3);
    courier_frozen_list *l = NULL;
    REQUIRE(courier_frozen_list_requests(&l, e, NULL) == COURIER_OK);
    REQUIRE(courier_frozen_list_count(l) == 3);
    for (int i = 0; i < 3; i++) CHECK_STR(courier_frozen_id(courier_frozen_list_at(l, (size_t)i)), ids[i]); /* oldest first */
    courier_frozen_list_free(l);
    courier_error err;
    CHECK_EQ(courier_frozen_remove(e, "a-2", &err), COURIER_OK);
    CHECK_EQ(courier_frozen_remove(e, "a-2", &err), COURIER_E_NOT_FOUND);
    CHECK_EQ(err.code, COURIER_E_NOT_FOUND);
    CHECK_EQ(count_of(e), 2);
    courier_frozen *f = NULL;
    CHECK_EQ(courier_frozen_get(&f, e, "a-2", NULL), COURIER_E_NOT_FOUND);
    CHECK(f == NULL);
    int64_t removed = 0;
    CHECK_EQ(courier_frozen_remove_all(&removed, e, NULL), COURIER_OK);
    CHECK_EQ(removed, 2);
    CHECK_EQ(count_of(e), 0);
    CHECK_EQ(courier_frozen_get(&f, e, "a-1", NULL), COURIER_E_NOT_FOUND);
    courier_engine_close(e);
    w_destroy(&w);
}

static void invalid_arguments(void) {
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/");
    CHECK_EQ(courier_request_set_freeze(r, 3, 0, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_freeze(r, COURIER_FREEZE_AUTO, -1, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_freeze(r, COURIER_FREEZE_AUTO, 0, 0x80), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_freeze(NULL, COURIER_FREEZE_AUTO, 0, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_freeze_id(r, ""), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_freeze_id(r, "has space"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_freeze_id(r, "a/b"), COURIER_E_INVALID_ARGUMENT);
    char longid[COURIER_FROZEN_ID_MAX + 2];
    memset(longid, 'a', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    CHECK_EQ(courier_request_set_freeze_id(r, longid), COURIER_E_INVALID_ARGUMENT);
    longid[COURIER_FROZEN_ID_MAX] = '\0';
    CHECK_EQ(courier_request_set_freeze_id(r, longid), COURIER_OK);
    CHECK_EQ(courier_request_set_freeze_id(r, NULL), COURIER_OK);
    courier_request_free(r);
    courier_error err;
    memset(&err, 0, sizeof err);
    err.code = COURIER_E_CANNOT_CONNECT;
    CHECK(courier_error_freeze_id(&err) == NULL);
    CHECK(courier_error_freeze_id(NULL) == NULL);
    CHECK_EQ(courier_frozen_count(NULL, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    CHECK_EQ(courier_config_set_frozen_replay(cfg, -1, 0, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_frozen_replay(cfg, 2, 500, 100), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_reachability(cfg, 1, "no-port", 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_reachability(cfg, 1, "http://", 0), COURIER_E_INVALID_URL);
    CHECK_EQ(courier_config_set_reachability(cfg, 1, "tcp://127.0.0.1:80", 100), COURIER_OK);
    courier_config_free(cfg);
    CHECK_STR(courier_strerror(COURIER_E_FROZEN), "frozen: kept in the journal, to be sent later");
    CHECK_EQ(courier_reachability_status(NULL), COURIER_REACHABILITY_UNKNOWN);
}

/* ---- replay ----------------------------------------------------------------------------------- */

static void offline_fails_fast_then_replays(void) {
    jr_server srv;
    courier_engine *e = open_served(&srv, NULL);
    REQUIRE(e);
    evlog log;
    ev_init(&log);
    courier_frozen_add_listener(NULL, e, ev_cb, &log, NULL);
    waiter w;
    w_init(&w, e);
    CHECK_EQ(courier_reachability_status(e), COURIER_REACHABILITY_UNKNOWN);
    CHECK_EQ(courier_reachability_set_offline(e), COURIER_OK);
    CHECK_EQ(courier_reachability_status(e), COURIER_REACHABILITY_OFFLINE);

    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/plain");
    courier_request_set_timeout_ms(r, 60000);
    CHECK_EQ(send_one(e, r, &w), COURIER_OK);
    CHECK_EQ(w_wait(&w, 1), 1);
    CHECK_EQ(w.codes[0], COURIER_E_OFFLINE);

    CHECK_EQ(send_one(e, freezable("POST", "/frozen", "a=1", COURIER_FREEZE_AUTO, 0), &w), COURIER_OK);
    CHECK_EQ(w_wait(&w, 2), 2);
    CHECK_EQ(w.codes[1], COURIER_E_FROZEN);

    courier_request_new(&r, "GET", "/anyway");
    courier_request_set_ignore_offline(r, 1);
    CHECK_EQ(send_one(e, r, &w), COURIER_OK);
    CHECK_EQ(w_wait(&w, 3), 3);
    CHECK_EQ(w.codes[2], COURIER_OK);
    CHECK_EQ(w.status[2], 200);
    CHECK_EQ(jr_count(&srv), 1);
    CHECK_EQ(jr_path_count(&srv, "/frozen"), 0);

    CHECK_EQ(courier_reachability_set_online(e), COURIER_OK); /* starts replay */
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    CHECK_EQ(jr_path_count(&srv, "/frozen"), 1);
    CHECK_EQ(count_of(e), 0);
    CHECK_EQ(ev_count(&log, COURIER_FROZEN_EVENT_FROZEN), 1);
    CHECK_EQ(ev_count(&log, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED), 1);
    int code = 0, status = 0;
    int64_t at = 0;
    CHECK_EQ(courier_frozen_last_outcome(&code, &status, &at, e, w.ids[1], NULL), COURIER_OK);
    CHECK_EQ(code, COURIER_OK);
    CHECK_EQ(status, 200);
    CHECK(at > 0);
    courier_engine_close(e);
    jr_stop(&srv);
    /* The replayed request carried the key that was frozen with it. */
    jr_hit h = jr_get(&srv, 1);
    CHECK_STR(h.path, "/frozen");
    CHECK_STR(h.body, "a=1");
    CHECK_STR(h.key, log.e[0].idem);
    jr_free(&srv);
    w_destroy(&w);
    ev_destroy(&log);
}

static void replay_in_order_with_keys(void) {
    jr_server srv;
    courier_engine *e = open_served(&srv, NULL);
    REQUIRE(e);
    evlog log;
    ev_init(&log);
    courier_frozen_add_listener(NULL, e, ev_cb, &log, NULL);
    waiter w;
    w_init(&w, e);
    courier_reachability_set_offline(e);
    enum { N = 12 };
    for (int i = 0; i < N; i++) {
        char path[32], body[16];
        snprintf(path, sizeof path, "/o/%d", i);
        snprintf(body, sizeof body, "n=%d", i);
        send_one(e, freezable("POST", path, body, COURIER_FREEZE_AUTO, 0), &w);
    }
    CHECK_EQ(w_wait(&w, N), N);
    char keys[N][80];
    courier_frozen_list *l = NULL;
    REQUIRE(courier_frozen_list_requests(&l, e, NULL) == COURIER_OK);
    REQUIRE(courier_frozen_list_count(l) == N);
    for (int i = 0; i < N; i++) snprintf(keys[i], sizeof keys[i], "%s", courier_frozen_idempotency_key(courier_frozen_list_at(l, (size_t)i)));
    courier_frozen_list_free(l);
    courier_reachability_set_online(e);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    REQUIRE(jr_count(&srv) == N);
    for (int i = 0; i < N; i++) {
        jr_hit h = jr_get(&srv, (size_t)i);
        char path[32];
        snprintf(path, sizeof path, "/o/%d", i);
        CHECK_STR(h.path, path); /* oldest first, one host in order */
        CHECK_STR(h.key, keys[i]);
        CHECK_STR(h.method, "POST");
    }
    CHECK_EQ(ev_count(&log, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED), N);
    /* Events in the order of the answers, each with the response. */
    int k = 0;
    for (int i = 0; i < log.n; i++) {
        if (log.e[i].kind != COURIER_FROZEN_EVENT_RESENT_SUCCEEDED) continue;
        CHECK_STR(log.e[i].idem, keys[k]);
        CHECK_EQ(log.e[i].status, 200);
        CHECK_EQ(log.e[i].final, 1);
        CHECK_EQ(log.e[i].attempts, 1);
        k++;
    }
    CHECK_EQ(count_of(e), 0);
    courier_engine_close(e);
    jr_stop(&srv);
    jr_free(&srv);
    w_destroy(&w);
    ev_destroy(&log);
}

/* The snapshot a replay's event carries is made lazily (its JSON view when first read): a listener
 * still reads the request as it was frozen, and the view is the stored text with the state of the
 * claim spliced in, the same one from every thread that reads it. */
/* The network's return is automatic replay: a paused engine waits for the resume (it once replayed
 * at once, as courier_frozen_replay does). */
static void paused_engine_waits_when_the_network_returns(void) {
    jr_server srv;
    opts o = {.paused = 1};
    courier_engine *e = open_served(&srv, &o);
    REQUIRE(e);
    waiter w;
    w_init(&w, e);
    CHECK_EQ(courier_reachability_set_offline(e), COURIER_OK);
    CHECK_EQ(send_one(e, freezable("POST", "/pay", "p=1", COURIER_FREEZE_AUTO, 0), &w), COURIER_OK);
    CHECK_EQ(w_wait(&w, 1), 1);
    CHECK_EQ(w.codes[0], COURIER_E_FROZEN);
    CHECK_EQ(courier_reachability_set_online(e), COURIER_OK);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK); /* idle: the return waits for the resume */
    CHECK_EQ(jr_path_count(&srv, "/pay"), 0);
    CHECK_EQ(count_of(e), 1);
    CHECK_EQ(courier_frozen_resume(e), COURIER_OK);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    CHECK_EQ(jr_path_count(&srv, "/pay"), 1);
    CHECK_EQ(count_of(e), 0);
    courier_engine_close(e);
    jr_stop(&srv);
    jr_free(&srv);
    w_destroy(&w);
}

/* A frozen-event listener that holds the journal thread until the test lets it go. */
typedef struct gate {
    pthread_mutex_t m;
    pthread_cond_t c;
    int entered, open;
} gate;

static void gate_cb(const courier_frozen_event *ev, void *user) {
    gate *g = user;
    if (ev->kind != COURIER_FROZEN_EVENT_FROZEN) return;
    pthread_mutex_lock(&g->m);
    g->entered++;
    pthread_cond_broadcast(&g->c);
    while (!g->open) pthread_cond_wait(&g->c, &g->m);
    pthread_mutex_unlock(&g->m);
}

/* The network came back and went again before the journal thread took its turn (a busy machine):
 * that return is void, and a request frozen offline meanwhile stays frozen. It once ran as the
 * app's replay-now, sending every record while the monitor said offline (the Python test
 * test_two_scripts_share_nothing's lost freeze: sent by the engine that froze it). */
static void a_network_return_undone_sends_nothing(void) {
    jr_server srv;
    courier_engine *e = open_served(&srv, NULL);
    REQUIRE(e);
    gate g = {.entered = 0, .open = 0};
    pthread_mutex_init(&g.m, NULL);
    pthread_cond_init(&g.c, NULL);
    courier_frozen_add_listener(NULL, e, gate_cb, &g, NULL);
    waiter w;
    w_init(&w, e);
    CHECK_EQ(courier_reachability_set_offline(e), COURIER_OK);
    CHECK_EQ(send_one(e, freezable("POST", "/a", "a=1", COURIER_FREEZE_AUTO, 0), &w), COURIER_OK);
    pthread_mutex_lock(&g.m);
    while (!g.entered) pthread_cond_wait(&g.c, &g.m); /* the journal thread is in the listener */
    pthread_mutex_unlock(&g.m);
    CHECK_EQ(courier_reachability_set_online(e), COURIER_OK);
    CHECK_EQ(courier_reachability_set_offline(e), COURIER_OK);
    CHECK_EQ(send_one(e, freezable("POST", "/b", "b=1", COURIER_FREEZE_AUTO, 0), &w), COURIER_OK);
    pthread_mutex_lock(&g.m);
    g.open = 1;
    pthread_cond_broadcast(&g.c);
    pthread_mutex_unlock(&g.m);
    CHECK_EQ(w_wait(&w, 2), 2);
    CHECK_EQ(w.codes[0], COURIER_E_FROZEN);
    CHECK_EQ(w.codes[1], COURIER_E_FROZEN);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    CHECK_EQ(jr_path_count(&srv, "/a"), 0);
    CHECK_EQ(jr_path_count(&srv, "/b"), 0);
    CHECK_EQ(count_of(e), 2); /* nothing lost, nothing sent */
    courier_engine_close(e);
    jr_stop(&srv);
    jr_free(&srv);
    w_destroy(&w);
    pthread_mutex_destroy(&g.m);
    pthread_cond_destroy(&g.c);
}

typedef struct snapseen {
    pthread_mutex_t m;
    int n;
    char method[16], url[128], idem[80], body[64], header[64], json[2048], json2[2048];
    size_t headers;
    int same_pointer;
} snapseen;

static void *read_json(void *arg) { return (void *)courier_frozen_json(arg); }

static void snap_cb(const courier_frozen_event *ev, void *user) {
    snapseen *s = user;
    if (ev->kind != COURIER_FROZEN_EVENT_RESENT_SUCCEEDED || !ev->frozen) return;
    const courier_frozen *f = ev->frozen;
    /* Two first readers at once: one view survives, both see it. */
    pthread_t th;
    const char *mine = NULL;
    void *theirs = NULL;
    int started = pthread_create(&th, NULL, read_json, (void *)f) == 0;
    mine = courier_frozen_json(f);
    if (started) pthread_join(th, &theirs);
    pthread_mutex_lock(&s->m);
    s->n++;
    snprintf(s->method, sizeof s->method, "%s", courier_frozen_method(f));
    snprintf(s->url, sizeof s->url, "%s", courier_frozen_url(f));
    snprintf(s->idem, sizeof s->idem, "%s", courier_frozen_idempotency_key(f));
    size_t blen = 0;
    const uint8_t *b = courier_frozen_body(f, &blen);
    snprintf(s->body, sizeof s->body, "%.*s", (int)blen, b ? (const char *)b : "");
    s->headers = courier_frozen_header_count(f);
    for (size_t i = 0; i < s->headers; i++) {
        const char *name = NULL, *value = NULL;
        if (courier_frozen_header_at(&name, &value, f, i) == COURIER_OK && strcmp(name, "X-Trace") == 0)
            snprintf(s->header, sizeof s->header, "%s: %s", name, value);
    }
    snprintf(s->json, sizeof s->json, "%s", mine ? mine : "");
    snprintf(s->json2, sizeof s->json2, "%s", courier_frozen_json(f));
    s->same_pointer = started && mine && mine == theirs && mine == courier_frozen_json(f);
    pthread_mutex_unlock(&s->m);
}

static void event_snapshot_reads_the_replayed_request(void) {
    jr_server srv;
    courier_engine *e = open_served(&srv, NULL);
    REQUIRE(e);
    snapseen seen;
    memset(&seen, 0, sizeof seen);
    pthread_mutex_init(&seen.m, NULL);
    courier_frozen_add_listener(NULL, e, snap_cb, &seen, NULL);
    waiter w;
    w_init(&w, e);
    courier_reachability_set_offline(e);
    courier_request *r = freezable("PUT", "/snap/1", "name=snap", COURIER_FREEZE_AUTO, 0);
    courier_request_add_header(r, "X-Trace", "t-1");
    CHECK_EQ(send_one(e, r, &w), COURIER_OK);
    CHECK_EQ(w_wait(&w, 1), 1);
    CHECK_EQ(w.codes[0], COURIER_E_FROZEN);
    /* What the list says before the replay: the same text, unclaimed. */
    courier_frozen *listed = NULL;
    REQUIRE(courier_frozen_get(&listed, e, w.ids[0], NULL) == COURIER_OK);
    char stored[2048], key[80];
    snprintf(stored, sizeof stored, "%s", courier_frozen_json(listed));
    snprintf(key, sizeof key, "%s", courier_frozen_idempotency_key(listed));
    size_t listed_headers = courier_frozen_header_count(listed);
    courier_frozen_free(listed);
    char *state = strstr(stored, ",\"state\":{");
    REQUIRE(state != NULL);
    CHECK(strstr(state, "\"claimed\":false") != NULL);
    courier_reachability_set_online(e);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    courier_engine_close(e);
    pthread_mutex_lock(&seen.m);
    CHECK_EQ(seen.n, 1);
    CHECK_STR(seen.method, "PUT");
    CHECK(strstr(seen.url, "/snap/1") != NULL);
    CHECK_STR(seen.idem, key);
    CHECK_STR(seen.body, "name=snap");
    CHECK_EQ(seen.headers, listed_headers);
    CHECK_STR(seen.header, "X-Trace: t-1");
    CHECK(seen.same_pointer);
    CHECK_STR(seen.json, seen.json2);
    /* The stored text up to the state, then the claim's state. */
    CHECK_EQ(strncmp(seen.json, stored, (size_t)(state - stored)), 0);
    const char *claim = seen.json + (state - stored);
    CHECK(strncmp(claim, ",\"state\":{\"attempts\":1,", 23) == 0);
    CHECK(strstr(claim, "\"claimed\":true,\"last_code\":0,\"last_status\":0}}") != NULL);
    CHECK(strlen(claim) > 0 && claim[strlen(claim) - 1] == '}');
    pthread_mutex_unlock(&seen.m);
    jr_stop(&srv);
    jr_free(&srv);
    w_destroy(&w);
    pthread_mutex_destroy(&seen.m);
}

static void final_and_retryable_answers(void) {
    opts o = {.backoff_base = 60000, .backoff_max = 60000};
    jr_server srv;
    courier_engine *e = open_served(&srv, &o);
    REQUIRE(e);
    evlog log;
    ev_init(&log);
    courier_frozen_add_listener(NULL, e, ev_cb, &log, NULL);
    waiter w;
    w_init(&w, e);
    courier_reachability_set_offline(e);
    courier_request *r = freezable("POST", "/status/400", "x", COURIER_FREEZE_AUTO, 0);
    courier_request_set_freeze_id(r, "bad-request");
    send_one(e, r, &w);
    r = freezable("POST", "/status/503", "y", COURIER_FREEZE_AUTO, 0);
    courier_request_set_freeze_id(r, "unavailable");
    send_one(e, r, &w);
    r = freezable("POST", "/after", "z", COURIER_FREEZE_AUTO, 0); /* same host, behind the 503 */
    courier_request_set_freeze_id(r, "after");
    send_one(e, r, &w);
    r = freezable("POST", "/unordered", "u", COURIER_FREEZE_AUTO, COURIER_FREEZE_UNORDERED);
    courier_request_set_freeze_id(r, "free");
    send_one(e, r, &w);
    CHECK_EQ(w_wait(&w, 4), 4);
    courier_reachability_set_online(e);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    CHECK_EQ(jr_path_count(&srv, "/status/400"), 1);
    CHECK_EQ(jr_path_count(&srv, "/status/503"), 1);
    CHECK_EQ(jr_path_count(&srv, "/after"), 0);     /* waits for the 503's final answer */
    CHECK_EQ(jr_path_count(&srv, "/unordered"), 1); /* waits for nobody */
    CHECK_EQ(count_of(e), 2);
    courier_frozen *f = NULL;
    CHECK_EQ(courier_frozen_get(&f, e, "bad-request", NULL), COURIER_E_NOT_FOUND);
    REQUIRE(courier_frozen_get(&f, e, "unavailable", NULL) == COURIER_OK);
    courier_frozen_info info = {.size = sizeof info};
    courier_frozen_get_info(&info, f);
    CHECK_EQ(info.attempts, 1);
    CHECK_EQ(info.last_code, COURIER_E_HTTP_STATUS);
    CHECK_EQ(info.last_status, 503);
    CHECK_EQ(info.claimed, 0);
    CHECK(info.next_attempt_ms >= info.last_attempt_ms + 30000); /* backoff 60 s with jitter, kept */
    courier_frozen_free(f);
    int code = 0, status = 0;
    CHECK_EQ(courier_frozen_last_outcome(&code, &status, NULL, e, "bad-request", NULL), COURIER_OK);
    CHECK_EQ(code, COURIER_E_HTTP_STATUS);
    CHECK_EQ(status, 400);
    CHECK_EQ(courier_frozen_last_outcome(&code, &status, NULL, e, "unavailable", NULL), COURIER_E_NOT_FOUND);
    int finals = 0, retries = 0;
    pthread_mutex_lock(&log.m);
    for (int i = 0; i < log.n; i++) {
        if (log.e[i].kind != COURIER_FROZEN_EVENT_RESENT_FAILED) continue;
        CHECK_EQ(log.e[i].code, COURIER_E_HTTP_STATUS);
        if (strcmp(log.e[i].id, "bad-request") == 0) {
            finals++;
            CHECK_EQ(log.e[i].final, 1);
            CHECK_EQ(log.e[i].status, 400);
        } else {
            retries++;
            CHECK_STR(log.e[i].id, "unavailable");
            CHECK_EQ(log.e[i].final, 0);
            CHECK_EQ(log.e[i].status, 503);
        }
    }
    pthread_mutex_unlock(&log.m);
    CHECK_EQ(finals, 1);
    CHECK_EQ(retries, 1);
    /* The app can send the waiting ones now. */
    courier_error err;
    CHECK_EQ(courier_frozen_resend(e, "after", &err), COURIER_OK);
    CHECK_EQ(courier_frozen_resend(e, "nope", &err), COURIER_E_NOT_FOUND);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    CHECK_EQ(jr_path_count(&srv, "/after"), 1);
    CHECK_EQ(count_of(e), 1);
    courier_engine_close(e);
    jr_stop(&srv);
    jr_free(&srv);
    w_destroy(&w);
    ev_destroy(&log);
}

static void manual_policy_waits_for_the_app(void) {
    jr_server srv;
    courier_engine *e = open_served(&srv, NULL);
    REQUIRE(e);
    waiter w;
    w_init(&w, e);
    courier_reachability_set_offline(e);
    courier_request *r = freezable("DELETE", "/manual/1", NULL, COURIER_FREEZE_MANUAL, 0);
    courier_request_set_freeze_id(r, "m1");
    send_one(e, r, &w);
    r = freezable("DELETE", "/manual/2", NULL, COURIER_FREEZE_MANUAL, 0);
    courier_request_set_freeze_id(r, "m2");
    send_one(e, r, &w);
    CHECK_EQ(w_wait(&w, 2), 2);
    courier_reachability_set_online(e);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    CHECK_EQ(jr_count(&srv), 0);
    CHECK_EQ(count_of(e), 2);
    CHECK_EQ(courier_frozen_resend(e, "m1", NULL), COURIER_OK);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    CHECK_EQ(jr_path_count(&srv, "/manual/1"), 1);
    CHECK_EQ(count_of(e), 1);
    CHECK_EQ(courier_frozen_replay(e, COURIER_REPLAY_MANUAL, NULL), COURIER_OK);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    CHECK_EQ(jr_path_count(&srv, "/manual/2"), 1);
    CHECK_EQ(count_of(e), 0);
    courier_engine_close(e);
    jr_stop(&srv);
    jr_free(&srv);
    w_destroy(&w);
}

static void bounded_concurrency(void) {
    opts o = {.concurrency = 3};
    jr_server srv;
    courier_engine *e = open_served(&srv, &o);
    REQUIRE(e);
    waiter w;
    w_init(&w, e);
    courier_reachability_set_offline(e);
    for (int i = 0; i < 9; i++) {
        char path[32];
        snprintf(path, sizeof path, "/slow/u%d", i);
        send_one(e, freezable("POST", path, "x", COURIER_FREEZE_AUTO, COURIER_FREEZE_UNORDERED), &w);
    }
    for (int i = 0; i < 3; i++) {
        char path[32];
        snprintf(path, sizeof path, "/slow/o%d", i);
        send_one(e, freezable("POST", path, "x", COURIER_FREEZE_AUTO, 0), &w);
    }
    CHECK_EQ(w_wait(&w, 12), 12);
    courier_reachability_set_online(e);
    CHECK_EQ(courier_frozen_wait_idle(e, 60000), COURIER_OK);
    CHECK_EQ(jr_count(&srv), 12);
    CHECK(srv.max_active <= 3);
    CHECK(srv.max_active >= 2); /* unordered requests do go in parallel */
    CHECK_EQ(count_of(e), 0);
    courier_engine_close(e);
    jr_stop(&srv);
    jr_free(&srv);
    w_destroy(&w);
}

/* ---- expiry ---------------------------------------------------------------------------------- */

static void expiry_with_injected_clock(void) {
    atomic_store(&fake_now, (int64_t)1700000000000LL);
    opts o = {.fake_clock = 1};
    jr_server srv;
    courier_engine *e = open_served(&srv, &o);
    REQUIRE(e);
    evlog log;
    ev_init(&log);
    courier_frozen_add_listener(NULL, e, ev_cb, &log, NULL);
    waiter w;
    w_init(&w, e);
    courier_reachability_set_offline(e);
    for (int i = 0; i < 3; i++) {
        courier_request *r = freezable("POST", "/expires", "x", COURIER_FREEZE_AUTO, 0);
        courier_request_set_freeze(r, COURIER_FREEZE_AUTO, 3600 * 1000, 0);
        send_one(e, r, &w);
    }
    courier_request *r = freezable("POST", "/stays", "x", COURIER_FREEZE_AUTO, COURIER_FREEZE_UNORDERED);
    send_one(e, r, &w); /* the default expiry: 24 hours */
    CHECK_EQ(w_wait(&w, 4), 4);
    courier_frozen *f = NULL;
    REQUIRE(courier_frozen_get(&f, e, w.ids[0], NULL) == COURIER_OK);
    courier_frozen_info info = {.size = sizeof info};
    courier_frozen_get_info(&info, f);
    CHECK_EQ(info.created_ms, 1700000000000LL);
    CHECK_EQ(info.expires_ms, 1700000000000LL + 3600 * 1000);
    courier_frozen_free(f);
    atomic_store(&fake_now, (int64_t)1700000000000LL + 2 * 3600 * 1000); /* two hours later */
    courier_reachability_set_online(e);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    CHECK_EQ(ev_count(&log, COURIER_FROZEN_EVENT_EXPIRED), 3);
    CHECK_EQ(jr_path_count(&srv, "/expires"), 0); /* never sent */
    CHECK_EQ(jr_path_count(&srv, "/stays"), 1);
    CHECK_EQ(count_of(e), 0);
    courier_engine_close(e);
    jr_stop(&srv);
    jr_free(&srv);
    w_destroy(&w);
    ev_destroy(&log);
}

/* ---- the network monitor --------------------------------------------------------------------- */

typedef struct reach_log {
    pthread_mutex_t m;
    int n;
    int states[64];
} reach_log;

static void reach_cb(courier_reachability status, void *user) {
    reach_log *l = user;
    pthread_mutex_lock(&l->m);
    if (l->n < 64) l->states[l->n] = status;
    l->n++;
    pthread_mutex_unlock(&l->m);
}

static int wait_status(courier_engine *e, int want) {
    int64_t end = th_now_ms() + 20000;
    while (courier_reachability_status(e) != want && th_now_ms() < end) usleep(20000);
    return courier_reachability_status(e);
}

static void monitor_from_errors_and_probe(void) {
    jr_server srv;
    REQUIRE(jr_open(&srv, 0) == 0);
    int port = srv.port;
    const char *store = th_tmpdir();
    opts o = {.from_errors = 1, .probe_ms = 100};
    courier_engine *e = open_eng(store, port, &o, NULL);
    REQUIRE(e);
    reach_log rl;
    memset(&rl, 0, sizeof rl);
    pthread_mutex_init(&rl.m, NULL);
    uint64_t token = 0;
    CHECK_EQ(courier_reachability_add_listener(&token, e, reach_cb, &rl, NULL), COURIER_OK);
    CHECK(token != 0);
    courier_response *resp = NULL;
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/hello");
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    courier_response_free(resp);
    CHECK_EQ(courier_reachability_status(e), COURIER_REACHABILITY_ONLINE);
    /* Listeners get changes in order but may see quick flaps collapsed: let this one through. */
    int64_t until = th_now_ms() + 20000;
    for (;;) {
        pthread_mutex_lock(&rl.m);
        int seen = rl.n;
        pthread_mutex_unlock(&rl.m);
        if (seen >= 1 || th_now_ms() > until) break;
        usleep(5000);
    }
    jr_stop(&srv);
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_E_CANNOT_CONNECT);
    CHECK_EQ(courier_reachability_status(e), COURIER_REACHABILITY_OFFLINE);
    /* Without the network: COURIER_E_OFFLINE, not the connect failure a try would give. */
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_E_OFFLINE);
    /* The probe (TCP to the host that failed) sees the server come back. */
    REQUIRE(jr_start(&srv, port) == 0);
    CHECK_EQ(wait_status(e, COURIER_REACHABILITY_ONLINE), COURIER_REACHABILITY_ONLINE);
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    courier_response_free(resp);
    courier_request_free(r);
    courier_frozen_wait_idle(e, 5000); /* listeners run on the journal thread */
    pthread_mutex_lock(&rl.m);
    CHECK(rl.n >= 3);
    CHECK_EQ(rl.states[0], COURIER_REACHABILITY_ONLINE);
    CHECK_EQ(rl.states[1], COURIER_REACHABILITY_OFFLINE);
    CHECK_EQ(rl.states[rl.n - 1], COURIER_REACHABILITY_ONLINE);
    pthread_mutex_unlock(&rl.m);
    CHECK_EQ(courier_reachability_remove_listener(e, token), COURIER_OK);
    CHECK_EQ(courier_reachability_remove_listener(e, token), COURIER_E_NOT_FOUND);
    courier_engine_close(e);
    jr_stop(&srv);
    jr_free(&srv);
    pthread_mutex_destroy(&rl.m);
}

static void monitor_http_probe_and_app_word(void) {
    jr_server srv;
    REQUIRE(jr_open(&srv, 0) == 0);
    int port = srv.port;
    char probe[64];
    snprintf(probe, sizeof probe, "http://127.0.0.1:%d/probe", port);
    const char *store = th_tmpdir();
    opts o = {.from_errors = 1, .probe = probe, .probe_ms = 100};
    courier_engine *e = open_eng(store, port, &o, NULL);
    REQUIRE(e);
    waiter w;
    w_init(&w, e);
    jr_stop(&srv);
    /* Failing to connect makes the engine offline, and freezes what may be frozen. */
    send_one(e, freezable("POST", "/later", "x", COURIER_FREEZE_AUTO, 0), &w);
    CHECK_EQ(w_wait(&w, 1), 1);
    CHECK_EQ(w.codes[0], COURIER_E_FROZEN);
    CHECK_EQ(wait_status(e, COURIER_REACHABILITY_OFFLINE), COURIER_REACHABILITY_OFFLINE);
    REQUIRE(jr_start(&srv, port) == 0);
    /* The HEAD probe brings it online, which replays the frozen request. */
    CHECK_EQ(wait_status(e, COURIER_REACHABILITY_ONLINE), COURIER_REACHABILITY_ONLINE);
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    CHECK(jr_path_count(&srv, "/probe") >= 1);
    CHECK_EQ(jr_path_count(&srv, "/later"), 1);
    CHECK_EQ(count_of(e), 0);
    /* The app's word holds over detection until it gives it back. */
    CHECK_EQ(courier_reachability_set_offline(e), COURIER_OK);
    courier_response *resp = NULL;
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/x");
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_E_OFFLINE);
    CHECK_EQ(courier_reachability_set_automatic(e), COURIER_OK);
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    courier_response_free(resp);
    courier_request_free(r);
    CHECK_EQ(courier_reachability_status(e), COURIER_REACHABILITY_ONLINE);
    courier_engine_close(e);
    jr_stop(&srv);
    jr_free(&srv);
    w_destroy(&w);
}

TESTS_MAIN(T(freeze_on_cannot_connect), T(frozen_survives_in_the_default_store),
           T(freezing_into_a_temporary_store_warns), T(empty_body_is_kept), T(never_policy_is_not_frozen),
           T(given_id_replaces_older), T(remove_and_remove_all), T(invalid_arguments),
           T(offline_fails_fast_then_replays), T(paused_engine_waits_when_the_network_returns),
           T(a_network_return_undone_sends_nothing), T(replay_in_order_with_keys),
           T(event_snapshot_reads_the_replayed_request), T(final_and_retryable_answers),
           T(manual_policy_waits_for_the_app), T(bounded_concurrency), T(expiry_with_injected_clock),
           T(monitor_from_errors_and_probe), T(monitor_http_probe_and_app_word))
