package replicaproto

import (
	"math/bits"
	"sync"
)

// Bodies of requests and replies are taken from pools by size class
// (powers of two from minPooled to MaxMessage) and given back once their
// request is answered: a 1 MiB write would otherwise allocate, zero and
// leave to the collector 1 MiB a request, on memory that is cold when the
// replica copies it into its file. What the pools hold is bounded by what
// a connection has in flight (MaxInFlightBytes); the collector empties
// them when they go unused.
const minPooled = 4 << 10

// poolClasses is how many: minPooled<<(poolClasses-1) is MaxMessage.
const poolClasses = 11

var bodyPools [poolClasses]sync.Pool

// The last class is MaxMessage (either array's length is negative
// otherwise, which does not compile).
var (
	_ [MaxMessage - minPooled<<(poolClasses-1)]struct{}
	_ [minPooled<<(poolClasses-1) - MaxMessage]struct{}
)

// sizeClass is the index of the pool of buffers of at least n bytes.
func sizeClass(n int) int {
	if n <= minPooled {
		return 0
	}
	return bits.Len(uint((n - 1) / minPooled))
}

// getBuffer is a buffer of n bytes, not zeroed: the caller fills all of
// it before it is read. n is at most MaxMessage.
func getBuffer(n int) []byte {
	if n == 0 {
		return nil
	}
	c := sizeClass(n)
	if c >= len(bodyPools) {
		return make([]byte, n)
	}
	if b, ok := bodyPools[c].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, minPooled<<c)
}

// putBuffer gives back a buffer of getBuffer once nothing reads or
// writes it any more.
func putBuffer(b []byte) {
	c := sizeClass(cap(b))
	if cap(b) == 0 || c >= len(bodyPools) || cap(b) != minPooled<<c {
		return
	}
	b = b[:cap(b)]
	bodyPools[c].Put(&b)
}
