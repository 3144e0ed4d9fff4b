# The README's two commands: `make run` and `make test`. Both install the system libraries
# (liblz4-dev, libssl-dev, pkg-config) with apt only when pkg-config does not find them.

SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
.PHONY: deps build run test benchmark clean

deps:
	@missing=""; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	pkg-config --exists liblz4 2>/dev/null || missing="$$missing liblz4-dev"; \
	pkg-config --exists openssl 2>/dev/null || missing="$$missing libssl-dev"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -q && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi

build: deps
	swift build

# Until fanoutd exists (the protocol issue), `run` shows the CLI and an in-memory demo of the engine.
run: deps
	swift build --product fanout
	.build/debug/fanout --help
	.build/debug/fanout demo

test: deps
	swift build --build-tests
	swift test --skip-build

benchmark: deps
	cd Benchmarks && swift package benchmark --no-progress

clean:
	rm -rf .build Benchmarks/.build
