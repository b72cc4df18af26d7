package replica

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestTheTermFencesOlderEnginesAndSurvivesReopening(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	r, err := Create(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AcceptTerm(1, "engine-a"); err != nil {
		t.Fatal(err)
	}
	if err := r.AcceptTerm(1, "engine-a"); err != nil {
		t.Fatalf("the same term from the same engine (a reconnect): %v", err)
	}
	if err := r.AcceptTerm(1, "engine-b"); !errors.Is(err, ErrFenced) {
		t.Fatalf("the same term from another engine: want ErrFenced, got %v", err)
	}
	if err := r.AcceptTerm(2, "engine-b"); err != nil {
		t.Fatal(err)
	}
	if err := r.CheckTerm(1, "engine-a"); !errors.Is(err, ErrFenced) {
		t.Fatalf("the older engine's request after a newer took the replica: want ErrFenced, got %v", err)
	}
	if err := r.CheckTerm(2, "engine-b"); err != nil {
		t.Fatal(err)
	}
	if err := r.AcceptTerm(1, "engine-a"); !errors.Is(err, ErrFenced) {
		t.Fatalf("a lower term: want ErrFenced, got %v", err)
	}
	if err := r.AcceptTerm(0, ""); err == nil {
		t.Fatal("a term with no engine named was accepted")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if term, err := ReadTerm(dir); err != nil || term != 2 {
		t.Fatalf("ReadTerm after close: %d, %v; want 2", term, err)
	}
	r, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if term, holder := r.Term(); term != 2 || holder != "engine-b" {
		t.Fatalf("after reopening: term %d of %q, want 2 of engine-b", term, holder)
	}
	if err := r.AcceptTerm(2, "engine-a"); !errors.Is(err, ErrFenced) {
		t.Fatalf("after reopening, term 2 of another engine: want ErrFenced, got %v", err)
	}
}
