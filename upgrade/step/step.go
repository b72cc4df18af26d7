// Package step holds what every migrator gets: the clients, the namespace,
// a logger, and the step hook tests use to inject a crash between any two
// writes.
package step

import (
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"

	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
)

// Clients are a migrator's dependencies.
type Clients struct {
	Namespace string
	Kube      kubernetes.Interface
	Longhorn  lhclientset.Interface
	Log       *logrus.Entry
	// AfterStep, when set, is called after each write with its name; an
	// error stops the migration there, as a crash would.
	AfterStep func(name string) error
}

// Step reports that a write named name has completed.
func (c Clients) Step(name string) error {
	if c.AfterStep == nil {
		return nil
	}
	return c.AfterStep(name)
}
