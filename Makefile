# gpuheal - the two commands of the README and their helpers.
#   make         build build/bin/* (release, -O2)
#   make test    install deps, build, run every test (unit under ASan+UBSan; the
#                threaded parts' unit tests also under TSan, build-tsan)
#   make demo    the main job
#   make fuzz    every libFuzzer target for FUZZ_SECONDS each (default 60)
#   make bench   build and run the benchmarks under bench/
#   make chaos   fault injection (test/chaos): every scenario, a CHAOS_SOAK_SECONDS soak
#   make e2e-node  the shipped image, chart and manifests on a real node (test/node)
#   make bench-node  recovery on a real node: NODE_FAULTS faults (default 10), p50/p99
#   make bench-node-ladder  full recreate vs in place on a real node: NODE_ROUNDS rounds
.PHONY: all deps build build-asan build-fuzz build-tsan test demo fuzz fuzz-short bench clean chaos e2e-node bench-node bench-node-ladder

CMAKE_GEN   ?= -G Ninja
JOBS        ?= $(shell nproc)
FUZZ_SECONDS ?= 60
CHAOS_SOAK_SECONDS ?= 600

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake -S . -B build $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGH_TESTS=OFF >/dev/null
	@cmake --build build -j $(JOBS)

build-asan: deps
	@cmake -S . -B build-asan $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DGH_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)

# ThreadSanitizer: only the unit tests of the threaded parts (GH_TSAN_TESTS
# in CMakeLists.txt) and what they link.
build-tsan: deps
	@cmake -S . -B build-tsan $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DGH_TSAN=ON >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target tsan_tests

build-fuzz: deps
	@CC=clang-14 cmake -S . -B build-fuzz $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DGH_FUZZ=ON -DGH_TESTS=OFF >/dev/null
	@cmake --build build-fuzz -j $(JOBS)

test: build build-asan build-fuzz build-tsan
	@cd build-asan && ctest --output-on-failure -j $(JOBS)
	@cd build-tsan && ctest --output-on-failure -j $(JOBS) -L tsan
	@FUZZ_SECONDS=5 scripts/run-fuzz build-fuzz

fuzz: build-fuzz
	@FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/run-fuzz build-fuzz

bench: build
	@scripts/run-bench build

demo: build
	@scripts/demo build

chaos: build
	@GH_BIN=$(CURDIR)/build/bin GH_SOURCE_DIR=$(CURDIR) CHAOS_STRICT=1 test/chaos/chaos.sh --soak $(CHAOS_SOAK_SECONDS)

e2e-node: deps
	@test/node/e2e helm
	@test/node/e2e manifests

NODE_FAULTS ?= 10
bench-node: deps
	@NODE_FAULTS=$(NODE_FAULTS) bench/real-node.sh

NODE_ROUNDS ?= 10
bench-node-ladder: deps
	@NODE_ROUNDS=$(NODE_ROUNDS) bench/real-node-ladder.sh

clean:
	rm -rf build build-asan build-fuzz build-tsan
