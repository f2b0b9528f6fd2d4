// test_header_cxx.cc -- ordo.h compiles as C++ and its calls link and run
// from C++ code.
#include "ordo.h"

#include <cstdio>
#include <cstring>

int main() {
  ordo_t *o = nullptr;
  if (ordo_open(&o, "mem://", nullptr) != 0)
    return 1;
  ordo_txn_t *t = nullptr;
  if (ordo_txn_begin(o, &t, nullptr) != 0)
    return 1;
  ordo_req_t r[2] = {ORDO_REQ_X("a", 1), ORDO_REQ_S("b", 1)};
  int rc = ordo_lock_all(t, r, 2, 0);
  int held = ordo_held(t, "a", 1, nullptr);
  int released = ordo_unlock_all(t);
  ordo_txn_end(t);
  ordo_close(o);
  std::printf("lock_all=%s held=%d released=%d\n", ordo_err_name(rc), held,
              released);
  return (rc == 0 && held == 1 && released == 2) ? 0 : 1;
}
