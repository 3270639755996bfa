/*
 * test_curl_compat.c — `resil http` as a drop-in for curl: each scenario
 * runs the same command line through the real curl binary and through
 * `resil http`, against the scripted loopback server, in two fresh
 * directories, and asserts that the two agree on what a script sees —
 * the exit status, standard output, the files written (and those not
 * written) — and on what the server saw: the same requests, header for
 * header, but for the User-Agent (resil/VERSION, curl/VERSION).
 *
 * curl comes from the system (scripts/deps.sh installs it). Standard
 * error is not compared: the two word their messages differently. Every
 * scenario passes `--retry 0` or a status neither retries, since retrying
 * by default is where resil means to differ.
 */
#include "../integration/cli_harness.h"
#include "http_server.h"

#define MAX_WORDS 32
/* How late the slow paths answer: far past a loopback transfer's few
 * milliseconds (tens on a loaded machine under a sanitizer), since the
 * transfer it must end after goes to another server, which no gate of
 * this one can wait for. */
#define SLOW_MS 1000

typedef struct scenario {
    const char *name;
    const char *words[MAX_WORDS]; /* "{}" is replaced by the server's URL */
    const char *files[4];         /* files to compare (present or absent) */
    int status;                   /* the exit status both must give */
} scenario;

/* The paths every scenario may use. */
static void script(http_server *s)
{
    http_server_script(s, "/a", &(http_step){.status = 200, .body = "hello\n"}, 1);
    http_server_script(s, "/b", &(http_step){.status = 200, .body = "bee\n"}, 1);
    http_server_script(s, "/nf", &(http_step){.status = 404, .body = "missing\n"}, 1);
    http_server_script(s, "/err", &(http_step){.status = 503, .body = "busy\n"}, 1);
    http_server_script(s, "/empty", &(http_step){.status = 200, .body = ""}, 1);
    http_server_script(s, "/echo", &(http_step){.status = 200, .body = "got it\n"}, 1);
    http_server_script(s, "/dir/file.txt", &(http_step){.status = 200, .body = "file\n"}, 1);
    http_server_script(s, "/r", &(http_step){.status = 302, .body = "moved\n",
                                             .headers = "Location: /a\r\n"}, 1);
    http_server_script(s, "/slow", &(http_step){.status = 200, .delay_ms = SLOW_MS,
                                                .body = "slow\n"}, 1);
    http_server_script(s, "/slownf", &(http_step){.status = 404, .delay_ms = SLOW_MS,
                                                  .body = "late\n"}, 1);
    http_server_script(s, "/json", &(http_step){.status = 200, .body = "{\"ok\":true}\n",
                                                .headers = "X-Trace: t-1\r\n"}, 1);
}

