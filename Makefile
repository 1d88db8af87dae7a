# dri-cdi: make DRM GPUs usable from unprivileged Kubernetes pods.
SHELL := /bin/bash
GO ?= go
BIN := bin
OUT := _output
PKG := github.com/dri-cdi/dri-cdi
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X $(PKG)/pkg/version.Version=$(VERSION)
CMDS := $(notdir $(patsubst %/main.go,%,$(wildcard cmd/*/main.go)))
PLATFORMS := linux/amd64 linux/arm64

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-17s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build dri-cdi, dri-cdi-agent and dri-cdi-nri into bin/
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(CMDS))

.PHONY: build-cross
build-cross: ## Cross-compile static binaries for linux/amd64 and linux/arm64 into _output/
	@for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; mkdir -p $(OUT)/$$os-$$arch; \
	  echo "building $$p"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(OUT)/$$os-$$arch/ $(addprefix ./cmd/,$(CMDS)) || exit 1; \
	done

.PHONY: test
test: fmt-check vet test-deployments ## Unit tests (race detector), gofmt, go vet, manifest render tests
	$(GO) test -race -count=1 ./...

.PHONY: test-deployments
test-deployments: ## Render kustomize + Helm offline, strict-decode, golden files, security contexts
	cd deployments/test && $(GO) vet ./... && $(GO) test -count=1 ./...

.PHONY: fmt-check
fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet:
	$(GO) vet ./...

.PHONY: lint
lint: fmt-check vet ## gofmt, go vet and staticcheck
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd e2e && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

.PHONY: mod-check
mod-check: ## go mod tidy must leave go.mod and go.sum unchanged
	$(GO) mod tidy && git diff --exit-code go.mod go.sum
	cd deployments/test && $(GO) mod tidy && git diff --exit-code go.mod go.sum
	cd e2e && $(GO) mod tidy && git diff --exit-code go.mod go.sum

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 10s)
	@$(GO) list -f '{{.ImportPath}}' ./... | while read p; do \
	  for f in $$($(GO) test -list 'Fuzz.*' $$p | grep '^Fuzz'); do \
	    echo "fuzz $$p $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $${FUZZTIME:-10s} $$p || exit 1; \
	  done; done

E2E_CACHE ?= /var/cache/dri-cdi-e2e
E2E_RUN ?= .
E2E_TIMEOUT ?= 60m
E2E_ENV = DRI_CDI_E2E_CACHE=$(E2E_CACHE) DRI_CDI_E2E_PRODUCT_BIN=$(CURDIR)/$(BIN)

.PHONY: e2e-tools
e2e-tools: ## Install e2e apt packages; build or reuse kubelet, containerd, runc, crictl (root)
	DRI_CDI_E2E_CACHE=$(E2E_CACHE) e2e/tools/install.sh

.PHONY: e2e
e2e: build e2e-tools ## Real-node scenarios: kubelet, containerd, runc (root; E2E_RUN=regexp)
	@mkdir -p $(OUT)
	cd e2e && $(GO) vet ./... && $(GO) test -count=1 ./harness ./bench ./cmd/...
	@cd e2e && set -o pipefail; \
	$(E2E_ENV) $(GO) test -p 1 -count=1 -v -timeout $(E2E_TIMEOUT) -run '$(E2E_RUN)' ./scenarios/ 2>&1 | tee $(CURDIR)/$(OUT)/e2e.log; \
	rc=$$?; $(GO) run ./cmd/e2e-summary -rc $$rc $(CURDIR)/$(OUT)/e2e.log

.PHONY: demo
demo: build e2e-tools ## Show the hostPath EPERM, the dri-cdi fix and a root-start-then-drop pod on a fake-GPU node (root)
	cd e2e && $(E2E_ENV) $(GO) run ./cmd/demo

IMAGE ?= ghcr.io/dri-cdi/dri-cdi
IMAGE_TAG ?= $(VERSION)

.PHONY: image
image: ## Build the container image for linux/amd64 and linux/arm64 (docker buildx)
	docker buildx build -f deployments/container/Dockerfile --platform linux/amd64,linux/arm64 \
	  --build-arg VERSION=$(VERSION) -t $(IMAGE):$(IMAGE_TAG) .

BENCH_FLAGS ?=

.PHONY: bench
bench: build e2e-tools ## Measure dri-cdi's cost side by side: table + _output/bench.json (root; BENCH_FLAGS=...)
	@mkdir -p $(OUT)
	cd e2e && $(E2E_ENV) $(GO) run ./bench -bin $(CURDIR)/$(BIN) -out $(CURDIR)/$(OUT)/bench.json $(BENCH_FLAGS)

.PHONY: clean
clean: ## Remove build output
	rm -rf $(BIN) $(OUT)
