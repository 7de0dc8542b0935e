/*
 * courier/mapping.h — mappings, envelopes, a request's JSON (key paths, named results),
 * decoders by MIME type.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_MAPPING_H
#define COURIER_INC_MAPPING_H

#include "base.h"
#include "json.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================================== */
/* Mapping (the seeds' RestKit mappings)                                                       */
/* ========================================================================================== */

/* A mapping describes how an object in a document becomes a normalized object: which members
 * (attributes) to take, from which key path, under which name, of which type, with which
 * coercions; and which members are objects or arrays of objects mapped by other mappings
 * (relationships). Members it does not name are left out. Applied to an array, it maps each
 * element. Built on one thread; once attached to a request, an envelope, a configuration or
 * another mapping it is sealed (setters return COURIER_E_INVALID_ARGUMENT) and may be used from
 * any thread. References are counted: courier_mapping_free releases the caller's, and whatever it
 * was attached to keeps its own. */
typedef struct courier_mapping courier_mapping;

/* Attribute flags. */
#define COURIER_MAP_REQUIRED 0x1u            /* absent (or null) is a mapping error, unless a default */
#define COURIER_MAP_NUMBER_FROM_STRING 0x2u  /* "42" -> 42, "1.5" -> 1.5 for integer, real, number */
#define COURIER_MAP_STRING_FROM_NUMBER 0x4u  /* 42 -> "42", 1.5 -> "1.5" for string */
#define COURIER_MAP_BOOL_FROM_NUMBER 0x8u    /* 0 -> false, 1 -> true for bool (other numbers fail) */
#define COURIER_MAP_NULL_AS_ABSENT 0x10u     /* null is treated as absent: default, or left out */
#define COURIER_MAP_ALL_COERCIONS 0x1Eu

/* Where and why applying a mapping failed. */
typedef struct courier_mapping_error {
    char path[256]; /* key path of the offending value in the document ("data.items.3.price"); "" = root */
    int expected;   /* courier_json_type the mapping expected */
    int found;      /* courier_json_type found; COURIER_JSON_NONE when absent */
    int reserved[6];
} courier_mapping_error;

/* *out is new: release with courier_mapping_free. Errors: COURIER_E_INVALID_ARGUMENT, _NO_MEMORY. */
COURIER_API int courier_mapping_new(courier_mapping **out);
/* Releases the caller's reference. Accepts NULL. Any thread. */
COURIER_API void courier_mapping_free(courier_mapping *mapping);
/* Coercions (COURIER_MAP_* except REQUIRED) applied to every attribute of this mapping, on top of
 * each attribute's own. */
COURIER_API int courier_mapping_set_coercions(courier_mapping *mapping, unsigned flags);
/* Adds an attribute: the value at `source` (a key path relative to the mapped object) becomes the
 * member `dest` (NULL: the last component of source) of the output. `type` is what it must be
 * (courier_json_type; COURIER_JSON_ANY takes anything; an integer is accepted for real and
 * converted; a real without fraction is accepted for integer). An absent value is left out unless
 * a default is set or COURIER_MAP_REQUIRED; an optional null stays null. Strings are copied.
 * Errors: COURIER_E_INVALID_ARGUMENT (sealed, bad path, duplicate dest, bad type or flags). */
COURIER_API int courier_mapping_add_attribute(courier_mapping *mapping, const char *source, const char *dest,
                                              courier_json_type type, unsigned flags);
/* Adds a relationship: the value at `source` is an object (to_many 0) or an array of objects
 * (to_many 1), each mapped by `child` (retained and sealed; it may be `mapping` itself, for trees;
 * other cycles are refused). Flags as for attributes (REQUIRED). */
COURIER_API int courier_mapping_add_relationship(courier_mapping *mapping, const char *source, const char *dest,
                                                 const courier_mapping *child, int to_many, unsigned flags);
/* The value used when the attribute named `dest` is absent (copied). Errors: COURIER_E_NOT_FOUND
 * (no such attribute), COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_mapping_set_default(courier_mapping *mapping, const char *dest, const courier_json *value);
/* Number of attributes and relationships. */
COURIER_API size_t courier_mapping_attribute_count(const courier_mapping *mapping);
/* Applies a mapping to `input` (borrowed). *out is new (courier_json_free); it may share values
 * with the input (even be the input itself, when nothing changes), so treat it as read-only, or
 * courier_json_copy it first. `where` (may be NULL) receives the failure's path and types. Any
 * thread. Errors: COURIER_E_MAPPING (message: "mapping failed at 'items.3.price': expected
 * integer, found string"), COURIER_E_INVALID_ARGUMENT, COURIER_E_NO_MEMORY. */
COURIER_API int courier_mapping_apply(courier_json **out, courier_mapping_error *where,
                                      const courier_mapping *mapping, const courier_json *input, courier_error *err);
