package cluster

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The filter forwards the bridge to itself and nothing else to or from it,
// and nft takes its syntax.
func TestForwardingFilterKeepsForwardingToTheBridge(t *testing.T) {
	ruleset := forwardingFilter()
	var rules []string
	for _, line := range strings.Split(ruleset, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "table") && !strings.HasPrefix(line, "chain") && !strings.HasPrefix(line, "type") && line != "}" {
			rules = append(rules, line)
		}
	}
	want := []string{`iifname "lhnode0" oifname "lhnode0" accept`, `iifname "lhnode0" drop`, `oifname "lhnode0" drop`}
	if !slices.Equal(rules, want) {
		t.Errorf("rules %q, want %q", rules, want)
	}
	if !strings.HasPrefix(ruleset, "table inet "+filterTable+" {") || !slices.Contains(kernelTables, "inet "+filterTable) {
		t.Errorf("the ruleset is not the table inet %s that the clean-up deletes:\n%s", filterTable, ruleset)
	}
	// nft checks the syntax without applying it (-c); only root may.
	if os.Geteuid() != 0 {
		t.Skip("nft -c needs root")
	}
	if _, err := lookPath("nft"); err != nil {
		t.Skip("no nft (the nftables package)")
	}
	if _, err := nftOutput(ruleset, "-c", "-f", "-"); err != nil {
		t.Errorf("nft refuses the ruleset: %v\n%s", err, ruleset)
	}
}
