package runner

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// ServerRunner runs the backing image servers (data sources and per-disk
// managers) somewhere the controllers can reach them. On the local control
// plane they are child processes of the daemon's own binary (ProcessRunner);
// in a cluster they are pods (PodRunner). A server is named by a key the controller chooses.
type ServerRunner interface {
	// Start runs the server with args (a subcommand and its flags, without
	// --listen) unless one runs under key already. It returns once the
	// server answers on its address, or an error wrapping ErrServerPending
	// when the server is on its way (a pod not yet running) and the caller
	// should look again soon. opts say what runs it and what it serves;
	// runners that need neither ignore them.
	Start(key string, args []string, opts ...ServerOption) error
	// Stop stops the server under key and waits for it; no-op when none.
	Stop(key string)
	// Address is the server's host:port. The error says why there is none:
	// never started, on its way (ErrServerPending), or exited (with its
	// last log lines).
	Address(key string) (string, error)
}

// ErrServerNotStarted is Address's error for a key never started or stopped.
var ErrServerNotStarted = errors.New("server not started")

// ErrServerPending is wrapped by Start's and Address's errors for a server
// that was started and does not answer yet for a reason outside it (its
// pod waits for a node, an image, a kubelet): not a failure of the server.
var ErrServerPending = errors.New("server pending")

// ServerOptions say what runs a server and what it serves.
type ServerOptions struct {
	// Image is the image the server runs from; the runner's default when
	// empty.
	Image string
	// Owner is the object the server serves: a pod is owned by it, so it
	// goes with it.
	Owner *metav1.OwnerReference
}

// ServerOption sets one of the ServerOptions.
type ServerOption func(*ServerOptions)

// WithImage runs the server from image.
func WithImage(image string) ServerOption { return func(o *ServerOptions) { o.Image = image } }

// WithOwner makes obj, a Longhorn object of kind, the server's owner. The
// reference does not block the owner's deletion (that would need the
// right to update the owner's finalizers): the controller stops the
// server itself when the owner goes.
func WithOwner(obj metav1.Object, kind string) ServerOption {
	return func(o *ServerOptions) {
		o.Owner = &metav1.OwnerReference{APIVersion: longhorn.SchemeGroupVersion.String(), Kind: kind,
			Name: obj.GetName(), UID: obj.GetUID(), Controller: ptr.To(true)}
	}
}

func serverOptions(opts []ServerOption) ServerOptions {
	var o ServerOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// ProcessRunner is the ServerRunner of the local control plane: each
// server is a child process listening on a free 127.0.0.1 port.
type ProcessRunner struct {
	// Command is the binary and any leading arguments, e.g. the daemon's
	// own executable.
	Command []string
	// Env is added to the children's environment.
	Env []string
	Log *logrus.Entry
	// TLSDir is the folder of the backing image managers' internal TLS
	// identity, DataSourceTLSDir the data sources' (of their narrow role),
	// passed as --tls-dir (the daemon's mtls.Keeper writes them); a data
	// source is given TLSDir when DataSourceTLSDir is empty.
	TLSDir           string
	DataSourceTLSDir string

	mu    sync.Mutex
	procs map[string]*serverProcess
}

type serverProcess struct {
	cmd     *exec.Cmd
	address string
	done    chan struct{}
	mu      sync.Mutex
	lastLog []string
	exitErr error
}

const (
	serverStartTimeout = 20 * time.Second
	serverStopTimeout  = 5 * time.Second
	serverLogLines     = 10
)

// addressLogPattern finds the address a server logs, in text or JSON logs.
var addressLogPattern = regexp.MustCompile(`address"?[=:]"?(127\.0\.0\.1:[0-9]+)`)

// NewProcessRunner runs servers as `command... <args> --listen 127.0.0.1:0
// --tls-dir <TLSDir>`.
func NewProcessRunner(log *logrus.Entry, command []string, env []string) *ProcessRunner {
	return &ProcessRunner{Command: command, Env: env, Log: log, procs: map[string]*serverProcess{}}
}

// Start implements ServerRunner. A child process has no image or owner:
// opts are ignored.
func (r *ProcessRunner) Start(key string, args []string, _ ...ServerOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.procs[key]; p != nil {
		select {
		case <-p.done:
			// Exited: start a new one; the old state is replaced.
		default:
			return nil
		}
	}
	if len(r.Command) == 0 {
		return errors.New("no command to run backing image servers with")
	}
	full := append(append(append([]string{}, r.Command[1:]...), args...), "--listen", "127.0.0.1:0")
	if dir := r.TLSDir; dir != "" {
		if args[0] == dataSourceSubcommand && r.DataSourceTLSDir != "" {
			dir = r.DataSourceTLSDir
		}
		full = append(full, "--tls-dir", dir)
	}
	cmd := exec.Command(r.Command[0], full...)
	cmd.Env = append(cmd.Environ(), r.Env...)
	// The child dies with the daemon even when the daemon is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", key, err)
	}
	p := &serverProcess{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		p.readLog(bufio.NewScanner(stderr), found)
		// A line too long for the scanner ends it: keep draining, so the
		// server never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		// Wait closes the pipe: read the log to its end first, so the
		// last lines before an exit are kept.
		<-logDone
		err := cmd.Wait()
		p.mu.Lock()
		if err == nil {
			err = errors.New("exited")
		}
		p.exitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	select {
	case addr := <-found:
		p.address = addr
	case <-p.done:
		r.procs[key] = p
		return fmt.Errorf("server %s exited before it listened: %s", key, p.exitReason())
	case <-time.After(serverStartTimeout):
		p.stop()
		return fmt.Errorf("server %s logged no address within %s", key, serverStartTimeout)
	}
	r.procs[key] = p
	r.Log.WithFields(logrus.Fields{"server": key, "address": p.address, "pid": cmd.Process.Pid}).Info("Started backing image server")
	return nil
}

func (p *serverProcess) readLog(sc *bufio.Scanner, found chan<- string) {
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.lastLog = append(p.lastLog, line)
		if len(p.lastLog) > serverLogLines {
			p.lastLog = p.lastLog[1:]
		}
		p.mu.Unlock()
		if m := addressLogPattern.FindStringSubmatch(line); m != nil {
			select {
			case found <- m[1]:
			default:
			}
		}
	}
}

func (p *serverProcess) exitReason() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("%v; last log lines: %s", p.exitErr, strings.Join(p.lastLog, " | "))
}

// stop sends SIGTERM, and SIGKILL when the server does not exit in time.
func (p *serverProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(serverStopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Stop implements ServerRunner.
func (r *ProcessRunner) Stop(key string) {
	r.mu.Lock()
	p := r.procs[key]
	delete(r.procs, key)
	r.mu.Unlock()
	if p == nil {
		return
	}
	p.stop()
	r.Log.WithField("server", key).Info("Stopped backing image server")
}

// Address implements ServerRunner.
func (r *ProcessRunner) Address(key string) (string, error) {
	r.mu.Lock()
	p := r.procs[key]
	r.mu.Unlock()
	if p == nil {
		return "", ErrServerNotStarted
	}
	select {
	case <-p.done:
		return "", fmt.Errorf("server %s: %s", key, p.exitReason())
	default:
		return p.address, nil
	}
}

// StopAll stops every server; the daemon calls it when it stops.
func (r *ProcessRunner) StopAll() {
	r.mu.Lock()
	keys := make([]string, 0, len(r.procs))
	for k := range r.procs {
		keys = append(keys, k)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		go func() { defer wg.Done(); r.Stop(k) }()
	}
	wg.Wait()
}
