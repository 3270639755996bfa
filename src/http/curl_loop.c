/*
 * curl_loop.c — curl multi on a resil_loop: the one driver under
 * resil_http_multi (multi.c) and `resil gateway`'s upstream.
 *
 * Why one driver. Both drive curl multi the way its socket interface asks:
 * the socket callback becomes descriptor watches on the loop (a small
 * struct per socket, attached with curl_multi_assign()), the timer callback
 * one loop timer, and both call curl_multi_socket_action() and then read
 * the finished transfers, handing each to the owner's `done` with its
 * handle's CURLOPT_PRIVATE. Transfers are reported only from there, never
 * from inside a libcurl callback, so whatever a report sets off (the next
 * transfer added, others removed) may use the multi handle freely. Two
 * copies of this drifted apart once already; a fix to the watches belongs
 * to every caller at once.
 *
 * Why a kept socket keeps its watch. curl drops a kept-alive connection's
 * socket from its watch list when a transfer ends (CURL_POLL_REMOVE) and
 * asks for it again when the next transfer takes the connection. Stopping
 * and restarting the loop's watch each time costs three epoll_ctl calls a
 * request. So the watch of a socket curl opened through this driver (the
 * open and close socket callbacks, set by resil__curl_loop_own_sockets(),
 * say which those are) stays armed while the connection idles ("kept"),
 * found again by its descriptor when curl asks for it, and is stopped only
 * when curl closes the socket — or when it becomes ready while idle (the
 * peer closed it, or sent what no request asked for), since nothing would
 * read it then. Any other socket (a resolver's, or one of a handle whose
 * socket callbacks belong to someone else, as a resil_http_multi caller's
 * do) is stopped on REMOVE: its closing is not announced, and a watch must
 * never outlive its descriptor. A watch asked for the events it already
 * has costs no call to the loop.
 *
 * Why REMOVE looks at the socket. libcurl (7.88 at least) closes a socket
 * it opened through the open callback without calling the close callback
 * when a connection attempt is abandoned — a transfer cut by its timeout
 * while connecting — and announces CURL_POLL_REMOVE only after that close.
 * Keeping that watch armed left the loop watching a closed descriptor
 * (libuv aborts when it adds it to epoll) or holding its number when the
 * next connection got it (libuv refuses the second watch, the transfer
 * fails). So a socket is kept only if, at REMOVE, its descriptor is still
 * the socket the watch was started for (same inode); otherwise the watch
 * ends there and the number is no longer counted as curl's. An opened
 * socket whose number still has a watch ends that stale watch first.
 *
 * Ownership: the driver owns every watch and keeps the ended ones for the
 * next socket, so that after warm-up nothing is allocated here; the lists
 * are as long as the most sockets ever in use at once, freed with it.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "curl_loop.h"
#include "resil.h"

typedef struct sock_watch {
    resil_io io;
    resil__curl_loop *cl;
    struct sock_watch *next, *prev; /* every watch, so that free finds them */
    curl_socket_t fd;
    ino_t ino;       /* the socket's inode, to know it again at REMOVE */
    unsigned events; /* what the loop watches it for; 0: not started */
    bool kept;       /* curl let go of it: its connection idles in curl's cache */
} sock_watch;

struct resil__curl_loop {
    resil_loop *loop;
    CURLM *multi;
    resil_timer timer; /* curl's timeout */
    resil__curl_done_fn *done;
    void *ud;
    sock_watch *watches, *idle_watches;
    /* by descriptor: the sockets curl opened through the driver
     * (UNWATCHED while no watch exists yet) and the watch of each */
    sock_watch **by_fd;
    size_t by_fd_len;
};

/* by_fd's marker for a socket curl opened that has no watch yet */
static sock_watch unwatched_marker;
#define UNWATCHED (&unwatched_marker)

static void read_finished(resil__curl_loop *cl)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(cl->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        void *priv = NULL;
        CURL *easy = msg->easy_handle;
        CURLcode code = msg->data.result;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&priv);
        if (priv != NULL)
            cl->done(cl->ud, easy, priv, code);
    }
}

static void watch_end(resil__curl_loop *cl, sock_watch *w);

