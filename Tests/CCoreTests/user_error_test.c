/*
 * user_error_test.c — errors raised by user code (courier_raise, courier_call_raise): the send's
 * slot carries the raised user data to courier_send's err, courier_send_sync's err or the
 * completion's error, for every kind of callback, and releases it exactly once (also when nobody
 * reads it, when a retry succeeds, and across many concurrent sends).
 */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* A user error: what a binding would keep (a Swift error box, a Python exception key). */
typedef struct thrown {
    uint64_t tag;
} thrown;

static atomic_int released;
static void release_thrown(void *p) {
    atomic_fetch_add(&released, 1);
    free(p);
}
static thrown *new_thrown(uint64_t tag) {
    thrown *t = malloc(sizeof *t);
    t->tag = tag;
    return t;
}

static courier_request *req(const char *method, const char *path) {
    courier_request *r = NULL;
    courier_request_new(&r, method, path);
    return r;
}

/* courier_send_sync(r) fails with want_code, carrying a raised `thrown`: returns its tag (0: none).
 * err owns it until courier_error_clear, which releases it (counted). *resp (may be NULL) receives
 * the response. */
static uint64_t sync_raised(courier_engine *e, const courier_request *r, int want_code, courier_response **resp) {
    int before = atomic_load(&released);
    courier_error err;
    CHECK_EQ(courier_send_sync(resp, e, r, &err), want_code);
    thrown *t = courier_error_user_data(&err);
    uint64_t tag = t ? t->tag : 0;
    CHECK_EQ(atomic_load(&released), before);
    courier_error_clear(&err);
    CHECK_EQ(atomic_load(&released), before + (t != NULL));
    CHECK(courier_error_user_data(&err) == NULL);
    return tag;
}

/* ---- on the sending thread: customize and before-send ----------------------------------------- */

static int customize_raises(courier_outgoing *o, void *user) {
    (void)o, (void)user;
    return courier_raise(COURIER_E_USER, "customize said no", new_thrown(7), release_thrown);
}

static void test_customize_raise_reaches_send_and_send_sync(void) {
    atomic_store(&released, 0);
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = req("GET", "/echo");
    courier_request_set_customize(r, customize_raises, NULL, NULL);
    courier_error err;
    uint64_t id = 1;
    CHECK_EQ(courier_send(&id, e, r, NULL, NULL, &err), COURIER_E_USER);
    CHECK_EQ(id, 0);
    CHECK_EQ(err.code, COURIER_E_USER);
    thrown *t = courier_error_user_data(&err);
    REQUIRE(t);
    CHECK_EQ(t->tag, 7);
    CHECK_STR(err.message, "customize said no");
    CHECK_EQ(atomic_load(&released), 0); /* err owns it until cleared */
    courier_error_clear(&err);
    CHECK_EQ(atomic_load(&released), 1);
    CHECK(courier_error_user_data(&err) == NULL);

    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_USER);
    CHECK(resp == NULL);
    t = courier_error_user_data(&err);
    CHECK(t && t->tag == 7);
    courier_error_clear(&err);
    CHECK_EQ(atomic_load(&released), 2);

    /* No err: released at once. */
    CHECK_EQ(courier_send(NULL, e, r, NULL, NULL, NULL), COURIER_E_USER);
    CHECK_EQ(atomic_load(&released), 3);
    courier_request_free(r);
    courier_engine_close(e);
}

static int before_raises(courier_outgoing *o, void *user) {
    (void)user;
    if (!strstr(courier_outgoing_url(o), "refuse")) return COURIER_OK;
    return courier_raise(COURIER_E_TIMEOUT, NULL, new_thrown(11), release_thrown);
}
static void tweak_before(courier_config *c) { courier_config_add_interceptor(c, before_raises, NULL, NULL, NULL); }

static void test_before_send_raise_keeps_its_code(void) {
    atomic_store(&released, 0);
    courier_engine *e = th_engine(tweak_before);
    REQUIRE(e);
    courier_request *r = req("GET", "/echo?refuse=1");
    CHECK_EQ(sync_raised(e, r, COURIER_E_TIMEOUT, NULL), 11);
    courier_request_free(r);
    /* A send the interceptor lets through carries nothing. */
    r = req("GET", "/echo");
    courier_error err;
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_OK);
    CHECK(courier_error_user_data(&err) == NULL);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

/* ---- on the worker: after-receive, validator, mock, redirect hook ----------------------------- */

typedef struct seen {
    atomic_int done;
    int code;
    uint64_t tag;
    int had_response;
} seen;

