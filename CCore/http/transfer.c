/*
 * transfer.c — bodies and answers that do not fit in memory: multipart/form-data (parts from bytes
 * or streamed from files, with their own headers), a file as the body, downloads to a file with
 * resume (a part file and its validator per download, Range + If-Range), and progress.
 */
#include "http/http.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- parts ---------------------------------------------------------------------------------- */

static void part_clear(cr_part *p) {
    free(p->name);
    free(p->data);
    free(p->path);
    free(p->filename);
    free(p->content_type);
    cr_kvlist_clear(&p->headers);
}

void cr_parts_free(cr_parts *p) {
    if (!p) return;
    for (size_t i = 0; i < p->count; i++) part_clear(&p->items[i]);
    free(p->items);
    free(p);
}

static cr_part *parts_add(cr_parts **pp) {
    if (!*pp && !(*pp = calloc(1, sizeof **pp))) return NULL;
    cr_parts *p = *pp;
    if (p->count == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 4;
        cr_part *items = realloc(p->items, cap * sizeof *items);
        if (!items) return NULL;
        p->items = items;
        p->cap = cap;
    }
    cr_part *part = &p->items[p->count];
    memset(part, 0, sizeof *part);
    return part;
}

static int check_text(const char *s, const char *what) {
    (void)what;
    if (!s) return COURIER_OK;
    return cr_check_header("X", 1, s, strlen(s));
}

static int add_part(courier_request *r, const char *name, const void *data, size_t len, const char *path,
                    const char *filename, const char *content_type) {
    if (!r || !name || (!data && len)) return COURIER_E_INVALID_ARGUMENT;
    int rc;
    if ((rc = cr_check_param(name, strlen(name), "", 0)) || (rc = check_text(filename, "filename")) ||
        (rc = check_text(content_type, "content type")) || (rc = check_text(name, "name")))
        return rc;
    cr_part *p = parts_add(&r->parts);
    if (!p) return COURIER_E_NO_MEMORY;
    if (!(p->name = cr_strdup(name)) || (path && !(p->path = cr_strdup(path))) ||
        (!path && !(p->data = cr_strndup(data ? data : "", len))) ||
        (filename && !(p->filename = cr_strdup(filename))) ||
        (content_type && !(p->content_type = cr_strdup(content_type)))) {
        part_clear(p);
        return COURIER_E_NO_MEMORY;
    }
    p->len = len;
    r->parts->count++;
    return COURIER_OK;
}

int courier_request_add_part_data(courier_request *r, const char *name, const void *data, size_t len,
                                  const char *filename, const char *content_type) {
    return add_part(r, name, data, len, NULL, filename, content_type);
}

int courier_request_add_part_file(courier_request *r, const char *name, const char *path, const char *filename,
                                  const char *content_type) {
    if (!path || !*path) return COURIER_E_INVALID_ARGUMENT;
    if (!filename) {
        const char *slash = strrchr(path, '/');
        filename = slash ? slash + 1 : path;
    }
    return add_part(r, name, NULL, 0, path, filename, content_type);
}

int courier_request_add_part_header(courier_request *r, const char *name, const char *value) {
    if (!r || !name || !value || !r->parts || !r->parts->count) return COURIER_E_INVALID_ARGUMENT;
    int rc = cr_check_header(name, strlen(name), value, strlen(value));
    if (rc) return rc;
    return cr_kvlist_add(&r->parts->items[r->parts->count - 1].headers, name, strlen(name), value, strlen(value));
}

int courier_request_set_body_file(courier_request *r, const char *path, const char *content_type) {
    if (!r || (path && !*path)) return COURIER_E_INVALID_ARGUMENT;
    int rc = check_text(content_type, "content type");
    if (rc) return rc;
    if ((rc = cr_set_string(&r->body_file, path))) return rc;
    return cr_set_string(&r->body_file_type, path ? (content_type ? content_type : "application/octet-stream") : NULL);
}

int courier_request_set_download_file(courier_request *r, const char *path, unsigned flags) {
    if (!r || (path && !*path) || (flags & ~COURIER_DOWNLOAD_RESUME)) return COURIER_E_INVALID_ARGUMENT;
    r->download_flags = flags;
    return cr_set_string(&r->download_path, path);
}

int courier_request_set_progress(courier_request *r, courier_progress_fn fn, void *user,
                                 courier_user_free_fn user_free) {
    return cr_callback_set(r ? &r->progress : NULL, (void (*)(void))fn, user, user_free);
}

/* ---- prepare ---------------------------------------------------------------------------------- */

