# The README's commands. Each target first installs what is missing
# (scripts/deps.sh), then drives CMake; the build trees live under build*/.
#
#   make demo      build and run the main demo (resil demo retry-pattern)
#   make check     build everything and run every test (CTest)
#   make check-core  the dependency-free core alone (every adapter switched
#                  off, build-core/) and its tests: what builds with only a
#                  C compiler, CMake and cmocka
#   make bench     build in Release and run the benchmarks
#   make bench-gateway  resil gateway beside nginx under wrk, on SQLite and
#                  PostgreSQL (bench/gateway-vs-nginx.sh; installs nginx-light
#                  and wrk, which nothing else needs)
#   make sanitize  the whole suite under ASan+UBSan, then under TSan
#   make fuzz      libFuzzer builds of the fuzz targets (clang)
#   make fuzz-campaign  every target for 10,000,000 executions, one after
#                  another (hours; never part of check)
#   make install   install the build (PREFIX=/opt/resil to choose where;
#                  DESTDIR=... stages it for a package)

BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE   ?= cmake
SAN_CC  ?= clang
CTEST_FLAGS ?= --output-on-failure -j$(JOBS)

.PHONY: all deps build check check-core demo bench bench-build bench-gateway sanitize asan tsan fuzz fuzz-campaign install clean

all: build

deps:
	@scripts/deps.sh

build: deps
	$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)
	$(CMAKE) --build $(BUILD) -j$(JOBS)

check: build
	cd $(BUILD) && ctest $(CTEST_FLAGS)

# No deps: the core needs only what a C toolchain and cmocka give.
CORE_BUILD ?= build-core
CORE_SWITCHES = -DRESIL_WITH_HTTP=OFF -DRESIL_WITH_STORE=OFF -DRESIL_WITH_GATEWAY=OFF \
                -DRESIL_WITH_REDIS=OFF -DRESIL_WITH_CONFIG=OFF \
                -DRESIL_WITH_UV=OFF -DRESIL_WITH_OTLP=OFF
check-core:
	$(CMAKE) -S . -B $(CORE_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CORE_SWITCHES) $(CMAKE_ARGS)
	$(CMAKE) --build $(CORE_BUILD) -j$(JOBS)
	cd $(CORE_BUILD) && ctest $(CTEST_FLAGS)

# The tool alone (seconds), not every test and benchmark.
demo: deps
	$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)
	$(CMAKE) --build $(BUILD) -j$(JOBS) --target resil
	$(BUILD)/resil demo retry-pattern

# The benchmarks, built in Release (-O3: its warnings differ from the
# suite's builds, and -Werror holds there too) and then run.
bench-build: deps
	$(CMAKE) -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DRESIL_BUILD_TESTS=OFF $(CMAKE_ARGS)
	$(CMAKE) --build build-bench -j$(JOBS)

bench: bench-build
	$(CMAKE) --build build-bench --target bench

bench-gateway:
	@scripts/deps.sh --bench
	$(CMAKE) -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DRESIL_BUILD_TESTS=OFF $(CMAKE_ARGS)
	$(CMAKE) --build build-bench -j$(JOBS) --target resil
	BUILD=$(CURDIR)/build-bench bench/gateway-vs-nginx.sh

sanitize: asan tsan

# detect_stack_use_after_return: a pointer into a frame that has returned
# (a hedge's late loser reading a caller's ctx->user, say) is reported at
# the read instead of surfacing as a crash only when the slot is reused.
asan: deps
	CC=$(SAN_CC) $(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DRESIL_SANITIZE=address -DRESIL_BUILD_BENCH=OFF
	$(CMAKE) --build build-asan -j$(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest $(CTEST_FLAGS)

# TSan's runtime needs a predictable address space: run under setarch -R
# (no ASLR), which newer kernels' mmap randomisation otherwise breaks.
tsan: deps
	CC=$(SAN_CC) $(CMAKE) -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DRESIL_SANITIZE=thread -DRESIL_BUILD_BENCH=OFF
	$(CMAKE) --build build-tsan -j$(JOBS)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 setarch $$(uname -m) -R ctest $(CTEST_FLAGS)

fuzz: deps
	CC=clang $(CMAKE) -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DRESIL_FUZZ=ON -DRESIL_BUILD_BENCH=OFF
	$(CMAKE) --build build-fuzz -j$(JOBS)
	@echo "libFuzzer targets are in build-fuzz/ (e.g. build-fuzz/tests/fuzz_retry_after tests/fuzz/corpus/retry_after)"

fuzz-campaign: deps
	scripts/fuzz-campaign.sh

install: build
	$(CMAKE) --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

clean:
	rm -rf build build-core build-bench build-asan build-tsan build-fuzz build-clang
