/*
 * internal.h — every layer's header at once (engine/engine.h includes the others, bottom to top:
 * base/base.h, json/json_internal.h, http/http.h, then the siblings cache/cache.h and
 * journal/journal.h, each on http/http.h). A file of the
 * core includes its own layer's header instead; this one is for code that stands on the whole core.
 */
#ifndef COURIER_INTERNAL_H
#define COURIER_INTERNAL_H

#include "engine/engine.h"

#endif /* COURIER_INTERNAL_H */
