/* fuzz_objstore_xml.c - what S3 and Azure answer, read by our small XML
 * reader (mcdc_xml.h) and the Azure helpers on it: never a crash or a leak,
 * whatever the body; every element found lies inside the body; text escaped
 * by us and unescaped again is the text we started from; a redacted sig=
 * value is gone. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_azure_auth.h"
#include "mcdc_xml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int quiet;
    if (!quiet) {
        static const mcdc_log_sink sink = {NULL, NULL, MCDC_LOG_ERROR};
        mcdc_log_use(&sink);
        quiet = 1;
    }
    if (size > 1 << 16) return 0;
    const char *s = (const char *)data, *end = s + size;

    /* every element the readers look for, found only inside the body */
    static const char *const tags[] = {"Contents", "Key", "Code", "Message", "Blob", "Name",
                                       "NextContinuationToken", "UploadId", "Region"};
    for (size_t t = 0; t < sizeof tags / sizeof tags[0]; t++) {
        const char *pos = s, *content;
        size_t len;
        int guard = 0;
        while (mcdc_xml_next(&pos, end, tags[t], &content, &len)) {
            if (content < s || content + len > end || pos > end) abort();
            if (++guard > (int)size + 1) abort(); /* it must move on */
        }
        mcdc_buf out = {0};
        (void)mcdc_xml_text(&out, s, size, tags[t], NULL);
        mcdc_buf_free(&out);
        char fixed[64];
        (void)mcdc_xml_text_fixed(fixed, sizeof fixed, s, size, tags[t]);
        if (strlen(fixed) >= sizeof fixed) abort();
    }
    {
        const char *pos = s, *content;
        size_t len;
        mcdc_buf name = {0};
        while (mcdc_xml_next(&pos, end, "Blob", &content, &len)) {
            bool found = false;
            (void)mcdc_az_blob_name(content, content + len, &name, &found, NULL);
        }
        mcdc_buf_free(&name);
    }
    char code[64], message[256];
    mcdc_az_error_parse(s, size, code, sizeof code, message, sizeof message);
    if (strlen(code) >= sizeof code || strlen(message) >= sizeof message) abort();

    /* escape, then unescape: the same bytes */
    mcdc_buf esc = {0}, back = {0};
    if (mcdc_xml_escape(&esc, s, size, NULL) == MCDC_OK) {
        if (mcdc_xml_unescape(&back, (const char *)esc.data, esc.len, NULL) != MCDC_OK) abort();
        if (back.len != size || (size && memcmp(back.data, data, size) != 0)) abort();
    }
    mcdc_buf_free(&esc);
    mcdc_buf_free(&back);

    /* a message holding sig=SECRETXX loses it */
    if (size < 2048) {
        size_t cap = size * 2 + 64;
        char *m = malloc(cap);
        if (m) {
            memcpy(m, data, size);
            m[size] = 0;
            size_t n = strlen(m);
            if (n + 13 < cap) {
                memcpy(m + n, "&sig=SECRETXX", 14);
                mcdc_az_redact(m, cap);
                if (strstr(m, "sig=SECRETXX")) abort();
            }
            free(m);
        }
    }
    return 0;
}
