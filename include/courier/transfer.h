/*
 * courier/transfer.h — transfers: multipart uploads, file bodies, downloads with resume,
 * progress.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_TRANSFER_H
#define COURIER_INC_TRANSFER_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================================== */
/* Transfers: multipart upload, file bodies, downloads with resume, progress (HLNetworking's   */
/* HLTask)                                                                                     */
/* ========================================================================================== */

/* Adds a part to a multipart/form-data body (the request's parameters then become its first text
 * parts, in order). `data` is copied (len may be 0); filename and content_type may be NULL.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_INVALID_HEADER (CR/LF in filename or type),
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_request_add_part_data(courier_request *request, const char *name, const void *data,
                                              size_t len, const char *filename, const char *content_type);
/* Adds a part whose bytes are streamed from a file when the request is sent (never loaded into
 * memory whole). filename NULL means the path's last component. A file that cannot be opened fails
 * the send with COURIER_E_NOT_FOUND (or COURIER_E_INVALID_ARGUMENT), nothing sent. */
COURIER_API int courier_request_add_part_file(courier_request *request, const char *name, const char *path,
                                              const char *filename, const char *content_type);
/* Adds a header line to the last part added. Errors as courier_request_add_header, and
 * COURIER_E_INVALID_ARGUMENT when there is no part yet. */
COURIER_API int courier_request_add_part_header(courier_request *request, const char *name, const char *value);

/* The body is a file, streamed from disk when sent, with its content type (NULL:
 * application/octet-stream); parameters go in the query. NULL path clears it. A missing file
 * fails the send with COURIER_E_NOT_FOUND. */
COURIER_API int courier_request_set_body_file(courier_request *request, const char *path, const char *content_type);

/* Resume an interrupted download: keep "<path>.part" and its validator, and continue with an HTTP
 * Range request when sent again (after a cancel, a failure, or in a later process). */
#define COURIER_DOWNLOAD_RESUME 0x1u
/* The response body (status < 400) is written to `path` instead of memory: first into
 * "<path>.part" (with "<path>.part.meta" holding the URL and the ETag/Last-Modified validator),
 * moved to `path` once complete. With COURIER_DOWNLOAD_RESUME an existing part is continued when
 * the server answers 206 to Range + If-Range, and started over on 200. The response then has an
 * empty body and courier_response_file gives the path; a download completed by a resume ends with
 * status 206 (the file is whole: test success by the 2xx class or courier_response_file, not by
 * 200). A download that fails or is cancelled leaves "<path>.part" and its ".meta" in place (to
 * resume from; without the flag the next send starts over): remove both to discard it. The engine's maximum response size does
 * not apply to downloads. Errors at send: COURIER_E_STORE (os_error) when the part file cannot be
 * written. NULL path clears it. */
COURIER_API int courier_request_set_download_file(courier_request *request, const char *path, unsigned flags);
/* The file a download was written to, or NULL. Borrowed until the response is freed. */
COURIER_API const char *courier_response_file(const courier_response *response);

/* Progress of one request: bytes so far and expected (0 when unknown), down and up. For a resumed
 * download the counts include the part already on disk. Runs on the worker thread, at most every
 * 100 ms and once more at the end of each attempt; must not block. */
typedef void (*courier_progress_fn)(uint64_t request_id, int64_t down_now, int64_t down_total, int64_t up_now,
                                    int64_t up_total, void *user);
/* Registers a progress callback (NULL removes it). user_free as for validators. */
COURIER_API int courier_request_set_progress(courier_request *request, courier_progress_fn fn, void *user,
                                             courier_user_free_fn user_free);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_TRANSFER_H */
