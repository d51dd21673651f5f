# SPDX-License-Identifier: MIT
# The Python and Go packages over libkis-sandbox.so.0 (bindings/, issue 45),
# their tests in `make check`, and the ABI check of the shared library.

PY_STAGE := $(BUILD)/python/src
PY_DIST  := $(BUILD)/python/dist
PY_TOP   := $(wildcard bindings/python/*.toml bindings/python/*.py bindings/python/*.md)
PY_PKG   := $(wildcard bindings/python/kis_sandbox/*.py) bindings/python/kis_sandbox/py.typed

.PHONY: python python-stage check-python check-go check-abi
# The package staged with the library and the agent beside it (as the
# wheel carries them), then the wheel, built offline from that tree.
python-stage: $(SHARED_LIB) $(AGENT) $(PY_TOP) $(PY_PKG)
	rm -rf $(PY_STAGE)
	mkdir -p $(PY_STAGE)/kis_sandbox/_native
	cp $(PY_TOP) $(PY_STAGE)/
	cp $(PY_PKG) $(PY_STAGE)/kis_sandbox/
	cp $(SHARED_LIB) $(AGENT) $(PY_STAGE)/kis_sandbox/_native/

python: python-stage
	rm -rf $(PY_DIST) $(PY_STAGE)/build $(PY_STAGE)/*.egg-info
	$(PYTHON) -m pip wheel --no-deps --no-build-isolation --no-index -q -w $(PY_DIST) $(PY_STAGE)
	@ls $(PY_DIST)/*.whl

check-python: python $(KIS)
	PYTHONPATH=$(abspath $(PY_STAGE)) BUILD=$(abspath $(BUILD)) \
	  $(PYTHON) -m pytest -q -rs -p no:cacheprovider bindings/python/tests

# cgo over the library of this tree, offline: no module outside the
# standard library, GOPROXY off; skipped with the reason without go.
GO ?= go
GO_ENV := GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local GOCACHE=$(abspath $(BUILD))/go-cache \
	  KIS_BUILD=$(abspath $(BUILD))
check-go: $(SHARED_LIB) $(AGENT) $(KIS)
	@if ! command -v $(GO) >/dev/null 2>&1; then \
	  echo "check-go: SKIPPED: no go toolchain (scripts/install-deps.sh installs golang-go)"; \
	else cd bindings/go && $(GO_ENV) $(GO) vet ./... && $(GO_ENV) $(GO) test -count=1 ./...; fi

check-abi: $(SHARED_LIB)
	$(PYTHON) scripts/check-abi.py $(SHARED_LIB)

CHECK_TARGETS += check-abi check-python check-go