static const scenario scenarios[] = {
    {"a body to standard output", {"-s", "{}/a"}, {0}, 0},
    {"an error body is not written with -f", {"-sf", "{}/nf"}, {0}, 22},
    {"an error body makes no -o file with -f", {"-sf", "-o", "out.txt", "{}/nf"},
     {"out.txt"}, 22},
    {"--fail-with-body writes it", {"-s", "--fail-with-body", "-o", "out.txt", "{}/nf"},
     {"out.txt"}, 22},
    {"an empty success still makes its -o file", {"-sf", "-o", "out.txt", "{}/empty"},
     {"out.txt"}, 0},
    {"-i writes the headers, of an error too", {"-sfi", "{}/a", "{}/nf"}, {0}, 22},
    {"-I writes a HEAD's headers", {"-sfI", "{}/a"}, {0}, 0},
    {"-D and -o split headers and body", {"-sf", "-D", "h.txt", "-o", "b.txt", "{}/a"},
     {"h.txt", "b.txt"}, 0},
    {"-D - writes the headers to standard output", {"-sf", "-D", "-", "{}/a"}, {0}, 0},
    {"each -o names one URL's output", {"-sf", "-o", "one.txt", "{}/a", "{}/b"},
     {"one.txt"}, 0},
    {"-O names the file after the URL", {"-sf", "-O", "{}/dir/file.txt"}, {"file.txt"}, 0},
    {"-w writes curl's variables after each URL",
     {"-sf", "-o", "/dev/null", "-w",
      "%{http_code} %{response_code} %{size_download} %{method} %{num_redirects} "
      "%{content_type} %{http_version} %{scheme} %{url_effective} %{exitcode}\\n",
      "{}/a", "{}/nf"}, {0}, 22},
    {"-w's escapes and a header", {"-s", "-o", "/dev/null", "-w",
                                   "a\\tb%%c%x\\\\d%header{x-trace}|%header{nope}\\n",
                                   "{}/json"}, {0}, 0},
    {"-w @FILE reads the format", {"-s", "-o", "/dev/null", "-w", "@fmt.txt", "{}/a"}, {0}, 0},
    {"-d pieces joined with &, @FILE without its newlines",
     {"-sf", "-d", "a=1", "-d", "@body.txt", "{}/echo"}, {0}, 0},
    {"--data-binary keeps the newlines", {"-sf", "--data-binary", "@body.txt", "{}/echo"},
     {0}, 0},
    {"--data-binary reads a file past 4 KB whole",
     {"-sf", "--data-binary", "@big.txt", "{}/echo"}, {0}, 0},
    {"-d reads a file past 4 KB without its newlines", {"-sf", "-d", "@big.txt", "{}/echo"},
     {0}, 0},
    {"--data-raw leaves @ alone", {"-sf", "--data-raw", "@body.txt", "{}/echo"}, {0}, 0},
    {"--data-urlencode's five forms",
     {"-sf", "--data-urlencode", "a b&c", "--data-urlencode", "=x y", "--data-urlencode",
      "n=p/q", "--data-urlencode", "f@body.txt", "--data-urlencode", "@body.txt", "{}/echo"},
     {0}, 0},
    {"--json sets its two headers", {"-sf", "--json", "{\"a\":1}", "{}/echo"}, {0}, 0},
    {"-G moves the data into the query", {"-sf", "-G", "-d", "a=1", "-d", "b=2", "{}/echo?z=0"},
     {0}, 0},
    {"-X PUT with a body", {"-sf", "-X", "PUT", "-d", "x=1", "{}/echo"}, {0}, 0},
    {"-w's connection and file variables",
     {"-s", "-o", "out.txt", "-w",
      "%{url} %{filename_effective} %{num_connects} %{remote_ip} %{remote_port} %{local_ip} "
      "%{ssl_verify_result} %{size_header} %{redirect_url}\\n",
      "{}/r"}, {"out.txt"}, 0},
    {"-w's errormsg of a status -f fails on", {"-sf", "-o", "/dev/null", "-w",
                                                "%{errormsg}|%{exitcode}\\n", "{}/nf"},
     {0}, 22},
    {"-w counts the body sent", {"-sf", "-o", "/dev/null", "-d", "x=1", "-d", "y=22", "-w",
                                 "%{size_upload} %{method}\\n", "{}/echo"}, {0}, 0},
    {"-XDELETE bundled", {"-sfXDELETE", "{}/echo"}, {0}, 0},
    {"-L follows a redirect", {"-sfL", "-w", "%{num_redirects} %{url_effective}\\n", "{}/r"},
     {0}, 0},
    {"without -L the redirect's own body", {"-sf", "{}/r"}, {0}, 0},
    {"-u, -e, -b and -H reach the server",
     {"-sf", "-u", "ann:secret", "-e", "http://from.example/", "-b", "k=v; k2=v2", "-H",
      "X-One: 1", "-H", "Accept:", "{}/echo"}, {0}, 0},
    {"--compressed asks for an encoding", {"-sf", "--compressed", "{}/a"}, {0}, 0},
    {"--url adds a URL", {"-sf", "--url", "{}/a", "{}/b"}, {0}, 0},
    {"a refused connection exits 7", {"-s", "--retry", "0", "http://127.0.0.1:1/"}, {0}, 7},
    {"--retry N sends N+1 requests to a failing URL",
     {"-sf", "--retry", "1", "--retry-delay", "1", "{}/err"}, {0}, 22},
    {"--max-redirs bounds -L", {"-sfL", "--max-redirs", "0", "{}/r"}, {0}, 47},
    {"without -Z the last URL's status stands, a success after a failure",
     {"-s", "--retry", "0", "http://127.0.0.1:1/", "{}/a"}, {0}, 0},
    {"without -Z the last URL's status stands, a failure after a success",
     {"-s", "--retry", "0", "{}/a", "http://127.0.0.1:1/"}, {0}, 7},
    {"--output-dir without -Z", {"-sf", "--output-dir", "d", "-o", "x.txt", "{}/a"},
     {"d/x.txt"}, 0},
};

