package netguard

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

func TestCheckRefusesInternalAddresses(t *testing.T) {
	g := New(Options{})
	for _, tc := range []struct{ ip, want string }{
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"::1", "loopback"},
		{"169.254.169.254", "link-local"},
		{"169.254.169.254", "metadata"},
		{"fe80::1", "link-local"},
		{"10.43.0.1", "private"},
		{"172.16.5.4", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"fd00::1", "private"},
		{"100.64.0.1", "shared"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"0.1.2.3", "this network"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"240.0.0.1", "reserved"},
		// IPv4 in IPv6 clothing is judged as the IPv4 address it is.
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:169.254.169.254", "link-local"},
		{"64:ff9b::a9fe:a9fe", "link-local"},
		{"2002:a9fe:a9fe::1", "link-local"},
		// The deprecated IPv4-compatible form, which Linux still routes.
		{"::127.0.0.1", "loopback"},
		{"::a9fe:a9fe", "metadata"},
		{"::10.0.0.1", "private"},
		// Translators and tunnels refused whole, and other special ranges.
		{"64:ff9b:1::a00:1", "local-use NAT64"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
		{"fec0::1", "site-local"},
		{"2001:db8::1", "documentation"},
		{"100::1", "discard-only"},
		{"192.0.2.10", "TEST-NET-1"},
		{"198.51.100.10", "TEST-NET-2"},
		{"203.0.113.10", "TEST-NET-3"},
		{"::ffff:203.0.113.10", "TEST-NET-3"},
	} {
		err := g.Check(netip.MustParseAddr(tc.ip))
		var refused *RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal saying %q", tc.ip, err, tc.want)
		}
	}
	for _, ip := range []string{"8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2001:4860:4860::8888"} {
		if err := g.Check(netip.MustParseAddr(ip)); err != nil {
			t.Errorf("%s: %v, want allowed", ip, err)
		}
	}
}

func TestCheckAllowAndDenyRanges(t *testing.T) {
	g := New(Options{
		Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")},
		Deny:  []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("10.43.0.0/16")},
	})
	for _, ip := range []string{"10.1.2.3", "127.0.0.1", "::ffff:10.9.9.9", "8.8.8.8"} {
		if err := g.Check(netip.MustParseAddr(ip)); err != nil {
			t.Errorf("%s: %v, want allowed", ip, err)
		}
	}
	for ip, want := range map[string]string{"10.43.0.10": "denied range 10.43.0.0/16", "203.0.113.7": "denied range",
		"127.0.0.2": "loopback", "192.168.1.1": "private", "169.254.169.254": "link-local"} {
		if err := g.Check(netip.MustParseAddr(ip)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a refusal saying %q", ip, err, want)
		}
	}
}

// An allow list opens a refused range only where an allowed range lies
// inside it: a wide list (0.0.0.0/0, ::/0, a /7 over two private ranges)
// re-opens neither loopback nor the private ranges, the cloud metadata
// services stay refused whatever is allowed, and a node's own address
// only opens when it is allowed alone.
func TestAWideAllowListOpensNoBuiltInRefusal(t *testing.T) {
	nodes := []netip.Addr{netip.MustParseAddr("10.1.0.5"), netip.MustParseAddr("5.6.7.8")}
	for _, tc := range []struct {
		name, allow, ip string
		want            string // "" when allowed
	}{
		{"0.0.0.0/0 does not open loopback", "0.0.0.0/0", "127.0.0.1", "loopback"},
		{"::/0 does not open loopback", "::/0", "::1", "loopback"},
		{"::/0 does not open loopback in IPv6 clothing", "::/0", "::ffff:127.0.0.1", "loopback"},
		{"0.0.0.0/0 does not open a private range", "0.0.0.0/0", "10.9.9.9", "private"},
		{"0.0.0.0/0 does not open the metadata service", "0.0.0.0/0", "169.254.169.254", "metadata"},
		{"link-local allowed whole: the metadata service stays refused", "169.254.0.0/16", "169.254.169.254", "metadata"},
		{"the metadata address allowed alone stays refused", "169.254.169.254/32", "169.254.169.254", "metadata"},
		{"the IPv6 metadata address allowed alone stays refused", "fd00:ec2::254/128", "fd00:ec2::254", "metadata"},
		{"another container metadata address", "169.254.0.0/16", "169.254.170.2", "metadata"},
		{"0.0.0.0 stays refused", "0.0.0.0/8", "0.0.0.0", "unspecified"},
		{"a /7 over two private ranges opens neither", "10.0.0.0/7", "10.1.1.1", "private"},
		{"a range inside a private one opens it", "10.20.0.0/16", "10.20.3.4", ""},
		{"loopback allowed by its own range", "127.0.0.0/8", "127.0.0.1", ""},
		{"link-local allowed whole opens the rest of it", "169.254.0.0/16", "169.254.10.10", ""},
		{"a node's address is refused though its network is allowed", "10.0.0.0/8", "10.1.0.5", "node"},
		{"a node's public address is refused under 0.0.0.0/0", "0.0.0.0/0", "5.6.7.8", "node"},
		{"a node's public address is refused with no allow list", "", "5.6.7.8", "node"},
		{"a node's address allowed alone", "10.0.0.0/8,10.1.0.5/32", "10.1.0.5", ""},
		{"another address of the node's network", "10.0.0.0/8", "10.1.0.6", ""},
	} {
		allow, err := ParsePrefixes(tc.allow)
		if err != nil {
			t.Fatal(err)
		}
		err = New(Options{Allow: allow, Nodes: nodes}).Check(netip.MustParseAddr(tc.ip))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want allowed", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a refusal saying %q", tc.name, err, tc.want)
		}
	}
}

