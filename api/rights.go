package api

import "github.com/cadence-storage/longhorn-manager/internal/rights"

// fromRights are checks of internal/rights as the API's accesses, in the
// API's namespace (the checks' own).
func fromRights(checks []rights.Check) []access {
	out := make([]access, 0, len(checks))
	for _, c := range checks {
		out = append(out, access{verb: c.Verb, resource: c.Resource, name: c.Name, core: c.Group == ""})
	}
	return out
}
