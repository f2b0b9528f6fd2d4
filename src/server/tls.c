/*
 * tls.c -- ordod's TLS: the context made from --tls-cert-file,
 * --tls-key-file, --tls-ca-cert-file and --tls-auth-clients, and one SSL per
 * connection over memory BIOs, so that TLS runs inside the one libuv loop
 * with no socket of its own. See README.md ("TLS").
 *
 * The loop reads ciphertext from the socket and hands it to srv_tls_feed;
 * srv_tls_read gives the plaintext (the handshake runs inside it, driven by
 * the bytes that come), which the server parses as it parses a plain
 * connection's bytes; replies go through srv_tls_write, and what OpenSSL
 * wrote (records, handshake messages, alerts) is taken with srv_tls_take and
 * written to the socket. Nothing here does I/O or blocks.
 *
 * Interface: srv_tls_ctx_new, srv_tls_ctx_free, srv_tls_new, srv_tls_free,
 * srv_tls_feed, srv_tls_read, srv_tls_write, srv_tls_pending, srv_tls_take,
 * srv_tls_ready, srv_tls_has_plain, srv_tls_shutdown, srv_tls_auth_name,
 * srv_tls_auth_parse.
 */
#include "server/server.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <limits.h>
#include <string.h>

struct srv_tls {
  SSL *ssl;
  BIO *rbio; /* ciphertext from the peer, read by OpenSSL */
  BIO *wbio; /* ciphertext for the peer, written by OpenSSL */
};

static const char *auth_names[] = {"no", "yes", "optional"};

const char *srv_tls_auth_name(int mode) {
  return mode >= 0 && mode <= 2 ? auth_names[mode] : "?";
}

int srv_tls_auth_parse(const char *s) {
  for (int i = 0; i <= 2; i++)
    if (s && strcmp(s, auth_names[i]) == 0)
      return i;
  return -1;
}

/* OpenSSL's reason for the last failure, as one line (the queue is cleared,
 * so a later failure does not show an old reason). */
static void ssl_reason(char *buf, size_t cap) {
  unsigned long e = ERR_peek_last_error();
  if (e == 0)
    snprintf(buf, cap, "unknown error");
  else
    ERR_error_string_n(e, buf, cap);
  ERR_clear_error();
}

SSL_CTX *srv_tls_ctx_new(const srv_config *cfg, char *err, size_t errlen) {
  char why[256];
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) {
    ssl_reason(why, sizeof why);
    snprintf(err, errlen, "cannot make a TLS context: %s", why);
    return NULL;
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (!cfg->tls_cert[0] || !cfg->tls_key[0]) {
    snprintf(err, errlen,
             "--tls-port needs --tls-cert-file and "
             "--tls-key-file");
    goto fail;
  }
  if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) != 1) {
    ssl_reason(why, sizeof why);
    snprintf(err, errlen, "--tls-cert-file %s: %s", cfg->tls_cert, why);
    goto fail;
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key, SSL_FILETYPE_PEM) != 1) {
    ssl_reason(why, sizeof why);
    snprintf(err, errlen, "--tls-key-file %s: %s", cfg->tls_key, why);
    goto fail;
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    ssl_reason(why, sizeof why);
    snprintf(err, errlen,
             "--tls-key-file %s does not match --tls-cert-file "
             "%s: %s",
             cfg->tls_key, cfg->tls_cert, why);
    goto fail;
  }
  if (cfg->tls_ca[0]) {
    if (SSL_CTX_load_verify_locations(ctx, cfg->tls_ca, NULL) != 1) {
      ssl_reason(why, sizeof why);
      snprintf(err, errlen, "--tls-ca-cert-file %s: %s", cfg->tls_ca, why);
      goto fail;
    }
  } else if (cfg->tls_auth != SRV_TLS_AUTH_NO) {
    snprintf(err, errlen,
             "--tls-auth-clients %s needs --tls-ca-cert-file "
             "(the CA that signs client certificates)",
             srv_tls_auth_name(cfg->tls_auth));
    goto fail;
  }
  int mode = cfg->tls_auth == SRV_TLS_AUTH_YES
                 ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
             : cfg->tls_auth == SRV_TLS_AUTH_OPTIONAL ? SSL_VERIFY_PEER
                                                      : SSL_VERIFY_NONE;
  SSL_CTX_set_verify(ctx, mode, NULL);
  return ctx;
