package api

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/gorilla/websocket"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cadence-storage/longhorn-manager/datastore"
)

const (
	// maxStreamPeriod bounds the least time between two sends a client may ask for.
	maxStreamPeriod = 15 * time.Second
	pingPeriod      = 15 * time.Second
	writeWait       = 10 * time.Second
)

// hub fans change notices of one resource type out to its websocket
// clients. A notice never blocks: each client has a one-slot channel, so a
// burst of changes becomes one pending notice, and a slow client holds up
// nobody but itself.
type hub struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	// list renders the current collection from the cache.
	list func(base string) (any, error)
	// gen counts the notices; encoded holds, per base URL, the newest
	// encoding of the list made after a notice, so the streams a notice
	// wakes share one encoding of the change instead of each making its
	// own (guarded by encodeMu, so they wait for it rather than all
	// encoding at once). A stream's first list is always encoded fresh:
	// a list may show what no notice of this hub announces.
	gen      uint64
	encodeMu sync.Mutex
	encoded  map[string]encodedList
}

// encodedList is a list encoded at notice gen, with its digest, which is
// all a stream keeps of what it sent last.
type encodedList struct {
	gen  uint64
	data []byte
	sum  [sha256.Size]byte
}

// maxEncodedBases bounds the encodings a hub keeps: one per base URL the
// clients reach the API by, which are few.
const maxEncodedBases = 16

// encode returns the list encoded for base: fresh, or after a notice the
// encoding another stream made for the same notice.
func (h *hub) encode(base string, fresh bool) (encodedList, error) {
	h.encodeMu.Lock()
	defer h.encodeMu.Unlock()
	h.mu.Lock()
	gen := h.gen
	e, ok := h.encoded[base]
	h.mu.Unlock()
	if ok && e.gen == gen && !fresh {
		return e, nil
	}
	list, err := h.list(base)
	if err != nil {
		return encodedList{}, err
	}
	data, err := json.Marshal(list)
	if err != nil {
		return encodedList{}, err
	}
	e = encodedList{gen: gen, data: data, sum: sha256.Sum256(data)}
	h.mu.Lock()
	if h.encoded == nil || (len(h.encoded) >= maxEncodedBases && h.encoded[base].data == nil) {
		h.encoded = map[string]encodedList{}
	}
	h.encoded[base] = e
	h.mu.Unlock()
	return e, nil
}

func (h *hub) subscribe() chan struct{} {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch
}

func (h *hub) unsubscribe(ch chan struct{}) {
	h.mu.Lock()
	delete(h.subs, ch)
	h.mu.Unlock()
}

func (h *hub) notify() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gen++
	for ch := range h.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (h *hub) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { h.notify() },
		UpdateFunc: func(_, _ any) { h.notify() },
		DeleteFunc: func(any) { h.notify() },
	}
}

type streams struct {
	hubs map[string]*hub
	// events is the informer of the namespace's Kubernetes events.
	events coreinformers.EventInformer
}

func newStreams(s *Server, inf datastore.Informers) *streams {
	lh := inf.Longhorn.Longhorn().V1beta2()
	st := &streams{hubs: map[string]*hub{
		"recurringjobs": {list: func(base string) (any, error) {
			jobs, err := s.ds.ListRecurringJobsRO()
			return s.recurringJobCollection(base, jobs), err
		}},
		"volumes": {list: func(base string) (any, error) {
			volumes, err := s.ds.ListVolumesRO(labels.Everything())
			return s.volumeCollection(base, volumes), err
		}},
		"settings": {list: func(base string) (any, error) {
			settings, err := s.ds.ListSettingsRO()
			return s.settingCollection(base, settings), err
		}},
		"nodes": {list: func(base string) (any, error) {
			nodes, err := s.ds.ListNodesRO()
			return s.nodeCollection(base, nodes), err
		}},
		"backingimages": {list: func(base string) (any, error) {
			images, err := s.ds.ListBackingImagesRO()
			return s.backingImageCollection(base, images), err
		}},
	}}
	informers := map[string][]cache.SharedIndexInformer{
		"recurringjobs": {lh.RecurringJobs().Informer()},
		"volumes":       {lh.Volumes().Informer(), lh.Engines().Informer(), lh.Replicas().Informer()},
		"settings":      {lh.Settings().Informer()},
		"nodes":         {lh.Nodes().Informer()},
		"backingimages": {lh.BackingImages().Informer()},
	}
	st.addUIHubs(s, inf, informers)
	for name, h := range st.hubs {
		h.subs = map[chan struct{}]struct{}{}
		for _, i := range informers[name] {
			i.AddEventHandler(h.handler())
		}
	}
	return st
}

// serveStream serves /v1/ws/{resource} and /v1/ws/{period}/{resource}: the
// full list on connect, then the new list after each change, at most once
// per period and only when it differs from the last one sent.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request) error {
	vars := mux.Vars(r)
	st := s.streams
	h, ok := st.hubs[vars["resource"]]
	if !ok {
		return notFound("no stream for %q; streams exist for %s", vars["resource"], strings.Join(st.names(), ", "))
	}
	var period time.Duration
	if p := vars["period"]; p != "" {
		d, err := time.ParseDuration(p)
		if err != nil {
			return badRequest("period: %q is not a duration such as 1s or 500ms", p)
		}
		period = min(max(d, 0), maxStreamPeriod)
	}
	release, err := s.bounds().streams.acquire(r.RemoteAddr)
	if err != nil {
		return err
	}
	defer release()
	upgrader := websocket.Upgrader{CheckOrigin: s.checkOrigin}
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		// The upgrader has answered the client already.
		return nil
	}
	// A client sends nothing but control frames: a longer message ends the
	// stream, and so does a client silent past pongWait.
	conn.SetReadLimit(maxStreamMessage)
	_ = conn.SetReadDeadline(time.Now().Add(pongWait))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(pongWait)) })
	log := s.logger.WithFields(logrus.Fields{"stream": vars["resource"], "remote": r.RemoteAddr})
	log.Debug("Websocket client connected")
	notices := h.subscribe()
	defer h.unsubscribe(notices)
	defer conn.Close()

	// The reader handles control frames and notices the client leaving.
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
			_ = conn.SetReadDeadline(time.Now().Add(pongWait))
		}
	}()

	base := baseURL(r)
	// Of what it sent last the stream keeps the digest alone, not a copy
	// of the list.
	var last [sha256.Size]byte
	sent := false
	send := func(fresh bool) error {
		e, err := h.encode(base, fresh)
		if err != nil {
			return err
		}
		if sent && e.sum == last {
			return nil
		}
		last, sent = e.sum, true
		_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
		return conn.WriteMessage(websocket.TextMessage, e.data)
	}
	if err := send(true); err != nil {
		log.WithError(err).Debug("Websocket client dropped")
		return nil
	}
	ping := time.NewTicker(pingPeriod)
	defer ping.Stop()
	lastSend := time.Now()
	for {
		select {
		case <-gone:
			log.Debug("Websocket client left")
			return nil
		case <-ping.C:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				return nil
			}
		case <-notices:
			if wait := period - time.Since(lastSend); wait > 0 {
				select {
				case <-time.After(wait):
				case <-gone:
					return nil
				}
			}
			lastSend = time.Now()
			if err := send(false); err != nil {
				log.WithError(err).Debug("Websocket client dropped")
				return nil
			}
		}
	}
}
