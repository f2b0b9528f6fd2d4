/*
 * bank_ordo.h -- the driver of `ordo bank` over the ordo API (bank_ordo.c),
 * for every backend URL ordo_open takes, and the opening of a place with
 * the command's error lines, which `ordo graph` uses too.
 */
#ifndef ORDO_CLI_BANK_ORDO_H
#define ORDO_CLI_BANK_ORDO_H

#include "cli/bank_model.h"
#include "ordo.h"

/* The driver: any URL, the last one the command asks (bank_driver_t). */
extern const bank_driver_t bank_driver_ordo;

/*
 * cli_open_place -- ordo_open of url with opts, telling a bad URL (usage,
 * exit 2) from a backend that fails (exit 1). Prints the one error line
 * itself, starting "ordo CMD: ".
 */
int cli_open_place(const char *cmd, const char *url, const ordo_options_t *opts,
                   ordo_t **out);

#endif /* ORDO_CLI_BANK_ORDO_H */
