# wallsim: thin entry points. Each target first installs what is missing (Debian packages),
# then configures and builds into build/ with CMake.
#   make demo           build, then run the main job on the built-in default
#   make test           build, then run every test
#   make test-sanitize  the whole suite under AddressSanitizer + UBSan (build-asan/)
#   make bench          build, then run the Google Benchmark programs
#   make fuzz           the libFuzzer harnesses with clang (build-fuzz/), FUZZ_SECONDS each
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
GENERATOR = $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all deps build demo test test-sanitize bench fuzz format clean

all: build

deps:
	@bash scripts/install-deps.sh build

# Configuring every time is cheap and keeps an old cache from switching tests or benches off.
build: deps
	cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release -DWALLSIM_SANITIZE=OFF \
	  -DWALLSIM_BUILD_TESTS=ON -DWALLSIM_BUILD_BENCH=ON
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD)/bin/wallsim

test: build
	@bash scripts/install-deps.sh test
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-sanitize: deps
	@bash scripts/install-deps.sh test
	cmake -S . -B $(ASAN_BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Debug -DWALLSIM_SANITIZE=ON \
	  -DWALLSIM_BUILD_BENCH=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

fuzz: deps
	@bash scripts/install-deps.sh fuzz
	cmake -S . -B $(FUZZ_BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=clang++ -DWALLSIM_FUZZ=ON -DWALLSIM_BUILD_TESTS=OFF -DWALLSIM_BUILD_BENCH=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	@bash scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

bench: build
	@bash scripts/bench.sh $(BUILD)

format:
	git ls-files '*.cpp' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
