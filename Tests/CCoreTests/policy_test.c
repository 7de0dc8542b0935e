/*
 * policy_test.c — resend policies over the loopback test server and real LMDB stores: a policy that
 * sends only small bodies, one that deletes after N attempts, one another process sharing the store
 * does not have (a forked child: kept, never sent or deleted, reported once), the built-ins
 * (courier.online, courier.start, courier.manual), the policy id in the record, bad arguments; and
 * the journal's decision lines (JSON fields, not prose).
 */
#include "harness.h"
#include "log_lines.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- frozen events ------------------------------------------------------------------------------ */

typedef struct evlog {
    pthread_mutex_t m;
    int kinds[256];
    char ids[256][64];
    const char *reasons[256];
    int codes[256];
    int n;
} evlog;

static void ev_cb(const courier_frozen_event *ev, void *user) {
    evlog *l = user;
    pthread_mutex_lock(&l->m);
    if (l->n < 256) {
        l->kinds[l->n] = ev->kind;
        snprintf(l->ids[l->n], sizeof l->ids[0], "%s", ev->freeze_id ? ev->freeze_id : "");
        l->reasons[l->n] = ev->reason;
        l->codes[l->n] = ev->code;
        l->n++;
    }
    pthread_mutex_unlock(&l->m);
}

static int ev_count(evlog *l, int kind, const char *id) {
    int n = 0;
    pthread_mutex_lock(&l->m);
    for (int i = 0; i < l->n; i++)
        if (l->kinds[i] == kind && (!id || strcmp(l->ids[i], id) == 0)) n++;
    pthread_mutex_unlock(&l->m);
    return n;
}

/* Waits (at most 10 s) until `kind` was reported `want` times for id. */
static int ev_wait(evlog *l, int kind, const char *id, int want) {
    int64_t until = th_now_ms() + 10000;
    while (ev_count(l, kind, id) < want && th_now_ms() < until) usleep(2000);
    return ev_count(l, kind, id);
}

/* ---- engines ------------------------------------------------------------------------------------ */

typedef struct env {
    courier_engine *e;
    evlog ev;
    lines log;
} env;

static void env_open_on(env *x, const char *store, const char *frozen_store, int clock);

static void env_open(env *x, const char *store, int clock) { env_open_on(x, store, NULL, clock); }

/* frozen_store: the journal's own store (a Redis URL), or NULL for the store directory's. */
static void env_open_on(env *x, const char *store, const char *frozen_store, int clock) {
    memset(x, 0, sizeof *x);
    pthread_mutex_init(&x->ev.m, NULL);
    lines_init(&x->log);
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    courier_config_set_base_url(cfg, th_base());
    courier_config_set_store_dir(cfg, store);
    if (frozen_store) courier_config_set_frozen_store(cfg, frozen_store);
    courier_config_set_frozen_poll_ms(cfg, 100);
    courier_config_set_frozen_replay(cfg, 2, 10, 20);
    courier_config_set_frozen_paused(cfg, 1);
    courier_config_set_retry(cfg, 0, 0, 0, 0);
    if (clock) courier_config_set_clock(cfg, th_clock, NULL, NULL);
    courier_error err;
    int rc = courier_engine_open(&x->e, cfg, &err);
    courier_config_free(cfg);
    if (rc) {
        th_fail(__FILE__, __LINE__, "engine open: %s", err.message);
        x->e = NULL;
        return;
    }
    courier_frozen_add_listener(NULL, x->e, ev_cb, &x->ev, NULL);
    courier_log_add_callback(NULL, x->e, COURIER_LOG_TRACE, on_line, &x->log, NULL);
    courier_log_set_component_level(x->e, COURIER_LOG_JOURNAL, COURIER_LOG_DEBUG, NULL);
}

static void env_close(env *x) {
    courier_engine_close(x->e);
    x->e = NULL;
    lines_clear(&x->log);
}

static void on_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id; (void)err;
    atomic_int *codes = user;
    atomic_store(codes, code);
    courier_response_free(resp);
}

/* Freezes a POST of `body` with freeze id `id` naming `policy` (NULL: none); returns the send's code
 * and waits for its completion's code (COURIER_E_FROZEN when frozen). */
