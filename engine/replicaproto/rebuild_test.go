package replicaproto

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// A rebuild over the protocol, mutual TLS on both ends: the layers read
// from one server are written into a replica of another, the chain's
// metadata last; the target then holds what the source does.
func TestARebuildOverTheProtocol(t *testing.T) {
	src, srcAddr, _, tlsConfig := serveReplicaSized(t, volSize, true)
	dst, dstAddr, _, _ := serveReplicaSized(t, volSize, true)
	from, err := Dial(context.Background(), srcAddr, tlsConfig, open("engine-a", 1), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	to, err := Dial(context.Background(), dstAddr, tlsConfig, open("engine-a", 1), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer to.Close()
	if !from.CarriesRebuild() || to.Opened().Rebuilding {
		t.Fatalf("version %d, rebuilding %v", from.Version(), to.Opened().Rebuilding)
	}
	if _, err := from.WriteAt(randomBytes(1<<20), 3<<20); err != nil {
		t.Fatal(err)
	}
	if err := from.Snapshot(SnapshotRequest{Name: "old", ID: "id-old", Created: time.Now(), Labels: map[string]string{"a": "b"}}); err != nil {
		t.Fatal(err)
	}
	if err := from.MarkRemoved("old"); err != nil {
		t.Fatal(err)
	}
	if err := to.BeginRebuild(); err != nil {
		t.Fatal(err)
	}
	joined := randomBytes(8192)
	for _, c := range []*Client{from, to} {
		if _, err := c.WriteAt(joined, 5<<20); err != nil {
			t.Fatal(err)
		}
		if err := c.Snapshot(SnapshotRequest{Name: "rebuild", ID: "id-r", Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	chain, err := from.OpenLayers("rebuild")
	if err != nil {
		t.Fatal(err)
	}
	if len(chain.Snapshots) != 2 || len(src.ViewedSnapshots()) != 2 {
		t.Fatalf("the chain: %+v, held %v", chain, src.ViewedSnapshots())
	}
	for _, s := range chain.Snapshots {
		for at := int64(0); at >= 0; {
			exts, next, err := from.LayerExtents(s.Name, at, 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range exts {
				p := make([]byte, e.End-e.Start)
				sum, err := from.ReadLayer(s.Name, p, e.Start)
				if err != nil {
					t.Fatal(err)
				}
				got, err := to.WriteLayer(s.Name, p, e.Start, sum)
				if err != nil || got != sum {
					t.Fatalf("write of layer %s: %v", s.Name, err)
				}
			}
			at = next
		}
	}
	if _, err := to.WriteLayer("rebuild", []byte("x"), 0, [32]byte{}); err == nil {
		t.Fatal("a write whose digest is wrong was taken")
	}
	if err := to.InstallChain(chain); err != nil {
		t.Fatal(err)
	}
	if err := from.CloseLayers(); err != nil {
		t.Fatal(err)
	}
	if len(src.ViewedSnapshots()) != 0 || dst.Rebuilding() {
		t.Fatalf("held %v, rebuilding %v", src.ViewedSnapshots(), dst.Rebuilding())
	}
	a, b := make([]byte, volSize), make([]byte, volSize)
	_, _ = src.ReadAt(a, 0)
	_, _ = dst.ReadAt(b, 0)
	if !bytes.Equal(a, b) {
		t.Fatal("the rebuilt replica reads otherwise")
	}
	if _, removed := dst.SnapshotRemoved("old"); !removed {
		t.Fatal("the removed mark was not copied")
	}
	// A newer engine fences the rebuild's writes.
	newer, err := Dial(context.Background(), dstAddr, tlsConfig, open("engine-b", 2), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	if _, err := to.WriteLayer("rebuild", joined, 0, sha(joined)); !errors.Is(err, replica.ErrFenced) {
		t.Fatalf("a fenced engine's write of a layer: %v", err)
	}
}

// A server of version 2 is sent no op of a rebuild: the client refuses
// them, naming the version, and one sent all the same closes the
// connection.
func TestAServerOfVersion2IsSentNoRebuild(t *testing.T) {
	_, addr, s := serveReplica(t, false)
	s.speaks.Store(2)
	c := dial(t, addr, open("engine-a", 1))
	if c.Version() != 2 || !c.Carries() || c.CarriesRebuild() {
		t.Fatalf("version %d", c.Version())
	}
	_, e1 := c.OpenLayers("s")
	_, _, e2 := c.LayerExtents("s", 0, 1)
	_, e3 := c.ReadLayer("s", make([]byte, 1), 0)
	_, e4 := c.WriteLayer("s", nil, 0, [32]byte{})
	for i, err := range []error{e1, e2, e3, e4, c.BeginRebuild(), c.InstallChain(replica.ChainMeta{}), c.CloseLayers()} {
		if !errors.Is(err, ErrOldServer) || !strings.Contains(err.Error(), "version 2") {
			t.Fatalf("op %d on a server of version 2: %v", i, err)
		}
	}
	conn := rawConn(t, addr)
	if _, err := conn.Write(header{magic: requestMagic, kind: OpBeginRebuild, id: 2}.encode()); err != nil {
		t.Fatal(err)
	}
	if !closedSoon(conn) {
		t.Fatal("a server of version 2 answered a rebuild's op")
	}
}

// FuzzRebuildOps sends each op of a rebuild with whatever body and
// offset, to a source holding its layers and to a target being rebuilt:
// the server answers or closes the connection, never panics or hangs.
func FuzzRebuildOps(f *testing.F) {
	name := []byte("s")
	withCount := func(n uint32, name []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, n), name...) }
	f.Add(OpOpenLayers, uint64(0), name)
	f.Add(OpOpenLayers, uint64(0), []byte("../../etc"))
	f.Add(OpLayerExtents, uint64(0), withCount(4, name))
	f.Add(OpLayerExtents, uint64(1<<63), withCount(MaxExtents+1, name))
	f.Add(OpLayerExtents, uint64(0), []byte{0, 0})
	f.Add(OpReadLayer, uint64(0), withCount(4096, name))
	f.Add(OpReadLayer, uint64(1<<40), withCount(MaxMessage+1, name))
	f.Add(OpReadLayer, uint64(4095), withCount(4097, []byte("volume-head")))
	f.Add(OpCloseLayers, uint64(0), []byte{})
	f.Add(OpBeginRebuild, uint64(0), []byte{})
	sum := sha([]byte("data"))
	f.Add(OpWriteLayer, uint64(0), append(append([]byte{1, 's'}, sum[:]...), "data"...))
	f.Add(OpWriteLayer, uint64(volSize-2), append(append([]byte{1, 's'}, sum[:]...), "data"...))
	f.Add(OpWriteLayer, uint64(0), []byte{200, 's'})
	f.Add(OpWriteLayer, uint64(0), []byte{})
	chain, _ := json.Marshal(replica.ChainMeta{Top: "s", Size: 1 << 20, Snapshots: []replica.LayerMeta{{Name: "s"}}})
	f.Add(OpInstallChain, uint64(0), chain)
	f.Add(OpInstallChain, uint64(0), []byte(`{"top":"s","snapshots":[{"name":"s","parent":"s"}]}`))
	f.Add(OpInstallChain, uint64(0), []byte(`{`))

	dir := f.TempDir()
	src, err := replica.Create(filepath.Join(dir, "src"), 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	defer src.Close()
	if _, err := src.WriteAt(bytes.Repeat([]byte{7}, 8192), 4096); err != nil {
		f.Fatal(err)
	}
	if err := src.CreateSnapshot("s", true, time.Now(), nil); err != nil {
		f.Fatal(err)
	}
	dst, err := replica.Create(filepath.Join(dir, "dst"), 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	defer dst.Close()
	if err := dst.BeginRebuild(); err != nil {
		f.Fatal(err)
	}
	if err := dst.CreateSnapshot("s", true, time.Now(), nil); err != nil {
		f.Fatal(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	s := NewServer(func(req OpenRequest) (Replica, error) {
		if req.Replica == "src" {
			return src, nil
		}
		return dst, nil
	}, logrus.NewEntry(log))
	term := uint64(0)
	f.Fuzz(func(t *testing.T, op byte, offset uint64, body []byte) {
		op = OpOpenLayers + op%(OpInstallChain-OpOpenLayers+1)
		for _, target := range []string{"src", "dst"} {
			term++
			client, server := net.Pipe()
			done := make(chan struct{})
			go func() { s.ServeConn(server); close(done) }()
			open, _ := json.Marshal(OpenRequest{VolumeUID: "u", Replica: target, Engine: "fuzz", Term: term})
			frames := append(header{magic: requestMagic, kind: OpOpen, id: 1, length: uint32(len(open))}.encode(), open...)
			if target == "src" {
				frames = append(append(frames, header{magic: requestMagic, kind: OpOpenLayers, id: 2, length: 1}.encode()...), 's')
			}
			frames = append(append(frames, header{magic: requestMagic, kind: op, id: 3, offset: offset, length: uint32(len(body))}.encode()...), body...)
			go func() {
				_, _ = client.Write(frames)
				time.Sleep(10 * time.Millisecond)
				_ = client.Close()
			}()
			go func() {
				buf := make([]byte, 64<<10)
				for {
					if _, err := client.Read(buf); err != nil {
						return
					}
				}
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the server did not end the connection")
			}
		}
	})
}

func sha(p []byte) [32]byte { return sha256.Sum256(p) }
