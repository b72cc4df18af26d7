package instancemanager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/engine/device"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	enginepb "github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
)

// The files of an instance manager in its folder: the socket it serves
// on (only root may open it: whoever reaches it controls the node's
// volumes), its pid, its log when the manager started it, and the lock it
// holds for as long as it runs, so that there is never more than one.
const (
	socketFile = "im.sock"
	pidFile    = "instance-manager.pid"
	logFile    = "instance-manager.log"
	lockFile   = "instance-manager.lock"
)

// maxSocketPath is the length a Unix socket's path must stay under
// (sun_path's 108 bytes, with its terminating zero).
const maxSocketPath = 108

// SocketPath is the socket of the instance manager whose folder is dir:
// in the folder, unless that path is too long for a socket; then in this
// user's private folder of the temporary directory (as tmux's and
// ssh-agent's are), named after dir.
func SocketPath(dir string) string {
	if p := filepath.Join(dir, socketFile); len(p) < maxSocketPath {
		return p
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(privateSocketDir(), hex.EncodeToString(sum[:8])+".sock")
}

func privateSocketDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("longhorn-im-%d", os.Getuid()))
}

// makeSocketDir makes the folder of sock if it is the private one, and
// checks it is this user's alone: in a temporary directory anyone may
// write, a folder someone else made (or a link) could hand them the
// socket.
func makeSocketDir(sock string) error {
	dir := filepath.Dir(sock)
	if dir != privateSocketDir() {
		return nil
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm() != 0o700 {
		return fmt.Errorf("instance manager socket folder %s: must be a folder of this user's alone (mode 0700), and is not", dir)
	}
	return nil
}

// ErrRunning: another instance manager holds the folder.
var ErrRunning = errors.New("another instance manager runs on this folder")

// Config is what an instance manager runs with.
type Config struct {
	// Dir is its folder: socket, pid file, lock, log and devices.
	Dir string
	// FrontendHost is the host the engines' NBD frontends listen on.
	FrontendHost string
	// ReplicaAddress (host:port) is where it serves replicas over the
	// replica protocol, to engines elsewhere; "" serves none.
	ReplicaAddress string
	// TLSDir is the folder of the mutual-TLS leaf (mtls.LoadDir) the
	// replica protocol is served and reached with, both ways; "" runs it
	// on plain TCP (tests on loopback only).
	TLSDir string
}

// args are the instance-manager command's flags for c.
func (c Config) args() []string {
	args := []string{"instance-manager", "--dir", c.Dir, "--frontend-address", c.FrontendHost}
	if c.ReplicaAddress != "" {
		args = append(args, "--replica-address", c.ReplicaAddress)
	}
	if c.TLSDir != "" {
		args = append(args, "--tls-dir", c.TLSDir)
	}
	return args
}

// Serve runs an instance manager on cfg.Dir until ctx ends: the engines'
// NBD frontends listen on cfg.FrontendHost, and the devices it makes of
// them for the CSI Node service are kept in its folder's devices. With a
// replica address it serves replicas to engines elsewhere (ServeReplica).
// When ctx ends, it flushes the devices, stops every engine (syncing its
// replicas) and every served replica, and returns; the devices stay, for
// the next one to adopt or undo.
func Serve(ctx context.Context, cfg Config, log *logrus.Entry) error {
	dir, frontendHost := cfg.Dir, cfg.FrontendHost
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	lock, err := takeLock(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	// The devices a dead instance manager left: those that stand are
	// adopted, the rest undone (their engines died with it).
	devices, err := device.NewManager(filepath.Join(dir, devicesDir), log.WithField("component", "device"))
	if err != nil {
		return err
	}
	devices.Recover()
	sock := SocketPath(dir)
	if err := makeSocketDir(sock); err != nil {
		return err
	}
	// The lock is ours: a socket left there is a dead instance manager's.
	if err := os.Remove(sock); err != nil && !os.IsNotExist(err) {
		return err
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("instance manager socket %s: %w", sock, err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		_ = l.Close()
		return err
	}
	if err := writePid(dir); err != nil {
		_ = l.Close()
		return err
	}
	defer os.Remove(filepath.Join(dir, pidFile))

	// No backup policy here: the manager's Forwarder checks each call
	// against the cluster's backup targets before passing it on.
	engineServer := rpc.NewServer()
	engines := instance.NewEngines(engineServer, frontendHost, clock.RealClock{}, log.WithField("component", "engine"), func(string) {}, nil)
	server := NewServer(engines, log)
	stopReplicas, err := serveReplicas(server, cfg, log)
	if err != nil {
		_ = l.Close()
		return err
	}
	defer stopReplicas()
	g := grpc.NewServer(ServerOptions(log)...)
	server.Register(g)
	NewDeviceServer(devices).Register(g)
	enginepb.RegisterEngineServer(g, engineServer)
	served := make(chan error, 1)
	go func() { served <- g.Serve(l) }()
	log.WithFields(logrus.Fields{"socket": sock, "frontendHost": frontendHost, "pid": os.Getpid()}).Info("Instance manager serving")
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	log.Info("Instance manager stopping: its engines stop")
	// What the kernel holds for the volumes' devices reaches the engines
	// before they stop.
	devices.Sync()
	engines.StopAll()
	// The watches send the engines' stops before they end; a call still
	// running gets a moment to answer.
	server.closeWatches()
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		g.Stop()
	}
	_ = os.Remove(sock)
	return err
}

// takeLock holds dir's lock for as long as the returned file is open.
func takeLock(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrRunning, dir)
		}
		return nil, err
	}
	return f, nil
}

