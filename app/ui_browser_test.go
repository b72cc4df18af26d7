package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/api"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

// uiDist is Longhorn's web UI, built and unmodified, beside the repository.
func uiDist(t *testing.T) string {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dist := filepath.Join(root, "..", "shared", "longhorn-ui", "dist")
	if _, err := os.Stat(filepath.Join(dist, "index.html")); err != nil {
		t.Skipf("Longhorn's UI is not built beside the repository (%s: %v): the browser test needs ../shared/longhorn-ui/dist", dist, err)
	}
	return dist
}

// uiBrowser drives Debian's chromium, headless, on the UI.
type uiBrowser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	shots string
	n     int

	mu       sync.Mutex
	problems []string
}

func newUIBrowser(t *testing.T, base string) *uiBrowser {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the browser test needs Debian's chromium: run scripts/install-test-deps.sh (%v)", err)
	}
	shots, err := os.MkdirTemp("", "longhorn-ui-screenshots-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &uiBrowser{t: t, ctx: ctx, base: base, shots: shots}
	chromedp.ListenTarget(ctx, func(ev interface{}) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg := e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
			b.problem("uncaught exception: " + msg)
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError || e.Type == runtime.APITypeAssert {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, strings.TrimSpace(string(a.Value)+" "+a.Description))
				}
				b.problem("console." + string(e.Type) + ": " + strings.Join(parts, " "))
			}
		case *log.EventEntryAdded:
			if e.Entry.Level == log.LevelError {
				b.problem("browser log: " + e.Entry.Text + " " + e.Entry.URL)
			}
		}
	})
	if err := chromedp.Run(ctx, log.Enable(), chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return b
}

func (b *uiBrowser) problem(p string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(p) > 800 {
		p = p[:800] + "..."
	}
	b.problems = append(b.problems, p)
}

// checkConsole fails the test for every uncaught exception and console
// error since the last check.
func (b *uiBrowser) checkConsole(where string) {
	b.t.Helper()
	b.mu.Lock()
	problems := b.problems
	b.problems = nil
	b.mu.Unlock()
	for _, p := range problems {
		b.t.Errorf("%s: %s", where, p)
	}
}

func (b *uiBrowser) eval(js string, out interface{}) error {
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate(js, out))
}

// shot saves a screenshot named after the step.
func (b *uiBrowser) shot(name string) {
	b.t.Helper()
	var buf []byte
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, chromedp.CaptureScreenshot(&buf)); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	b.n++
	_ = os.WriteFile(filepath.Join(b.shots, fmt.Sprintf("%02d-%s.png", b.n, name)), buf, 0o644)
}

