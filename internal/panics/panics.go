// Package panics turns a panic in work done for one object (a sync, a
// purge, a fetch, a connection, a volume of a recurring job) into an error
// of that object: one bad object must not take the process, and every
// other object with it, down.
package panics

import (
	"fmt"
	"runtime/debug"

	"github.com/sirupsen/logrus"
)

// Recover, deferred by a function with a named error result, turns a panic
// of that function into the error "internal error: <panic>" and logs the
// panic with its stack as an error. The object's status says what
// happened; the log says where.
//
//	func (s *Server) work(...) (err error) {
//		defer panics.Recover(log, &err)
func Recover(log logrus.FieldLogger, err *error) {
	r := recover()
	if r == nil {
		return
	}
	log.WithFields(logrus.Fields{"panic": fmt.Sprint(r), "stack": string(debug.Stack())}).Error("Recovered a panic")
	*err = fmt.Errorf("internal error: %v", r)
}
