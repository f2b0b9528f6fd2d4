/*
 * err.c -- error names and messages, generated from ORDO_ERRNO_MAP in ordo.h.
 * See README.md.
 *
 * Interface: ordo_strerror, ordo_err_name, ordo_is_retryable,
 * ordo__assert_fail.
 */
#include "ordo_int.h"

const char *ordo_strerror(int err) {
  switch (err) {
  case 0:
    return "success";
  case ORDO_PENDING:
    return "queued; the callback will report the outcome";
#define ORDO__ERR_MSG(name, val, retry, msg)                                   \
  case ORDO_E##name:                                                           \
    return msg;
    ORDO_ERRNO_MAP(ORDO__ERR_MSG)
#undef ORDO__ERR_MSG
  default:
    return "unknown error";
  }
}

const char *ordo_err_name(int err) {
  switch (err) {
  case 0:
    return "OK";
  case ORDO_PENDING:
    return "PENDING";
#define ORDO__ERR_NAME(name, val, retry, msg)                                  \
  case ORDO_E##name:                                                           \
    return "E" #name;
    ORDO_ERRNO_MAP(ORDO__ERR_NAME)
#undef ORDO__ERR_NAME
  default:
    return "EUNKNOWN";
  }
}

int ordo_is_retryable(int err) {
  switch (err) {
#define ORDO__ERR_RETRY(name, val, retry, msg)                                 \
  case ORDO_E##name:                                                           \
    return retry;
    ORDO_ERRNO_MAP(ORDO__ERR_RETRY)
#undef ORDO__ERR_RETRY
  default:
    return 0;
  }
}

void ordo__assert_fail(const char *expr, const char *file, int line) {
  fprintf(stderr, "ordo: assertion failed: %s (%s:%d)\n", expr, file, line);
  abort();
}

const char *ordo_version(void) {
  return ORDO_VERSION;
}
