package api

import (
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	"net/http"
	"sort"

	"github.com/gorilla/mux"
)

// Field describes one field of a resource in the Rancher API schema format
// that Longhorn's schema-driven clients read.
type Field struct {
	Type     string   `json:"type"`
	Required bool     `json:"required,omitempty"`
	Create   bool     `json:"create"`
	Update   bool     `json:"update"`
	Nullable bool     `json:"nullable,omitempty"`
	Default  any      `json:"default,omitempty"`
	Options  []string `json:"options,omitempty"`
	Min      *int     `json:"min,omitempty"`
	Max      *int     `json:"max,omitempty"`
}

// Action describes a resource action: what it takes and what it returns.
type Action struct {
	Input  string `json:"input,omitempty"`
	Output string `json:"output,omitempty"`
}

// Schema describes one resource type.
type Schema struct {
	ID                string            `json:"id"`
	Type              string            `json:"type"`
	Links             map[string]string `json:"links"`
	PluralName        string            `json:"pluralName"`
	CollectionMethods []string          `json:"collectionMethods"`
	ResourceMethods   []string          `json:"resourceMethods"`
	ResourceFields    map[string]Field  `json:"resourceFields"`
	ResourceActions   map[string]Action `json:"resourceActions"`
	CollectionActions map[string]Action `json:"collectionActions"`
	// collectionPath is the collection's path under /v1, empty for types
	// that only appear as inputs and outputs.
	collectionPath string
}

func intPtr(n int) *int { return &n }

// recurringJobTasks are the task enum's options.
var recurringJobTasks = func() []string {
	out := make([]string, 0, len(longhorn.RecurringJobTypes))
	for _, t := range longhorn.RecurringJobTypes {
		out = append(out, string(t))
	}
	return out
}()