static int freeze_flags(courier_engine *e, const char *id, const char *path, const char *body, const char *policy,
                        unsigned flags) {
    courier_request *r = NULL;
    courier_request_new(&r, "POST", path);
    courier_request_set_body(r, body, strlen(body), "text/plain");
    courier_request_set_freeze(r, COURIER_FREEZE_AUTO, 0, flags);
    courier_request_set_freeze_id(r, id);
    if (policy) courier_request_set_resend_policy(r, policy, NULL);
    static atomic_int done;
    atomic_store(&done, 1);
    courier_error err;
    int rc = courier_send(NULL, e, r, on_done, &done, &err);
    courier_request_free(r);
    if (rc) return rc;
    int64_t until = th_now_ms() + 10000;
    while (atomic_load(&done) == 1 && th_now_ms() < until) usleep(1000);
    return atomic_load(&done);
}

static int freeze(courier_engine *e, const char *id, const char *path, const char *body, const char *policy) {
    return freeze_flags(e, id, path, body, policy, COURIER_FREEZE_UNORDERED);
}

static int64_t count_of(courier_engine *e) {
    int64_t n = -1;
    courier_frozen_count(&n, e, NULL);
    return n;
}

/* ---- policies ------------------------------------------------------------------------------------ */

static int small_body(const courier_frozen *f, int64_t age_ms, courier_reachability reach, void *user) {
    (void)age_ms; (void)reach;
    size_t len = 0;
    courier_frozen_body(f, &len);
    return len < *(const size_t *)user;
}

static int after_attempts(const courier_frozen *f, int64_t age_ms, courier_reachability reach, void *user) {
    (void)reach;
    courier_frozen_info info = {.size = sizeof info};
    courier_frozen_get_info(&info, f);
    return age_ms >= 0 && info.attempts >= *(const int *)user;
}

static int always(const courier_frozen *f, int64_t age_ms, courier_reachability reach, void *user) {
    (void)f; (void)age_ms; (void)reach; (void)user;
    return 1;
}

static atomic_int frees;
static void count_free(void *user) {
    (void)user;
    atomic_fetch_add(&frees, 1);
}

/* ---- tests ----------------------------------------------------------------------------------------- */

static void only_small_bodies_are_sent(void) {
    env x;
    env_open(&x, th_tmpdir(), 0);
    REQUIRE(x.e);
    static size_t limit = 16;
    CHECK_EQ(courier_resend_policy_add(x.e, "small-bodies", small_body, NULL, &limit, NULL, NULL), COURIER_OK);
    courier_reachability_set_offline(x.e);
    char big[101];
    memset(big, 'x', 100);
    big[100] = '\0';
    CHECK_EQ(freeze(x.e, "small", "/echo", "tiny", "small-bodies"), COURIER_E_FROZEN);
    CHECK_EQ(freeze(x.e, "big", "/echo", big, "small-bodies"), COURIER_E_FROZEN);
    /* The record names its policy, in its JSON text and its snapshot. */
    courier_frozen *f = NULL;
    REQUIRE(courier_frozen_get(&f, x.e, "big", NULL) == COURIER_OK);
    CHECK_STR(courier_frozen_resend_policy(f), "small-bodies");
    CHECK_CONTAINS(courier_frozen_json(f), "\"resend_policy\":\"small-bodies\"");
    courier_frozen_free(f);
    courier_frozen_resume(x.e);
    courier_reachability_set_online(x.e);
    CHECK_EQ(ev_wait(&x.ev, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED, "small", 1), 1);
    CHECK_EQ(courier_frozen_wait_idle(x.e, 10000), COURIER_OK);
    CHECK_EQ(ev_count(&x.ev, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED, "big"), 0);
    CHECK_EQ(count_of(x.e), 1);
    REQUIRE(courier_frozen_get(&f, x.e, "big", NULL) == COURIER_OK);
    courier_frozen_info info = {.size = sizeof info};
    courier_frozen_get_info(&info, f);
    CHECK_EQ(info.attempts, 0); /* held, never sent */
    courier_frozen_free(f);
    /* Why it was not resent, from the log alone. */
    courier_json *line = NULL;
    CHECK(count_lines(&x.log, "journal_policy", "freeze_id", "big", &line) >= 1);
    REQUIRE(line);
    CHECK_STR(jstr(line, "decision"), "hold");
    CHECK_STR(jstr(line, "reason"), "can_send_false");
    CHECK_STR(jstr(line, "policy"), "small-bodies");
    CHECK_STR(jstr(line, "component"), "journal");
    courier_json_free(line);
    CHECK_EQ(count_lines(&x.log, "journal_replay", "freeze_id", "small", &line), 1);
    REQUIRE(line);
    CHECK_STR(jstr(line, "policy"), "small-bodies");
    CHECK(courier_json_integer(courier_json_get(line, "request_id")) > 0);
    courier_json_free(line);
    CHECK_EQ(count_lines(&x.log, "journal_resent", "freeze_id", "small", &line), 1);
    REQUIRE(line);
    CHECK_STR(jstr(line, "reason"), "succeeded");
    courier_json_free(line);
    CHECK_EQ(count_lines(&x.log, "journal_frozen", "freeze_id", "big", &line), 1);
    REQUIRE(line);
    CHECK_STR(jstr(line, "reason"), "offline");
    CHECK_STR(jstr(line, "policy"), "small-bodies");
    courier_json_free(line);
    /* Replacing the policy lets it go. */
    static size_t roomy = 1000;
    CHECK_EQ(courier_resend_policy_add(x.e, "small-bodies", small_body, NULL, &roomy, NULL, NULL), COURIER_OK);
    courier_frozen_replay(x.e, 0, NULL);
    CHECK_EQ(ev_wait(&x.ev, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED, "big", 1), 1);
    env_close(&x);
}

