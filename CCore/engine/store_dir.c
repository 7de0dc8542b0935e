/*
 * store_dir.c — the engine's store directory: the configured one, the platform's default for the
 * app (created when missing), or a temporary one removed with the engine. Engine open and free
 * (engine.c), on the thread that opens or closes the engine.
 */
#include "engine/engine.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int mkdir_p(const char *path) {
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf) return ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST) return errno;
        *p = '/';
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) return errno;
    struct stat st;
    if (stat(buf, &st) != 0) return errno;
    if (!S_ISDIR(st.st_mode)) return ENOTDIR;
    if (access(buf, R_OK | W_OK | X_OK) != 0) return errno;
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* The name the default store is kept under: the configured app id, else the program's name. */
static const char *app_id_of(const courier_config *c) {
    if (c->app_id) return c->app_id;
    const char *name = NULL;
#if defined(__APPLE__)
    name = getprogname();
#elif defined(__GLIBC__)
    name = program_invocation_short_name;
#endif
    if (!name || !*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) return "courier";
    return name;
}

/* The user's home directory: $HOME, else the password database. */
static const char *home_dir(char *buf, size_t n) {
    const char *home = getenv("HOME");
    if (home && home[0] == '/') return home;
    struct passwd pw, *found = NULL;
    if (getpwuid_r(getuid(), &pw, buf, n, &found) == 0 && found && found->pw_dir && found->pw_dir[0] == '/')
        return found->pw_dir;
    return NULL;
}

/* The durable default store: where the platform keeps an app's data, then "<app id>/courier".
 * Linux and other Unix systems: $XDG_DATA_HOME (when absolute, as the XDG spec asks), else
 * ~/.local/share. Darwin: ~/Library/Application Support. */
static int default_store_path(const courier_config *c, char *out, size_t n, courier_error *err) {
    char pwbuf[4096];
    const char *app = app_id_of(c);
    int len;
#if defined(__APPLE__)
    const char *home = home_dir(pwbuf, sizeof pwbuf);
    if (!home) return cr_fail(err, COURIER_E_STORE, "no home directory for the default store (set a store directory)");
    len = snprintf(out, n, "%s/Library/Application Support/%s/courier", home, app);
#else
    const char *data = getenv("XDG_DATA_HOME");
    if (data && data[0] == '/') {
        len = snprintf(out, n, "%s/%s/courier", data, app);
    } else {
        const char *home = home_dir(pwbuf, sizeof pwbuf);
        if (!home)
            return cr_fail(err, COURIER_E_STORE, "no home directory or XDG_DATA_HOME for the default store "
                                                 "(set a store directory)");
        len = snprintf(out, n, "%s/.local/share/%s/courier", home, app);
    }
#endif
    if (len < 0 || (size_t)len >= n) return cr_fail(err, COURIER_E_STORE, "the default store's path is too long");
    return COURIER_OK;
}

int cr_store_dir_open(courier_engine *e, courier_error *err) {
    if (e->core.config->store_dir || !e->core.config->temporary_store) {
        char def[PATH_MAX];
        const char *dir = e->core.config->store_dir;
        if (!dir) {
            int rc = default_store_path(e->core.config, def, sizeof def, err);
            if (rc) return rc;
            dir = def;
        }
        if (e->core.config->store_must_exist) {
            struct stat st;
            if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
                int os = stat(dir, &st) != 0 ? errno : ENOTDIR;
                cr_fail(err, COURIER_E_STORE, "no store at '%.200s'", dir);
                if (err) err->os_error = os;
                return COURIER_E_STORE;
            }
        }
        int rc = mkdir_p(dir);
        if (rc) {
            cr_fail(err, COURIER_E_STORE, "cannot create store directory '%.180s': %s", dir, strerror(rc));
            if (err) err->os_error = rc;
            return COURIER_E_STORE;
        }
        e->core.store_dir = cr_strdup(dir);
        return e->core.store_dir ? COURIER_OK : cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/courier-XXXXXX", tmp) >= (int)sizeof path)
        return cr_fail(err, COURIER_E_STORE, "TMPDIR is too long");
    if (!mkdtemp(path)) {
        int os = errno;
        cr_fail(err, COURIER_E_STORE, "cannot create a temporary store in '%.180s': %s", tmp, strerror(os));
        if (err) err->os_error = os;
        return COURIER_E_STORE;
    }
    e->core.store_dir = cr_strdup(path);
    e->core.store_is_temp = 1;
    if (!e->core.store_dir) {
        rmdir(path);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    return COURIER_OK;
}

void cr_store_dir_remove_temp(courier_engine *e) {
    if (e->core.store_is_temp && e->core.store_dir) nftw(e->core.store_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
