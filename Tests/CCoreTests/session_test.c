/*
 * session_test.c — adapters, retriers and the authenticator (include/courier/hooks.h, "Sessions") over the
 * loopback server: an adapter that replaces the body (bytes and a file), one that completes from
 * another thread, adapters in order, a failing adapter's user error (nothing sent); retriers'
 * decisions (now, after a delay, no), never after a cancel, the fixed rule first, asked again for a
 * frozen request's resend; the authenticator: 20 concurrent 401s and one refresh, a failing
 * refresh failing every waiter with its error, the loop guard, an expired credential refreshed
 * before the request goes, the credential never sent to another origin (a redirect's included), and
 * a frozen request stored without it and resent later with the credential then in force.
 */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- helpers ---------------------------------------------------------------------------------- */

static courier_config *new_config(void) {
    courier_config *cfg = NULL;
    if (courier_config_new(&cfg) != COURIER_OK) return NULL;
    courier_config_set_base_url(cfg, th_base());
    courier_config_set_temporary_store(cfg, 1);
    return cfg;
}

static courier_engine *open_config(courier_config *cfg) {
    courier_engine *e = NULL;
    courier_error err;
    if (courier_engine_open(&e, cfg, &err) != COURIER_OK) th_fail(__FILE__, __LINE__, "open: %s", err.message);
    courier_config_free(cfg);
    return e;
}

/* Sends r; the code, status and body (caller frees; NULL without a response). err may be NULL. */
static int send_req(courier_engine *e, courier_request *r, int *status, char **body, courier_error *err) {
    courier_response *resp = NULL;
    int rc = courier_send_sync(&resp, e, r, err);
    if (status) *status = courier_response_status(resp);
    if (body) {
        size_t len = 0;
        const uint8_t *b = courier_response_body(resp, &len);
        *body = resp ? strndup((const char *)b, len) : NULL;
    }
    courier_response_free(resp);
    return rc;
}

static courier_request *new_req(const char *method, const char *target) {
    courier_request *r = NULL;
    courier_request_new(&r, method, target);
    return r;
}

/* A fresh token from the server (which from then on accepts that one alone), into buf. */
static void fetch_token(courier_engine *e, char *buf, size_t size) {
    courier_request *r = new_req("POST", "/session/token");
    courier_request_set_authenticated(r, 0);
    char *body = NULL;
    int status = 0;
    int rc = send_req(e, r, &status, &body, NULL);
    courier_request_free(r);
    buf[0] = '\0';
    const char *p = body && rc == COURIER_OK ? strstr(body, "\"token\":\"") : NULL;
    if (p) {
        p += 9;
        size_t n = strcspn(p, "\"");
        snprintf(buf, size, "%.*s", (int)(n < size ? n : size - 1), p);
    }
    free(body);
}

/* ---- adapters ---------------------------------------------------------------------------------- */

/* Replaces the body with its upper-case copy and signs it (X-Body-Sum: the bytes' sum). */
static void upper_adapter(courier_adaptation *a, void *user) {
    (void)user;
    CHECK_EQ(courier_adaptation_attempt(a), 1); /* one send, no retry */
    courier_outgoing *o = courier_adaptation_outgoing(a);
    const uint8_t *body = NULL;
    size_t len = 0;
    CHECK_EQ(courier_outgoing_body(&body, &len, o), COURIER_OK);
    char *up = malloc(len + 1);
    unsigned sum = 0;
    for (size_t i = 0; i < len; i++) {
        up[i] = (char)(body[i] >= 'a' && body[i] <= 'z' ? body[i] - 32 : body[i]);
        sum += (unsigned char)up[i];
    }
    char sig[32];
    snprintf(sig, sizeof sig, "%u", sum);
    CHECK_EQ(courier_outgoing_set_body(o, up, len), COURIER_OK);
    CHECK_EQ(courier_outgoing_set_header(o, "X-Body-Sum", sig), COURIER_OK);
    free(up);
    CHECK_EQ(courier_adaptation_complete(a, COURIER_OK, NULL), COURIER_OK);
}

