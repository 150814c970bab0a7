/* mcdc_xml.c - the object stores' little XML (see mcdc_xml.h). */
#include "mcdc_xml.h"

#include <string.h>

/* The next start tag <tag ...> or <tag/> in [p, end): its '<', or NULL. */
static const char *find_start(const char *p, const char *end, const char *tag, size_t tn) {
    while (p < end) {
        const char *lt = memchr(p, '<', (size_t)(end - p));
        if (lt == NULL || (size_t)(end - lt) < tn + 2) return NULL;
        char after = lt[1 + tn];
        if (memcmp(lt + 1, tag, tn) == 0 &&
            (after == '>' || after == ' ' || after == '/' || after == '\t' || after == '\n' ||
             after == '\r'))
            return lt;
        p = lt + 1;
    }
    return NULL;
}

bool mcdc_xml_next(const char **pos, const char *end, const char *tag, const char **content,
                   size_t *len) {
    size_t tn = strlen(tag);
    const char *lt = find_start(*pos, end, tag, tn);
    if (lt == NULL) return false;
    const char *gt = memchr(lt, '>', (size_t)(end - lt));
    if (gt == NULL) return false;
    if (gt[-1] == '/') { /* <tag/> */
        *content = gt + 1;
        *len = 0;
        *pos = gt + 1;
        return true;
    }
    const char *body = gt + 1;
    for (const char *p = body; p < end;) {
        const char *close = memchr(p, '<', (size_t)(end - p));
        if (close == NULL || (size_t)(end - close) < tn + 3) return false;
        if (close[1] == '/' && memcmp(close + 2, tag, tn) == 0 && close[2 + tn] == '>') {
            *content = body;
            *len = (size_t)(close - body);
            *pos = close + tn + 3;
            return true;
        }
        p = close + 1;
    }
    return false;
}

/* Appends code point cp as UTF-8. */
static int append_utf8(mcdc_buf *out, unsigned long cp, mcdc_error *err) {
    uint8_t b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (uint8_t)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (uint8_t)(0xC0 | (cp >> 6));
        b[1] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (uint8_t)(0xE0 | (cp >> 12));
        b[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (uint8_t)(0xF0 | (cp >> 18));
        b[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return mcdc_buf_append(out, b, n, err);
}

int mcdc_xml_unescape(mcdc_buf *out, const char *s, size_t n, mcdc_error *err) {
    static const struct {
        const char *name;
        char ch;
    } ents[] = {{"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"quot;", '"'}, {"apos;", '\''}};
    size_t i = 0;
    int rc = mcdc_buf_reserve(out, n + 1, err);
    while (rc == MCDC_OK && i < n) {
        const char *amp = memchr(s + i, '&', n - i);
        size_t run = amp ? (size_t)(amp - (s + i)) : n - i;
        rc = mcdc_buf_append(out, s + i, run, err);
        i += run;
        if (rc || amp == NULL) break;
        const char *semi = memchr(amp, ';', n - i);
        if (semi == NULL || semi - amp > 12)
            return mcdc_error_set(err, MCDC_E_PROTOCOL, "an XML answer has a bad entity");
        size_t elen = (size_t)(semi - amp) + 1; /* "&...;" */
        bool done = false;
        for (size_t k = 0; k < sizeof ents / sizeof ents[0] && !done; k++) {
            if (elen - 1 == strlen(ents[k].name) && memcmp(amp + 1, ents[k].name, elen - 1) == 0) {
                rc = mcdc_buf_append_byte(out, (uint8_t)ents[k].ch, err);
                done = true;
            }
        }
        if (!done && amp[1] == '#') {
            unsigned long cp = 0;
            bool hex = amp[2] == 'x' || amp[2] == 'X';
            const char *d = amp + (hex ? 3 : 2);
            for (; d < semi; d++) {
                int v = *d >= '0' && *d <= '9' ? *d - '0'
                        : hex && *d >= 'a' && *d <= 'f' ? *d - 'a' + 10
                        : hex && *d >= 'A' && *d <= 'F' ? *d - 'A' + 10
                                                         : -1;
                if (v < 0 || cp > 0x10FFFF) break;
                cp = cp * (hex ? 16u : 10u) + (unsigned long)v;
            }
            if (d == semi && d > amp + (hex ? 3 : 2) && cp <= 0x10FFFF) {
                rc = append_utf8(out, cp, err);
                done = true;
            }
        }
        if (!done) return mcdc_error_set(err, MCDC_E_PROTOCOL, "an XML answer has a bad entity");
        i += elen;
    }
    return rc == MCDC_OK ? mcdc_buf_cstr(out, err) : rc;
}

int mcdc_xml_text(mcdc_buf *out, const char *s, size_t n, const char *tag, mcdc_error *err) {
    const char *pos = s, *c;
    size_t len;
    if (!mcdc_xml_next(&pos, s + n, tag, &c, &len))
        return mcdc_error_set(err, MCDC_E_NOTFOUND, "no <%s> in the answer", tag);
    return mcdc_xml_unescape(out, c, len, err);
}

bool mcdc_xml_text_fixed(char *out, size_t room, const char *s, size_t n, const char *tag) {
    MCDC_ASSERT(room > 0);
    out[0] = 0;
    mcdc_buf b = {0};
    int rc = mcdc_xml_text(&b, s, n, tag, NULL);
    if (rc == MCDC_OK) {
        size_t k = b.len < room - 1 ? b.len : room - 1;
        if (k) memcpy(out, b.data, k);
        out[k] = 0;
    }
    mcdc_buf_free(&b);
    return rc != MCDC_E_NOTFOUND;
}

int mcdc_xml_escape(mcdc_buf *out, const char *s, size_t n, mcdc_error *err) {
    int rc = MCDC_OK;
    for (size_t i = 0; rc == MCDC_OK && i < n; i++) {
        switch (s[i]) {
        case '&': rc = mcdc_buf_append_str(out, "&amp;", err); break;
        case '<': rc = mcdc_buf_append_str(out, "&lt;", err); break;
        case '>': rc = mcdc_buf_append_str(out, "&gt;", err); break;
        case '"': rc = mcdc_buf_append_str(out, "&quot;", err); break;
        case '\'': rc = mcdc_buf_append_str(out, "&apos;", err); break;
        default: rc = mcdc_buf_append_byte(out, (uint8_t)s[i], err);
        }
    }
    return rc;
}