fail:
  SSL_CTX_free(ctx);
  return NULL;
}

void srv_tls_ctx_free(SSL_CTX *ctx) {
  SSL_CTX_free(ctx);
}

srv_tls *srv_tls_new(SSL_CTX *ctx) {
  srv_tls *t = calloc(1, sizeof *t);
  if (!t)
    return NULL;
  t->ssl = SSL_new(ctx);
  t->rbio = BIO_new(BIO_s_mem());
  t->wbio = BIO_new(BIO_s_mem());
  if (!t->ssl || !t->rbio || !t->wbio) {
    BIO_free(t->rbio);
    BIO_free(t->wbio);
    SSL_free(t->ssl);
    free(t);
    return NULL;
  }
  /* An empty memory BIO says "retry", not "end of file". */
  BIO_set_mem_eof_return(t->rbio, -1);
  SSL_set_bio(t->ssl, t->rbio, t->wbio); /* the SSL owns both now */
  SSL_set_accept_state(t->ssl);
  return t;
}

void srv_tls_free(srv_tls *t) {
  if (!t)
    return;
  SSL_free(t->ssl);
  free(t);
}

int srv_tls_feed(srv_tls *t, const char *p, size_t n) {
  while (n > 0) {
    int w = BIO_write(t->rbio, p, n > INT_MAX ? INT_MAX : (int)n);
    if (w <= 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* One SSL call's failure: 0 if it only wants more bytes from the peer, or
 * -1 with why filled (the peer closed, or a TLS error). */
static int ssl_failure(srv_tls *t, int r, char *why, size_t cap) {
  int e = SSL_get_error(t->ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    ERR_clear_error();
    return 0;
  }
  if (e == SSL_ERROR_ZERO_RETURN) {
    snprintf(why, cap, "the peer closed the TLS session");
    ERR_clear_error();
  } else {
    ssl_reason(why, cap);
  }
  return -1;
}

long srv_tls_read(srv_tls *t, char *dst, size_t cap, char *why, size_t whycap) {
  if (cap == 0)
    return 0;
  int r = SSL_read(t->ssl, dst, cap > INT_MAX ? INT_MAX : (int)cap);
  if (r > 0)
    return r;
  return ssl_failure(t, r, why, whycap);
}

bool srv_tls_ready(const srv_tls *t) {
  return SSL_is_init_finished(t->ssl);
}

bool srv_tls_has_plain(const srv_tls *t) {
  return SSL_pending(t->ssl) > 0 || BIO_ctrl_pending(t->rbio) > 0;
}

long srv_tls_write(srv_tls *t, const char *p, size_t n, char *why,
                   size_t whycap) {
  if (n == 0 || !srv_tls_ready(t))
    return 0;
  int r = SSL_write(t->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
  if (r > 0)
    return r;
  return ssl_failure(t, r, why, whycap);
}

size_t srv_tls_pending(const srv_tls *t) {
  return BIO_ctrl_pending(t->wbio);
}

size_t srv_tls_take(srv_tls *t, char *dst, size_t cap) {
  int r = BIO_read(t->wbio, dst, cap > INT_MAX ? INT_MAX : (int)cap);
  return r > 0 ? (size_t)r : 0;
}

void srv_tls_shutdown(srv_tls *t) {
  if (srv_tls_ready(t))
    SSL_shutdown(t->ssl); /* queues close_notify; the peer's is not awaited */
  ERR_clear_error();
}
