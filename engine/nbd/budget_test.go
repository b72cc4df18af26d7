package nbd

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
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

// TestAStalledLargeWriteIsCutOffAndItsBudgetGivenBack sends the header
// of a 32 MiB write and a part of its data, then stalls: the server cuts
// the connection off once the transfer's deadline passes, and gives back
// what the request borrowed of the budget.
func TestAStalledLargeWriteIsCutOffAndItsBudgetGivenBack(t *testing.T) {
	defer func(d time.Duration) { largeRequestTimeout = d }(largeRequestTimeout)
	largeRequestTimeout = 300 * time.Millisecond
	_, addr := serveSized(t, 64<<20, func(*Server) {})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	greeting := make([]byte, 8+8+2)
	if _, err := io.ReadFull(conn, greeting); err != nil {
		t.Fatal(err)
	}
	var out []byte
	out = binary.BigEndian.AppendUint32(out, clientFlagFixedNewstyle|clientFlagNoZeroes)
	out = binary.BigEndian.AppendUint64(out, optMagic)
	out = binary.BigEndian.AppendUint32(out, optExportName)
	out = binary.BigEndian.AppendUint32(out, 3)
	out = append(out, "vol"...)
	if _, err := conn.Write(out); err != nil {
		t.Fatal(err)
	}
	export := make([]byte, 8+2)
	if _, err := io.ReadFull(conn, export); err != nil {
		t.Fatal(err)
	}
	req := binary.BigEndian.AppendUint32(nil, requestMagic)
	req = binary.BigEndian.AppendUint16(req, 0)
	req = binary.BigEndian.AppendUint16(req, cmdWrite)
	req = binary.BigEndian.AppendUint64(req, 1)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, 32<<20)
	if _, err := conn.Write(append(req, make([]byte, 1<<20)...)); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(conn, 5*time.Second) {
		t.Fatal("a write that stalled part way kept its connection")
	}
	deadline := time.Now().Add(5 * time.Second)
	for largeBorrowed.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of the budget still borrowed after the connection was cut off", largeBorrowed.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
