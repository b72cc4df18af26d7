//go:build e2e

package ui

import (
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

// The harness of TestLonghornUI: Debian's chromium, headless, driven
// through the UI's own buttons and forms, with the checks every step makes.

// uiDist is Longhorn's web UI, built and unmodified, beside the repository,
// or where UI_DIST says (as for `make ui`: a git worktree is not beside
// it).
func uiDist(t *testing.T) string {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dist := filepath.Join(root, "..", "shared", "longhorn-ui", "dist")
	if d := os.Getenv("UI_DIST"); d != "" {
		dist = d
	}
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
	// The profile is removed once the browser is gone, with retries: a
	// child process of chromium may still write in it for a moment after
	// the browser's own exit, which t.TempDir's removal fails the test on.
	profile, err := os.MkdirTemp("", "longhorn-ui-profile-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(profile), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		removeProfile(t, profile)
	})
	b := &uiBrowser{t: t, ctx: ctx, base: base, shots: shots}
	chromedp.ListenTarget(ctx, func(ev any) {
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

func (b *uiBrowser) eval(js string, out any) error {
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
	_ = b.eval(`[...document.querySelectorAll(".ant-message, .ant-notification, .ant-form-explain")].map(e => "message: " + e.innerText).join("\n") + "\n" + document.body.innerText`, &text)
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

// load opens a page of the UI afresh, reloading it, as a user coming to it
// does, and waits until it shows text: a page reads some things once, as
// it opens (the volume page its snapshot tree).
func (b *uiBrowser) load(route, text string) {
	b.t.Helper()
	if err := b.eval(`window.location.hash = "#/`+route+`"; setTimeout(() => window.location.reload(), 0); true`, new(bool)); err != nil {
		b.t.Fatalf("open %s: %v", route, err)
	}
	time.Sleep(time.Second)
	b.waitText("page "+route, text)
}

func jsString(s any) string {
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

// modalOK presses the OK (or Yes) button of the open dialog and waits
// until every dialog has closed, the sign it was accepted.
func (b *uiBrowser) modalOK() {
	b.t.Helper()
	b.clickJS("the dialog's OK", `[...document.querySelectorAll(".ant-modal button, .ant-popover button")].filter(e => ["ok", "yes", "confirm", "delete"].includes(e.innerText.trim().toLowerCase()) && e.offsetParent !== null).pop()`)
	b.noDialog("the dialog")
}

// noDialog waits until every dialog has closed, the sign a form saved.
func (b *uiBrowser) noDialog(what string) {
	b.t.Helper()
	b.until(what+": the dialog closes", `![...document.querySelectorAll(".ant-modal-wrap")].some(e => getComputedStyle(e).display !== "none")`, 30*time.Second)
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
	b.closeMenus()
	b.clickJS("the menu of "+rowText, `(() => { const r = [...document.querySelectorAll("tr")].find(r => r.innerText.includes(`+jsString(rowText)+`)); const t = r && r.querySelector(".ant-dropdown-trigger"); if (t) { t.dispatchEvent(new MouseEvent("mouseover", {bubbles: true})); t.dispatchEvent(new MouseEvent("mouseenter", {bubbles: true})) } return t })()`)
	b.menuItem(item+" of "+rowText, item)
}

// closeMenus leaves every menu trigger and marks the menus still shown
// (those of rows that are gone stay open), so that menuItem picks from
// the next menu opened only.
func (b *uiBrowser) closeMenus() {
	b.t.Helper()
	_ = b.eval(`document.querySelectorAll(".ant-dropdown-trigger").forEach(t => { t.dispatchEvent(new MouseEvent("mouseout", {bubbles: true})); t.dispatchEvent(new MouseEvent("mouseleave", {bubbles: true})) }); true`, new(bool))
	time.Sleep(500 * time.Millisecond)
	_ = b.eval(`document.querySelectorAll(".ant-dropdown").forEach(d => { if (!d.classList.contains("ant-dropdown-hidden")) d.dataset.stale = "1"; else delete d.dataset.stale }); true`, new(bool))
}

// menuItem clicks the enabled item of the menu just opened.
func (b *uiBrowser) menuItem(what, item string) {
	b.t.Helper()
	b.clickJS(what, `[...document.querySelectorAll(".ant-dropdown:not(.ant-dropdown-hidden):not([data-stale]) .ant-dropdown-menu-item")].find(e => e.offsetParent !== null && e.innerText.trim() === `+jsString(item)+` && !e.className.includes("disabled"))`)
}

// treeMenu picks an item of the menu of the snapshot of the volume's
// snapshot tree whose shown name holds name.
func (b *uiBrowser) treeMenu(name, item string) {
	b.t.Helper()
	b.closeMenus()
	b.clickJS("the menu of snapshot "+name, `(() => { const t = [...document.querySelectorAll(".lh-tree-snapshot .ant-dropdown-trigger")].find(e => e.innerText.includes(`+jsString(name)+`)); if (t) { t.dispatchEvent(new MouseEvent("mouseover", {bubbles: true})); t.dispatchEvent(new MouseEvent("mouseenter", {bubbles: true})) } return t })()`)
	b.menuItem(item+" of snapshot "+name, item)
}

// maybeModalOK presses OK if a dialog opens within a few seconds.
func (b *uiBrowser) maybeModalOK() {
	b.t.Helper()
	find := `[...document.querySelectorAll(".ant-modal button, .ant-popover button")].find(e => ["ok", "yes", "confirm", "delete"].includes(e.innerText.trim().toLowerCase()) && e.offsetParent !== null)`
	for i := 0; i < 15; i++ {
		var clicked bool
		if err := b.eval(`(() => { const el = `+find+`; if (!el) return false; el.click(); return true })()`, &clicked); err == nil && clicked {
			b.noDialog("the dialog")
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// selectRow ticks the checkbox of the table row that holds rowText. The
// UI keeps the row as it was when ticked, to decide which buttons apply:
// a row ticked already is unticked and ticked again.
func (b *uiBrowser) selectRow(rowText string) {
	b.t.Helper()
	row := `(() => { const r = [...document.querySelectorAll("tr")].find(r => r.innerText.includes(` + jsString(rowText) + `)); return r && r.querySelector("input[type=checkbox]") })()`
	b.until("the checkbox of "+rowText, `(() => { const c = `+row+`; if (c && c.checked) c.click(); return !!c && !c.checked })()`, 30*time.Second)
	b.clickJS("the checkbox of "+rowText, row)
}

// rowShows waits until the table row that holds rowText also holds each
// of the texts.
func (b *uiBrowser) rowShows(rowText string, texts ...string) {
	b.t.Helper()
	b.until("the row of "+rowText+" shows "+strings.Join(texts, ", "), `(() => { const r = [...document.querySelectorAll("tr")].find(r => r.innerText.includes(`+jsString(rowText)+`)); return !!r && `+jsString(texts)+`.every(t => r.innerText.includes(t)) })()`, 30*time.Second)
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

// removeProfile removes the browser's profile folder, trying again for a
// few seconds while what chromium left running still writes in it.
func removeProfile(t *testing.T, dir string) {
	var err error
	for i := 0; i < 50; i++ {
		if err = os.RemoveAll(dir); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the browser's profile %s is left: %v", dir, err)
}
