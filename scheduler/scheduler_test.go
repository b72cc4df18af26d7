package scheduler

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

const gib = int64(1) << 30

var ready = []longhorn.Condition{
	{Type: longhorn.ConditionTypeReady, Status: longhorn.ConditionStatusTrue},
	{Type: longhorn.ConditionTypeSchedulable, Status: longhorn.ConditionStatusTrue},
}

// node is a ready node with one ready disk "d" of 100 GiB, 80 free.
func node(name, zone string, tags ...string) *longhorn.Node {
	return &longhorn.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: longhorn.NodeSpec{AllowScheduling: true, Tags: tags, Disks: map[string]longhorn.DiskSpec{
			"d": {Path: "/var/lib/longhorn/" + name, AllowScheduling: true},
		}},
		Status: longhorn.NodeStatus{Zone: zone, Conditions: ready, DiskStatus: map[string]*longhorn.DiskStatus{
			"d": {DiskUUID: "uuid-" + name, StorageMaximum: 100 * gib, StorageAvailable: 80 * gib, Conditions: ready},
		}},
	}
}

// withDisk adds disk name to n, free GiB free.
func withDisk(n *longhorn.Node, name string, free int64, tags ...string) *longhorn.Node {
	n.Spec.Disks[name] = longhorn.DiskSpec{Path: "/disks/" + n.Name + "/" + name, AllowScheduling: true, Tags: tags}
	n.Status.DiskStatus[name] = &longhorn.DiskStatus{DiskUUID: "uuid-" + n.Name + "-" + name, StorageMaximum: 100 * gib, StorageAvailable: free * gib, Conditions: ready}
	return n
}

func replicaOn(name, node, diskUUID string) *longhorn.Replica {
	return &longhorn.Replica{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: longhorn.ReplicaSpec{InstanceSpec: longhorn.InstanceSpec{NodeID: node}, DiskID: diskUUID}}
}

func volume(mod ...func(*longhorn.Volume)) *longhorn.Volume {
	v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "v"}, Spec: longhorn.VolumeSpec{Size: gib, NumberOfReplicas: 3}}
	for _, m := range mod {
		m(v)
	}
	return v
}

var defaults = Settings{NodeSoft: false, ZoneSoft: true, DiskSoft: true, OverProvisioningPercent: 100, MinimalAvailablePercent: 25}

