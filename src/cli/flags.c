/*
 * flags.c -- the flag-table machinery of `ordo bank` and `ordo graph`:
 * parsing by the table, the help's "Options:" part and the error lines
 * that list what is accepted. See flags.h and README.md, "Commands".
 *
 * Interface: cli_flags_parse, cli_flags_usage (flags.h).
 */
#include "cli/flags.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The index of s in the NULL-ended names, or -1. */
static int name_index(const char *const *names, const char *s) {
  for (int i = 0; names[i] != NULL; i++)
    if (strcmp(names[i], s) == 0)
      return i;
  return -1;
}

/* Writes "a, b, c" from the NULL-ended names. */
static void name_list(FILE *f, const char *const *names) {
  for (size_t i = 0; names[i] != NULL; i++)
    fprintf(f, "%s%s", i ? ", " : "", names[i]);
}

/*
 * help_wrap -- prints text from column indent, breaking at spaces so that no
 * line passes column width, continuation lines indented to the same column.
 */
static void help_wrap(FILE *f, const char *text, int indent, int width) {
  int col = indent;
  const char *p = text;
  while (*p) {
    size_t wl = strcspn(p, " ");
    if (col > indent && col + 1 + (int)wl > width) {
      fprintf(f, "\n%*s", indent, "");
      col = indent;
    } else if (col > indent) {
      fputc(' ', f);
      col++;
    }
    fwrite(p, 1, wl, f);
    col += (int)wl;
    p += wl;
    while (*p == ' ')
      p++;
  }
  fputc('\n', f);
}

void cli_flags_usage(FILE *f, const cli_flags_t *fs) {
  for (size_t i = 0; i < fs->n; i++) {
    const cli_flag_t *fl = &fs->flag[i];
    char left[48];
    snprintf(left, sizeof(left), "%s%s%s%s%s", fl->alias ? fl->alias : "",
             fl->alias ? ", " : "", fl->name, fl->arg ? " " : "",
             fl->arg ? fl->arg : "");
    /* A long left column gets a line of its own. */
    if (strlen(left) > 19)
      fprintf(f, "  %s\n%22s", left, "");
    else
      fprintf(f, "  %-19s ", left);
    help_wrap(f, fl->help, 22, 79);
  }
}

/* Writes "--backend URL, --accounts N, ..." for usage error lines. */
static void flags_list(FILE *f, const cli_flags_t *fs) {
  for (size_t i = 0; i < fs->n; i++)
    fprintf(f, "%s%s%s%s", i ? ", " : "", fs->flag[i].name,
            fs->flag[i].arg ? " " : "", fs->flag[i].arg ? fs->flag[i].arg : "");
}

/* Parses a whole decimal number within [min, max]: no sign, no spaces. */
static int parse_num(const char *s, long min, long max, long *out) {
  if (*s < '0' || *s > '9')
    return -1;
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max)
    return -1;
  *out = v;
  return 0;
}

int cli_flags_parse(const cli_flags_t *fs, int argc, char **argv, void *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
    size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
    const cli_flag_t *fl = NULL;
    for (size_t k = 0; k < fs->n && fl == NULL; k++) {
      const cli_flag_t *c = &fs->flag[k];
      if ((strlen(c->name) == nlen && strncmp(c->name, a, nlen) == 0) ||
          (c->alias && !eq && strcmp(c->alias, a) == 0))
        fl = c;
    }
    if (fl == NULL) {
      if (a[0] == '-')
        fprintf(stderr, "ordo %s: unknown option '%.*s': accepted options are ",
                fs->cmd, (int)nlen, a);
      else
        fprintf(stderr,
                "ordo %s: unexpected argument '%s': ordo %s takes only "
                "options: ",
                fs->cmd, a, fs->cmd);
      flags_list(stderr, fs);
      fprintf(stderr, " (see 'ordo %s --help')\n", fs->cmd);
      return PARSE_ERR;
    }
    if (fl->kind == FLAG_HELP || fl->kind == FLAG_BOOL) {
      if (eq) {
        fprintf(stderr,
                "ordo %s: option '%s' takes no value, got '%s': write "
                "just %s\n",
                fs->cmd, fl->name, eq + 1, fl->name);
        return PARSE_ERR;
      }
      if (fl->kind == FLAG_HELP)
        return PARSE_HELP;
      *(int *)((char *)o + fl->off) = 1;
      continue;
    }
    const char *val = eq ? eq + 1 : NULL;
    if (val == NULL) {
      if (i + 1 >= argc) {
        fprintf(stderr, "ordo %s: option '%s' needs a value: write %s %s\n",
                fs->cmd, fl->name, fl->name, fl->arg);
        return PARSE_ERR;
      }
      val = argv[++i];
    }
    if (fl->kind == FLAG_STR) {
      *(const char **)((char *)o + fl->off) = val;
    } else if (fl->kind == FLAG_ENUM) {
      int k = name_index(fl->names, val);
      if (k < 0) {
        fprintf(stderr, "ordo %s: bad value '%s' for %s: accepted values are ",
                fs->cmd, val, fl->name);
        name_list(stderr, fl->names);
        fputc('\n', stderr);
        return PARSE_ERR;
      }
      *(int *)((char *)o + fl->off) = k;
    } else if (parse_num(val, fl->min, fl->max,
                         (long *)((char *)o + fl->off)) != 0) {
      fprintf(stderr,
              "ordo %s: bad value '%s' for %s: expected a whole number in "
              "%ld..%ld\n",
              fs->cmd, val, fl->name, fl->min, fl->max);
      return PARSE_ERR;
    }
  }
  return PARSE_OK;
}