/* -Z: the requests leave in any order, so they are compared by target; the
 * slow paths answer a second late from the second server ("{2}"), so the
 * order transfers end in (which decides standard output, -w's lines and
 * the exit status) is known. */
static const scenario parallel_scenarios[] = {
    {"-Z writes each -o file", {"-sfZ", "-o", "a.txt", "{}/a", "-o", "b.txt", "{}/b"},
     {"a.txt", "b.txt"}, 0},
    {"-Z bodies reach stdout as transfers end", {"-sZ", "{2}/slow", "{}/a"}, {0}, 0},
    {"-Z writes -w after each transfer as it ends",
     {"-sfZ", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{url_effective} %{http_code}\\n",
      "{2}/slow", "{}/nf"}, {0}, 22},
    {"-Z exits with the last failure to end",
     {"-sfZ", "--retry", "0", "{2}/slownf", "http://127.0.0.1:1/"}, {0}, 22},
    {"-Z exits with the last failure to end, a refusal",
     {"-sfZ", "--retry", "0", "--parallel-max", "1", "{}/nf", "http://127.0.0.1:1/"}, {0}, 7},
    {"-Z with -O and --output-dir",
     {"-sfZ", "--output-dir", "d", "-O", "{}/dir/file.txt", "-o", "x.txt", "{}/b"},
     {"d/file.txt", "d/x.txt"}, 0},
};

static const char *curl_path(void)
{
    static const char *const places[] = {"/usr/bin/curl", "/usr/local/bin/curl", "/bin/curl"};
    for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
        if (access(places[i], X_OK) == 0)
            return places[i];
    }
    return NULL;
}

