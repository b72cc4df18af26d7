package app

import (
	"sync"

	"github.com/sirupsen/logrus"
)

// maxDistinctWarnings bounds the warnings remembered as said: past it, a
// new one is logged each time it comes (a misbehaving apiserver cannot
// grow the manager's memory).
const maxDistinctWarnings = 256

// onceWarnings logs each distinct warning the Kubernetes API answers
// with once, through the daemon's logger. client-go's default logs every
// one: the apiserver warns on each write that adds Longhorn's finalizer
// (`longhorn.io`, a name Longhorn's own objects carry and this manager
// keeps for them), so taking in 10,000 jobs logged 10,000 lines.
type onceWarnings struct {
	log  *logrus.Entry
	mu   sync.Mutex
	said map[string]bool
}

func newOnceWarnings(log *logrus.Entry) *onceWarnings {
	return &onceWarnings{log: log.WithField("component", "kube-api"), said: map[string]bool{}}
}

// HandleWarningHeader is client-go's rest.WarningHandler; code 299 is
// the only warning code the apiserver sends.
func (w *onceWarnings) HandleWarningHeader(code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	w.mu.Lock()
	said := w.said[text]
	if !said && len(w.said) < maxDistinctWarnings {
		w.said[text] = true
	}
	w.mu.Unlock()
	if !said {
		w.log.WithField("warning", text).Warn("The Kubernetes API sent a warning (each distinct warning is logged once)")
	}
}