static void test_adapter_replaces_the_body(void) {
    courier_config *cfg = new_config();
    CHECK_EQ(courier_config_add_adapter(cfg, upper_adapter, NULL, NULL), COURIER_OK);
    courier_engine *e = open_config(cfg);
    REQUIRE(e);
    courier_request *r = new_req("POST", "/echo");
    courier_request_set_body(r, "hello", 5, "text/plain");
    char *body = NULL;
    int status = 0;
    CHECK_EQ(send_req(e, r, &status, &body, NULL), COURIER_OK);
    CHECK_EQ(status, 200);
    CHECK_CONTAINS(body, "\"body\":\"HELLO\"");
    CHECK_CONTAINS(body, "[\"X-Body-Sum\",\"372\"]"); /* H E L L O = 72+69+76+76+79 */
    free(body);
    /* Outside an adapter the body is not seen: a customize callback's view has none. */
    CHECK_EQ(courier_outgoing_body(NULL, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(r);
    courier_engine_close(e);
}

static void file_adapter(courier_adaptation *a, void *path) {
    courier_outgoing *o = courier_adaptation_outgoing(a);
    CHECK(courier_outgoing_body_file(o) == NULL);
    CHECK_EQ(courier_outgoing_set_body_file(o, path), COURIER_OK);
    CHECK_STR(courier_outgoing_body_file(o), path);
    courier_adaptation_complete(a, COURIER_OK, NULL);
}

static void test_adapter_replaces_the_body_with_a_file(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/body.txt", th_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("from the file", f);
    fclose(f);
    courier_engine *e = open_config(new_config());
    REQUIRE(e);
    courier_request *r = new_req("PUT", "/echo");
    courier_request_set_body(r, "in memory", 9, "text/plain");
    courier_request_add_adapter(r, (courier_adapter_fn)file_adapter, path, NULL);
    char *body = NULL;
    CHECK_EQ(send_req(e, r, NULL, &body, NULL), COURIER_OK);
    CHECK_CONTAINS(body, "\"body\":\"from the file\"");
    free(body);
    courier_request_free(r);
    courier_engine_close(e);
}

/* Completes from a thread of its own, after the worker went on. */
static void *complete_later(void *arg) {
    courier_adaptation *a = arg;
    courier_outgoing_set_header(courier_adaptation_outgoing(a), "X-Signed-By", "thread");
    courier_adaptation_complete(a, COURIER_OK, NULL);
    return NULL;
}

static atomic_int async_calls;

static void async_adapter(courier_adaptation *a, void *user) {
    (void)user;
    atomic_fetch_add(&async_calls, 1);
    pthread_t th;
    pthread_create(&th, NULL, complete_later, a);
    pthread_detach(th);
}

static void test_async_adapter_completes_from_another_thread(void) {
    atomic_store(&async_calls, 0);
    courier_engine *e = open_config(new_config());
    REQUIRE(e);
    courier_request *r = new_req("GET", "/echo/async-adapter");
    courier_request_add_adapter(r, async_adapter, NULL, NULL);
    char *body = NULL;
    CHECK_EQ(send_req(e, r, NULL, &body, NULL), COURIER_OK);
    CHECK_CONTAINS(body, "[\"X-Signed-By\",\"thread\"]");
    CHECK_EQ(atomic_load(&async_calls), 1);
    free(body);
    courier_request_free(r);
    courier_engine_close(e);
}

/* Appends its letter to X-Order. */
static void order_adapter(courier_adaptation *a, void *letter) {
    courier_outgoing *o = courier_adaptation_outgoing(a);
    const char *had = courier_outgoing_header(o, "X-Order");
    char v[32];
    snprintf(v, sizeof v, "%s%s", had ? had : "", (const char *)letter);
    courier_outgoing_set_header(o, "X-Order", v);
    courier_adaptation_complete(a, COURIER_OK, NULL);
}

static void test_adapters_run_in_order(void) {
    courier_config *cfg = new_config();
    courier_config_add_adapter(cfg, order_adapter, "a", NULL);
    courier_config_add_adapter(cfg, order_adapter, "b", NULL);
    courier_engine *e = open_config(cfg);
    REQUIRE(e);
    courier_request *r = new_req("GET", "/echo/order");
    courier_request_add_adapter(r, order_adapter, "c", NULL);
    char *body = NULL;
    CHECK_EQ(send_req(e, r, NULL, &body, NULL), COURIER_OK);
    CHECK_CONTAINS(body, "[\"X-Order\",\"abc\"]");
    free(body);
    courier_request_free(r);
    courier_engine_close(e);
}

static atomic_int marker_frees;
static int marker;
static void free_marker(void *p) {
    CHECK(p == &marker);
    atomic_fetch_add(&marker_frees, 1);
}
static atomic_int marker_retains;
static void *retain_marker(void *p) {
    atomic_fetch_add(&marker_retains, 1);
    return p;
}

static void failing_adapter(courier_adaptation *a, void *user) {
    (void)user;
    CHECK_EQ(courier_adaptation_raise(a, COURIER_E_USER, "cannot sign", &marker, free_marker), COURIER_OK);
}

static void test_failing_adapter_fails_the_request_with_its_error(void) {
    atomic_store(&marker_frees, 0);
    courier_engine *e = open_config(new_config());
    REQUIRE(e);
    long before = cts_server_path_count(th_server(), "/echo/adapter-fails");
    courier_request *r = new_req("POST", "/echo/adapter-fails");
    courier_request_set_body(r, "x", 1, "text/plain");
    courier_request_add_adapter(r, failing_adapter, NULL, NULL);
    courier_error err;
    int status = -1;
    CHECK_EQ(send_req(e, r, &status, NULL, &err), COURIER_E_USER);
    CHECK_EQ(err.code, COURIER_E_USER);
    CHECK(courier_error_user_data(&err) == &marker);
    CHECK_EQ(status, 0); /* no response */
    CHECK_EQ(atomic_load(&marker_frees), 0);
    courier_error_clear(&err);
    CHECK_EQ(atomic_load(&marker_frees), 1);
    CHECK_EQ(cts_server_path_count(th_server(), "/echo/adapter-fails"), before); /* nothing sent */
    courier_request_free(r);
    courier_engine_close(e);
}

/* ---- retriers ---------------------------------------------------------------------------------- */

typedef struct retrier_state {
    atomic_int asked;
    int first_attempt;      /* the attempt number the first question said */
    int last_code, last_status;
    uint64_t last_id;       /* what the last question said of the send */
    char last_method[16], last_url[256];
    int retry_until;        /* retry while the attempt is below this */
    int64_t delay_ms;
    int from_thread;
} retrier_state;

static void *answer_later(void *arg) {
    courier_retry_question *q = arg;
    courier_retry_question_answer(q, 0);
    return NULL;
}

static void retrier(courier_retry_question *q, void *user) {
    retrier_state *s = user;
    if (atomic_fetch_add(&s->asked, 1) == 0) s->first_attempt = courier_retry_question_attempt(q);
    s->last_code = courier_retry_question_code(q);
    s->last_status = courier_response_status(courier_retry_question_response(q));
    s->last_id = courier_retry_question_request_id(q);
    snprintf(s->last_method, sizeof s->last_method, "%s", courier_retry_question_method(q));
    snprintf(s->last_url, sizeof s->last_url, "%s", courier_retry_question_url(q));
    if (courier_retry_question_attempt(q) >= s->retry_until) {
        courier_retry_question_answer(q, COURIER_DO_NOT_RETRY);
    } else if (s->from_thread) {
        pthread_t th;
        pthread_create(&th, NULL, answer_later, q);
        pthread_detach(th);
    } else {
        courier_retry_question_answer(q, s->delay_ms);
    }
}

static void test_retrier_decides_now_later_or_no(void) {
    retrier_state s = {.retry_until = 3, .delay_ms = 40};
    courier_engine *e = open_config(new_config());
    REQUIRE(e);
    courier_request *r = new_req("POST", "/status/503"); /* not idempotent: the rule would not retry */
    courier_request_add_retrier(r, retrier, &s, NULL);
    courier_response *resp = NULL;
    courier_error err;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_HTTP_STATUS);
    CHECK_EQ(courier_response_status(resp), 503);
    int attempts = 0;
    int64_t waited = 0;
    courier_response_attempts(&attempts, &waited, resp);
    CHECK_EQ(attempts, 3);
    CHECK_EQ(waited, 80); /* two retries after 40 ms each (chosen, not measured) */
    CHECK_EQ(atomic_load(&s.asked), 3);
    CHECK_EQ(s.first_attempt, 1);
    CHECK_EQ(s.last_code, COURIER_OK); /* the status failed it, the response is there */
    CHECK_EQ(s.last_status, 503);
    CHECK_EQ(s.last_id, courier_response_request_id(resp)); /* the send the question is about */
    CHECK_STR(s.last_method, "POST");
    CHECK_STR(s.last_url, th_url("/status/503"));
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_retrier_answers_from_another_thread(void) {
    retrier_state s = {.retry_until = 2, .from_thread = 1};
    courier_config *cfg = new_config();
    courier_config_add_retrier(cfg, retrier, &s, NULL);
    courier_engine *e = open_config(cfg);
    REQUIRE(e);
    courier_request *r = new_req("GET", "/status/500");
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_E_HTTP_STATUS);
    int attempts = 0;
    courier_response_attempts(&attempts, NULL, resp);
    CHECK_EQ(attempts, 2);
    CHECK_EQ(atomic_load(&s.asked), 2);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_retrier_asked_after_the_fixed_rule(void) {
    retrier_state s = {.retry_until = 0};
    courier_config *cfg = new_config();
    CHECK_EQ(courier_config_set_retry(cfg, 2, 1, 2, 0), COURIER_OK);
    courier_config_add_retrier(cfg, retrier, &s, NULL);
    courier_engine *e = open_config(cfg);
    REQUIRE(e);
    courier_request *r = new_req("GET", "/status/503");
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_E_HTTP_STATUS);
    int attempts = 0;
    courier_response_attempts(&attempts, NULL, resp);
    CHECK_EQ(attempts, 3);           /* the rule's two retries first */
    CHECK_EQ(atomic_load(&s.asked), 1); /* then the retrier, once */
    CHECK_EQ(s.first_attempt, 3);
    courier_response_free(resp);
    /* A success is no failure: nobody asked. */
    courier_request *ok = new_req("GET", "/status/200");
    CHECK_EQ(send_req(e, ok, NULL, NULL, NULL), COURIER_OK);
    CHECK_EQ(atomic_load(&s.asked), 1);
    courier_request_free(ok);
    courier_request_free(r);
    courier_engine_close(e);
}

typedef struct done_wait {
    pthread_mutex_t m;
    pthread_cond_t c;
    int done;
    int code;
} done_wait;

static void on_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id, (void)err;
    courier_response_free(resp);
    done_wait *w = user;
    pthread_mutex_lock(&w->m);
    w->code = code;
    w->done = 1;
    pthread_cond_signal(&w->c);
    pthread_mutex_unlock(&w->m);
}

