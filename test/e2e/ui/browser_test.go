//go:build e2e

package ui

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/api"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestLonghornUI walks Longhorn's own web UI, served behind a proxy that
// behaves as the UI image's nginx, against a manager on the real control
// plane, with the UI's own buttons and forms. The manager runs as
// package/ deploys it, --api-auth=kubernetes, and the UI's server lends
// nobody its own account: in front of it stands the cluster's login (here
// a proxy that gives every request the user's token, as oauth2-proxy
// passes the user's ID token), and the user is bound to rbac-ui.yaml's
// longhorn-ui-operator Role, so every page, stream and action of the
// walk is one that Role allows the user.
func TestLonghornUI(t *testing.T) {
	dist := uiDist(t)
	// The backing image servers run from this test binary.
	e, _ := framework.KubernetesAuthAPIEnv(t, framework.WithTestServers)
	e.UIUser(t, "operator", "longhorn-ui-operator")
	token := framework.TokenOf(t, e.Kube, e.NS, "operator")
	e.Token = token
	manager, err := url.Parse(e.Base)
	if err != nil {
		t.Fatal(err)
	}
	ui := httptest.NewServer(api.UIProxy(dist, manager, nil, nil))
	t.Cleanup(ui.Close)
	uiURL, err := url.Parse(ui.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The login: the user's token on every request, websockets included;
	// the browser's own Host passes on, as an ingress's does.
	login := httputil.NewSingleHostReverseProxy(uiURL)
	direct := login.Director
	login.Director = func(r *http.Request) {
		host := r.Host
		direct(r)
		r.Host = host
		r.Header.Set("Authorization", "Bearer "+token)
	}
	login.FlushInterval = -1
	proxy := httptest.NewServer(login)
	t.Cleanup(proxy.Close)
	b := newUIBrowser(t, proxy.URL)
	ctx := context.Background()

	// An event of the namespace, for the dashboard's event log.
	if _, err := e.Kube.CoreV1().Events(e.NS).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "ui-test-event"},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "node-1", Namespace: e.NS},
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
		v := e.WaitVolumeFor(t, 30*time.Second, "ui-vol", "ui-vol created detached", func(v map[string]any) bool {
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
		b.rowShows("ui-vol", "Detached")
		b.selectRow("ui-vol")
		b.button("", "Attach")
		b.choose(".ant-modal #host", "node-1")
		b.shot("volume-attach-form")
		b.modalOK()
		b.noDialog("attach")
		e.WaitVolumeFor(t, 120*time.Second, "ui-vol", "ui-vol attached to node-1", func(v map[string]any) bool {
			return v["state"] == "attached" && v["currentNodeID"] == "node-1"
		})
		b.until("the list shows ui-vol healthy on node-1", `(() => { const r = [...document.querySelectorAll("tr")].find(r => r.innerText.includes("ui-vol")); return !!r && r.innerText.includes("Healthy") && r.innerText.includes("on node-1") })()`, 30*time.Second)
		b.shot("volume-attached")
		b.checkConsole("volume attach")
	})

	var snapName string
	t.Run("volume snapshot", func(t *testing.T) {
		b.t = t
		b.load("volume/ui-vol", "Take Snapshot")
		b.waitText("the volume's page", "Healthy")
		b.until("the volume's replica, running on node-1", `document.body.innerText.includes("Replicas") && /Healthy\s*node-1\s*Node[\s\S]*Running/.test(document.body.innerText)`, 30*time.Second)
		b.button("", "Take Snapshot")
		framework.Eventually(t, 30*time.Second, "a Snapshot object of ui-vol, taken", func() (bool, error) {
			list, err := e.LH.LonghornV1beta2().Snapshots(e.NS).List(ctx, metav1.ListOptions{})
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

	backupDir := t.TempDir()
	t.Run("volume backup and restore", func(t *testing.T) {
		b.t = t
		target := "file://" + backupDir
		b.page("setting", "Save")
		b.typeText("#backup-target", target)
		b.button("", "Save")
		framework.Eventually(t, 15*time.Second, "backup-target saved", func() (bool, error) {
			return e.Call(t, "GET", "/v1/settings/backup-target", "").Expect(t, 200).Body["value"] == target, nil
		})
		b.load("volume/ui-vol", "Create Backup")
		b.button("", "Create Backup")
		b.modalOK()
		b.noDialog("create backup")
		var backup, backupURL string
		framework.Eventually(t, 60*time.Second, "a completed backup of ui-vol", func() (bool, error) {
			r := e.Call(t, "POST", "/v1/backupvolumes/ui-vol?action=backupList", "")
			if r.Status != 200 {
				return false, nil
			}
			for _, item := range r.Body["data"].([]any) {
				if bk := item.(map[string]any); bk["state"] == "Completed" {
					backup, backupURL = bk["name"].(string), bk["url"].(string)
					return true, nil
				}
			}
			return false, nil
		})
		b.page("backup", "Sync All Backup Volumes")
		b.rowShows("ui-vol", "1 Gi", "default")
		b.shot("backup-volumes")
		b.load("backup/ui-vol?field=name&keyword=ui-vol", backup)
		b.rowShows(backup, "Completed")
		b.shot("backups")

		b.rowMenu(backup, "Restore")
		b.typeText(".ant-modal #name", "ui-restored")
		b.typeText(".ant-modal #numberOfReplicas", "1")
		b.shot("restore-form")
		b.modalOK()
		b.noDialog("restore")
		restored := e.WaitVolumeFor(t, 30*time.Second, "ui-restored", "ui-restored created from the backup", func(v map[string]any) bool { return true })
		if restored["fromBackup"] != backupURL || restored["size"] != "1073741824" {
			t.Errorf("restored %v, want from %s", restored, backupURL)
		}

		b.rowMenu(backup, "Delete")
		b.modalOK()
		framework.Eventually(t, 60*time.Second, "the backup deleted", func() (bool, error) {
			r := e.Call(t, "POST", "/v1/backupvolumes/ui-vol?action=backupList", "")
			return r.Status == 404 || (r.Status == 200 && len(r.Body["data"].([]any)) == 0), nil
		})
		b.until("the backup no longer listed", `![...document.querySelectorAll("tr")].some(r => r.innerText.includes(`+jsString(backup)+`))`, 30*time.Second)
		b.shot("backup-deleted")
		b.checkConsole("volume backup and restore")

		// The restored volume goes, so the dashboard counts ui-vol alone.
		framework.Eventually(t, 120*time.Second, "ui-restored deleted", func() (bool, error) {
			r := e.Call(t, "DELETE", "/v1/volumes/ui-restored", "")
			return r.Status == 404, nil
		})
	})

	t.Run("snapshot revert and delete", func(t *testing.T) {
		b.t = t
		first := snapName
		if first == "" {
			t.Skip("no first snapshot")
		}
		b.load("volume/ui-vol", "Take Snapshot")
		before := map[string]bool{}
		list, err := e.LH.LonghornV1beta2().Snapshots(e.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Items {
			before[s.Name] = true
		}
		b.button("", "Take Snapshot")
		var second string
		framework.Eventually(t, 30*time.Second, "a second Snapshot object of ui-vol, taken", func() (bool, error) {
			list, err := e.LH.LonghornV1beta2().Snapshots(e.NS).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, s := range list.Items {
				if s.Spec.Volume == "ui-vol" && !before[s.Name] && s.Status.ReadyToUse {
					second = s.Name
					return true, nil
				}
			}
			return false, nil
		})
		b.until("the tree shows the second snapshot", `[...document.querySelectorAll(".lh-tree-snapshot .ant-dropdown-trigger")].some(e => e.innerText.includes(`+jsString(second[:8])+`))`, 30*time.Second)

		// Revert needs the volume attached in maintenance mode (no frontend).
		b.page("volume", "ui-vol")
		b.selectRow("ui-vol")
		b.button("", "Detach")
		b.modalOK()
		e.WaitVolumeFor(t, 120*time.Second, "ui-vol", "ui-vol detached", func(v map[string]any) bool { return v["state"] == "detached" })
		b.rowShows("ui-vol", "Detached")
		b.selectRow("ui-vol")
		b.button("", "Attach")
		b.choose(".ant-modal #host", "node-1")
		b.clickJS("Maintenance", `(() => { const c = document.querySelector(".ant-modal #disableFrontend"); return c && !c.checked ? c : null })()`)
		b.shot("volume-attach-maintenance")
		b.modalOK()
		b.noDialog("attach in maintenance")
		e.WaitVolumeFor(t, 120*time.Second, "ui-vol", "ui-vol attached without a frontend", func(v map[string]any) bool {
			return v["state"] == "attached" && v["frontendDisabled"] == true
		})
		b.load("volume/ui-vol", "Take Snapshot")
		b.until("the tree shows both snapshots", `(() => { const t = [...document.querySelectorAll(".lh-tree-snapshot .ant-dropdown-trigger")].map(e => e.innerText).join(" "); return t.includes(`+jsString(first[:8])+`) && t.includes(`+jsString(second[:8])+`) })()`, 30*time.Second)
		b.treeMenu(first[:8], "Revert")
		b.maybeModalOK()
		framework.Eventually(t, 30*time.Second, "the volume head follows the first snapshot", func() (bool, error) {
			list := e.Call(t, "POST", "/v1/volumes/ui-vol?action=snapshotList", "").Expect(t, 200)
			for _, item := range list.Body["data"].([]any) {
				snap := item.(map[string]any)
				if snap["name"] == "volume-head" {
					return snap["parent"] == first, nil
				}
			}
			return false, nil
		})
		b.shot("snapshot-reverted")

		b.treeMenu(second[:8], "Delete")
		b.maybeModalOK()
		framework.Eventually(t, 30*time.Second, "the second snapshot deleted", func() (bool, error) {
			list := e.Call(t, "POST", "/v1/volumes/ui-vol?action=snapshotList", "").Expect(t, 200)
			for _, item := range list.Body["data"].([]any) {
				if snap := item.(map[string]any); snap["name"] == second && snap["removed"] != true {
					return false, nil
				}
			}
			return true, nil
		})
		b.until("the tree no longer shows the second snapshot", `![...document.querySelectorAll(".lh-tree-snapshot .ant-dropdown-trigger")].some(e => e.innerText.includes(`+jsString(second[:8])+`))`, 30*time.Second)
		b.shot("snapshot-deleted")
		b.checkConsole("snapshot revert and delete")
	})

	t.Run("volume detach", func(t *testing.T) {
		b.t = t
		b.page("volume", "ui-vol")
		b.rowShows("ui-vol", "Healthy", "on node-1")
		b.selectRow("ui-vol")
		b.button("", "Detach")
		b.modalOK()
		e.WaitVolumeFor(t, 120*time.Second, "ui-vol", "ui-vol detached", func(v map[string]any) bool {
			return v["state"] == "detached"
		})
		b.until("the list shows ui-vol detached", `(() => { const r = [...document.querySelectorAll("tr")].find(r => r.innerText.includes("ui-vol")); return !!r && r.innerText.includes("Detached") })()`, 30*time.Second)
		b.shot("volume-detached")
		b.checkConsole("volume detach")
	})

	t.Run("volume recurring job", func(t *testing.T) {
		b.t = t
		b.load("volume/ui-vol", "Recurring Jobs Schedule")
		b.button("", "Add")
		var job string
		b.until("the job form", `!!document.querySelector(".ant-modal #name")`, 30*time.Second)
		if err := b.eval(`document.querySelector(".ant-modal #name").value`, &job); err != nil || job == "" {
			t.Fatalf("the form's job name: %q %v", job, err)
		}
		b.shot("volume-recurring-job-form")
		b.modalOK()
		b.noDialog("add a recurring job to the volume")
		has := func() bool {
			r := e.Call(t, "POST", "/v1/volumes/ui-vol?action=recurringJobList", "").Expect(t, 200)
			for _, item := range r.Body["data"].([]any) {
				if item.(map[string]any)["name"] == job {
					return true
				}
			}
			return false
		}
		framework.Eventually(t, 15*time.Second, "ui-vol selects the new job "+job, func() (bool, error) { return has(), nil })
		b.rowShows(job, "00:00 every day")
		b.shot("volume-recurring-job")
		b.selectRow(job)
		b.button("", "Delete")
		b.modalOK()
		framework.Eventually(t, 15*time.Second, "ui-vol no longer selects "+job, func() (bool, error) { return !has(), nil })

		// A group, from the Group tab.
		e.Call(t, "POST", "/v1/recurringjobs", `{"name":"gold-job","task":"snapshot","cron":"@daily","retain":1,"groups":["gold"]}`).Expect(t, 200)
		b.load("volume/ui-vol", "Recurring Jobs Schedule")
		b.clickJS("the Group tab", `[...document.querySelectorAll(".ant-tabs-tab")].find(e => e.innerText.trim() === "Group")`)
		b.clickJS("Add a group", `[...document.querySelectorAll("button")].filter(e => e.offsetParent !== null && e.innerText.trim() === "Add").pop()`)
		b.choose(".ant-modal #name", "gold")
		b.modalOK()
		framework.Eventually(t, 15*time.Second, "ui-vol selects the group gold", func() (bool, error) {
			r := e.Call(t, "POST", "/v1/volumes/ui-vol?action=recurringJobList", "").Expect(t, 200)
			for _, item := range r.Body["data"].([]any) {
				if it := item.(map[string]any); it["name"] == "gold" && it["isGroup"] == true {
					return true, nil
				}
			}
			return false, nil
		})
		b.shot("volume-recurring-job-group")
		e.Call(t, "DELETE", "/v1/recurringjobs/gold-job", "").Expect(t, 204)
		b.checkConsole("volume recurring job")
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
		var job map[string]any
		framework.Eventually(t, 10*time.Second, "ui-snap created", func() (bool, error) {
			r := e.Call(t, "GET", "/v1/recurringjobs/ui-snap", "")
			job = r.Body
			return r.Status == 200, nil
		})
		if job["task"] != "snapshot" || job["retain"].(float64) != 2 || fmt.Sprint(job["groups"]) != "[gold]" || fmt.Sprint(job["labels"]) != "map[team:db]" {
			t.Errorf("created %v", job)
		}
		b.until("the list shows ui-snap", `[...document.querySelectorAll("tr")].some(r => r.innerText.includes("ui-snap") && r.innerText.includes("gold"))`, 30*time.Second)

		b.rowMenu("ui-snap", "Edit")
		b.typeText(".ant-modal #retain", "5")
		b.modalOK()
		b.noDialog("recurring job edit")
		framework.Eventually(t, 10*time.Second, "ui-snap keeps 5", func() (bool, error) {
			return e.Call(t, "GET", "/v1/recurringjobs/ui-snap", "").Expect(t, 200).Body["retain"].(float64) == 5, nil
		})
		b.shot("recurring-jobs")

		// A backup job, in the default group.
		b.button("", "Create Recurring Job")
		b.typeText(".ant-modal #name", "ui-backup")
		b.choose(".ant-modal #task", "Backup")
		b.button(".ant-modal", "Add to default group")
		b.modalOK()
		b.noDialog("backup job create")
		framework.Eventually(t, 10*time.Second, "ui-backup created", func() (bool, error) {
			r := e.Call(t, "GET", "/v1/recurringjobs/ui-backup", "")
			return r.Status == 200 && r.Body["task"] == "backup" && fmt.Sprint(r.Body["groups"]) == "[default]", nil
		})
		b.rowMenu("ui-backup", "Delete")
		b.modalOK()

		// A Filesystem Trim job: the form hides Retain, and the job keeps
		// nothing.
		b.button("", "Create Recurring Job")
		b.typeText(".ant-modal #name", "ui-trim")
		b.choose(".ant-modal #task", "Filesystem Trim")
		b.button(".ant-modal", "Add to default group")
		b.shot("filesystem-trim-job-form")
		b.modalOK()
		b.noDialog("filesystem trim job create")
		framework.Eventually(t, 10*time.Second, "ui-trim created", func() (bool, error) {
			r := e.Call(t, "GET", "/v1/recurringjobs/ui-trim", "")
			return r.Status == 200 && r.Body["task"] == "filesystem-trim" && r.Body["retain"].(float64) == 0 && fmt.Sprint(r.Body["groups"]) == "[default]", nil
		})
		b.rowMenu("ui-trim", "Delete")
		b.modalOK()

		b.rowMenu("ui-snap", "Delete")
		b.modalOK()
		framework.Eventually(t, 15*time.Second, "ui-snap deleted", func() (bool, error) {
			return e.Call(t, "GET", "/v1/recurringjobs/ui-snap", "").Status == 404, nil
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
		framework.Eventually(t, 15*time.Second, "recurring-job-max-retention saved", func() (bool, error) {
			return e.Call(t, "GET", "/v1/settings/recurring-job-max-retention", "").Expect(t, 200).Body["value"] == "42", nil
		})
		b.shot("settings")
		b.checkConsole("settings")
	})

	t.Run("backup", func(t *testing.T) {
		b.t = t
		b.page("backup", "Sync All Backup Volumes")
		b.shot("backup")
		b.streamsHealthy("backup")
		b.checkConsole("backup")
	})

	t.Run("backing image", func(t *testing.T) {
		b.t = t
		image := bytes.Repeat([]byte("longhorn-ui backing image\n"), 64<<10)
		files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.ServeContent(w, r, "image.raw", time.Time{}, bytes.NewReader(image))
		}))
		defer files.Close()
		b.page("backingImage", "Create Backing Image")
		b.button("", "Create Backing Image")
		b.typeText(".ant-modal #name", "ui-bi")
		b.typeText(".ant-modal #url", files.URL+"/image.raw")
		b.typeText(".ant-modal #minNumberOfCopies", "1")
		b.shot("backing-image-form")
		b.modalOK()
		b.noDialog("backing image create")
		b.shot("backing-image-created")
		var disk string
		framework.Eventually(t, 60*time.Second, "ui-bi downloaded to a disk", func() (bool, error) {
			r := e.Call(t, "GET", "/v1/backingimages/ui-bi", "")
			if r.Status != 200 {
				return false, nil
			}
			for d, f := range r.Body["diskFileStatusMap"].(map[string]any) {
				if f.(map[string]any)["state"] == "ready" {
					disk = d
					return r.Body["size"].(float64) == float64(len(image)), nil
				}
			}
			return false, nil
		})
		b.rowShows("ui-bi", "download")
		// Its name opens the copies per disk.
		b.clickJS("the name of ui-bi", `(() => { const r = [...document.querySelectorAll("tr")].find(r => r.innerText.includes("ui-bi")); return r && r.querySelector("button") })()`)
		b.until("the copy on "+disk+", ready", `[...document.querySelectorAll(".ant-modal")].some(m => m.innerText.includes(`+jsString(disk)+`) && m.innerText.includes("Ready"))`, 30*time.Second)
		b.shot("backing-image-copies")
		b.clickJS("close the copies", `[...document.querySelectorAll(".ant-modal-close")].find(e => e.offsetParent !== null)`)
		b.noDialog("backing image copies")
		b.rowMenu("ui-bi", "Delete")
		b.modalOK()
		framework.Eventually(t, 60*time.Second, "ui-bi deleted", func() (bool, error) {
			return e.Call(t, "GET", "/v1/backingimages/ui-bi", "").Status == 404, nil
		})
		b.until("the list no longer shows ui-bi", `![...document.querySelectorAll("tr")].some(r => r.innerText.includes("ui-bi"))`, 30*time.Second)

		// Upload a file from the browser.
		upload := filepath.Join(t.TempDir(), "upload.raw")
		if err := os.WriteFile(upload, image[:1<<20], 0o644); err != nil {
			t.Fatal(err)
		}
		b.button("", "Create Backing Image")
		b.typeText(".ant-modal #name", "ui-bi-up")
		b.choose(".ant-modal #sourceType", "Upload From Local")
		b.until("the file field", `!!document.querySelector(".ant-modal #fileContainer")`, 30*time.Second)
		ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
		err := chromedp.Run(ctx, chromedp.SetUploadFiles(".ant-modal #fileContainer", []string{upload}, chromedp.ByQuery))
		cancel()
		if err != nil {
			t.Fatalf("choose the file: %v", err)
		}
		b.typeText(".ant-modal #minNumberOfCopies", "1")
		b.shot("backing-image-upload-form")
		b.modalOK()
		framework.Eventually(t, 60*time.Second, "ui-bi-up uploaded", func() (bool, error) {
			r := e.Call(t, "GET", "/v1/backingimages/ui-bi-up", "")
			if r.Status != 200 {
				return false, nil
			}
			for _, f := range r.Body["diskFileStatusMap"].(map[string]any) {
				if f.(map[string]any)["state"] == "ready" {
					return r.Body["size"].(float64) == 1<<20, nil
				}
			}
			return false, nil
		})
		b.rowShows("ui-bi-up", "upload")
		b.shot("backing-image-uploaded")
		b.rowMenu("ui-bi-up", "Delete")
		b.modalOK()
		framework.Eventually(t, 60*time.Second, "ui-bi-up deleted", func() (bool, error) {
			return e.Call(t, "GET", "/v1/backingimages/ui-bi-up", "").Status == 404, nil
		})
		b.checkConsole("backing image")
	})

	t.Run("volume delete", func(t *testing.T) {
		b.t = t
		b.page("volume", "ui-vol")
		b.rowShows("ui-vol", "Detached")
		b.selectRow("ui-vol")
		b.button("", "Delete")
		b.modalOK()
		framework.Eventually(t, 60*time.Second, "ui-vol deleted", func() (bool, error) {
			return e.Call(t, "GET", "/v1/volumes/ui-vol", "").Status == 404, nil
		})
		b.until("the list no longer shows ui-vol", `![...document.querySelectorAll("tr")].some(r => r.innerText.includes("ui-vol"))`, 30*time.Second)
		b.shot("volume-deleted")
		b.checkConsole("volume delete")
	})
}
