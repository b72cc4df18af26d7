package scheduler

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// nodeRefusal says why node n takes no replica of v, or "".
func nodeRefusal(n *longhorn.Node, v *longhorn.Volume, isUp func(string) bool) string {
	switch {
	case isUp != nil && !isUp(n.Name):
		return "its manager is down (its heartbeat Lease is stale)"
	case condition(n.Status.Conditions, longhorn.ConditionTypeReady) != longhorn.ConditionStatusTrue:
		return "the node is not ready"
	case !n.Spec.AllowScheduling:
		return "scheduling is disabled on the node (spec.allowScheduling)"
	case n.Spec.EvictionRequested:
		return "the node is being evicted (spec.evictionRequested)"
	}
	if missing := lacking(n.Spec.Tags, v.Spec.NodeSelector); len(missing) > 0 {
		return fmt.Sprintf("its tags %v lack %v of the volume's nodeSelector", n.Spec.Tags, missing)
	}
	return ""
}

// diskCandidates are the disks of n that may take a replica of v, by every
// rule but anti-affinity; refusals says why each of the others may not.
func diskCandidates(n *longhorn.Node, v *longhorn.Volume, scheduled map[string]int64, rules Rules) ([]candidate, string) {
	names := make([]string, 0, len(n.Spec.Disks))
	for name := range n.Spec.Disks {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, "the node has no disks"
	}
	var out []candidate
	var refused []string
	for _, name := range names {
		spec := n.Spec.Disks[name]
		st := n.Status.DiskStatus[name]
		if reason := diskRefusal(spec, st, v, scheduled, rules); reason != "" {
			refused = append(refused, fmt.Sprintf("disk %s %s", name, reason))
			continue
		}
		out = append(out, candidate{
			Disk: Disk{Node: n.Name, Name: name, UUID: st.DiskUUID, Path: spec.Path},
			zone: n.Status.Zone, available: st.StorageAvailable,
		})
	}
	return out, strings.Join(refused, ", ")
}

// diskRefusal says why a disk takes no replica of v, or "".
func diskRefusal(spec longhorn.DiskSpec, st *longhorn.DiskStatus, v *longhorn.Volume, scheduled map[string]int64, rules Rules) string {
	switch {
	case st == nil || st.DiskUUID == "" || st.StorageMaximum <= 0:
		return "has not been probed yet"
	case condition(st.Conditions, longhorn.ConditionTypeReady) != longhorn.ConditionStatusTrue:
		return "is not ready"
	case !spec.AllowScheduling:
		return "does not allow scheduling (allowScheduling)"
	case spec.EvictionRequested:
		return "is being evicted (evictionRequested)"
	case condition(st.Conditions, longhorn.ConditionTypeSchedulable) == longhorn.ConditionStatusFalse:
		return "is not schedulable"
	}
	if missing := lacking(spec.Tags, v.Spec.DiskSelector); len(missing) > 0 {
		return fmt.Sprintf("has tags %v, lacking %v of the volume's diskSelector", spec.Tags, missing)
	}
	// Divisions first: a disk of petabytes times 100 stays within int64.
	if keep := st.StorageMaximum / 100 * int64(rules.MinimalAvailablePercent); st.StorageAvailable <= keep {
		return fmt.Sprintf("has %d bytes free, not above the %d (storage-minimal-available-percentage, %d%% of %d) it keeps free",
			st.StorageAvailable, keep, rules.MinimalAvailablePercent, st.StorageMaximum)
	}
	room := max(0, st.StorageMaximum-spec.StorageReserved) / 100 * int64(rules.OverProvisioningPercent)
	held := scheduled[st.DiskUUID]
	if size := v.Spec.Size; size > room-held || held > room {
		return fmt.Sprintf("holds replicas of %d bytes; another of %d would exceed its room of %d (its size less reserved storage, times storage-over-provisioning-percentage, %d%%)",
			held, size, room, rules.OverProvisioningPercent)
	}
	return ""
}

// byAntiAffinity keeps the candidates anti-affinity prefers, as Longhorn
// ranks them: a node in a zone without a replica of the volume, then
// (zone soft) a node without one, then (node soft) a disk without one,
// then (disk soft) any. A candidate that a hard rule excludes is never
// taken; refused says so for each node all of whose disks it excluded.
func byAntiAffinity(found []candidate, req Request) (best []candidate, refused map[string]string) {
	zones := map[string]string{}
	for _, n := range req.Nodes {
		zones[n.Name] = n.Status.Zone
	}
	usedNode, usedZone, usedDisk := map[string]string{}, map[string]string{}, map[string]string{}
	failedOn := map[string]bool{}
	for _, r := range req.Existing {
		if r.DeletionTimestamp == nil && r.Spec.FailedAt != "" {
			failedOn[r.Spec.NodeID] = true
		}
		if r.DeletionTimestamp != nil || r.Spec.FailedAt != "" || r.Spec.NodeID == "" {
			continue
		}
		usedNode[r.Spec.NodeID] = r.Name
		if z := zones[r.Spec.NodeID]; z != "" {
			usedZone[z] = r.Name
		}
		if r.Spec.DiskID != "" {
			usedDisk[r.Spec.DiskID] = r.Name
		}
	}
	rules := req.Rules
	rank := -1
	refusedBy := map[string]string{}
	kept := map[string]bool{}
	for _, c := range found {
		zoneHeld := ""
		if c.zone != "" {
			zoneHeld = usedZone[c.zone]
		}
		nodeHeld, diskHeld := usedNode[c.Node], usedDisk[c.UUID]
		switch {
		case zoneHeld != "" && !rules.ZoneSoft:
			refusedBy[c.Node] = fmt.Sprintf("its zone %s holds replica %s of the volume, and zone anti-affinity is hard (replica-zone-soft-anti-affinity)", c.zone, zoneHeld)
			continue
		case nodeHeld != "" && !rules.NodeSoft:
			refusedBy[c.Node] = fmt.Sprintf("it holds replica %s of the volume, and node anti-affinity is hard (replica-soft-anti-affinity)", nodeHeld)
			continue
		case diskHeld != "" && !rules.DiskSoft:
			refusedBy[c.Node] = fmt.Sprintf("disk %s holds replica %s of the volume, and disk anti-affinity is hard (replica-disk-soft-anti-affinity)", c.Name, diskHeld)
			continue
		}
		kept[c.Node] = true
		c.failedHere = failedOn[c.Node]
		r := 0
		switch {
		case diskHeld != "":
			r = 3
		case nodeHeld != "":
			r = 2
		case zoneHeld != "":
			r = 1
		}
		switch {
		case rank < 0 || r < rank:
			rank, best = r, []candidate{c}
		case r == rank:
			best = append(best, c)
		}
	}
	refused = map[string]string{}
	for n, why := range refusedBy {
		if !kept[n] {
			refused[n] = why
		}
	}
	return best, refused
}

// lacking are the tags of want that have does not carry.
func lacking(have, want []string) []string {
	var missing []string
	for _, t := range want {
		if !slices.Contains(have, t) {
			missing = append(missing, t)
		}
	}
	return missing
}

func condition(conds []longhorn.Condition, t string) longhorn.ConditionStatus {
	for _, c := range conds {
		if c.Type == t {
			return c.Status
		}
	}
	return longhorn.ConditionStatusUnknown
}
