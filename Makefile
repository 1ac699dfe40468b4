# vlrt: `make demo` and `make test` work on a fresh Debian 12 machine.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

# Everything the build, the tests and the demo need, from Debian.
DEB_PACKAGES = build-essential cmake pkg-config git ca-certificates \
  libopenblas-dev libdnnl-dev libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev libstb-dev libwebp-dev libtiff-dev \
  libssl-dev libcurl4-openssl-dev libcpp-httplib-dev libonnx-testdata \
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo \
  pybind11-dev python3-dev python3-pytest python3-numpy python3-pil

# What `make fuzz` adds: clang and its libFuzzer runtime (libclang_rt.fuzzer), from Debian.
FUZZ_DEB_PACKAGES = clang libclang-rt-14-dev
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 30

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps deps-fuzz install-packages configure build program test demo clean sanitize fuzz fuzz-smoke

all: build

# Installs only what is missing, so a second run does nothing.
deps:
	@$(MAKE) --no-print-directory install-packages PACKAGES="$(DEB_PACKAGES)"

deps-fuzz:
	@$(MAKE) --no-print-directory install-packages PACKAGES="$(FUZZ_DEB_PACKAGES)"

install-packages:
	@missing=$$(for p in $(PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "dependencies: all installed"; fi

configure:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# Only the program: what the demo needs, without the test binaries.
program: configure
	cmake --build $(BUILD) -j$(JOBS) --target vlrt

test: deps build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# Sanitizer build and its test run (address + undefined behaviour).
sanitize: deps
	$(MAKE) build BUILD=build-asan CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Debug -DVLRT_SANITIZE=ON"
	ctest --test-dir build-asan --output-on-failure -j$(JOBS) -E conformance

# The libFuzzer harnesses of fuzz/ (clang, address + undefined behaviour), into $(FUZZ_BUILD)/fuzz.
fuzz: deps deps-fuzz
	cmake -S . -B $(FUZZ_BUILD) -DVLRT_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target vlrt_fuzzers

# Each harness for FUZZ_SECONDS over its seed corpus (CI: 30 s); fails on any crash, leak or hang.
fuzz-smoke: fuzz
	fuzz/run_smoke.sh $(FUZZ_BUILD)/fuzz $(FUZZ_SECONDS)

# The shipped demo detector (models/demo) on the shipped demo image: a table of detections,
# the annotated image and the JSON under out/demo. Then the same image with no prompt: the demo
# tagger (models/demo-tagger) names what is in it, the detector finds those tags and the demo
# mask decoder (models/demo-sam) segments every box.
DEMO_IMAGE ?= assets/demo.png
DEMO_PROMPT ?= orange cross . black ring . orange heart . red triangle . green heart . yellow heart . yellow triangle .

demo: deps program
	./$(BUILD)/vlrt detect $(DEMO_IMAGE) --prompt "$(DEMO_PROMPT)" \
	  --json out/demo/detections.json --draw out/demo/detections.png
	./$(BUILD)/vlrt detect $(DEMO_IMAGE) --auto --masks models/demo-sam \
	  --json out/demo/masks.json --draw out/demo/masks.png
	@echo "open out/demo/detections.png to see the boxes and out/demo/masks.png the masks (no prompt: tag," \
	  "detect, segment); try another prompt with" \
	  "./$(BUILD)/vlrt detect $(DEMO_IMAGE) --prompt \"yellow heart . black ring .\""

clean:
	rm -rf $(BUILD) build-asan $(FUZZ_BUILD) out
