/*
 * tcp_in_flight.h — whether a loopback socket still has something on the
 * way to its other end.
 *
 * On loopback a sent byte is handed to the receiving socket in a softirq,
 * which a loaded kernel may defer to a thread of its own: a byte can be
 * sent and not yet readable. The sender's unacknowledged count says when
 * it has arrived, which is what the virtual loop and the test server ask
 * before they call the wire quiet.
 */
#ifndef RESIL_TCP_IN_FLIGHT_H
#define RESIL_TCP_IN_FLIGHT_H

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <sys/socket.h>

/* Bytes (or a SYN, or a FIN) sent on fd that the other end has not
 * acknowledged. A closed connection has nothing in flight, whatever it
 * never had acknowledged; what is not a TCP socket has nothing either. */
static inline bool tcp_in_flight(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        return false;
    return ti.tcpi_state != TCP_CLOSE && ti.tcpi_state != TCP_LISTEN && ti.tcpi_unacked > 0;
}

#endif
