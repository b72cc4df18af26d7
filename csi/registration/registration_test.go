package registration

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/csi/internal/fakedriver"
)

const kubeletEndpoint = "/var/lib/kubelet/plugins/driver.longhorn.io/csi.sock"

// registrarFixture is a Registrar running against a fake driver, with
// its log lines kept.
type registrarFixture struct {
	r      *Registrar
	driver *fakedriver.Driver
	logs   *logtest.Hook
	stop   context.CancelFunc
	done   chan error
}

// startRegistrar runs a Registrar whose CSI socket is the fake driver's,
// not yet served unless the test starts it.
func startRegistrar(t *testing.T) *registrarFixture {
	t.Helper()
	return startRegistrarRetrying(t, 50*time.Millisecond)
}

func startRegistrarRetrying(t *testing.T, retryAfter time.Duration) *registrarFixture {
	t.Helper()
	dir := fakedriver.SocketDir(t)
	regDir := filepath.Join(dir, "plugins_registry")
	if err := os.Mkdir(regDir, 0o700); err != nil {
		t.Fatal(err)
	}
	logger, hook := logtest.NewNullLogger()
	f := &registrarFixture{driver: fakedriver.New(filepath.Join(dir, "csi.sock")), logs: hook, done: make(chan error, 1)}
	r, err := New(Options{
		CSIEndpoint: f.driver.Endpoint, KubeletEndpoint: kubeletEndpoint, Dir: regDir,
		RetryAfter: retryAfter, ProbeInterval: 20 * time.Millisecond, CheckInterval: 20 * time.Millisecond, Log: logrus.NewEntry(logger),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	ctx, cancel := context.WithCancel(context.Background())
	f.stop = cancel
	t.Cleanup(func() { cancel(); <-f.done })
	go func() { f.done <- r.Run(ctx) }()
	return f
}

// kubelet calls the registration socket as the kubelet's plugin manager
// does: a unix dial, GetInfo within a second, then the outcome.
type kubelet struct {
	t    *testing.T
	conn *grpc.ClientConn
	api  registerapi.RegistrationClient
}

func dialAsKubelet(t *testing.T, path string) *kubelet {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &kubelet{t: t, conn: conn, api: registerapi.NewRegistrationClient(conn)}
}

func (k *kubelet) getInfo() (*registerapi.PluginInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return k.api.GetInfo(ctx, &registerapi.InfoRequest{})
}

func (k *kubelet) notify(registered bool, reason string) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := k.api.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: registered, Error: reason}); err != nil {
		k.t.Fatalf("NotifyRegistrationStatus(%v): %v", registered, err)
	}
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// isSocket says whether a socket is at path.
func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// waitOffered waits for the registration socket to answer GetInfo and
// returns the kubelet's client.
func (f *registrarFixture) waitOffered(t *testing.T) *kubelet {
	t.Helper()
	var k *kubelet
	eventually(t, "the registration socket answers GetInfo", func() bool {
		if !isSocket(f.r.SocketPath()) {
			return false
		}
		k = dialAsKubelet(t, f.r.SocketPath())
		_, err := k.getInfo()
		return err == nil
	})
	return k
}

func (f *registrarFixture) logged(level logrus.Level, message string) *logrus.Entry {
	for _, e := range f.logs.AllEntries() {
		if e.Level == level && strings.Contains(e.Message, message) {
			return e
		}
	}
	return nil
}

func (f *registrarFixture) count(level logrus.Level, message string) int {
	n := 0
	for _, e := range f.logs.AllEntries() {
		if e.Level == level && strings.Contains(e.Message, message) {
			n++
		}
	}
	return n
}

func TestRegistrationIsNotOfferedBeforeTheCSISocketAnswers(t *testing.T) {
	f := startRegistrar(t)
	// Ten probe intervals with no CSI socket: no registration socket.
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(f.r.SocketPath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the registration socket exists before the CSI socket answers (stat: %v)", err)
	}
	if f.logged(logrus.InfoLevel, "Waiting for the CSI socket") == nil {
		t.Error("the wait for the CSI socket is not logged")
	}
	f.driver.Start(t)
	f.waitOffered(t)
}

func TestARegistrationIsOfferedWhenTheDriverAnswersNotReady(t *testing.T) {
	f := startRegistrar(t)
	f.driver.SetReady(false)
	f.driver.Start(t)
	f.waitOffered(t)
	if f.logged(logrus.WarnLevel, "not ready") == nil {
		t.Error("a driver that is not ready is registered without a warning")
	}
}

func TestGetInfoAnswersWhatTheKubeletValidates(t *testing.T) {
	f := startRegistrar(t)
	f.driver.Start(t)
	k := f.waitOffered(t)
	info, err := k.getInfo()
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.CSIPlugin || info.Name != csi.DriverName || info.Endpoint != kubeletEndpoint {
		t.Errorf("GetInfo answers type %q, name %q, endpoint %q: want %s, %s, %s", info.Type, info.Name, info.Endpoint, registerapi.CSIPlugin, csi.DriverName, kubeletEndpoint)
	}
	// The kubelet takes the highest version and refuses all but 1.x.
	if !slices.Equal(info.SupportedVersions, []string{"1.0.0"}) {
		t.Errorf("GetInfo answers versions %v, want [1.0.0]", info.SupportedVersions)
	}
	if want := filepath.Join(filepath.Dir(f.r.SocketPath()), "driver.longhorn.io-reg.sock"); f.r.SocketPath() != want {
		t.Errorf("the registration socket is %s, want %s", f.r.SocketPath(), want)
	}
	if fi, err := os.Stat(f.r.SocketPath()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the registration socket's mode: %v (%v), want 0600, for the kubelet (root) alone", fi.Mode(), err)
	}
}

