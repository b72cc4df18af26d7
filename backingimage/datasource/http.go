package datasource

import (
	"encoding/json"
	"net/http"
)

// apiError is the body of every error answer.
type apiError struct {
	Status  int    `json:"status"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, apiError{Status: code, Message: err.Error()})
}
