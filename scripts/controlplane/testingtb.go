package main

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// processTB adapts the testing.TB-shaped interface that the apiserver's
// test server wants to a long-running process: logs go to a file, cleanups
// run at shutdown, and a fatal error aborts start-up.
type processTB struct {
	mu       sync.Mutex
	out      io.Writer
	cleanups []func()
	failed   bool
	tempDirs []string
}

type fatalError struct{ msg string }

func newProcessTB(out io.Writer) *processTB { return &processTB{out: out} }

func (t *processTB) runCleanups() {
	t.mu.Lock()
	cleanups := t.cleanups
	t.cleanups = nil
	dirs := t.tempDirs
	t.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	for _, d := range dirs {
		os.RemoveAll(d)
	}
}

func (t *processTB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}
func (t *processTB) Error(args ...any) { t.Log(args...); t.Fail() }
func (t *processTB) Errorf(format string, args ...any) {
	t.Logf(format, args...)
	t.Fail()
}
func (t *processTB) Fail() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
}
func (t *processTB) FailNow() { t.Fail(); panic(fatalError{"FailNow"}) }
func (t *processTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}
func (t *processTB) Fatal(args ...any) { t.Log(args...); t.FailNow() }
func (t *processTB) Fatalf(format string, args ...any) {
	t.Logf(format, args...)
	t.Fail()
	panic(fatalError{fmt.Sprintf(format, args...)})
}
func (t *processTB) Helper()                          {}
func (t *processTB) Log(args ...any)                  { fmt.Fprintln(t.out, args...) }
func (t *processTB) Logf(format string, args ...any)  { fmt.Fprintf(t.out, format+"\n", args...) }
func (t *processTB) Name() string                     { return "controlplane" }
func (t *processTB) Setenv(key, value string)         { os.Setenv(key, value) }
func (t *processTB) Skip(args ...any)                 { t.Log(args...) }
func (t *processTB) SkipNow()                         {}
func (t *processTB) Skipf(format string, args ...any) { t.Logf(format, args...) }
func (t *processTB) Skipped() bool                    { return false }
func (t *processTB) TempDir() string {
	d, err := os.MkdirTemp("", "controlplane")
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	t.mu.Lock()
	t.tempDirs = append(t.tempDirs, d)
	t.mu.Unlock()
	return d
}

// Attr records a test attribute: here, a line of the log.
func (t *processTB) Attr(key, value string) { fmt.Fprintf(t.out, "attr %s=%s\n", key, value) }

// Chdir changes the process's working directory until the cleanups run.
func (t *processTB) Chdir(dir string) {
	prev, err := os.Getwd()
	if err != nil {
		t.Fatalf("chdir %s: %v", dir, err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatalf("chdir %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = os.Chdir(prev) })
}
