package replicaproto

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// readBack reads n bytes at off through c.
func readBack(t *testing.T, c *Client, off int64, n int) []byte {
	t.Helper()
	p := make([]byte, n)
	if _, err := c.ReadAt(p, off); err != nil {
		t.Fatal(err)
	}
	return p
}

func randomBytes(n int) []byte {
	p := make([]byte, n)
	_, _ = rand.Read(p)
	return p
}

// A snapshot's removal, a purge, a revert, a growth and a trim keeping
// snapshots, over mutual TLS: each does on the replica what it does on a
// replica of the engine's own process.
func TestChainChangesOverMutualTLS(t *testing.T) {
	r, addr, _, tlsConfig := serveReplicaSized(t, volSize, true)
	c, err := Dial(context.Background(), addr, tlsConfig, open("engine-a", 1), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Version() != ProtocolVersion || !c.Carries() {
		t.Fatalf("the server speaks version %d", c.Version())
	}
	a, b, cc := randomBytes(64<<10), randomBytes(4096), randomBytes(4096)
	if _, err := c.WriteAt(a, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshot(SnapshotRequest{Name: "s1", ID: "id-1", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshot(SnapshotRequest{Name: "s2", ID: "id-2", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteAt(cc, 8192); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(a)
	copy(want, b)
	copy(want[8192:], cc)

	if err := c.MarkRemoved("s1"); err != nil {
		t.Fatal(err)
	}
	if _, removed := r.SnapshotRemoved("s1"); !removed {
		t.Fatal("s1 is not marked removed")
	}
	for _, err := range []error{c.MarkRemoved("nope"), c.Revert("nope"), c.MarkRemoved("../not a name")} {
		if !errors.Is(err, replica.ErrNotFound) {
			t.Fatalf("a snapshot the replica does not have: want ErrNotFound, got %v", err)
		}
	}
	purged, err := c.Purge()
	if err != nil || len(purged) != 1 || purged[0] != "s1" {
		t.Fatalf("purged %v, %v", purged, err)
	}
	if r.HasSnapshot("s1") {
		t.Fatal("s1 is still there after the purge")
	}
	if got := readBack(t, c, 0, len(want)); !bytes.Equal(got, want) {
		t.Fatal("the purge changed what the volume reads")
	}
	if purged, err := c.Purge(); err != nil || len(purged) != 0 {
		t.Fatalf("a purge with nothing to purge: %v, %v", purged, err)
	}

	if err := c.Revert("s2"); err != nil {
		t.Fatal(err)
	}
	atS2 := bytes.Clone(a)
	copy(atS2, b)
	if got := readBack(t, c, 0, len(atS2)); !bytes.Equal(got, atS2) {
		t.Fatal("after the revert the volume does not read what s2 held")
	}

	// A trim keeping s3, removed just below the head, as an engine's
	// view elsewhere reads it: the head's block is given back and s3's
	// stays, so the block reads s3's data; without the keep list, s3's
	// block goes too, and the block reads s2's.
	x, y := randomBytes(4096), randomBytes(4096)
	if _, err := c.WriteAt(x, 16384); err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshot(SnapshotRequest{Name: "s3", ID: "id-3", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteAt(y, 16384); err != nil {
		t.Fatal(err)
	}
	if err := c.MarkRemoved("s3"); err != nil {
		t.Fatal(err)
	}
	if err := c.TrimKeeping(16384, 4096, []string{"s3", "s3"}); err != nil {
		t.Fatal(err)
	}
	if got := readBack(t, c, 16384, 4096); !bytes.Equal(got, x) {
		t.Fatal("the trim keeping s3 did not keep s3's block")
	}
	if err := c.TrimKeeping(16384, 4096, nil); err != nil {
		t.Fatal(err)
	}
	if got := readBack(t, c, 16384, 4096); !bytes.Equal(got, a[16384:16384+4096]) {
		t.Fatal("the trim keeping nothing kept s3's block")
	}

	if err := c.Grow(2 * volSize); err != nil {
		t.Fatal(err)
	}
	if c.Size() != 2*volSize || r.Size() != 2*volSize {
		t.Fatalf("after the growth the client says %d bytes, the replica %d", c.Size(), r.Size())
	}
	if got := readBack(t, c, volSize, 4096); !bytes.Equal(got, make([]byte, 4096)) {
		t.Fatal("the new space does not read as zeros")
	}
	if err := c.Grow(volSize); err == nil || !strings.Contains(err.Error(), "never shrinks") {
		t.Fatalf("a shrink: want the replica's refusal, got %v", err)
	}
	if _, err := c.WriteAt([]byte("after"), 2*volSize-8); err != nil {
		t.Fatalf("the connection after the changes: %v", err)
	}
}

// Every change of an engine that a newer one fenced is refused, and
// changes nothing.
func TestChainChangesOfAFencedEngineChangeNothing(t *testing.T) {
	r, addr, _ := serveReplica(t, false)
	old := dial(t, addr, open("engine-a", 1))
	data := randomBytes(8192)
	if _, err := old.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"s1", "s2"} {
		if err := old.Snapshot(SnapshotRequest{Name: s, ID: "id-" + s, Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.MarkRemoved("s1"); err != nil {
		t.Fatal(err)
	}
	before, err := r.Snapshots()
	if err != nil {
		t.Fatal(err)
	}
	dial(t, addr, open("engine-b", 2))
	_, purgeErr := old.Purge()
	for what, err := range map[string]error{
		"purge":  purgeErr,
		"delete": old.MarkRemoved("s2"),
		"revert": old.Revert("s2"),
		"grow":   old.Grow(2 * volSize),
		"trim":   old.TrimKeeping(0, 8192, []string{"s2"}),
	} {
		if !errors.Is(err, replica.ErrFenced) {
			t.Fatalf("the fenced engine's %s: want ErrFenced, got %v", what, err)
		}
	}
	after, err := r.Snapshots()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(before)
	b, _ := json.Marshal(after)
	if !bytes.Equal(a, b) || r.Size() != volSize {
		t.Fatalf("the fenced requests changed the replica: %s, then %s; %d bytes", a, b, r.Size())
	}
	got := make([]byte, len(data))
	if _, err := r.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the fenced trim changed the data (%v)", err)
	}
}

// A server of version 1 says no version at its open: the client refuses
// the ops it does not know before sending anything (such a server closes
// the connection at them), and the connection serves on. A trim without
// a keep list is still a trim.
func TestAServerOfVersion1IsToldNothingItDoesNotKnow(t *testing.T) {
	r, addr, s := serveReplica(t, false)
	s.speaks.Store(1)
	c := dial(t, addr, open("engine-a", 1))
	if c.Version() != 1 || c.Carries() {
		t.Fatalf("a server of version 1 taken for version %d", c.Version())
	}
	if err := c.Snapshot(SnapshotRequest{Name: "s1", ID: "id-1", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	_, purgeErr := c.Purge()
	for what, err := range map[string]error{
		"purge":  purgeErr,
		"delete": c.MarkRemoved("s1"),
		"revert": c.Revert("s1"),
		"grow":   c.Grow(2 * volSize),
		"trim":   c.TrimKeeping(0, 4096, []string{"s1"}),
	} {
		if !errors.Is(err, ErrOldServer) || !strings.Contains(err.Error(), "version 1") {
			t.Fatalf("%s on a server of version 1: want ErrOldServer, got %v", what, err)
		}
	}
	if err := c.TrimKeeping(0, 4096, nil); err != nil {
		t.Fatalf("a trim keeping nothing: %v", err)
	}
	if _, err := c.WriteAt([]byte("still served"), 0); err != nil {
		t.Fatal(err)
	}
	if _, removed := r.SnapshotRemoved("s1"); removed || r.Size() != volSize {
		t.Fatal("a refused op reached the replica")
	}
	// Were one sent all the same, the old server closes the connection.
	conn := rawConn(t, addr)
	if _, err := conn.Write(header{magic: requestMagic, kind: OpPurge, id: 2}.encode()); err != nil {
		t.Fatal(err)
	}
	if !closedSoon(conn) {
		t.Fatal("a server of version 1 answered an op it does not know")
	}
}

// The open's reply of a version 2 server carries its version; an open
// from a client of version 1 (no version) is served as before.
func TestTheOpenCarriesTheVersion(t *testing.T) {
	_, addr, _ := serveReplica(t, false)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := []byte(`{"volumeUID":"uid-1","replica":"r1","engine":"old","term":3}`)
	if _, err := conn.Write(append(header{magic: requestMagic, kind: OpOpen, id: 1, length: uint32(len(body))}.encode(), body...)); err != nil {
		t.Fatal(err)
	}
	h, err := readHeader(conn, replyMagic)
	if err != nil || h.kind != statusOK {
		t.Fatalf("open: %+v, %v", h, err)
	}
	reply := make([]byte, h.length)
	if _, err := io.ReadFull(conn, reply); err != nil {
		t.Fatal(err)
	}
	var got OpenReply
	if err := json.Unmarshal(reply, &got); err != nil || got.Version != ProtocolVersion || got.Term != 3 {
		t.Fatalf("open reply %s, %v", reply, err)
	}
}

// answer reads one request and its body from r, and answers it.
func answer(t testing.TB, conn net.Conn, r *bufio.Reader, status byte, body []byte) (header, []byte) {
	h, err := readHeader(r, requestMagic)
	if err != nil {
		return h, nil
	}
	n, err := requestBody(h)
	if err != nil {
		return h, nil
	}
	got := make([]byte, n)
	if _, err := io.ReadFull(r, got); err != nil {
		return h, nil
	}
	_, _ = conn.Write(append(header{magic: replyMagic, kind: status, id: h.id, length: uint32(len(body))}.encode(), body...))
	return h, got
}

// A purge and a growth may take longer than an I/O's deadline: each has
// the control deadline, and past it the connection breaks as at an I/O's.
func TestAPurgeAndAGrowHaveTheControlDeadline(t *testing.T) {
	const io, control = 200 * time.Millisecond, 2 * time.Second
	for _, op := range []string{"purge", "grow"} {
		t.Run(op, func(t *testing.T) {
			addr := fakePeerOpening(t, []byte(`{"size":1048576,"epoch":0,"term":1,"version":2}`), func(conn net.Conn, r *bufio.Reader) {
				// The first waits three I/O deadlines, the second past the
				// control deadline.
				h, _ := nextRequestAfter(r, 0)
				time.Sleep(3 * io)
				body := []byte(`["s1"]`)
				if op == "grow" {
					body = nil
				}
				_, _ = conn.Write(append(header{magic: replyMagic, kind: statusOK, id: h.id, length: uint32(len(body))}.encode(), body...))
				_, _ = nextRequestAfter(r, 0)
				time.Sleep(control + time.Second)
			})
			c, err := Dial(context.Background(), addr, nil, open("engine-a", 1), io, ControlTimeout(control))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			run := func() error {
				if op == "purge" {
					_, err := c.Purge()
					return err
				}
				return c.Grow(2 << 20)
			}
			if err := run(); err != nil {
				t.Fatalf("a %s slower than an I/O's deadline: %v", op, err)
			}
			start := time.Now()
			if err := run(); !errors.Is(err, ErrTimeout) {
				t.Fatalf("a %s past the control deadline: want ErrTimeout, got %v", op, err)
			}
			if took := time.Since(start); took < control || took > control+time.Second {
				t.Fatalf("the %s failed after %s, want the control deadline's %s", op, took, control)
			}
		})
	}
}

// nextRequestAfter reads the next request, waiting wait first.
func nextRequestAfter(r *bufio.Reader, wait time.Duration) (header, error) {
	time.Sleep(wait)
	return nextRequest(r)
}

// Bodies the protocol allows but the replica cannot take are answered
// statusInvalid, the connection serving on; bodies past their bounds
// close it.
func TestControlBodiesAreCheckedBeforeTheReplicaSeesThem(t *testing.T) {
	r, addr, _ := serveReplica(t, false)
	if err := r.CreateSnapshot("s1", true, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	many := make([]string, replica.MaxSnapshots+1)
	for i := range many {
		many[i] = "s"
	}
	manyBody, _ := json.Marshal(TrimRequest{Length: 4096, Keep: many[:120]})
	invalid := map[string][]byte{
		"a name the replica refuses":  append(header{magic: requestMagic, kind: OpRevert, id: 2, length: 3}.encode(), "../"...),
		"the head's name":             append(header{magic: requestMagic, kind: OpMarkRemoved, id: 2, length: uint32(len(replica.HeadName))}.encode(), replica.HeadName...),
		"a growth past its bound":     header{magic: requestMagic, kind: OpGrow, id: 2, offset: MaxGrowSize + 1}.encode(),
		"a growth past int64":         header{magic: requestMagic, kind: OpGrow, id: 2, offset: ^uint64(0)}.encode(),
		"a malformed trim":            append(header{magic: requestMagic, kind: OpTrimKeeping, id: 2, length: 4}.encode(), "[1,2"...),
		"a trim past the replica":     append(header{magic: requestMagic, kind: OpTrimKeeping, id: 2, offset: 4096, length: 27}.encode(), `{"length":33554432,"keep":[]}`[:27]...),
		"a trim keeping a bad name":   append(header{magic: requestMagic, kind: OpTrimKeeping, id: 2, length: 28}.encode(), `{"length":4096,"keep":["/"]}`...),
		"a trim of more than int64":   append(header{magic: requestMagic, kind: OpTrimKeeping, id: 2, length: 31}.encode(), `{"length":18446744073709551615}`...),
		"a trim keeping many repeats": append(header{magic: requestMagic, kind: OpTrimKeeping, id: 2, length: uint32(len(manyBody))}.encode(), manyBody...),
	}
	for name, frame := range invalid {
		t.Run(name, func(t *testing.T) {
			conn := rawConn(t, addr)
			if _, err := conn.Write(frame); err != nil {
				t.Fatal(err)
			}
			h, err := readHeader(conn, replyMagic)
			if err != nil {
				t.Fatal(err)
			}
			body := make([]byte, h.length)
			_, _ = io.ReadFull(conn, body)
			if name == "a trim keeping many repeats" {
				// 120 names are fewer than a replica's snapshots: taken.
				if h.kind != statusOK {
					t.Fatalf("status %d, %s", h.kind, body)
				}
				return
			}
			if h.kind != statusInvalid {
				t.Fatalf("status %d, %s: want statusInvalid", h.kind, body)
			}
			if _, err := conn.Write(header{magic: requestMagic, kind: OpSync, id: 3}.encode()); err != nil {
				t.Fatal(err)
			}
			if h, err := readHeader(conn, replyMagic); err != nil || h.kind != statusOK {
				t.Fatalf("the connection after: %+v, %v", h, err)
			}
		})
	}
	tooMany, _ := json.Marshal(TrimRequest{Length: 4096, Keep: many})
	conn := rawConn(t, addr)
	if _, err := conn.Write(append(header{magic: requestMagic, kind: OpTrimKeeping, id: 2, length: uint32(len(tooMany))}.encode(), tooMany...)); err != nil {
		t.Fatal(err)
	}
	if h, err := readHeader(conn, replyMagic); err != nil || h.kind != statusInvalid {
		t.Fatalf("a keep list of more names than a replica has snapshots: %+v, %v: want statusInvalid", h, err)
	}
	closing := map[string][]byte{
		"a name past its bound":      header{magic: requestMagic, kind: OpMarkRemoved, id: 2, length: maxNameBody + 1}.encode(),
		"a keep list past its bound": header{magic: requestMagic, kind: OpTrimKeeping, id: 2, length: maxNamesBody + 1}.encode(),
		"a purge with a length":      header{magic: requestMagic, kind: OpPurge, id: 2, length: 10}.encode(),
		"a growth with a length":     header{magic: requestMagic, kind: OpGrow, id: 2, offset: 1 << 30, length: 1}.encode(),
	}
	for name, frame := range closing {
		t.Run(name, func(t *testing.T) {
			conn := rawConn(t, addr)
			if _, err := conn.Write(frame); err != nil {
				t.Fatal(err)
			}
			if !closedSoon(conn) {
				t.Fatal("the server kept the connection open")
			}
		})
	}
	if r.Size() != volSize {
		t.Fatalf("the replica grew to %d bytes", r.Size())
	}
}