// schemas lists every type the API serves, sorted by id.
func schemas() []Schema {
	list := []Schema{
		{
			ID: "recurringJob", PluralName: "recurringJobs", collectionPath: "recurringjobs",
			CollectionMethods: []string{"GET", "POST"}, ResourceMethods: []string{"GET", "PUT", "DELETE"},
			ResourceFields: map[string]Field{
				"name":                    {Type: "string", Required: true, Create: true},
				"task":                    {Type: "enum", Required: true, Create: true, Options: recurringJobTasks},
				"cron":                    {Type: "string", Required: true, Create: true, Update: true},
				"retain":                  {Type: "int", Required: true, Create: true, Update: true, Min: intPtr(0)},
				"retentionPolicy":         {Type: "enum", Create: true, Update: true, Default: string(longhorn.RecurringJobRetentionPolicyCountBased), Options: []string{string(longhorn.RecurringJobRetentionPolicyCountBased), string(longhorn.RecurringJobRetentionPolicyAgeBased)}},
				"retainAge":               {Type: "string", Create: true, Update: true, Default: "0s"},
				"backupTargetName":        {Type: "string", Create: true, Update: true, Nullable: true},
				"concurrency":             {Type: "int", Create: true, Update: true, Default: defaultConcurrency, Min: intPtr(1)},
				"groups":                  {Type: "array[string]", Create: true, Update: true, Nullable: true},
				"labels":                  {Type: "map[string]", Create: true, Update: true, Nullable: true},
				"parameters":              {Type: "map[string]", Create: true, Update: true, Nullable: true},
				"conditions":              {Type: "array[condition]"},
				"suspend":                 {Type: "boolean", Create: true, Update: true, Default: false},
				"timeZone":                {Type: "string", Create: true, Update: true},
				"startingDeadlineSeconds": {Type: "int", Create: true, Update: true, Nullable: true, Min: intPtr(0)},
				"skipImmediately":         {Type: "boolean", Create: true, Update: true},
				"lastScheduleTime":        {Type: "date"},
				"lastSkipped":             {Type: "date"},
				"nextScheduleTime":        {Type: "date"},
				"lastSuccessfulTime":      {Type: "date"},
				"active":                  {Type: "array[recurringJobRun]"},
				"executionCount":          {Type: "int"},
			},
		},
		{
			ID: "volume", PluralName: "volumes", collectionPath: "volumes",
			CollectionMethods: []string{"GET", "POST"}, ResourceMethods: []string{"GET", "DELETE"},
			ResourceFields: map[string]Field{
				"name":                        {Type: "string", Required: true, Create: true},
				"size":                        {Type: "string", Required: true, Create: true},
				"numberOfReplicas":            {Type: "int", Create: true, Default: defaultNumberOfReplicas, Min: intPtr(1), Max: intPtr(20)},
				"frontend":                    {Type: "enum", Create: true, Options: []string{"blockdev", "iscsi", "nvmf", ""}, Default: ""},
				"backingImage":                {Type: "string", Create: true},
				"fromBackup":                  {Type: "string", Create: true},
				"dataSource":                  {Type: "string", Create: true},
				"recurringJobSelector":        {Type: "array[volumeRecurringJobInput]", Create: true, Nullable: true},
				"selectedNode":                {Type: "string", Create: true},
				"replicaSoftAntiAffinity":     {Type: "enum", Create: true, Options: softAntiAffinityOptions, Default: "ignored"},
				"replicaZoneSoftAntiAffinity": {Type: "enum", Create: true, Options: softAntiAffinityOptions, Default: "ignored"},
				"replicaDiskSoftAntiAffinity": {Type: "enum", Create: true, Options: softAntiAffinityOptions, Default: "ignored"},
				"nodeSelector":                {Type: "array[string]", Create: true, Nullable: true},
				"dataLocality":                {Type: "enum", Create: true, Options: []string{"disabled", "best-effort", "strict-local"}, Default: "disabled"},
				"diskSelector":                {Type: "array[string]", Create: true, Nullable: true},
				"state":                       {Type: "enum", Options: []string{"creating", "attached", "detached", "attaching", "detaching", "deleting"}},
				"robustness":                  {Type: "enum", Options: []string{"healthy", "degraded", "faulted", "unknown"}},
				"currentNodeID":               {Type: "string"},
				"nodeID":                      {Type: "string"},
				"attachedBy":                  {Type: "string"},
				"frontendDisabled":            {Type: "boolean"},
				"endpoint":                    {Type: "string"},
				"dataEngine":                  {Type: "enum", Create: true, Options: []string{"v1"}, Default: "v1"},
				"accessMode":                  {Type: "enum", Create: true, Options: []string{"rwo"}, Default: "rwo"},
				"conditions":                  {Type: "map[condition]"},
				"replicas":                    {Type: "array[replica]"},
				"controllers":                 {Type: "array[controller]"},
				"created":                     {Type: "string"}, "image": {Type: "string"}, "currentImage": {Type: "string"},
				"ready": {Type: "boolean"}, "notReadyMessage": {Type: "string"}, "disableFrontend": {Type: "boolean"},
				"lastAttachedBy": {Type: "string"}, "staleReplicaTimeout": {Type: "int"},
				"standby": {Type: "boolean"}, "restoreRequired": {Type: "boolean"}, "restoreInitiated": {Type: "boolean"},
				"revisionCounterDisabled": {Type: "boolean"}, "migratable": {Type: "boolean"}, "encrypted": {Type: "boolean"},
				"lastBackup": {Type: "string"}, "lastBackupAt": {Type: "string"}, "lastBackupVerification": {Type: "backupVerification", Nullable: true}, "shareEndpoint": {Type: "string"}, "shareState": {Type: "string"},
				"snapshotDataIntegrity": {Type: "string"}, "unmapMarkSnapChainRemoved": {Type: "string"}, "replicaAutoBalance": {Type: "string"},
				"freezeFilesystemForSnapshot": {Type: "string"}, "backupCompressionMethod": {Type: "string"}, "backupBlockSize": {Type: "string"}, "backupTargetName": {Type: "string"},
				"snapshotMaxCount": {Type: "int"}, "snapshotMaxSize": {Type: "string"},
				"kubernetesStatus": {Type: "kubernetesStatus"}, "cloneStatus": {Type: "cloneStatus"},
				"backupStatus": {Type: "array[backupStatus]"}, "restoreStatus": {Type: "array[restoreStatus]"},
				"purgeStatus": {Type: "array[purgeStatus]"}, "rebuildStatus": {Type: "array[rebuildStatus]"},
				"volumeAttachment": {Type: "volumeAttachment"},
			},
			ResourceActions: map[string]Action{
				"recurringJobAdd":    {Input: "volumeRecurringJobInput", Output: "collection[volumeRecurringJob]"},
				"recurringJobDelete": {Input: "volumeRecurringJobInput", Output: "collection[volumeRecurringJob]"},
				"recurringJobList":   {Output: "collection[volumeRecurringJob]"},
				"attach":             {Input: "attachInput", Output: "volume"},
				"detach":             {Input: "detachInput", Output: "volume"},
				"expand":             {Input: "expandInput", Output: "volume"},
				"snapshotCreate":     {Input: "snapshotInput", Output: "snapshot"},
				"snapshotList":       {Output: "collection[snapshot]"},
				"snapshotGet":        {Input: "snapshotInput", Output: "snapshot"},
				"snapshotDelete":     {Input: "snapshotInput", Output: "volume"},
				"snapshotPurge":      {Output: "volume"},
				"snapshotRevert":     {Input: "snapshotInput", Output: "volume"},
				"snapshotBackup":     {Input: "snapshotInput", Output: "backupInput"},
				"snapshotCRCreate":   {Input: "snapshotCRInput", Output: "snapshotCR"},
				"snapshotCRList":     {Output: "collection[snapshotCR]"},
				"snapshotCRGet":      {Input: "snapshotCRInput", Output: "snapshotCR"},
				"snapshotCRDelete":   {Input: "snapshotCRInput", Output: "empty"},
				// The one backup target, or a 422 naming another.
				"updateBackupTargetName":            {Input: "updateBackupTargetInput", Output: "volume"},
				"updateFreezeFilesystemForSnapshot": {Input: "updateFreezeFilesystemForSnapshotInput", Output: "volume"},
				"updateReplicaSoftAntiAffinity":     {Input: "UpdateReplicaSoftAntiAffinityInput", Output: "volume"},
				"updateReplicaZoneSoftAntiAffinity": {Input: "UpdateReplicaZoneSoftAntiAffinityInput", Output: "volume"},
				"updateReplicaDiskSoftAntiAffinity": {Input: "UpdateReplicaDiskSoftAntiAffinityInput", Output: "volume"},
				// Listed so that Longhorn's UI shows the manager's
				// reason: both always answer 422.
				"trimFilesystem":                   {Output: "volume"},
				"updateRebuildConcurrentSyncLimit": {Output: "volume"},
			},
		},
		{
			ID: "updateFreezeFilesystemForSnapshotInput",
			ResourceFields: map[string]Field{"freezeFilesystemForSnapshot": {Type: "enum", Create: true, Default: "ignored",
				Options: []string{"ignored", "enabled", "disabled"}}},
		},
		{
			ID:             "UpdateReplicaSoftAntiAffinityInput",
			ResourceFields: map[string]Field{"replicaSoftAntiAffinity": {Type: "enum", Create: true, Options: softAntiAffinityOptions, Default: "ignored"}},
		},
		{
			ID:             "UpdateReplicaZoneSoftAntiAffinityInput",
			ResourceFields: map[string]Field{"replicaZoneSoftAntiAffinity": {Type: "enum", Create: true, Options: softAntiAffinityOptions, Default: "ignored"}},
		},
		{
			ID:             "UpdateReplicaDiskSoftAntiAffinityInput",
			ResourceFields: map[string]Field{"replicaDiskSoftAntiAffinity": {Type: "enum", Create: true, Options: softAntiAffinityOptions, Default: "ignored"}},
		},
		{
			ID:             "updateBackupTargetInput",
			ResourceFields: map[string]Field{"backupTargetName": {Type: "string", Create: true, Default: "default"}},
		},
		{
			ID: "volumeRecurringJobInput",
			ResourceFields: map[string]Field{
				"name":    {Type: "string", Required: true, Create: true},
				"isGroup": {Type: "boolean", Create: true, Default: false},
			},
		},
		{
			ID: "attachInput",
			ResourceFields: map[string]Field{
				"hostId":          {Type: "string", Required: true, Create: true},
				"disableFrontend": {Type: "boolean", Create: true, Default: false},
				"attachedBy":      {Type: "string", Create: true},
			},
		},
		{
			ID:             "expandInput",
			ResourceFields: map[string]Field{"size": {Type: "string", Required: true, Create: true}},
		},
		{
			ID:             "detachInput",
			ResourceFields: map[string]Field{"attachedBy": {Type: "string", Create: true}},
		},
		{
			ID: "snapshotInput",
			ResourceFields: map[string]Field{
				"name":             {Type: "string", Create: true},
				"labels":           {Type: "map[string]", Create: true, Nullable: true},
				"backupMode":       {Type: "enum", Options: []string{"full", "incremental"}, Create: true, Nullable: true},
				"backupTargetName": {Type: "string", Create: true, Nullable: true},
			},
		},
		{
			ID: "snapshot",
			ResourceFields: map[string]Field{
				"name": {Type: "string"}, "parent": {Type: "string"}, "children": {Type: "map[boolean]"},
				"removed": {Type: "boolean"}, "usercreated": {Type: "boolean"}, "created": {Type: "string"},
				"size": {Type: "string"}, "labels": {Type: "map[string]"},
			},
		},
		{
			ID: "condition",
			ResourceFields: map[string]Field{
				"type": {Type: "string"}, "status": {Type: "string"}, "reason": {Type: "string"},
				"message": {Type: "string"}, "lastProbeTime": {Type: "string"}, "lastTransitionTime": {Type: "string"},
			},
		},
		{
			ID: "replica",
			ResourceFields: map[string]Field{
				"name": {Type: "string"}, "hostId": {Type: "string"}, "diskID": {Type: "string"}, "diskPath": {Type: "string"},
				"dataPath": {Type: "string"}, "running": {Type: "boolean"}, "healthyAt": {Type: "string"},
				"address": {Type: "string"}, "image": {Type: "string"}, "currentImage": {Type: "string"}, "instanceManagerName": {Type: "string"},
				"mode": {Type: "enum", Options: []string{"RW", "WO", "ERR", ""}}, "failedAt": {Type: "string"}, "dataEngine": {Type: "string"},
			},
		},
		{
			ID: "controller",
			ResourceFields: map[string]Field{
				"name": {Type: "string"}, "hostId": {Type: "string"}, "address": {Type: "string"}, "running": {Type: "boolean"},
				"image": {Type: "string"}, "currentImage": {Type: "string"}, "instanceManagerName": {Type: "string"},
				"size": {Type: "string"}, "actualSize": {Type: "string"}, "endpoint": {Type: "string"},
				"lastRestoredBackup": {Type: "string"}, "requestedBackupRestore": {Type: "string"}, "isExpanding": {Type: "boolean"},
				"lastExpansionError": {Type: "string"}, "lastExpansionFailedAt": {Type: "string"}, "unmapMarkSnapChainRemovedEnabled": {Type: "boolean"},
			},
		},
		{
			ID: "kubernetesStatus",
			ResourceFields: map[string]Field{
				"pvName": {Type: "string"}, "pvStatus": {Type: "string"}, "namespace": {Type: "string"}, "pvcName": {Type: "string"},
				"lastPVCRefAt": {Type: "string"}, "lastPodRefAt": {Type: "string"}, "workloadsStatus": {Type: "array[workloadStatus]"},
			},
		},
		{
			ID:             "cloneStatus",
			ResourceFields: map[string]Field{"sourceVolume": {Type: "string"}, "snapshot": {Type: "string"}, "state": {Type: "string"}},
		},
		{
			ID: "backupStatus",
			ResourceFields: map[string]Field{
				"id": {Type: "string"}, "snapshot": {Type: "string"}, "progress": {Type: "int"}, "backupURL": {Type: "string"},
				"error": {Type: "string"}, "state": {Type: "string"}, "replica": {Type: "string"}, "size": {Type: "string"},
			},
		},
		{
			ID: "rebuildStatus",
			ResourceFields: map[string]Field{
				"id": {Type: "string"}, "replica": {Type: "string"}, "isRebuilding": {Type: "boolean"}, "progress": {Type: "int"},
				"state": {Type: "string"}, "error": {Type: "string"}, "fromReplica": {Type: "string"},
			},
		},
		{
			ID: "volumeAttachment", PluralName: "volumeAttachments", collectionPath: "volumeattachments",
			CollectionMethods: []string{"GET"},
			ResourceFields:    map[string]Field{"volume": {Type: "string"}, "attachments": {Type: "map[attachment]"}},
		},
		{
			ID: "attachment",
			ResourceFields: map[string]Field{
				"attachmentID": {Type: "string"}, "attachmentType": {Type: "string"}, "nodeID": {Type: "string"},
				"parameters": {Type: "map[string]"}, "satisfied": {Type: "boolean"}, "conditions": {Type: "array[condition]"},
			},
		},
		{
			ID: "snapshotCRInput",
			ResourceFields: map[string]Field{
				"name":   {Type: "string", Create: true},
				"labels": {Type: "map[string]", Create: true, Nullable: true},
			},
		},
		{
			ID: "snapshotCR",
			ResourceFields: map[string]Field{
				"name": {Type: "string"}, "crCreationTime": {Type: "string"}, "volume": {Type: "string"}, "createSnapshot": {Type: "boolean"},
				"parent": {Type: "string"}, "children": {Type: "map[boolean]"}, "markRemoved": {Type: "boolean"}, "userCreated": {Type: "boolean"},
				"creationTime": {Type: "string"}, "size": {Type: "int"}, "labels": {Type: "map[string]"}, "ownerID": {Type: "string"},
				"error": {Type: "string"}, "restoreSize": {Type: "int"}, "readyToUse": {Type: "boolean"}, "checksum": {Type: "string"},
			},
		},
		{ID: "empty", ResourceFields: map[string]Field{}},
		{
			ID: "event", PluralName: "events", collectionPath: "events",
			CollectionMethods: []string{"GET"},
			ResourceFields:    map[string]Field{"event": {Type: "json"}, "eventType": {Type: "string"}},
		},
		{
			ID: "backupTarget", PluralName: "backupTargets", collectionPath: "backuptargets",
			CollectionMethods: []string{"GET", "POST"}, ResourceMethods: []string{"GET", "PUT", "DELETE"},
			ResourceActions: map[string]Action{"backupTargetUpdate": {Input: "backupTarget", Output: "backupTarget"}},
			ResourceFields: map[string]Field{
				"name": {Type: "string"}, "backupTargetURL": {Type: "string"}, "credentialSecret": {Type: "string"},
				"pollInterval": {Type: "string"}, "available": {Type: "boolean"}, "message": {Type: "string"},
			},
		},
		{
			ID: "systemBackup", PluralName: "systemBackups", collectionPath: "systembackups",
			CollectionMethods: []string{"GET", "POST"}, ResourceMethods: []string{"GET", "DELETE"},
			ResourceFields: map[string]Field{
				"name": {Type: "string", Create: true, Required: true}, "volumeBackupPolicy": {Type: "string", Create: true},
				"version": {Type: "string"}, "managerImage": {Type: "string"}, "state": {Type: "string"}, "createdAt": {Type: "string"}, "error": {Type: "string"},
			},
		},
		{
			ID: "systemRestore", PluralName: "systemRestores", collectionPath: "systemrestores",
			CollectionMethods: []string{"GET", "POST"}, ResourceMethods: []string{"GET", "DELETE"},
			ResourceFields: map[string]Field{
				"name": {Type: "string", Create: true, Required: true}, "systemBackup": {Type: "string", Create: true, Required: true},
				"state": {Type: "string"}, "createdAt": {Type: "string"}, "error": {Type: "string"},
			},
		},
		{
			ID: "recurringJobRun",
			ResourceFields: map[string]Field{
				"scheduledTime": {Type: "date"}, "startTime": {Type: "date", Nullable: true},
				"runner": {Type: "enum", Options: []string{"cronjob", "manager"}}, "name": {Type: "string"},
			},
		},
		{
			ID: "volumeRecurringJob",
			ResourceFields: map[string]Field{
				"name":    {Type: "string"},
				"isGroup": {Type: "boolean"},
			},
		},
		{
			ID: "setting", PluralName: "settings", collectionPath: "settings",
			CollectionMethods: []string{"GET"}, ResourceMethods: []string{"GET", "PUT"},
			ResourceFields: map[string]Field{
				"name":       {Type: "string"},
				"value":      {Type: "string", Required: true, Update: true},
				"applied":    {Type: "boolean"},
				"definition": {Type: "settingDefinition"},
			},
		},
		{
			ID: "node", PluralName: "nodes", collectionPath: "nodes",
			CollectionMethods: []string{"GET"}, ResourceMethods: []string{"GET"},
			ResourceFields: map[string]Field{
				"name":            {Type: "string"},
				"allowScheduling": {Type: "boolean"},
				"conditions":      {Type: "map[condition]"},
				"disks":           {Type: "map[disk]"},
				"address":         {Type: "string"}, "evictionRequested": {Type: "boolean"}, "tags": {Type: "array[string]"},
				"region": {Type: "string"}, "zone": {Type: "string"}, "instanceManagerCPURequest": {Type: "int"}, "autoEvicting": {Type: "boolean"},
			},
		},
		{
			ID: "disk",
			ResourceFields: map[string]Field{
				"path": {Type: "string"}, "diskUUID": {Type: "string"}, "allowScheduling": {Type: "boolean"}, "storageReserved": {Type: "int"},
				"storageAvailable": {Type: "int"}, "storageMaximum": {Type: "int"}, "storageScheduled": {Type: "int"},
				"conditions": {Type: "map[condition]"}, "diskType": {Type: "string"}, "diskDriver": {Type: "string"}, "tags": {Type: "array[string]"},
				"evictionRequested": {Type: "boolean"}, "scheduledReplica": {Type: "map[int]"}, "scheduledBackingImage": {Type: "map[int]"},
			},
		},
		{
			ID: "backupVolume", PluralName: "backupVolumes", collectionPath: "backupvolumes",
			CollectionMethods: []string{"GET"}, ResourceMethods: []string{"GET", "DELETE"},
			ResourceFields: map[string]Field{
				"name": {Type: "string"}, "size": {Type: "string"}, "created": {Type: "string"},
				"lastBackupName": {Type: "string"}, "lastBackupAt": {Type: "string"},
				"messages": {Type: "map[string]"}, "labels": {Type: "map[string]"}, "dataStored": {Type: "string"},
				"backingImageName": {Type: "string"}, "backupTargetName": {Type: "string"}, "volumeName": {Type: "string"},
			},
			ResourceActions: map[string]Action{
				"backupList":       {Output: "collection[backup]"},
				"backupGet":        {Input: "backupInput", Output: "backup"},
				"backupDelete":     {Input: "backupInput", Output: "backup"},
				"backupVerify":     {Input: "backupVerifyInput", Output: "backup"},
				"backupVolumeSync": {Output: "backupVolume"},
			},
		},
		{
			ID:             "backupVerifyInput",
			ResourceFields: map[string]Field{"name": {Type: "string", Create: true}, "full": {Type: "boolean", Create: true}},
		},
		{
			ID: "backupFullDrill",
			ResourceFields: map[string]Field{
				"scratchVolume": {Type: "string"}, "restored": {Type: "boolean"}, "restoreSeconds": {Type: "string"}, "filesystem": {Type: "string"},
				"filesystemCheck": {Type: "enum", Options: []string{"Passed", "Failed", "Skipped", "Error"}}, "filesystemCheckOutput": {Type: "string"},
			},
		},
		{
			ID: "backupVerification",
			ResourceFields: map[string]Field{
				"backup": {Type: "string"}, "requestedAt": {Type: "string"}, "verifiedAt": {Type: "string"},
				"result": {Type: "enum", Options: []string{"Passed", "Failed", "Error"}}, "message": {Type: "string"},
				"badBlocks": {Type: "int"}, "firstBadBlockOffset": {Type: "int", Nullable: true}, "firstBadBlockReason": {Type: "string"},
				"digest": {Type: "string"}, "blocksRead": {Type: "int"}, "durationSeconds": {Type: "string"},
				"full": {Type: "backupFullDrill", Nullable: true},
			},
		},
		{
			ID:             "backupInput",
			ResourceFields: map[string]Field{"name": {Type: "string", Required: true, Create: true}},
		},
		{
			ID: "backup",
			ResourceFields: map[string]Field{
				"name": {Type: "string"}, "state": {Type: "enum", Options: []string{"InProgress", "Completed", "Error"}},
				"progress": {Type: "int"}, "url": {Type: "string"}, "snapshotName": {Type: "string"},
				"snapshotCreated": {Type: "string"}, "created": {Type: "string"}, "size": {Type: "string"},
				"labels": {Type: "map[string]"}, "volumeName": {Type: "string"}, "volumeBackingImageName": {Type: "string"}, "error": {Type: "string"},
				"messages": {Type: "map[string]"}, "volumeSize": {Type: "string"}, "volumeCreated": {Type: "string"},
				"backupMode": {Type: "string"}, "compressionMethod": {Type: "string"}, "backupTargetName": {Type: "string"},
				"newlyUploadDataSize": {Type: "string"}, "reUploadedDataSize": {Type: "string"},
				"verification": {Type: "backupVerification", Nullable: true}, "verifyRequestedAt": {Type: "string"},
				"verifyFull": {Type: "boolean"},
			},
		},
		{
			ID: "backingImage", PluralName: "backingImages", collectionPath: "backingimages",
			CollectionMethods: []string{"GET", "POST"}, ResourceMethods: []string{"GET", "DELETE"},
			ResourceFields: map[string]Field{
				"name":              {Type: "string", Required: true, Create: true},
				"sourceType":        {Type: "enum", Required: true, Create: true, Options: []string{"download", "upload", "export-from-volume"}},
				"parameters":        {Type: "map[string]", Create: true, Nullable: true},
				"expectedChecksum":  {Type: "string", Create: true},
				"minNumberOfCopies": {Type: "int", Create: true, Default: 1, Min: intPtr(1)},
				"disks":             {Type: "array[string]", Create: true, Nullable: true},
				"uuid":              {Type: "string"},
				"currentChecksum":   {Type: "string"},
				"size":              {Type: "int"},
				"diskFileStatusMap": {Type: "map[backingImageDiskFileStatus]"},
				"deletionTimestamp": {Type: "string"},
			},
			ResourceActions: map[string]Action{
				"backingImageCleanup": {Input: "backingImageCleanupInput", Output: "backingImage"},
				"upload":              {Output: "backingImage"},
			},
		},
		{
			ID: "backingImageDiskFileStatus",
			ResourceFields: map[string]Field{
				"state":    {Type: "enum", Options: []string{"pending", "starting", "in-progress", "ready-for-transfer", "ready", "failed", "unknown"}},
				"progress": {Type: "int"}, "message": {Type: "string"}, "lastStateTransitionTime": {Type: "string"},
			},
		},
		{
			ID:             "backingImageCleanupInput",
			ResourceFields: map[string]Field{"disks": {Type: "array[string]", Required: true, Create: true}},
		},
		{
			ID: "error",
			ResourceFields: map[string]Field{
				"status":  {Type: "int"},
				"code":    {Type: "string"},
				"message": {Type: "string"},
				"detail":  {Type: "string"},
			},
		},
	}
	list = append(list, instanceManagerSchema, engineImageSchema, Schema{
		ID: "instanceProcess",
		ResourceFields: map[string]Field{
			"spec": {Type: "map[string]"}, "status": {Type: "map[string]"},
		},
	})
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	return list
}