static void on_io(resil_io *io, int fd, unsigned events)
{
    sock_watch *w = (sock_watch *)io;
    resil__curl_loop *cl = w->cl;
    if (w->kept) { /* an idle connection stirred: curl reads it when it next takes it */
        watch_end(cl, w);
        return;
    }
    /* A failed descriptor may still hold what came before the failure (an
     * answer sent just ahead of a reset), and a loop that reports the
     * failure need not say it is readable too (libuv does not). So it is
     * handed to libcurl as ready both ways: libcurl reads what is there
     * first and meets the failure on its own read or write, with its own
     * words. Told CURL_CSELECT_ERR alone, it failed the transfer ("select/
     * poll returned error") without reading the answer. */
    int flags = ((events & (RESIL_IO_READ | RESIL_IO_ERROR)) ? CURL_CSELECT_IN : 0) |
                ((events & (RESIL_IO_WRITE | RESIL_IO_ERROR)) ? CURL_CSELECT_OUT : 0);
    int running;
    curl_multi_socket_action(cl->multi, fd, flags, &running);
    read_finished(cl);
}

static void on_timer(resil_timer *t)
{
    resil__curl_loop *cl =
        (resil__curl_loop *)(void *)((char *)t - offsetof(resil__curl_loop, timer));
    int running;
    curl_multi_socket_action(cl->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    read_finished(cl);
}

/* Stop a watch; its memory waits in idle_watches for the next socket. */
static void watch_end(resil__curl_loop *cl, sock_watch *w)
{
    if (w->events != 0)
        resil_loop_io_stop(cl->loop, &w->io);
    if (w->fd >= 0 && (size_t)w->fd < cl->by_fd_len && cl->by_fd[w->fd] == w)
        cl->by_fd[w->fd] = UNWATCHED; /* still curl's, unwatched */
    w->fd = CURL_SOCKET_BAD;
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        cl->watches = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    w->next = cl->idle_watches;
    cl->idle_watches = w;
}

static sock_watch *watch_new(resil__curl_loop *cl, curl_socket_t s)
{
    sock_watch *w = cl->idle_watches;
    if (w != NULL)
        cl->idle_watches = w->next;
    else if ((w = malloc(sizeof *w)) == NULL)
        return NULL;
    memset(w, 0, sizeof *w);
    w->io.fn = on_io;
    w->cl = cl;
    w->fd = s;
    w->next = cl->watches;
    if (w->next != NULL)
        w->next->prev = w;
    cl->watches = w;
    return w;
}

static ino_t inode_of(curl_socket_t s)
{
    struct stat st;
    return fstat(s, &st) == 0 ? st.st_ino : 0;
}

/* Whether the watch's descriptor is still the socket it was started for. */
static bool still_open(const sock_watch *w)
{
    return w->ino != 0 && inode_of(w->fd) == w->ino;
}

/* The socket's entry in by_fd, or NULL when it is not one curl opened
 * through the driver. */
static sock_watch **opened_socket(resil__curl_loop *cl, curl_socket_t s)
{
    if (s < 0 || (size_t)s >= cl->by_fd_len || cl->by_fd[s] == NULL)
        return NULL;
    return &cl->by_fd[s];
}

static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)easy;
    resil__curl_loop *cl = userp;
    sock_watch *w = socketp;
    if (w != NULL && w->fd != s)
        w = NULL; /* ended when its number was reopened: curl still had it */
    bool assigned = w != NULL;
    sock_watch **slot = opened_socket(cl, s);
    if (what == CURL_POLL_REMOVE) {
        if (w == NULL)
            return 0;
        curl_multi_assign(cl->multi, s, NULL);
        bool open = slot != NULL && still_open(w);
        if (open && w->events != 0) {
            w->kept = true; /* armed until curl takes it again, or closes it */
            return 0;
        }
        watch_end(cl, w);
        if (slot != NULL && !open)
            *slot = NULL; /* closed behind the driver's back: no longer curl's */
        return 0;
    }
    if (w == NULL && slot != NULL && *slot != UNWATCHED)
        w = *slot; /* a kept connection, taken again */
    if (w == NULL && (w = watch_new(cl, s)) == NULL)
        return -1;
    if (slot != NULL && *slot != w) {
        *slot = w;
        w->ino = inode_of(s);
    }
    if (w->kept || !assigned)
        curl_multi_assign(cl->multi, s, w);
    w->kept = false;
    unsigned events = ((what & CURL_POLL_IN) ? RESIL_IO_READ : 0) |
                      ((what & CURL_POLL_OUT) ? RESIL_IO_WRITE : 0);
    if (events == w->events)
        return 0; /* armed as it is: no call to the loop, no epoll_ctl */
    w->events = events;
    return resil_loop_io_start(cl->loop, &w->io, s, events) == 0 ? 0 : -1;
}

