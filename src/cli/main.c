/*
 * main.c -- the `ordo` command: --help, --version, and dispatch to the
 * subcommands listed in one table. See README.md.
 *
 * Interface:
 *   main  parses the first argument and runs the named subcommand
 *
 * A new subcommand is one row in cmds[] plus its run and usage functions
 * (declared in cli.h); nothing else here changes.
 */
#include "cli/cli.h"

#include <string.h>

#include "ordo.h"

static const cli_cmd_t cmds[] = {
    {"bank", "transfers between accounts at once; checks the total is kept",
     cli_bank_main, cli_bank_usage},
    {"graph", "prints a wait-for graph (DOT or JSON) of a live deadlock",
     cli_graph_main, cli_graph_usage},
    {"lock", "runs a command while holding keys; releases them after",
     cli_lock_main, cli_lock_usage},
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

static const cli_cmd_t *cmd_find(const char *name) {
  for (size_t i = 0; i < NCMDS; i++)
    if (strcmp(cmds[i].name, name) == 0)
      return &cmds[i];
  return NULL;
}

/* The names of every subcommand, for error lines: "bank, lock, graph". */
static void cmd_names(FILE *f) {
  for (size_t i = 0; i < NCMDS; i++)
    fprintf(f, "%s%s", i ? ", " : "", cmds[i].name);
}

/*
 * usage -- the top-level help. It ends with each subcommand's full help so
 * that `ordo --help` alone documents every flag the command accepts.
 */
static void usage(FILE *f) {
  fputs("usage: ordo <command> [options]\n"
        "       ordo --help | --version\n"
        "\n"
        "ordo is a deadlock-free multi-resource lock manager; this command\n"
        "exercises it.\n"
        "\n"
        "Options:\n"
        "  -h, --help     print this help and exit\n"
        "  -V, --version  print the version and exit\n"
        "\n"
        "Commands:\n",
        f);
  for (size_t i = 0; i < NCMDS; i++)
    fprintf(f, "  %-13s  %s\n", cmds[i].name, cmds[i].summary);
  fputs("\nRun 'ordo <command> --help' for one command's help.\n"
        "Exit status: 0 ok, 1 the check failed, 2 bad usage, 3 the\n"
        "watchdog fired (the run hung; the lock table is on stderr);\n"
        "ordo lock: its command's, or 64, 69, 75 (see its help).\n",
        f);
  for (size_t i = 0; i < NCMDS; i++) {
    fputs("\n", f);
    cmds[i].usage(f);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs("ordo: missing command: accepted commands are ", stderr);
    cmd_names(stderr);
    fputs(" (see 'ordo --help')\n", stderr);
    return CLI_EXIT_USAGE;
  }
  const char *arg = argv[1];
  if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0 ||
      strcmp(arg, "help") == 0) {
    usage(stdout);
    return CLI_EXIT_OK;
  }
  if (strcmp(arg, "-V") == 0 || strcmp(arg, "--version") == 0) {
    printf("ordo %s\n", ordo_version());
    return CLI_EXIT_OK;
  }
  const cli_cmd_t *c = cmd_find(arg);
  if (c == NULL && arg[0] == '-') {
    fprintf(stderr,
            "ordo: unknown option '%s': accepted options are -h, --help, "
            "-V, --version, or a command: ",
            arg);
    cmd_names(stderr);
    fputs(" (see 'ordo --help')\n", stderr);
    return CLI_EXIT_USAGE;
  }
  if (c == NULL) {
    fprintf(stderr, "ordo: unknown command '%s': accepted commands are ", arg);
    cmd_names(stderr);
    fputs(" (see 'ordo --help')\n", stderr);
    return CLI_EXIT_USAGE;
  }
  return c->run(argc - 1, argv + 1);
}
