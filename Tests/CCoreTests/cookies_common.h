/*
 * cookies_common.h — what cookies_test.c and cookies_process_test.c share: an engine on a store
 * (jar on or off, a proxy), a GET returning its body, and what /cookies received.
 */
#ifndef COURIER_COOKIES_COMMON_H
#define COURIER_COOKIES_COMMON_H

#include "harness.h"

#include <stdlib.h>

static courier_engine *open_on(const char *store, int cookies_off, const char *proxy) {
    courier_config *cfg = NULL;
    courier_engine *e = NULL;
    courier_error err;
    if (courier_config_new(&cfg) != COURIER_OK) return NULL;
    courier_config_set_base_url(cfg, th_base());
    if (store) courier_config_set_store_dir(cfg, store);
    else courier_config_set_temporary_store(cfg, 1); /* a jar of its own, in memory */
    if (cookies_off) courier_config_set_cookies(cfg, 0);
    if (proxy) courier_config_set_proxy(cfg, proxy, NULL);
    if (courier_engine_open(&e, cfg, &err) != COURIER_OK) th_fail(__FILE__, __LINE__, "open: %s", err.message);
    courier_config_free(cfg);
    return e;
}

/* GETs target; returns the body (caller frees) and the status in *status; NULL on a transport error. */
static char *get(courier_engine *e, const char *target, int *status) {
    courier_request *r = NULL;
    courier_response *resp = NULL;
    if (courier_request_new(&r, "GET", target) != COURIER_OK) return NULL;
    courier_error err;
    int rc = courier_send_sync(&resp, e, r, &err);
    courier_request_free(r);
    if (rc != COURIER_OK && rc != COURIER_E_HTTP_STATUS) {
        th_fail(__FILE__, __LINE__, "GET %s: %d (%s)", target, rc, err.message);
        return NULL;
    }
    if (status) *status = courier_response_status(resp);
    size_t len = 0;
    const uint8_t *body = courier_response_body(resp, &len);
    char *copy = strndup((const char *)body, len);
    courier_response_free(resp);
    return copy;
}

/* The Cookie header /cookies received, as its JSON text ({"cookie":"..."}). */
static char *cookies_seen(courier_engine *e, const char *base) {
    char url[300];
    snprintf(url, sizeof url, "%s/cookies", base ? base : th_base());
    return get(e, url, NULL);
}

#endif
