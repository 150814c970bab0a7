/*
 * test_http_server.h - a scripted HTTP server on loopback for the unit
 * tests of the HTTP layer and the object-store backends: one connection
 * per step, each answering a canned response, resetting the connection
 * after the request arrived, or saying nothing until the client gives up;
 * what each request was is kept for the test to check.
 */
#ifndef TEST_HTTP_SERVER_H
#define TEST_HTTP_SERVER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mcdc_test.h"

/* ---- a scripted server: one connection per step ---------------------------------- */

typedef enum { ANSWER, RESET, STALL } step_kind;

typedef struct step {
    step_kind kind;
    const char *response; /* ANSWER: the whole answer (status line, headers, body) */
} step;

enum { SEEN_MAX = 8 };

typedef struct server {
    int fd;
    int port;
    const step *steps;
    int n_steps;
    pthread_t th;
    /* what it received, per step */
    char seen_sig[SEEN_MAX][32];   /* the X-Sig header */
    char seen_body[SEEN_MAX][32];
    char seen_line[SEEN_MAX][128]; /* the request line */
    char seen_req[SEEN_MAX][2048]; /* the request's head and body (cut) */
    int served;
    char url[96]; /* http://127.0.0.1:<port><path> */
} server;

static inline void header_value(const char *req, const char *name, char *out, size_t room) {
    out[0] = 0;
    const char *p = strcasestr(req, name);
    if (p == NULL) return;
    p += strlen(name);
    while (*p == ' ') p++;
    size_t n = strcspn(p, "\r\n");
    if (n >= room) n = room - 1;
    memcpy(out, p, n);
    out[n] = 0;
}

/* Reads one request (headers, then Content-Length bytes of body). */
static inline int read_request(int c, char *buf, size_t room) {
    size_t len = 0;
    char *end = NULL;
    while (len + 1 < room) {
        ssize_t k = recv(c, buf + len, room - 1 - len, 0);
        if (k <= 0) return -1;
        len += (size_t)k;
        buf[len] = 0;
        if (end == NULL && (end = strstr(buf, "\r\n\r\n")) != NULL) end += 4;
        if (end) {
            char cl[32];
            header_value(buf, "Content-Length:", cl, sizeof cl);
            size_t want = (size_t)atol(cl);
            if (len >= (size_t)(end - buf) + want) return (int)len;
        }
    }
    return -1;
}

static inline void *server_main(void *arg) {
    server *s = arg;
    for (int i = 0; i < s->n_steps; i++) {
        int c = accept(s->fd, NULL, NULL);
        if (c < 0) break;
        char req[8192];
        int n = read_request(c, req, sizeof req);
        if (n > 0 && i < SEEN_MAX) {
            header_value(req, "X-Sig:", s->seen_sig[i], sizeof s->seen_sig[i]);
            const char *body = strstr(req, "\r\n\r\n");
            snprintf(s->seen_body[i], sizeof s->seen_body[i], "%s", body ? body + 4 : "");
            snprintf(s->seen_req[i], sizeof s->seen_req[i], "%.2047s", req);
            size_t ln = strcspn(req, "\r\n");
            snprintf(s->seen_line[i], sizeof s->seen_line[i], "%.*s", (int)ln, req);
        }
        s->served++;
        const step *st = &s->steps[i];
        if (st->kind == ANSWER) {
            (void)!write(c, st->response, strlen(st->response));
        } else if (st->kind == RESET) {
            struct linger lg = {1, 0}; /* close with a RST */
            setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        } else { /* STALL: say nothing until the client gives up */
            struct pollfd p = {c, POLLIN, 0};
            char b;
            while (poll(&p, 1, 10000) > 0 && recv(c, &b, 1, 0) > 0) {
            }
        }
        close(c);
    }
    return NULL;
}

static inline void server_start(server *s, const step *steps, int n) {
    memset(s, 0, sizeof *s);
    s->steps = steps;
    s->n_steps = n;
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(bind(s->fd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(listen(s->fd, 8) == 0);
    socklen_t al = sizeof a;
    getsockname(s->fd, (struct sockaddr *)&a, &al);
    s->port = ntohs(a.sin_port);
    pthread_create(&s->th, NULL, server_main, s);
}

static inline void server_stop(server *s) {
    shutdown(s->fd, SHUT_RDWR);
    pthread_join(s->th, NULL);
    close(s->fd);
}

#endif /* TEST_HTTP_SERVER_H */
