/* mcdc_tds_stream.c - TDS packets over a socket (poll-based timeouts) or
 * memory: reply payloads read where they were received, or gathered in one
 * bounded window across packet boundaries; requests split into packets of
 * the negotiated size. With TLS on (mcdc_tds_tls.h) socket bytes
 * go through it; plaintext connections pay one pointer test per syscall. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mcdc_limits.h"
#include "mcdc_tds_proto.h"
#include "mcdc_tds_tls.h"

_Static_assert(TDS_HEADER_BYTES == 8, "TDS packet header is 8 bytes");

/* Raw receive buffer: up to eight full packets per read keeps syscalls
 * few when the server sends faster than we decode. */
#define RAW_BYTES (8u * 32768u)
/* A reply longer than this is read in bulk: while waiting, the socket
 * wakes us only once half the raw buffer can be filled (or after
 * BULK_WAIT_MS), not for every packet the server writes. */
#define BULK_REPLY_BYTES (1u << 20)
#define BULK_WAIT_MS 1
/* The payload window: a packet plus the largest token we need whole
 * (an ENVCHANGE/ERROR of 65535 bytes, a COLMETADATA name of 2x65535). */
#define WINDOW_BYTES_MAX (4u * 65536u + 65536u)

int mcdc_tds_stream_init(mcdc_tds_stream *s, int fd, const uint8_t *mem, size_t mem_len,
                         mcdc_error *err) {
    memset(s, 0, sizeof *s);
    s->fd = fd;
    s->mem = mem;
    s->mem_len = mem_len;
    s->packet_bytes = MCDC_TDS_PACKET_BYTES_DEFAULT;
    s->packet_id = 1;
    s->raw_cap = RAW_BYTES;
    s->cap = 2u * 32768u;
    s->raw = mcdc_malloc(s->raw_cap);
    s->win = mcdc_malloc(s->cap);
    s->buf = s->win;
    if (s->raw == NULL || s->win == NULL) {
        mcdc_free(s->raw);
        mcdc_free(s->win);
        s->raw = s->win = NULL;
        s->buf = NULL;
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory for TDS buffers");
    }
    snprintf(s->where, sizeof s->where, "%s", fd >= 0 ? "the server" : "a recorded stream");
    return MCDC_OK;
}

void mcdc_tds_stream_free(mcdc_tds_stream *s) {
    if (s == NULL) return;
    if (s->fd >= 0) close(s->fd);
    if (s->record_fd > 0) close(s->record_fd);
    mcdc_tds_tls_free(s->tls);
    s->tls = NULL;
    s->fd = -1;
    s->record_fd = 0;
    mcdc_free(s->raw);
    mcdc_free(s->win);
    mcdc_free(s->out);
    mcdc_buf_free(&s->scratch);
    s->raw = s->win = s->out = NULL;
    s->buf = NULL;
}

void mcdc_tds_begin_reply(mcdc_tds_stream *s) {
    s->reply_bytes0 = s->bytes_in;
    s->buf = s->win;
    s->pos = s->len = 0;
    s->pkt_left = 0;
    s->pkt_eom = false;
    s->in_packet = false;
    s->msg_done = false;
}

static int lost(mcdc_tds_stream *s, mcdc_error *err, const char *what, int e) {
    s->dead = true;
    return mcdc_error_set(err, MCDC_E_TRANSIENT,
                          "TDS: %s %s%s%s; the connection is closed, open a new one", what,
                          s->where, e ? ": " : "", e ? strerror(e) : "");
}

/* Waits for the socket to be readable (or writable). */
int mcdc_tds_wait(mcdc_tds_stream *s, short events, mcdc_error *err) {
    for (;;) {
        int ms = s->timeout_ms > 0 ? s->timeout_ms : -1;
        if (s->deadline_us > 0) {
            int64_t left = (s->deadline_us - mcdc_monotonic_us()) / 1000;
            if (left <= 0) return lost(s, err, "timed out waiting for", 0);
            if (ms < 0 || left < ms) ms = (int)left;
        }
        struct pollfd pfd = {s->fd, events, 0};
        int n = poll(&pfd, 1, ms);
        if (n > 0) return MCDC_OK;
        if (n == 0) {
            s->dead = true;
            return mcdc_error_set(err, MCDC_E_TRANSIENT,
                                  "TDS: no answer from %s within %d ms (query timeout); the "
                                  "connection is closed, open a new one",
                                  s->where, ms);
        }
        if (errno != EINTR) return lost(s, err, "poll failed on", errno);
    }
}

