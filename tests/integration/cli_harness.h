/*
 * cli_harness.h — running the built `resil` tool from the CLI's integration
 * tests: in a scratch directory, with chosen standard input, capturing its
 * standard output and error, started either to completion or in the
 * background (for the tests that signal it).
 *
 * A header of static functions rather than a support library, because only
 * the CLI's tests need it. The commands under test are small shell scripts
 * that leave traces in the scratch directory (one line per run, the input
 * they saw, their pid), so the tests assert on what really happened rather
 * than on timing.
 */
#ifndef RESIL_CLI_HARNESS_H
#define RESIL_CLI_HARNESS_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#define CLI_MAX_ARGS 64
#define CLI_PATH_MAX (2 * PATH_MAX) /* a directory and a name in it */

typedef struct cli_result {
    int status; /* exit code, or 128+signal if resil itself died */
    char *out;  /* its standard output (heap) */
    char *err;  /* its standard error (heap) */
} cli_result;

/* cmocka setup and teardown: every test gets its own scratch directory,
 * its path in *state. */
static inline int cli_setup(void **state)
{
    *state = test_tmpdir();
    return *state == NULL ? -1 : 0;
}

static inline int cli_teardown(void **state)
{
    test_rmtree(*state);
    free(*state);
    return 0;
}

