/*
 * internal.h — what the core's files share. Never installed, never exported: every function
 * here is built with hidden visibility (only COURIER_API symbols leave the library).
 */
#ifndef COURIER_INTERNAL_H
#define COURIER_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "courier.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#define CR_HIDDEN __attribute__((visibility("hidden")))

#define CR_DEFAULT_TIMEOUT_MS 60000L
#define CR_DEFAULT_MAX_PER_HOST 6L
#define CR_DEFAULT_MAX_TOTAL 64L
#define CR_DEFAULT_MAX_RESPONSE ((int64_t)64 * 1024 * 1024)

/* ---- errors (util.c) ---------------------------------------------------------------------- */

/* Fills *err (may be NULL) with code and a formatted message; returns code. */
CR_HIDDEN int cr_fail(courier_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Clears *err (may be NULL) to "no error". */
CR_HIDDEN void cr_error_clear(courier_error *err);

/* ---- growable byte buffer ---------------------------------------------------------------- */

typedef struct cr_buf {
    char *data; /* always NUL-terminated when non-NULL */
    size_t len;
    size_t cap;
} cr_buf;

CR_HIDDEN int cr_buf_reserve(cr_buf *b, size_t extra);
CR_HIDDEN int cr_buf_append(cr_buf *b, const void *data, size_t len);
CR_HIDDEN int cr_buf_append_str(cr_buf *b, const char *s);
CR_HIDDEN int cr_buf_append_char(cr_buf *b, char c);
CR_HIDDEN void cr_buf_free(cr_buf *b);
/* Hands the buffer's memory to the caller (never NULL on success: "" for empty). */
CR_HIDDEN char *cr_buf_take(cr_buf *b, size_t *len);

/* ---- ordered name/value list -------------------------------------------------------------- */

typedef struct cr_kv {
    char *name;
    char *value;
} cr_kv;

typedef struct cr_kvlist {
    cr_kv *items;
    size_t count;
    size_t cap;
} cr_kvlist;

CR_HIDDEN int cr_kvlist_add(cr_kvlist *l, const char *name, size_t name_len, const char *value, size_t value_len);
CR_HIDDEN int cr_kvlist_copy(cr_kvlist *dst, const cr_kvlist *src);
/* Removes every item whose name equals `name` case-insensitively. */
CR_HIDDEN void cr_kvlist_remove(cr_kvlist *l, const char *name);
/* First value whose name equals `name` case-insensitively, or NULL. */
CR_HIDDEN const char *cr_kvlist_get(const cr_kvlist *l, const char *name);
CR_HIDDEN void cr_kvlist_clear(cr_kvlist *l);

/* ---- strings and encodings ----------------------------------------------------------------- */

CR_HIDDEN char *cr_strdup(const char *s);                 /* NULL in, NULL out */
CR_HIDDEN char *cr_strndup(const char *s, size_t len);
/* Replaces *slot with a copy of s (NULL clears). Returns COURIER_OK or COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_set_string(char **slot, const char *s);
CR_HIDDEN bool cr_utf8_valid(const char *s, size_t len);
/* A header name is an RFC 9110 token. */
CR_HIDDEN bool cr_is_token(const char *s, size_t len);
/* Checks a header for courier_request_add_header: returns OK or the code. */
CR_HIDDEN int cr_check_header(const char *name, size_t name_len, const char *value, size_t value_len);
/* Checks a parameter: UTF-8, no NUL. */
CR_HIDDEN int cr_check_param(const char *name, size_t name_len, const char *value, size_t value_len);
/* Appends s percent-encoded (RFC 3986 unreserved characters kept). */
CR_HIDDEN int cr_percent_encode(cr_buf *out, const char *s, size_t len);
CR_HIDDEN int cr_base64_encode(cr_buf *out, const void *data, size_t len);
/* Checks that url parses as an absolute http or https URL. */
CR_HIDDEN bool cr_url_valid(const char *url);

/* ---- callback registrations (shared, reference counted) ------------------------------------ */

typedef struct cr_callback {
    atomic_int refs;
    void (*fn)(void); /* cast to the real type at the call site */
    void *user;
    courier_user_free_fn user_free;
} cr_callback;

/* A new registration with one reference, or NULL (fn NULL, or no memory: then user_free(user)
 * has already been called if fn was not NULL, so the user pointer never leaks). */
CR_HIDDEN cr_callback *cr_callback_new(void (*fn)(void), void *user, courier_user_free_fn user_free, int *code);
CR_HIDDEN cr_callback *cr_callback_retain(cr_callback *cb);
CR_HIDDEN void cr_callback_release(cr_callback *cb);

/* ---- a set of uint64 ids (open addressing) -------------------------------------------------- */

typedef struct cr_idset {
    uint64_t *slots; /* 0 = empty, UINT64_MAX = deleted */
    size_t cap;      /* power of two */
    size_t used;     /* live + deleted */
    size_t live;
} cr_idset;

CR_HIDDEN int cr_idset_add(cr_idset *s, uint64_t id);
CR_HIDDEN bool cr_idset_has(const cr_idset *s, uint64_t id);
CR_HIDDEN bool cr_idset_remove(cr_idset *s, uint64_t id);
CR_HIDDEN void cr_idset_free(cr_idset *s);

/* ---- configuration (request.c) -------------------------------------------------------------- */

struct courier_config {
    char *base_url;
    cr_kvlist headers;
    cr_kvlist params;
    long timeout_ms;
    char *user_agent;
    long max_per_host;
    long max_total;
    courier_body_encoding body_encoding;
    int64_t max_response_bytes;
    char *ca_file;
    char *pinned_key;
    int insecure;
    char *store_dir;
    cr_callback *validator;
};

/* A deep copy (callbacks retained). NULL on no memory. */
CR_HIDDEN courier_config *cr_config_copy(const courier_config *src);
CR_HIDDEN void cr_config_defaults(courier_config *c);

/* ---- requests (request.c) -------------------------------------------------------------------- */

struct courier_request {
    char *method;
    char *target;
    char *base_url;
    cr_kvlist params;
    int use_default_params;
    cr_kvlist headers;
    char *body;
    size_t body_len;
    int has_body;
    char *content_type;
    int body_encoding; /* -1: the engine's */
    long timeout_ms;   /* 0: the engine's */
    cr_callback *validator;
    cr_callback *customize;
};

struct courier_outgoing {
    char *method;
    char *url;
    cr_kvlist headers;
};

/* ---- transfers: a request made final, and its state on the wire (transport.c) --------------- */

typedef struct cr_transfer {
    uint64_t id;
    courier_engine *engine;
    /* What is sent. */
    char *method;
    char *url;
    cr_kvlist headers;
    char *body;
    size_t body_len;
    int has_body;
    long timeout_ms;
    int64_t max_bytes;
    cr_callback *validator;
    courier_completion_fn done;
    void *user;
    /* On the wire (worker thread only). */
    CURL *easy;
    struct curl_slist *slist;
    cr_buf resp_body;
    cr_kvlist resp_headers;
    int too_large;
    int oom;
    char errbuf[CURL_ERROR_SIZE];
    struct cr_transfer *next;
    struct cr_transfer *prev;
} cr_transfer;

/* Builds the final transfer for a request sent on an engine: URL joined and validated, parameters
 * encoded, headers merged, customize callback run. On failure returns the code (err filled). */
CR_HIDDEN int cr_transfer_prepare(courier_engine *e, const courier_request *r, cr_transfer **out,
                                  courier_error *err);
CR_HIDDEN void cr_transfer_free(cr_transfer *t);

/* transport.c: configures t->easy for t. Returns OK or a code. */
CR_HIDDEN int cr_transport_setup(courier_engine *e, cr_transfer *t);
/* transport.c: what curl brought back for a finished transfer: COURIER_OK with *out_resp (new)
 * whatever the HTTP status, or the transport's failure code (err filled, *out_resp NULL). */
CR_HIDDEN int cr_transport_result(cr_transfer *t, CURLcode result, courier_response **out_resp,
                                  courier_error *err);
/* transport.c: maps a CURLcode to a courier_code. */
CR_HIDDEN int cr_code_from_curl(CURLcode c);

struct courier_response {
    int status;
    uint64_t id;
    char *method;
    char *url;
    cr_kvlist headers;
    char *body;
    size_t body_len;
    courier_metrics metrics;
};

/* ---- the engine (engine.c) ------------------------------------------------------------------- */

struct courier_engine {
    courier_config *config; /* owned copy, read-only after open */
    char *store_dir;
    int store_is_temp;

    pthread_t worker;
    pthread_mutex_t lock;
    /* Guarded by lock. */
    cr_transfer *incoming_head;
    cr_transfer *incoming_tail;
    uint64_t *cancels;
    size_t ncancels;
    size_t cap_cancels;
    int cancel_all;
    int closing;
    cr_idset live; /* ids submitted and not yet completed */

    atomic_uint_fast64_t next_id;
    atomic_long queued;
    atomic_long active;

    /* Worker thread only. */
    CURLM *multi;
    cr_transfer *active_head;
    CURL **pool;
    size_t npool;
};

#endif /* COURIER_INTERNAL_H */
