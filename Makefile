# The developer interface. `make run` and `make test` are the two commands
# that matter; everything they need is built on demand.

GO_SOURCES := $(shell find . -name '*.go' -not -path './scripts/*' -not -path './bin/*' -not -path './.dev/*') go.mod go.sum

.PHONY: run ui test bench generate verify-generated lint controlplane s3server csi-sidecars node cluster build clean

build: bin/longhorn-manager

bin/longhorn-manager: $(GO_SOURCES)
	go build -o $@ .

controlplane:
	bash scripts/build-controlplane.sh

s3server:
	bash scripts/build-s3server.sh

# The real CSI sidecars (external-provisioner, -attacher, -resizer,
# -snapshotter and the snapshot controller) the CSI driver's end-to-end
# tests run;
# scripts/test.sh builds them too, and scripts/run.sh in the background
# once the manager is up, so `make run` does not wait for them.
csi-sidecars:
	bash scripts/build-csi-sidecars.sh

# The real single-node cluster's kubelet, kube-proxy and CoreDNS (and, as
# root, containerd, runc, the CNI plugins and nftables from Debian); see
# docs/cluster.md.
node:
	bash scripts/build-node.sh

# The real single-node cluster until Ctrl-C, for a user who is root
# (docs/cluster.md).
cluster:
	bash scripts/cluster.sh

run: build controlplane
	bash scripts/run.sh

# Longhorn's web UI in front of `make run`'s manager (see docs/api.md, "Longhorn's web UI").
UI_DIST ?= ../shared/longhorn-ui/dist
UI_ADDRESS ?= 127.0.0.1:8000
API_ADDRESS ?= 127.0.0.1:9500
ui: build
	./bin/longhorn-manager ui --dist $(UI_DIST) --listen $(UI_ADDRESS) --manager-url http://$(API_ADDRESS)

test: controlplane csi-sidecars
	bash scripts/test.sh

bench: s3server
	go test -tags e2e -run '^$$' -bench . -benchmem -timeout 150m ./...

generate:
	bash scripts/generate.sh

verify-generated:
	bash scripts/verify-generated.sh

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet -tags e2e ./...

clean:
	rm -rf bin
