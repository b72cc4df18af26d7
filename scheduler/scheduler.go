// Package scheduler places a volume's replicas on nodes and disks, by
// Longhorn's rules (docs/design-data-plane.md, "Placement"): a node must
// be up, allow scheduling, not be evicted and carry every tag of the
// volume's nodeSelector; a disk must be ready and schedulable, carry every
// tag of its diskSelector, keep storage-minimal-available-percentage of
// itself free and stay within storage-over-provisioning-percentage with
// the new replica; and among the disks left, anti-affinity by zone, node
// and disk decides, hard or soft. It decides only: the volume controller
// creates the Replica where it says.
package scheduler

import (
	"fmt"
	"sort"
	"strings"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// Rules are the settings a placement follows, with the volume's own
// overrides applied (Resolve).
type Rules struct {
	// NodeSoft, ZoneSoft and DiskSoft: whether replicas may share a node,
	// a zone, a disk when nothing else can take one.
	NodeSoft, ZoneSoft, DiskSoft bool
	// OverProvisioningPercent and MinimalAvailablePercent are the storage
	// settings of the same names.
	OverProvisioningPercent, MinimalAvailablePercent int
}

// Settings are the cluster's settings of scheduling.
type Settings = Rules

// Resolve applies the volume's spec.replica*SoftAntiAffinity to the
// settings: enabled and disabled override, ignored (or empty) follows.
func Resolve(s Settings, v *longhorn.Volume) Rules {
	r := s
	r.NodeSoft = override(r.NodeSoft, v.Spec.ReplicaSoftAntiAffinity)
	r.ZoneSoft = override(r.ZoneSoft, v.Spec.ReplicaZoneSoftAntiAffinity)
	r.DiskSoft = override(r.DiskSoft, v.Spec.ReplicaDiskSoftAntiAffinity)
	return r
}

func override(setting bool, v longhorn.SoftAntiAffinity) bool {
	switch v {
	case longhorn.SoftAntiAffinityEnabled:
		return true
	case longhorn.SoftAntiAffinityDisabled:
		return false
	}
	return setting
}

// Disk is where a replica goes.
type Disk struct {
	Node, Name, UUID, Path string
}

// Request is one replica to place.
type Request struct {
	Volume *longhorn.Volume
	// Existing are the volume's replicas; those not being deleted and not
	// failed count for anti-affinity, as Longhorn counts them.
	Existing []*longhorn.Replica
	// Nodes are the cluster's Longhorn nodes.
	Nodes []*longhorn.Node
	// IsUp says whether a node's manager is up (its Lease is fresh).
	IsUp func(node string) bool
	// Scheduled is, by disk UUID, the sizes of the replicas each disk
	// holds (datastore.ScheduledOnDisks).
	Scheduled map[string]int64
	// Prefer is a node to take when it is among the best candidates:
	// where the volume is to be used (dataLocality best-effort, the CSI
	// driver's selected node, a clone's source).
	Prefer string
	Rules  Rules
}

// Unschedulable says why no disk can take the replica: the rule each node
// (or disk) failed.
type Unschedulable struct {
	Volume string
	// Reasons, by node name: what kept each node's disks out.
	Reasons map[string]string
}

func (u *Unschedulable) Error() string {
	if len(u.Reasons) == 0 {
		return fmt.Sprintf("no node can take a replica of volume %s: there are no Longhorn nodes", u.Volume)
	}
	nodes := make([]string, 0, len(u.Reasons))
	for n := range u.Reasons {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	parts := make([]string, 0, len(nodes))
	for _, n := range nodes {
		parts = append(parts, fmt.Sprintf("node %s: %s", n, u.Reasons[n]))
	}
	return fmt.Sprintf("no node can take a replica of volume %s: %s", u.Volume, strings.Join(parts, "; "))
}

// candidate is a disk that passed every rule but anti-affinity.
type candidate struct {
	Disk
	zone      string
	available int64
	// failedHere: a replica of the volume failed on this node (it does
	// not count for anti-affinity): another node is taken first.
	failedHere bool
}

// Place picks the disk for one more replica of the request's volume, or
// says, node by node, why none can take it.
func Place(req Request) (Disk, error) {
	v := req.Volume
	why := map[string]string{}
	var found []candidate
	for _, n := range req.Nodes {
		if reason := nodeRefusal(n, v, req.IsUp); reason != "" {
			why[n.Name] = reason
			continue
		}
		disks, refusals := diskCandidates(n, v, req.Scheduled, req.Rules)
		if len(disks) == 0 {
			why[n.Name] = refusals
			continue
		}
		found = append(found, disks...)
	}
	if len(found) == 0 {
		return Disk{}, &Unschedulable{Volume: v.Name, Reasons: why}
	}
	best, refused := byAntiAffinity(found, req)
	for n, r := range refused {
		why[n] = r
	}
	if len(best) == 0 {
		return Disk{}, &Unschedulable{Volume: v.Name, Reasons: why}
	}
	return pick(best, req.Prefer), nil
}

// pick is the preferred node's roomiest disk when it is among best, or
// else the disk with the most free space, by node and disk name on a tie;
// a node where a replica of the volume failed comes after the others.
func pick(best []candidate, prefer string) Disk {
	sort.Slice(best, func(i, j int) bool {
		a, b := best[i], best[j]
		if a.failedHere != b.failedHere {
			return !a.failedHere
		}
		if (a.Node == prefer) != (b.Node == prefer) {
			return a.Node == prefer
		}
		if a.available != b.available {
			return a.available > b.available
		}
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		return a.Name < b.Name
	})
	return best[0].Disk
}
