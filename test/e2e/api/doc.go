// Package api holds the end-to-end tests of the REST and websocket API on
// port 9500: authentication (Kubernetes tokens, the token-flood bounds),
// request limits, Longhorn's python client against /v1/schemas, and the
// internal calls' mutual TLS.
package api
