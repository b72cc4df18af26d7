// Package install holds the end-to-end test of the project as users
// install it: package/ applied with `kubectl apply -k` to the real
// single-node cluster (test/e2e/cluster), from the images
// scripts/build-images.sh makes, and a workload whose claim the CSI driver
// provisions, the kubelet mounts, and a recurring job's CronJob pod backs
// up to a real S3 server. The tests carry the build tag e2enode and need
// root; `make test` runs them as root after the other packages:
//
//	sudo go test -tags e2enode -count=1 ./test/e2e/install
package install
