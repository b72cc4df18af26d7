//go:build e2e

package ui

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/api"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// openRowMenu opens the operations menu of the table row that holds
// rowText and returns its items, each with whether it is greyed.
func (b *uiBrowser) openRowMenu(rowText string) map[string]bool {
	b.t.Helper()
	b.closeMenus()
	b.clickJS("the menu of "+rowText, `(() => { const r = [...document.querySelectorAll("tr")].find(r => r.innerText.includes(`+jsString(rowText)+`)); const t = r && r.querySelector(".ant-dropdown-trigger"); if (t) { t.dispatchEvent(new MouseEvent("mouseover", {bubbles: true})); t.dispatchEvent(new MouseEvent("mouseenter", {bubbles: true})) } return t })()`)
	return b.shownMenu("the menu of " + rowText)
}

// hideMenus leaves and clicks away from every menu and waits until none
// is shown, so that the next menu opened, even the same one, is told
// apart.
func (b *uiBrowser) hideMenus() {
	b.t.Helper()
	_ = b.eval(`document.querySelectorAll(".ant-dropdown-trigger").forEach(t => { t.dispatchEvent(new MouseEvent("mouseout", {bubbles: true})); t.dispatchEvent(new MouseEvent("mouseleave", {bubbles: true})) }); (document.querySelector("h1, .ant-layout-header, header") || document.body).dispatchEvent(new MouseEvent("mousedown", {bubbles: true})); true`, new(bool))
	b.until("every menu hides", `![...document.querySelectorAll(".ant-dropdown")].some(d => !d.classList.contains("ant-dropdown-hidden") && d.offsetParent !== null && getComputedStyle(d).display !== "none")`, 10*time.Second)
}

// rowItem picks an item of the row's menu, as rowMenu, after every menu
// has hidden.
func (b *uiBrowser) rowItem(rowText, item string) {
	b.t.Helper()
	b.hideMenus()
	b.rowMenu(rowText, item)
}

