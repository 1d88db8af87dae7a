# dri-cdi: make DRM GPUs usable from unprivileged Kubernetes pods.
SHELL := /bin/bash
GO ?= go
BIN := bin
OUT := _output
PKG := github.com/dri-cdi/dri-cdi
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# RELEASE is the release version, from VERSION (its one source): the image
# tag the manifests use, the chart's appVersion; CHART_VERSION is the
# chart's version. deployments/test checks that they all agree.
RELEASE := $(shell cat VERSION)
CHART_VERSION := $(RELEASE:v%=%)
LDFLAGS := -s -w -X $(PKG)/pkg/version.Version=$(VERSION)
# GOTAGS are the build tags of every product binary. grpcnotrace leaves
# out gRPC's golang.org/x/net/trace (and with it html/template), which
# nothing here uses: 2.5 MB of agent binary and 3.7 MB of NRI plugin
# binary, almost all of it resident (docs/performance.md, Memory).
GOTAGS := grpcnotrace
CMDS := $(notdir $(patsubst %/main.go,%,$(wildcard cmd/*/main.go)))
PLATFORMS := linux/amd64 linux/arm64

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-17s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build dri-cdi, dri-cdi-agent, dri-cdi-dra and dri-cdi-nri into bin/
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(GOTAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(CMDS))

.PHONY: build-cross
build-cross: ## Cross-compile static binaries for linux/amd64 and linux/arm64 into _output/
	@for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; mkdir -p $(OUT)/$$os-$$arch; \
	  echo "building $$p"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -tags '$(GOTAGS)' -ldflags '$(LDFLAGS)' -o $(OUT)/$$os-$$arch/ $(addprefix ./cmd/,$(CMDS)) || exit 1; \
	done

.PHONY: test
test: fmt-check vet test-deployments ## Unit tests (race detector), gofmt, go vet, manifest render tests
	$(GO) test -race -count=1 ./...

.PHONY: test-deployments
test-deployments: ## Render kustomize + Helm offline, strict-decode, golden files, security contexts; image builder
	cd deployments/test && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd deployments/container/build && $(GO) vet ./... && $(GO) test -count=1 ./...

.PHONY: fmt-check
fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet:
	$(GO) vet ./...

.PHONY: lint
lint: fmt-check vet ## gofmt, go vet and staticcheck over every module of the repo
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	@for m in e2e e2e/tools/etcd deployments/test deployments/container/build; do \
	  echo "lint $$m"; (cd $$m && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...) || exit 1; \
	done

.PHONY: mod-check
mod-check: ## go mod tidy must leave go.mod and go.sum unchanged
	$(GO) mod tidy && git diff --exit-code go.mod go.sum
	cd deployments/test && $(GO) mod tidy && git diff --exit-code go.mod go.sum
	cd deployments/container/build && $(GO) mod tidy && git diff --exit-code go.mod go.sum
	cd e2e/tools/etcd && $(GO) mod tidy && git diff --exit-code go.mod go.sum
	cd e2e && $(GO) mod tidy && git diff --exit-code go.mod go.sum

FUZZTIME ?= 10s

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME (default 10s), all even if one fails; one line each
	GO=$(GO) FUZZTIME=$(FUZZTIME) hack/fuzz.sh

E2E_CACHE ?= /var/cache/dri-cdi-e2e
E2E_RUN ?= .
E2E_TIMEOUT ?= 60m
# DEMO_CGROUP=v2 runs make demo's node on cgroup v2 (the e2e v2 rig); v1,
# the default, on this machine's own hierarchy.
DEMO_CGROUP ?= v1
# SOAK_DURATION is TestSoak's churn time over its two nodes (empty: 2m, the
# form `make e2e` runs; `make soak` defaults to 10m); SOAK_SEED replays a
# run (empty: random, printed). See docs/soak.md.
SOAK_DURATION ?=
SOAK_SEED ?=
E2E_ENV = DRI_CDI_E2E_CACHE=$(E2E_CACHE) DRI_CDI_E2E_PRODUCT_BIN=$(CURDIR)/$(BIN) DRI_CDI_E2E_IMAGE=$(CURDIR)/$(IMAGE_ARCHIVE) \
	DRI_CDI_SOAK_DURATION=$(SOAK_DURATION) DRI_CDI_SOAK_SEED=$(SOAK_SEED)

.PHONY: e2e-tools
e2e-tools: ## Install e2e apt packages; build or reuse kubelet, containerd, runc, crictl, control plane, etcd, CNI, helm, kustomize, kyverno, gator (root)
	DRI_CDI_E2E_CACHE=$(E2E_CACHE) e2e/tools/install.sh

.PHONY: e2e
e2e: build image e2e-tools ## Real-node and cluster scenarios: kubelet, containerd, runc, control plane (root; E2E_RUN=regexp)
	@mkdir -p $(OUT)
	cd e2e && $(GO) vet ./... && $(GO) test -count=1 ./harness ./bench ./cmd/...
	@cd e2e && set -o pipefail; \
	$(E2E_ENV) $(GO) test -p 1 -count=1 -v -timeout $(E2E_TIMEOUT) -run '$(E2E_RUN)' ./scenarios/ 2>&1 | tee $(CURDIR)/$(OUT)/e2e.log; \
	rc=$$?; $(GO) run ./cmd/e2e-summary -rc $$rc $(CURDIR)/$(OUT)/e2e.log

.PHONY: soak
soak: ## Soak with injected faults on a device-plugin, then a DRA cluster node (root; SOAK_DURATION=10m, SOAK_SEED=n replays)
	$(MAKE) e2e E2E_RUN=TestSoak SOAK_DURATION=$(or $(SOAK_DURATION),10m) SOAK_SEED=$(SOAK_SEED)

.PHONY: demo
demo: build ## Show the hostPath EPERM, the dri-cdi fix, a root-start-then-drop pod and its dri-cdi top row (simulated usage) on a fake-GPU node (root; DEMO_CGROUP=v2 for cgroup v2)
	DRI_CDI_E2E_CACHE=$(E2E_CACHE) e2e/tools/install.sh node
	cd e2e && $(E2E_ENV) DRI_CDI_DEMO_CGROUP=$(DEMO_CGROUP) $(GO) run ./cmd/demo

IMAGE ?= ghcr.io/dri-cdi/dri-cdi
# The tag the manifests deploy.
IMAGE_TAG ?= $(RELEASE)
IMAGE_ARCHIVE := $(OUT)/dri-cdi-image.tar

.PHONY: image
image: build-cross ## OCI image archive (linux/amd64+arm64, no docker) in _output/dri-cdi-image.tar, named $(IMAGE):$(IMAGE_TAG)
	cd deployments/container/build && $(GO) run . -dockerfile ../Dockerfile -ref $(IMAGE):$(IMAGE_TAG) \
	  -version $(VERSION) -out $(CURDIR)/$(IMAGE_ARCHIVE) \
	  $(foreach p,$(PLATFORMS),-platform $(p)=$(CURDIR)/$(OUT)/$(subst /,-,$(p)))

# Release: .github/workflows/release.yaml runs these targets for a tag
# vX.Y.Z, in this order. All but the *-push, registry-login and
# github-release targets run without network or credentials.
HELM_VERSION ?= v3.22.0
HELM ?= $(or $(shell command -v helm 2>/dev/null),$(GO) run helm.sh/helm/v3/cmd/helm@$(HELM_VERSION))
CHART_REPO ?= oci://ghcr.io/dri-cdi/charts
DIST := $(OUT)/dist

.PHONY: release-check
release-check: ## Release: VERSION is vX.Y.Z, names this tag (TAG=...), and agrees with chart, manifests, pkg/version, CHANGELOG
	@[[ "$(RELEASE)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$$ ]] || { echo "VERSION $(RELEASE) is not vX.Y.Z"; exit 1; }
	@if [ -n "$(TAG)" ] && [ "$(TAG)" != "$(RELEASE)" ]; then echo "tag $(TAG) is not VERSION $(RELEASE)"; exit 1; fi
	cd deployments/test && $(GO) test -count=1 -run '^(TestVersionsAgree|TestReleaseNotes|TestImageOverrideAsDocumented)$$' .

.PHONY: dist
dist: ## Static dri-cdi CLI binaries for linux/amd64 and linux/arm64 + SHA256SUMS in _output/dist/
	@rm -rf $(DIST) && mkdir -p $(DIST)
	@for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; echo "building dri-cdi $$p"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -tags '$(GOTAGS)' -ldflags '$(LDFLAGS)' -o $(DIST)/dri-cdi-$$os-$$arch ./cmd/dri-cdi || exit 1; \
	done
	cd $(DIST) && sha256sum dri-cdi-* > SHA256SUMS && cat SHA256SUMS

.PHONY: chart
chart: ## Package the Helm chart into _output/dri-cdi-<chart version>.tgz
	@mkdir -p $(OUT)
	$(HELM) package deployments/helm/dri-cdi --destination $(OUT)
	@test -f $(OUT)/dri-cdi-$(CHART_VERSION).tgz

.PHONY: release-notes
release-notes: ## Print the CHANGELOG.md entry of VERSION (the release notes) and write it to _output/release-notes.md
	@mkdir -p $(OUT)
	@scripts/release-notes.sh $(RELEASE) > $(OUT)/release-notes.md
	@cat $(OUT)/release-notes.md

.PHONY: registry-login
registry-login: ## Release: log docker and helm in to ghcr.io with REGISTRY_USER / REGISTRY_PASSWORD
	@echo "$$REGISTRY_PASSWORD" | docker login ghcr.io -u "$$REGISTRY_USER" --password-stdin
	@echo "$$REGISTRY_PASSWORD" | $(HELM) registry login ghcr.io -u "$$REGISTRY_USER" --password-stdin

.PHONY: image-push
image-push: ## Release: build and push the multi-arch image (IMAGE:IMAGE_TAG, the manifests' image) with docker buildx
	docker buildx build -f deployments/container/Dockerfile --platform $(subst $(eval) ,$(comma),$(PLATFORMS)) \
	  --build-arg VERSION=$(VERSION) -t $(IMAGE):$(IMAGE_TAG) --push .

.PHONY: chart-push
chart-push: chart ## Release: push the packaged chart to CHART_REPO (oci://ghcr.io/dri-cdi/charts) with helm push
	$(HELM) push $(OUT)/dri-cdi-$(CHART_VERSION).tgz $(CHART_REPO)

.PHONY: github-release
github-release: ## Release: create the GitHub release of VERSION with the notes, binaries, checksums, chart and image archive
	gh release create $(RELEASE) --verify-tag --title "dri-cdi $(RELEASE)" --notes-file $(OUT)/release-notes.md \
	  $(DIST)/dri-cdi-linux-amd64 $(DIST)/dri-cdi-linux-arm64 $(DIST)/SHA256SUMS \
	  $(OUT)/dri-cdi-$(CHART_VERSION).tgz $(OUT)/dri-cdi-image.tar

comma := ,

BENCH_FLAGS ?=

.PHONY: bench
bench: build image e2e-tools ## Measure dri-cdi's cost side by side: table + _output/bench.json (root; BENCH_FLAGS=...)
	@mkdir -p $(OUT)
	cd e2e && $(E2E_ENV) $(GO) run ./bench -bin $(CURDIR)/$(BIN) -out $(CURDIR)/$(OUT)/bench.json $(BENCH_FLAGS)

.PHONY: clean
clean: ## Remove build output
	rm -rf $(BIN) $(OUT)