/* In a long reply: waits up to BULK_WAIT_MS for min(room, half the raw
 * buffer, an eighth of the socket's receive buffer) bytes (SO_RCVLOWAT for
 * this one poll). True when data is ready; else the caller waits as usual
 * (the reply's last bytes, a slow server). The eighth: for a low mark whose
 * buffer space (about 2-4x the mark) exceeds the receive buffer, Linux
 * grows the buffer and clamps the TCP window to the mark for good, which
 * would cap throughput on long-distance links. */
static bool bulk_wait(mcdc_tds_stream *s, size_t room) {
    int rcvbuf = 0, one = 1;
    socklen_t sl = sizeof rcvbuf;
    if (getsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &sl) != 0 || rcvbuf < 8 * 8192)
        return false;
    size_t lw = room < RAW_BYTES / 2 ? room : RAW_BYTES / 2;
    if (lw > (size_t)rcvbuf / 8) lw = (size_t)rcvbuf / 8;
    int lwi = (int)lw;
    if (setsockopt(s->fd, SOL_SOCKET, SO_RCVLOWAT, &lwi, sizeof lwi) != 0) return false;
    struct pollfd pfd = {s->fd, POLLIN, 0};
    int n = poll(&pfd, 1, BULK_WAIT_MS);
    (void)setsockopt(s->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
    return n > 0;
}

/* Reads more raw bytes (at least one). Moves the unconsumed raw bytes:
 * buf must not point into raw. */
static int recv_raw(mcdc_tds_stream *s, mcdc_error *err) {
    MCDC_ASSERT(s->buf == s->win);
    if (s->raw_pos > 0) {
        memmove(s->raw, s->raw + s->raw_pos, s->raw_len - s->raw_pos);
        s->raw_len -= s->raw_pos;
        s->raw_pos = 0;
    }
    size_t room = s->raw_cap - s->raw_len;
    MCDC_ASSERT(room > 0);
    if (s->fd < 0) {
        size_t n = s->mem_len - s->mem_pos;
        if (n == 0) return lost(s, err, "end of the recorded stream from", 0);
        if (n > room) n = room;
        if (s->mem_read_max > 0 && n > s->mem_read_max) n = s->mem_read_max;
        memcpy(s->raw + s->raw_len, s->mem + s->mem_pos, n);
        s->mem_pos += n;
        s->raw_len += n;
        return MCDC_OK;
    }
    for (;;) {
        ssize_t n = s->tls ? mcdc_tds_tls_recv(s->tls, s->raw + s->raw_len, room)
                           : recv(s->fd, s->raw + s->raw_len, room, MSG_DONTWAIT);
        if (n > 0) {
            if (s->record_fd > 0 &&
                write(s->record_fd, s->raw + s->raw_len, (size_t)n) != (ssize_t)n) {
                close(s->record_fd); /* a fixture is best effort */
                s->record_fd = 0;
            }
            s->raw_len += (size_t)n;
            return MCDC_OK;
        }
        if (n == 0) return lost(s, err, "connection closed by", 0);
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return lost(s, err, "recv failed from", errno);
        if (s->bytes_in - s->reply_bytes0 >= BULK_REPLY_BYTES && bulk_wait(s, room)) continue;
        int rc = mcdc_tds_wait(s, POLLIN, err);
        if (rc != MCDC_OK) return rc;
    }
}