static void test_retrier_never_asked_after_a_cancel(void) {
    retrier_state s = {.retry_until = 100};
    courier_config *cfg = new_config();
    courier_config_add_retrier(cfg, retrier, &s, NULL);
    courier_engine *e = open_config(cfg);
    REQUIRE(e);
    done_wait w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    long before = cts_server_path_count(th_server(), "/hang");
    courier_request *r = new_req("GET", "/hang");
    uint64_t id = 0;
    REQUIRE(courier_send(&id, e, r, on_done, &w, NULL) == COURIER_OK);
    th_wait_path("/hang", before + 1); /* on the wire */
    CHECK_EQ(courier_cancel(e, id), COURIER_OK);
    pthread_mutex_lock(&w.m);
    while (!w.done) pthread_cond_wait(&w.c, &w.m);
    pthread_mutex_unlock(&w.m);
    CHECK_EQ(w.code, COURIER_E_CANCELLED);
    courier_engine_close(e); /* every turn of the worker has run: a question would have been asked */
    CHECK_EQ(atomic_load(&s.asked), 0);
    courier_request_free(r);
}

/* ---- the authenticator ------------------------------------------------------------------------ */

typedef struct auth_state {
    courier_engine *e;       /* set after open */
    atomic_int refreshes;
    atomic_int applies;
    int fail;                /* the refresh fails with COURIER_E_USER and &marker */
    int bogus;               /* the refresh completes with a token the server refuses */
    long wait_for;           /* the refresh waits until /session/protected saw this many requests */
    int64_t wait_parked;     /* and until this many sends wait off the wire (none on it) */
    char replaced[64];       /* the credential the last refresh replaced ("(none)": none) */
} auth_state;