// shownMenu waits for the menu just opened and returns its items, each
// with whether it is greyed.
func (b *uiBrowser) shownMenu(what string) map[string]bool {
	b.t.Helper()
	const items = `[...document.querySelectorAll(".ant-dropdown:not(.ant-dropdown-hidden):not([data-stale]) .ant-dropdown-menu-item")].filter(e => e.offsetParent !== null)`
	b.until(what+" shows its items", items+`.length > 0`, 30*time.Second)
	var list []struct {
		Text     string `json:"text"`
		Disabled bool   `json:"disabled"`
	}
	if err := b.eval(items+`.map(e => ({text: e.innerText.trim(), disabled: e.className.includes("disabled") || !!e.querySelector("button[disabled]")}))`, &list); err != nil {
		b.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, it := range list {
		out[it.Text] = it.Disabled
	}
	return out
}

// recordRequests makes the page keep every XMLHttpRequest it sends (the
// UI's axios uses them) in window.__xhrLog, to tell what reached the
// manager.
func (b *uiBrowser) recordRequests() {
	b.t.Helper()
	const js = `(() => { if (!window.__xhrLog) { window.__xhrLog = []; const open = XMLHttpRequest.prototype.open, send = XMLHttpRequest.prototype.send;
		XMLHttpRequest.prototype.open = function (m, u) { this.__m = m; this.__u = u; return open.apply(this, arguments) };
		XMLHttpRequest.prototype.send = function (body) { this.addEventListener("loadend", () => window.__xhrLog.push({method: this.__m, url: String(this.__u), status: this.status, body: typeof body === "string" ? body : "", response: String(this.responseText || "").slice(0, 400)})); return send.apply(this, arguments) } }
		window.__xhrLog.length = 0; return true })()`
	if err := b.eval(js, new(bool)); err != nil {
		b.t.Fatal(err)
	}
}

type uiRequest struct {
	Method   string `json:"method"`
	URL      string `json:"url"`
	Status   int    `json:"status"`
	Body     string `json:"body"`
	Response string `json:"response"`
}

// writes are the POST, PUT and DELETE requests the page sent since
// recordRequests.
func (b *uiBrowser) writes() []uiRequest {
	b.t.Helper()
	var all []uiRequest
	if err := b.eval(`window.__xhrLog || []`, &all); err != nil {
		b.t.Fatal(err)
	}
	var out []uiRequest
	for _, r := range all {
		if r.Method != "GET" && r.Method != "get" {
			out = append(out, r)
		}
	}
	return out
}

// checkConsoleExcept is checkConsole, allowing browser log lines that
// hold one of allowed (the network log of a request the manager refused
// on purpose): they are no uncaught error.
func (b *uiBrowser) checkConsoleExcept(where string, allowed ...string) {
	b.t.Helper()
	b.mu.Lock()
	problems := b.problems
	b.problems = nil
	b.mu.Unlock()
next:
	for _, p := range problems {
		for _, a := range allowed {
			if strings.HasPrefix(p, "browser log: ") && strings.Contains(p, a) {
				continue next
			}
		}
		b.t.Errorf("%s: %s", where, p)
	}
}

// newUIEnv is a manager on the real control plane, Longhorn's UI served in
// front of it as `longhorn-manager ui` serves it, and a browser on the UI.
func newUIEnv(t *testing.T) (*framework.APIEnv, *uiBrowser) {
	t.Helper()
	dist := uiDist(t)
	e := framework.NewAPIEnv(t)
	manager, err := url.Parse(e.Base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(api.UIProxy(dist, manager, nil, nil))
	t.Cleanup(proxy.Close)
	return e, newUIBrowser(t, proxy.URL)
}

// antiAffinityItems are the volume menu's three anti-affinity items, each
// with the volume action its form posts and the field it sends.
var antiAffinityItems = []struct{ item, action, field string }{
	{"Update Replica Soft Anti Affinity", "updateReplicaSoftAntiAffinity", "replicaSoftAntiAffinity"},
	{"Update Replica Zone Soft Anti Affinity", "updateReplicaZoneSoftAntiAffinity", "replicaZoneSoftAntiAffinity"},
	{"Update Replica Disk Soft Anti Affinity", "updateReplicaDiskSoftAntiAffinity", "replicaDiskSoftAntiAffinity"},
}

// TestLonghornUIVolumeMenu walks every item of Longhorn's UI's volume menu
// (the row's menu and the bulk menu of the volume list) against the
// manager on the real control plane: an item for what the manager does
// not do is absent or greyed, or, where the UI shows it whatever the
// volume offers, answers with the manager's reason, shown by the UI; no
// item claims a success that did not happen, and the browser logs no
// uncaught error.
func TestLonghornUIVolumeMenu(t *testing.T) {
	e, b := newUIEnv(t)

	e.Call(t, "POST", "/v1/volumes", `{"name":"menu-vol","size":"16Mi","numberOfReplicas":1,"dataEngine":"v1"}`).Expect(t, 200)
	e.WaitVolumeFor(t, 30*time.Second, "menu-vol", "menu-vol detached", func(v map[string]any) bool { return v["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/menu-vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	e.WaitVolumeFor(t, 60*time.Second, "menu-vol", "menu-vol attached", func(v map[string]any) bool { return v["state"] == "attached" })

	b.page("volume", "menu-vol")
	b.rowShows("menu-vol", "Healthy", "on node-1")

	// The row's menu: what the manager does, what the UI greys from the
	// volume's state and actions, and, absent, every item of Longhorn's
	// that the volume does not offer (Salvage, Update Replicas Count, the
	// snapshot limit items...).
	items := b.openRowMenu("menu-vol")
	b.shot("volume-menu")
	expectMenu(t, "the row's menu", items,
		[]string{"Detach", "Backups", "Delete", "Clone Volume", "Trim Filesystem", "Update Rebuild Concurrent Sync Limit", "Update Backup Target",
			"Update Freeze Filesystem For Snapshot", "Expand Volume", "Update Replica Soft Anti Affinity", "Update Replica Zone Soft Anti Affinity",
			"Update Replica Disk Soft Anti Affinity"},
		[]string{"Attach", "Create PV/PVC"})
	b.closeMenus()

	// Shown whatever the volume offers, the manager refuses: the UI shows
	// its reason, and nothing else happens.
	b.recordRequests()
	b.rowItem("menu-vol", "Update Rebuild Concurrent Sync Limit")
	b.maybeModalOK()
	b.expectRefused("Update Rebuild Concurrent Sync Limit", "/v1/volumes/menu-vol?action=updateRebuildConcurrentSyncLimit",
		"volume action updateRebuildConcurrentSyncLimit is not supported by this manager: ")
	// Trim Filesystem reaches the manager, which finds no filesystem a
	// pod mounts from the volume (no CSI stage): the UI shows why.
	b.recordRequests()
	b.rowItem("menu-vol", "Trim Filesystem")
	b.maybeModalOK()
	b.expectRefusedWith("Trim Filesystem", "/v1/volumes/menu-vol?action=trimFilesystem", 400, noFilesystemToTrim)
	// The one backup target, chosen: true already, so it succeeds.
	b.recordRequests()
	b.rowItem("menu-vol", "Update Backup Target")
	b.maybeModalOK()
	if w := b.waitWrites("Update Backup Target", 1); len(w) != 1 || !strings.Contains(w[0].URL, "action=updateBackupTargetName") || w[0].Status != 200 || !strings.Contains(w[0].Body, `"backupTargetName":"default"`) {
		t.Errorf("Update Backup Target: %+v", w)
	}
	b.checkConsole("Update Backup Target")
	// Whether its snapshots freeze its mounted filesystem: the form's
	// value (the volume's, ignored) reaches the action.
	b.recordRequests()
	b.rowItem("menu-vol", "Update Freeze Filesystem For Snapshot")
	b.modalOK()
	if w := b.waitWrites("Update Freeze Filesystem For Snapshot", 1); len(w) != 1 || !strings.Contains(w[0].URL, "action=updateFreezeFilesystemForSnapshot") || w[0].Status != 200 ||
		!strings.Contains(w[0].Body, `"freezeFilesystemForSnapshot":"ignored"`) {
		t.Errorf("Update Freeze Filesystem For Snapshot: %+v", w)
	}
	b.checkConsole("Update Freeze Filesystem For Snapshot")
	// The three anti-affinity items: the form's value (the volume's,
	// ignored: the setting decides) reaches the volume's action.
	for _, a := range antiAffinityItems {
		b.recordRequests()
		b.rowItem("menu-vol", a.item)
		b.modalOK()
		if w := b.waitWrites(a.item, 1); len(w) != 1 || !strings.Contains(w[0].URL, "action="+a.action) || w[0].Status != 200 ||
			!strings.Contains(w[0].Body, `"`+a.field+`":"ignored"`) {
			t.Errorf("%s: %+v", a.item, w)
		}
		b.checkConsole(a.item)
	}

	// Expand Volume: the form's size (32 MiB as a fraction of a GiB, its
	// default unit, which the form asks to be whole MiB) reaches the
	// expand action, and the attached volume grows.
	b.recordRequests()
	b.rowItem("menu-vol", "Expand Volume")
	b.typeText(".ant-modal #size", "0.03125")
	b.shot("expand-form")
	b.modalOK()
	if w := b.waitWrites("Expand Volume", 1); len(w) != 1 || !strings.Contains(w[0].URL, "action=expand") || w[0].Status != 200 || !strings.Contains(w[0].Body, `"size":"0.03125Gi"`) {
		t.Errorf("Expand Volume: %+v", w)
	}
	e.WaitVolumeFor(t, 30*time.Second, "menu-vol", "menu-vol grown to 32 MiB", func(v map[string]any) bool {
		return v["size"] == "33554432" && framework.ActualSize(v) == "33554432"
	})
	b.checkConsole("Expand Volume")

	// Clone Volume: the clone is made, and holds the source's bytes once
	// its cloneStatus says completed (see TestAVolumeClonedFromASnapshotOrAVolumeHoldsItsBytes).
	b.recordRequests()
	b.rowItem("menu-vol", "Clone Volume")
	b.waitText("the clone form", "Clone Volume from menu-vol")
	b.typeText(".ant-modal #name", "menu-clone")
	b.shot("clone-form")
	b.modalOK()
	if w := b.waitWrites("Clone Volume", 1); len(w) != 1 || w[0].Status != 200 || !strings.Contains(w[0].Body, `"dataSource":"vol://menu-vol"`) {
		t.Errorf("Clone Volume sent %+v", w)
	}
	b.checkConsole("Clone Volume")
	e.WaitCloned(t, "menu-clone")

	// The bulk Clone Volume button: the same.
	b.recordRequests()
	b.selectRow("menu-vol")
	b.button("", "Clone Volume")
	b.until("the bulk clone form", `(() => { const n = document.querySelector(".ant-modal #name"); return !!n && n.value === "cloned-menu-vol" })()`, 30*time.Second)
	// A name the rows below do not match when they look for menu-vol's.
	b.typeText(".ant-modal #name", "bulk-copy")
	b.modalOK()
	if w := b.waitWrites("bulk Clone Volume", 1); len(w) != 1 || w[0].Status != 200 || !strings.Contains(w[0].Body, `"dataSource":"vol://menu-vol"`) {
		t.Errorf("bulk Clone Volume sent %+v", w)
	}
	b.checkConsole("bulk Clone Volume")
	e.WaitCloned(t, "bulk-copy")
	// The clones' success messages go before the refusals below are read.
	b.until("no success message shown", `![...document.querySelectorAll(".ant-message-success, .ant-message")].some(e => /success/i.test(e.innerText) || !!e.querySelector(".ant-message-success"))`, 30*time.Second)

	// The bulk menu greys what the selected volumes' actions and state do
	// not allow, and shows the rest whatever they offer.
	b.selectRow("menu-vol")
	bulk := b.openBulkMenu()
	b.shot("volume-bulk-menu")
	expectMenu(t, "the bulk menu", bulk,
		[]string{"Trim Filesystem", "Update Rebuild Concurrent Sync Limit", "Update Backup Target", "Snapshot Data Integrity",
			"Update Replica Soft Anti Affinity", "Update Replica Zone Soft Anti Affinity", "Update Replica Disk Soft Anti Affinity",
			"Allow Snapshots Removal During Trim", "Update Freeze Filesystem For Snapshot", "Expand Volume"},
		[]string{"Upgrade Engine", "Update Replicas Count", "Update Data Locality", "Update Access Mode",
			"Update Replicas Auto Balance", "Create PV/PVC", "Activate Disaster Recovery Volume", "Update Offline Replica Rebuilding",
			"Update Replica Rebuilding Bandwidth Limit"})
	bulkItem := func(item string) {
		b.recordRequests()
		b.selectRow("menu-vol")
		b.openBulkMenu()
		b.clickJS("bulk "+item, `[...document.querySelectorAll(".ant-dropdown:not(.ant-dropdown-hidden):not([data-stale]) .ant-dropdown-menu-item button")].find(e => e.offsetParent !== null && e.innerText.trim() === `+jsString(item)+`)`)
		b.maybeModalOK()
	}
	bulkItem("Update Rebuild Concurrent Sync Limit")
	b.expectRefused("bulk Update Rebuild Concurrent Sync Limit", "/v1/volumes/menu-vol?action=updateRebuildConcurrentSyncLimit",
		"volume action updateRebuildConcurrentSyncLimit is not supported by this manager: ")
	bulkItem("Trim Filesystem")
	b.expectRefusedWith("bulk Trim Filesystem", "/v1/volumes/menu-vol?action=trimFilesystem", 400, noFilesystemToTrim)
	bulkItem("Update Backup Target")
	if w := b.waitWrites("bulk Update Backup Target", 1); len(w) != 1 || w[0].Status != 200 || !strings.Contains(w[0].URL, "action=updateBackupTargetName") {
		t.Errorf("bulk Update Backup Target: %+v", w)
	}
	b.checkConsole("bulk Update Backup Target")
	bulkItem("Update Freeze Filesystem For Snapshot")
	if w := b.waitWrites("bulk Update Freeze Filesystem For Snapshot", 1); len(w) != 1 || w[0].Status != 200 || !strings.Contains(w[0].URL, "action=updateFreezeFilesystemForSnapshot") {
		t.Errorf("bulk Update Freeze Filesystem For Snapshot: %+v", w)
	}
	b.checkConsole("bulk Update Freeze Filesystem For Snapshot")
	for _, a := range antiAffinityItems {
		bulkItem(a.item)
		if w := b.waitWrites("bulk "+a.item, 1); len(w) != 1 || w[0].Status != 200 || !strings.Contains(w[0].URL, "action="+a.action) {
			t.Errorf("bulk %s: %+v", a.item, w)
		}
		b.checkConsole("bulk " + a.item)
	}
	// Items whose forms post to the volume's action link, which it does
	// not offer: the UI sends nothing, or posts to its own page (no link),
	// which its nginx answers 405; nothing reaches the manager, and
	// nothing claims success.
	for _, item := range []string{"Snapshot Data Integrity", "Allow Snapshots Removal During Trim"} {
		bulkItem(item)
		time.Sleep(2 * time.Second)
		for _, w := range b.writes() {
			if strings.Contains(w.URL, "/v1/") || w.Status < 400 {
				t.Errorf("bulk %s: %+v", item, w)
			}
		}
		b.noSuccessMessage("bulk " + item)
		b.checkConsoleExcept("bulk "+item, "status of 405")
	}

	// Clone Volume from a snapshot of the volume's page: made too, once
	// the snapshot's object is ready to use (the API asks it).
	e.Call(t, "POST", "/v1/volumes/menu-vol?action=snapshotCreate", `{"name":"menu-snap"}`).Expect(t, 200)
	e.WaitSnapshotReady(t, "menu-snap")
	b.load("volume/menu-vol", "Take Snapshot")
	b.until("the tree shows the snapshot", `[...document.querySelectorAll(".lh-tree-snapshot .ant-dropdown-trigger")].some(e => e.innerText.includes("menu-sna"))`, 30*time.Second)
	b.recordRequests()
	b.treeMenu("menu-sna", "Clone Volume")
	b.waitText("the clone form", "snapshot menu-snap")
	b.typeText(".ant-modal #name", "snap-clone")
	b.modalOK()
	if w := b.waitWrites("Clone Volume from a snapshot", 1); len(w) != 1 || w[0].Status != 200 || !strings.Contains(w[0].Body, `"dataSource":"snap://menu-vol/menu-snap"`) {
		t.Errorf("Clone Volume from a snapshot sent %+v", w)
	}
	b.checkConsole("Clone Volume from a snapshot")
	e.WaitCloned(t, "snap-clone")
	b.shot("volume-menu-done")
}

// expectMenu checks a menu's items: exactly enabled, enabled, and
// greyed, greyed; any other item is one the test does not expect.
func expectMenu(t *testing.T, what string, got map[string]bool, enabled, greyed []string) {
	t.Helper()
	want := map[string]bool{}
	for _, i := range enabled {
		want[i] = false
	}
	for _, i := range greyed {
		want[i] = true
	}
	for item, g := range got {
		w, ok := want[item]
		switch {
		case !ok:
			t.Errorf("%s shows %q (greyed %v), which the test does not expect", what, item, g)
		case w != g:
			t.Errorf("%s: %q greyed %v, want %v", what, item, g, w)
		}
	}
	for item := range want {
		if _, ok := got[item]; !ok {
			t.Errorf("%s lacks %q", what, item)
		}
	}
}

// waitWrites waits until the page has sent n writes since recordRequests
// and returns them.
func (b *uiBrowser) waitWrites(what string, n int) []uiRequest {
	b.t.Helper()
	b.until(what+": the page sends its request", `(window.__xhrLog || []).filter(r => r.method.toUpperCase() !== "GET").length >= `+jsString(n), 20*time.Second)
	time.Sleep(300 * time.Millisecond)
	return b.writes()
}

// expectRefused checks that the page sent one write to path, that the
// manager refused it with 422 saying reason, that the UI shows the
// manager's message, and that nothing claims success.
// noFilesystemToTrim is the manager's reason for refusing trimFilesystem
// on a volume no pod mounts through the CSI driver.
const noFilesystemToTrim = "is not staged by the CSI driver on this node"

func (b *uiBrowser) expectRefused(what, path, reason string) {
	b.t.Helper()
	b.expectRefusedWith(what, path, 422, reason)
}

// expectRefusedWith is expectRefused for a refusal of another status.
func (b *uiBrowser) expectRefusedWith(what, path string, status int, reason string) {
	b.t.Helper()
	w := b.waitWrites(what, 1)
	if len(w) != 1 || !strings.HasSuffix(w[0].URL, path) || w[0].Status != status || !strings.Contains(w[0].Response, reason) {
		b.t.Errorf("%s: sent %+v, want one write to %s refused with %d %q", what, w, path, status, reason)
	}
	b.until(what+": the UI shows the manager's reason", `[...document.querySelectorAll(".ant-message")].some(e => e.innerText.includes(`+jsString(reason)+`))`, 15*time.Second)
	b.shot(strings.ReplaceAll(what, " ", "-"))
	b.noSuccessMessage(what)
	b.checkConsoleExcept(what, fmt.Sprintf("status of %d", status))
}

// noSuccessMessage fails when the UI shows a success message.
func (b *uiBrowser) noSuccessMessage(what string) {
	b.t.Helper()
	var success bool
	if err := b.eval(`[...document.querySelectorAll(".ant-message-success, .ant-message")].some(e => /success/i.test(e.innerText) || !!e.querySelector(".ant-message-success"))`, &success); err != nil {
		b.t.Fatal(err)
	}
	if success {
		b.t.Errorf("%s: the UI shows a success message", what)
	}
}

// openBulkMenu opens the menu of the volume list's bulk actions and
// returns its items, each with whether it is greyed.
func (b *uiBrowser) openBulkMenu() map[string]bool {
	b.t.Helper()
	b.hideMenus()
	b.closeMenus()
	b.clickJS("the bulk menu", `[...document.querySelectorAll(".ant-dropdown-trigger")].find(e => e.offsetParent !== null && !e.closest("tr"))`)
	return b.shownMenu("the bulk menu")
}
