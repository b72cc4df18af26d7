package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cadence-storage/longhorn-manager/internal/apiretry"
	"github.com/cadence-storage/longhorn-manager/manager"
)

// Resource is the envelope every object carries in Longhorn's /v1 API.
type Resource struct {
	ID      string            `json:"id"`
	Type    string            `json:"type"`
	Links   map[string]string `json:"links"`
	Actions map[string]string `json:"actions"`
}

// Collection is a list of resources of one type.
type Collection struct {
	Type         string            `json:"type"`
	ResourceType string            `json:"resourceType"`
	Links        map[string]string `json:"links"`
	Data         any               `json:"data"`
}

// Error is the body of every failed request.
type Error struct {
	Type    string `json:"type"`
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Detail  string `json:"detail,omitempty"`
}

// httpError is an error with the status and code the API answers with.
type httpError struct {
	status  int
	code    string
	message string
}

func (e *httpError) Error() string { return e.message }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, "InvalidInput", fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &httpError{http.StatusNotFound, "NotFound", fmt.Sprintf(format, args...)}
}

// writeError answers with the error's status: 4xx for what the caller
// did wrong (the message names the field and the rule), 503 with
// Retry-After for what passes by itself (a refusal of the apiserver that
// apiretry.Transient calls transient), 500 only for failures of the
// manager or the cluster.
func writeError(w http.ResponseWriter, err error) {
	status, code, msg := http.StatusInternalServerError, "ServerError", err.Error()
	var he *httpError
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &he):
		status, code = he.status, he.code
	case errors.As(err, &maxBytes):
		status, code = http.StatusRequestEntityTooLarge, "RequestTooLarge"
		msg = fmt.Sprintf("request body is larger than %d bytes", maxBytes.Limit)
	case errors.Is(err, manager.ErrNoCapacity):
		status, code = http.StatusBadRequest, "InsufficientCapacity"
		msg = strings.TrimPrefix(msg, manager.ErrNoCapacity.Error()+": "+manager.ErrInvalidInput.Error()+": ")
	case errors.Is(err, manager.ErrInvalidInput):
		status, code = http.StatusBadRequest, "InvalidInput"
		msg = strings.TrimPrefix(msg, manager.ErrInvalidInput.Error()+": ")
	case errors.Is(err, manager.ErrNotFound):
		status, code = http.StatusNotFound, "NotFound"
	case errors.Is(err, manager.ErrConflict):
		status, code = http.StatusConflict, "Conflict"
		msg = strings.TrimPrefix(msg, manager.ErrConflict.Error()+": ")
	case errors.Is(err, manager.ErrUnavailable):
		status, code = http.StatusServiceUnavailable, "Unavailable"
		msg = strings.TrimPrefix(msg, manager.ErrUnavailable.Error()+": ")
	case apiretry.IsTransient(err):
		// The apiserver refused for now (starting, restarting, shedding
		// load): the client may try again, after the delay the apiserver
		// asked for or a couple of seconds.
		status, code = http.StatusServiceUnavailable, "Unavailable"
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(apiretry.RetryAfter(err).Seconds()))))
	}
	writeJSON(w, status, Error{Type: "error", Status: status, Code: code, Message: truncateMessage(msg)})
}

// maxErrorMessage bounds an error's message: one that echoes a huge value
// of the request (a 1 MiB name) is cut, so refusing a request never costs
// more than reading it.
const maxErrorMessage = 4 << 10

func truncateMessage(msg string) string {
	if len(msg) <= maxErrorMessage {
		return msg
	}
	cut := maxErrorMessage
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d more bytes)", msg[:cut], len(msg)-cut)
}

// maxBodyBytes caps request bodies; maxBodyValues caps the objects, lists
// and list items or fields in one (a 1 MiB body of empty objects would
// otherwise decode into some 45 MB of structs).
const (
	maxBodyBytes  = 1 << 20
	maxBodyValues = 10000
)

// jsonValues counts the objects and lists in data and the items and
// fields after the first of each (each ',' and each '{' or '[' outside a
// string), without allocating: a bound on what decoding it would make.
func jsonValues(data []byte) int {
	n, inString, escaped := 0, false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[' || c == ',':
			n++
		}
	}
	return n
}

// decodeBody reads a JSON body into v, refusing other content types,
// malformed JSON, values of the wrong type for a known field, trailing
// data and bodies over 1 MiB. Fields the project has no concept of are
// accepted and ignored, as Longhorn's API does: its UI and clients send
// many (attacherType, staleReplicaTimeout, forceCreate, backupMode...).
// Keys match fields in any case, as Longhorn's clients send them (Name,
// Task).
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	if err := checkJSONContentType(r); err != nil {
		return err
	}
	return withBodyBudget(w, r, func() error {
		data, err := readBody(w, r)
		if err != nil {
			return err
		}
		return decodeJSON(data, v)
	})
}

// checkJSONContentType refuses a body typed other than JSON (none is
// taken for JSON).
func checkJSONContentType(r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &httpError{http.StatusUnsupportedMediaType, "UnsupportedMediaType", fmt.Sprintf("Content-Type %q is not supported; send application/json", ct)}
	}
	return nil
}

// readBody reads a request body of at most maxBodyBytes, into one buffer
// of its announced length when it announces one.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	buf := bytes.NewBuffer(nil)
	if r.ContentLength > 0 && r.ContentLength <= maxBodyBytes {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	data := buf.Bytes()
	var maxBytes *http.MaxBytesError
	if errors.As(err, &maxBytes) {
		return nil, err
	}
	if err != nil {
		return nil, badRequest("request body: %v", err)
	}
	return data, nil
}

// decodeJSON decodes one JSON object of a body into v, after counting its
// values (maxBodyValues).
func decodeJSON(data []byte, v any) error {
	if n := jsonValues(data); n > maxBodyValues {
		return &httpError{http.StatusRequestEntityTooLarge, "RequestEntityTooLarge",
			fmt.Sprintf("request body: more than %d JSON values (objects, lists and their items); no request of this API needs as many", maxBodyValues)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return badRequest("request body: unexpected data after the JSON object")
	}
	return nil
}

// jsonError turns a decoding error into a message that names the field.
func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &maxBytes):
		return err
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "request body"
		}
		return badRequest("%s: must be %s, got %s", field, jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return badRequest("request body: malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case errors.Is(err, io.EOF):
		return badRequest("request body: a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("request body: malformed JSON: unexpected end")
	}
	return badRequest("request body: %v", err)
}

func jsonTypeName(kind string) string {
	switch kind {
	case "int", "int32", "int64", "uint", "uint32", "uint64":
		return "a whole number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice":
		return "a list"
	case "map", "struct":
		return "an object"
	}
	return "a " + kind
}
