/*
 * network_test.c — network kinds: the machine's links read through netlink (loopback at least),
 * the OS watch reporting the default route's kind, and limits per kind driven through a source the
 * test controls (courier_reachability_report): applied at once to queued requests, and "not on
 * cellular" requests failing while the path is cellular.
 */
#include "harness.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* Polls until cond holds (bounded: the machine may be busy). */
#define WAIT_UNTIL(cond)                                                                  \
    do {                                                                                  \
        for (int w_ = 0; w_ < 2000 && !(cond); w_++) usleep(5000);                        \
    } while (0)

static void test_links_are_read_through_netlink(void) {
    courier_network_kind kind = COURIER_NETWORK_WIFI;
    int expensive = 1;
    courier_error err;
    CHECK_EQ(courier_network_link_kind(&kind, &expensive, "lo", &err), COURIER_OK);
    CHECK_EQ(kind, COURIER_NETWORK_OTHER);
    CHECK_EQ(expensive, 0);
    CHECK_EQ(courier_network_link_kind(&kind, NULL, "no-such-if0", &err), COURIER_E_NOT_FOUND);
    CHECK_EQ(err.code, COURIER_E_NOT_FOUND);
    CHECK_EQ(courier_network_link_kind(&kind, NULL, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_network_link_kind(NULL, NULL, "lo", NULL), COURIER_E_INVALID_ARGUMENT);
}

/* The default route's interface as /proc/net/route says ("" when none). */
static void default_interface(char *out, size_t size) {
    out[0] = 0;
    FILE *f = fopen("/proc/net/route", "r");
    if (!f) return;
    char line[512], ifname[64];
    unsigned long dest, flags;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%63s %lx %*x %lx", ifname, &dest, &flags) == 3 && dest == 0 && (flags & 1)) {
            snprintf(out, size, "%s", ifname);
            break;
        }
    }
    fclose(f);
}

static void watch(courier_config *c) { CHECK_EQ(courier_config_set_network_watch(c, 1), COURIER_OK); }

/* The OS watch reports what the kernel says about the default route (read here on another path). */
static void test_the_os_watch_reports_the_default_route(void) {
    char ifname[64];
    default_interface(ifname, sizeof ifname);
    courier_network_kind expected = COURIER_NETWORK_UNKNOWN;
    int expected_expensive = 0;
    if (ifname[0]) CHECK_EQ(courier_network_link_kind(&expected, &expected_expensive, ifname, NULL), COURIER_OK);
    courier_engine *e = th_engine(watch);
    REQUIRE(e);
    courier_network_kind kind = COURIER_NETWORK_UNKNOWN;
    int expensive = -1;
    int want_status = ifname[0] ? COURIER_REACHABILITY_ONLINE : COURIER_REACHABILITY_OFFLINE;
    WAIT_UNTIL(courier_reachability_status(e) == want_status);
    CHECK_EQ(courier_reachability_status(e), want_status);
    CHECK_EQ(courier_reachability_path(&kind, &expensive, e), COURIER_OK);
    CHECK_EQ(kind, expected);
    CHECK_EQ(expensive, expected_expensive);
    courier_engine_close(e);
}

