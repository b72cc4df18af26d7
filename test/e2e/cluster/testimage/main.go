// Command testimage is the one program of the real single-node cluster's
// local image (see test/e2e/cluster): containerd's pod sandbox ("pause",
// its default command) and the test pods' commands, so that no image comes
// from a registry. It uses the standard library and client-go's rest
// package (the in-cluster client config programs in pods use), and is
// built static.
//
//	testimage pause            wait for SIGTERM or SIGINT, reaping children
//	testimage echo WORDS...    print the words and exit
//	testimage sleep SECONDS    sleep, then exit
//	testimage true             exit 0 (a readiness probe)
//	testimage whoami URL       ask the apiserver at URL who the pod's
//	                           ServiceAccount token is, and print the name
//	testimage incluster        the same, with client-go's in-cluster config
//	                           (the kubernetes Service, the token volume)
//	testimage serve PORT       answer HTTP GETs with the pod's host name
//	testimage fetch URL...     GET each URL (retrying for a minute) and
//	                           print the bodies
//	testimage lookup NAME...   resolve each name as the pod's programs do
//	                           and print "NAME ADDRESS..." or "NAME
//	                           not-found" (NXDOMAIN)
//	testimage status URL [TOKEN-FILE]
//	                           GET the HTTPS URL, with the token as a
//	                           bearer token when given, not checking the
//	                           server's certificate, and print the status
//	                           code (a tenant's view of a service: what it
//	                           answers, not whom it proves to be)
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// tokenDir is where the ServiceAccount admission plugin mounts a pod's
// projected token, its cluster's CA bundle and its namespace.
const tokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		args = []string{"pause"}
	}
	var err error
	switch args[0] {
	case "pause":
		pause()
	case "echo":
		fmt.Println(strings.Join(args[1:], " "))
	case "sleep":
		err = sleep(args[1:])
	case "true":
	case "whoami":
		err = whoami(args[1:])
	case "incluster":
		err = inCluster()
	case "serve":
		err = serve(args[1:])
	case "fetch":
		err = fetch(args[1:])
	case "lookup":
		err = lookup(args[1:])
	case "status":
		err = status(args[1:])
	default:
		err = fmt.Errorf("unknown command %q", args[0])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testimage %s: %v\n", args[0], err)
		os.Exit(1)
	}
}

// pause is a pod sandbox's process: it holds the pod's namespaces and, as
// their first process, reaps the orphans that end up with it.
func pause() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return
		case <-children:
			for {
				var status syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}

func sleep(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: sleep SECONDS")
	}
	seconds, err := strconv.Atoi(args[0])
	if err != nil {
		return err
	}
	time.Sleep(time.Duration(seconds) * time.Second)
	return nil
}

// whoami sends a SelfSubjectReview with the pod's token: the apiserver
// answers with the user it authenticated, so a wrong or unsigned token
// fails here.
func whoami(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: whoami APISERVER-URL")
	}
	token, err := os.ReadFile(tokenDir + "/token")
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(tokenDir + "/ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("no certificate in %s/ca.crt", tokenDir)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	user, err := selfSubjectReview(client, args[0], strings.TrimSpace(string(token)))
	if err != nil {
		return err
	}
	fmt.Println(user)
	return nil
}

// inCluster is whoami as a program in a pod calls the apiserver: with
// client-go's in-cluster config, which takes the kubernetes Service's
// address from KUBERNETES_SERVICE_HOST and _PORT and checks the serving
// certificate against it with the token volume's ca.crt.
func inCluster() error {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	cfg.Timeout = 30 * time.Second
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	// The client's transport adds the token.
	user, err := selfSubjectReview(client, cfg.Host, "")
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Host, err)
	}
	fmt.Println(user)
	return nil
}

// selfSubjectReview posts a SelfSubjectReview to the apiserver at base,
// with token unless it is "", and returns the user it names.
func selfSubjectReview(client *http.Client, base, token string) (string, error) {
	body := `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`
	req, err := http.NewRequest(http.MethodPost, strings.TrimRight(base, "/")+"/apis/authentication.k8s.io/v1/selfsubjectreviews", bytes.NewBufferString(body))
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("%s: %s", resp.Status, data)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(data, &review); err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}

// serve answers every GET with the host name, the pod's name.
func serve(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: serve PORT")
	}
	name, err := os.Hostname()
	if err != nil {
		return err
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, name)
	})
	server := &http.Server{Addr: ":" + args[0], Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	return server.ListenAndServe()
}

// fetch GETs each URL until it answers 200 or a minute has passed (a new
// Service's rules take a moment to reach kube-proxy), and prints the
// bodies.
func fetch(urls []string) error {
	if len(urls) == 0 {
		return fmt.Errorf("usage: fetch URL...")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(time.Minute)
	for _, url := range urls {
		for {
			body, err := get(client, url)
			if err == nil {
				fmt.Print(body)
				break
			}
			if time.Now().After(deadline) {
				return err
			}
			fmt.Fprintf(os.Stderr, "testimage fetch: %v; trying again\n", err)
			time.Sleep(time.Second)
		}
	}
	return nil
}

// lookup resolves each name with the pod's resolv.conf (the cluster DNS,
// its search path). A name the DNS says does not exist is printed as
// such; any other failure (a server that does not answer, SERVFAIL) ends
// the command with an error.
func lookup(names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("usage: lookup NAME...")
	}
	for _, name := range names {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		addrs, err := net.DefaultResolver.LookupHost(ctx, name)
		cancel()
		var dnsErr *net.DNSError
		switch {
		case err == nil:
			fmt.Println(name, strings.Join(addrs, " "))
		case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
			fmt.Println(name, "not-found")
		default:
			return err
		}
	}
	return nil
}

func get(client *http.Client, url string) (string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(data), nil
}

// status GETs an HTTPS URL, with a bearer token read from a file when
// one is named, and prints the response's status code. The server's
// certificate is not checked: a tenant has no CA to check it with, and
// what is asked is only what the server answers it.
func status(args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return fmt.Errorf("usage: status URL [TOKEN-FILE]")
	}
	req, err := http.NewRequest(http.MethodGet, args[0], nil)
	if err != nil {
		return err
	}
	if len(args) == 2 {
		token, err := os.ReadFile(args[1])
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a tenant's view: see above
	}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	fmt.Println(resp.StatusCode)
	return nil
}