int cr_transfer_copy_transfers(const courier_request *r, cr_transfer *t, const cr_kvlist *params, courier_error *err) {
    if (r->parts && r->parts->count) {
        cr_parts *dst = NULL;
        for (size_t i = 0; params && i < params->count; i++) {
            cr_part *p = parts_add(&dst);
            if (!p || !(p->name = cr_strdup(params->items[i].name)) ||
                !(p->data = cr_strdup(params->items[i].value))) {
                if (p) part_clear(p);
                cr_parts_free(dst);
                return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            }
            p->len = strlen(p->data);
            dst->count++;
        }
        for (size_t i = 0; i < r->parts->count; i++) {
            const cr_part *src = &r->parts->items[i];
            cr_part *p = parts_add(&dst);
            if (!p) {
                cr_parts_free(dst);
                return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            }
            p->len = src->len;
            if (!(p->name = cr_strdup(src->name)) || (src->path && !(p->path = cr_strdup(src->path))) ||
                (src->data && !(p->data = cr_strndup(src->data, src->len))) ||
                (src->filename && !(p->filename = cr_strdup(src->filename))) ||
                (src->content_type && !(p->content_type = cr_strdup(src->content_type))) ||
                cr_kvlist_copy(&p->headers, &src->headers)) {
                part_clear(p);
                cr_parts_free(dst);
                return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            }
            dst->count++;
            /* A file part must be readable now: fail the send rather than the transfer. */
            if (p->path && access(p->path, R_OK) != 0) {
                int os = errno;
                cr_parts_free(dst);
                cr_fail(err, os == ENOENT ? COURIER_E_NOT_FOUND : COURIER_E_INVALID_ARGUMENT,
                        "cannot read part file '%.180s': %s", src->path, strerror(os));
                if (err) err->os_error = os;
                return err ? err->code : COURIER_E_NOT_FOUND;
            }
        }
        t->parts = dst;
    }
    if (r->body_file) {
        struct stat st;
        if (stat(r->body_file, &st) != 0 || !S_ISREG(st.st_mode) || access(r->body_file, R_OK) != 0) {
            int os = errno ? errno : EINVAL;
            cr_fail(err, os == ENOENT ? COURIER_E_NOT_FOUND : COURIER_E_INVALID_ARGUMENT,
                    "cannot read body file '%.180s': %s", r->body_file, strerror(os));
            if (err) err->os_error = os;
            return err ? err->code : COURIER_E_NOT_FOUND;
        }
        if (!(t->body_file = cr_strdup(r->body_file))) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    if (r->download_path && !(t->download_path = cr_strdup(r->download_path)))
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    t->download_flags = r->download_flags;
    t->progress = cr_callback_retain(r->progress);
    return COURIER_OK;
}

/* ---- progress --------------------------------------------------------------------------------- */

static void report(cr_transfer *t, int64_t dnow, int64_t dtotal, int64_t unow, int64_t utotal) {
    if (t->resume_from > 0 && t->download_mode == 1) {
        dnow += t->resume_from;
        if (dtotal) dtotal += t->resume_from;
    }
    int64_t v[4] = {dnow, dtotal, unow, utotal};
    if (memcmp(v, t->progress_last, sizeof v) == 0) return;
    memcpy(t->progress_last, v, sizeof v);
    cr_event_progress(t->engine, t, dnow, dtotal, unow, utotal); /* event monitors (log.c) */
    if (t->progress) {
        cr_raised *outer = cr_raise_catch(&t->raised); /* user_error.c */
        ((courier_progress_fn)t->progress->fn)(t->id, dnow, dtotal, unow, utotal, t->progress->user);
        cr_raise_catch(outer);
    }
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    cr_transfer *t = user;
    int64_t now = cr_mono_ms();
    if (now - t->progress_at < 100) return 0;
    t->progress_at = now;
    report(t, (int64_t)dlnow, (int64_t)dltotal, (int64_t)ulnow, (int64_t)ultotal);
    return 0;
}

/* The last report of an attempt, from curl's final counts. */
static void report_final(cr_transfer *t) {
    if (!t->watch_progress || !t->easy) return;
    curl_off_t dn = 0, dt = 0, un = 0, ut = 0;
    curl_easy_getinfo(t->easy, CURLINFO_SIZE_DOWNLOAD_T, &dn);
    curl_easy_getinfo(t->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &dt);
    curl_easy_getinfo(t->easy, CURLINFO_SIZE_UPLOAD_T, &un);
    curl_easy_getinfo(t->easy, CURLINFO_CONTENT_LENGTH_UPLOAD_T, &ut);
    report(t, (int64_t)dn, dt > 0 ? (int64_t)dt : 0, (int64_t)un, ut > 0 ? (int64_t)ut : 0);
}

/* ---- download files --------------------------------------------------------------------------- */

static char *suffixed(const char *path, const char *suffix) {
    cr_buf b = {0};
    if (cr_buf_append_str(&b, path) || cr_buf_append_str(&b, suffix)) {
        cr_buf_free(&b);
        return NULL;
    }
    return cr_buf_take(&b, NULL);
}

/* The meta file: "url\nvalidator\n". The validator is the ETag if any, else Last-Modified. */
static char *read_validator(const char *meta_path, const char *url) {
    FILE *f = fopen(meta_path, "r");
    if (!f) return NULL;
    char line[4096], v[1024];
    char *result = NULL;
    if (fgets(line, sizeof line, f) && fgets(v, sizeof v, f)) {
        line[strcspn(line, "\n")] = 0;
        v[strcspn(v, "\n")] = 0;
        if (strcmp(line, url) == 0 && v[0]) result = cr_strdup(v);
    }
    fclose(f);
    return result;
}

/* A header of the response being received, from curl's store, or NULL. */
static const char *received_header(CURL *h, const char *name) {
    struct curl_header *hd = NULL;
    return curl_easy_header(h, name, 0, CURLH_HEADER, -1, &hd) == CURLHE_OK ? hd->value : NULL;
}

static void write_validator(const char *meta_path, const char *url, CURL *h) {
    const char *v = received_header(h, "ETag");
    if (!v || strncmp(v, "W/", 2) == 0) v = received_header(h, "Last-Modified"); /* weak tags can't If-Range */
    if (!v) {
        unlink(meta_path);
        return;
    }
    FILE *f = fopen(meta_path, "w");
    if (!f) return;
    fprintf(f, "%s\n%s\n", url, v);
    fflush(f);
    fsync(fileno(f));
    fclose(f);
}

int cr_transfer_setup(cr_transfer *t, struct curl_slist **extra, courier_error *err) {
    CURL *h = t->easy;
    t->download_mode = 0;
    t->resume_from = 0;
    memset(t->progress_last, 0xff, sizeof t->progress_last);
    if (t->parts) {
        curl_mime *mime = curl_mime_init(h);
        if (!mime) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        t->mime = mime;
        for (size_t i = 0; i < t->parts->count; i++) {
            const cr_part *p = &t->parts->items[i];
            curl_mimepart *mp = curl_mime_addpart(mime);
            if (!mp || curl_mime_name(mp, p->name) != CURLE_OK) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            CURLcode c = p->path ? curl_mime_filedata(mp, p->path) : curl_mime_data(mp, p->data, p->len);
            if (c == CURLE_OK && p->filename) c = curl_mime_filename(mp, p->filename);
            if (c == CURLE_OK && p->content_type) c = curl_mime_type(mp, p->content_type);
            if (c == CURLE_OK && p->headers.count) {
                struct curl_slist *sl = NULL;
                cr_buf line = {0};
                for (size_t k = 0; k < p->headers.count; k++) {
                    line.len = 0;
                    cr_buf_append_str(&line, p->headers.items[k].name);
                    cr_buf_append_str(&line, ": ");
                    cr_buf_append_str(&line, p->headers.items[k].value);
                    struct curl_slist *n = line.data ? curl_slist_append(sl, line.data) : NULL;
                    if (!n) c = CURLE_OUT_OF_MEMORY;
                    else sl = n;
                }
                cr_buf_free(&line);
                if (c == CURLE_OK) c = curl_mime_headers(mp, sl, 1);
                else curl_slist_free_all(sl);
            }
            if (c != CURLE_OK)
                return cr_fail(err, c == CURLE_READ_ERROR ? COURIER_E_NOT_FOUND : COURIER_E_NO_MEMORY,
                               "cannot add part '%.100s'", p->name);
        }
        if (curl_easy_setopt(h, CURLOPT_MIMEPOST, mime) != CURLE_OK) return cr_fail(err, COURIER_E_INTERNAL, NULL);
        if (strcmp(t->method, "POST") != 0) curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, t->method);
    } else if (t->body_file) {
        t->upload_fp = fopen(t->body_file, "rb");
        struct stat st;
        if (!t->upload_fp || fstat(fileno(t->upload_fp), &st) != 0) {
            int os = errno;
            cr_fail(err, os == ENOENT ? COURIER_E_NOT_FOUND : COURIER_E_INVALID_ARGUMENT, "cannot read '%.180s': %s",
                    t->body_file, strerror(os));
            err->os_error = os;
            return err->code;
        }
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READDATA, t->upload_fp);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)st.st_size);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, t->method);
    }
    if (t->download_path && (t->download_flags & COURIER_DOWNLOAD_RESUME)) {
        char *part = suffixed(t->download_path, ".part");
        char *meta = suffixed(t->download_path, ".part.meta");
        struct stat st;
        char *validator = NULL;
        if (part && meta && stat(part, &st) == 0 && st.st_size > 0 && (validator = read_validator(meta, t->url))) {
            char line[1200];
            snprintf(line, sizeof line, "Range: bytes=%lld-", (long long)st.st_size);
            struct curl_slist *n = curl_slist_append(*extra, line);
            if (n) *extra = n;
            snprintf(line, sizeof line, "If-Range: %s", validator);
            n = curl_slist_append(*extra, line);
            if (n) *extra = n;
            t->resume_from = (int64_t)st.st_size;
        }
        free(validator);
        free(part);
        free(meta);
    }
    if (t->watch_progress) {
        t->progress_at = 0;
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, t);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
    return COURIER_OK;
}