// until polls a JavaScript expression until it is true, saving a
// screenshot and failing when it does not become true in time.
func (b *uiBrowser) until(what, js string, timeout time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		var ok bool
		if last = b.eval(js, &ok); last == nil && ok {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.shot("failed")
	var text string
	_ = b.eval(`document.body.innerText`, &text)
	if len(text) > 3000 {
		text = text[:3000]
	}
	b.t.Fatalf("%s: not within %s (%v); the page says:\n%s", what, timeout, last, text)
}

// page opens a page of the UI by its route and waits until it shows text.
func (b *uiBrowser) page(route, text string) {
	b.t.Helper()
	if err := b.eval(`window.location.hash = "#/`+route+`"; true`, new(bool)); err != nil {
		b.t.Fatalf("open %s: %v", route, err)
	}
	b.waitText("page "+route, text)
}

func jsString(s string) string {
	out, _ := json.Marshal(s)
	return string(out)
}

// waitText waits until the page's text holds text.
func (b *uiBrowser) waitText(what, text string) {
	b.t.Helper()
	b.until(what+" shows "+text, `document.body.innerText.includes(`+jsString(text)+`)`, 30*time.Second)
}

// clickJS waits until the element the expression finds exists and is
// enabled, then clicks it.
func (b *uiBrowser) clickJS(what, find string) {
	b.t.Helper()
	b.until("click "+what, `(() => { const el = (`+find+`); if (!el || el.disabled || el.classList.contains("ant-btn-disabled")) return false; el.click(); return true })()`, 30*time.Second)
}

// button clicks the button labelled text inside scope (a CSS selector).
func (b *uiBrowser) button(scope, text string) {
	b.t.Helper()
	b.clickJS(scope+" button "+text, `[...document.querySelectorAll(`+jsString(scope+" button")+`)].find(e => e.innerText.trim() === `+jsString(text)+` && e.offsetParent !== null)`)
}

// modalOK presses the OK (or Yes) button of the open dialog.
func (b *uiBrowser) modalOK() {
	b.t.Helper()
	b.clickJS("the dialog's OK", `[...document.querySelectorAll(".ant-modal button, .ant-popover button")].find(e => ["OK", "Yes", "Confirm"].includes(e.innerText.trim()) && e.offsetParent !== null)`)
}

// noDialog waits until every dialog has closed, the sign a form saved.
func (b *uiBrowser) noDialog(what string) {
	b.t.Helper()
	b.until(what+": the dialog closes", `![...document.querySelectorAll(".ant-modal-wrap")].some(e => e.style.display !== "none" && e.offsetParent !== null)`, 30*time.Second)
}

// typeText replaces the value of the input the selector finds, as typing.
func (b *uiBrowser) typeText(selector, text string) {
	b.t.Helper()
	b.until("type into "+selector, `(() => { const el = document.querySelector(`+jsString(selector)+`); if (!el) return false; el.focus(); el.select(); return document.execCommand("insertText", false, `+jsString(text)+`) })()`, 30*time.Second)
}

// choose opens the select the selector finds and picks the option text.
func (b *uiBrowser) choose(selector, option string) {
	b.t.Helper()
	b.clickJS("open "+selector, `document.querySelector(`+jsString(selector)+`)`)
	b.clickJS("option "+option, `[...document.querySelectorAll(".ant-select-dropdown:not(.ant-select-dropdown-hidden) li")].find(e => e.innerText.trim() === `+jsString(option)+`)`)
}

// rowMenu picks an item of the operations menu of the table row that
// holds rowText.
func (b *uiBrowser) rowMenu(rowText, item string) {
	b.t.Helper()
	b.clickJS("the menu of "+rowText, `(() => { const r = [...document.querySelectorAll("tr")].find(r => r.innerText.includes(`+jsString(rowText)+`)); const t = r && r.querySelector(".ant-dropdown-trigger"); if (t) { t.dispatchEvent(new MouseEvent("mouseover", {bubbles: true})); t.dispatchEvent(new MouseEvent("mouseenter", {bubbles: true})) } return t })()`)
	b.clickJS(item+" of "+rowText, `[...document.querySelectorAll(".ant-dropdown:not(.ant-dropdown-hidden) .ant-dropdown-menu-item")].find(e => e.innerText.trim() === `+jsString(item)+`)`)
}

// selectRow ticks the checkbox of the table row that holds rowText.
func (b *uiBrowser) selectRow(rowText string) {
	b.t.Helper()
	b.clickJS("the checkbox of "+rowText, `(() => { const r = [...document.querySelectorAll("tr")].find(r => r.innerText.includes(`+jsString(rowText)+`)); const c = r && r.querySelector("input[type=checkbox]"); return c && !c.checked ? c : null })()`)
}

// streamsHealthy checks that no websocket indicator of the footer shows
// an error: the UI draws each of its streams as a link icon, red when the
// stream failed.
func (b *uiBrowser) streamsHealthy(where string) {
	b.t.Helper()
	var failed int
	if err := b.eval(`[...document.querySelectorAll("img[alt=WS]")].filter(i => atob(i.src.split(",")[1]).includes("#ee1111")).length`, &failed); err != nil {
		b.t.Fatal(err)
	}
	if failed > 0 {
		b.shot("streams-failed")
		b.t.Errorf("%s: %d websocket streams failed", where, failed)
	}
}

// TestLonghornUI walks Longhorn's own web UI, served behind a proxy that
// behaves as the UI image's nginx, against a manager on the real control
// plane, with the UI's own buttons and forms.
func TestLonghornUI(t *testing.T) {
	dist := uiDist(t)
	e := newAPIEnv(t)
	manager, err := url.Parse(e.base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(api.UIProxy(dist, manager))
	t.Cleanup(proxy.Close)
	b := newUIBrowser(t, proxy.URL)
	ctx := context.Background()

	// An event of the namespace, for the dashboard's event log.
	if _, err := e.kube.CoreV1().Events(e.ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "ui-test-event"},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "node-1", Namespace: e.ns},
		Reason:         "UITest", Message: "an event for the UI's event log", Type: corev1.EventTypeNormal,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
		Source: corev1.EventSource{Component: "ui-test"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("nodes", func(t *testing.T) {
		b.t = t
		b.page("node", "node-1")
		b.until("node-1 Ready and Schedulable", `(() => { const r = [...document.querySelectorAll("tr")].find(r => r.innerText.includes("node-1")); return !!r && r.innerText.includes("Ready") && r.innerText.includes("Schedulable") && / Gi/.test(r.innerText) })()`, 30*time.Second)
		b.shot("nodes")
		b.checkConsole("nodes")
	})

	t.Run("volume create", func(t *testing.T) {
		b.t = t
		b.page("volume", "Create Volume")
		b.button("", "Create Volume")
		b.typeText(".ant-modal #name", "ui-vol")
		b.typeText(".ant-modal #size", "1")
		b.typeText(".ant-modal #numberOfReplicas", "1")
		b.until("the form offers the v1 data engine", `document.querySelector(".ant-modal #dataEngine").innerText.trim() === "v1"`, 10*time.Second)
		b.shot("volume-create-form")
		b.modalOK()
		b.noDialog("volume create")
		v := e.waitVolumeFor(t, 30*time.Second, "ui-vol", "ui-vol created detached", func(v map[string]interface{}) bool {
			return v["state"] == "detached"
		})
		if v["size"] != "1073741824" || v["numberOfReplicas"].(float64) != 1 || v["frontend"] != "blockdev" {
			t.Errorf("created %v", v)
		}
		b.until("the list shows ui-vol detached, 1 Gi", `(() => { const r = [...document.querySelectorAll("tr")].find(r => r.innerText.includes("ui-vol")); return !!r && r.innerText.includes("Detached") && r.innerText.includes("1 Gi") && /ago/.test(r.innerText) })()`, 30*time.Second)
		b.shot("volumes")
		b.checkConsole("volume create")
	})

	t.Run("volume attach", func(t *testing.T) {
		b.t = t
		b.selectRow("ui-vol")
		b.button("", "Attach")
		b.choose(".ant-modal #host", "node-1")
		b.shot("volume-attach-form")
		b.modalOK()
		b.noDialog("attach")
		e.waitVolumeFor(t, 120*time.Second, "ui-vol", "ui-vol attached to node-1", func(v map[string]interface{}) bool {
			return v["state"] == "attached" && v["currentNodeID"] == "node-1"
		})
		b.until("the list shows ui-vol healthy on node-1", `(() => { const r = [...document.querySelectorAll("tr")].find(r => r.innerText.includes("ui-vol")); return !!r && r.innerText.includes("Healthy") && r.innerText.includes("on node-1") })()`, 30*time.Second)
		b.shot("volume-attached")
		b.checkConsole("volume attach")
	})

	t.Run("volume snapshot", func(t *testing.T) {
		b.t = t
		b.page("volume/ui-vol", "Take Snapshot")
		b.waitText("the volume's page", "Healthy")
		b.until("the volume's replica, running on node-1", `document.body.innerText.includes("Replicas") && /Healthy\s*node-1\s*Node[\s\S]*Running/.test(document.body.innerText)`, 30*time.Second)
		b.button("", "Take Snapshot")
		var snapName string
		eventually(t, 30*time.Second, "a Snapshot object of ui-vol, taken", func() (bool, error) {
			list, err := e.lh.LonghornV1beta2().Snapshots(e.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, s := range list.Items {
				if s.Spec.Volume == "ui-vol" && s.Status.CreationTime != "" && s.Status.ReadyToUse {
					snapName = s.Name
					return true, nil
				}
			}
			return false, nil
		})
		b.until("the snapshot tree shows the snapshot", `[...document.querySelectorAll(".lh-tree-snapshot .snapshot-name, .lh-tree-snapshot")].some(e => e.innerText.includes(`+jsString(snapName[:8])+`))`, 30*time.Second)
		b.shot("volume-snapshot")
		b.checkConsole("volume snapshot")
	})

	t.Run("volume detach", func(t *testing.T) {
		b.t = t
		b.page("volume", "ui-vol")
		b.selectRow("ui-vol")
		b.button("", "Detach")
		b.modalOK()
		e.waitVolumeFor(t, 120*time.Second, "ui-vol", "ui-vol detached", func(v map[string]interface{}) bool {
			return v["state"] == "detached"
		})
		b.until("the list shows ui-vol detached", `(() => { const r = [...document.querySelectorAll("tr")].find(r => r.innerText.includes("ui-vol")); return !!r && r.innerText.includes("Detached") })()`, 30*time.Second)
		b.shot("volume-detached")
		b.checkConsole("volume detach")
	})

	t.Run("dashboard", func(t *testing.T) {
		b.t = t
		b.page("dashboard", "Event Log")
		// One detached volume, one schedulable node, and the event.
		b.until("the dashboard counts one volume and one node", `(() => { const t = document.body.innerText; return /Detached\s*1/.test(t) && /Schedulable\s*1/.test(t) && !t.includes("No Volume") && !t.includes("No Node") })()`, 30*time.Second)
		b.waitText("the event log", "an event for the UI's event log")
		b.shot("dashboard")
		b.streamsHealthy("dashboard")
		b.checkConsole("dashboard")
	})

	t.Run("recurring jobs", func(t *testing.T) {
		b.t = t
		b.page("recurringJob", "Create Recurring Job")
		b.button("", "Create Recurring Job")
		b.typeText(".ant-modal #name", "ui-snap")
		b.typeText(".ant-modal #retain", "2")
		b.typeText(`.ant-modal #groups\[0\]`, "gold")
		b.typeText(`.ant-modal #labels\[0\]\.key`, "team")
		b.typeText(`.ant-modal #labels\[0\]\.value`, "db")
		b.shot("recurring-job-form")
		b.modalOK()
		b.noDialog("recurring job create")
		// Reads come from the informer cache, a moment after the write.
		var job map[string]interface{}
		eventually(t, 10*time.Second, "ui-snap created", func() (bool, error) {
			r := e.call(t, "GET", "/v1/recurringjobs/ui-snap", "")
			job = r.body
			return r.status == 200, nil
		})
		if job["task"] != "snapshot" || job["retain"].(float64) != 2 || fmt.Sprint(job["groups"]) != "[gold]" || fmt.Sprint(job["labels"]) != "map[team:db]" {
			t.Errorf("created %v", job)
		}
		b.until("the list shows ui-snap", `[...document.querySelectorAll("tr")].some(r => r.innerText.includes("ui-snap") && r.innerText.includes("gold"))`, 30*time.Second)

		b.rowMenu("ui-snap", "Edit")
		b.typeText(".ant-modal #retain", "5")
		b.modalOK()
		b.noDialog("recurring job edit")
		eventually(t, 10*time.Second, "ui-snap keeps 5", func() (bool, error) {
			return e.call(t, "GET", "/v1/recurringjobs/ui-snap", "").expect(t, 200).body["retain"].(float64) == 5, nil
		})
		b.shot("recurring-jobs")

		b.rowMenu("ui-snap", "Delete")
		b.modalOK()
		eventually(t, 15*time.Second, "ui-snap deleted", func() (bool, error) {
			return e.call(t, "GET", "/v1/recurringjobs/ui-snap", "").status == 404, nil
		})
		b.until("the list no longer shows ui-snap", `![...document.querySelectorAll("tr")].some(r => r.innerText.includes("ui-snap"))`, 30*time.Second)
		b.checkConsole("recurring jobs")
	})

	t.Run("settings", func(t *testing.T) {
		b.t = t
		b.page("setting", "Save")
		b.until("the v1 data engine shown read-only", `!!document.querySelector("#v1-data-engine") && document.querySelector("#v1-data-engine").disabled`, 30*time.Second)
		b.typeText("#recurring-job-max-retention", "42")
		b.button("", "Save")
		eventually(t, 15*time.Second, "recurring-job-max-retention saved", func() (bool, error) {
			return e.call(t, "GET", "/v1/settings/recurring-job-max-retention", "").expect(t, 200).body["value"] == "42", nil
		})
		b.shot("settings")
		b.checkConsole("settings")
	})

	t.Run("backup", func(t *testing.T) {
		b.t = t
		// No backup target is set: the page lists nothing, without an error.
		b.page("backup", "No Data")
		b.shot("backup")
		b.streamsHealthy("backup")
		b.checkConsole("backup")
	})

	t.Run("volume delete", func(t *testing.T) {
		b.t = t
		b.page("volume", "ui-vol")
		b.selectRow("ui-vol")
		b.button("", "Delete")
		b.modalOK()
		eventually(t, 60*time.Second, "ui-vol deleted", func() (bool, error) {
			return e.call(t, "GET", "/v1/volumes/ui-vol", "").status == 404, nil
		})
		b.until("the list no longer shows ui-vol", `![...document.querySelectorAll("tr")].some(r => r.innerText.includes("ui-vol"))`, 30*time.Second)
		b.shot("volume-deleted")
		b.checkConsole("volume delete")
	})
}