/* Waits (bounded) until the engine holds n sends, none on the wire: every one waits for the refresh. */
static void wait_parked(courier_engine *e, int64_t n) {
    for (int i = 0; i < 10000; i++) {
        int64_t queued = 0, active = 0;
        courier_engine_pending(&queued, &active, e);
        if (queued == n && active == 0) return;
        usleep(1000);
    }
    th_fail(__FILE__, __LINE__, "the sends did not all wait for the refresh");
}

static void *refresh_thread(void *arg) {
    courier_refresh *rf = ((void **)arg)[0];
    auth_state *s = ((void **)arg)[1];
    free(arg);
    if (s->wait_for) th_wait_path("/session/protected", s->wait_for);
    if (s->wait_parked) wait_parked(s->e, s->wait_parked);
    if (s->fail) {
        courier_refresh_fail(rf, COURIER_E_USER, "refresh refused", &marker, free_marker, retain_marker);
        return NULL;
    }
    if (s->bogus) {
        courier_refresh_complete(rf, "bogus", 0);
        return NULL;
    }
    char token[64];
    fetch_token(s->e, token, sizeof token); /* through the same engine, opted out of the authenticator */
    if (token[0]) courier_refresh_complete(rf, token, 0);
    else courier_refresh_fail(rf, COURIER_E_INTERNAL, "no token", NULL, NULL, NULL);
    return NULL;
}

