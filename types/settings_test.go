package types

import "testing"

func TestValidateSetting(t *testing.T) {
	cases := []struct {
		name    string
		setting SettingName
		value   string
		ok      bool
	}{
		{"bool setting accepts true", SettingNameAllowRecurringJobWhileVolumeDetached, "true", true},
		{"bool setting refuses yes-ish words", SettingNameAllowRecurringJobWhileVolumeDetached, "yes", false},
		{"history limit accepts zero", SettingNameRecurringSuccessfulJobsHistoryLimit, "0", true},
		{"history limit refuses negatives", SettingNameRecurringFailedJobsHistoryLimit, "-1", false},
		{"max retention refuses zero", SettingNameRecurringJobMaxRetention, "0", false},
		{"max retention accepts its default", SettingNameRecurringJobMaxRetention, "100", true},
		{"max retention refuses beyond its maximum", SettingNameRecurringJobMaxRetention, "251", false},
		{"int setting refuses words", SettingNameRecurringJobMaxRetention, "many", false},
		{"empty backup target disables backups", SettingNameBackupTarget, "", true},
		{"s3 backup target", SettingNameBackupTarget, "s3://bucket@us-east-1/path", true},
		{"nfs backup target", SettingNameBackupTarget, "nfs://server:/export", true},
		{"file backup target", SettingNameBackupTarget, "file:///var/backups", true},
		{"unknown backup target scheme", SettingNameBackupTarget, "ftp://server/path", false},
		{"s3 backup target without a path", SettingNameBackupTarget, "s3://bucket@us-east-1/", true},
		{"s3 backup target without a region", SettingNameBackupTarget, "s3://bucket/path", false},
		{"s3 backup target without a bucket", SettingNameBackupTarget, "s3://us-east-1/path", false},
		{"no credential secret", SettingNameBackupTargetCredentialSecret, "", true},
		{"credential secret name", SettingNameBackupTargetCredentialSecret, "s3-secret", true},
		{"credential secret name must be a Secret name", SettingNameBackupTargetCredentialSecret, "S3 Secret", false},
		{"cleanup wait interval accepts a minute", SettingNameBackingImageCleanupWaitInterval, "1", true},
		{"cleanup wait interval refuses zero minutes", SettingNameBackingImageCleanupWaitInterval, "0", false},
		{"cleanup wait interval refuses more than 30 days", SettingNameBackingImageCleanupWaitInterval, "43201", false},
		{"poll interval 0 turns polling off", SettingNameBackupstorePollInterval, "0", true},
		{"poll interval in seconds", SettingNameBackupstorePollInterval, "300", true},
		{"poll interval refuses negatives", SettingNameBackupstorePollInterval, "-1", false},
		{"poll interval refuses a duration", SettingNameBackupstorePollInterval, "5m", false},
		{"unknown setting", SettingName("no-such-setting"), "x", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateSetting(c.setting, c.value)
			if c.ok && err != nil {
				t.Fatalf("want valid, got %v", err)
			}
			if !c.ok && err == nil {
				t.Fatalf("want an error for %q", c.value)
			}
		})
	}
}

func TestEveryDefaultIsValid(t *testing.T) {
	for _, name := range SettingNames() {
		def, _ := GetSettingDefinition(name)
		if err := ValidateSetting(name, def.Default); err != nil {
			t.Errorf("default of %s is invalid: %v", name, err)
		}
	}
}

// TestABadPollIntervalNamesTheSetting: the error says which setting and
// which rule.
func TestABadPollIntervalNamesTheSetting(t *testing.T) {
	for value, want := range map[string]string{
		"5m": `setting backupstore-poll-interval: value "5m" must be a whole number`,
		"-1": "setting backupstore-poll-interval: value -1 must be between 0 and 2147483647",
	} {
		if err := ValidateSetting(SettingNameBackupstorePollInterval, value); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", value, err, want)
		}
	}
}
