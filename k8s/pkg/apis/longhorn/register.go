// Package longhorn holds the API group name of Longhorn's custom resources.
package longhorn

// GroupName is the API group of every Longhorn custom resource.
const GroupName = "longhorn.io"
