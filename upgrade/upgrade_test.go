package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"

	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/upgrade/step"
	"github.com/cadence-storage/longhorn-manager/upgrade/upgradetest"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

var errCrash = errors.New("injected crash")

func clients(t *testing.T) (kubernetes.Interface, lhclientset.Interface, string) {
	t.Helper()
	cluster := testcluster.Get(t)
	lh, err := lhclientset.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cluster.KubeClient(t), lh, cluster.NewNamespace(t)
}

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetLevel(logrus.WarnLevel)
	return logrus.NewEntry(l)
}

func TestMigrationProducesTheNewStateAndIsIdempotent(t *testing.T) {
	kube, lh, ns := clients(t)
	f := upgradetest.Create(t, kube, lh, ns)
	c := step.Clients{Namespace: ns, Kube: kube, Longhorn: lh, Log: quietLog()}
	var steps []string
	c.AfterStep = func(s string) error { steps = append(steps, s); return nil }
	if err := Run(context.Background(), c, "node-1"); err != nil {
		t.Fatal(err)
	}
	f.AssertMigrated(t)
	t.Logf("the migration took %d steps: %v", len(steps), steps)

	before := f.Versions(t)
	steps = nil
	if err := Run(context.Background(), c, "node-1"); err != nil {
		t.Fatal(err)
	}
	if len(steps) != 0 {
		t.Errorf("a second run wrote: %v", steps)
	}
	if after := f.Versions(t); !reflect.DeepEqual(before, after) {
		t.Errorf("a second run changed objects:\nbefore %v\nafter  %v", before, after)
	}
	// A migration that already ran is not repeated even when forced.
	if err := migrate(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// A crash after any write, then a restart, ends in the same state.
func TestMigrationSurvivesACrashAfterEveryStep(t *testing.T) {
	// Count the steps of a clean run first.
	kube, lh, ns := clients(t)
	upgradetest.Create(t, kube, lh, ns)
	total := 0
	c := step.Clients{Namespace: ns, Kube: kube, Longhorn: lh, Log: quietLog(), AfterStep: func(string) error { total++; return nil }}
	if err := Run(context.Background(), c, "node-1"); err != nil {
		t.Fatal(err)
	}
	for crashAt := 1; crashAt <= total; crashAt++ {
		t.Run(fmt.Sprintf("crash after step %d of %d", crashAt, total), func(t *testing.T) {
			kube, lh, ns := clients(t)
			f := upgradetest.Create(t, kube, lh, ns)
			n := 0
			crashed := ""
			c := step.Clients{Namespace: ns, Kube: kube, Longhorn: lh, Log: quietLog(), AfterStep: func(s string) error {
				n++
				if n == crashAt {
					crashed = s
					return errCrash
				}
				return nil
			}}
			if err := Run(context.Background(), c, "node-1"); !errors.Is(err, errCrash) {
				t.Fatalf("want the injected crash, got %v", err)
			}
			c.AfterStep = nil
			if err := Run(context.Background(), c, "node-1"); err != nil {
				t.Fatalf("restart after a crash at %q: %v", crashed, err)
			}
			f.AssertMigrated(t)
		})
	}
}

func TestTwoManagersMigratingAtOnce(t *testing.T) {
	kube, lh, ns := clients(t)
	f := upgradetest.Create(t, kube, lh, ns)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := step.Clients{Namespace: ns, Kube: kube, Longhorn: lh, Log: quietLog()}
			errs[i] = Run(context.Background(), c, fmt.Sprintf("node-%d", i))
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("manager %d: %v", i, err)
		}
	}
	f.AssertMigrated(t)
}
