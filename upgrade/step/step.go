// Package step holds what every migrator gets: the clients, the namespace,
// a logger, the retry of the apiserver's transient refusals, and the step
// hook tests use to inject a crash between any two writes.
package step

import (
	"context"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"

	"github.com/cadence-storage/longhorn-manager/internal/apiretry"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
)

// Clients are a migrator's dependencies.
type Clients struct {
	Namespace string
	Kube      kubernetes.Interface
	Longhorn  lhclientset.Interface
	Log       *logrus.Entry
	// Retry is how each request is retried while the apiserver refuses it
	// for now (see Call); apiretry.DefaultPolicy when zero.
	Retry apiretry.Policy
	// AfterStep, when set, is called after each write with its name; an
	// error stops the migration there, as a crash would.
	AfterStep func(name string) error
}

// Call makes one request of a migration, retrying it while the apiserver
// refuses it for now (a control plane that is starting or restarting:
// apiretry.Transient), with capped exponential backoff until c.Retry's
// deadline. what names the request and its object, as "create
// RecurringJob snapshot-3-…"; each retry is logged with it. Migrators are
// idempotent, so a request that may have been applied before a timeout
// can be made again.
func (c Clients) Call(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	var log logrus.FieldLogger
	if c.Log != nil {
		log = c.Log
	}
	return apiretry.Do(ctx, c.Retry, log, what, fn)
}

// Step reports that a write named name has completed.
func (c Clients) Step(name string) error {
	if c.AfterStep == nil {
		return nil
	}
	return c.AfterStep(name)
}
