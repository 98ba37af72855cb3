# tollgate's front door. `make run` and `make test` install what is missing first.
BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_TSAN ?= build-tsan
BUILD_FUZZ ?= build-fuzz
JOBS       ?= $(shell nproc)
# Extra CMake arguments for every build dir when it is configured; CI: -DTOLLGATE_WERROR=ON.
CMAKE_ARGS ?=
# Extra CMake arguments for the release tree ($(BUILD)) only; CI: line tables (-g1) for everything.
BUILD_CMAKE_ARGS ?=
# Extra CMake arguments for the ASan tree only (`make asan`, development; CI has no GCC ASan tree).
ASAN_CMAKE_ARGS ?=
# Ninja when installed. Deferred (=, in recipes): evaluated after deps ran, so a first build on a
# fresh machine uses the Ninja that deps just installed. A configured dir keeps its generator.
cmake_gen   = $(if $(wildcard $(1)/CMakeCache.txt),,$(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja"))
# ccache keys on relative paths, so a fresh clone elsewhere reuses the cache.
export CCACHE_BASEDIR   := $(CURDIR)
export CCACHE_NOHASHDIR := 1
# make fuzz: seconds per target, targets run at once, which targets (empty: all).
FUZZ_SECONDS ?= 60
FUZZ_JOBS    ?= $(JOBS)
FUZZ_TARGETS ?=
LISTEN     ?= 127.0.0.1:8080
ADMIN      ?= 127.0.0.1:9090

.PHONY: deps configure build release-build release-test-run test test-run test-stress unit integration format format-check sanitize asan asan-configure asan-build asan-run tsan tsan-configure tsan-build tsan-run fuzz fuzz-configure fuzz-build fuzz-run fuzz-test-run bench bench-compare run install package package-install-test dashboard-screenshot clean

deps:
	@bash tools/deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) $(call cmake_gen,$(BUILD)) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) $(BUILD_CMAKE_ARGS)

configure: $(BUILD)/CMakeCache.txt

# Everything: the libraries, tollgated, the CLI, every test and benchmark.
build: deps configure
	cmake --build $(BUILD) -j $(JOBS)

test: build format-check test-run

# CI's release stages (.ci/run; docs/testing.md, "CI time"): everything outside tests/ (the
# libraries, tollgated, the CLI, the benchmarks) and the tests the sanitizer tree cannot run
# (label no_asan); every other test runs once, in the sanitizer tree (fuzz-test-run).
release-build: deps configure
	cmake --build $(BUILD) -j $(JOBS) --target $$(bash tools/release_targets.sh $(BUILD))
release-test-run:
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -L no_asan

# The stages on their own (.ci/run times each): ctest on an already built $(BUILD).
test-run:
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

format:
	@bash tools/format.sh

format-check:
	@bash tools/format.sh --check

# ASan+UBSan over every test, then TSan over the tests labelled "concurrency".
sanitize: deps asan tsan

# Each is three stages, configure -> build -> run (asan-configure, asan-build, asan-run, the same
# for tsan and fuzz); .ci/run runs and times them one by one (make -o skips a stage already run).
asan: asan-run
asan-configure: | deps
	cmake -S . -B $(BUILD_ASAN) $(call cmake_gen,$(BUILD_ASAN)) -DCMAKE_BUILD_TYPE=Debug -DTOLLGATE_SANITIZE=address -DTOLLGATE_BUILD_BENCH=OFF $(CMAKE_ARGS) $(ASAN_CMAKE_ARGS)
asan-build: asan-configure
	cmake --build $(BUILD_ASAN) -j $(JOBS)
asan-run: asan-build
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(BUILD_ASAN) --output-on-failure -j $(JOBS) -LE no_asan

tsan: tsan-run
# -O1 -g1 (line tables, inlined frames): TSan's reports keep their file:line stacks, and the
# libraries the concurrency tests link compile in half the CPU of -O2 -g (docs/testing.md).
tsan-configure: | deps
	cmake -S . -B $(BUILD_TSAN) $(call cmake_gen,$(BUILD_TSAN)) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DTOLLGATE_SANITIZE=thread -DTOLLGATE_BUILD_BENCH=OFF $(CMAKE_ARGS)
tsan-build: tsan-configure
	cmake --build $(BUILD_TSAN) -j $(JOBS) --target $$(bash tools/test_targets.sh $(BUILD_TSAN) concurrency)
tsan-run: tsan-build
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --test-dir $(BUILD_TSAN) --output-on-failure -L concurrency

