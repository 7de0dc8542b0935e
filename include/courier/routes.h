/*
 * courier/routes.h — accepted statuses, routes, response descriptors, the API catalogue and API
 * version.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_ROUTES_H
#define COURIER_INC_ROUTES_H

#include "base.h"
#include "json.h"
#include "mapping.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================================== */
/* Accepted statuses, routes, response descriptors (HTHttp / RestKit, YTKNetwork)               */
/* ========================================================================================== */

/* Adds lo..hi (inclusive, 100..599) to the statuses this request accepts (YTKNetwork's
 * statusCodeValidator). Without any range a status below 400 is a success; with ranges, a status
 * inside one is a success (a 404 can be) and any other fails with COURIER_E_HTTP_STATUS, response
 * attached (a 200 can). At most 8 ranges. Frozen requests replayed later are judged by the default.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, lo > hi, out of range, a ninth range). */
COURIER_API int courier_request_add_status_codes(courier_request *request, int lo, int hi);

/* A path pattern (RestKit's, "/users/:id/photos") names its parameters with ':' followed by letters,
 * digits, '_' and '.' (a key path into the object: ":user.id"); a backslash makes the next
 * character literal ("/humans/:id\\.json"). */

/* Fills the request's path, a pattern, from `object` (a JSON object, borrowed: copied as needed):
 * each ":name" becomes the value at that key path, percent-encoded (strings as they are, numbers
 * in JSON's form, booleans as true/false). The members not used by the pattern are sent as
 * parameters: in the query string for GET, HEAD and DELETE or when the request has a raw body
 * (nested objects as name[key], arrays as name[]); else in the body, in the request's (else the
 * engine's) body encoding: a JSON body keeps their types, a form body is flattened the same way.
 * Call it once, after the raw body if any. Not thread-safe (the request's thread).
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, not an object, called twice), COURIER_E_ROUTE_PARAMETER
 * (a parameter missing, or an object, array or null; err names it), COURIER_E_NO_MEMORY. */
COURIER_API int courier_request_set_object(courier_request *request, const courier_json *object,
                                           courier_error *err);

/* Routes (RestKit's RKRoute), registered on an engine: a pattern per name, or per object type and
 * method (a class route; method NULL: any method). Copied. A second route of the same name, or of
 * the same type and method, replaces the first. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL engine or pattern, neither name nor type, a method that
 * is not a token, a pattern that does not parse), COURIER_E_NO_MEMORY. */
COURIER_API int courier_engine_add_route(courier_engine *engine, const char *name, const char *object_type,
                                         const char *method, const char *path_pattern, courier_error *err);
/* A new request from the route of that name (its method; GET for a class-less route without
 * one) with its path filled from `object` (may be NULL when the pattern has no parameters), as
 * courier_request_set_object. *out new (courier_request_free). Any thread.
 * Errors: COURIER_E_UNKNOWN_NAME, COURIER_E_ROUTE_PARAMETER, COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_request_new_route(courier_request **out, courier_engine *engine, const char *name,
                                          const courier_json *object, courier_error *err);
/* The same from the route of object_type and method (a route of that type for any method when
 * none for the method). Errors: as courier_request_new_route (COURIER_E_UNKNOWN_NAME: no route). */
COURIER_API int courier_request_new_object(courier_request **out, courier_engine *engine, const char *method,
                                           const char *object_type, const courier_json *object,
                                           courier_error *err);

/* A response descriptor (RestKit's RKResponseDescriptor): which key path and mapping apply to a
 * response, chosen by the request's method (NULL: any), its path (path_pattern, matched against
 * the request's path as given, before the base URL and API version are joined, without the query;
 * NULL: any path) and the response's status (lo..hi inclusive; 0, 0: 200..299, RestKit's default).
 * For each send, the descriptors whose method and pattern match are kept, in registration order;
 * when the answer comes, the first whose statuses hold its status applies:
 * - to a success, when the request has no key path or mapping of its own: as if the request had
 *   this key path (NULL: the root) and mapping (retained; NULL: the value as it is), failing with
 *   COURIER_E_MAPPING when the value is absent or does not fit;
 * - to an error (a status the request does not accept, e.g. a 4xx JSON body): the body is parsed
 *   and mapped into the error model, read with courier_response_data on the response delivered
 *   with COURIER_E_HTTP_STATUS; a body that does not parse or fit leaves no error model (the
 *   failure stays COURIER_E_HTTP_STATUS).
 * Descriptors added later apply to sends made later. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL engine, bad method, pattern, key path or range),
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_engine_add_response_descriptor(courier_engine *engine, const char *method,
                                                       const char *path_pattern, int status_lo, int status_hi,
                                                       const char *key_path, const courier_mapping *mapping,
                                                       courier_error *err);

/* ========================================================================================== */
/* The API catalogue and API version (HLNetworking's HLAPICenter and apiVersion)                */
/* ========================================================================================== */

