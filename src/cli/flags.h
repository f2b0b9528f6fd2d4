/*
 * flags.h -- the flag tables of the `ordo` subcommands that take options
 * only (`ordo bank`, `ordo graph`): one table per command, from which the
 * parser, the "Options:" part of the help and the list of accepted options
 * in error lines are all generated, so a flag cannot be parsed yet
 * undocumented (README.md, "Commands", and invariant 2).
 *
 * Interface (defined in flags.c):
 *   cli_flag_t, cli_flags_t   a row, and one command's table
 *   cli_flags_parse           fills a command's option struct from argv
 *   cli_flags_usage           the "Options:" part of a help text
 */
#ifndef ORDO_CLI_FLAGS_H
#define ORDO_CLI_FLAGS_H

#include <stddef.h>
#include <stdio.h>

/*
 * A command's flags are one table: parsing, the help text and the list of
 * accepted options in error lines all come from it, so a flag cannot be
 * parsed yet undocumented. Each row writes one field of the command's option
 * struct, at off. Numbers are checked against [min, max] and names against
 * names[] (README.md, invariant 2).
 */
typedef enum cli_flag_kind_e {
  FLAG_STR,  /* const char * at off */
  FLAG_NUM,  /* long at off, within [min, max] */
  FLAG_BOOL, /* int at off, set to 1 */
  FLAG_ENUM, /* int at off, set to the index of the value in names[] */
  FLAG_HELP
} cli_flag_kind_t;

typedef struct cli_flag_s {
  const char *name;  /* "--workers" */
  const char *alias; /* "-h" or NULL */
  const char *arg;   /* "N" or NULL when the flag takes no value */
  cli_flag_kind_t kind;
  size_t off;
  long min, max;
  const char *const *names; /* FLAG_ENUM: the accepted values, NULL-ended */
  const char *help;
} cli_flag_t;

/* One command's table, and the name its error lines start with. */
typedef struct cli_flags_s {
  const char *cmd; /* "bank": lines read "ordo bank: ..." */
  const cli_flag_t *flag;
  size_t n;
} cli_flags_t;

/* What cli_flags_parse found: go on, print the help, or a usage error. */
enum { PARSE_OK, PARSE_HELP, PARSE_ERR };

/*
 * cli_flags_parse -- fills the option struct o from argv (argv[0] is the
 * command's name) by the table fs. Accepts "--flag value" and
 * "--flag=value". On a mistake it prints one line on stderr that names the
 * culprit and what is accepted, and returns PARSE_ERR (invariants 1, 2).
 */
int cli_flags_parse(const cli_flags_t *fs, int argc, char **argv, void *o);

/* The "Options:" part of a help text: one entry per row of the table. */
void cli_flags_usage(FILE *f, const cli_flags_t *fs);

#endif /* ORDO_CLI_FLAGS_H */
