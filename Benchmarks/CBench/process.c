/*
 * process.c — ports and a child process that cannot outlive the benchmark (see cbench.h).
 *
 * The child is forked by a helper thread that then waits for it. On Linux the child asks for
 * PR_SET_PDEATHSIG, which fires when the thread that forked it ends: the helper thread ends only
 * when the child has exited, or when this whole process dies (kill -9 included), so the server is
 * never left running after the benchmark.
 */
#include "cbench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* ---- ports ------------------------------------------------------------------------------------- */

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

int cbench_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = loopback(0);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int cbench_wait_port(int port, int timeout_ms) {
    double deadline = now_ms() + timeout_ms;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return -1;
        struct sockaddr_in a = loopback(port);
        int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
        close(fd);
        if (ok) return 0;
        if (now_ms() >= deadline) return -1;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* ---- the child --------------------------------------------------------------------------------- */

struct cbench_child {
    pthread_mutex_t m;
    pthread_cond_t c;
    pthread_t thread;
    const char *const *argv; /* borrowed until started */
    const char *log_path;    /* borrowed until started */
    pid_t pid;
    int start_error; /* 0, or the errno of fork/exec */
    int started;     /* the helper has reported the start (pid or error) */
    int exited;      /* the child has been reaped */
    int status;      /* its wait status */
};

static void *helper_main(void *arg) {
    cbench_child *ch = arg;
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
        pthread_mutex_lock(&ch->m);
        ch->start_error = errno;
        ch->started = 1;
        ch->exited = 1;
        pthread_cond_broadcast(&ch->c);
        pthread_mutex_unlock(&ch->m);
        return NULL;
    }
#ifdef __linux__
    pid_t parent = getpid();
#endif
    pid_t pid = fork();
    if (pid == 0) {
        /* The child: only async-signal-safe calls until exec. */
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(127);
#endif
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        int in = open("/dev/null", O_RDONLY);
        int out = ch->log_path ? open(ch->log_path, O_WRONLY | O_CREAT | O_APPEND, 0600) : open("/dev/null", O_WRONLY);
        if (in >= 0) dup2(in, 0);
        if (out >= 0) {
            dup2(out, 1);
            dup2(out, 2);
        }
        setpgid(0, 0); /* its own group: a terminal's ^C reaches the benchmark, which stops it */
        execv(ch->argv[0], (char *const *)ch->argv);
        int e = errno;
        ssize_t w = write(report[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    int fork_errno = pid < 0 ? errno : 0;
    close(report[1]);
    int exec_errno = 0;
    if (pid > 0) {
        ssize_t n;
        do n = read(report[0], &exec_errno, sizeof exec_errno);
        while (n < 0 && errno == EINTR);
        if (n != (ssize_t)sizeof exec_errno) exec_errno = 0; /* EOF: exec succeeded */
    }
    close(report[0]);

    pthread_mutex_lock(&ch->m);
    ch->pid = pid;
    ch->start_error = fork_errno ? fork_errno : exec_errno;
    ch->started = 1;
    if (pid < 0) ch->exited = 1;
    pthread_cond_broadcast(&ch->c);
    pthread_mutex_unlock(&ch->m);
    if (pid < 0) return NULL;

    int status = 0;
    pid_t r;
    do r = waitpid(pid, &status, 0);
    while (r < 0 && errno == EINTR);
    pthread_mutex_lock(&ch->m);
    ch->exited = 1;
    ch->status = status;
    pthread_cond_broadcast(&ch->c);
    pthread_mutex_unlock(&ch->m);
    return NULL;
}

int cbench_child_start(cbench_child **out, const char *const *argv, const char *log_path) {
    if (!out || !argv || !argv[0]) return -EINVAL;
    *out = NULL;
    cbench_child *ch = calloc(1, sizeof *ch);
    if (!ch) return -ENOMEM;
    pthread_mutex_init(&ch->m, NULL);
    pthread_cond_init(&ch->c, NULL);
    ch->argv = argv;
    ch->log_path = log_path;
    int rc = pthread_create(&ch->thread, NULL, helper_main, ch);
    if (rc != 0) {
        pthread_cond_destroy(&ch->c);
        pthread_mutex_destroy(&ch->m);
        free(ch);
        return -rc;
    }
    pthread_mutex_lock(&ch->m);
    while (!ch->started) pthread_cond_wait(&ch->c, &ch->m);
    int err = ch->start_error;
    pthread_mutex_unlock(&ch->m);
    ch->argv = NULL;
    ch->log_path = NULL;
    if (err) {
        cbench_child_stop(ch, 0);
        return -err;
    }
    *out = ch;
    return 0;
}

long cbench_child_pid(const cbench_child *ch) { return ch ? (long)ch->pid : -1; }

int cbench_child_running(cbench_child *ch, int *status) {
    if (!ch) return 0;
    pthread_mutex_lock(&ch->m);
    int running = !ch->exited;
    if (!running && status) *status = ch->status;
    pthread_mutex_unlock(&ch->m);
    return running;
}

void cbench_child_stop(cbench_child *ch, int grace_ms) {
    if (!ch) return;
    pthread_mutex_lock(&ch->m);
    if (!ch->exited && ch->pid > 0) {
        kill(ch->pid, SIGTERM);
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += grace_ms / 1000;
        deadline.tv_nsec += (long)(grace_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
        while (!ch->exited) {
            if (pthread_cond_timedwait(&ch->c, &ch->m, &deadline) == ETIMEDOUT) break;
        }
        if (!ch->exited) kill(ch->pid, SIGKILL);
    }
    pthread_mutex_unlock(&ch->m);
    pthread_join(ch->thread, NULL);
    pthread_cond_destroy(&ch->c);
    pthread_mutex_destroy(&ch->m);
    free(ch);
}