/* The same mapping read from a tape: applied to the value at `index` of `input` (borrowed for the
 * call; 0 is the root), with the same rules, results and errors as courier_mapping_apply, without
 * building a jansson document (several times faster: parse with courier_json_tape_parse, map here).
 * *out is a new tape holding only the output (courier_json_tape_free); its objects list members in
 * the mapping's order (an object kept as it is, in the input's, as courier_mapping_apply returns it). `where` (may be NULL) as for courier_mapping_apply. Any thread.
 * Errors: COURIER_E_MAPPING, COURIER_E_INVALID_ARGUMENT (NULL, index beyond the tape),
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_mapping_apply_tape(courier_json_tape **out, courier_mapping_error *where,
                                           const courier_mapping *mapping, const courier_json_tape *input,
                                           size_t index, courier_error *err);

/* ========================================================================================== */
/* Envelopes (the seeds' global errorResponseDescriptor and validResultBlock)                  */
/* ========================================================================================== */

/* An envelope describes the frame every JSON response of an engine shares, such as
 * {"code": 200, "message": "...", "data": ...}: where the code, message and data are, and which
 * codes are success. A response whose code is not a success fails with COURIER_E_API, the message
 * in the error and the response attached (courier_response_envelope gives code and message).
 * Applied to responses with a status below 400 whose content type has a decoder. Sealed and
 * reference counted like mappings. */
typedef struct courier_envelope courier_envelope;

/* Decides success instead of the codes: `document` is the whole parsed body (borrowed for the
 * call); has_code tells whether `code` was found; message may be NULL. Return nonzero for success.
 * Runs on the engine's worker thread. */
typedef int (*courier_envelope_check_fn)(const courier_json *document, int has_code, int64_t code,
                                         const char *message, void *user);

COURIER_API int courier_envelope_new(courier_envelope **out);
/* Releases the caller's reference. Accepts NULL. */
COURIER_API void courier_envelope_free(courier_envelope *envelope);
/* Key path of the code (an integer, or a string of digits). required: a body without it fails
 * with COURIER_E_MAPPING; otherwise a body without a code passes. NULL: no code. */
COURIER_API int courier_envelope_set_code_path(courier_envelope *envelope, const char *key_path, int required);
/* Key path of the message (a string). NULL: none. */
COURIER_API int courier_envelope_set_message_path(courier_envelope *envelope, const char *key_path);
/* Key path of the business data: a request's default result when it names no key path. */
COURIER_API int courier_envelope_set_data_path(courier_envelope *envelope, const char *key_path);
/* Success codes: each added code, and the range if set. With neither, 200..299 are success. */
COURIER_API int courier_envelope_add_success_code(courier_envelope *envelope, int64_t code);
COURIER_API int courier_envelope_set_success_range(courier_envelope *envelope, int64_t lo, int64_t hi);
/* A mapping the whole body must satisfy first (retained; NULL removes). Its output is not kept. */
COURIER_API int courier_envelope_set_mapping(courier_envelope *envelope, const courier_mapping *mapping);
/* The check callback (NULL removes). user_free as for validators. */
COURIER_API int courier_envelope_set_check(courier_envelope *envelope, courier_envelope_check_fn fn, void *user,
                                           courier_user_free_fn user_free);
/* The envelope of every request of engines opened with this configuration (retained; NULL: none). */
COURIER_API int courier_config_set_envelope(courier_config *config, const courier_envelope *envelope);
/* This request's envelope, replacing the engine's (retained); NULL: this request uses none. */
COURIER_API int courier_request_set_envelope(courier_request *request, const courier_envelope *envelope);

/* ========================================================================================== */
/* A request's JSON: key paths, mappings, named results                                        */
/* ========================================================================================== */

/* The key path of the request's business data (the seeds' keyPath), from the document's root;
 * NULL or "" clears it (then the envelope's data path, else the whole document). Copied. A
 * response without a value there fails the request with COURIER_E_MAPPING. */
COURIER_API int courier_request_set_key_path(courier_request *request, const char *key_path);
/* The mapping applied to the value at the key path (retained and sealed; NULL removes). */
COURIER_API int courier_request_set_mapping(courier_request *request, const courier_mapping *mapping);
/* Result flags. */
#define COURIER_RESULT_OPTIONAL 0x1u /* an absent value gives no result instead of failing */
/* A named result (the seeds' responseDescriptors): the value at key_path (NULL: as the default
 * result), mapped by `mapping` (retained; may be NULL), read with courier_response_result.
 * Errors: COURIER_E_INVALID_ARGUMENT (empty or repeated name, bad path or flags). */
COURIER_API int courier_request_add_result(courier_request *request, const char *name, const char *key_path,
                                           const courier_mapping *mapping, unsigned flags);

