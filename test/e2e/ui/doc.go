// Package ui holds the end-to-end tests of Longhorn's own web UI, built
// unmodified, in headless chromium against a real manager.
package ui
