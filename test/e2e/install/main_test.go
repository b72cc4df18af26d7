//go:build e2enode

package install

import (
	"os"
	"testing"

	"github.com/cadence-storage/longhorn-manager/test/e2e/cluster"
)

// TestMain starts the real single-node cluster (test/e2e/cluster) for the
// package.
func TestMain(m *testing.M) { os.Exit(cluster.Main(m)) }
