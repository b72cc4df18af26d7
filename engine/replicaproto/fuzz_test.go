package replicaproto

import (
	"encoding/json"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// FuzzServerFrames feeds the server whatever bytes follow a valid open:
// it answers or closes the connection, and never panics or hangs.
func FuzzServerFrames(f *testing.F) {
	f.Add(header{magic: requestMagic, kind: OpWrite, id: 2, offset: 0, length: 4}.encode())
	f.Add(append(header{magic: requestMagic, kind: OpRead, id: 3, offset: 1 << 40, length: 4096}.encode(), 0))
	f.Add(header{magic: requestMagic, kind: OpTrim, id: 4, offset: 4096, length: 1 << 30}.encode())
	f.Add(header{magic: requestMagic, kind: OpSync, id: 5}.encode())
	f.Add(header{magic: requestMagic, kind: OpSetEpoch, id: 6, offset: 1 << 63}.encode())
	f.Add(header{magic: requestMagic, kind: OpChain, id: 7}.encode())
	snap := []byte(`{"name":"s","id":"i","labels":{"k":"v"}}`)
	f.Add(append(header{magic: requestMagic, kind: OpSnapshot, id: 8, length: uint32(len(snap))}.encode(), snap...))
	f.Add([]byte("not a frame at all"))
	// The ops of version 2: names of every kind, a purge, a growth past
	// its bound or the replica's size, trims keeping snapshots, bodies
	// past their bounds.
	for i, name := range []string{"s", "", "volume-head", "../x", "a\x00b", string(make([]byte, maxNameBody))} {
		f.Add(append(header{magic: requestMagic, kind: OpMarkRemoved, id: uint64(10 + i), length: uint32(len(name))}.encode(), name...))
		f.Add(append(header{magic: requestMagic, kind: OpRevert, id: uint64(20 + i), length: uint32(len(name))}.encode(), name...))
	}
	f.Add(append(append(header{magic: requestMagic, kind: OpSnapshot, id: 30, length: uint32(len(snap))}.encode(), snap...),
		append(header{magic: requestMagic, kind: OpMarkRemoved, id: 31, length: 1}.encode(), 's')...))
	f.Add(header{magic: requestMagic, kind: OpPurge, id: 32}.encode())
	f.Add(header{magic: requestMagic, kind: OpMarkRemoved, id: 33, length: maxNameBody + 1}.encode())
	f.Add(header{magic: requestMagic, kind: OpGrow, id: 34, offset: 2 << 20}.encode())
	f.Add(header{magic: requestMagic, kind: OpGrow, id: 35, offset: ^uint64(0)}.encode())
	f.Add(header{magic: requestMagic, kind: OpGrow, id: 36, offset: 4097}.encode())
	for i, body := range []string{`{"length":4096,"keep":["s"]}`, `{"length":18446744073709551615}`, `{"length":1,"keep":[""]}`, `[1,2`, `{"keep":null}`} {
		f.Add(append(header{magic: requestMagic, kind: OpTrimKeeping, id: uint64(40 + i), offset: 4096, length: uint32(len(body))}.encode(), body...))
	}
	f.Add(append(header{magic: requestMagic, kind: OpTrimKeeping, id: 50, offset: 1 << 20, length: 13}.encode(), `{"length":1}`+" "...))
	f.Add(header{magic: requestMagic, kind: OpTrimKeeping, id: 51, length: maxNamesBody + 1}.encode())
	// A large write at an offset whose sum with its length wraps around.
	f.Add(append(header{magic: requestMagic, kind: OpWrite, id: 9, offset: ^uint64(0) - 100, length: 2 * streamPiece}.encode(), make([]byte, 2*streamPiece)...))
	r, err := replica.Create(filepath.Join(f.TempDir(), "r1"), 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	defer r.Close()
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	s := NewServer(func(OpenRequest) (Replica, error) { return r, nil }, logrus.NewEntry(log))
	// A growth is real: each takes a map of the replica's blocks, which
	// the fuzzer's sizes must keep small.
	s.growLimit = 64 << 20
	term := uint64(0)
	f.Fuzz(func(t *testing.T, frames []byte) {
		term++
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() { s.ServeConn(server); close(done) }()
		body, _ := json.Marshal(OpenRequest{VolumeUID: "u", Replica: "r1", Engine: "fuzz", Term: term})
		go func() {
			_, _ = client.Write(append(header{magic: requestMagic, kind: OpOpen, id: 1, length: uint32(len(body))}.encode(), body...))
			_, _ = client.Write(frames)
			time.Sleep(20 * time.Millisecond)
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
	})
}