/* The text of dir/name as a heap string, or NULL if it does not exist. */
static inline char *cli_read(const char *dir, const char *name)
{
    char path[CLI_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

static inline void cli_write(const char *dir, const char *name, const char *text)
{
    char path[CLI_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static inline bool cli_exists(const char *dir, const char *name)
{
    char path[CLI_PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

/* Is `p` the start of a stamped log line, "2026-03-01T12:00:00.250Z resil: "? */
static inline bool cli_stamped(const char *p)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ resil: ";
    for (size_t i = 0; i < sizeof shape - 1; i++) {
        bool digit = p[i] >= '0' && p[i] <= '9';
        if (shape[i] == 'd' ? !digit : p[i] != shape[i])
            return false;
    }
    return true;
}

/* The log's lines without their stamps, in place: what the record says. */
static inline char *cli_unstamp(char *text)
{
    char *out = text;
    for (const char *p = text; *p != '\0';) {
        if (cli_stamped(p))
            p += 32;
        while (*p != '\0' && *p != '\n')
            *out++ = *p++;
        if (*p == '\n')
            *out++ = *p++;
    }
    *out = '\0';
    return text;
}

/* Lines in dir/name: the number of runs for scripts that append one line
 * per run; 0 when the file does not exist. */
static inline int cli_lines(const char *dir, const char *name)
{
    char *text = cli_read(dir, name);
    int n = 0;
    for (const char *p = text; p != NULL && *p != '\0'; p++)
        n += *p == '\n';
    free(text);
    return n;
}

/* Start `argv` (argv[0] the built resil, NULL-terminated) in `dir`, its
 * standard input from dir/stdin (created from `input`, or /dev/null when
 * NULL), its output to dir/resil.out (or to the descriptor `out` when it
 * is not -1, dir/resil.out then left empty) and dir/resil.err; with `ignored` (a
 * signal, or 0) set to be ignored, as a parent may, so that the commands it
 * runs inherit that from birth; and with `pending` (a signal, or 0) blocked
 * and raised, so that resil starts with it already delivered and waiting
 * (a blocked signal stays pending across exec). */
static inline pid_t cli_exec(const char *dir, const char *input, int ignored, int pending,
                             int out_fd, char **argv)
{
    if (input != NULL)
        cli_write(dir, "stdin", input);
    if (out_fd != -1)
        cli_write(dir, "resil.out", "");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (ignored != 0)
            signal(ignored, SIG_IGN);
        if (pending != 0) {
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, pending);
            if (sigprocmask(SIG_BLOCK, &set, NULL) != 0 || raise(pending) != 0)
                _exit(120);
        }
        if (chdir(dir) != 0)
            _exit(121);
        int in = open(input != NULL ? "stdin" : "/dev/null", O_RDONLY);
        int out = out_fd != -1 ? out_fd : open("resil.out", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open("resil.err", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 ||
            dup2(err, 2) < 0)
            _exit(122);
        for (int fd = 3; fd < 1024; fd++) /* resil starts with 0, 1 and 2 only */
            close(fd);
        execv(argv[0], argv);
        _exit(123);
    }
    return pid;
}

/* Start `resil ARGS...` (a NULL-terminated va_list), as cli_exec does. */
static inline pid_t cli_vstart_into(const char *dir, const char *input, int ignored, int pending,
                                    int out_fd, va_list ap)
{
    const char *resil = test_build_path("resil");
    assert_non_null(resil);
    char *argv[CLI_MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = (char *)resil;
    for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
        assert_true(argc < CLI_MAX_ARGS);
        argv[argc++] = (char *)a;
    }
    argv[argc] = NULL;
    return cli_exec(dir, input, ignored, pending, out_fd, argv);
}

static inline pid_t cli_vstart(const char *dir, const char *input, int ignored, int pending,
                               va_list ap)
{
    return cli_vstart_into(dir, input, ignored, pending, -1, ap);
}

static inline pid_t cli_start(const char *dir, const char *input, ...)
{
    va_list ap;
    va_start(ap, input);
    pid_t pid = cli_vstart(dir, input, 0, 0, ap);
    va_end(ap);
    return pid;
}

/* Start `resil ARGS...` with the signal `ignored` ignored. */
static inline pid_t cli_start_ignoring(const char *dir, int ignored, ...)
{
    va_list ap;
    va_start(ap, ignored);
    pid_t pid = cli_vstart(dir, NULL, ignored, 0, ap);
    va_end(ap);
    return pid;
}

/* Wait for a started resil and collect what it printed. */
static inline void cli_wait(pid_t pid, const char *dir, cli_result *r)
{
    int st;
    pid_t w;
    while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {
    }
    assert_int_equal(w, pid);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r->out = cli_read(dir, "resil.out");
    r->err = cli_read(dir, "resil.err");
    assert_non_null(r->out);
    assert_non_null(r->err);
}

/* Run `resil ARGS...` to completion (NULL-terminated arguments). */
static inline void cli_run(cli_result *r, const char *dir, const char *input, ...)
{
    va_list ap;
    va_start(ap, input);
    pid_t pid = cli_vstart(dir, input, 0, 0, ap);
    va_end(ap);
    cli_wait(pid, dir, r);
}

/* Run `resil` with the `argc` arguments in `args` to completion: for a
 * command line longer than CLI_MAX_ARGS (an option's limit reached). */
static inline void cli_run_argv(cli_result *r, const char *dir, const char *input, int argc,
                                const char *const *args)
{
    const char *resil = test_build_path("resil");
    assert_non_null(resil);
    char **argv = calloc((size_t)argc + 2, sizeof *argv);
    assert_non_null(argv);
    argv[0] = (char *)resil;
    for (int i = 0; i < argc; i++)
        argv[i + 1] = (char *)args[i];
    pid_t pid = cli_exec(dir, input, 0, 0, -1, argv);
    free(argv);
    cli_wait(pid, dir, r);
}

/* Run `resil ARGS...` to completion with its standard output on `out`, a
 * descriptor the test holds (a full device, a pipe nobody reads): r->out
 * is then empty. */
static inline void cli_run_into(cli_result *r, const char *dir, int out, ...)
{
    va_list ap;
    va_start(ap, out);
    pid_t pid = cli_vstart_into(dir, NULL, 0, 0, out, ap);
    va_end(ap);
    cli_wait(pid, dir, r);
}

/* Run `resil ARGS...` to completion with the signal `ignored` ignored. */
static inline void cli_run_ignoring(cli_result *r, const char *dir, int ignored, ...)
{
    va_list ap;
    va_start(ap, ignored);
    pid_t pid = cli_vstart(dir, NULL, ignored, 0, ap);
    va_end(ap);
    cli_wait(pid, dir, r);
}

/* Run `resil ARGS...` to completion, started with the signal `pending`
 * already waiting for it (blocked, as cli_exec says). */
static inline void cli_run_pending(cli_result *r, const char *dir, int pending, ...)
{
    va_list ap;
    va_start(ap, pending);
    pid_t pid = cli_vstart(dir, NULL, 0, pending, ap);
    va_end(ap);
    cli_wait(pid, dir, r);
}

static inline void cli_result_free(cli_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

/* Wait, polling, until `cond(dir, arg)` holds — for a real process to reach
 * a point (write its pid, print a line). Fails the test after ~60 s. */
static inline void cli_await(bool (*cond)(const char *dir, const char *arg),
                             const char *dir, const char *arg)
{
    struct timespec tick = {0, 5 * 1000 * 1000};
    for (int i = 0; i < 12000; i++) {
        if (cond(dir, arg))
            return;
        nanosleep(&tick, NULL);
    }
    fail_msg("timed out waiting for '%s'", arg);
}

/* Does dir/resil.err contain `text`? (for cli_await) */
static inline bool cli_err_contains(const char *dir, const char *text)
{
    char *err = cli_read(dir, "resil.err");
    bool found = err != NULL && strstr(err, text) != NULL;
    free(err);
    return found;
}

/* Has the process whose pid is the text `pid` ended (gone, or a zombie
 * waiting for a parent that is not us)? (for cli_await; dir is unused) */
static inline bool cli_process_gone(const char *dir, const char *pid)
{
    (void)dir;
    char path[64], stat_line[512];
    snprintf(path, sizeof path, "/proc/%d/stat", atoi(pid));
    if (kill((pid_t)atoi(pid), 0) != 0 && errno == ESRCH)
        return true;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return true;
    size_t n = fread(stat_line, 1, sizeof stat_line - 1, f);
    fclose(f);
    stat_line[n] = '\0';
    const char *state = strrchr(stat_line, ')');
    return state != NULL && state[1] == ' ' && state[2] == 'Z';
}

/* Does dir/name exist and end with a newline, i.e. is it completely
 * written? (for cli_await) */
static inline bool cli_file_ready(const char *dir, const char *name)
{
    char *text = cli_read(dir, name);
    bool ready = text != NULL && text[0] != '\0' && text[strlen(text) - 1] == '\n';
    free(text);
    return ready;
}

#endif
