package csi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/manager"
	"github.com/cadence-storage/longhorn-manager/upgrade/v110to120"
)

// StorageClass parameters, Longhorn's names.
const (
	paramNumberOfReplicas         = "numberOfReplicas"
	paramStaleReplicaTimeout      = "staleReplicaTimeout"
	paramRecurringJobSelector     = "recurringJobSelector"
	paramRecurringJobs            = "recurringJobs"
	paramFromBackup               = "fromBackup"
	paramBackingImage             = "backingImage"
	paramBackingImageSourceType   = "backingImageDataSourceType"
	paramBackingImageSourceParams = "backingImageDataSourceParameters"
	paramBackingImageChecksum     = "backingImageChecksum"
	paramBackingImageMinCopies    = "backingImageMinNumberOfCopies"
	paramDataEngine               = "dataEngine"
	paramFsType                   = "fsType"
	paramMkfsParams               = "mkfsParams"
	paramFreezeFilesystem         = "freezeFilesystemForSnapshot"
)

// ignoredDefaults are Longhorn parameters whose named value is what this
// driver does anyway: a StorageClass written for Longhorn that sets them
// so works unchanged. Any other value of them cannot be honoured.
var ignoredDefaults = map[string][]string{
	"migratable":                {"false"},
	"encrypted":                 {"false"},
	"shareManagerNodeSelector":  {""},
	"replicaAutoBalance":        {"ignored", "disabled"},
	"disableRevisionCounter":    {"true", "false"},
	"unmapMarkSnapChainRemoved": {"ignored", "disabled"},
	"backupTargetName":          {"", "default"},
	// A backing image's copies go to the disks its volumes' replicas
	// use (and those its spec names), not by node and disk tags.
	"backingImageNodeSelector": {""},
	"backingImageDiskSelector": {""},
}

// volumeParams is what a CreateVolume's parameters ask for.
type volumeParams struct {
	create client.VolumeCreate
	// jobs are the RecurringJobs the old recurringJobs parameter names;
	// they are made when they do not exist.
	jobs []client.RecurringJob
	// image is the backing image to make when it does not exist
	// (Name empty: none asked for).
	image  client.BackingImage
	fsType string
}

