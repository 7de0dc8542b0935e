/*
 * defaults_test.c — courier_setting_default: the defaults bindings read instead of restating
 * them, equal to what the engine uses where a test can see it.
 */
#include "harness.h"

#include <stdatomic.h>
#include <unistd.h>

static int64_t def(courier_setting s) {
    int64_t v = -1;
    CHECK_EQ(courier_setting_default(&v, s), COURIER_OK);
    return v;
}

static void test_every_setting_has_a_default(void) {
    CHECK_EQ(def(COURIER_SETTING_TIMEOUT_MS), 60000);
    CHECK_EQ(def(COURIER_SETTING_MAX_CONNECTIONS_PER_HOST), 5);
    CHECK_EQ(def(COURIER_SETTING_MAX_CONNECTIONS), 64);
    CHECK_EQ(def(COURIER_SETTING_MAX_RESPONSE_BYTES), 64 * 1024 * 1024);
    CHECK_EQ(def(COURIER_SETTING_RETRY_MAX_RETRIES), 3);
    CHECK_EQ(def(COURIER_SETTING_RETRY_BASE_DELAY_MS), 500);
    CHECK_EQ(def(COURIER_SETTING_RETRY_MAX_DELAY_MS), 30000);
    CHECK_EQ(def(COURIER_SETTING_FROZEN_REPLAY_CONCURRENCY), 4);
    CHECK_EQ(def(COURIER_SETTING_FROZEN_BACKOFF_BASE_MS), 1000);
    CHECK_EQ(def(COURIER_SETTING_FROZEN_BACKOFF_MAX_MS), 300000);
    CHECK_EQ(def(COURIER_SETTING_JSON_MAX_DEPTH), 512);
    CHECK_EQ(def(COURIER_SETTING_MONITOR_INTERVAL_MS), 5000);
    CHECK_EQ(def(COURIER_SETTING_LOG_FILE_MAX_BYTES), 1 << 20);
    CHECK_EQ(def(COURIER_SETTING_LOG_FILE_MAX_FILES), 5);
    /* A retry default is a valid rule for the setter. */
    courier_config *c = NULL;
    REQUIRE(courier_config_new(&c) == COURIER_OK);
    CHECK_EQ(courier_config_set_retry(c, (int)def(COURIER_SETTING_RETRY_MAX_RETRIES),
                                      (long)def(COURIER_SETTING_RETRY_BASE_DELAY_MS),
                                      (long)def(COURIER_SETTING_RETRY_MAX_DELAY_MS), 0),
             COURIER_OK);
    courier_config_free(c);
}

static void test_unknown_setting_and_null_out(void) {
    int64_t v = 7;
    CHECK_EQ(courier_setting_default(&v, (courier_setting)0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_setting_default(&v, (courier_setting)9999), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(v, 7);
    CHECK_EQ(courier_setting_default(NULL, COURIER_SETTING_TIMEOUT_MS), COURIER_E_INVALID_ARGUMENT);
}

static void test_defaults_are_what_the_engine_uses(void) {
    courier_json_options o = {.size = sizeof o};
    REQUIRE(courier_json_options_init(&o) == COURIER_OK);
    CHECK_EQ(o.max_depth, def(COURIER_SETTING_JSON_MAX_DEPTH));
}

static atomic_long seen_timeout = -1;
static int start_record(courier_call *call, void *user) {
    (void)user;
    atomic_store(&seen_timeout, courier_call_timeout_ms(call));
    courier_response *r = NULL;
    courier_response_new(&r, 200);
    return courier_call_complete(call, COURIER_OK, r, NULL);
}
static void tweak(courier_config *c) {
    courier_transport vt = {sizeof vt, start_record, NULL};
    courier_config_register_transport(c, "rec", &vt, NULL, NULL);
}

static void test_the_timeout_default_reaches_a_send(void) {
    courier_engine *e = th_engine(tweak);
    REQUIRE(e);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/x");
    courier_request_set_transport(r, "rec");
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_EQ(atomic_load(&seen_timeout), def(COURIER_SETTING_TIMEOUT_MS));
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

TESTS_MAIN(T(test_every_setting_has_a_default), T(test_unknown_setting_and_null_out),
           T(test_defaults_are_what_the_engine_uses), T(test_the_timeout_default_reaches_a_send))