func writePid(dir string) error {
	tmp := filepath.Join(dir, pidFile+".tmp")
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, pidFile))
}

// answers says whether an instance manager answers on sock. (Its lock is
// not probed: a probe that takes it for an instant could make one that is
// starting then give up.)
func answers(sock string) bool {
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// startTimeoutProcess bounds how long a new instance manager may take to
// answer on its socket.
const startTimeoutProcess = 30 * time.Second

// EnsureRunning starts an instance manager on dir, as a process of its
// own session that outlives the caller, unless one runs there; either
// way it returns once the socket answers. binary is the longhorn-manager
// executable to run (its path; the caller's own when empty). started
// says whether it started one.
func EnsureRunning(cfg Config, binary string, log *logrus.Entry) (started bool, err error) {
	dir := cfg.Dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	sock := SocketPath(dir)
	if answers(sock) {
		return false, nil
	}
	// One that holds the lock but does not answer (hung, or still
	// starting) makes the new one give up, saying so in the log.
	exited, err := spawn(cfg, binary, log)
	if err != nil {
		return false, err
	}
	deadline := time.Now().Add(startTimeoutProcess)
	for !answers(sock) {
		select {
		case err := <-exited:
			return true, fmt.Errorf("the instance manager on %s exited as it started (%v); see %s", dir, err, filepath.Join(dir, logFile))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return true, fmt.Errorf("the instance manager on %s does not answer on its socket %s (see %s)", dir, sock, filepath.Join(dir, logFile))
		}
	}
	return true, nil
}

// WaitRunning waits until the instance manager of dir, which another
// starts, answers on its socket, for at most timeout.
func WaitRunning(dir string, timeout time.Duration) error {
	sock := SocketPath(dir)
	deadline := time.Now().Add(timeout)
	for !answers(sock) {
		if time.Now().After(deadline) {
			return fmt.Errorf("no instance manager answers on %s after %s: it is started by another (--instance-manager-runner=external), such as the instance-manager container of this pod", sock, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// spawn starts the instance manager; exited receives its end, should it
// end while this process runs.
func spawn(cfg Config, binary string, log *logrus.Entry) (exited <-chan error, err error) {
	dir := cfg.Dir
	if binary == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		binary = self
	}
	out, err := os.OpenFile(filepath.Join(dir, logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(binary, cfg.args()...)
	cmd.Stdout, cmd.Stderr = out, out
	// A session of its own: a signal to the manager's process group (a
	// Ctrl-C, a kill of the group) does not reach it, and it does not
	// die with the manager.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the instance manager: %w", err)
	}
	log.WithFields(logrus.Fields{"pid": cmd.Process.Pid, "dir": dir, "log": out.Name()}).Info("Started the instance manager")
	// Reaped if it ends while this manager runs; once this manager is
	// gone, init (or the pod's) does.
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return done, nil
}

// FolderName is the name of the folder, under the node's instance manager
// root, of the instance manager named name: the first 8 hex digits of its
// hash (instance-manager-<hash>), short so that its socket's path stays
// within a socket's limit under a long data folder.
func FolderName(name string) string {
	const prefix = "instance-manager-"
	if len(name) >= len(prefix)+8 && name[:len(prefix)] == prefix {
		return name[len(prefix) : len(prefix)+8]
	}
	return name
}