// A denied range holds for the address as dialed, not only for the IPv4
// address inside it: denying 2002::/16 or 64:ff9b::/96 refuses every 6to4
// or NAT64 address, public IPv4 inside or not.
func TestDeniedIPv6RangesHoldWhateverIPv4IsInside(t *testing.T) {
	g := New(Options{Deny: []netip.Prefix{netip.MustParsePrefix("2002::/16"), netip.MustParsePrefix("64:ff9b::/96")}})
	for _, ip := range []string{"2002:808:808::1", "64:ff9b::808:808"} {
		if err := g.Check(netip.MustParseAddr(ip)); err == nil || !strings.Contains(err.Error(), "denied range") {
			t.Errorf("%s: %v, want refused as in a denied range", ip, err)
		}
	}
	// Without the deny, the public IPv4 inside is allowed, as 8.8.8.8 is.
	if err := New(Options{}).Check(netip.MustParseAddr("2002:808:808::1")); err != nil {
		t.Errorf("6to4 of a public address without a deny: %v", err)
	}
	// An IPv4 range denied holds for its IPv6 forms too.
	g = New(Options{Deny: []netip.Prefix{netip.MustParsePrefix("8.8.8.0/24")}})
	for _, ip := range []string{"8.8.8.8", "::ffff:8.8.8.8", "::8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"} {
		if err := g.Check(netip.MustParseAddr(ip)); err == nil || !strings.Contains(err.Error(), "denied range 8.8.8.0/24") {
			t.Errorf("%s: %v, want refused as in 8.8.8.0/24", ip, err)
		}
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes(" 10.0.0.0/8, 192.168.1.5 ,fd00::/8,,")
	if err != nil || fmt.Sprint(got) != "[10.0.0.0/8 192.168.1.5/32 fd00::/8]" {
		t.Fatalf("%v, %v", got, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.1/8"} {
		if _, err := ParsePrefixes(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v, want an error naming it", bad, err)
		}
	}
}

// The dialer's Control sees the address actually dialed: a refused one is
// never connected to. No packet goes to any refused address here: Control
// runs before connect(2).
func TestControlRefusesBeforeConnecting(t *testing.T) {
	g := New(Options{})
	for _, addr := range []string{"169.254.169.254:80", "[fe80::1%lo]:80", "10.0.0.1:443", "[::ffff:127.0.0.1]:80"} {
		if err := g.Control("tcp", addr, nil); err == nil {
			t.Errorf("Control(%s) allowed it", addr)
		}
	}
	if err := g.Control("tcp", "93.184.215.14:443", nil); err != nil {
		t.Errorf("a public address: %v", err)
	}
	if err := g.Control("tcp", "not-an-address", nil); err == nil {
		t.Error("an unparsable address was allowed")
	}
}

// counted serves on 127.0.0.1 (or ::1) and counts the requests it gets.
func counted(t *testing.T, network string, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	if network == "tcp6" {
		l, err := net.Listen("tcp6", "[::1]:0")
		if err != nil {
			t.Skipf("no IPv6 loopback: %v", err)
		}
		srv.Listener.Close()
		srv.Listener = l
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &n
}

// A name that resolves to a refused address is refused: "localhost" is
// dialed as 127.0.0.1 or ::1, and the server is never reached.
func TestClientRefusesANameResolvingToLoopback(t *testing.T) {
	srv, hits := counted(t, "tcp4", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "secret") })
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	c := New(Options{}).HTTPClient()
	_, err := c.Get(fmt.Sprintf("http://localhost:%d/", port))
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("GET localhost: %v, want refused", err)
	}
	if strings.Contains(err.Error(), "secret") || hits.Load() != 0 {
		t.Fatalf("the refused server was reached (%d requests): %v", hits.Load(), err)
	}
}

// A redirect from an allowed server to a refused address is refused: the
// check runs on every connection, redirects' included.
func TestClientRefusesARedirectToLoopback(t *testing.T) {
	target, targetHits := counted(t, "tcp6", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "secret") })
	allowed, _ := counted(t, "tcp4", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/latest/meta-data/", http.StatusFound)
	})
	c := New(Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}).HTTPClient()
	_, err := c.Get(allowed.URL)
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("redirect to ::1: %v, want refused", err)
	}
	if targetHits.Load() != 0 {
		t.Fatal("the redirect's refused target was reached")
	}
	// The allowed server itself answers.
	c2 := New(Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}}).HTTPClient()
	resp, err := c2.Get(allowed.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if targetHits.Load() != 1 {
		t.Fatalf("with ::1 allowed the redirect was not followed: %d", targetHits.Load())
	}
}

func TestClientRefusesOtherSchemesAndEnvProxies(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	srv, hits := counted(t, "tcp4", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	c := New(Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}).HTTPClient()
	_, err := c.Get(srv.URL)
	if err == nil || !strings.Contains(err.Error(), "http or https") {
		t.Fatalf("redirect to file://: %v", err)
	}
	if hits.Load() != 1 {
		t.Fatalf("the proxy from the environment was used instead of the address checked: %d", hits.Load())
	}
}

func TestLimitReader(t *testing.T) {
	r := LimitReader(strings.NewReader(strings.Repeat("x", 100)), 64)
	n, err := io.Copy(io.Discard, r)
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) || n > 64 || !strings.Contains(err.Error(), "more than 64 bytes") {
		t.Fatalf("copied %d: %v", n, err)
	}
	r = LimitReader(strings.NewReader(strings.Repeat("x", 64)), 64)
	if n, err := io.Copy(io.Discard, r); n != 64 || err != nil {
		t.Fatalf("exactly the limit: %d %v", n, err)
	}
}
