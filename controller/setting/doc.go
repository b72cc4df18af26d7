// Package setting holds the setting controller: it validates each Setting,
// applies the valid ones to the components that read them, and says on an
// invalid one which default is used instead.
package setting