static void deleted_after_n_attempts(void) {
    env x;
    env_open(&x, th_tmpdir(), 0);
    REQUIRE(x.e);
    static int n = 2;
    atomic_store(&frees, 0);
    CHECK_EQ(courier_resend_policy_add(x.e, "two-tries", NULL, after_attempts, &n, count_free, NULL), COURIER_OK);
    courier_reachability_set_offline(x.e);
    CHECK_EQ(freeze(x.e, "flaky", "/status/503", "x", "two-tries"), COURIER_E_FROZEN);
    courier_frozen_resume(x.e);
    courier_reachability_set_online(x.e);
    CHECK_EQ(ev_wait(&x.ev, COURIER_FROZEN_EVENT_DELETED, "flaky", 1), 1);
    CHECK_EQ(ev_count(&x.ev, COURIER_FROZEN_EVENT_RESENT_FAILED, "flaky"), 2); /* sent twice, then deleted */
    pthread_mutex_lock(&x.ev.m);
    for (int i = 0; i < x.ev.n; i++)
        if (x.ev.kinds[i] == COURIER_FROZEN_EVENT_DELETED) {
            CHECK_STR(x.ev.reasons[i], "can_delete");
            CHECK_EQ(x.ev.codes[i], COURIER_E_DELETED_BY_POLICY);
        }
    pthread_mutex_unlock(&x.ev.m);
    CHECK_EQ(count_of(x.e), 0);
    int code = 0;
    CHECK_EQ(courier_frozen_last_outcome(&code, NULL, NULL, x.e, "flaky", NULL), COURIER_OK);
    CHECK_EQ(code, COURIER_E_DELETED_BY_POLICY);
    courier_json *line = NULL;
    CHECK_EQ(count_lines(&x.log, "journal_policy", "decision", "delete", &line), 1);
    REQUIRE(line);
    CHECK_STR(jstr(line, "freeze_id"), "flaky");
    CHECK_STR(jstr(line, "reason"), "can_delete");
    CHECK_EQ(courier_json_integer(courier_json_get(line, "attempts")), 2);
    courier_json_free(line);
    CHECK_EQ(count_lines(&x.log, "journal_resent", "reason", "retry_later", NULL), 2);
    CHECK_EQ(courier_resend_policy_remove(x.e, "two-tries", NULL), COURIER_OK);
    CHECK_EQ(atomic_load(&frees), 1);
    env_close(&x);
}

/* A second process sharing the store without the policy: the request is kept there (even past its
 * expiry), never sent or deleted, and reported once; the first process's policy then sends it. */