// parseParams reads the StorageClass parameters. An error names the
// parameter and the rule; nothing has been made yet.
func parseParams(params map[string]string) (*volumeParams, error) {
	p := &volumeParams{}
	var unknown []string
	for key, value := range params {
		if strings.HasPrefix(key, "csi.storage.k8s.io/") {
			continue // the sidecars' own
		}
		var err error
		switch key {
		case paramNumberOfReplicas:
			p.create.NumberOfReplicas, err = intParam(key, value, 1, 20)
		case paramStaleReplicaTimeout:
			p.create.StaleReplicaTimeout, err = intParam(key, value, 0, 1<<31-1)
		case paramRecurringJobSelector:
			err = p.parseSelector(value)
		case paramRecurringJobs:
			err = p.parseOldJobs(value)
		case paramFromBackup:
			p.create.FromBackup = strings.TrimSpace(value)
		case paramBackingImage:
			p.image.Name, p.create.BackingImage = value, value
		case paramBackingImageSourceType:
			p.image.SourceType = value
		case paramBackingImageSourceParams:
			if value != "" {
				if err = json.Unmarshal([]byte(value), &p.image.Parameters); err != nil {
					err = fmt.Errorf("%s: must be a JSON object of strings: %v", key, err)
				}
			}
		case paramBackingImageChecksum:
			p.image.ExpectedChecksum = value
		case paramBackingImageMinCopies:
			p.image.MinNumberOfCopies, err = intParam(key, value, 1, 20)
		case paramDataEngine:
			if value != "" && value != string(longhorn.DataEngineTypeV1) {
				err = fmt.Errorf("%s: only %q exists here, got %q", key, longhorn.DataEngineTypeV1, value)
			}
			p.create.DataEngine = value
		case paramFsType:
			p.fsType, err = checkFsType(key, value)
		case paramMkfsParams:
			_, err = parseMkfsParams(key, value)
		case paramFreezeFilesystem:
			var f longhorn.FreezeFilesystemForSnapshot
			if f, err = manager.ParseFreezeFilesystemForSnapshot(value); err == nil {
				p.create.FreezeFilesystemForSnapshot = string(f)
			} else {
				err = fmt.Errorf("%s: must be ignored (the freeze-filesystem-for-snapshot setting decides), enabled or disabled, got %q", key, value)
			}
		case "replicaSoftAntiAffinity", "replicaZoneSoftAntiAffinity", "replicaDiskSoftAntiAffinity":
			var a longhorn.SoftAntiAffinity
			if a, err = manager.ParseSoftAntiAffinity(key, value); err == nil {
				*map[string]*string{
					"replicaSoftAntiAffinity":     &p.create.ReplicaSoftAntiAffinity,
					"replicaZoneSoftAntiAffinity": &p.create.ReplicaZoneSoftAntiAffinity,
					"replicaDiskSoftAntiAffinity": &p.create.ReplicaDiskSoftAntiAffinity,
				}[key] = string(a)
			}
		case "dataLocality":
			// Checked against numberOfReplicas below, once all are read.
			p.create.DataLocality = value
		case "nodeSelector":
			p.create.NodeSelector, err = manager.ParseSelector(key, tagList(value))
		case "diskSelector":
			p.create.DiskSelector, err = manager.ParseSelector(key, tagList(value))
		default:
			allowed, ok := ignoredDefaults[key]
			switch {
			case !ok:
				unknown = append(unknown, key)
			case !contains(allowed, value):
				err = fmt.Errorf("%s: this driver cannot honour %q; it takes only %s", key, value, quoteAll(allowed))
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("parameters %s: not parameters this driver knows", strings.Join(unknown, ", "))
	}
	if p.create.DataLocality != "" {
		replicas := p.create.NumberOfReplicas
		if replicas == 0 {
			replicas = defaultNumberOfReplicas
		}
		if _, err := manager.ParseDataLocality(p.create.DataLocality, replicas); err != nil {
			return nil, err
		}
	}
	if p.image.Name == "" && (p.image.SourceType != "" || p.image.Parameters != nil || p.image.ExpectedChecksum != "" || p.image.MinNumberOfCopies != 0) {
		return nil, fmt.Errorf("%s, %s, %s, %s: need %s, the backing image they describe", paramBackingImageSourceType, paramBackingImageSourceParams, paramBackingImageChecksum, paramBackingImageMinCopies, paramBackingImage)
	}
	return p, nil
}

// tagList reads a selector parameter as Longhorn's StorageClasses write
// it: tags separated by commas ("ssd,fast"), spaces around them ignored.
func tagList(value string) []string {
	var tags []string
	for _, t := range strings.Split(value, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	return tags
}

func intParam(key, value string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(value))
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s: must be a whole number from %d to %d, got %q", key, lo, hi, value)
	}
	return n, nil
}

// checkFsType accepts the filesystems the Node service makes.
func checkFsType(key, value string) (string, error) {
	switch value {
	case "", "ext4", "xfs":
		return value, nil
	}
	return "", fmt.Errorf("%s: %q is not a filesystem this driver makes; use ext4 or xfs", key, value)
}

// parseSelector reads recurringJobSelector, a JSON list of {name, isGroup}.
func (p *volumeParams) parseSelector(value string) error {
	items, err := datastore.ParseRecurringJobSelector(value)
	if err != nil {
		return err
	}
	for _, item := range items {
		p.addSelected(client.RecurringJobSelector{Name: item.Name, IsGroup: item.IsGroup})
	}
	return nil
}

func (p *volumeParams) addSelected(item client.RecurringJobSelector) {
	for _, have := range p.create.RecurringJobSelector {
		if have == item {
			return
		}
	}
	p.create.RecurringJobSelector = append(p.create.RecurringJobSelector, item)
}

// parseOldJobs reads Longhorn v1.1's recurringJobs, a YAML or JSON list
// of jobs. Each becomes the RecurringJob the upgrade would make of it (the
// same name, so two StorageClasses naming one job share it), selected by
// name.
func (p *volumeParams) parseOldJobs(value string) error {
	var entries []longhorn.VolumeRecurringJobSpec
	if err := yaml.UnmarshalStrict([]byte(value), &entries); err != nil {
		return fmt.Errorf("%s: must be a YAML or JSON list of {name, task, cron, retain, labels}: %v", paramRecurringJobs, err)
	}
	for i, e := range entries {
		if e.Task == "" || e.Cron == "" {
			return fmt.Errorf("%s[%d]: task and cron are required", paramRecurringJobs, i)
		}
		name, err := v110to120.JobName(e)
		if err != nil {
			return fmt.Errorf("%s[%d]: %v", paramRecurringJobs, i, err)
		}
		// As the upgrade makes it, whatever concurrency the entry had.
		p.jobs = append(p.jobs, client.RecurringJob{Name: name, Task: e.Task, Cron: e.Cron, Retain: e.Retain, Concurrency: v110to120.DefaultConcurrency, Groups: []string{}, Labels: e.Labels})
		p.addSelected(client.RecurringJobSelector{Name: name})
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func quoteAll(list []string) string {
	out := make([]string, len(list))
	for i, v := range list {
		out[i] = strconv.Quote(v)
	}
	return strings.Join(out, " or ")
}

// volumeNameMaxLength is the longest volume name: it is a label value
// on the volume's objects.
const volumeNameMaxLength = 63

// volumeName is the Longhorn volume a CSI name stands for: lowercase,
// with what a volume name cannot hold replaced by '-', and, when longer
// than a volume name may be, cut and ended with a hash of the whole name,
// so that two names never meet and a retried call finds its volume.
func volumeName(name string) string { return objectName(name, "-_.") }

// objectName is name made a Longhorn object's name: lowercase letters,
// digits and the characters of extra; anything else becomes '-', and a
// name changed so, or longer than volumeNameMaxLength, is cut and ended
// with a hash of the whole name.
func objectName(name, extra string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', strings.ContainsRune(extra, r):
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.TrimLeft(b.String(), "-_.")
	if out == name && len(out) <= volumeNameMaxLength {
		return out
	}
	sum := sha256.Sum256([]byte(name))
	suffix := hex.EncodeToString(sum[:4])
	if len(out) > volumeNameMaxLength-len(suffix)-1 {
		out = out[:volumeNameMaxLength-len(suffix)-1]
	}
	if out = strings.TrimRight(out, "-_."); out == "" {
		return "v-" + suffix
	}
	return out + "-" + suffix
}
