//go:build e2e

package csi

import (
	"testing"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }
