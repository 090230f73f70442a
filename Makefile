# The two commands of the README:
#   make run   installs what is missing (Debian), builds, and plans a bundled example
#   make test  builds and runs the whole test suite
# Everything else is plain CMake in build/.

BUILD ?= build
JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
APT_PACKAGES = build-essential cmake pkg-config libglpk-dev libigraph-dev libcjson-dev librsvg2-bin

.PHONY: all deps build run test sanitize install clean

all: build

# Installs the Debian packages that are missing (as root, or through sudo).
# librsvg2-bin: rsvg-convert, with which tests/plan_svg.sh renders the pictures.
deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: deps build
	$(BUILD)/loom plan

test: deps build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Installs loom, loom-profile (when built), libloom, its public headers and the
# bundled models and clusters under PREFIX (default /usr/local).
# The prefix is configured into the build, so the installed loom finds its
# bundled data under PREFIX/share/loom.
PREFIX ?= /usr/local
install: deps
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	cmake --install $(BUILD)

# The suite again with AddressSanitizer + UndefinedBehaviorSanitizer.
sanitize: deps
	$(MAKE) test BUILD=build-asan CMAKE_FLAGS="-DLOOM_SANITIZE=ON -DLOOM_GPU=OFF $(CMAKE_FLAGS)"

clean:
	rm -rf $(BUILD) build-asan
