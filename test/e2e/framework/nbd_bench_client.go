package framework

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// EnvNBDBenchClient, set to a workload's name, makes the test binary an
// NBD benchmark client (Main): it runs the workload against the endpoint
// its one argument names and prints the nanoseconds it took. A
// benchmark's client is a process apart from the engine it measures, as
// the kernel's NBD client or nbdfuse is for a volume's engine.
const EnvNBDBenchClient = "LONGHORN_TEST_NBD_BENCH_CLIENT"

// NBDWorkloadVolumeSize is the export size the workloads need at least.
const NBDWorkloadVolumeSize = 256 << 20

// nbdWorkloads write or read an export, one request at a time, and
// return the bytes they moved.
var nbdWorkloads = map[string]func(*NBDClient) (int64, error){
	// 8,192 blocks of 4 KiB at random offsets.
	"4k-randwrite": func(c *NBDClient) (int64, error) {
		rng := rand.New(rand.NewPCG(1, 2))
		buf := make([]byte, 4096)
		for i := range buf {
			buf[i] = byte(i)
		}
		const count = 8192
		for range count {
			if err := c.WriteAt(buf, rng.Int64N(NBDWorkloadVolumeSize/4096)*4096); err != nil {
				return 0, err
			}
		}
		return count * 4096, nil
	},
	"1m-seqwrite": func(c *NBDClient) (int64, error) { return sequentialNBD(c, true) },
	"1m-seqread":  func(c *NBDClient) (int64, error) { return sequentialNBD(c, false) },
}

// NBDWorkloads are the workloads' names, in the order benchmarks report
// them.
var NBDWorkloads = []string{"4k-randwrite", "1m-seqwrite", "1m-seqread"}

// sequentialNBD writes or reads the first 128 MiB in requests of 1 MiB.
func sequentialNBD(c *NBDClient, write bool) (int64, error) {
	const total, chunk = 128 << 20, 1 << 20
	buf := make([]byte, chunk)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for off := int64(0); off < total; off += chunk {
		var err error
		if write {
			err = c.WriteAt(buf, off)
		} else {
			_, err = c.ReadAt(off, chunk)
		}
		if err != nil {
			return 0, fmt.Errorf("at %d: %w", off, err)
		}
	}
	return total, nil
}

// runNBDBenchClient is the test binary as a benchmark client.
func runNBDBenchClient(workload string, args []string) int {
	run, ok := nbdWorkloads[workload]
	if !ok || len(args) != 1 {
		fmt.Fprintf(os.Stderr, "%s=%q with arguments %q: want a workload of %v and one endpoint\n", EnvNBDBenchClient, workload, args, NBDWorkloads)
		return 2
	}
	c, err := DialNBD(args[0], 30*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	start := time.Now()
	n, err := run(c)
	if err == nil {
		err = c.Flush()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(time.Since(start).Nanoseconds(), n)
	return 0
}

// RunNBDWorkload runs workload against endpoint in a client process of
// its own and returns how long it took and the bytes it moved.
func RunNBDWorkload(b testing.TB, workload, endpoint string) (time.Duration, int64) {
	b.Helper()
	cmd := exec.Command(os.Args[0], endpoint)
	cmd.Env = append(os.Environ(), EnvNBDBenchClient+"="+workload)
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("NBD client %s on %s: %v: %s", workload, endpoint, err, out)
	}
	fields := strings.Fields(string(out))
	if len(fields) != 2 {
		b.Fatalf("NBD client %s: output %q", workload, out)
	}
	ns, err1 := strconv.ParseInt(fields[0], 10, 64)
	n, err2 := strconv.ParseInt(fields[1], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("NBD client %s: output %q", workload, out)
	}
	return time.Duration(ns), n
}