static void refresh_fn(courier_refresh *rf, void *user) {
    auth_state *s = user;
    const char *old = courier_refresh_credential(rf);
    snprintf(s->replaced, sizeof s->replaced, "%s", old ? old : "(none)");
    atomic_fetch_add(&s->refreshes, 1);
    void **arg = malloc(2 * sizeof *arg);
    arg[0] = rf;
    arg[1] = s;
    pthread_t th;
    pthread_create(&th, NULL, refresh_thread, arg);
    pthread_detach(th);
}

static int count_apply(courier_outgoing *o, const char *credential, void *user) {
    auth_state *s = user;
    atomic_fetch_add(&s->applies, 1);
    char v[128];
    snprintf(v, sizeof v, "Bearer %s", credential);
    return courier_outgoing_set_header(o, "Authorization", v);
}

static courier_engine *open_auth(auth_state *s, const char *credential, int64_t expires, courier_config *cfg) {
    if (!cfg) cfg = new_config();
    courier_config_set_max_connections_per_host(cfg, 32);
    courier_config_set_max_connections(cfg, 32);
    courier_authenticator a = {sizeof a, NULL, count_apply, NULL, refresh_fn};
    CHECK_EQ(courier_config_set_authenticator(cfg, th_base(), &a, s, NULL), COURIER_OK);
    if (credential) CHECK_EQ(courier_config_set_credential(cfg, credential, expires), COURIER_OK);
    s->e = open_config(cfg);
    return s->e;
}

#define N_CONCURRENT 20

typedef struct many {
    pthread_mutex_t m;
    pthread_cond_t c;
    int done, ok, codes[N_CONCURRENT];
    void *users[N_CONCURRENT];
} many;

static void many_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    many *w = user;
    pthread_mutex_lock(&w->m);
    int i = w->done++;
    w->codes[i] = code;
    w->users[i] = err ? courier_error_user_data(err) : NULL;
    if (code == COURIER_OK && courier_response_status(resp) == 200) w->ok++;
    pthread_cond_signal(&w->c);
    pthread_mutex_unlock(&w->m);
    courier_response_free(resp);
}

/* Sends n GETs of /session/protected at once and waits for every answer. */
static void send_many(courier_engine *e, many *w, int n) {
    courier_request *r = new_req("GET", "/session/protected");
    courier_request_set_coalesce(r, 0);
    for (int i = 0; i < n; i++) CHECK_EQ(courier_send(NULL, e, r, many_done, w, NULL), COURIER_OK);
    pthread_mutex_lock(&w->m);
    while (w->done < n) pthread_cond_wait(&w->c, &w->m);
    pthread_mutex_unlock(&w->m);
    courier_request_free(r);
}

