/*
 * example.c — Courier from C, built against the installed library:
 *
 *   cc -std=c11 example.c $(pkg-config --cflags --libs courier) -o example
 *   ./example http://127.0.0.1:8080 [STORE_DIR] [--replay]
 *
 * It opens an engine on a store directory (shared with any other process or language that opens
 * the same one), sends a GET through the cache (cache-first: the second send is answered from
 * the store without the network), reads the JSON the core parsed, and lists the frozen requests
 * of the store's journal; with --replay it resends them (manual ones included) and waits.
 * Output: one "key=value" line per fact, so scripts and tests can read it. Exit status 0 on
 * success, 1 on a failure (the courier_error message on stderr).
 */
#include <courier.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int fail(const char *what, int code, const courier_error *err) {
    fprintf(stderr, "example: %s: %s (%s)\n", what, courier_strerror(code), err ? err->message : "");
    return 1;
}

/* Sends GET /cache?body=shared with the cache-first policy; prints where the answer came from. */
static int cached_get(courier_engine *engine, const char *label) {
    courier_request *req = NULL;
    courier_error err;
    int rc = courier_request_new(&req, "GET", "/cache");
    if (rc == COURIER_OK) rc = courier_request_add_param(req, "body", "shared");
    if (rc == COURIER_OK) rc = courier_request_set_cache_policy(req, COURIER_CACHE_CACHE_FIRST);
    if (rc == COURIER_OK) rc = courier_request_set_cache_expiry_ms(req, 300000);
    if (rc != COURIER_OK) {
        courier_request_free(req);
        return fail("request", rc, NULL);
    }
    courier_response *resp = NULL;
    rc = courier_send_sync(&resp, engine, req, &err); /* the request is copied: free it any time */
    courier_request_free(req);
    if (rc != COURIER_OK) {
        courier_response_free(resp);
        return fail("send", rc, &err);
    }
    size_t len = 0;
    const uint8_t *body = courier_response_body(resp, &len); /* borrowed until the response is freed */
    printf("%s.status=%d\n%s.from_cache=%d\n%s.body=%.*s\n", label, courier_response_status(resp), label,
           courier_response_from_cache(resp), label, (int)len, (const char *)body);
    courier_response_free(resp);
    return 0;
}

/* GET /json and one value of the document the core parsed. */
static int json_get(courier_engine *engine) {
    courier_request *req = NULL;
    courier_error err;
    int rc = courier_request_new(&req, "GET", "/json");
    if (rc != COURIER_OK) return fail("request", rc, NULL);
    courier_response *resp = NULL;
    rc = courier_send_sync(&resp, engine, req, &err);
    courier_request_free(req);
    if (rc != COURIER_OK) {
        courier_response_free(resp);
        return fail("send /json", rc, &err);
    }
    const courier_json *doc = courier_response_json(resp); /* borrowed from the response */
    const char *name = courier_json_string(courier_json_path(doc, "data.name"), NULL);
    printf("json.data.name=%s\n", name ? name : "(none)");
    courier_response_free(resp);
    return 0;
}

static int list_frozen(courier_engine *engine) {
    courier_frozen_list *list = NULL;
    courier_error err;
    int rc = courier_frozen_list_requests(&list, engine, &err);
    if (rc != COURIER_OK) return fail("frozen list", rc, &err);
    size_t n = courier_frozen_list_count(list);
    printf("frozen.count=%zu\n", n);
    for (size_t i = 0; i < n; i++) {
        const courier_frozen *f = courier_frozen_list_at(list, i); /* borrowed from the list */
        printf("frozen.%zu=%s %s %s\n", i, courier_frozen_id(f), courier_frozen_method(f), courier_frozen_url(f));
    }
    courier_frozen_list_free(list);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: example BASE_URL [STORE_DIR] [--replay]\n");
        return 2;
    }
    const char *store = argc > 2 && strcmp(argv[2], "--replay") != 0 ? argv[2] : NULL;
    int replay = argc > 2 && strcmp(argv[argc - 1], "--replay") == 0;

    courier_config *config = NULL;
    int rc = courier_config_new(&config);
    if (rc == COURIER_OK) rc = courier_config_set_base_url(config, argv[1]);
    if (rc == COURIER_OK) rc = courier_config_set_timeout_ms(config, 10000);
    if (rc == COURIER_OK && store) rc = courier_config_set_store_dir(config, store);
    /* a tool that looks at the journal: replay only when asked */
    if (rc == COURIER_OK) rc = courier_config_set_frozen_paused(config, 1);
    if (rc != COURIER_OK) {
        courier_config_free(config);
        return fail("config", rc, NULL);
    }
    courier_engine *engine = NULL;
    courier_error err;
    rc = courier_engine_open(&engine, config, &err);
    courier_config_free(config); /* the engine copied what it needs */
    if (rc != COURIER_OK) return fail("open", rc, &err);

    printf("version=%s\n", courier_version());
    int status = cached_get(engine, "first") || cached_get(engine, "second") || json_get(engine) ||
                 list_frozen(engine);
    if (!status && replay) {
        rc = courier_frozen_replay(engine, COURIER_REPLAY_MANUAL, &err);
        if (rc != COURIER_OK) status = fail("replay", rc, &err);
        else if ((rc = courier_frozen_wait_idle(engine, 10000)) != COURIER_OK) status = fail("wait idle", rc, NULL);
        else {
            int64_t left = -1;
            courier_frozen_count(&left, engine, NULL);
            printf("replayed.left=%" PRId64 "\n", left);
        }
    }
    int64_t bytes = 0, count = 0;
    if (!status && courier_cache_size(&bytes, &count, engine, &err) == COURIER_OK)
        printf("cache.count=%" PRId64 "\ncache.bytes=%" PRId64 "\n", count, bytes);
    courier_engine_close(engine);
    return status;
}
