// Package netguard keeps outgoing connections made on a user's behalf
// (a backing image download from a URL the user gives) away from what
// only the cluster should reach: loopback, link-local addresses (the
// cloud metadata service at 169.254.169.254 among them), private and
// shared ranges (where pods and services live), unless allowed.
//
// The check runs in the net.Dialer's Control function, on the address
// actually dialed, after DNS resolution and on every connection: a name
// resolving to a refused address, or a redirect to one, is refused before
// any packet is sent to it. The HTTP client ignores proxies from the
// environment, whose address would be checked in place of the target's.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Options configure a Guard.
type Options struct {
	// Allow are ranges dialed even though they are refused by default
	// (an in-cluster image server, a lab's private network).
	Allow []netip.Prefix
	// Deny are more ranges to refuse, such as the cluster's service and
	// pod ranges when they are not private addresses. Deny wins over
	// Allow.
	Deny []netip.Prefix
	// Nodes are the cluster's nodes' own addresses, refused as the
	// built-in ranges are: only an allowed range inside one opens it
	// (the address itself), so allowing a node's private network does
	// not open the node, where a kubelet and host ports listen.
	Nodes []netip.Addr
}

// Guard checks the addresses of outgoing connections.
type Guard struct {
	o Options
}

// New returns a guard.
func New(o Options) *Guard { return &Guard{o: o} }

// RefusedError is a connection the guard refused.
type RefusedError struct {
	Addr   netip.Addr
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("address %s is %s: refused (only public addresses and allowed ranges may be reached)", e.Addr, e.Reason)
}

// refusal is a range refused by default, with what it is. An allowed
// range opens it only where the allowed range lies inside it: allowing
// 10.20.0.0/16 opens that part of 10.0.0.0/8, allowing 0.0.0.0/0 opens no
// refused range at all, so a wide allow list cannot re-open loopback or
// a node. A range that is never opened (the cloud metadata services) is
// refused whatever the allow list says.
type refusal struct {
	prefix netip.Prefix
	reason string
	never  bool
}

// Cloud metadata services: they hand out the node's credentials, and no
// download has reason to reach them.
var metadata = []refusal{
	{netip.MustParsePrefix("169.254.169.254/32"), "link-local (the cloud metadata service)", true},
	{netip.MustParsePrefix("169.254.170.2/32"), "link-local (a container metadata service)", true},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "private (the cloud metadata service over IPv6)", true},
	{netip.MustParsePrefix("100.100.100.200/32"), "shared address space (a cloud metadata service)", true},
}

// ranges refused by default, with what they are, after the metadata
// services.
var refused = append(append([]refusal(nil), metadata...), []refusal{
	{netip.MustParsePrefix("0.0.0.0/32"), "unspecified", true},
	{netip.MustParsePrefix("0.0.0.0/8"), "in \"this network\" (0.0.0.0/8)", false},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback", false},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local", false},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (10.0.0.0/8)", false},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (172.16.0.0/12)", false},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (192.168.0.0/16)", false},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (100.64.0.0/10, carrier-grade NAT and some cluster networks)", false},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved (IETF protocol assignments)", false},
	{netip.MustParsePrefix("198.18.0.0/15"), "reserved (benchmarking)", false},
	{netip.MustParsePrefix("192.0.2.0/24"), "reserved for documentation (TEST-NET-1)", false},
	{netip.MustParsePrefix("198.51.100.0/24"), "reserved for documentation (TEST-NET-2)", false},
	{netip.MustParsePrefix("203.0.113.0/24"), "reserved for documentation (TEST-NET-3)", false},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast", false},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast", false},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (240.0.0.0/4)", false},
	{netip.MustParsePrefix("::/128"), "unspecified", true},
	{netip.MustParsePrefix("::1/128"), "loopback", false},
	{netip.MustParsePrefix("fe80::/10"), "link-local", false},
	{netip.MustParsePrefix("fc00::/7"), "private (unique local, fc00::/7)", false},
	{netip.MustParsePrefix("fec0::/10"), "site-local (fec0::/10, deprecated but still routed by some networks)", false},
	{netip.MustParsePrefix("ff00::/8"), "multicast", false},
	// Tunnels and translators whose gateway would connect to an IPv4
	// address this guard cannot see reliably: refused whole.
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64 (64:ff9b:1::/48), which a gateway turns into an IPv4 address of the local network", false},
	{netip.MustParsePrefix("2001::/32"), "a Teredo tunnel (2001::/32), whose relay connects to an IPv4 address it carries", false},
	{netip.MustParsePrefix("2001:db8::/32"), "reserved for documentation (2001:db8::/32)", false},
	{netip.MustParsePrefix("100::/64"), "discard-only (100::/64)", false},
}...)

