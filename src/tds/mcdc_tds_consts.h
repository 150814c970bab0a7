/*
 * mcdc_tds_consts.h - the TDS protocol's numbers, one copy for both ends:
 * our client (mcdc_tds_proto.h, mcdc_tds_tls.h) and the simulator's server
 * (src/sim/tds_wire.h and the tds_* files). Facts of MS-TDS 7.4 (spec/
 * formats.md C2): packet types and status bits, PRELOGIN options and
 * ENCRYPTION values, token types, DONE status bits, ENVCHANGE types, data
 * type ids, PLP markers and the date epochs of the wire formats.
 *
 * Constants only: no types, no functions, no other project header, so
 * either side includes it without pulling in the other.
 */
#ifndef MCDC_TDS_CONSTS_H
#define MCDC_TDS_CONSTS_H

#include <stdint.h>

/* ---- packets (MS-TDS 2.2.3.1) ------------------------------------------- */
#define TDS_HEADER_BYTES 8

#define TDS_PKT_SQL_BATCH 0x01
#define TDS_PKT_RPC 0x03
#define TDS_PKT_REPLY 0x04
#define TDS_PKT_ATTENTION 0x06
#define TDS_PKT_BULK 0x07
#define TDS_PKT_TRANSACTION 0x0E
#define TDS_PKT_LOGIN7 0x10
#define TDS_PKT_SSPI 0x11
#define TDS_PKT_PRELOGIN 0x12

#define TDS_STATUS_EOM 0x01
#define TDS_STATUS_IGNORE 0x02
#define TDS_STATUS_RESETCONNECTION 0x08
#define TDS_STATUS_RESETCONNECTIONSKIPTRAN 0x10

#define TDS_VERSION_74 0x74000004u

/* ---- PRELOGIN (2.2.6.5) ---------------------------------------------------- */
#define TDS_PL_VERSION 0x00
#define TDS_PL_ENCRYPTION 0x01
#define TDS_PL_INSTOPT 0x02
#define TDS_PL_THREADID 0x03
#define TDS_PL_MARS 0x04
#define TDS_PL_TERMINATOR 0xFF

/* ENCRYPTION values. */
#define TDS_ENCRYPT_OFF 0
#define TDS_ENCRYPT_ON 1
#define TDS_ENCRYPT_NOT_SUP 2
#define TDS_ENCRYPT_REQ 3

/* ---- tokens (2.2.7) --------------------------------------------------------- */
#define TDS_TOK_RETURNSTATUS 0x79
#define TDS_TOK_COLMETADATA 0x81
#define TDS_TOK_ALTMETADATA 0x88
#define TDS_TOK_TABNAME 0xA4
#define TDS_TOK_COLINFO 0xA5
#define TDS_TOK_ORDER 0xA9
#define TDS_TOK_ERROR 0xAA
#define TDS_TOK_INFO 0xAB
#define TDS_TOK_RETURNVALUE 0xAC
#define TDS_TOK_LOGINACK 0xAD
#define TDS_TOK_FEATUREEXTACK 0xAE
#define TDS_TOK_ROW 0xD1
#define TDS_TOK_NBCROW 0xD2
#define TDS_TOK_ALTROW 0xD3
#define TDS_TOK_ENVCHANGE 0xE3
#define TDS_TOK_SESSIONSTATE 0xE4
#define TDS_TOK_SSPI 0xED
#define TDS_TOK_FEDAUTHINFO 0xEE
#define TDS_TOK_DONE 0xFD
#define TDS_TOK_DONEPROC 0xFE
#define TDS_TOK_DONEINPROC 0xFF

/* DONE status bits. */
#define TDS_DONE_FINAL 0x0000
#define TDS_DONE_MORE 0x0001
#define TDS_DONE_ERROR 0x0002
#define TDS_DONE_INXACT 0x0004
#define TDS_DONE_COUNT 0x0010
#define TDS_DONE_ATTN 0x0020
#define TDS_DONE_SRVERROR 0x0100

/* DONE CurCmd of a SELECT. */
#define TDS_CURCMD_SELECT 0xC1

/* ENVCHANGE types. */
#define TDS_ENV_DATABASE 1
#define TDS_ENV_LANGUAGE 2
#define TDS_ENV_PACKETSIZE 4
#define TDS_ENV_COLLATION 7
#define TDS_ENV_BEGINTRAN 8
#define TDS_ENV_COMMITTRAN 9
#define TDS_ENV_ROLLBACKTRAN 10
#define TDS_ENV_RESETACK 18

/* RPC parameter status bits. */
#define TDS_RPC_PARAM_OUTPUT 0x01
#define TDS_RPC_PARAM_ENCRYPTED 0x08

/* ---- data types (2.2.5.4) ----------------------------------------------------- */
#define TDS_NULLTYPE 0x1F
#define TDS_INT1 0x30
#define TDS_BIT 0x32
#define TDS_INT2 0x34
#define TDS_INT4 0x38
#define TDS_DATETIM4 0x3A
#define TDS_FLT4 0x3B
#define TDS_MONEY 0x3C
#define TDS_DATETIME 0x3D
#define TDS_FLT8 0x3E
#define TDS_MONEY4 0x7A
#define TDS_INT8 0x7F
#define TDS_GUID 0x24
#define TDS_INTN 0x26
#define TDS_DECIMAL 0x37 /* legacy */
#define TDS_NUMERIC 0x3F /* legacy */
#define TDS_BITN 0x68
#define TDS_DECIMALN 0x6A
#define TDS_NUMERICN 0x6C
#define TDS_FLTN 0x6D
#define TDS_MONEYN 0x6E
#define TDS_DATETIMN 0x6F
#define TDS_DATEN 0x28
#define TDS_TIMEN 0x29
#define TDS_DATETIME2N 0x2A
#define TDS_DATETIMEOFFSETN 0x2B
#define TDS_BIGVARBINARY 0xA5
#define TDS_BIGVARCHAR 0xA7
#define TDS_BIGBINARY 0xAD
#define TDS_BIGCHAR 0xAF
#define TDS_NVARCHAR 0xE7
#define TDS_NCHAR 0xEF
#define TDS_XML 0xF1
#define TDS_UDT 0xF0
#define TDS_TEXT 0x23
#define TDS_IMAGE 0x22
#define TDS_NTEXT 0x63
#define TDS_SSVARIANT 0x62

/* PLP total length markers. */
#define TDS_PLP_NULL UINT64_MAX
#define TDS_PLP_UNKNOWN (UINT64_MAX - 1)

/* Days from 0001-01-01 to 1970-01-01 and from 1900-01-01 to 1970-01-01;
 * one day in microseconds and in the 100 ns units of time/datetime2. */
#define TDS_DAYS_0001_TO_1970 719162
#define TDS_DAYS_1900_TO_1970 25567
#define TDS_US_PER_DAY 86400000000LL
#define TDS_100NS_PER_DAY 864000000000LL

#endif /* MCDC_TDS_CONSTS_H */
