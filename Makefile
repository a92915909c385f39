# hookkeeper — make help lists the targets.

# Control-plane versions for envtest, the e2e suite and `make dev`; they are
# built from the Go module proxy (hack/controlplane.sh), once, into bin/k8s.
KUBE_VERSION ?= v1.37.2
ETCD_VERSION ?= v3.6.16
export KUBE_VERSION ETCD_VERSION

IMG ?= ghcr.io/hookkeeper/hookkeeper:dev
GOOS ?= $(shell go env GOOS)
GOARCH ?= $(shell go env GOARCH)
ASSETS_DIR ?= $(CURDIR)/bin/k8s/$(patsubst v%,%,$(KUBE_VERSION))-$(GOOS)-$(GOARCH)
KUBECTL ?= $(ASSETS_DIR)/kubectl
CONTROLLER_GEN ?= go tool controller-gen

# Packages whose tests need a real control plane get KUBEBUILDER_ASSETS.
export KUBEBUILDER_ASSETS := $(ASSETS_DIR)

# golangci-lint is pinned in its own module (hack/tools/golangci-lint) and
# built once into bin/, under its version.
GOLANGCI_LINT_VERSION := $(shell awk '$$1 == "github.com/golangci/golangci-lint/v2" { print $$2 }' hack/tools/golangci-lint/go.mod)
GOLANGCI_LINT ?= $(CURDIR)/bin/golangci-lint-$(GOLANGCI_LINT_VERSION)

# promtool (tests of config/prometheus) and helm (the chart `make helm-chart`
# generates), pinned likewise in hack/tools/<name> and built once into bin/;
# test/tools finds them under these names.
PROMTOOL_VERSION := $(shell awk '{ sub(/^require /, "") } $$1 == "github.com/prometheus/prometheus" { print $$2 }' hack/tools/promtool/go.mod)
PROMTOOL ?= $(CURDIR)/bin/promtool-$(PROMTOOL_VERSION)
HELM_VERSION := $(shell awk '{ sub(/^require /, "") } $$1 == "helm.sh/helm/v3" { print $$2 }' hack/tools/helm/go.mod)
HELM ?= $(CURDIR)/bin/helm-$(HELM_VERSION)
KREW_VERSION := $(shell awk '{ sub(/^require /, "") } $$1 == "sigs.k8s.io/krew" { print $$2 }' hack/tools/krew/go.mod)
KREW_VALIDATOR ?= $(CURDIR)/bin/krew-$(KREW_VERSION)

# The packages `make test-unit` runs: those whose tests import neither
# pgtest (PostgreSQL) nor test/testenv or envtest (a control plane).
UNIT_PKGS = $(shell go list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | \
	grep -vE ' .*(/pgtest|/test/testenv|/pkg/envtest)( |$$)' | cut -d' ' -f1)

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: ## Generate CRDs and RBAC from the markers in api/ and controllers/.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: ## Generate deepcopy code for the API types and the delivery API's OpenAPI definitions.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."
	# Model names are written into every input package that asks for them:
	# only ours, never a dependency in the module cache (go mod verify).
	go tool openapi-gen --go-header-file hack/boilerplate.go.txt \
		--output-dir $$(mktemp -d) --output-pkg github.com/hookkeeper/hookkeeper/internal/deliveryapi/openapi \
		--output-file zz_generated.openapi.go --output-model-name-file zz_generated.model_name.go --report-filename /dev/null \
		./api/delivery/v1alpha1
	go tool openapi-gen --go-header-file hack/boilerplate.go.txt \
		--output-dir internal/deliveryapi/openapi --output-pkg github.com/hookkeeper/hookkeeper/internal/deliveryapi/openapi \
		--output-file zz_generated.openapi.go --report-filename /dev/null \
		k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/runtime k8s.io/apimachinery/pkg/version ./api/delivery/v1alpha1

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -s -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: golangci-lint ## Run golangci-lint (.golangci.yml).
	$(GOLANGCI_LINT) run ./...

.PHONY: lint-fix
lint-fix: golangci-lint ## Run golangci-lint and apply the fixes it can.
	$(GOLANGCI_LINT) run --fix ./...

.PHONY: verify
verify: ## Fail when generated files are stale, code is unformatted or vet complains.
	./hack/verify.sh

.PHONY: controlplane
controlplane: ## Build etcd, kube-apiserver, kubectl and kube-controllers into bin/k8s (once).
	@./hack/controlplane.sh >/dev/null

.PHONY: postgres
postgres: ## Start a local PostgreSQL for the store tests (idempotent).
	@./hack/postgres.sh >/dev/null

.PHONY: test
test: controlplane postgres promtool helm krew ## Run every test suite against the real control plane and PostgreSQL.
	HOOKKEEPER_TEST_POSTGRES="$$(./hack/postgres.sh)" go test ./... -race -count=1 -timeout 45m

# Without the race detector, which makes the SQLite ledger's suite some
# twenty times slower; `make test` runs everything with it.
.PHONY: test-unit
test-unit: ## Run the tests that need neither a control plane nor PostgreSQL (under a minute).
	go test $(UNIT_PKGS) -timeout 5m

.PHONY: test-e2e
test-e2e: controlplane postgres ## Run the end-to-end suites: the manager as a process against a real control plane.
	HOOKKEEPER_TEST_POSTGRES="$$(./hack/postgres.sh)" go test ./test/e2e/... ./test/replicas/... ./test/outage/... -race -count=1 -timeout 30m -v

