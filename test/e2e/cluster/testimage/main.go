// Command testimage is the one program of the real single-node cluster's
// local image (see test/e2e/cluster): containerd's pod sandbox ("pause",
// its default command) and the test pods' commands, so that no image comes
// from a registry. It uses the standard library only and is built static.
//
//	testimage pause            wait for SIGTERM or SIGINT, reaping children
//	testimage echo WORDS...    print the words and exit
//	testimage sleep SECONDS    sleep, then exit
//	testimage true             exit 0 (a readiness probe)
//	testimage whoami URL       ask the apiserver at URL who the pod's
//	                           ServiceAccount token is, and print the name
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
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
	// The local control plane's certificate names the apiserver by its
	// loopback client's server name, which TESTIMAGE_SERVER_NAME gives.
	tlsConfig := &tls.Config{RootCAs: pool, ServerName: os.Getenv("TESTIMAGE_SERVER_NAME")}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	body := `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`
	req, err := http.NewRequest(http.MethodPost, strings.TrimRight(args[0], "/")+"/apis/authentication.k8s.io/v1/selfsubjectreviews", bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("%s: %s", resp.Status, data)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(data, &review); err != nil {
		return err
	}
	fmt.Println(review.Status.UserInfo.Username)
	return nil
}