func TestAnAcceptedRegistrationStaysOffered(t *testing.T) {
	f := startRegistrar(t)
	f.driver.Start(t)
	k := f.waitOffered(t)
	k.notify(true, "")
	eventually(t, "the registration is logged", func() bool { return f.logged(logrus.InfoLevel, "The kubelet registered the CSI driver") != nil })
	time.Sleep(150 * time.Millisecond) // three retry waits
	if n := f.count(logrus.InfoLevel, "Offering the kubelet the registration"); n != 1 {
		t.Fatalf("the registration was offered %d times after the kubelet accepted it, want once", n)
	}
	if _, err := k.getInfo(); err != nil {
		t.Fatalf("the accepted registration socket no longer answers: %v", err)
	}
}

func TestARefusedRegistrationIsLoggedWithdrawnAndOfferedAgain(t *testing.T) {
	f := startRegistrarRetrying(t, 300*time.Millisecond)
	f.driver.Start(t)
	k := f.waitOffered(t)
	k.notify(false, "RegisterPlugin error -- plugin registration failed with err: no CSINode")
	eventually(t, "the refusal is logged", func() bool {
		e := f.logged(logrus.ErrorLevel, "The kubelet refused to register the CSI driver")
		return e != nil && strings.Contains(e.Data["reason"].(string), "no CSINode")
	})
	// Withdrawn: the kubelet deregisters the driver...
	eventually(t, "the registration socket is withdrawn", func() bool { return !isSocket(f.r.SocketPath()) })
	// ...and a new socket at the same path is registered anew.
	k2 := f.waitOffered(t)
	if n := f.count(logrus.InfoLevel, "Offering the kubelet the registration"); n != 2 {
		t.Errorf("the registration was offered %d times, want twice", n)
	}
	k2.notify(true, "")
	eventually(t, "the second registration is logged", func() bool { return f.logged(logrus.InfoLevel, "The kubelet registered the CSI driver") != nil })
}

func TestAStaleSocketIsReplaced(t *testing.T) {
	dir := fakedriver.SocketDir(t)
	driver := fakedriver.New(filepath.Join(dir, "csi.sock"))
	driver.Start(t)
	r, err := New(Options{CSIEndpoint: driver.Endpoint, KubeletEndpoint: kubeletEndpoint, Dir: dir, ProbeInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// A socket left behind by a process that died: nothing listens.
	l, err := net.Listen("unix", r.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := dialAsKubelet(t, r.SocketPath()).getInfo(); err == nil {
		t.Fatal("the stale socket answers")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	eventually(t, "the stale socket is replaced by one that answers", func() bool {
		_, err := dialAsKubelet(t, r.SocketPath()).getInfo()
		return err == nil
	})
}

func TestTheSocketIsRemovedAtStop(t *testing.T) {
	f := startRegistrar(t)
	f.driver.Start(t)
	f.waitOffered(t)
	f.stop()
	select {
	case err := <-f.done:
		f.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if _, err := os.Stat(f.r.SocketPath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the registration socket outlives the registrar (stat: %v): the kubelet would keep the driver registered", err)
	}
}

func TestRunFailsWithoutTheRegistrationDirectory(t *testing.T) {
	dir := fakedriver.SocketDir(t)
	driver := fakedriver.New(filepath.Join(dir, "csi.sock"))
	driver.Start(t)
	r, err := New(Options{CSIEndpoint: driver.Endpoint, KubeletEndpoint: kubeletEndpoint, Dir: filepath.Join(dir, "missing")})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "plugins_registry mounted") {
		t.Fatalf("Run without its directory: %v, want an error naming the mount", err)
	}
}

func TestNewRefusesARegistrationPathTheKubeletCannotDial(t *testing.T) {
	for _, path := range []string{"", "unix:///var/lib/kubelet/plugins/driver.longhorn.io/csi.sock", "plugins/driver.longhorn.io/csi.sock"} {
		if _, err := New(Options{CSIEndpoint: "unix:///csi/csi.sock", KubeletEndpoint: path, Dir: "/registration"}); err == nil {
			t.Errorf("New takes the kubelet registration path %q", path)
		}
	}
}

func TestASocketRemovedBySomeoneElseIsOfferedAgain(t *testing.T) {
	f := startRegistrar(t)
	f.driver.Start(t)
	f.waitOffered(t)
	if err := os.Remove(f.r.SocketPath()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the registration is offered again", func() bool {
		return f.count(logrus.InfoLevel, "Offering the kubelet the registration") == 2
	})
	f.waitOffered(t)
	if f.logged(logrus.WarnLevel, "removed by someone else") == nil {
		t.Error("the removal is not logged")
	}
}

func TestASocketMadeAnewByAnotherProcessIsLeftToIt(t *testing.T) {
	f := startRegistrar(t)
	f.driver.Start(t)
	f.waitOffered(t)
	// Another instance replaces the socket with its own.
	if err := os.Remove(f.r.SocketPath()); err != nil {
		t.Fatal(err)
	}
	other, err := net.Listen("unix", f.r.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	eventually(t, "the replacement is logged", func() bool { return f.logged(logrus.ErrorLevel, "made anew by another process") != nil })
	time.Sleep(100 * time.Millisecond) // five checks
	if n := f.count(logrus.InfoLevel, "Offering the kubelet the registration"); n != 1 {
		t.Errorf("the registration was offered %d times: the two processes would take turns", n)
	}
	f.stop()
	if err := <-f.done; err != nil {
		t.Fatal(err)
	}
	f.done <- nil
	if !isSocket(f.r.SocketPath()) {
		t.Fatal("the registrar removed the other process's socket at stop")
	}
}