static void test_twenty_concurrent_401s_one_refresh(void) {
    auth_state s = {0};
    courier_engine *e = open_auth(&s, "stale", 0, NULL);
    REQUIRE(e);
    long tokens = cts_server_path_count(th_server(), "/session/token");
    s.wait_for = cts_server_path_count(th_server(), "/session/protected") + N_CONCURRENT; /* all 20 refused first */
    many w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, {0}, {0}};
    send_many(e, &w, N_CONCURRENT);
    CHECK_EQ(w.ok, N_CONCURRENT);
    CHECK_EQ(atomic_load(&s.refreshes), 1);
    CHECK_EQ(cts_server_path_count(th_server(), "/session/token"), tokens + 1);
    /* 20 with the stale credential, 20 with the new one. */
    CHECK_EQ(atomic_load(&s.applies), 2 * N_CONCURRENT);
    /* Requests sent afterwards go with the new credential at once. */
    courier_request *r = new_req("GET", "/session/protected");
    CHECK_EQ(send_req(e, r, NULL, NULL, NULL), COURIER_OK);
    CHECK_EQ(atomic_load(&s.refreshes), 1);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_failing_refresh_fails_every_waiter(void) {
    atomic_store(&marker_frees, 0);
    atomic_store(&marker_retains, 0);
    auth_state s = {.fail = 1, .wait_parked = 5};
    courier_engine *e = open_auth(&s, "stale", 0, NULL);
    REQUIRE(e);
    s.wait_for = cts_server_path_count(th_server(), "/session/protected") + 5;
    many w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, {0}, {0}};
    send_many(e, &w, 5);
    CHECK_EQ(atomic_load(&s.refreshes), 1);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(w.codes[i], COURIER_E_USER);
        CHECK(w.users[i] == &marker); /* each failure carried the refresh's error */
    }
    courier_engine_close(e); /* the worker has returned from the last completion */
    CHECK_EQ(atomic_load(&marker_retains), 5); /* one reference per failure */
    CHECK_EQ(atomic_load(&marker_frees), 6);   /* each released once, and the refresh's own */
}

static void test_loop_guard_fails_a_request_refused_after_a_refresh(void) {
    auth_state s = {.bogus = 1};
    courier_engine *e = open_auth(&s, "stale", 0, NULL);
    REQUIRE(e);
    courier_request *r = new_req("GET", "/session/protected");
    courier_error err;
    int status = 0;
    CHECK_EQ(send_req(e, r, &status, NULL, &err), COURIER_E_CREDENTIAL_REFUSED);
    CHECK_EQ(err.code, COURIER_E_CREDENTIAL_REFUSED);
    CHECK_EQ(err.http_status, 401);
    CHECK_EQ(status, 401); /* the refusing response is attached */
    CHECK_EQ(atomic_load(&s.refreshes), 1);
    courier_request_free(r);
    courier_engine_close(e);
}

static int64_t fake_now;
static int64_t fake_clock(void *user) {
    (void)user;
    return __atomic_load_n(&fake_now, __ATOMIC_SEQ_CST);
}