static void test_reports_are_checked_and_read_back(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_network_kind kind = COURIER_NETWORK_WIFI;
    CHECK_EQ(courier_reachability_path(&kind, NULL, e), COURIER_OK);
    CHECK_EQ(kind, COURIER_NETWORK_UNKNOWN); /* no source said */
    CHECK_EQ(courier_reachability_report(e, COURIER_REACHABILITY_UNKNOWN, (courier_network_kind)9, 0),
             COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_reachability_report(e, (courier_reachability)5, COURIER_NETWORK_WIFI, 0),
             COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_reachability_report(e, COURIER_REACHABILITY_ONLINE, COURIER_NETWORK_CELLULAR, 1), COURIER_OK);
    int expensive = 0;
    CHECK_EQ(courier_reachability_path(&kind, &expensive, e), COURIER_OK);
    CHECK_EQ(kind, COURIER_NETWORK_CELLULAR);
    CHECK_EQ(expensive, 1);
    CHECK_EQ(courier_reachability_status(e), COURIER_REACHABILITY_ONLINE);
    courier_engine_close(e);

    courier_config *c = NULL;
    courier_config_new(&c);
    CHECK_EQ(courier_config_set_network_limits(c, (courier_network_kind)-1, 1, 1, 1), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_network_limits(c, COURIER_NETWORK_WIFI, -1, 1, 1), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_network_limits(c, COURIER_NETWORK_WIFI, 0, 0, 0), COURIER_OK);
    courier_config_free(c);
    CHECK_EQ(courier_request_set_allow_cellular(NULL, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK(strcmp(courier_strerror(COURIER_E_CELLULAR), "unknown error") != 0);
}

typedef struct outcome {
    _Atomic int code;
    _Atomic int done;
} outcome;

static void on_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    (void)err;
    outcome *o = user;
    atomic_store(&o->code, code);
    atomic_store(&o->done, 1);
    courier_response_free(resp);
}

static void send_to(courier_engine *e, const char *path, int allow_cellular, outcome *o) {
    courier_request *r = NULL;
    courier_request_new(&r, "GET", path);
    courier_request_set_coalesce(r, 0);
    courier_request_set_allow_cellular(r, allow_cellular);
    CHECK_EQ(courier_send(NULL, e, r, on_done, o, NULL), COURIER_OK);
    courier_request_free(r);
}

static void cellular_one_per_host(courier_config *c) {
    CHECK_EQ(courier_config_set_network_limits(c, COURIER_NETWORK_CELLULAR, 1, 0, 1), COURIER_OK);
    CHECK_EQ(courier_config_set_network_limits(c, COURIER_NETWORK_WIRED, 1, 0, 0), COURIER_OK);
}

/* The kind's limits hold for queued requests the moment the kind changes. */
static void test_limits_per_kind_apply_at_once(void) {
    courier_engine *e = th_engine(cellular_one_per_host);
    REQUIRE(e);
    courier_reachability_report(e, COURIER_REACHABILITY_UNKNOWN, COURIER_NETWORK_CELLULAR, 1);
    outcome o[3] = {0};
    for (int i = 0; i < 3; i++) send_to(e, "/hang", 1, &o[i]);
    int64_t queued = 0, active = 0;
    WAIT_UNTIL(courier_engine_pending(&queued, &active, e) == COURIER_OK && active == 1 && queued == 2);
    CHECK_EQ(active, 1); /* one per host on cellular */
    CHECK_EQ(queued, 2);
    /* Wi-Fi sets no limits: the engine's own (5 per host) hold, and the queue starts at once. */
    CHECK_EQ(courier_reachability_report(e, COURIER_REACHABILITY_UNKNOWN, COURIER_NETWORK_WIFI, 0), COURIER_OK);
    WAIT_UNTIL(courier_engine_pending(&queued, &active, e) == COURIER_OK && active == 3);
    CHECK_EQ(active, 3);
    CHECK_EQ(queued, 0);
    courier_cancel_all(e);
    WAIT_UNTIL(atomic_load(&o[0].done) && atomic_load(&o[1].done) && atomic_load(&o[2].done));
    courier_engine_close(e);
}

/* "Not on cellular": refused at send while cellular, and failed in the queue when the kind turns. */
static void test_not_on_cellular(void) {
    courier_engine *e = th_engine(cellular_one_per_host);
    REQUIRE(e);
    courier_reachability_report(e, COURIER_REACHABILITY_ONLINE, COURIER_NETWORK_CELLULAR, 1);
    outcome refused = {0}, allowed = {0};
    send_to(e, "/echo", 0, &refused);
    send_to(e, "/echo", 1, &allowed);
    WAIT_UNTIL(atomic_load(&refused.done) && atomic_load(&allowed.done));
    CHECK_EQ(atomic_load(&refused.code), COURIER_E_CELLULAR);
    CHECK_EQ(atomic_load(&allowed.code), COURIER_OK);

    /* Wired, one per host: a hang holds the host, the next waits; the kind turns cellular. */
    courier_reachability_report(e, COURIER_REACHABILITY_ONLINE, COURIER_NETWORK_WIRED, 0);
    outcome hang = {0}, queued_one = {0};
    send_to(e, "/hang", 1, &hang);
    send_to(e, "/echo", 0, &queued_one);
    int64_t queued = 0, active = 0;
    WAIT_UNTIL(courier_engine_pending(&queued, &active, e) == COURIER_OK && active == 1 && queued == 1);
    CHECK_EQ(queued, 1);
    CHECK(!atomic_load(&queued_one.done));
    courier_reachability_report(e, COURIER_REACHABILITY_ONLINE, COURIER_NETWORK_CELLULAR, 1);
    WAIT_UNTIL(atomic_load(&queued_one.done));
    CHECK_EQ(atomic_load(&queued_one.code), COURIER_E_CELLULAR);
    CHECK(!atomic_load(&hang.done)); /* it failed in the queue, not after the hang ended */
    courier_cancel_all(e);
    WAIT_UNTIL(atomic_load(&hang.done));
    courier_engine_close(e);
}

TESTS_MAIN(T(test_links_are_read_through_netlink), T(test_the_os_watch_reports_the_default_route),
           T(test_reports_are_checked_and_read_back), T(test_limits_per_kind_apply_at_once),
           T(test_not_on_cellular))
