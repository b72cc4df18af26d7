package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

type etcdServer struct {
	server    *embed.Etcd
	clientURL string
}

// startEtcd runs an embedded single-member etcd with its data in dir, so a
// restart of the control plane keeps every object. It listens on unix
// sockets beside dir, not on loopback ports: a port on 127.0.0.1 is open
// to every user of the host, and etcd's plain HTTP would give any of them
// every object (the cluster's Secrets and CA keys among them), where a
// socket in the data folder (0700) is its user's alone.
func startEtcd(dir string) (*etcdServer, error) {
	abs, err := filepath.Abs(filepath.Dir(dir))
	if err != nil {
		return nil, err
	}
	clientSock, peerSock := filepath.Join(abs, "etcd-client.sock"), filepath.Join(abs, "etcd-peer.sock")
	for _, sock := range []string{clientSock, peerSock} {
		if len(sock) > maxSocketPath {
			return nil, fmt.Errorf("etcd's socket %s is longer than the %d bytes a unix socket's path may have: choose a shorter --data-dir", sock, maxSocketPath)
		}
	}
	// etcd takes a client socket's path from the URL's path, and a peer
	// socket's from its host for listening; the peer URL it advertises and
	// records is the path form, which it can parse back.
	clientURL := &url.URL{Scheme: "unix", Path: clientSock}
	peerListen := &url.URL{Scheme: "unix", Host: peerSock}
	peerURL := &url.URL{Scheme: "unix", Path: peerSock}
	cfg := embed.NewConfig()
	cfg.Name = "controlplane"
	cfg.Dir = dir
	// etcd logs through zap; keep it in a file beside its data, off the
	// terminal (it reports its own orderly shutdown as errors).
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{filepath.Join(filepath.Dir(dir), "etcd.log")}
	cfg.ListenClientUrls = []url.URL{*clientURL}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.ListenPeerUrls = []url.URL{*peerListen}
	cfg.AdvertisePeerUrls = []url.URL{*peerURL}
	cfg.InitialCluster = cfg.Name + "=" + peerURL.String()
	// A restart reuses the member recorded in the data folder, and the
	// apiserver is the only client: no need for a metrics listener.
	cfg.ListenMetricsUrls = nil

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd in %s: %w", dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd failed while starting: %w", err)
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcd did not become ready within 60s (data in %s)", dir)
	}
	for _, sock := range []string{clientSock, peerSock} {
		if err := os.Chmod(sock, 0o600); err != nil {
			e.Close()
			return nil, fmt.Errorf("close etcd's socket %s to other users: %w", sock, err)
		}
	}
	return &etcdServer{server: e, clientURL: clientURL.String()}, nil
}

// maxSocketPath is the longest path of a unix socket Linux takes
// (sun_path is 108 bytes with its terminating NUL).
const maxSocketPath = 107

func (e *etcdServer) Close() { e.server.Close() }