static void unknown_to_a_second_process(void) {
#if defined(__SANITIZE_THREAD__)
    printf("  (skipped under ThreadSanitizer: it does not support fork)\n");
    return;
#endif
    const char *store = th_tmpdir();
    env x;
    env_open(&x, store, 0);
    REQUIRE(x.e);
    CHECK_EQ(courier_resend_policy_add(x.e, "app.sync", always, NULL, NULL, NULL, NULL), COURIER_OK);
    courier_reachability_set_offline(x.e);
    CHECK_EQ(freeze(x.e, "shared", "/echo", "hello", "app.sync"), COURIER_E_FROZEN);
    env_close(&x);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        th_clock_set_offset_ms((int64_t)3 * 24 * 3600 * 1000); /* past the record's expiry (24 h) */
        env y;
        env_open(&y, store, 1);
        if (!y.e) _exit(10);
        courier_frozen_resume(y.e);
        courier_reachability_set_online(y.e);
        if (ev_wait(&y.ev, COURIER_FROZEN_EVENT_POLICY_UNKNOWN, "shared", 1) != 1) _exit(11);
        courier_frozen_replay(y.e, 0, NULL);
        if (courier_frozen_wait_idle(y.e, 10000) != COURIER_OK) _exit(12);
        courier_frozen_replay(y.e, 0, NULL);
        if (courier_frozen_wait_idle(y.e, 10000) != COURIER_OK) _exit(13);
        if (ev_count(&y.ev, COURIER_FROZEN_EVENT_POLICY_UNKNOWN, "shared") != 1) _exit(14);
        if (ev_count(&y.ev, COURIER_FROZEN_EVENT_EXPIRED, NULL) != 0) _exit(15);
        if (ev_count(&y.ev, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED, NULL) != 0) _exit(16);
        if (count_of(y.e) != 1) _exit(17);
        courier_json *line = NULL;
        if (count_lines(&y.log, "journal_policy", "freeze_id", "shared", &line) != 1 || !line) _exit(18);
        int ok = jstr(line, "decision") && strcmp(jstr(line, "decision"), "keep") == 0 && jstr(line, "reason") &&
                 strcmp(jstr(line, "reason"), "not_registered") == 0 && jstr(line, "policy") &&
                 strcmp(jstr(line, "policy"), "app.sync") == 0 && strcmp(jstr(line, "level"), "warning") == 0;
        courier_json_free(line);
        if (!ok) _exit(19);
        courier_frozen *f = NULL;
        if (courier_frozen_get(&f, y.e, "shared", NULL) != COURIER_OK) _exit(20);
        courier_frozen_info info = {.size = sizeof info};
        courier_frozen_get_info(&info, f);
        courier_frozen_free(f);
        if (info.attempts != 0) _exit(21);
        env_close(&y);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), 0);
    env_open(&x, store, 0);
    REQUIRE(x.e);
    CHECK_EQ(count_of(x.e), 1);
    CHECK_EQ(courier_resend_policy_add(x.e, "app.sync", always, NULL, NULL, NULL, NULL), COURIER_OK);
    courier_frozen_resume(x.e);
    courier_frozen_replay(x.e, 0, NULL); /* the child looked at it last on its own (later) clock */
    CHECK_EQ(ev_wait(&x.ev, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED, "shared", 1), 1);
    CHECK_EQ(count_of(x.e), 0);
    env_close(&x);
}