func TestPlace(t *testing.T) {
	down := func(n string) bool { return n != "down" }
	cases := []struct {
		name     string
		v        *longhorn.Volume
		nodes    []*longhorn.Node
		existing []*longhorn.Replica
		rules    Settings
		prefer   string
		want     string // node/disk, or "" for none
		why      []string
	}{
		{name: "the roomiest disk of an unused node",
			nodes: []*longhorn.Node{node("a", ""), withDisk(node("b", ""), "big", 90)}, want: "b/big"},
		{name: "the preferred node among equals",
			nodes: []*longhorn.Node{node("a", ""), node("b", "")}, prefer: "b", want: "b/d"},
		{name: "the preferred node only among the best",
			nodes: []*longhorn.Node{node("a", ""), node("b", "")}, existing: []*longhorn.Replica{replicaOn("v-r-0", "b", "uuid-b")},
			rules:  Settings{NodeSoft: true, ZoneSoft: true, DiskSoft: true, OverProvisioningPercent: 100, MinimalAvailablePercent: 25},
			prefer: "b", want: "a/d"},
		{name: "hard node anti-affinity leaves a replica unscheduled",
			nodes: []*longhorn.Node{node("a", "")}, existing: []*longhorn.Replica{replicaOn("v-r-0", "a", "uuid-a")},
			why: []string{"node a: it holds replica v-r-0 of the volume, and node anti-affinity is hard"}},
		{name: "soft node anti-affinity shares a node, on another disk first",
			nodes:    []*longhorn.Node{withDisk(node("a", ""), "e", 30)},
			existing: []*longhorn.Replica{replicaOn("v-r-0", "a", "uuid-a")},
			v:        volume(func(v *longhorn.Volume) { v.Spec.ReplicaSoftAntiAffinity = longhorn.SoftAntiAffinityEnabled }),
			want:     "a/e"},
		{name: "hard disk anti-affinity",
			nodes:    []*longhorn.Node{node("a", "")},
			existing: []*longhorn.Replica{replicaOn("v-r-0", "a", "uuid-a")},
			v: volume(func(v *longhorn.Volume) {
				v.Spec.ReplicaSoftAntiAffinity = longhorn.SoftAntiAffinityEnabled
				v.Spec.ReplicaDiskSoftAntiAffinity = longhorn.SoftAntiAffinityDisabled
			}),
			why: []string{"disk d holds replica v-r-0", "replica-disk-soft-anti-affinity"}},
		{name: "a failed replica does not count",
			nodes: []*longhorn.Node{node("a", "")},
			existing: []*longhorn.Replica{func() *longhorn.Replica {
				r := replicaOn("v-r-0", "a", "uuid-a")
				r.Spec.FailedAt = "2026-12-02T00:00:00Z"
				return r
			}()},
			want: "a/d"},
		{name: "a node where a replica of the volume failed comes last",
			nodes: []*longhorn.Node{node("a", ""), withDisk(node("b", ""), "big", 90)},
			existing: []*longhorn.Replica{func() *longhorn.Replica {
				r := replicaOn("v-r-0", "b", "uuid-b")
				r.Spec.FailedAt = "2026-12-02T00:00:00Z"
				return r
			}()},
			want: "a/d"},
		{name: "an unused zone first",
			nodes:    []*longhorn.Node{node("a", "z1"), node("b", "z1"), node("c", "z2")},
			existing: []*longhorn.Replica{replicaOn("v-r-0", "a", "uuid-a")},
			want:     "c/d"},
		{name: "hard zone anti-affinity",
			nodes:    []*longhorn.Node{node("a", "z1"), node("b", "z1")},
			existing: []*longhorn.Replica{replicaOn("v-r-0", "a", "uuid-a")},
			v:        volume(func(v *longhorn.Volume) { v.Spec.ReplicaZoneSoftAntiAffinity = longhorn.SoftAntiAffinityDisabled }),
			why:      []string{"node b: its zone z1 holds replica v-r-0"}},
		{name: "nodes without a zone are not bound by zone anti-affinity",
			nodes:    []*longhorn.Node{node("a", ""), node("b", "")},
			existing: []*longhorn.Replica{replicaOn("v-r-0", "a", "uuid-a")},
			v:        volume(func(v *longhorn.Volume) { v.Spec.ReplicaZoneSoftAntiAffinity = longhorn.SoftAntiAffinityDisabled }),
			want:     "b/d"},
		{name: "node selector",
			nodes: []*longhorn.Node{node("a", "", "hdd"), node("b", "", "ssd", "fast")},
			v:     volume(func(v *longhorn.Volume) { v.Spec.NodeSelector = []string{"ssd"} }),
			want:  "b/d"},
		{name: "disk selector",
			nodes: []*longhorn.Node{withDisk(node("a", ""), "nvme", 30, "nvme")},
			v:     volume(func(v *longhorn.Volume) { v.Spec.DiskSelector = []string{"nvme"} }),
			want:  "a/nvme"},
		{name: "nothing matches the selectors",
			nodes: []*longhorn.Node{node("a", "", "hdd")},
			v: volume(func(v *longhorn.Volume) {
				v.Spec.NodeSelector = []string{"ssd"}
			}),
			why: []string{"node a: its tags [hdd] lack [ssd] of the volume's nodeSelector"}},
		{name: "a node down, disabled or evicted takes none",
			nodes: []*longhorn.Node{node("down", ""), func() *longhorn.Node { n := node("off", ""); n.Spec.AllowScheduling = false; return n }(),
				func() *longhorn.Node { n := node("gone", ""); n.Spec.EvictionRequested = true; return n }()},
			why: []string{"node down: its manager is down", "node off: scheduling is disabled", "node gone: the node is being evicted"}},
		{name: "minimal available space",
			nodes: []*longhorn.Node{func() *longhorn.Node {
				n := node("a", "")
				n.Status.DiskStatus["d"].StorageAvailable = 25 * gib
				return n
			}()},
			why: []string{"disk d has 26843545600 bytes free, not above the 26843545600 (storage-minimal-available-percentage, 25%"}},
		{name: "over-provisioning",
			nodes: []*longhorn.Node{node("a", "")},
			v:     volume(func(v *longhorn.Volume) { v.Spec.Size = 101 * gib }),
			why:   []string{"node a: disk d holds replicas of 0 bytes; another of 108447924224 would exceed its room of 107374182400"}},
		{name: "over-provisioning allows more with a higher percentage",
			nodes: []*longhorn.Node{node("a", "")},
			v:     volume(func(v *longhorn.Volume) { v.Spec.Size = 150 * gib }),
			rules: Settings{ZoneSoft: true, DiskSoft: true, OverProvisioningPercent: 200, MinimalAvailablePercent: 25},
			want:  "a/d"},
		{name: "a disk not ready, or without scheduling",
			nodes: []*longhorn.Node{func() *longhorn.Node {
				n := withDisk(node("a", ""), "e", 50)
				n.Status.DiskStatus["d"].Conditions = []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: longhorn.ConditionStatusFalse}}
				e := n.Spec.Disks["e"]
				e.AllowScheduling = false
				n.Spec.Disks["e"] = e
				return n
			}()},
			why: []string{"disk d is not ready, disk e does not allow scheduling"}},
		{name: "no nodes", why: []string{"there are no Longhorn nodes"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := c.v
			if v == nil {
				v = volume()
			}
			rules := c.rules
			if rules == (Settings{}) {
				rules = defaults
			}
			d, err := Place(Request{Volume: v, Existing: c.existing, Nodes: c.nodes, IsUp: down, Scheduled: map[string]int64{},
				Prefer: c.prefer, Rules: Resolve(rules, v)})
			if c.want != "" {
				if err != nil {
					t.Fatalf("Place: %v", err)
				}
				if got := d.Node + "/" + d.Name; got != c.want {
					t.Fatalf("placed on %s, want %s", got, c.want)
				}
				return
			}
			var u *Unschedulable
			if !errors.As(err, &u) {
				t.Fatalf("Place = %+v, %v; want Unschedulable", d, err)
			}
			for _, w := range c.why {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// Three replicas over four nodes in two zones, placed one by one as the
// volume controller places them: two zones, three nodes.
func TestPlaceSpreadsAVolume(t *testing.T) {
	nodes := []*longhorn.Node{node("a", "z1"), node("b", "z1"), node("c", "z2"), node("d", "z2")}
	v := volume()
	var existing []*longhorn.Replica
	scheduled := map[string]int64{}
	seen := map[string]bool{}
	zones := map[string]bool{}
	for i := range 3 {
		d, err := Place(Request{Volume: v, Existing: existing, Nodes: nodes, Scheduled: scheduled, Rules: Resolve(defaults, v)})
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		if seen[d.Node] {
			t.Fatalf("replica %d placed on node %s again", i, d.Node)
		}
		seen[d.Node] = true
		for _, n := range nodes {
			if n.Name == d.Node {
				zones[n.Status.Zone] = true
			}
		}
		existing = append(existing, replicaOn("v-r-"+string(rune('0'+i)), d.Node, d.UUID))
		scheduled[d.UUID] += v.Spec.Size
	}
	if len(zones) != 2 {
		t.Fatalf("replicas in zones %v, want both", zones)
	}
	if _, err := Place(Request{Volume: v, Existing: existing, Nodes: nodes[:3], Scheduled: scheduled, Rules: Resolve(defaults, v)}); err == nil {
		t.Fatal("a fourth replica was placed on a node holding one, under hard node anti-affinity")
	}
}
