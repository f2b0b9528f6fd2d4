/*
 * philo_peer.cc -- the std::scoped_lock side of the dining philosophers
 * (philo.c; see README.md): the C++17 way to take two mutexes without a
 * deadlock, as in Howard Hinnant's "Dining Philosophers Rebooted".
 *
 * Each fork is a std::mutex on its own cache line, each diner a std::thread.
 * A diner asks for its two forks with one std::scoped_lock, naming them in
 * the random order it drew (libstdc++'s std::lock then blocks on the first,
 * tries the other, and on failure lets go and starts again from the one that
 * failed), eats its bite inside the lock's scope, and lets the scope end.
 * Everything else (the start barrier, the draws, the bite, the checks, the
 * figures) is philo.c's, the same for every side.
 *
 * Interface:
 *   philo_run_scoped_lock()   one run, every diner on std::scoped_lock
 */
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

extern "C" {
#include "bench.h"
}

namespace {

/* One fork per cache line, as philo.c lays out its own. */
struct alignas(64) philo_fork {
  std::mutex mu;
};

void philo_diner_scoped(philo_diner_t *d, philo_fork *fork) {
  philo_start(d);
  while (philo_hungry(d)) {
    std::size_t a, b;
    philo_pick(d, &a, &b);
    std::int64_t asked = philo_now_ns();
    std::scoped_lock lock(fork[a].mu, fork[b].mu);
    philo_eat(d, asked);
  }
}

} // namespace

extern "C" int philo_run_scoped_lock(philo_t *p) {
  std::size_t n = philo_count(p);
  std::unique_ptr<philo_fork[]> fork;
  std::vector<std::thread> diners;
  try {
    fork.reset(new philo_fork[n]);
    diners.reserve(n);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "ordo_bench: philo: scoped_lock run: %s\n", e.what());
    return -1;
  }
  for (std::size_t i = 0; i < n; i++) {
    try {
      diners.emplace_back(philo_diner_scoped, philo_diner(p, i), fork.get());
    } catch (const std::exception &e) {
      /* The diners already seated wait at the barrier for ever. */
      std::fprintf(stderr, "ordo_bench: philo: std::thread: %s\n", e.what());
      std::exit(1);
    }
  }
  for (auto &t : diners)
    t.join();
  return 0;
}
