package replica

import (
	"errors"
	"fmt"
	"path/filepath"
)

// The term fences the owner of a replica (docs/design-data-plane.md, "Two
// writers never happen: the term"). An engine opens each replica with a
// term greater than every term its replicas hold; the replica records it
// durably before it serves that engine, and from then on refuses the
// requests of every lower term, and those of another engine instance
// with the same term, with ErrFenced. An engine of an older term, cut off
// and still running after a newer one took the replicas, fails at its
// first request to a replica the newer one opened. The epoch orders
// replicas by how current their data is; the term orders engines by who
// owns the replicas now.

// ErrFenced marks a request of an engine that no longer owns the replica:
// a newer engine opened it with a higher term.
var ErrFenced = errors.New("the replica is owned by a newer engine")

// Term is the highest term the replica accepted and the engine instance
// that holds it.
func (r *Replica) Term() (uint64, string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.meta.Term, r.meta.TermHolder
}

// AcceptTerm makes holder, with term, the replica's owner: a term above
// the one the replica holds is recorded durably before AcceptTerm
// returns; the same term from the same holder is a reconnect, accepted as
// is. A lower term, or the same term from another holder, is refused
// with ErrFenced, and the replica is left as it was.
func (r *Replica) AcceptTerm(term uint64, holder string) error {
	if holder == "" {
		return fmt.Errorf("accept term %d: the engine instance must be named", term)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.chain == nil {
		return ErrClosed
	}
	if err := fenced(r.meta.Term, r.meta.TermHolder, term, holder); err != nil {
		return err
	}
	if term == r.meta.Term {
		return nil
	}
	next := r.cloneMeta()
	next.Term, next.TermHolder = term, holder
	return r.commit(next)
}

// CheckTerm says whether holder, with term, still owns the replica: nil,
// or ErrFenced once a newer engine took it. It reads no file.
func (r *Replica) CheckTerm(term uint64, holder string) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.checkTermLocked(term, holder)
}

// WriteAtTerm is WriteAt for holder with term: refused with ErrFenced,
// writing nothing, once a newer engine took the replica. The check and the
// write are one step: no write of an older engine lands after a newer one
// accepted its term.
func (r *Replica) WriteAtTerm(p []byte, off int64, term uint64, holder string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkTermLocked(term, holder); err != nil {
		return 0, err
	}
	return r.writeLocked(p, off)
}

func (r *Replica) checkTermLocked(term uint64, holder string) error {
	if term != r.meta.Term || holder != r.meta.TermHolder {
		return fmt.Errorf("%w: it holds term %d of engine %s, the request is of term %d of engine %s", ErrFenced, r.meta.Term, r.meta.TermHolder, term, holder)
	}
	return nil
}

func fenced(haveTerm uint64, haveHolder string, term uint64, holder string) error {
	switch {
	case term < haveTerm:
		return fmt.Errorf("%w: it holds term %d of engine %s, above term %d of engine %s", ErrFenced, haveTerm, haveHolder, term, holder)
	case term == haveTerm && haveHolder != "" && holder != haveHolder:
		return fmt.Errorf("%w: term %d is held by engine %s, not %s", ErrFenced, term, haveHolder, holder)
	}
	return nil
}

// ReadTerm reads the term of the replica in dir without opening it: an
// engine takes a term above the highest of its replicas.
func ReadTerm(dir string) (uint64, error) {
	var meta volumeMeta
	if err := readJSON(filepath.Join(dir, volumeMetaFile), &meta); err != nil {
		return 0, err
	}
	return meta.Term, nil
}