# The timing-sensitive tests (CTest label "timing") ROUNDS times beside HOGS busy CPUs, in
# STRESS_BUILD (build, or build-asan / build-tsan after make asan / make tsan); prints
# pass/fail counts. See README "Testing on a loaded machine".
STRESS_BUILD ?= $(BUILD)
ROUNDS       ?= 5
HOGS         ?= 2
test-stress: $(if $(filter $(BUILD),$(STRESS_BUILD)),configure)
	@test -f $(STRESS_BUILD)/CMakeCache.txt || { echo "$(STRESS_BUILD) is not configured (make asan or make tsan first)"; exit 2; }
	cmake --build $(STRESS_BUILD) -j $(JOBS) --target $$(bash tools/test_targets.sh $(STRESS_BUILD) timing)
	bash tools/stress.sh --build $(STRESS_BUILD) --rounds $(ROUNDS) --hogs $(HOGS)

# libFuzzer targets (fuzz/, docs/fuzzing.md), built with clang and ASan+UBSan in
# their own tree; each runs FUZZ_SECONDS on a copy of its committed seed corpus.
# FUZZ_TESTS=ON: the same tree also builds every test, and `make fuzz-test-run` runs them under
# clang's ASan+UBSan. CI's one sanitizer tree: the libraries and tollgated are compiled once for
# the fuzz targets and the tests (.ci/run; `make asan` is still GCC's ASan tree for development).
FUZZ_TESTS ?= OFF
fuzz: fuzz-run
fuzz-configure: deps
	cmake -S . -B $(BUILD_FUZZ) $(call cmake_gen,$(BUILD_FUZZ)) $(CMAKE_ARGS) -DCMAKE_CXX_COMPILER=clang++-14 \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
	  -DTOLLGATE_FUZZ=ON -DTOLLGATE_BUILD_TESTS=$(FUZZ_TESTS) -DTOLLGATE_BUILD_BENCH=OFF
fuzz-build: fuzz-configure
	cmake --build $(BUILD_FUZZ) -j $(JOBS) $(if $(filter ON,$(FUZZ_TESTS)),,--target fuzz_all)
fuzz-run: fuzz-build
	bash fuzz/run.sh $(BUILD_FUZZ) $(FUZZ_SECONDS) $(FUZZ_JOBS) $(FUZZ_TARGETS)
fuzz-test-run: fuzz-build
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(BUILD_FUZZ) --output-on-failure -j $(JOBS) -LE no_asan

bench: build
	bash bench/run.sh $(BUILD)

# tollgated vs nginx limit_req (auth, gateway, Redis) and the Envoy RLS in one run, alternating
# rounds; prints ratios, p99 and server CPU per request, writes out/bench/compare.json
# (docs/benchmarks.md). COMPARE_ARGS: e.g. --tollgated base=PATH --tollgated main=PATH --nginx-auto.
COMPARE_ARGS ?=
bench-compare: deps configure
	cmake --build $(BUILD) -j $(JOBS) --target tollgated rls_bench
	bash bench/compare.sh --tollgated main=$(BUILD)/server/tollgated --rls-bench $(BUILD)/bench/rls/rls_bench $(COMPARE_ARGS)

# Builds only what it runs (tollgated), not the tests and benchmarks.
run: deps configure
	cmake --build $(BUILD) -j $(JOBS) --target tollgated
	@echo "tollgated: decisions on http://$(LISTEN), admin on http://$(ADMIN) (Ctrl-C stops)"
	@echo "  curl -i -X POST http://$(LISTEN)/v1/decide -d '{\"request\":{\"method\":\"GET\",\"path\":\"/api/items\",\"headers\":{\"x-api-key\":\"k1\"}}}'"
	@echo "  curl -i http://$(LISTEN)/v1/auth -H 'X-Original-URI: /api/items' -H 'X-Api-Key: k1'"
	@echo "  curl -s http://$(ADMIN)/metrics | head"
	$(BUILD)/server/tollgated --policy examples/policy.json --listen $(LISTEN) --admin $(ADMIN) --store local

install: build
	cmake --install $(BUILD) --prefix $(or $(PREFIX),/usr/local)

# Debian packages (cmake/Packaging.cmake) in $(BUILD)/packages: tollgate (tollgated, the CLI,
# the systemd unit, /etc/tollgate) and libtollgate-dev. Builds only what they hold.
package: deps configure
	cmake --build $(BUILD) -j $(JOBS) --target tollgated tollgate_cli
	cd $(BUILD) && cpack
	@ls -1 $(BUILD)/packages/*.deb

# Installs the package into a fresh debootstrap'd Debian 12 root and runs tollgated there as
# its unit says (tools/package_install_test.sh; needs root and a Debian mirror; minutes).
package-install-test: package
	bash tools/package_install_test.sh $(BUILD)/packages

# docs/img/dashboard.svg from a live tollgated and Prometheus (deploy/grafana/screenshot.sh).
dashboard-screenshot: deps configure
	cmake --build $(BUILD) -j $(JOBS) --target tollgated
	bash deploy/grafana/screenshot.sh $(BUILD) docs/img/dashboard.svg

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_TSAN) $(BUILD_FUZZ)