/* The API version segment (HLNetworking's apiVersion): `version` ("v5"; NULL or "" none) is
 * inserted between the base URL and every relative path ("https://h/base" + "/s" sends
 * "https://h/base/v5/s"), followed by "r" when `review` is nonzero (the review build's "v5r").
 * Absolute URLs are left alone. Up to 63 bytes of URL path characters, '/' allowed inside ("api/v2");
 * no '?', '#', spaces or control bytes. Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_config_set_api_version(courier_config *config, const char *version, int review);
/* This request's version segment instead of the engine's (the engine's review suffix still
 * applies): NULL returns to the engine's, "" sends this request without one. Errors: as above. */
COURIER_API int courier_request_set_api_version(courier_request *request, const char *version);

/* The API catalogue: requests declared once, by module, and used by name ("home.feed"). A
 * declaration is a JSON object in the header's words (docs/design/catalog.md, "The API catalogue"):
 *   {"method": "GET", "path": "/feed/:kind", "params": {"page": 1}, "headers": {"X-A": "b"},
 *    "base_url": "...", "use_default_params": true, "body_encoding": "json", "timeout_ms": 5000,
 *    "api_version": "v6", "status_codes": [[200, 299], 404], "priority": "high",
 *    "cache_policy": "cache_first", "cache_expiry": 60, "cache_key_filter": ["ts"],
 *    "freeze": {"policy": "auto", "expiry_ms": 86400000, "unordered": false, "on_ambiguous": false},
 *    "key_path": "data"}
 * "path" is required; "method" defaults to GET; params values are strings, numbers, booleans or
 * arrays of them; cache_expiry is in seconds (courier_request_set_cache_expiry_ms x 1000); cache_policy
 * and freeze name a courier_cache_policy / courier_freeze_policy in lower case (or give its number);
 * "freeze" may be just the policy's name. */

/* Declares (or replaces) the API `name` (letters, digits, '_', '-', '.'; dots separate modules).
 * The declaration is checked now and copied. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, a bad name), COURIER_E_CATALOG (the declaration's
 * shape; err names the field), COURIER_E_INVALID_URL, COURIER_E_INVALID_HEADER, COURIER_E_NO_MEMORY. */
COURIER_API int courier_engine_add_api(courier_engine *engine, const char *name, const courier_json *declaration,
                                       courier_error *err);
/* Loads a catalogue document: {"apis": {"home": {"feed": {...}, "detail": {...}}, "ping": {...}}}.
 * A member whose value has "path" is an API; any other object is a module whose members are named
 * "module.member" (modules nest). All or nothing: nothing is declared when any API is bad.
 * *out_count (may be NULL) receives the number of APIs declared. Any thread.
 * Errors: COURIER_E_JSON (not JSON), COURIER_E_CATALOG (the document's or a declaration's shape),
 * and those of courier_engine_add_api. */
COURIER_API int courier_engine_load_apis(size_t *out_count, courier_engine *engine, const void *json, size_t len,
                                         courier_error *err);
/* The same from a file. Errors: also COURIER_E_NOT_FOUND (no such file; err->os_error),
 * COURIER_E_INVALID_ARGUMENT (unreadable), COURIER_E_TOO_LARGE (over 64 MiB). */
COURIER_API int courier_engine_load_api_file(size_t *out_count, courier_engine *engine, const char *path,
                                             courier_error *err);
/* A new request made from the declaration of `name`, to which the caller adds what this use
 * needs (parameters, courier_request_set_object for a path with parameters, ...) before sending
 * it on this engine. A path with parameters ("/items/:id") must be filled by
 * courier_request_set_object: sent without an object, the send fails with
 * COURIER_E_ROUTE_PARAMETER (err names the parameter) and nothing is sent. A path without
 * parameters has its backslash escapes removed here, as a route's. *out new (courier_request_free).
 * Any thread. Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_UNKNOWN_NAME, COURIER_E_NO_MEMORY. */
COURIER_API int courier_request_new_api(courier_request **out, courier_engine *engine, const char *name,
                                        courier_error *err);
/* The declared names, sorted, as one JSON array of strings (*out new: courier_free; *out_len may be
 * NULL). Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NO_MEMORY. */
COURIER_API int courier_engine_api_names(char **out, size_t *out_len, const courier_engine *engine);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_ROUTES_H */