/* When a request has a key path, mapping or results, or its engine an envelope, the body of a
 * response with a status below 400 is parsed once on the worker thread before the validator runs,
 * and the envelope, key paths and mappings are applied: failures complete the request with
 * COURIER_E_JSON (body not decodable), COURIER_E_API (envelope) or COURIER_E_MAPPING, response
 * attached. Otherwise the body is parsed on first use. */

/* The parsed body: decoded by the decoder of its content type (JSON for application/json,
 * +json and types registered as JSON; a custom decoder; no Content-Type is read as JSON). Parsed
 * at most once, by the first caller (any thread). Borrowed: valid until the response is freed.
 * NULL when it cannot be decoded; courier_response_parse_json says why (COURIER_E_JSON,
 * COURIER_E_TOO_LARGE, COURIER_E_NO_MEMORY). */
COURIER_API const courier_json *courier_response_json(const courier_response *response);
COURIER_API int courier_response_parse_json(const courier_json **out, const courier_response *response,
                                            courier_error *err);
/* The default result: the value at the request's key path after its mapping; without key path or
 * mapping, the envelope's data; without envelope either, the whole document. NULL when absent.
 * Borrowed until the response is freed. */
COURIER_API const courier_json *courier_response_data(const courier_response *response);
/* A named result; NULL when absent or unknown. Borrowed until the response is freed. */
COURIER_API const courier_json *courier_response_result(const courier_response *response, const char *name);
/* The same results read on the tape, with no jansson document made: the result named `name` (NULL:
 * the default result, as courier_response_data: without key path, mapping or envelope data, the
 * whole body, parsed into a tape on first use by any thread) as *out_tape, the tape holding it,
 * and *out_index, its entry. The response's key path, envelope and mappings are applied on the tape when the
 * answer comes, so this reads what was computed then. *out_tape is borrowed until the response is freed
 * (read it with courier_json_tape_entries and the other tape readers, from any thread). Any thread.
 * Errors: COURIER_E_NOT_FOUND (absent, or no such result), COURIER_E_JSON (the body cannot be
 * decoded; err says why), COURIER_E_TOO_LARGE, COURIER_E_INVALID_ARGUMENT (NULL response, out_tape or
 * out_index), COURIER_E_NO_MEMORY. */
COURIER_API int courier_response_result_tape(const courier_json_tape **out_tape, size_t *out_index,
                                             const courier_response *response, const char *name, courier_error *err);
/* The envelope's code and message (borrowed until freed; NULL when absent). Errors:
 * COURIER_E_NOT_FOUND (no code: no envelope applied, or none in the body). */
COURIER_API int courier_response_envelope(int64_t *out_code, const char **out_message,
                                          const courier_response *response);
/* Where mapping failed, after COURIER_E_MAPPING. Errors: COURIER_E_NOT_FOUND (no mapping error). */
COURIER_API int courier_response_mapping_error(courier_mapping_error *out, const courier_response *response);

/* ========================================================================================== */
/* Serializers by MIME type (the seeds' RKMIMETypeSerialization)                               */
/* ========================================================================================== */

/* Decodes a body into a document: set *out (new; build it with courier_json_parse or the
 * courier_json_new_* functions) and return COURIER_OK, or return a negative code (err, never NULL,
 * may carry a message). `body` and `content_type` are borrowed for the call. Runs on the engine's
 * worker thread, or on the thread that first asks for the response's JSON. */
typedef int (*courier_decoder_fn)(const uint8_t *body, size_t len, const char *content_type, courier_json **out,
                                  courier_error *err, void *user);
/* Decodes this MIME type ("text/html"; "text/ *" without the space for a whole type) as JSON.
 * Later registrations win over earlier ones and over the built-in JSON types. Errors:
 * COURIER_E_INVALID_ARGUMENT (not type/subtype). */
COURIER_API int courier_config_add_json_type(courier_config *config, const char *mime_type);
/* Decodes this MIME type with a callback. user_free as for validators. */
COURIER_API int courier_config_set_decoder(courier_config *config, const char *mime_type, courier_decoder_fn fn,
                                           void *user, courier_user_free_fn user_free);
/* Parse limits for response bodies (copied; NULL restores the defaults). */
COURIER_API int courier_config_set_json_options(courier_config *config, const courier_json_options *options);

/* A JSON body (serialized now with courier_json_dump's flags; Content-Type application/json).
 * Like courier_request_set_body, parameters then go in the query string. */
COURIER_API int courier_request_set_json_body(courier_request *request, const courier_json *value, unsigned flags);
/* A form body (application/x-www-form-urlencoded) from an object: name=value for each member,
 * nested objects as name[key]=..., arrays as name[]=..., booleans as true/false, null as empty. */
COURIER_API int courier_request_set_form_body(courier_request *request, const courier_json *object);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_MAPPING_H */