/* Reads the next packet's header (received bytes only). */
static int packet_header(mcdc_tds_stream *s, mcdc_error *err) {
    const uint8_t *h = s->raw + s->raw_pos;
    uint16_t plen = (uint16_t)((h[2] << 8) | h[3]);
    if (plen < TDS_HEADER_BYTES || (h[0] != TDS_PKT_REPLY && h[0] != TDS_PKT_PRELOGIN)) {
        s->dead = true;
        return mcdc_error_set(err, MCDC_E_PROTOCOL,
                              "TDS: bad packet header from %s (type 0x%02X, length %u)",
                              s->where, h[0], plen);
    }
    s->pkt_type = h[0];
    s->spid = (uint16_t)((h[4] << 8) | h[5]);
    s->pkt_eom = (h[1] & TDS_STATUS_EOM) != 0;
    s->pkt_left = (size_t)plen - TDS_HEADER_BYTES;
    s->raw_pos += TDS_HEADER_BYTES;
    s->in_packet = true;
    return MCDC_OK;
}
/* Marks n payload bytes of the current packet at raw + raw_pos taken. */
static void take(mcdc_tds_stream *s, size_t n) {
    s->raw_pos += n;
    s->pkt_left -= n;
    s->bytes_in += n;
    if (s->pkt_left == 0) {
        s->in_packet = false;
        if (s->pkt_eom) s->msg_done = true;
    }
}

/* Copies payload from raw packets into the window until it holds `want`
 * unconsumed bytes (no more: the rest is read in place) or the message
 * ends. */
static int fill(mcdc_tds_stream *s, size_t want, mcdc_error *err) {
    MCDC_ASSERT(s->buf == s->win && want <= s->cap);
    while (s->len - s->pos < want && !s->msg_done) {
        if (!s->in_packet) {
            while (s->raw_len - s->raw_pos < TDS_HEADER_BYTES) {
                int rc = recv_raw(s, err);
                if (rc != MCDC_OK) return rc;
            }
            int rc = packet_header(s, err);
            if (rc != MCDC_OK) return rc;
        }
        if (s->pkt_left > 0) {
            if (s->raw_len == s->raw_pos) {
                int rc = recv_raw(s, err);
                if (rc != MCDC_OK) return rc;
            }
            size_t n = s->raw_len - s->raw_pos;
            if (n > s->pkt_left) n = s->pkt_left;
            if (n > want - (s->len - s->pos)) n = want - (s->len - s->pos);
            MCDC_ASSERT(n > 0 && n <= s->cap - s->len);
            memcpy(s->win + s->len, s->raw + s->raw_pos, n);
            s->len += n;
            take(s, n);
        } else {
            take(s, 0);
        }
    }
    return MCDC_OK;
}

/* With every byte of buf consumed: points buf at the received bytes of the
 * current packet when they hold at least n (reading once when none are
 * left). False when they do not: the caller gathers. */
static int read_in_place(mcdc_tds_stream *s, size_t n, bool *done, mcdc_error *err) {
    *done = false;
    s->buf = s->win;
    s->pos = s->len = 0;
    if (s->msg_done) return MCDC_OK;
    if (s->raw_len == s->raw_pos) {
        int rc = recv_raw(s, err);
        if (rc != MCDC_OK) return rc;
    }
    if (!s->in_packet) {
        if (s->raw_len - s->raw_pos < TDS_HEADER_BYTES) return MCDC_OK;
        int rc = packet_header(s, err);
        if (rc != MCDC_OK) return rc;
    }
    size_t k = s->raw_len - s->raw_pos;
    if (k > s->pkt_left) k = s->pkt_left;
    if (k < n || k == 0) return MCDC_OK;
    s->buf = s->raw + s->raw_pos;
    s->len = k;
    take(s, k);
    *done = true;
    return MCDC_OK;
}

/* Makes n unconsumed bytes contiguous at buf + pos, or as many as the
 * message has left. */
