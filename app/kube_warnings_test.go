package app

import (
	"fmt"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

func TestEachDistinctAPIWarningIsLoggedOnce(t *testing.T) {
	logger, hook := test.NewNullLogger()
	w := newOnceWarnings(logrus.NewEntry(logger))
	finalizer := `metadata.finalizers: "longhorn.io": prefer a domain-qualified finalizer name`
	for range 1000 {
		w.HandleWarningHeader(299, "", finalizer)
	}
	w.HandleWarningHeader(299, "", "spec.foo: unknown field")
	w.HandleWarningHeader(199, "", "not an apiserver warning")
	if got := len(hook.AllEntries()); got != 2 {
		t.Fatalf("%d lines logged, want 2: %v", got, hook.AllEntries())
	}
	if got := hook.AllEntries()[0].Data["warning"]; got != finalizer {
		t.Fatalf("logged %v, want the warning's text", got)
	}

	// Past the bound nothing more is remembered: a new warning is logged
	// each time, an old one still once.
	hook.Reset()
	for i := range maxDistinctWarnings {
		w.HandleWarningHeader(299, "", fmt.Sprintf("warning %d", i))
	}
	w.HandleWarningHeader(299, "", "late")
	w.HandleWarningHeader(299, "", "late")
	w.HandleWarningHeader(299, "", finalizer)
	if got, want := len(hook.AllEntries()), maxDistinctWarnings+2; got != want {
		t.Fatalf("%d lines logged, want %d", got, want)
	}
	if len(w.said) != maxDistinctWarnings {
		t.Fatalf("%d warnings remembered, want at most %d", len(w.said), maxDistinctWarnings)
	}
}
