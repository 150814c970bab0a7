/* mcdc_tds_stream.c - TDS packets over a socket (poll-based timeouts) or
 * memory: reply payloads into one bounded window, requests split into
 * packets of the negotiated size. With TLS on (mcdc_tds_tls.h) socket bytes
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

/* Raw receive buffer: two full packets per read keeps syscalls few. */
#define RAW_BYTES (2u * 32768u)
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
    s->buf = mcdc_malloc(s->cap);
    if (s->raw == NULL || s->buf == NULL) {
        mcdc_free(s->raw);
        mcdc_free(s->buf);
        s->raw = s->buf = NULL;
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
    mcdc_free(s->buf);
    mcdc_free(s->out);
    mcdc_buf_free(&s->scratch);
    s->raw = s->buf = s->out = NULL;
}

void mcdc_tds_begin_reply(mcdc_tds_stream *s) {
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

/* Reads more raw bytes (at least one). */
static int recv_raw(mcdc_tds_stream *s, mcdc_error *err) {
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
        int rc = mcdc_tds_wait(s, POLLIN, err);
        if (rc != MCDC_OK) return rc;
    }
}

/* Moves payload from raw packets into the window until it holds `want`
 * unconsumed bytes or the message ends. */
static int fill(mcdc_tds_stream *s, size_t want, mcdc_error *err) {
    while (s->len - s->pos < want && !s->msg_done) {
        if (!s->in_packet) {
            while (s->raw_len - s->raw_pos < TDS_HEADER_BYTES) {
                int rc = recv_raw(s, err);
                if (rc != MCDC_OK) return rc;
            }
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
        }
        if (s->pkt_left > 0) {
            if (s->raw_len == s->raw_pos) {
                int rc = recv_raw(s, err);
                if (rc != MCDC_OK) return rc;
            }
            size_t n = s->raw_len - s->raw_pos;
            if (n > s->pkt_left) n = s->pkt_left;
            if (n > s->cap - s->len) n = s->cap - s->len;
            MCDC_ASSERT(n > 0);
            memcpy(s->buf + s->len, s->raw + s->raw_pos, n);
            s->len += n;
            s->raw_pos += n;
            s->pkt_left -= n;
            s->bytes_in += n;
        }
        if (s->pkt_left == 0) {
            s->in_packet = false;
            if (s->pkt_eom) s->msg_done = true;
        }
    }
    return MCDC_OK;
}

int mcdc_tds_need_slow(mcdc_tds_stream *s, size_t n, mcdc_error *err) {
    if (s->dead)
        return mcdc_error_set(err, MCDC_E_TRANSIENT,
                              "TDS: the connection to %s was lost earlier", s->where);
    if (s->pos > 0) {
        memmove(s->buf, s->buf + s->pos, s->len - s->pos);
        s->len -= s->pos;
        s->pos = 0;
    }
    if (n > WINDOW_BYTES_MAX) {
        s->dead = true;
        return mcdc_error_set(err, MCDC_E_PROTOCOL,
                              "TDS: a token of %zu bytes from %s exceeds the %u-byte window",
                              n, s->where, WINDOW_BYTES_MAX);
    }
    if (n > s->cap) {
        size_t cap = s->cap;
        while (cap < n) cap *= 2;
        if (cap > WINDOW_BYTES_MAX) cap = WINDOW_BYTES_MAX;
        uint8_t *nb = mcdc_realloc(s->buf, cap);
        if (nb == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory for TDS window");
        s->buf = nb;
        s->cap = cap;
    }
    /* Read ahead as far as the window allows: fewer trips through here. */
    int rc = fill(s, n, err);
    if (rc != MCDC_OK) return rc;
    if (s->len - s->pos < n) {
        s->dead = true;
        return mcdc_error_set(err, MCDC_E_PROTOCOL,
                              "TDS: the reply from %s ended inside a token (%zu of %zu bytes)",
                              s->where, s->len - s->pos, n);
    }
    /* Opportunistic: top up the window with bytes already received. */
    while (!s->msg_done && s->len < s->cap && s->raw_len > s->raw_pos) {
        size_t before = s->len;
        rc = fill(s, s->len - s->pos + 1, err);
        if (rc != MCDC_OK || s->len == before) break;
    }
    return rc;
}

int mcdc_tds_at_end(mcdc_tds_stream *s, bool *out_end, mcdc_error *err) {
    *out_end = false;
    if (s->len > s->pos) return MCDC_OK;
    int rc = fill(s, 1, err);
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
