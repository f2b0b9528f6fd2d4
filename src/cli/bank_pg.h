/*
 * bank_pg.h -- the driver of `ordo bank` on PostgreSQL rows (bank_pg.c):
 * the ledger, whose row locks, deadlock detector and counters are
 * PostgreSQL's own (README.md, "The PostgreSQL ledger").
 */
#ifndef ORDO_CLI_BANK_PG_H
#define ORDO_CLI_BANK_PG_H

#include "cli/bank_model.h"

/* The driver: claims a PostgreSQL URL unless --locks advisory. */
extern const bank_driver_t bank_driver_pg;

/* postgres://, postgresql://, or postgres: followed by a libpq conninfo. */
int bank_pg_is_url(const char *url);

#endif /* ORDO_CLI_BANK_PG_H */