/* curl's sockets are opened here to be known as its connections'. */
static curl_socket_t on_open_socket(void *clientp, curlsocktype purpose,
                                    struct curl_sockaddr *addr)
{
    resil__curl_loop *cl = clientp;
    (void)purpose;
    curl_socket_t s = socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
    if (s < 0)
        return CURL_SOCKET_BAD;
    if ((size_t)s >= cl->by_fd_len) {
        size_t len = cl->by_fd_len ? cl->by_fd_len : 64;
        while (len <= (size_t)s)
            len *= 2;
        sock_watch **p = realloc(cl->by_fd, len * sizeof *p);
        if (p == NULL) {
            close(s);
            return CURL_SOCKET_BAD;
        }
        memset(p + cl->by_fd_len, 0, (len - cl->by_fd_len) * sizeof *p);
        cl->by_fd = p;
        cl->by_fd_len = len;
    }
    if (cl->by_fd[s] != NULL && cl->by_fd[s] != UNWATCHED)
        watch_end(cl, cl->by_fd[s]); /* its socket was closed without a word */
    cl->by_fd[s] = UNWATCHED;
    return s;
}

/* The watch goes before the descriptor does. */
static int on_close_socket(void *clientp, curl_socket_t s)
{
    resil__curl_loop *cl = clientp;
    sock_watch **slot = opened_socket(cl, s);
    if (slot != NULL) {
        if (*slot != UNWATCHED)
            watch_end(cl, *slot);
        *slot = NULL;
    }
    return close(s);
}

static int on_curl_timer(CURLM *multi, long ms, void *userp)
{
    (void)multi;
    resil__curl_loop *cl = userp;
    const resil_loop_ops *ops = cl->loop->ops;
    if (ms < 0)
        ops->timer_stop(cl->loop->self, &cl->timer);
    else
        ops->timer_start(cl->loop->self, &cl->timer, RESIL_MS(ms));
    return 0;
}

int resil__curl_loop_new(resil_loop *loop, resil__curl_done_fn *done, void *ud,
                         resil__curl_loop **out)
{
    resil__curl_loop *cl = calloc(1, sizeof *cl);
    if (cl == NULL)
        return RESIL_ENOMEM;
    if ((cl->multi = curl_multi_init()) == NULL) {
        free(cl);
        return RESIL_ENOMEM;
    }
    cl->loop = loop;
    cl->done = done;
    cl->ud = ud;
    cl->timer.fn = on_timer;
    curl_multi_setopt(cl->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(cl->multi, CURLMOPT_SOCKETDATA, cl);
    curl_multi_setopt(cl->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(cl->multi, CURLMOPT_TIMERDATA, cl);
    *out = cl;
    return 0;
}

void resil__curl_loop_free(resil__curl_loop *cl)
{
    if (cl == NULL)
        return;
    curl_multi_cleanup(cl->multi); /* may remove and close sockets through the callbacks */
    while (cl->watches != NULL)
        watch_end(cl, cl->watches);
    free(cl->by_fd);
    for (sock_watch *w = cl->idle_watches, *next; w != NULL; w = next) {
        next = w->next;
        free(w);
    }
    cl->loop->ops->timer_stop(cl->loop->self, &cl->timer);
    free(cl);
}

CURLM *resil__curl_loop_multi(resil__curl_loop *cl) { return cl->multi; }

void resil__curl_loop_own_sockets(resil__curl_loop *cl, CURL *easy)
{
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, cl);
    curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
    curl_easy_setopt(easy, CURLOPT_CLOSESOCKETDATA, cl);
}
