package backingimage

import (
	"reflect"
	"testing"
	"time"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestDiskLastRefAt(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	earlier := now.Add(-time.Hour).Format(time.RFC3339)
	stamp := now.Format(time.RFC3339)
	disks := map[string]string{"d1": "", "d2": "", "d3": ""}
	cases := []struct {
		name string
		old  map[string]string
		used map[string]bool
		want map[string]string
	}{
		{"unused disks are stamped now", nil, nil, map[string]string{"d1": stamp, "d2": stamp, "d3": stamp}},
		{"a stamp already there is kept", map[string]string{"d1": earlier}, map[string]bool{"d2": true, "d3": true}, map[string]string{"d1": earlier}},
		{"a disk a replica uses again loses its stamp", map[string]string{"d1": earlier, "d2": earlier}, map[string]bool{"d1": true, "d3": true},
			map[string]string{"d2": earlier}},
		{"a disk no longer in spec.disks loses its stamp", map[string]string{"gone": earlier}, map[string]bool{"d1": true, "d2": true, "d3": true}, nil},
		{"a stamp that does not parse is replaced", map[string]string{"d1": "yesterday"}, map[string]bool{"d2": true, "d3": true}, map[string]string{"d1": stamp}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := diskLastRefAt(disks, c.old, c.used, now); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestDisksToClean(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	wait := time.Hour
	ago := func(d time.Duration) string { return now.Add(-d).Format(time.RFC3339) }
	file := func(state longhorn.BackingImageState) *longhorn.BackingImageDiskFileStatus {
		return &longhorn.BackingImageDiskFileStatus{State: state}
	}
	ready, failed, inProgress := file(longhorn.BackingImageStateReady), file(longhorn.BackingImageStateFailed), file(longhorn.BackingImageStateInProgress)
	disks := func(names ...string) map[string]string {
		m := map[string]string{}
		for _, n := range names {
			m[n] = ""
		}
		return m
	}
	cases := []struct {
		name       string
		view       diskCleanupView
		wantRemove []string
		wantNext   time.Time
	}{
		{
			name: "a file unused for the whole interval goes when another ready copy stays",
			view: diskCleanupView{disks: disks("d1", "d2"), files: map[string]*longhorn.BackingImageDiskFileStatus{"d1": ready, "d2": ready},
				lastRefAt: map[string]string{"d1": ago(2 * time.Hour)}, used: map[string]bool{"d2": true}, minCopies: 1},
			wantRemove: []string{"d1"},
		},
		{
			name: "a file unused for less than the interval stays, and says when it is due",
			view: diskCleanupView{disks: disks("d1", "d2"), files: map[string]*longhorn.BackingImageDiskFileStatus{"d1": ready, "d2": ready},
				lastRefAt: map[string]string{"d1": ago(20 * time.Minute)}, used: map[string]bool{"d2": true}, minCopies: 1},
			wantNext: now.Add(40 * time.Minute),
		},
		{
			name: "the interval is reached exactly: the file goes",
			view: diskCleanupView{disks: disks("d1", "d2"), files: map[string]*longhorn.BackingImageDiskFileStatus{"d1": ready, "d2": ready},
				lastRefAt: map[string]string{"d1": ago(time.Hour)}, used: map[string]bool{"d2": true}, minCopies: 1},
			wantRemove: []string{"d1"},
		},
		{
			name: "the last ready copy stays however long it is unused",
			view: diskCleanupView{disks: disks("d1"), files: map[string]*longhorn.BackingImageDiskFileStatus{"d1": ready},
				lastRefAt: map[string]string{"d1": ago(48 * time.Hour)}, minCopies: 1},
		},
		{
			name: "minNumberOfCopies ready copies stay: the longest unused goes first",
			view: diskCleanupView{disks: disks("d1", "d2", "d3"), files: map[string]*longhorn.BackingImageDiskFileStatus{"d1": ready, "d2": ready, "d3": ready},
				lastRefAt: map[string]string{"d1": ago(3 * time.Hour), "d2": ago(5 * time.Hour), "d3": ago(4 * time.Hour)}, minCopies: 2},
			wantRemove: []string{"d2"},
		},
		{
			name: "a minNumberOfCopies of zero keeps one copy",
			view: diskCleanupView{disks: disks("d1", "d2"), files: map[string]*longhorn.BackingImageDiskFileStatus{"d1": ready, "d2": ready},
				lastRefAt: map[string]string{"d1": ago(3 * time.Hour), "d2": ago(3 * time.Hour)}},
			wantRemove: []string{"d1"},
		},
		{
			name: "a disk a replica uses is never cleaned, even with a stale stamp",
			view: diskCleanupView{disks: disks("d1", "d2"), files: map[string]*longhorn.BackingImageDiskFileStatus{"d1": ready, "d2": ready},
				lastRefAt: map[string]string{"d1": ago(3 * time.Hour), "d2": ago(3 * time.Hour)}, used: map[string]bool{"d1": true, "d2": true}, minCopies: 1},
		},
		{
			name: "copies that are not ready go without counting against the ready ones",
			view: diskCleanupView{disks: disks("d1", "d2", "d3"), files: map[string]*longhorn.BackingImageDiskFileStatus{"d1": ready, "d2": failed, "d3": inProgress},
				lastRefAt: map[string]string{"d1": ago(3 * time.Hour), "d2": ago(2 * time.Hour), "d3": ago(2 * time.Hour)}, minCopies: 1},
			wantRemove: []string{"d2", "d3"},
		},
		{
			name: "nothing is cleaned while no copy is ready",
			view: diskCleanupView{disks: disks("d1", "d2"), files: map[string]*longhorn.BackingImageDiskFileStatus{"d1": failed, "d2": inProgress},
				lastRefAt: map[string]string{"d1": ago(3 * time.Hour), "d2": ago(3 * time.Hour)}, minCopies: 1},
		},
		{
			name: "a disk without a stamp is not due",
			view: diskCleanupView{disks: disks("d1", "d2"), files: map[string]*longhorn.BackingImageDiskFileStatus{"d1": ready, "d2": ready},
				lastRefAt: map[string]string{"d2": ago(10 * time.Minute)}, minCopies: 1},
			wantNext: now.Add(50 * time.Minute),
		},
		{
			name: "the earliest of several pending disks is when to look again",
			view: diskCleanupView{disks: disks("d1", "d2", "d3"), files: map[string]*longhorn.BackingImageDiskFileStatus{"d1": ready, "d2": ready, "d3": ready},
				lastRefAt: map[string]string{"d1": ago(10 * time.Minute), "d2": ago(30 * time.Minute), "d3": ago(2 * time.Hour)}, minCopies: 1},
			wantRemove: []string{"d3"}, wantNext: now.Add(30 * time.Minute),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.view.now, c.view.wait = now, wait
			remove, next := disksToClean(c.view)
			if !reflect.DeepEqual(remove, c.wantRemove) {
				t.Fatalf("remove %v, want %v", remove, c.wantRemove)
			}
			if !next.Equal(c.wantNext) {
				t.Fatalf("next %v, want %v", next, c.wantNext)
			}
		})
	}
}
