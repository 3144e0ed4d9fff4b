# The README's two commands: `make run` and `make test`. Both install the system libraries
# (liblz4-dev, libssl-dev, libnats-dev, pkg-config) with apt only when pkg-config does not find them, and the
# lz4 command-line tool (the tests check snapshot files with `lz4 -t`), python3 (a test runs a
# client written from docs/wire-protocol.md in Python), redis-server (fanout-load compares with
# it, in the tests too), the openssl command (a TLS test handshakes with `openssl s_client`),
# curl (it checks the HTTP front's TLS and HTTP/2), gdb (a test run that hangs prints its threads' stacks) and nats-server (the replication tests run
# JetStream) when they are missing. `make test` also makes a Python virtual environment in .build/python-venv
# with the pinned firebase-admin SDK (a test drives the HTTP front with it), from PyPI.

SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
PYTHON_VENV := .build/python-venv
PYTHON_PACKAGES := firebase-admin==7.7.0 prometheus-client==0.26.0

.PHONY: deps python-deps build run cluster demo test benchmark benchmark-check benchmark-thresholds load compare clean

deps:
	@missing=""; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	pkg-config --exists liblz4 2>/dev/null || missing="$$missing liblz4-dev"; \
	pkg-config --exists openssl 2>/dev/null || missing="$$missing libssl-dev"; \
	pkg-config --exists libnats 2>/dev/null || missing="$$missing libnats-dev"; \
	command -v nats-server >/dev/null 2>&1 || missing="$$missing nats-server"; \
	command -v lz4 >/dev/null 2>&1 || missing="$$missing lz4"; \
	command -v python3 >/dev/null 2>&1 || missing="$$missing python3"; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v openssl >/dev/null 2>&1 || missing="$$missing openssl"; \
	command -v curl >/dev/null 2>&1 || missing="$$missing curl"; \
	command -v gdb >/dev/null 2>&1 || missing="$$missing gdb"; \
	python3 -c "import ensurepip, venv" >/dev/null 2>&1 || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -q && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi

# The SDKs the tests drive fanoutd with, pinned, in a virtual environment (made once).
python-deps: deps
	@if ! $(PYTHON_VENV)/bin/python3 -c "import firebase_admin, prometheus_client" >/dev/null 2>&1; then \
		echo "installing into $(PYTHON_VENV): $(PYTHON_PACKAGES)"; \
		python3 -m venv $(PYTHON_VENV) && \
		$(PYTHON_VENV)/bin/pip install --quiet --disable-pip-version-check $(PYTHON_PACKAGES); \
	fi

build: deps
	swift build

# `run` serves ./fanout-data on 127.0.0.1:7400 (release build). The first start prints an admin
# API key and leaves it in ./fanout-data/admin-key, where the `fanout` CLI finds it.
run: deps
	swift build -c release --product fanoutd
	swift build -c release --product fanout
	.build/release/fanoutd --data-dir ./fanout-data --listen 127.0.0.1:7400 --http 127.0.0.1:7401

# `cluster` runs three NATS servers (one JetStream cluster) and three fanoutd nodes on loopback,
# in the foreground until Ctrl-C (scripts/cluster.sh; docs/scale-out.md).
cluster: deps
	swift build -c release --product fanoutd
	swift build -c release --product fanout
	scripts/cluster.sh

# The engine's demo (no server): registers, subscribes and sends into ./fanout-demo-data.
demo: deps
	swift build --product fanout
	.build/debug/fanout demo --data-dir ./fanout-demo-data

# scripts/test.sh runs `swift test --skip-build` (the load harness's tests and the cluster of processes
# each alone, after the rest) and, should a run hang, prints where every thread waits.
test: deps python-deps
	swift build --build-tests
	scripts/test.sh

benchmark: deps
	cd Benchmarks && swift package benchmark --no-progress

# Allocation counts of the hot paths (subscribe batch, validate+render, send to a topic) against
# the thresholds checked in under Benchmarks/Thresholds (not part of `make test`). Exit code 2:
# more allocations than recorded; 4: fewer (record them with benchmark-thresholds).
benchmark-check: deps
	cd Benchmarks && swift package benchmark thresholds check --target AllocationBenchmarks --no-progress

benchmark-thresholds: deps
	cd Benchmarks && swift package --allow-writing-to-package-directory benchmark thresholds update --target AllocationBenchmarks --no-progress

# The load harness against a fanoutd it starts (release builds); see docs/performance.md.
load: deps
	swift build -c release --product fanoutd
	swift build -c release --product fanout-load
	.build/release/fanout-load run send-topic

compare: deps
	swift build -c release --product fanoutd
	swift build -c release --product fanout-load
	.build/release/fanout-load compare

clean:
	rm -rf .build Benchmarks/.build
