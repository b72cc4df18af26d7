package api

import (
	"bytes"
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
	var last []byte
	send := func() error {
		list, err := h.list(base)
		if err != nil {
			return err
		}
		data, err := json.Marshal(list)
		if err != nil {
			return err
		}
		if bytes.Equal(data, last) {
			return nil
		}
		last = data
		_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
		return conn.WriteMessage(websocket.TextMessage, data)
	}
	if err := send(); err != nil {
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
			if err := send(); err != nil {
				log.WithError(err).Debug("Websocket client dropped")
				return nil
			}
		}
	}
}
