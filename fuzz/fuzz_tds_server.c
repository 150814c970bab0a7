/*
 * fuzz_tds_server.c - the simulator's request decoding, fed a client byte
 * stream: packets are assembled into messages and each message goes to the
 * decoder the server would use (PRELOGIN, LOGIN7, SQL batch, RPC, transaction
 * manager). Decoded RPC parameters are then served back as a result row, so
 * the encoders see every type and value the decoders can produce.
 *
 * Build (from the repository root):
 *   clang -std=c17 -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
 *     -Iinclude -Isrc/util -Isrc/tds -Isrc/sim fuzz/fuzz_tds_server.c src/sim/tds_wire.c \
 *     src/sim/tds_rpc.c src/sim/tds_result.c src/util/mcdc_util.c -lm -pthread \
 *     -o build-fuzz/fuzz_tds_server
 *   build-fuzz/fuzz_tds_server fuzz/corpus/sim_tds_server
 */
#include <stdint.h>
#include <string.h>

#include "tds_result.h"
#include "tds_tls.h"
#include "tds_wire.h"

typedef struct stream {
    const uint8_t *p;
    size_t n, i;
} stream;

static int rd(void *ctx, uint8_t *p, size_t n) {
    stream *s = ctx;
    if (s->n - s->i < n) return -1;
    memcpy(p, s->p + s->i, n);
    s->i += n;
    return 0;
}

static int wr(void *ctx, const uint8_t *p, size_t n) {
    (void)p;
    size_t *total = ctx;
    *total += n;
    return 0;
}

static void serve_params(sim_tds_result *res, const sim_tds_rpc *rpc) {
    if (rpc->nparams == 0) return;
    int n = rpc->nparams > 64 ? 64 : rpc->nparams;
    sim_column cols[64];
    sim_value vals[64];
    for (int i = 0; i < n; i++) {
        cols[i] = (sim_column){rpc->params[i].name, rpc->params[i].type, true};
        vals[i] = rpc->params[i].value;
    }
    sim_sink sink;
    sim_tds_result_sink(res, &sink);
    sim_tds_result_begin(res, true, true);
    if (sink.columns(sink.ctx, cols, n) == 0) sink.row(sink.ctx, vals, n);
    sink.done(sink.ctx, 1, true, true, false);
    sim_tds_result_end_rpc(res, true);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int quiet;
    if (!quiet) {
        { static const mcdc_log_sink quiet = {NULL, NULL, MCDC_LOG_ERROR}; mcdc_log_use(&quiet); }
        quiet = 1;
    }
    stream s = {data, size, 0};
    size_t written = 0;
    sim_tds_out out;
    if (sim_tds_out_init(&out, wr, &written, NULL)) return 0;
    out.size = 512; /* small packets: every token crosses packet boundaries */
    sim_tds_result res;
    sim_tds_result_init(&res, &out, NULL);
    res.nbcrow = size & 1; /* both row tokens */
    sim_tds_msg msg = {0};
    sim_tds_rpc rpc = {0};
    mcdc_buf text = {0};
    mcdc_error err = MCDC_ERROR_INIT;
    for (int k = 0; k < 16; k++) {
        if (sim_tds_msg_read(&msg, rd, &s, &err)) break;
        const uint8_t *p = msg.payload.data;
        size_t n = msg.payload.len;
        if (n && !p) break;
        switch (msg.type) {
        case TDS_PKT_PRELOGIN: {
            sim_tds_prelogin pl;
            if (sim_tds_prelogin_parse(&pl, p, n, &err) == MCDC_OK) {
                int enc = sim_tls_negotiate((sim_tls_mode)(size % 3), pl.encryption);
                MCDC_ASSERT(enc >= 0 && enc <= 3);
                (void)sim_tls_after_prelogin(pl.encryption, enc);
                sim_tds_prelogin_reply(&out, 16, enc);
            }
            break;
        }
        case TDS_PKT_LOGIN7: {
            sim_tds_login7 l;
            if (sim_tds_login7_parse(&l, p, n, &err) == MCDC_OK) {
                sim_tds_login_reply(&out, l.database[0] ? l.database : "master", 4096,
                                sim_tds_packet_size_negotiate(l.packet_size), l.feature_ext, 16);
                sim_tds_login7_wipe(&l);
            }
            break;
        }
        case TDS_PKT_SQL_BATCH:
            if (sim_tds_batch_decode(&text, p, n, &err) == MCDC_OK)
                MCDC_ASSERT(text.data[text.len] == 0);
            break;
        case TDS_PKT_RPC: {
            size_t pos;
            if (sim_tds_skip_all_headers(p, n, &pos, &err)) break;
            bool more = true;
            for (int r = 0; r < 8 && more; r++) {
                if (sim_tds_rpc_decode(&rpc, p, n, &pos, &more, &err)) break;
                MCDC_ASSERT(pos <= n);
                serve_params(&res, &rpc);
            }
            break;
        }
        case TDS_PKT_TRANSACTION: {
            char sql[400];
            sim_tds_tm_decode(sql, sizeof sql, p, n, &err);
            break;
        }
        default: break;
        }
    }
    mcdc_buf_free(&text);
    sim_tds_rpc_free(&rpc);
    sim_tds_msg_free(&msg);
    sim_tds_result_free(&res);
    sim_tds_out_free(&out);
    return 0;
}