/* Run argv in dir, standard output to dir/stdout. The exit status. */
static int run_in(const char *dir, char **argv)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (chdir(dir) != 0)
            _exit(121);
        int in = open("/dev/null", O_RDONLY);
        int out = open("stdout", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open("stderr", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 ||
            dup2(err, 2) < 0)
            _exit(122);
        execv(argv[0], argv);
        _exit(123);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

typedef struct side {
    char *dir;
    int status;
    size_t first_request, requests;
} side;

static void prepare_dir(const char *dir)
{
    cli_write(dir, "body.txt", "line one\nline two\r\n");
    /* past the 4 KB the file reader starts with: it must grow */
    char big[12 * 1024];
    size_t n = 0;
    for (int i = 0; n + 64 < sizeof big; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "line %03d of a body past 4 KB\n", i);
    cli_write(dir, "big.txt", big);
    cli_write(dir, "fmt.txt", "code=%{http_code}\\n");
    char d[1024];
    snprintf(d, sizeof d, "%s/d", dir);
    assert_int_equal(mkdir(d, 0755), 0);
}

/* The words with "{}" replaced, after `program` (and "http" for resil). */
/* The second server's URL, for "{2}": a host of its own, so that a -Z
 * transfer to it never waits to share a connection with one to the first
 * (curl's -Z waits to multiplex on one host unless --parallel-immediate;
 * resil http opens its connections at once, as that flag asks). */
static char other_base[128];

static void run_side(side *s, http_server *srv, const scenario *sc, const char *program,
                     bool resil)
{
    char base[128], buf[MAX_WORDS][512];
    char *argv[MAX_WORDS + 3];
    int n = 0;
    http_server_url(srv, "", base, sizeof base);
    argv[n++] = (char *)program;
    if (resil)
        argv[n++] = "http";
    for (int i = 0; i < MAX_WORDS && sc->words[i] != NULL; i++) {
        const char *w = sc->words[i];
        const char *mark = strstr(w, "{}"), *mark2 = strstr(w, "{2}");
        if (mark == NULL && mark2 == NULL) {
            argv[n++] = (char *)w;
            continue;
        }
        if (mark2 != NULL)
            snprintf(buf[i], sizeof buf[i], "%.*s%s%s", (int)(mark2 - w), w, other_base,
                     mark2 + 3);
        else
            snprintf(buf[i], sizeof buf[i], "%.*s%s%s", (int)(mark - w), w, base, mark + 2);
        argv[n++] = buf[i];
    }
    argv[n] = NULL;
    s->dir = test_tmpdir();
    prepare_dir(s->dir);
    s->first_request = http_server_count(srv, NULL);
    s->status = run_in(s->dir, argv);
    s->requests = http_server_count(srv, NULL) - s->first_request;
}

/* A request's header block without the lines that name the client. */
static void comparable_head(const char *head, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = head; *p != '\0';) {
        const char *eol = strstr(p, "\r\n");
        size_t n = eol != NULL ? (size_t)(eol - p) + 2 : strlen(p);
        bool skip = strncasecmp(p, "User-Agent:", 11) == 0 || strncasecmp(p, "Expect:", 7) == 0;
        if (!skip && o + n < cap) {
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
    }
    out[o] = '\0';
}

static void assert_same_text(const char *what, const char *name, const char *curl_text,
                             const char *resil_text)
{
    if ((curl_text == NULL) != (resil_text == NULL))
        fail_msg("%s: %s: curl %s it, resil http %s it", what, name,
                 curl_text ? "wrote" : "did not write", resil_text ? "wrote" : "did not write");
    if (curl_text != NULL && strcmp(curl_text, resil_text) != 0)
        fail_msg("%s: %s differs\n--- curl:\n%s\n--- resil http:\n%s", what, name, curl_text,
                 resil_text);
}

/* The side's i-th request, or with any_order its i-th by target. */
static const http_request *nth_request(http_server *srv, bool any_order, const side *s,
                                       size_t i)
{
    if (!any_order)
        return http_server_request(srv, NULL, s->first_request + i);
    const http_request *order[MAX_WORDS];
    size_t n = s->requests < MAX_WORDS ? s->requests : MAX_WORDS;
    for (size_t k = 0; k < n; k++) {
        const http_request *q = http_server_request(srv, NULL, s->first_request + k);
        size_t at = k;
        for (; at > 0 && strcmp(order[at - 1]->target, q->target) > 0; at--)
            order[at] = order[at - 1];
        order[at] = q;
    }
    return order[i];
}

static void assert_same_requests(http_server *srv, const scenario *sc, bool any_order,
                                 const side *c, const side *r)
{
    if (c->requests != r->requests)
        fail_msg("%s: curl sent %zu requests, resil http %zu", sc->name, c->requests,
                 r->requests);
    for (size_t i = 0; i < c->requests && i < MAX_WORDS; i++) {
        const http_request *qc = nth_request(srv, any_order, c, i);
        const http_request *qr = nth_request(srv, any_order, r, i);
        char hc[4096], hr[4096];
        comparable_head(qc->head, hc, sizeof hc);
        comparable_head(qr->head, hr, sizeof hr);
        assert_same_text(sc->name, "the method", qc->method, qr->method);
        assert_same_text(sc->name, "the target", qc->target, qr->target);
        assert_same_text(sc->name, "the request headers", hc, hr);
        assert_same_text(sc->name, "the request body", qc->body, qr->body);
    }
}

static void compare(http_server *srv, const scenario *sc, const char *curl, bool any_order)
{
    side c, r;
    run_side(&c, srv, sc, curl, false);
    run_side(&r, srv, sc, test_build_path("resil"), true);
    if (c.status != sc->status || r.status != sc->status)
        fail_msg("%s: exit status curl %d, resil http %d, expected %d", sc->name, c.status,
                 r.status, sc->status);
    char *co = cli_read(c.dir, "stdout"), *ro = cli_read(r.dir, "stdout");
    assert_same_text(sc->name, "standard output", co, ro);
    free(co);
    free(ro);
    for (int i = 0; i < 4 && sc->files[i] != NULL; i++) {
        char *cf = cli_read(c.dir, sc->files[i]), *rf = cli_read(r.dir, sc->files[i]);
        assert_same_text(sc->name, sc->files[i], cf, rf);
        free(cf);
        free(rf);
    }
    assert_same_requests(srv, sc, any_order, &c, &r);
    test_rmtree(c.dir);
    test_rmtree(r.dir);
    free(c.dir);
    free(r.dir);
}

static void curl_and_resil_http_agree_on_every_scenario(void **state)
{
    (void)state;
    const char *curl = curl_path();
    if (curl == NULL)
        fail_msg("curl is needed to compare with (scripts/deps.sh installs it)");
    http_server *srv = http_server_start();
    assert_non_null(srv);
    script(srv);
    http_server *other = http_server_start();
    assert_non_null(other);
    script(other);
    http_server_url(other, "", other_base, sizeof other_base);
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        compare(srv, &scenarios[i], curl, false);
    for (size_t i = 0; i < sizeof parallel_scenarios / sizeof parallel_scenarios[0]; i++)
        compare(srv, &parallel_scenarios[i], curl, true);
    http_server_stop(other);
    http_server_stop(srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(curl_and_resil_http_agree_on_every_scenario),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