static void builtin_online_and_manual(void) {
    env x;
    env_open(&x, th_tmpdir(), 0);
    REQUIRE(x.e);
    courier_reachability_set_offline(x.e);
    CHECK_EQ(freeze(x.e, "net", "/echo", "b", "courier.online"), COURIER_E_FROZEN);
    CHECK_EQ(freeze(x.e, "app", "/echo", "c", "courier.manual"), COURIER_E_FROZEN);
    courier_frozen *f = NULL;
    REQUIRE(courier_frozen_get(&f, x.e, "app", NULL) == COURIER_OK);
    courier_frozen_info info = {.size = sizeof info};
    courier_frozen_get_info(&info, f);
    CHECK_EQ(info.policy, COURIER_FREEZE_MANUAL);
    courier_frozen_free(f);
    /* UNKNOWN reachability (any other policy's request would go): "online" waits for online. */
    courier_reachability_set_automatic(x.e);
    CHECK_EQ(courier_reachability_status(x.e), COURIER_REACHABILITY_UNKNOWN);
    courier_frozen_resume(x.e);
    courier_frozen_replay(x.e, 0, NULL);
    CHECK_EQ(courier_frozen_wait_idle(x.e, 10000), COURIER_OK);
    CHECK_EQ(ev_count(&x.ev, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED, "net"), 0);
    courier_json *line = NULL;
    CHECK(count_lines(&x.log, "journal_policy", "freeze_id", "net", &line) >= 1);
    REQUIRE(line);
    CHECK_STR(jstr(line, "reason"), "not_online");
    courier_json_free(line);
    courier_reachability_set_online(x.e);
    CHECK_EQ(ev_wait(&x.ev, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED, "net", 1), 1);
    CHECK_EQ(courier_frozen_wait_idle(x.e, 10000), COURIER_OK);
    CHECK_EQ(ev_count(&x.ev, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED, "app"), 0); /* manual: the app's word */
    courier_frozen_replay(x.e, COURIER_REPLAY_MANUAL, NULL);
    CHECK_EQ(ev_wait(&x.ev, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED, "app", 1), 1);
    env_close(&x);
}

static void builtin_start_waits_for_the_next_open(void) {
    const char *store = th_tmpdir();
    env x;
    env_open(&x, store, 0);
    REQUIRE(x.e);
    courier_reachability_set_offline(x.e);
    CHECK_EQ(freeze(x.e, "boot", "/echo", "a", "courier.start"), COURIER_E_FROZEN);
    courier_frozen_resume(x.e);
    courier_reachability_set_online(x.e);
    CHECK_EQ(courier_frozen_wait_idle(x.e, 10000), COURIER_OK);
    CHECK_EQ(ev_count(&x.ev, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED, "boot"), 0);
    courier_json *line = NULL;
    CHECK(count_lines(&x.log, "journal_policy", "freeze_id", "boot", &line) >= 1);
    REQUIRE(line);
    CHECK_STR(jstr(line, "reason"), "not_since_start");
    courier_json_free(line);
    env_close(&x);
    env_open(&x, store, 0); /* the next start */
    REQUIRE(x.e);
    courier_frozen_resume(x.e);
    CHECK_EQ(ev_wait(&x.ev, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED, "boot", 1), 1);
    env_close(&x);
}

/* Frozen requests are ordered per host: one its policy holds keeps the later ones of its host
 * waiting. Its log line says so (level info, the host, how many wait) so that an app can tell why
 * its other requests to that host do not go; with none behind it the line stays at debug. */