static void record_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    seen *s = user;
    s->code = code;
    thrown *t = courier_error_user_data(err);
    s->tag = t ? t->tag : 0;
    s->had_response = resp != NULL;
    courier_response_free(resp);
    atomic_store(&s->done, 1);
}

static void wait_done(seen *s) {
    int64_t deadline = th_now_ms() + 10000;
    while (!atomic_load(&s->done) && th_now_ms() < deadline) usleep(1000);
    CHECK(atomic_load(&s->done));
}

static int after_raises(uint64_t id, courier_response **resp, void *user) {
    (void)user;
    if (!strstr(courier_response_url(*resp), "raise")) return COURIER_OK;
    return courier_raise(COURIER_E_USER, "inspect threw", new_thrown(id), release_thrown);
}
static void tweak_after(courier_config *c) { courier_config_add_interceptor(c, NULL, after_raises, NULL, NULL); }

static void test_after_receive_raise_reaches_the_completion(void) {
    atomic_store(&released, 0);
    courier_engine *e = th_engine(tweak_after);
    REQUIRE(e);
    courier_request *r = req("GET", "/echo?raise=1");
    seen s = {0};
    uint64_t id = 0;
    CHECK_EQ(courier_send(&id, e, r, record_done, &s, NULL), COURIER_OK);
    wait_done(&s);
    CHECK_EQ(s.code, COURIER_E_USER);
    CHECK_EQ(s.tag, id);
    CHECK(s.had_response); /* the response stays attached */
    /* Released once the completion returned. */
    int64_t deadline = th_now_ms() + 5000;
    while (atomic_load(&released) < 1 && th_now_ms() < deadline) usleep(1000);
    CHECK_EQ(atomic_load(&released), 1);

    courier_error err;
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_USER);
    thrown *t = courier_error_user_data(&err);
    CHECK(t && t->tag == courier_response_request_id(resp));
    CHECK_STR(err.message, "inspect threw");
    CHECK_EQ(atomic_load(&released), 1);
    courier_error_clear(&err);
    CHECK_EQ(atomic_load(&released), 2);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

static int validator_raises(const courier_response *resp, void *user) {
    (void)user;
    courier_raise(COURIER_E_API, NULL, new_thrown((uint64_t)courier_response_status(resp)), release_thrown);
    return 0;
}

