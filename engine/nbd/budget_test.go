package nbd

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// TestLargeRequestsShareOneBudget sends more large writes at once than
// the budget for large requests holds, from as many clients: every write
// succeeds and reads back, and the buffers they borrowed never held more
// than the budget at once.
func TestLargeRequestsShareOneBudget(t *testing.T) {
	const clients, request = 12, 32 << 20 // 384 MiB at once, past the 256 MiB budget
	_, addr := serveSized(t, clients*request, func(*Server) {})
	uri := "nbd://" + addr + "/vol"
	qemuIO := tool(t, "qemu-io")
	largePeak.Store(0)
	var wg sync.WaitGroup
	errs := make([]error, clients)
	for i := range clients {
		wg.Go(func() {
			out, err := exec.Command(qemuIO, "-f", "raw", uri, "-c", fmt.Sprintf("write -P %d %d %d", i+1, i*request, request)).CombinedOutput()
			if err != nil || strings.Contains(string(out), "failed") {
				errs[i] = fmt.Errorf("client %d: %v: %s", i, err, out)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if peak := largePeak.Load(); peak > largeRequestBudget || peak < request {
		t.Fatalf("large requests held %d bytes at most, want at least one request's %d and at most the budget's %d", peak, request, largeRequestBudget)
	}
	if now := largeBorrowed.Load(); now != 0 {
		t.Fatalf("%d bytes still borrowed once every request was answered", now)
	}
	for i := range clients {
		out, err := exec.Command(qemuIO, "-f", "raw", uri, "-c", fmt.Sprintf("read -P %d %d %d", i+1, i*request, request)).CombinedOutput()
		if err != nil || strings.Contains(string(out), "failed") || strings.Contains(string(out), "Pattern verification failed") {
			t.Fatalf("client %d's data: %v: %s", i, err, out)
		}
	}
	t.Logf("%d clients wrote %d MiB each at once; large requests held at most %d MiB", clients, request>>20, largePeak.Load()>>20)
}
