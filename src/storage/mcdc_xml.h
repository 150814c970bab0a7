/*
 * mcdc_xml.h - the little XML the object stores answer with (S3's and
 * Azure's error documents, listings, upload ids), read by hand: find an
 * element by name, take its text, undo the five entities and character
 * references. No namespaces, no nesting of an element in itself (neither
 * store's answers have it), no DTDs. Also the escaping of text we send.
 */
#ifndef MCDC_XML_H
#define MCDC_XML_H

#include <stdbool.h>
#include <stddef.h>

#include "mcdc_util.h"

/* Finds the next element named tag (<tag>, <tag attr="...">, or <tag/>)
 * at or after *pos and before end: its content is [*content, +*len) and
 * *pos moves past its end tag. false when there is none (or it is not
 * closed before end). */
bool mcdc_xml_next(const char **pos, const char *end, const char *tag, const char **content,
                   size_t *len);
/* The text of the first element tag in [s, s + n), unescaped and appended
 * to out (NUL-terminated, the NUL not counted). MCDC_E_NOTFOUND when there
 * is none; MCDC_E_PROTOCOL for a malformed entity. */
int mcdc_xml_text(mcdc_buf *out, const char *s, size_t n, const char *tag, mcdc_error *err);
/* The same into room bytes (cut to fit; "" when absent or malformed).
 * Returns whether the element was there. */
bool mcdc_xml_text_fixed(char *out, size_t room, const char *s, size_t n, const char *tag);
/* Appends n bytes of XML text with its entities undone. */
int mcdc_xml_unescape(mcdc_buf *out, const char *s, size_t n, mcdc_error *err);
/* Appends s escaped for XML text or an attribute (& < > " '). */
int mcdc_xml_escape(mcdc_buf *out, const char *s, size_t n, mcdc_error *err);

#endif /* MCDC_XML_H */
