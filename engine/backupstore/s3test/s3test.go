// Package s3test runs a real S3 server for tests: bin/versitygw (built by
// scripts/build-s3server.sh from the Go module proxy) with its posix
// backend, on 127.0.0.1 and a free port, with a bucket ready.
//
//	srv := s3test.Start(t)
//	store, err := backupstore.OpenWithCredential(srv.Target(""), srv.Credential())
//
// The server is killed when the test ends. Stop and Start kill it and
// bring it back on the same port and data, for fault tests.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

// Region is the region the server answers for.
const Region = "us-east-1"

// startTimeout bounds how long the server may take to answer.
const startTimeout = 30 * time.Second

// Server is a running versitygw.
type Server struct {
	// Endpoint is the server's URL, http://<host>:<port>.
	Endpoint string
	// AccessKey and SecretKey are the root user's.
	AccessKey, SecretKey string
	// Bucket was created at start.
	Bucket string
	// DataDir holds the buckets, a directory each.
	DataDir string

	bin  string
	addr string
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan error
}

// Start runs bin/versitygw on 127.0.0.1 and creates a bucket. A missing
// binary fails the test, saying how to build it.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartOn(t, "127.0.0.1")
}

// StartOn is Start on another of this machine's addresses: the real
// node's bridge, say, which its pods reach and 127.0.0.1 they do not.
func StartOn(t testing.TB, host string) *Server {
	t.Helper()
	testcluster.SkipIfShort(t, "a real S3 server (bin/versitygw)")
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &Server{
		AccessKey: "test-access-" + randomHex(4), SecretKey: randomHex(16),
		Bucket: "backups", DataDir: filepath.Join(dir, "data"), bin: bin, log: filepath.Join(dir, "versitygw.log"),
	}
	if err := os.MkdirAll(s.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.kill() })
	// A free port can be taken between its probe and the server's bind:
	// try another then.
	for attempt := 0; ; attempt++ {
		s.addr, err = freeAddress(host)
		if err != nil {
			t.Fatal(err)
		}
		s.Endpoint = "http://" + s.addr
		err = s.start()
		if err == nil || attempt == 2 || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MakeBucket(s.Bucket); err != nil {
		t.Fatal(err)
	}
	return s
}

// Binary returns the path of bin/versitygw, or an error saying how to
// build it.
func Binary() (string, error) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "bin", "versitygw")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%s is missing: run `bash scripts/build-s3server.sh` (or `make test`) to build the test S3 server", bin)
	}
	return bin, nil
}

// Target is the backup target of path in the bucket:
// s3://<bucket>@us-east-1/<path>.
func (s *Server) Target(path string) string {
	return "s3://" + s.Bucket + "@" + Region + "/" + strings.TrimPrefix(path, "/")
}

// Credential is the data of a backup-target-credential-secret for the
// server.
func (s *Server) Credential() map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID":     s.AccessKey,
		"AWS_SECRET_ACCESS_KEY": s.SecretKey,
		"AWS_ENDPOINTS":         s.Endpoint,
	}
}

// Client is an S3 client of the server, as its root user.
func (s *Server) Client() (*minio.Client, error) {
	return minio.New(s.addr, &minio.Options{
		Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: Region,
		BucketLookup: minio.BucketLookupPath, MaxRetries: 1,
	})
}

// MakeBucket creates a bucket.
func (s *Server) MakeBucket(name string) error {
	c, err := s.Client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: Region}); err != nil {
		return fmt.Errorf("create bucket %s on %s: %w", name, s.Endpoint, err)
	}
	return nil
}

// Stop kills the server (SIGKILL, as a crash) and waits for it to exit.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if !s.kill() {
		t.Fatal("s3test: Stop of a server that is not running")
	}
}

// Start brings a stopped server back on the same port and data.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("s3test: the server is already running")
	}
	logFile, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// --quiet: no line per request (a benchmark makes thousands).
	cmd := exec.Command(s.bin, "--port", s.addr, "--region", Region, "--quiet", "posix", s.DataDir)
	// Credentials by environment, out of the process list.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	s.cmd, s.done = cmd, done

	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case err := <-done:
			s.cmd = nil
			return fmt.Errorf("versitygw exited before it answered on %s: %v; its log:\n%s", s.addr, err, tail(s.log))
		default:
		}
		if s.answers() {
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			s.cmd = nil
			return fmt.Errorf("versitygw did not answer on %s within %s; its log:\n%s", s.addr, startTimeout, tail(s.log))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// answers reports whether the server serves an authenticated request.
func (s *Server) answers() bool {
	c, err := s.Client()
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = c.ListBuckets(ctx)
	return err == nil
}

// kill ends the server by its PID and reports whether it was running.
func (s *Server) kill() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
	return true
}

func freeAddress(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func tail(file string) string {
	data, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return strings.Join(lines, "\n")
}

// CPUTime is the processor time (user and system) the running server has
// used, read from /proc; 0 where that cannot be read.
func (s *Server) CPUTime() time.Duration {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return 0
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses:
	// utime and stime are the 12th and 13th, in clock ticks (100 a
	// second on Linux).
	i := strings.LastIndexByte(string(stat), ')')
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return 0
	}
	var utime, stime int64
	fmt.Sscan(fields[11], &utime)
	fmt.Sscan(fields[12], &stime)
	return time.Duration(utime+stime) * (time.Second / 100)
}

// Pause stops the server (SIGSTOP) without closing its port: requests
// hang, as on a target that stalls. Resume lets it go on.
func (s *Server) Pause(t testing.TB) { s.signal(t, syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume(t testing.TB) { s.signal(t, syscall.SIGCONT) }

func (s *Server) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		t.Fatalf("s3test: %v to a server that is not running", sig)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("s3test: %v: %v", sig, err)
	}
}