// Prefixes that carry an IPv4 address inside an IPv6 one, which a
// gateway (or the kernel, for the IPv4-compatible form) may turn into a
// connection to that IPv4 address.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	compatible = netip.MustParsePrefix("::/96")
)

// embedded returns the IPv4 address an IPv6 address stands for, if any:
// IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d, deprecated;
// :: and ::1 are not), NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::).
func embedded(ip netip.Addr) (netip.Addr, bool) {
	if ip.Is4In6() {
		return ip.Unmap(), true
	}
	b := ip.As16()
	switch {
	case compatible.Contains(ip) && ip != netip.IPv6Unspecified() && ip != netip.IPv6Loopback():
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case nat64.Contains(ip):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// Check returns nil when ip may be dialed, else a *RefusedError saying
// what kind of address it is.
func (g *Guard) Check(ip netip.Addr) error {
	ip = ip.WithZone("")
	// A denied range is judged on the address as dialed first: a deny of
	// 2002::/16 or 64:ff9b::/96 holds whatever IPv4 address is inside.
	if err := g.denied(ip); err != nil {
		return err
	}
	if v4, ok := embedded(ip); ok {
		if err := g.Check(v4); err != nil {
			var r *RefusedError
			if errors.As(err, &r) {
				r.Reason += fmt.Sprintf(" (as %s)", ip)
			}
			return err
		}
		return nil
	}
	for _, r := range refused {
		if r.prefix.Contains(ip) && (r.never || !g.opens(ip, r.prefix)) {
			return &RefusedError{Addr: ip, Reason: r.reason}
		}
	}
	for _, n := range g.o.Nodes {
		if n.WithZone("") == ip && !g.opens(ip, netip.PrefixFrom(ip, ip.BitLen())) {
			return &RefusedError{Addr: ip, Reason: "a node's own address (allow it alone to reach it)"}
		}
	}
	return nil
}

// opens reports whether an allowed range that holds ip lies inside the
// refused range: it is that refused range's own length or longer.
func (g *Guard) opens(ip netip.Addr, refused netip.Prefix) bool {
	for _, p := range g.o.Allow {
		if p.Contains(ip) && p.Bits() >= refused.Bits() {
			return true
		}
	}
	return false
}

// denied refuses an address in one of the guard's denied ranges.
func (g *Guard) denied(ip netip.Addr) error {
	for _, p := range g.o.Deny {
		if p.Contains(ip) {
			return &RefusedError{Addr: ip, Reason: "in a denied range " + p.String()}
		}
	}
	return nil
}

// Control is a net.Dialer Control function: it checks the address a
// connection is about to be made to.
func (g *Guard) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("netguard: cannot check address %q: %w", address, err)
	}
	return g.Check(ap.Addr())
}

// Dialer returns a dialer whose connections the guard checks.
func (g *Guard) Dialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: g.Control}
}

// maxRedirects bounds a chain of redirects.
const maxRedirects = 10

// HTTPClient returns a client whose every connection, redirects'
// included, the guard checks. It uses no proxy, follows at most 10
// redirects and only to http and https.
func (g *Guard) HTTPClient() *http.Client {
	d := g.Dialer()
	transport := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          10,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to a %s: URL: only http or https may be followed", req.URL.Scheme)
			}
			return nil
		},
	}
}

// ParsePrefixes parses a comma-separated list of CIDR ranges or single
// addresses; the error names the item that does not parse.
func ParsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if !strings.Contains(item, "/") {
			ip, err := netip.ParseAddr(item)
			if err != nil {
				return nil, fmt.Errorf("%q is neither an IP address nor a CIDR range such as 10.0.0.0/8", item)
			}
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(item)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR range such as 10.0.0.0/8: %v", item, err)
		}
		if p.Masked() != p {
			return nil, fmt.Errorf("%q has bits set past its prefix length: write %s", item, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}

// TooLargeError is a body longer than its bound.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("more than %d bytes: larger than allowed", e.Limit)
}

// LimitReader reads r up to limit bytes and fails with a *TooLargeError,
// rather than a quiet EOF, when r holds more.
func LimitReader(r io.Reader, limit int64) io.Reader {
	return &limitReader{r: r, left: limit, limit: limit}
}

type limitReader struct {
	r           io.Reader
	left, limit int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			return 0, &TooLargeError{Limit: l.limit}
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}
