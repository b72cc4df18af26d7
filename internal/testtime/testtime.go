// Package testtime scales the tests' waits for a slow machine: every wait
// for something to happen (a cache to follow a write, a controller to
// act) takes its timeout through Scale, and LONGHORN_TEST_TIMEOUT_SCALE
// (a number, 1 when unset) multiplies them all, for a loaded CI machine or
// a run under the race detector. Only timeouts are scaled, never what a
// test asserts about time.
package testtime

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// EnvScale is the variable that scales every test wait.
const EnvScale = "LONGHORN_TEST_TIMEOUT_SCALE"

var factor = sync.OnceValue(func() float64 {
	v := os.Getenv(EnvScale)
	if v == "" {
		return 1
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 1 || f > 100 {
		panic(fmt.Sprintf("%s=%q: must be a number from 1 to 100", EnvScale, v))
	}
	return f
})

// Scale is d times LONGHORN_TEST_TIMEOUT_SCALE.
func Scale(d time.Duration) time.Duration { return time.Duration(float64(d) * factor()) }