func (sc Schema) withLinks(base string) Schema {
	sc.Type = "schema"
	sc.Links = map[string]string{"self": base + "/v1/schemas/" + sc.ID}
	if sc.collectionPath != "" {
		sc.Links["collection"] = base + "/v1/" + sc.collectionPath
	}
	if sc.CollectionMethods == nil {
		sc.CollectionMethods = []string{}
	}
	if sc.ResourceMethods == nil {
		sc.ResourceMethods = []string{}
	}
	if sc.ResourceActions == nil {
		sc.ResourceActions = map[string]Action{}
	}
	sc.CollectionActions = map[string]Action{}
	return sc
}

func (s *Server) listSchemas(w http.ResponseWriter, r *http.Request) error {
	base := baseURL(r)
	all := schemas()
	data := make([]Schema, 0, len(all))
	for _, sc := range all {
		data = append(data, sc.withLinks(base))
	}
	writeJSON(w, http.StatusOK, collection(base, "schema", "schemas", data))
	return nil
}

func (s *Server) getSchema(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["type"]
	for _, sc := range schemas() {
		if sc.ID == id {
			writeJSON(w, http.StatusOK, sc.withLinks(baseURL(r)))
			return nil
		}
	}
	return notFound("no schema for type %q", id)
}

// softAntiAffinityOptions are the values of a volume's replica
// anti-affinity overrides.
var softAntiAffinityOptions = []string{"ignored", "enabled", "disabled"}
