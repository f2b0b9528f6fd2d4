# ordo: `make run` builds and runs the bank check; `make test` runs everything.
# Both call scripts/bootstrap.sh first, which installs missing Debian packages.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
CMAKE_FLAGS ?=

.PHONY: all build run test bench model verify faults coverage sim bootstrap format format-check clean install

all: build

bootstrap:
	@scripts/bootstrap.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: bootstrap
	@$(MAKE) --no-print-directory build
	./$(BUILD)/ordo bank

test: bootstrap
	scripts/test.sh

# QUICK=1 and ROWS=... reach scripts/bench.sh through the environment;
# PUBLISH=1 also refreshes docs/performance.md and docs/img/bench-*.png.
bench: bootstrap
	@$(MAKE) --no-print-directory build
	scripts/bench.sh $(if $(filter-out 0,$(PUBLISH)),--publish)

# The model-based tester for 10^8 steps (tests/model/README.md), about 17
# minutes; a failure prints its shrunk sequence and writes it to
# $(BUILD)/tests/model-failure-*.txt.
model: bootstrap
	@$(MAKE) --no-print-directory build
	cd $(BUILD)/tests && ./model_test --steps 100000000

# The model check of the grant protocol at its larger bound, 3 threads and
# 2 keys (src/core/README.md, "The models"): about 33 million states and
# 1.5 GB, 4 minutes with its deliberate bugs. make test runs it with 2
# threads.
# Then the probe protocol between shards at 3 txns on 3 shards in one cycle
# with one fault of any kind (src/server/README.md, "The model"): about 10
# million states, 3.5 GB, 3 minutes; its bugs run in make test.
# Then the executor's action protocol at 3 workers and 4 tasks, two cancels,
# every wait with a deadline (src/exec/README.md, "The model"): about 49
# million states, 2.4 GB, 5 minutes of CPU; its bugs run in make test.
verify: bootstrap
	tests/spin/run_spin.sh src/core/grant.pml
	tests/spin/run_spin.sh --no-bugs --hash 25 -D SCEN=8 src/server/probe.pml
	tests/spin/run_spin.sh --no-bugs --hash 25 -D SCEN=3 -D NW=3 -D NCANCEL=2 \
	  -D ALL_DEADLINES src/exec/exec.pml

# The fault harness at 10^6 locks granted per backend (tests/faults/run.sh,
# docs/reliability.md): ordod, redis, redlock, postgres, each under the four
# faults in turn for as long as that takes (about 6, 25, 40 and 10 minutes
# here), then the sharded place (shards: 3 ordods linked by --peers, their
# own four families); every backend runs even when one fails. A failed run
# keeps its folder and names it.
faults: bootstrap
	@$(MAKE) --no-print-directory build
	@rc=0; for b in ordod redis redlock postgres shards; do \
	  FAULTS_OPS=1000000 FAULTS_MAX_S=10800 bash tests/faults/run.sh $$b \
	    $(BUILD)/tests/fclient $(BUILD)/ordod || rc=1; \
	done; exit $$rc

# The suite's line and branch coverage of src/, per folder, with gcov in
# build-cov/ (scripts/coverage.sh, docs/coverage.md); fails when src/core or
# src/detect is under 90% of lines, or src/server under 80%.
coverage: bootstrap
	scripts/coverage.sh

# The simulator of the cross-shard probes at 1,000 shards against a
# polling coordinator and under faults (sim/README.md, docs/distributed.md):
# sim/run.sh's tables and plot in sim/results/, in about 15 seconds;
# PUBLISH=1 also copies the plot to docs/img/sim-latency.png.
sim: bootstrap
	@$(MAKE) --no-print-directory build
	sim/run.sh $(if $(filter-out 0,$(PUBLISH)),--publish)

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cc')

format-check:
	scripts/format-check.sh

install: build
	cmake --install $(BUILD)

clean:
	rm -rf build build-asan build-tsan build-cov
