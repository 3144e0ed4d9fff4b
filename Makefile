# The README's two commands: `make run` and `make test`. Both install the system libraries
# (liblz4-dev, libssl-dev, pkg-config) with apt only when pkg-config does not find them, and the
# lz4 command-line tool (the tests check snapshot files with `lz4 -t`) when it is missing.

SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
.PHONY: deps build run test benchmark clean

deps:
	@missing=""; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	pkg-config --exists liblz4 2>/dev/null || missing="$$missing liblz4-dev"; \
	pkg-config --exists openssl 2>/dev/null || missing="$$missing libssl-dev"; \
	command -v lz4 >/dev/null 2>&1 || missing="$$missing lz4"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -q && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi

build: deps
	swift build

# Until fanoutd exists (the protocol issue), `run` shows the CLI and a demo against ./fanout-data
# (each run adds a project there; the next run recovers them from the write-ahead log).
run: deps
	swift build --product fanout
	.build/debug/fanout --help
	.build/debug/fanout demo --data-dir ./fanout-data

test: deps
	swift build --build-tests
	swift test --skip-build

benchmark: deps
	cd Benchmarks && swift package benchmark --no-progress

clean:
	rm -rf .build Benchmarks/.build