static void held_request_says_which_wait_behind_it_on(const char *frozen_store) {
    env x;
    env_open_on(&x, th_tmpdir(), frozen_store, 0);
    REQUIRE(x.e);
    static size_t limit = 16;
    CHECK_EQ(courier_resend_policy_add(x.e, "small-bodies", small_body, NULL, &limit, NULL, NULL), COURIER_OK);
    courier_reachability_set_offline(x.e);
    char big[101];
    memset(big, 'x', 100);
    big[100] = '\0';
    CHECK_EQ(freeze_flags(x.e, "head", "/echo", big, "small-bodies", 0), COURIER_E_FROZEN);
    CHECK_EQ(freeze_flags(x.e, "next-1", "/echo", "a", NULL, 0), COURIER_E_FROZEN);
    CHECK_EQ(freeze_flags(x.e, "next-2", "/echo", "b", NULL, 0), COURIER_E_FROZEN);
    courier_frozen_resume(x.e);
    courier_reachability_set_online(x.e);
    CHECK_EQ(courier_frozen_wait_idle(x.e, 10000), COURIER_OK);
    CHECK_EQ(count_of(x.e), 3); /* the two behind it wait */
    CHECK_EQ(ev_count(&x.ev, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED, NULL), 0);
    courier_json *line = NULL;
    CHECK(count_lines(&x.log, "journal_policy", "freeze_id", "head", &line) >= 1);
    REQUIRE(line);
    CHECK_STR(jstr(line, "decision"), "hold");
    CHECK_STR(jstr(line, "level"), "info");
    CHECK_STR(jstr(line, "host"), th_base());
    CHECK_EQ(courier_json_integer(courier_json_get(line, "waiting")), 2);
    CHECK_CONTAINS(jstr(line, "message"), "2 later frozen requests");
    courier_json_free(line);
    /* Let it go: all three leave, in order. */
    static size_t roomy = 1000;
    CHECK_EQ(courier_resend_policy_add(x.e, "small-bodies", small_body, NULL, &roomy, NULL, NULL), COURIER_OK);
    courier_frozen_replay(x.e, 0, NULL);
    CHECK_EQ(ev_wait(&x.ev, COURIER_FROZEN_EVENT_RESENT_SUCCEEDED, "next-2", 1), 1);
    CHECK_EQ(count_of(x.e), 0);

    /* Held alone (an unordered request keeps no one waiting): the line stays at debug. */
    lines_clear(&x.log);
    courier_reachability_set_offline(x.e);
    CHECK_EQ(courier_resend_policy_add(x.e, "small-bodies", small_body, NULL, &limit, NULL, NULL), COURIER_OK);
    CHECK_EQ(freeze(x.e, "alone", "/echo", big, "small-bodies"), COURIER_E_FROZEN);
    courier_reachability_set_online(x.e);
    courier_frozen_replay(x.e, 0, NULL);
    CHECK_EQ(courier_frozen_wait_idle(x.e, 10000), COURIER_OK);
    CHECK(count_lines(&x.log, "journal_policy", "freeze_id", "alone", &line) >= 1);
    REQUIRE(line);
    CHECK_STR(jstr(line, "level"), "debug");
    CHECK(courier_json_get(line, "waiting") == NULL);
    courier_json_free(line);
    env_close(&x);
}

static void a_held_request_says_which_wait_behind_it(void) { held_request_says_which_wait_behind_it_on(NULL); }

/* The same with the journal on Redis (its hosts' queues are a sorted set): skipped when the
 * library is built without Redis stores or no redis-server starts. */
static void a_held_request_says_which_wait_behind_it_on_redis(void) {
    if (!th_redis_built() || !th_redis_url()) {
        printf("  (skipped: no Redis)\n");
        return;
    }
    char url[400];
    snprintf(url, sizeof url, "%s#held-%d", th_redis_url(), (int)getpid());
    held_request_says_which_wait_behind_it_on(url);
}

static void bad_arguments(void) {
    env x;
    env_open(&x, th_tmpdir(), 0);
    REQUIRE(x.e);
    courier_error err;
    CHECK_EQ(courier_resend_policy_add(x.e, "courier.mine", always, NULL, NULL, NULL, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(err.code, COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_resend_policy_add(x.e, "bad id", always, NULL, NULL, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_resend_policy_add(NULL, "ok", always, NULL, NULL, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_resend_policy_remove(x.e, "nobody", NULL), COURIER_E_NOT_FOUND);
    CHECK_EQ(courier_resend_policy_remove(x.e, "courier.auto", NULL), COURIER_E_INVALID_ARGUMENT);
    courier_request *r = NULL;
    courier_request_new(&r, "POST", "/echo");
    CHECK_EQ(courier_request_set_resend_policy(r, "", NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_resend_policy(NULL, "x", NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_resend_policy(r, "nobody", NULL), COURIER_OK);
    courier_request_set_freeze(r, COURIER_FREEZE_AUTO, 0, 0);
    CHECK_EQ(courier_send(NULL, x.e, r, NULL, NULL, &err), COURIER_E_RESEND_POLICY_UNKNOWN);
    CHECK_EQ(err.code, COURIER_E_RESEND_POLICY_UNKNOWN);
    courier_request_free(r);
    CHECK_STR(courier_strerror(COURIER_E_DELETED_BY_POLICY), "deleted by its resend policy");
    env_close(&x);
}

TESTS_MAIN(T(only_small_bodies_are_sent), T(deleted_after_n_attempts), T(unknown_to_a_second_process),
           T(builtin_online_and_manual), T(builtin_start_waits_for_the_next_open), T(bad_arguments),
           T(a_held_request_says_which_wait_behind_it), T(a_held_request_says_which_wait_behind_it_on_redis))
