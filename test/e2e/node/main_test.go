//go:build e2enode

package node

import (
	"os"
	"testing"

	"github.com/cadence-storage/longhorn-manager/test/e2e/cluster"
)

// TestMain starts the real single-node cluster (test/e2e/cluster) for the
// package. The tests carry the build tag e2enode, not e2e, so `make test`
// does not run them yet:
//
//	go test -tags e2enode -count=1 ./test/e2e/node
func TestMain(m *testing.M) { os.Exit(cluster.Main(m)) }
