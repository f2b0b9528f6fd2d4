# ordo: `make run` builds and runs the bank check; `make test` runs everything.
# Both call scripts/bootstrap.sh first, which installs missing Debian packages.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
CMAKE_FLAGS ?=

.PHONY: all build run test bench bootstrap format format-check clean install

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

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cc')

format-check:
	scripts/format-check.sh

install: build
	cmake --install $(BUILD)

clean:
	rm -rf build build-asan build-tsan
