package types

// ReplicasNode is the node an engine of a volume is best started on,
// given each replica's node in the order of the replicas' names: the one
// holding the most replicas (the most read where they are, and the
// layers a backup or clone reads), on a tie the node of the first
// replica, which the scheduler places where the volume is wanted. ""
// when no replica is placed. A detached volume's manager is there; a
// recurring job's run or a CSI snapshot attaches it there.
func ReplicasNode(nodes []string) string {
	count := map[string]int{}
	best := ""
	for _, n := range nodes {
		if n == "" {
			continue
		}
		count[n]++
		if best == "" || count[n] > count[best] {
			best = n
		}
	}
	return best
}
