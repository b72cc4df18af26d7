package instancemanager

import (
	"context"
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

// SocketPath is the socket of the instance manager whose folder is dir.
func SocketPath(dir string) string { return filepath.Join(dir, socketFile) }

// ErrRunning: another instance manager holds the folder.
var ErrRunning = errors.New("another instance manager runs on this folder")

// Serve runs an instance manager on dir until ctx ends: the engines'
// NBD frontends listen on frontendHost. When ctx ends, it stops every
// engine (syncing its replicas) and returns.
func Serve(ctx context.Context, dir, frontendHost string, log *logrus.Entry) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	lock, err := takeLock(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	sock := SocketPath(dir)
	if len(sock) >= maxSocketPath {
		return fmt.Errorf("instance manager socket %s: a socket's path must be shorter than %d bytes; use a shorter data folder", sock, maxSocketPath)
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
	g := grpc.NewServer(ServerOptions(log)...)
	server.Register(g)
	enginepb.RegisterEngineServer(g, engineServer)
	served := make(chan error, 1)
	go func() { served <- g.Serve(l) }()
	log.WithFields(logrus.Fields{"socket": sock, "frontendHost": frontendHost, "pid": os.Getpid()}).Info("Instance manager serving")
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	log.Info("Instance manager stopping: its engines stop")
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

// running says whether an instance manager holds dir's lock.
func running(dir string) (bool, error) {
	lock, err := takeLock(dir)
	if errors.Is(err, ErrRunning) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	lock.Close()
	return false, nil
}

// startTimeoutProcess bounds how long a new instance manager may take to
// answer on its socket.
const startTimeoutProcess = 30 * time.Second

// EnsureRunning starts an instance manager on dir, as a process of its
// own session that outlives the caller, unless one runs there; either
// way it returns once the socket answers. binary is the longhorn-manager
// executable to run (its path; the caller's own when empty).
func EnsureRunning(dir, binary, frontendHost string, log *logrus.Entry) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	up, err := running(dir)
	if err != nil {
		return err
	}
	if !up {
		if err := spawn(dir, binary, frontendHost, log); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(startTimeoutProcess)
	for {
		c, err := net.DialTimeout("unix", SocketPath(dir), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the instance manager on %s does not answer on its socket (see %s): %w", dir, filepath.Join(dir, logFile), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func spawn(dir, binary, frontendHost string, log *logrus.Entry) error {
	if binary == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		binary = self
	}
	out, err := os.OpenFile(filepath.Join(dir, logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(binary, "instance-manager", "--dir", dir, "--frontend-address", frontendHost)
	cmd.Stdout, cmd.Stderr = out, out
	// A session of its own: a signal to the manager's process group (a
	// Ctrl-C, a kill of the group) does not reach it, and it does not
	// die with the manager.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the instance manager: %w", err)
	}
	log.WithFields(logrus.Fields{"pid": cmd.Process.Pid, "dir": dir, "log": out.Name()}).Info("Started the instance manager")
	// Reaped if it ends while this manager runs; once this manager is
	// gone, init (or the pod's) does.
	go func() { _ = cmd.Wait() }()
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