/* Decides, at the first body bytes, where they go: the part file (appending a resumed part on 206,
 * from the start on 200) or memory (an error status, kept for the caller). */
static int open_download(cr_transfer *t) {
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 300 || status < 200) {
        t->download_mode = 3;
        return 0;
    }
    char *part = suffixed(t->download_path, ".part");
    char *meta = suffixed(t->download_path, ".part.meta");
    int rc = -1;
    if (part && meta) {
        bool append = status == 206 && t->resume_from > 0;
        t->download_fp = fopen(part, append ? "ab" : "wb");
        if (t->download_fp) {
            t->download_mode = append ? 1 : 2;
            if (!append) {
                t->resume_from = 0;
                if (t->download_flags & COURIER_DOWNLOAD_RESUME) write_validator(meta, t->url, t->easy);
            }
            rc = 0;
        }
    }
    free(part);
    free(meta);
    return rc;
}

size_t cr_transfer_write(cr_transfer *t, const char *data, size_t len) {
    if (t->download_mode == 0 && open_download(t) != 0) return 0;
    if (t->download_mode == 3) return (size_t)-1; /* not taken: the caller keeps it in memory */
    if (fwrite(data, 1, len, t->download_fp) != len) return 0;
    return len;
}

int cr_transfer_done(cr_transfer *t, CURLcode result, courier_response *resp, courier_error *err) {
    report_final(t);
    if (t->upload_fp) {
        fclose(t->upload_fp);
        t->upload_fp = NULL;
    }
    if (!t->download_path) return COURIER_OK;
    int rc = COURIER_OK;
    if (t->download_fp) {
        bool ok = fflush(t->download_fp) == 0 && fsync(fileno(t->download_fp)) == 0;
        ok = fclose(t->download_fp) == 0 && ok;
        t->download_fp = NULL;
        if (!ok && result == CURLE_OK) rc = cr_fail(err, COURIER_E_STORE, "cannot write the download file");
    }
    /* Only a 2xx is the download (a redirect's 3xx, even without a body, is not). */
    if (result != CURLE_OK || rc != COURIER_OK || !resp || t->download_mode == 3 || resp->status / 100 != 2) return rc;
    char *part = suffixed(t->download_path, ".part");
    char *meta = suffixed(t->download_path, ".part.meta");
    if (!part || !meta) rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    else if (t->download_mode == 0) {
        /* No body bytes at all: an empty file. */
        FILE *f = fopen(part, "wb");
        if (!f || fclose(f) != 0) rc = cr_fail(err, COURIER_E_STORE, "cannot create '%.180s'", part);
    }
    if (rc == COURIER_OK && rename(part, t->download_path) != 0) {
        int os = errno;
        rc = cr_fail(err, COURIER_E_STORE, "cannot move the download into place: %s", strerror(os));
        err->os_error = os;
    }
    if (rc == COURIER_OK) {
        unlink(meta);
        if (!(resp->file = cr_strdup(t->download_path))) rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    free(part);
    free(meta);
    return rc;
}

void cr_transfer_close_files(cr_transfer *t) {
    if (t->upload_fp) fclose(t->upload_fp);
    if (t->download_fp) fclose(t->download_fp);
    t->upload_fp = t->download_fp = NULL;
}

void cr_transfer_release(cr_transfer *t) {
    cr_transfer_close_files(t);
    if (t->mime) curl_mime_free(t->mime);
    t->mime = NULL;
}