# Every fuzz target, as <package>:<target>; `make test` runs their seed
# corpora, `make fuzz` each one for FUZZTIME.
FUZZ_TARGETS := \
	./internal/backoff:FuzzPolicy \
	./internal/httpapi:FuzzPublishBody \
	./internal/httpapi:FuzzAckRequest \
	./internal/publish:FuzzCanonicalPublishBody \
	./internal/canonjson:FuzzCanonicalAppendString \
	./internal/signing:FuzzVerify \
	./internal/signing:FuzzVerifyMutation \
	./pkg/receiver:FuzzVerify \
	./internal/catalog:FuzzFastAgreesWithTheValidator \
	./internal/eventfilter:FuzzMatch \
	./internal/eventfilter:FuzzHostile
FUZZTIME ?= 1m

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 1m).
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		go test $$pkg -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME); \
	done

.PHONY: dev
dev: controlplane build ## Start a local control plane, the operator and the samples.
	./hack/dev.sh

.PHONY: demo
demo: controlplane ## Walk through the whole story with the real kubectl; exits 0 only if every step behaved.
	./hack/demo.sh

##@ Build

.PHONY: build
build: ## Build the manager binary into bin/.
	go build -trimpath -o bin/manager ./cmd

.PHONY: run
run: ## Run the manager against the cluster in $KUBECONFIG.
	go run ./cmd --ledger=sqlite://$(CURDIR)/.dev/ledger.db --api-bind-address=127.0.0.1:8090

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine).
	docker build -t $(IMG) .

.PHONY: build-installer
build-installer: manifests controlplane ## Write dist/install.yaml (CRDs, RBAC, the operator) for IMG.
	@mkdir -p dist && rm -rf dist/.kustomize && cp -r config dist/.kustomize
	sed -i 's#newName: .*#newName: $(firstword $(subst :, ,$(IMG)))#; s#newTag: .*#newTag: $(lastword $(subst :, ,$(IMG)))#' dist/.kustomize/manager/kustomization.yaml
	$(KUBECTL) kustomize dist/.kustomize/default > dist/install.yaml
	@rm -rf dist/.kustomize
	@echo "wrote dist/install.yaml for $(IMG)"

# The Helm chart is generated, never edited: config/ is its one source.
CHART_VERSION ?= 0.1.0

.PHONY: helm-chart
helm-chart: controlplane ## Generate the Helm chart dist/chart from config/ (kustomize's render; edit config/, not the chart).
	go run ./hack/helmchart -kubectl $(KUBECTL) -out dist/chart -version $(CHART_VERSION) config/default config/prometheus config/grafana
	@echo "wrote dist/chart (helm install hookkeeper dist/chart -n hookkeeper-system --create-namespace)"

##@ Deployment

.PHONY: install
install: manifests controlplane ## Install the CRDs into the cluster in $KUBECONFIG.
	$(KUBECTL) apply --server-side -k config/crd

.PHONY: uninstall
uninstall: controlplane ## Remove the CRDs from the cluster in $KUBECONFIG.
	$(KUBECTL) delete --ignore-not-found -k config/crd

.PHONY: deploy
deploy: build-installer ## Deploy the operator to the cluster in $KUBECONFIG.
	$(KUBECTL) apply --server-side -f dist/install.yaml

.PHONY: undeploy
undeploy: controlplane ## Remove what deploy applied (the operator, its RBAC and the CRDs) from the cluster in $KUBECONFIG.
	$(KUBECTL) kustomize config/default | $(KUBECTL) delete --ignore-not-found -f -

##@ Benchmarks

# BENCH_FLAGS: e.g. --history-events=1000000 for a quicker run (the default,
# 10,000,000 events of history, takes about an hour to preload on 2 cores).
BENCH_FLAGS ?=

.PHONY: bench
bench: postgres controlplane ## Measure the engine end to end, kubectl get deliveries and the API-server load of busy endpoints, and write docs/benchmarks.md (the results it replaces appended to docs/benchmarks-archive.md; BENCH_FLAGS: more flags).
	HOOKKEEPER_TEST_POSTGRES="$$(./hack/postgres.sh)" go run ./test/bench --out docs/benchmarks.md $(BENCH_FLAGS)

##@ Build dependencies

.PHONY: promtool
promtool: $(PROMTOOL) ## Build the pinned promtool into bin/ (once).
$(PROMTOOL):
	@echo "building promtool $(PROMTOOL_VERSION) into bin/ (once; later runs reuse it)"
	# remove_all_sd: no service-discovery plugins (cloud SDKs), which rule
	# tests never use and which make most of the build.
	cd hack/tools/promtool && CGO_ENABLED=0 go build -trimpath -tags remove_all_sd -ldflags "-s -w -X github.com/prometheus/common/version.Version=$(patsubst v%,%,$(PROMTOOL_VERSION))" \
		-o $(PROMTOOL) github.com/prometheus/prometheus/cmd/promtool

.PHONY: helm
helm: $(HELM) ## Build the pinned helm into bin/ (once).
$(HELM):
	@echo "building helm $(HELM_VERSION) into bin/ (once; later runs reuse it)"
	cd hack/tools/helm && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)" \
		-o $(HELM) helm.sh/helm/v3/cmd/helm

.PHONY: krew
krew: $(KREW_VALIDATOR) ## Build the pinned validate-krew-manifest into bin/ (once).
$(KREW_VALIDATOR):
	@echo "building validate-krew-manifest $(KREW_VERSION) into bin/ (once; later runs reuse it)"
	cd hack/tools/krew && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(KREW_VALIDATOR) sigs.k8s.io/krew/cmd/validate-krew-manifest

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT) ## Build the pinned golangci-lint into bin/ (once).
$(GOLANGCI_LINT):
	@echo "building golangci-lint $(GOLANGCI_LINT_VERSION) into bin/ (once; later runs reuse it)"
	cd hack/tools/golangci-lint && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(patsubst v%,%,$(GOLANGCI_LINT_VERSION))" \
		-o $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint
