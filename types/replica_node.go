package types

// ReplicasNode is the node that holds every replica, given each replica's
// node, or "" when there are none or they are on several nodes. A volume
// attaches only there (its engine opens its replicas from that node's
// disks); the datastore asks it of Replica objects, the API client of a
// volume's replicas as the API shows them.
func ReplicasNode(nodes []string) string {
	node := ""
	for _, n := range nodes {
		switch {
		case node == "":
			node = n
		case n != node:
			return ""
		}
	}
	return node
}