static void test_validator_raise_fails_with_its_code(void) {
    atomic_store(&released, 0);
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = req("GET", "/echo");
    courier_request_set_validator(r, validator_raises, NULL, NULL);
    courier_response *resp = NULL;
    CHECK_EQ(sync_raised(e, r, COURIER_E_API, &resp), 200);
    CHECK(resp != NULL);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

static atomic_int mock_calls;
static int mock_raises_once(const courier_outgoing *o, courier_response **out, void *user) {
    (void)o, (void)user;
    if (atomic_fetch_add(&mock_calls, 1) == 0)
        return courier_raise(COURIER_E_NETWORK, NULL, new_thrown(1), release_thrown); /* retried */
    return courier_response_new(out, 200);
}
static int mock_raises(const courier_outgoing *o, courier_response **out, void *user) {
    (void)o, (void)out, (void)user;
    return courier_raise(COURIER_E_USER, NULL, new_thrown(2), release_thrown);
}
static void tweak_mock(courier_config *c) { courier_config_set_mock_enabled(c, 1); }

static void test_mock_raise_and_a_retry_that_succeeds(void) {
    atomic_store(&released, 0);
    courier_engine *e = th_engine(tweak_mock);
    REQUIRE(e);
    courier_request *r = req("GET", "/mocked");
    courier_request_set_mock_callback(r, mock_raises, NULL, NULL);
    CHECK_EQ(sync_raised(e, r, COURIER_E_USER, NULL), 2);
    courier_error err;

    /* The first attempt raises a retryable code, the retry succeeds: released, not delivered. */
    atomic_store(&mock_calls, 0);
    courier_request_set_mock_callback(r, mock_raises_once, NULL, NULL);
    courier_request_set_retry(r, 2, 1, 1, 0);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_OK);
    CHECK_EQ(atomic_load(&mock_calls), 2);
    CHECK(courier_error_user_data(&err) == NULL);
    CHECK_EQ(atomic_load(&released), 2);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

static int hook_raises(const courier_response *resp, courier_outgoing *next, void *user) {
    (void)resp, (void)next, (void)user;
    return courier_raise(COURIER_E_REDIRECT_REFUSED, NULL, new_thrown(3), release_thrown);
}

static void test_redirect_hook_raise(void) {
    atomic_store(&released, 0);
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = req("GET", "/redirect?to=/echo");
    courier_request_set_redirect_hook(r, hook_raises, NULL, NULL);
    courier_response *resp = NULL;
    CHECK_EQ(sync_raised(e, r, COURIER_E_REDIRECT_REFUSED, &resp), 3);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

/* ---- custom transports: start raises, or the call is raised later from another thread ---------- */

static void *complete_later(void *arg) {
    courier_call *call = arg;
    courier_response *attached = NULL;
    courier_response_new(&attached, 502);
    uint64_t id = courier_call_request_id(call);
    CHECK_EQ(courier_call_raise(call, COURIER_E_USER, attached, "the peer hung up", new_thrown(id), release_thrown),
             COURIER_OK);
    return NULL;
}
static int transport_start(courier_call *call, void *user) {
    (void)user;
    if (strstr(courier_call_url(call), "now")) return courier_raise(COURIER_E_USER, NULL, new_thrown(5), release_thrown);
    pthread_t th;
    pthread_create(&th, NULL, complete_later, call);
    pthread_detach(th);
    return COURIER_OK;
}
static void tweak_transport(courier_config *c) {
    courier_transport vt = {sizeof vt, transport_start, NULL};
    courier_config_register_transport(c, "raising", &vt, NULL, NULL);
}

static void test_transport_raise(void) {
    atomic_store(&released, 0);
    courier_engine *e = th_engine(tweak_transport);
    REQUIRE(e);
    courier_request *r = req("GET", "/now");
    courier_request_set_transport(r, "raising");
    CHECK_EQ(sync_raised(e, r, COURIER_E_USER, NULL), 5);
    courier_request_free(r);
    courier_error err;

    r = req("GET", "/later");
    courier_request_set_transport(r, "raising");
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_USER);
    thrown *t = courier_error_user_data(&err);
    REQUIRE(resp);
    CHECK(t && t->tag == courier_response_request_id(resp));
    CHECK_EQ(courier_response_status(resp), 502);
    CHECK_STR(err.message, "the peer hung up");
    courier_error_clear(&err);
    CHECK_EQ(atomic_load(&released), 2);
    courier_response_free(resp);
    courier_request_free(r);
    /* Misuse: not a failure code; the user data is released at once. */
    CHECK_EQ(courier_call_raise(NULL, COURIER_E_USER, NULL, NULL, new_thrown(0), release_thrown),
             COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(atomic_load(&released), 3);
    courier_engine_close(e);
}

/* ---- outside a callback, and many at once ---------------------------------------------------- */

static void test_raise_outside_a_callback_is_refused(void) {
    atomic_store(&released, 0);
    CHECK_EQ(courier_raise(COURIER_E_USER, NULL, new_thrown(0), release_thrown), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(atomic_load(&released), 1);
    CHECK_EQ(courier_raise(COURIER_E_USER, NULL, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK(courier_error_user_data(NULL) == NULL);
    courier_error_clear(NULL);
    CHECK_STR(courier_strerror(COURIER_E_USER), "user code raised an error");
}

#define MANY 300
static seen many[MANY];
static uint64_t many_ids[MANY];

static void test_many_concurrent_raises_each_reach_their_send(void) {
    atomic_store(&released, 0);
    courier_engine *e = th_engine(tweak_after);
    REQUIRE(e);
    for (int i = 0; i < MANY; i++) {
        char path[64];
        snprintf(path, sizeof path, "/echo?raise=%d", i); /* distinct: never coalesced */
        courier_request *r = req("GET", path);
        memset(&many[i], 0, sizeof many[i]);
        CHECK_EQ(courier_send(&many_ids[i], e, r, record_done, &many[i], NULL), COURIER_OK);
        courier_request_free(r);
    }
    for (int i = 0; i < MANY; i++) {
        wait_done(&many[i]);
        CHECK_EQ(many[i].code, COURIER_E_USER);
        CHECK_EQ(many[i].tag, many_ids[i]);
    }
    courier_engine_close(e);
    CHECK_EQ(atomic_load(&released), MANY);
}

TESTS_MAIN(T(test_customize_raise_reaches_send_and_send_sync), T(test_before_send_raise_keeps_its_code),
           T(test_after_receive_raise_reaches_the_completion), T(test_validator_raise_fails_with_its_code),
           T(test_mock_raise_and_a_retry_that_succeeds), T(test_redirect_hook_raise), T(test_transport_raise),
           T(test_raise_outside_a_callback_is_refused), T(test_many_concurrent_raises_each_reach_their_send))