static void test_expired_credential_is_refreshed_before_sending(void) {
    __atomic_store_n(&fake_now, 5000, __ATOMIC_SEQ_CST);
    auth_state s = {0};
    courier_config *cfg = new_config();
    courier_config_set_clock(cfg, fake_clock, NULL, NULL);
    courier_engine *e = open_auth(&s, "expired", 4000, cfg);
    REQUIRE(e);
    long refused = cts_server_path_count(th_server(), "/session/protected");
    courier_request *r = new_req("GET", "/session/protected");
    CHECK_EQ(send_req(e, r, NULL, NULL, NULL), COURIER_OK);
    CHECK_EQ(atomic_load(&s.refreshes), 1);
    CHECK_CONTAINS(s.replaced, "expired"); /* the refresh was told what it replaces */
    CHECK_EQ(cts_server_path_count(th_server(), "/session/protected"), refused + 1); /* never sent stale */
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_credential_never_sent_to_another_origin(void) {
    auth_state s = {0};
    courier_engine *e = open_auth(&s, "secret-token", 0, NULL);
    REQUIRE(e);
    char target[256];
    /* A redirect from the origin to localhost (another origin), and localhost directly. */
    snprintf(target, sizeof target, "/redirect?to=http%%3A%%2F%%2Flocalhost%%3A%d%%2Fecho", cts_server_port(th_server()));
    courier_request *r = new_req("GET", target);
    char *body = NULL;
    CHECK_EQ(send_req(e, r, NULL, &body, NULL), COURIER_OK);
    CHECK(body && !strstr(body, "secret-token") && !strstr(body, "Authorization"));
    free(body);
    courier_request_free(r);
    snprintf(target, sizeof target, "http://localhost:%d/echo", cts_server_port(th_server()));
    r = new_req("GET", target);
    body = NULL;
    CHECK_EQ(send_req(e, r, NULL, &body, NULL), COURIER_OK);
    CHECK(body && !strstr(body, "secret-token"));
    free(body);
    courier_request_free(r);
    /* The origin itself gets it. */
    r = new_req("GET", "/echo");
    body = NULL;
    CHECK_EQ(send_req(e, r, NULL, &body, NULL), COURIER_OK);
    CHECK_CONTAINS(body, "Bearer secret-token");
    free(body);
    courier_request_free(r);
    courier_engine_close(e);
}

/* The frozen request's URL is /reset (a network failure that freezes it); once `swap` is set this
 * engine adapter sends its resends to /session/protected instead. */
static atomic_int swap;
static void swap_adapter(courier_adaptation *a, void *user) {
    (void)user;
    courier_outgoing *o = courier_adaptation_outgoing(a);
    const char *url = courier_outgoing_url(o);
    if (atomic_load(&swap) && strstr(url, "/reset")) courier_outgoing_set_url(o, th_url("/session/protected"));
    courier_adaptation_complete(a, COURIER_OK, NULL);
}

static void test_frozen_request_resent_with_the_credential_in_force(void) {
    atomic_store(&swap, 0);
    auth_state s = {0};
    retrier_state rs = {.retry_until = 0};
    courier_config *cfg = new_config();
    courier_config_set_frozen_paused(cfg, 1);
    courier_config_add_adapter(cfg, swap_adapter, NULL, NULL);
    courier_config_add_retrier(cfg, retrier, &rs, NULL);
    courier_engine *e = open_auth(&s, NULL, 0, cfg); /* no credential: the first request refreshes */
    REQUIRE(e);
    courier_request *r = new_req("POST", "/reset");
    courier_request_set_body(r, "{}", 2, "application/json");
    courier_request_set_freeze(r, COURIER_FREEZE_MANUAL, 0, COURIER_FREEZE_ON_AMBIGUOUS);
    courier_request_set_freeze_id(r, "session-frozen-1");
    courier_error err;
    CHECK_EQ(send_req(e, r, NULL, NULL, &err), COURIER_E_FROZEN);
    courier_error_clear(&err);
    CHECK_EQ(atomic_load(&s.refreshes), 1);
    CHECK_EQ(atomic_load(&s.applies), 1); /* the attempt that reached /reset carried it */
    CHECK_EQ(atomic_load(&rs.asked), 1);  /* the retrier was asked before it froze */
    courier_frozen *f = NULL;
    REQUIRE(courier_frozen_get(&f, e, "session-frozen-1", NULL) == COURIER_OK);
    for (size_t i = 0; i < courier_frozen_header_count(f); i++) {
        const char *name = NULL, *value = NULL;
        courier_frozen_header_at(&name, &value, f, i);
        CHECK(strcasecmp(name, "Authorization") != 0); /* the journal never stores the credential */
    }
    courier_frozen_free(f);
    /* A resend that fails as the send did: the engine's retrier is asked again, and the request
     * stays frozen. */
    CHECK_EQ(courier_frozen_resend(e, "session-frozen-1", NULL), COURIER_OK);
    CHECK_EQ(courier_frozen_wait_idle(e, 10000), COURIER_OK);
    CHECK_EQ(atomic_load(&rs.asked), 2);
    int64_t left = 0;
    CHECK_EQ(courier_frozen_count(&left, e, NULL), COURIER_OK);
    CHECK_EQ(left, 1);
    /* The server moves on: the engine's credential is now refused. The resend gets a 401, one
     * refresh, and goes again with the new credential. */
    char token[64];
    fetch_token(e, token, sizeof token);
    atomic_store(&swap, 1);
    CHECK_EQ(courier_frozen_resend(e, "session-frozen-1", NULL), COURIER_OK);
    CHECK_EQ(courier_frozen_wait_idle(e, 10000), COURIER_OK);
    int code = -1, status = 0;
    CHECK_EQ(courier_frozen_last_outcome(&code, &status, NULL, e, "session-frozen-1", NULL), COURIER_OK);
    CHECK_EQ(code, COURIER_OK);
    CHECK_EQ(status, 200);
    CHECK_EQ(atomic_load(&s.refreshes), 2);
    courier_request_free(r);
    courier_engine_close(e);
    (void)token;
}

/* Replaces the method: a non-token and NULL are refused (the method unchanged), "PUT" taken. */
static void method_adapter(courier_adaptation *a, void *user) {
    (void)user;
    courier_outgoing *o = courier_adaptation_outgoing(a);
    CHECK_EQ(courier_outgoing_set_method(o, "BAD METHOD"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_outgoing_set_method(o, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_outgoing_set_method(NULL, "PUT"), COURIER_E_INVALID_ARGUMENT);
    CHECK_STR(courier_outgoing_method(o), "POST");
    CHECK_EQ(courier_outgoing_set_method(o, "PUT"), COURIER_OK);
    CHECK_STR(courier_outgoing_method(o), "PUT");
    CHECK_EQ(courier_adaptation_complete(a, COURIER_OK, NULL), COURIER_OK);
}

static void test_adapter_replaces_the_method(void) {
    courier_config *cfg = new_config();
    CHECK_EQ(courier_config_add_adapter(cfg, method_adapter, NULL, NULL), COURIER_OK);
    courier_engine *e = open_config(cfg);
    REQUIRE(e);
    courier_request *r = new_req("POST", "/echo/method");
    courier_request_set_body(r, "x", 1, "text/plain");
    char *body = NULL;
    int status = 0;
    CHECK_EQ(send_req(e, r, &status, &body, NULL), COURIER_OK);
    CHECK_EQ(status, 200);
    CHECK_CONTAINS(body, "{\"method\":\"PUT\"");
    CHECK_CONTAINS(body, "\"body\":\"x\""); /* the body goes with the new method */
    free(body);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_arguments(void) {
    courier_config *cfg = new_config();
    courier_authenticator a = {sizeof a, NULL, NULL, NULL, NULL};
    atomic_store(&marker_frees, 0);
    CHECK_EQ(courier_config_set_authenticator(cfg, th_base(), &a, &marker, free_marker), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(atomic_load(&marker_frees), 1);
    a.refresh = refresh_fn;
    CHECK_EQ(courier_config_set_authenticator(cfg, "ftp://x", &a, NULL, NULL), COURIER_E_INVALID_URL);
    CHECK_EQ(courier_config_add_adapter(cfg, NULL, &marker, free_marker), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_retrier(NULL, retrier, &marker, free_marker), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(atomic_load(&marker_frees), 3);
    CHECK_EQ(courier_adaptation_complete(NULL, COURIER_OK, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_retry_question_answer(NULL, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_refresh_complete(NULL, "x", 0), COURIER_E_INVALID_ARGUMENT);
    CHECK(courier_adaptation_outgoing(NULL) == NULL);
    CHECK_EQ(courier_retry_question_code(NULL), 0);
    courier_engine *e = open_config(cfg);
    CHECK_EQ(courier_engine_set_credential(e, "x", 0), COURIER_E_INVALID_ARGUMENT); /* no authenticator */
    courier_engine_close(e);
}

TESTS_MAIN(T(test_adapter_replaces_the_body), T(test_adapter_replaces_the_body_with_a_file),
           T(test_async_adapter_completes_from_another_thread), T(test_adapters_run_in_order),
           T(test_failing_adapter_fails_the_request_with_its_error), T(test_retrier_decides_now_later_or_no),
           T(test_retrier_answers_from_another_thread), T(test_retrier_asked_after_the_fixed_rule),
           T(test_retrier_never_asked_after_a_cancel), T(test_twenty_concurrent_401s_one_refresh),
           T(test_failing_refresh_fails_every_waiter), T(test_loop_guard_fails_a_request_refused_after_a_refresh),
           T(test_expired_credential_is_refreshed_before_sending), T(test_credential_never_sent_to_another_origin),
           T(test_frozen_request_resent_with_the_credential_in_force), T(test_adapter_replaces_the_method),
           T(test_arguments))
