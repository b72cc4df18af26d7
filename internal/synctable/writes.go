// Package synctable holds what the controllers' sync tables share: the
// writes a sync made to a fake clientset, as the tables list them.
package synctable

import k8stesting "k8s.io/client-go/testing"

// Writes are the create, update, patch and delete actions among actions,
// in order, as "verb resource[/subresource]" ("update snapshots/status").
func Writes(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		switch a.GetVerb() {
		case "create", "update", "delete", "patch":
			r := a.GetResource().Resource
			if a.GetSubresource() != "" {
				r += "/" + a.GetSubresource()
			}
			out = append(out, a.GetVerb()+" "+r)
		}
	}
	return out
}
