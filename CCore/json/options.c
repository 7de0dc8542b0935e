/*
 * options.c — the parse options (courier_json_options): their defaults and how a caller's options
 * are read (a sized struct, limits clamped). Both readers resolve them: json.c's jansson parse and
 * json_tape.c's tape. The bottom of json/: it calls no other file of the layer.
 */
#include "json/json_internal.h"

#include <string.h>

static void options_defaults(courier_json_options *o) {
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->max_depth = CR_JSON_DEFAULT_DEPTH;
    o->max_bytes = CR_JSON_DEFAULT_MAX_BYTES;
    o->flags = 0;
    o->max_threads = 1;
    o->parallel_min_bytes = CR_JSON_DEFAULT_PARALLEL_MIN;
}

int courier_json_options_init(courier_json_options *o) {
    if (!CR_SIZED_OK(o, courier_json_options)) return COURIER_E_INVALID_ARGUMENT;
    courier_json_options d;
    options_defaults(&d);
    CR_SIZED_OUT(o, d);
    return COURIER_OK;
}

void cr_json_options_resolve(const courier_json_options *in, courier_json_options *out) {
    options_defaults(out);
    if (!CR_SIZED_OK(in, courier_json_options)) return;
    courier_json_options o = *out;
    CR_SIZED_IN(o, in);
    if (o.max_depth > 0) out->max_depth = o.max_depth > CR_JSON_MAX_DEPTH ? CR_JSON_MAX_DEPTH : o.max_depth;
    if (o.max_bytes > 0) out->max_bytes = o.max_bytes;
    out->flags = o.flags;
    out->max_threads = o.max_threads < 0 ? 1 : o.max_threads;
    out->parallel_min_bytes = o.parallel_min_bytes;
}
