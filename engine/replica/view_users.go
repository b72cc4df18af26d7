package replica

import "sort"

// A SnapshotView reads its snapshot's layer files in place. A purge never
// changes what it reads: a merge adds to a child only blocks that read the
// same, and a purged snapshot's file, unlinked, stays whole on disk while
// the view has it open. A trim punches in place, though, so the replica
// counts the layers open views read, and a trim keeps them (see Trim):
// a view of a snapshot marked removed since it was opened (a backup of it
// that nothing held) reads what the snapshot held until it closes.

// viewLayers records that a view reads the layers of snapshots names, and
// returns what ends it, once.
func (r *Replica) viewLayers(names []string) (release func()) {
	r.viewMu.Lock()
	defer r.viewMu.Unlock()
	if r.viewed == nil {
		r.viewed = map[string]int{}
	}
	for _, n := range names {
		r.viewed[n]++
	}
	done := false
	return func() {
		r.viewMu.Lock()
		defer r.viewMu.Unlock()
		if done {
			return
		}
		done = true
		for _, n := range names {
			if r.viewed[n]--; r.viewed[n] <= 0 {
				delete(r.viewed, n)
			}
		}
	}
}

// ViewedSnapshots names the snapshots whose layers open views read: their
// own snapshots and those snapshots' ancestors, sorted. A name purged and
// taken again while a view of the first is open is listed too: a trim
// then keeps the new snapshot until the view closes, which costs space
// only.
func (r *Replica) ViewedSnapshots() []string {
	r.viewMu.Lock()
	defer r.viewMu.Unlock()
	out := make([]string, 0, len(r.viewed))
	for n := range r.viewed {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// viewedOrKept tells whether a trim must keep snapshot name's layer: a
// view of this replica reads it, or the caller keeps it.
func (r *Replica) viewedOrKept(name string, keep map[string]bool) bool {
	if keep[name] {
		return true
	}
	r.viewMu.Lock()
	defer r.viewMu.Unlock()
	return r.viewed[name] > 0
}
