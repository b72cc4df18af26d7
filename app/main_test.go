package app

import (
	"os"
	"testing"

	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }
