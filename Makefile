# SignFleet: `make demo` runs a local fleet, `make test` runs the test suite.
# Both install missing system packages first (scripts/install-deps.sh).
SWIFT ?= swift
BIN := .build/debug/signfleet

.PHONY: deps build test test-loaded demo bench docs clean

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build

test: deps
	$(SWIFT) build --build-tests
	SWIFT=$(SWIFT) SIGNFLEET_BIN=$(CURDIR)/$(BIN) scripts/test.sh

# The suite with the machine oversubscribed (stress-ng --cpu 4 beside it): the bar it must pass.
test-loaded: deps
	$(SWIFT) build --build-tests
	SWIFT=$(SWIFT) SIGNFLEET_BIN=$(CURDIR)/$(BIN) scripts/test-loaded.sh

demo: build
	@scripts/demo.sh $(BIN)

bench: deps
	loadtests/run

# DocC for every public library target, offline, failing on any documentation warning.
docs: deps
	SWIFT=$(SWIFT) scripts/docs.sh

clean:
	rm -rf .build loadtests/.build runs