static int acquire(mcdc_tds_stream *s, size_t n, mcdc_error *err) {
    size_t have = s->len - s->pos;
    if (have == 0) {
        bool done;
        int rc = read_in_place(s, n, &done, err);
        if (rc != MCDC_OK || done) return rc;
    }
    if (n > s->cap) {
        size_t cap = s->cap;
        while (cap < n) cap *= 2;
        if (cap > WINDOW_BYTES_MAX) cap = WINDOW_BYTES_MAX;
        uint8_t *nb = mcdc_realloc(s->win, cap);
        if (nb == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory for TDS window");
        if (s->buf == s->win) s->buf = nb;
        s->win = nb;
        s->cap = cap;
    }
    /* the unconsumed bytes to the window's start, then the rest after them */
    if (s->buf != s->win) memcpy(s->win, s->buf + s->pos, have);
    else if (s->pos > 0) memmove(s->win, s->win + s->pos, have);
    s->buf = s->win;
    s->pos = 0;
    s->len = have;
    return fill(s, n, err);
}

int mcdc_tds_need_slow(mcdc_tds_stream *s, size_t n, mcdc_error *err) {
    if (s->dead)
        return mcdc_error_set(err, MCDC_E_TRANSIENT,
                              "TDS: the connection to %s was lost earlier", s->where);
    if (n > WINDOW_BYTES_MAX) {
        s->dead = true;
        return mcdc_error_set(err, MCDC_E_PROTOCOL,
                              "TDS: a token of %zu bytes from %s exceeds the %u-byte window",
                              n, s->where, WINDOW_BYTES_MAX);
    }
    int rc = acquire(s, n, err);
    if (rc != MCDC_OK) return rc;
    if (s->len - s->pos < n) {
        s->dead = true;
        return mcdc_error_set(err, MCDC_E_PROTOCOL,
                              "TDS: the reply from %s ended inside a token (%zu of %zu bytes)",
                              s->where, s->len - s->pos, n);
    }
    return MCDC_OK;
}

int mcdc_tds_at_end(mcdc_tds_stream *s, bool *out_end, mcdc_error *err) {
    *out_end = false;
    if (s->len > s->pos) return MCDC_OK;
    int rc = acquire(s, 1, err);
    if (rc != MCDC_OK) return rc;
    *out_end = s->len == s->pos && s->msg_done;
    return MCDC_OK;
}

static int send_all(mcdc_tds_stream *s, const uint8_t *p, size_t n, mcdc_error *err) {
    if (s->fd < 0) return MCDC_OK; /* memory streams swallow requests */
    while (n > 0) {
        ssize_t k = s->tls ? mcdc_tds_tls_send(s->tls, p, n)
                           : send(s->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = mcdc_tds_wait(s, POLLOUT, err);
            if (rc != MCDC_OK) return rc;
            continue;
        }
        return lost(s, err, "send failed to", k < 0 ? errno : 0);
    }
    return MCDC_OK;
}

int mcdc_tds_send(mcdc_tds_stream *s, uint8_t type, const uint8_t *payload, size_t n,
                  mcdc_error *err) {
    if (s->dead)
        return mcdc_error_set(err, MCDC_E_TRANSIENT,
                              "TDS: the connection to %s was lost earlier; open a new one",
                              s->where);
    size_t psize = (size_t)s->packet_bytes;
    if (s->out_cap < psize) {
        mcdc_free(s->out);
        s->out = mcdc_malloc(psize);
        if (s->out == NULL) {
            s->out_cap = 0;
            return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory for a TDS packet");
        }
        s->out_cap = psize;
    }
    size_t room = psize - TDS_HEADER_BYTES;
    size_t off = 0;
    do {
        size_t k = n - off < room ? n - off : room;
        bool last = off + k == n;
        size_t plen = k + TDS_HEADER_BYTES;
        uint8_t *h = s->out;
        h[0] = type;
        h[1] = last ? TDS_STATUS_EOM : 0;
        h[2] = (uint8_t)(plen >> 8);
        h[3] = (uint8_t)plen;
        h[4] = h[5] = 0;
        h[6] = s->packet_id++;
        h[7] = 0;
        if (k) memcpy(h + TDS_HEADER_BYTES, payload + off, k);
        int rc = send_all(s, h, plen, err);
        if (rc != MCDC_OK) return rc;
        off += k;
    } while (off < n);
    if (s->tls) mcdc_tds_tls_message_sent(s, type);
    return MCDC_OK;
}
