package api

import (
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"k8s.io/client-go/tools/cache"

	"github.com/cadence-storage/longhorn-manager/datastore"
)

// addUIHubs adds the streams Longhorn's UI opens on every page besides the
// project's own resources: events, backup targets, volume attachments,
// backup volumes and backups, system backups and restores, and empty ones for kinds the project does
// not have, which send an empty collection and stay open.
func (st *streams) addUIHubs(s *Server, inf datastore.Informers, informers map[string][]cache.SharedIndexInformer) {
	lh := inf.Longhorn.Longhorn().V1beta2()
	st.events = inf.Kube.Core().V1().Events()
	st.hubs["events"] = &hub{list: func(base string) (any, error) { return s.eventCollection(base) }}
	informers["events"] = []cache.SharedIndexInformer{st.events.Informer()}
	st.hubs["backuptargets"] = &hub{list: func(base string) (any, error) { return s.backupTargetCollection(base) }}
	informers["backuptargets"] = []cache.SharedIndexInformer{lh.BackupTargets().Informer()}
	st.hubs["volumeattachments"] = &hub{list: func(base string) (any, error) { return s.volumeAttachmentCollection(base) }}
	informers["volumeattachments"] = []cache.SharedIndexInformer{lh.Volumes().Informer()}
	st.hubs["backupvolumes"] = &hub{list: func(base string) (any, error) { return s.backupVolumeCollection(base) }}
	informers["backupvolumes"] = []cache.SharedIndexInformer{lh.BackupVolumes().Informer()}
	st.hubs["backups"] = &hub{list: func(base string) (any, error) { return s.allBackupsCollection(base) }}
	informers["backups"] = []cache.SharedIndexInformer{lh.Backups().Informer()}
	st.hubs["systembackups"] = &hub{list: func(base string) (any, error) { return s.systemBackupCollection(base) }}
	informers["systembackups"] = []cache.SharedIndexInformer{lh.SystemBackups().Informer()}
	st.hubs["systemrestores"] = &hub{list: func(base string) (any, error) { return s.systemRestoreCollection(base) }}
	informers["systemrestores"] = []cache.SharedIndexInformer{lh.SystemRestores().Informer()}
	st.hubs["instancemanagers"] = &hub{list: func(base string) (any, error) { return s.instanceManagerCollection(base) }}
	informers["instancemanagers"] = []cache.SharedIndexInformer{lh.InstanceManagers().Informer()}
	st.hubs["engineimages"] = &hub{list: func(base string) (any, error) { return s.engineImageCollection(base) }}
	informers["engineimages"] = []cache.SharedIndexInformer{lh.InstanceManagers().Informer(), lh.Engines().Informer()}
	for path := range emptyKinds {
		st.hubs[path] = &hub{list: func(base string) (any, error) { return emptyCollection(base, path), nil }}
	}
}

func (st *streams) names() []string {
	out := make([]string, 0, len(st.hubs))
	for name := range st.hubs {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// SetAllowedOrigins sets the browser origins (scheme://host[:port]) whose
// pages may open the websocket streams besides the manager's own address
// and the UI behind its proxy; see checkOrigin.
func (s *Server) SetAllowedOrigins(origins []string) {
	s.allowedOrigins = map[string]bool{}
	for _, o := range origins {
		if o = strings.TrimRight(strings.TrimSpace(o), "/"); o != "" {
			s.allowedOrigins[strings.ToLower(o)] = true
		}
	}
}

// checkOrigin decides which browser pages may open a websocket stream: a
// stream shows the cluster's state, and a page of another site must not
// read it through a user's browser. Clients that send no Origin (scripts,
// the CLI) are not browsers and are accepted.
//
// A browser page is accepted when its origin is one of --allowed-origins,
// or when it is the address the browser asked for: the Host header, or,
// behind a proxy such as the Longhorn UI's nginx (which rewrites Host to
// the manager's and sets X-Forwarded-Host to the browser's), the
// X-Forwarded-Host header. A browser's websocket cannot set that header
// itself, so a cross-site page cannot forge it. Against DNS rebinding (a
// site whose name comes to point at the manager or the proxy, so that its
// pages look same-origin) that address must also be one no outside site
// can own: an IP address, localhost or a name under .localhost, a name
// given to --api-allowed-hosts, or, without a proxy, the Host the Host check
// (--api-allowed-hosts) let through. A UI reached through a public DNS name
// needs that origin in --allowed-origins or the name in
// --api-allowed-hosts. Writes from a browser page (POST, PUT, DELETE)
// follow the same rule (see crossSite).
func (s *Server) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if s.allowedOrigins[strings.ToLower(strings.TrimRight(origin, "/"))] {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	host := r.Host
	fwd := firstForwarded(r.Header.Get("X-Forwarded-Host"))
	if fwd != "" {
		// A chain of proxies lists hosts, the browser's first.
		host = fwd
	}
	if !strings.EqualFold(u.Host, host) {
		return false
	}
	// Without a proxy, the Host check (guard) has already refused a Host
	// that is not a name of this manager, when it is on.
	l := s.bounds()
	return rebindSafe(host) || l.named(host) || (fwd == "" && l.checkHost)
}

// rebindSafe reports whether host (host or host:port) is a name no one
// can make point at this server but the browser's own machine: an IP
// address, localhost or a name under .localhost. Cluster-internal names
// (one without dots, or under .svc or .cluster.local) are not: a tenant
// who may create an Ingress serves any of them through the cluster's
// ingress controller (with an ExternalName Service to the UI), and a
// single label resolves through the user's search domains. The names the
// UI is served under go to --api-allowed-hosts.
func rebindSafe(hostport string) bool {
	host := hostName(hostport)
	return host != "" && (net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost"))
}
