/*
 * log_lines.h — collecting an engine's log lines in the C tests (a callback sink) and finding them
 * by their JSON fields. Header-only (static functions): each test executable has its own copy.
 */
#ifndef COURIER_TEST_LOG_LINES_H
#define COURIER_TEST_LOG_LINES_H

#include "harness.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- collecting lines ------------------------------------------------------------------------ */

#define MAX_LINES 256

typedef struct lines {
    pthread_mutex_t m;
    int n;
    char *text[MAX_LINES];
    int level[MAX_LINES];
    int frees;
} lines;

static inline void lines_init(lines *l) {
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->m, NULL);
}

static inline void lines_clear(lines *l) {
    pthread_mutex_lock(&l->m);
    for (int i = 0; i < l->n; i++) free(l->text[i]);
    l->n = 0;
    pthread_mutex_unlock(&l->m);
}

static inline void on_line(courier_log_level level, const char *line, size_t len, void *user) {
    lines *l = user;
    pthread_mutex_lock(&l->m);
    if (l->n < MAX_LINES) {
        l->text[l->n] = strndup(line, len);
        l->level[l->n] = level;
        l->n++;
    }
    pthread_mutex_unlock(&l->m);
}

static inline void lines_free_user(void *user) {
    lines *l = user;
    pthread_mutex_lock(&l->m);
    l->frees++;
    pthread_mutex_unlock(&l->m);
}

static inline int lines_count(lines *l) {
    pthread_mutex_lock(&l->m);
    int n = l->n;
    pthread_mutex_unlock(&l->m);
    return n;
}

/* The first line whose "event" is `event` (and, if id != 0, whose request_id is id), parsed: new,
 * courier_json_free it. NULL if none. */
static inline courier_json *find_line(lines *l, const char *event, uint64_t id) {
    courier_json *found = NULL;
    pthread_mutex_lock(&l->m);
    for (int i = 0; i < l->n && !found; i++) {
        courier_json *doc = NULL;
        if (courier_json_parse(&doc, l->text[i], strlen(l->text[i]), NULL, NULL) != COURIER_OK) continue;
        const char *ev = courier_json_string(courier_json_get(doc, "event"), NULL);
        if (ev && strcmp(ev, event) == 0 &&
            (!id || (uint64_t)courier_json_integer(courier_json_get(doc, "request_id")) == id))
            found = doc;
        else
            courier_json_free(doc);
    }
    pthread_mutex_unlock(&l->m);
    return found;
}

static inline const char *jstr(const courier_json *doc, const char *key) {
    return courier_json_string(courier_json_get(doc, key), NULL);
}

/* How many lines have this "event" and, when key is not NULL, the string `value` under `key`; *first
 * (may be NULL) receives the first of them, parsed (new: courier_json_free), or NULL. */
static inline int count_lines(lines *l, const char *event, const char *key, const char *value, courier_json **first) {
    int n = 0;
    if (first) *first = NULL;
    pthread_mutex_lock(&l->m);
    for (int i = 0; i < l->n; i++) {
        courier_json *doc = NULL;
        if (courier_json_parse(&doc, l->text[i], strlen(l->text[i]), NULL, NULL) != COURIER_OK) continue;
        const char *ev = jstr(doc, "event");
        const char *v = key ? jstr(doc, key) : NULL;
        if (ev && strcmp(ev, event) == 0 && (!key || (v && strcmp(v, value) == 0))) {
            n++;
            if (first && !*first) {
                *first = doc;
                continue;
            }
        }
        courier_json_free(doc);
    }
    pthread_mutex_unlock(&l->m);
    return n;
}

#endif
