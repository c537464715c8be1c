# tilecraft: `make run` (set up, build, run the main job) and `make test`
# (set up, build, run every test). Both install missing dependencies first.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
OUT ?= results
CMAKE_FLAGS ?=

.PHONY: all deps configure build run test test-cpu test-gpu test-python test-sanitize clean format

all: build

deps:
	@scripts/install_deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) > /dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# The main job: env, compile every kernel, correctness and benchmarks over the
# manifest's default tags; results under $(OUT)/ (logs/ and reports/).
run: build
	$(BUILD_DIR)/tilecraft run --out $(OUT)

# Every test: CPU tests everywhere; GPU tests run on a GPU and skip, saying
# why, without one. Tests use their own JIT cache under the build tree.
test: build
	cd $(BUILD_DIR) && TILECRAFT_CACHE_DIR=$(abspath $(BUILD_DIR))/test_jit_cache \
	  ctest --output-on-failure -j $(JOBS) --timeout 900
	TILECRAFT_CACHE_DIR=$(abspath $(BUILD_DIR))/test_jit_cache scripts/python_tests.sh $(BUILD_DIR)

test-python: build
	TILECRAFT_CACHE_DIR=$(abspath $(BUILD_DIR))/test_jit_cache scripts/python_tests.sh $(BUILD_DIR)

test-cpu: build
	cd $(BUILD_DIR) && TILECRAFT_CACHE_DIR=$(abspath $(BUILD_DIR))/test_jit_cache ctest -L cpu --output-on-failure -j $(JOBS)

# The CPU tests built with AddressSanitizer and UndefinedBehaviorSanitizer
# (own tree, build-sanitize; slower: not part of `make test`).
SANITIZE_DIR ?= build-sanitize
test-sanitize: deps
	@cmake -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTILECRAFT_SANITIZE=ON -DTILECRAFT_PYTHON=OFF > /dev/null
	@cmake --build $(SANITIZE_DIR) -j $(JOBS)
	cd $(SANITIZE_DIR) && TILECRAFT_CACHE_DIR=$(abspath $(SANITIZE_DIR))/test_jit_cache \
	  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest -L cpu --output-on-failure -j $(JOBS) --timeout 1800

test-gpu: build
	cd $(BUILD_DIR) && TILECRAFT_CACHE_DIR=$(abspath $(BUILD_DIR))/test_jit_cache ctest -L gpu --output-on-failure

format:
	@clang-format -i $$(git ls-files '*.cpp' '*.h' '*.cuh')

clean:
	rm -rf $(BUILD_DIR)
